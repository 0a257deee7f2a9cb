//! The order: what a valid one is, the simulated card, and the decision its unit of work
//! takes (the same on both stores, which only read and write their tables).

use std::time::Duration;

use axum::http::StatusCode;
use sendonce_server::store::{DbError, Fence, Fut, Keys};
use sendonce_server::{Operation, Outcome, Problem};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A customer's prepaid card, as `GET /v1/card` answers it.
#[derive(Debug, Clone, Serialize)]
pub struct Card {
    pub user_id: String,
    pub currency: String,
    pub balance_minor: i64,
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

/// A valid order of `user_id`, paid with the card authorisation `authorization`.
#[derive(Debug, Clone)]
pub struct Order {
    pub order_id: String,
    pub user_id: String,
    pub key: String,
    pub body: OrderBody,
    pub authorization: String,
}

/// What the service's tables must do, on each store.
pub trait Shop: Keys + Clone {
    fn create_tables(&self) -> Fut<'_, ()>;
    fn card_by_token(&self, token_hash: Vec<u8>) -> Fut<'_, Option<Card>>;
    fn card_of(&self, user_id: String) -> Fut<'_, Option<Card>>;
    fn has_product(&self, sku: String) -> Fut<'_, bool>;
    fn add_customer(&self, card: Card, token_hash: Vec<u8>) -> Fut<'_, ()>;
    fn add_product(&self, sku: String) -> Fut<'_, ()>;
    /// The unit of work: [`Order::decide`] on the card's balance, then the charge.
    fn charge(&self, order: Order) -> Self::Work;
}

impl Order {
    /// Charges the card if it covers the order, else the stored 402.
    pub fn decide(&self, balance: i64) -> Result<(), Outcome> {
        if balance >= self.body.amount_minor {
            return Ok(());
        }
        let detail = format!(
            "balance {balance} is less than amount {}",
            self.body.amount_minor
        );
        Err(Outcome::refused(&Problem::new(
            StatusCode::PAYMENT_REQUIRED,
            "insufficient_funds",
            detail,
        )))
    }

    /// The 201 and its event.
    pub fn placed(&self) -> Outcome {
        let body = serde_json::json!({"order_id": self.order_id, "sku": self.body.sku,
            "amount_minor": self.body.amount_minor, "currency": self.body.currency, "note": self.body.note,
            "authorization": self.authorization, "idempotency_key": self.key});
        let bytes = body.to_string().into_bytes();
        Outcome::created(bytes.clone()).with_event("order.placed", bytes)
    }
}

/// `POST /v1/orders` for the engine.
pub struct PlaceOrder<S> {
    pub shop: S,
    pub card_delay: Duration,
}

impl<S: Shop> Operation<S> for PlaceOrder<S> {
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
        let card = self
            .shop
            .card_of(user_id.to_string())
            .await
            .map_err(DbError::into_problem)?;
        if card.is_none_or(|c| c.currency != order.currency) {
            return Err(Problem::invalid("currency must be the card's"));
        }
        if !self
            .shop
            .has_product(order.sku.clone())
            .await
            .map_err(DbError::into_problem)?
        {
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
        Ok(format!(
            "auth_{}",
            hex(&token_hash(&format!("{}\u{1f}{}", fence.scope, fence.key))[..8])
        ))
    }

    fn work(&self, fence: &Fence, body: OrderBody, authorization: String) -> S::Work {
        let order_id = format!("ord_{}", uuid::Uuid::now_v7().simple());
        let (user_id, key) = (fence.scope.clone(), fence.key.clone());
        self.shop.charge(Order {
            order_id,
            user_id,
            key,
            body,
            authorization,
        })
    }
}

/// How a bearer token is stored (never the token itself).
pub fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Two customers with money, one without, and a product; returns the kit's fixtures JSON.
pub async fn seed<S: Shop>(shop: &S) -> Result<String, DbError> {
    let mut users = Vec::new();
    for (name, balance) in [("a", 1_000_000), ("b", 1_000_000), ("broke", 0)] {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let user_id = format!("cus_{name}_{}", &token[..8]);
        let card = Card {
            user_id,
            currency: "BDT".into(),
            balance_minor: balance,
        };
        shop.add_customer(card, token_hash(&token)).await?;
        users.push((token, balance));
    }
    shop.add_product("sku_tea".into()).await?;
    let user = |(t, b): &(String, i64)| serde_json::json!({"token": t, "currency": "BDT", "allowance_minor": b});
    let fixtures = serde_json::json!({"users": [user(&users[0]), user(&users[1])],
        "recipient_id": "sku_tea", "broke_token": users[2].0});
    Ok(fixtures.to_string())
}
