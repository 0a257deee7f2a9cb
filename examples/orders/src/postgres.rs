//! The service's tables on PostgreSQL.

use sendonce_server::store::postgres::{work, PgKeys, Work};
use sendonce_server::store::{DbError, Fut};

use crate::shop::{Card, Order, Shop};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cards (user_id TEXT PRIMARY KEY, token_hash BYTEA UNIQUE NOT NULL,
    currency TEXT NOT NULL, balance_minor BIGINT NOT NULL CHECK (balance_minor >= 0));
CREATE TABLE IF NOT EXISTS products (sku TEXT PRIMARY KEY);
-- One order per key: the last guard, after the key row's window too.
CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, user_id TEXT NOT NULL,
    idem_key TEXT NOT NULL, sku TEXT NOT NULL, amount_minor BIGINT NOT NULL,
    auth_id TEXT NOT NULL, UNIQUE (user_id, idem_key));";

const CARD: &str = "SELECT user_id, currency, balance_minor FROM cards WHERE ";

fn card(r: Option<tokio_postgres::Row>) -> Option<Card> {
    r.map(|r| Card {
        user_id: r.get(0),
        currency: r.get(1),
        balance_minor: r.get(2),
    })
}

impl Shop for PgKeys {
    fn create_tables(&self) -> Fut<'_, ()> {
        Box::pin(async { Ok(self.pool().get().await?.batch_execute(SCHEMA).await?) })
    }
    fn card_by_token(&self, token_hash: Vec<u8>) -> Fut<'_, Option<Card>> {
        Box::pin(async move {
            let sql = format!("{CARD} token_hash = $1");
            Ok(card(
                self.pool()
                    .get()
                    .await?
                    .query_opt(&sql, &[&token_hash])
                    .await?,
            ))
        })
    }
    fn card_of(&self, user_id: String) -> Fut<'_, Option<Card>> {
        Box::pin(async move {
            let sql = format!("{CARD} user_id = $1");
            Ok(card(
                self.pool()
                    .get()
                    .await?
                    .query_opt(&sql, &[&user_id])
                    .await?,
            ))
        })
    }
    fn has_product(&self, sku: String) -> Fut<'_, bool> {
        Box::pin(async move {
            let c = self.pool().get().await?;
            Ok(
                c.query_opt("SELECT 1 FROM products WHERE sku = $1", &[&sku])
                    .await?
                    .is_some(),
            )
        })
    }
    fn add_customer(&self, card: Card, token_hash: Vec<u8>) -> Fut<'_, ()> {
        Box::pin(async move {
            let sql = "INSERT INTO cards (user_id, token_hash, currency, balance_minor) VALUES ($1, $2, $3, $4)";
            let c = self.pool().get().await?;
            c.execute(
                sql,
                &[
                    &card.user_id,
                    &token_hash,
                    &card.currency,
                    &card.balance_minor,
                ],
            )
            .await?;
            Ok(())
        })
    }
    fn add_product(&self, sku: String) -> Fut<'_, ()> {
        Box::pin(async move {
            let c = self.pool().get().await?;
            c.execute(
                "INSERT INTO products (sku) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&sku],
            )
            .await?;
            Ok(())
        })
    }
    fn charge(&self, o: Order) -> Work {
        work(move |tx| {
            let o = o.clone();
            Box::pin(async move {
                // FOR UPDATE: two orders of one customer decide on the balance one at a time.
                let sql = format!("{CARD} user_id = $1 FOR UPDATE");
                let balance =
                    card(tx.query_opt(&sql, &[&o.user_id]).await?).map_or(0, |c| c.balance_minor);
                if let Err(refused) = o.decide(balance) {
                    return Ok::<_, DbError>(refused);
                }
                let b = &o.body;
                tx.execute(
                    "UPDATE cards SET balance_minor = balance_minor - $2 WHERE user_id = $1",
                    &[&o.user_id, &b.amount_minor],
                )
                .await?;
                tx.execute(
                    "INSERT INTO orders (order_id, user_id, idem_key, sku, amount_minor, auth_id)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                    &[
                        &o.order_id,
                        &o.user_id,
                        &o.key,
                        &b.sku,
                        &b.amount_minor,
                        &o.authorization,
                    ],
                )
                .await?;
                Ok(o.placed())
            })
        })
    }
}
