//! The order: its tables, who may order, what a valid order is, the simulated card and the
//! unit of work — each written once, for SQLite and PostgreSQL alike
//! (`sendonce_server::store::sql`). The demo's data: `demo.rs`.

use std::time::Duration;

use sendonce_server::prelude::*;
use serde::Deserialize;

/// The service's own tables (the key table and the outbox are the library's).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cards (user_id TEXT PRIMARY KEY, token_hash BYTEA UNIQUE NOT NULL,
    currency TEXT NOT NULL, balance_minor BIGINT NOT NULL CHECK (balance_minor >= 0));
CREATE TABLE IF NOT EXISTS products (sku TEXT PRIMARY KEY);
-- One order per key: the last guard, after the key row's window too.
CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, user_id TEXT NOT NULL,
    idem_key TEXT NOT NULL, sku TEXT NOT NULL, amount_minor BIGINT NOT NULL,
    auth_id TEXT NOT NULL, UNIQUE (user_id, idem_key));";

/// An order as the client sends it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderBody {
    pub sku: String,
    pub amount_minor: i64,
    pub currency: String,
    #[serde(default)]
    pub note: String,
}

/// `POST /v1/orders` for the engine, on the store `S`.
pub struct PlaceOrder<S> {
    pub db: S,
    pub card_delay: Duration,
}

impl<S: Sql> Operation<S> for PlaceOrder<S> {
    type Input = OrderBody;
    type Step = String;

    async fn validate(&self, user_id: &str, body: &[u8]) -> Result<OrderBody, Problem> {
        let order: OrderBody = Problem::parse_json(body)?;
        if !(1..=1_000_000_000).contains(&order.amount_minor) {
            return Err(Problem::invalid("amount_minor must be 1..=1000000000"));
        } else if order.note.chars().count() > 140 {
            return Err(Problem::invalid("note must be at most 140 characters"));
        }
        // The card's currency and the product, in one read.
        let found = "SELECT (SELECT count(*) FROM cards WHERE user_id = $1 AND currency = $2),
            (SELECT count(*) FROM products WHERE sku = $3)";
        let args = params![user_id, &order.currency, &order.sku];
        let row = self.db.query_one(found, args).await?;
        if row.int(0)? == 0 {
            Err(Problem::invalid("currency must be the card's"))
        } else if row.int(1)? == 0 {
            let missing = Problem::new(StatusCode::NOT_FOUND, "sku_not_found", "no such product");
            Err(missing)
        } else {
            Ok(order)
        }
    }

    /// The simulated card: authorises after `card_delay`, the same id for the same key.
    async fn step(&self, fence: &Fence, _: &OrderBody) -> Result<String, Problem> {
        tokio::time::sleep(self.card_delay).await;
        let name = format!("{}\u{1f}{}", fence.scope, fence.key);
        let id = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes());
        Ok(format!("auth_{}", id.simple()))
    }

    fn work(&self, fence: &Fence, body: OrderBody, auth: String) -> S::Work {
        let id = format!("ord_{}", uuid::Uuid::now_v7().simple());
        let order = (fence.clone(), id, body, auth);
        S::work(move |tx| Box::pin(charge(tx, order.clone())))
    }
}

/// The unit of work: the card is debited only if it covers the order (one conditional write:
/// two orders can never both spend the same money), then the order is stored under its key.
async fn charge(tx: Tx<'_>, order: (Fence, String, OrderBody, String)) -> Result<Outcome, DbError> {
    let (f, id, b, auth) = order;
    let debit = "UPDATE cards SET balance_minor = balance_minor - $2
        WHERE user_id = $1 AND balance_minor >= $2";
    if tx.execute(debit, params![&f.scope, b.amount_minor]).await? == 0 {
        let detail = format!("the card does not cover {}", b.amount_minor);
        let refusal = Problem::new(StatusCode::PAYMENT_REQUIRED, "insufficient_funds", detail);
        return Ok(Outcome::refused(&refusal));
    }
    let insert = "INSERT INTO orders (order_id, user_id, idem_key, sku, amount_minor, auth_id)
        VALUES ($1, $2, $3, $4, $5, $6)";
    let row = params![&id, &f.scope, &f.key, &b.sku, b.amount_minor, &auth];
    tx.execute(insert, row).await?;
    let body = serde_json::json!({"order_id": id, "sku": b.sku, "amount_minor": b.amount_minor,
        "currency": b.currency, "note": b.note, "authorization": auth, "idempotency_key": f.key});
    let bytes = body.to_string().into_bytes();
    Ok(Outcome::created(bytes.clone()).with_event("order.placed", bytes))
}
