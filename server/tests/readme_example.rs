//! The example of server/README.md, line for line (scripts/check-readme server/README.md):
//! an operation on the engine and the axum handler that runs it, driven here through the
//! router like a client would.

use std::sync::Arc;

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Request as HttpRequest};
use axum::routing::post;
use axum::Router;
use rusqlite::Connection;
use tower::ServiceExt;

use sendonce_server::store::sqlite::{SqliteKeys, Work};
use sendonce_server::store::{DbError, Fence};
use sendonce_server::{Answer, Engine, Operation, Outcome, Problem, Request};

/// `POST /v1/orders`: validation, an optional external step, and the unit of work.
struct PlaceOrder;

impl Operation<SqliteKeys> for PlaceOrder {
    type Input = String; // the item ordered
    type Step = (); // no external step here (a card authorisation would be one)

    async fn validate(&self, _user: &str, body: &[u8]) -> Result<String, Problem> {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| Problem::invalid(e.to_string()))?;
        let item = v["item"]
            .as_str()
            .ok_or_else(|| Problem::invalid("item is required"))?;
        Ok(item.to_string())
    }

    async fn step(&self, _: &Fence, _: &String) -> Result<(), Problem> {
        Ok(())
    }

    fn work(&self, fence: &Fence, item: String, _: ()) -> Work {
        let (user, key) = (fence.scope.clone(), fence.key.clone());
        // Runs only while the key is ours, in the transaction that stores its answer.
        Box::new(move |tx| {
            tx.execute(
                "INSERT INTO orders (user_id, idem_key, item) VALUES (?1, ?2, ?3)",
                (&user, &key, &item),
            )?;
            let body = format!("{{\"order\":{}}}", tx.last_insert_rowid()).into_bytes();
            Ok(Outcome::created(body.clone()).with_event("order.placed", body))
        })
    }
}

struct App {
    engine: Arc<Engine<SqliteKeys>>,
    place_order: Arc<PlaceOrder>,
}

async fn create_order(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Answer, Problem> {
    let user = "u1"; // your authentication decides the principal: keys are per principal
    let request = Request::new(user, "POST", "/v1/orders", &headers, body)?;
    Ok(app.engine.run_detached(&app.place_order, request).await)
}

fn schema(c: &Connection) -> Result<(), DbError> {
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, user_id TEXT NOT NULL,
             idem_key TEXT NOT NULL, item TEXT NOT NULL, UNIQUE (user_id, idem_key))",
    )?;
    Ok(())
}

fn orders_app() -> Router {
    let store = SqliteKeys::open(":memory:", schema).unwrap();
    let app = App {
        engine: Arc::new(Engine::new(store)),
        place_order: Arc::new(PlaceOrder),
    };
    Router::new()
        .route("/v1/orders", post(create_order))
        .with_state(Arc::new(app))
}

async fn send(app: &Router, key: Option<&str>, body: &'static str) -> (u16, bool, Vec<u8>) {
    let mut req = HttpRequest::post("/v1/orders");
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let res = app
        .clone()
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let replayed = res.headers().get("idempotent-replayed").is_some();
    let status = res.status().as_u16();
    let bytes = to_bytes(res.into_body(), 1 << 16).await.unwrap().to_vec();
    (status, replayed, bytes)
}

#[tokio::test]
async fn the_readme_example_honours_the_contract() {
    let app = orders_app();
    let first = send(&app, Some("k1"), "{\"item\":\"tea\"}").await;
    assert_eq!((first.0, first.1), (201, false));
    // The retry: the stored answer, byte for byte, marked replayed; no second order.
    let again = send(&app, Some("k1"), "{\"item\":\"tea\"}").await;
    assert_eq!((again.0, again.1, &again.2), (201, true, &first.2));
    // Another body under the same key: 422, nothing stored.
    assert_eq!(send(&app, Some("k1"), "{\"item\":\"cake\"}").await.0, 422);
    // No key, or a bad one: 400 before anything runs; a refused body is not stored.
    assert_eq!(send(&app, None, "{}").await.0, 400);
    assert_eq!(send(&app, Some("a b"), "{}").await.0, 400);
    assert_eq!(send(&app, Some("k2"), "{}").await.0, 400);
    let second = send(&app, Some("k2"), "{\"item\":\"tea\"}").await;
    assert_eq!(
        (second.0, second.2.as_slice()),
        (201, &b"{\"order\":2}"[..])
    );
}
