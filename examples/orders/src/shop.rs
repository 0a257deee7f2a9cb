//! The order: its tables, what a valid one is, the simulated card and the unit of work — each
//! written once, for SQLite and PostgreSQL alike (`sendonce_server::store::sql`).

use std::time::Duration;

use axum::http::StatusCode;
use sendonce_server::params;
use sendonce_server::store::sql::{Row, Sql, Tx, Value};
use sendonce_server::store::{DbError, Fence};
use sendonce_server::{Operation, Outcome, Problem};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The service's own tables (the key table and the outbox are the library's).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cards (user_id TEXT PRIMARY KEY, token_hash BYTEA UNIQUE NOT NULL,
    currency TEXT NOT NULL, balance_minor BIGINT NOT NULL CHECK (balance_minor >= 0));
CREATE TABLE IF NOT EXISTS products (sku TEXT PRIMARY KEY);
-- One order per key: the last guard, after the key row's window too.
CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, user_id TEXT NOT NULL,
    idem_key TEXT NOT NULL, sku TEXT NOT NULL, amount_minor BIGINT NOT NULL,
    auth_id TEXT NOT NULL, UNIQUE (user_id, idem_key));";

/// A customer's prepaid card, as `GET /v1/card` answers it.
#[derive(Debug, Clone, Serialize)]
pub struct Card {
    pub user_id: String,
    pub currency: String,
    pub balance_minor: i64,
}

impl Card {
    /// The card whose `column` (`user_id`, or `token_hash`: a bearer token's) is `value`.
    pub async fn find<S: Sql>(db: &S, column: &str, value: Value) -> Result<Option<Card>, DbError> {
        let sql = format!("SELECT user_id, currency, balance_minor FROM cards WHERE {column} = $1");
        let row = db.query_opt(&sql, vec![value]).await?;
        row.map(|r: Row| {
            Ok(Card {
                user_id: r.text(0)?,
                currency: r.text(1)?,
                balance_minor: r.int(2)?,
            })
        })
        .transpose()
    }
}

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
        let order: OrderBody =
            serde_json::from_slice(body).map_err(|e| Problem::invalid(e.to_string()))?;
        if !(1..=1_000_000_000).contains(&order.amount_minor) || order.note.chars().count() > 140 {
            return Err(Problem::invalid(
                "amount_minor must be 1..=1e9, note at most 140 characters",
            ));
        }
        let card = Card::find(&self.db, "user_id", user_id.into()).await;
        if card
            .map_err(DbError::into_problem)?
            .is_none_or(|c| c.currency != order.currency)
        {
            return Err(Problem::invalid("currency must be the card's"));
        }
        let sku = self
            .db
            .query_opt("SELECT 1 FROM products WHERE sku = $1", params![&order.sku]);
        if sku.await.map_err(DbError::into_problem)?.is_none() {
            return Err(Problem::new(
                StatusCode::NOT_FOUND,
                "sku_not_found",
                "no such product",
            ));
        }
        Ok(order)
    }

    /// The simulated card: authorises after `card_delay`, the same id for the same key.
    async fn step(&self, fence: &Fence, _: &OrderBody) -> Result<String, Problem> {
        tokio::time::sleep(self.card_delay).await;
        let id = token_hash(&format!("{}\u{1f}{}", fence.scope, fence.key));
        Ok(format!(
            "auth_{}",
            id[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ))
    }

    fn work(&self, fence: &Fence, body: OrderBody, auth: String) -> S::Work {
        let order = Order {
            order_id: format!("ord_{}", uuid::Uuid::now_v7().simple()),
            user: fence.scope.clone(),
            key: fence.key.clone(),
            body,
            auth,
        };
        S::work(move |tx| {
            let order = order.clone();
            Box::pin(async move { order.charge(tx).await })
        })
    }
}

/// A valid order of `user` under `key`, authorised by the card as `auth`.
#[derive(Clone)]
struct Order {
    order_id: String,
    user: String,
    key: String,
    body: OrderBody,
    auth: String,
}

impl Order {
    /// The unit of work: the card is debited only if it covers the order (one conditional
    /// write: two orders can never both spend the same money), then the order is stored.
    async fn charge(self, tx: Tx<'_>) -> Result<Outcome, DbError> {
        let (user, amount) = (&self.user, self.body.amount_minor);
        let debit = "UPDATE cards SET balance_minor = balance_minor - $2 WHERE user_id = $1 AND balance_minor >= $2";
        if tx.execute(debit, params![user, amount]).await? == 0 {
            let balance = "SELECT balance_minor FROM cards WHERE user_id = $1";
            let balance = tx.query_opt(balance, params![user]).await?;
            let detail = format!(
                "balance {} is less than amount {amount}",
                balance.map_or(Ok(0), |r| r.int(0))?
            );
            let problem = Problem::new(StatusCode::PAYMENT_REQUIRED, "insufficient_funds", detail);
            return Ok(Outcome::refused(&problem));
        }
        let insert = "INSERT INTO orders (order_id, user_id, idem_key, sku, amount_minor, auth_id) VALUES ($1, $2, $3, $4, $5, $6)";
        let (o, b) = (&self, &self.body);
        tx.execute(
            insert,
            params![&o.order_id, user, &o.key, &b.sku, amount, &o.auth],
        )
        .await?;
        let body = serde_json::json!({"order_id": o.order_id, "sku": b.sku, "amount_minor": amount,
            "currency": b.currency, "note": b.note, "authorization": o.auth, "idempotency_key": o.key});
        let bytes = body.to_string().into_bytes();
        Ok(Outcome::created(bytes.clone()).with_event("order.placed", bytes))
    }
}

/// How a bearer token is stored (never the token itself).
pub fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Two customers with money, one without, and a product; returns the kit's fixtures JSON.
pub async fn seed<S: Sql>(db: &S) -> Result<String, DbError> {
    let mut tokens = Vec::new();
    for (name, balance) in [("a", 1_000_000i64), ("b", 1_000_000), ("broke", 0)] {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let sql = "INSERT INTO cards (user_id, token_hash, currency, balance_minor) VALUES ($1, $2, 'BDT', $3)";
        db.execute(
            sql,
            params![
                format!("cus_{name}_{}", &token[..8]),
                token_hash(&token),
                balance
            ],
        )
        .await?;
        tokens.push(token);
    }
    db.execute(
        "INSERT INTO products (sku) VALUES ($1) ON CONFLICT DO NOTHING",
        params!["sku_tea"],
    )
    .await?;
    let user = |t: &String| serde_json::json!({"token": t, "currency": "BDT", "allowance_minor": 1_000_000});
    let fixtures = serde_json::json!({"users": [user(&tokens[0]), user(&tokens[1])],
        "recipient_id": "sku_tea", "broke_token": tokens[2]});
    Ok(fixtures.to_string())
}
