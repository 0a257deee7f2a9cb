//! The service's tables on SQLite.

use rusqlite::{Connection, OptionalExtension};
use sendonce_server::store::sqlite::{SqliteKeys, Work};
use sendonce_server::store::{DbError, Fut};

use crate::shop::{Card, Order, Shop};

/// The service's own tables (the key table and the outbox are the library's).
pub fn schema(c: &Connection) -> Result<(), DbError> {
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS cards (user_id TEXT PRIMARY KEY, token_hash BLOB UNIQUE NOT NULL,
             currency TEXT NOT NULL, balance_minor INTEGER NOT NULL CHECK (balance_minor >= 0));
         CREATE TABLE IF NOT EXISTS products (sku TEXT PRIMARY KEY);
         -- One order per key: the last guard, after the key row's window too.
         CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, user_id TEXT NOT NULL,
             idem_key TEXT NOT NULL, sku TEXT NOT NULL, amount_minor INTEGER NOT NULL,
             auth_id TEXT NOT NULL, UNIQUE (user_id, idem_key));",
    )?;
    Ok(())
}

fn card(c: &Connection, col: &str, v: &dyn rusqlite::ToSql) -> Result<Option<Card>, DbError> {
    let sql = format!("SELECT user_id, currency, balance_minor FROM cards WHERE {col} = ?1");
    let row = c.query_row(&sql, [v], |r| {
        Ok(Card {
            user_id: r.get(0)?,
            currency: r.get(1)?,
            balance_minor: r.get(2)?,
        })
    });
    Ok(row.optional()?)
}

impl Shop for SqliteKeys {
    fn create_tables(&self) -> Fut<'_, ()> {
        Box::pin(async { Ok(()) }) // made by `schema` when the file opened
    }
    fn card_by_token(&self, token_hash: Vec<u8>) -> Fut<'_, Option<Card>> {
        Box::pin(self.db().read(move |c| card(c, "token_hash", &token_hash)))
    }
    fn card_of(&self, user_id: String) -> Fut<'_, Option<Card>> {
        Box::pin(self.db().read(move |c| card(c, "user_id", &user_id)))
    }
    fn has_product(&self, sku: String) -> Fut<'_, bool> {
        Box::pin(self.db().read(move |c| {
            Ok(
                c.query_row("SELECT 1 FROM products WHERE sku = ?1", [&sku], |_| Ok(()))
                    .optional()?
                    .is_some(),
            )
        }))
    }
    fn add_customer(&self, card: Card, token_hash: Vec<u8>) -> Fut<'_, ()> {
        Box::pin(self.db().call(move |c| {
            let sql = "INSERT INTO cards (user_id, token_hash, currency, balance_minor) VALUES (?1, ?2, ?3, ?4)";
            c.execute(sql, (&card.user_id, &token_hash, &card.currency, card.balance_minor))?;
            Ok(())
        }))
    }
    fn add_product(&self, sku: String) -> Fut<'_, ()> {
        Box::pin(self.db().call(move |c| {
            c.execute("INSERT OR IGNORE INTO products (sku) VALUES (?1)", [&sku])?;
            Ok(())
        }))
    }
    fn charge(&self, o: Order) -> Work {
        Box::new(move |tx| {
            let balance = card(tx, "user_id", &o.user_id)?.map_or(0, |c| c.balance_minor);
            if let Err(refused) = o.decide(balance) {
                return Ok(refused);
            }
            let b = &o.body;
            tx.execute(
                "UPDATE cards SET balance_minor = balance_minor - ?2 WHERE user_id = ?1",
                (&o.user_id, b.amount_minor),
            )?;
            tx.execute(
                "INSERT INTO orders (order_id, user_id, idem_key, sku, amount_minor, auth_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                (
                    &o.order_id,
                    &o.user_id,
                    &o.key,
                    &b.sku,
                    b.amount_minor,
                    &o.authorization,
                ),
            )?;
            Ok(o.placed())
        })
    }
}
