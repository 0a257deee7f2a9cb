//! The example of server/README.md, line for line (scripts/check-readme server/README.md):
//! an axum handler that honours the contract with the library's parts, driven here through
//! the router like a client would.

use std::sync::{Arc, Mutex};

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Request};
use axum::routing::post;
use axum::Router;
use rusqlite::Connection;
use tower::ServiceExt;

use sendonce_server::decision::Claim;
use sendonce_server::expiry::bucket_width_ms;
use sendonce_server::fingerprint::request_hash;
use sendonce_server::key;
use sendonce_server::store::sqlite::keys;
use sendonce_server::store::{DbError, NewKey};
use sendonce_server::{Answer, Instance, Problem};

const KEY_WINDOW_MS: i64 = 48 * 3_600_000;

struct Orders {
    db: Mutex<Connection>,
    instance: Instance,
}

/// `POST /v1/orders`: runs once per key; a retry gets the stored answer again.
async fn create_order(
    State(app): State<Arc<Orders>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Answer, Problem> {
    let user = "u1"; // your authentication decides the principal: keys are per principal
    let key = key::from_headers(&headers)?;
    let hash = request_hash("POST", "/v1/orders", &body);
    let lock = uuid::Uuid::new_v4().to_string();
    let now = 1_000; // your clock, in ms
    let mut db = app.db.lock().unwrap();
    let new = NewKey {
        user_id: user,
        key: &key,
        hash: &hash,
        lock_id: &lock,
        lease: app.instance.lease(),
        body: &body,
        now_ms: now,
        bucket_width_ms: bucket_width_ms(KEY_WINDOW_MS),
    };
    // (1) Claim: the primary key decides a race; a key already seen answers from its row
    // (the stored answer again, 409 while it runs, 422 for another body).
    if let Claim::Exists(seen) = keys::claim(&mut db, &new).map_err(Problem::internal)? {
        return Ok(seen.answer());
    }
    // (2) Your unit of work, fenced, in the one transaction that stores its answer.
    let run = |db: &mut Connection| -> Result<Answer, DbError> {
        let tx = db.transaction()?;
        if !keys::holds(&tx, user, &key, &lock)? {
            return Ok(Problem::key_in_use().into()); // lost the lock: its holder decides
        }
        tx.execute(
            "INSERT INTO orders (user_id, idem_key) VALUES (?1, ?2)",
            (user, &key),
        )?;
        let answer = format!("{{\"order\":{}}}", tx.last_insert_rowid()).into_bytes();
        keys::complete(&tx, user, &key, &lock, 201, &answer)?;
        tx.commit()?;
        Ok(Answer::committed(answer))
    };
    run(&mut db).or_else(|e| {
        // Nothing committed: free the key now, so the client's retry runs it again.
        keys::release(&db, user, &key, &lock).map_err(Problem::internal)?;
        Err(Problem::internal(e))
    })
}

fn orders_app() -> Router {
    let db = Connection::open_in_memory().unwrap();
    keys::create(&db).unwrap();
    db.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id TEXT, idem_key TEXT)")
        .unwrap();
    let state = Arc::new(Orders {
        db: Mutex::new(db),
        instance: Instance::new(),
    });
    Router::new()
        .route("/v1/orders", post(create_order))
        .with_state(state)
}

async fn send(app: &Router, key: Option<&str>, body: &'static str) -> (u16, bool, Vec<u8>) {
    let mut req = Request::post("/v1/orders");
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
    // No key, or a bad one: 400 before anything runs.
    assert_eq!(send(&app, None, "{}").await.0, 400);
    assert_eq!(send(&app, Some("a b"), "{}").await.0, 400);
    let second = send(&app, Some("k2"), "{\"item\":\"tea\"}").await;
    assert_eq!(second.2, b"{\"order\":2}");
}
