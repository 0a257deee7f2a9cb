//! The demo's data, not the service: customers with cards, a product, and the conformance
//! kit's fixtures for them (`--seed`).

use sendonce_server::params;
use sendonce_server::store::{sql::Sql, DbError};

/// Two customers with money, one without, and a product; returns the kit's fixtures JSON.
pub async fn seed<S: Sql>(db: &S) -> Result<String, DbError> {
    let mut tokens = Vec::new();
    for (name, balance) in [("a", 1_000_000i64), ("b", 1_000_000), ("broke", 0)] {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let user = format!("cus_{name}_{}", &token[..8]);
        let card = "INSERT INTO cards (user_id, token_hash, currency, balance_minor)
            VALUES ($1, $2, 'BDT', $3)";
        let hash = sendonce_server::engine::token_hash(&token);
        db.execute(card, params![user, hash, balance]).await?;
        tokens.push(token);
    }
    let sku = "INSERT INTO products (sku) VALUES ('sku_tea') ON CONFLICT DO NOTHING";
    db.execute(sku, vec![]).await?;
    let user =
        |t: &str| serde_json::json!({"token": t, "currency": "BDT", "allowance_minor": 1_000_000});
    let fixtures = serde_json::json!({"users": [user(&tokens[0]), user(&tokens[1])],
        "recipient_id": "sku_tea", "broke_token": tokens[2]});
    Ok(fixtures.to_string())
}
