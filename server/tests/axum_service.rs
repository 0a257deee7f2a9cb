//! A service wired with the library's pieces: the bearer layer, one idempotent resource as
//! one route (`Engine::endpoint`), the background tasks (`Engine::spawn_background`) with a
//! plain function as the relay's publisher — driven through the router as a client would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use axum::middleware;
use axum::Router;
use rusqlite::Connection;
use tower::ServiceExt;

use sendonce_server::engine::{bearer, Authenticate, LogPublisher, Publish};
use sendonce_server::store::sqlite::{SqliteKeys, Work};
use sendonce_server::store::{DbError, Fence};
use sendonce_server::{Engine, Event, Operation, Outcome, Problem};

/// Records the body under the key; no external step.
struct Note;

impl Operation<SqliteKeys> for Note {
    type Input = Vec<u8>;
    type Step = ();

    async fn validate(&self, _: &str, body: &[u8]) -> Result<Vec<u8>, Problem> {
        if body.is_empty() {
            return Err(Problem::invalid("empty"));
        }
        Ok(body.to_vec())
    }

    async fn step(&self, _: &Fence, _: &Vec<u8>) -> Result<(), Problem> {
        Ok(())
    }

    fn work(&self, fence: &Fence, body: Vec<u8>, _: ()) -> Work {
        let key = fence.key.clone();
        Box::new(move |tx| {
            tx.execute(
                "INSERT INTO notes (idem_key, body) VALUES (?1, ?2)",
                (&key, &body),
            )?;
            let answer = format!("{{\"note\":{}}}", tx.last_insert_rowid()).into_bytes();
            Ok(Outcome::created(answer.clone()).with_event("note.written", answer))
        })
    }
}

/// Tokens `t-<user>` belong to `<user>`; `down` is a credential store that fails.
#[derive(Clone)]
struct Tokens;

impl Authenticate for Tokens {
    async fn principal(&self, token: &str) -> Result<Option<String>, Problem> {
        if token == "down" {
            return Err(DbError::Busy.into_problem());
        }
        Ok(token.strip_prefix("t-").map(str::to_string))
    }
}

fn engine() -> Arc<Engine<SqliteKeys>> {
    let schema = |c: &Connection| -> Result<(), DbError> {
        c.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, idem_key TEXT NOT NULL, body BLOB NOT NULL)")?;
        Ok(())
    };
    Arc::new(Engine::new(SqliteKeys::open(":memory:", schema).unwrap()))
}

fn router(engine: &Arc<Engine<SqliteKeys>>) -> Router {
    let not_found = Problem::new(
        StatusCode::NOT_FOUND,
        "note_not_found",
        "no note under this key",
    );
    Router::new()
        .route("/notes", engine.endpoint(&Arc::new(Note), not_found))
        .layer(middleware::from_fn_with_state(Tokens, bearer::<Tokens>))
}

/// One call: status, `Idempotent-Replayed`, body.
async fn call(app: &Router, req: Request<Body>) -> (StatusCode, bool, String) {
    let res = app.clone().oneshot(req).await.unwrap();
    let replayed = res.headers().get("idempotent-replayed").is_some();
    let status = res.status();
    let body = to_bytes(res.into_body(), 1 << 16).await.unwrap();
    (
        status,
        replayed,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn post(token: Option<&str>, key: &str, body: &str) -> Request<Body> {
    let mut req = Request::post("/notes").header("idempotency-key", key);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    req.body(Body::from(body.to_string())).unwrap()
}

fn get(token: &str, key: &str) -> Request<Body> {
    Request::get(format!("/notes?idempotency_key={key}"))
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn the_bearer_layer_answers_before_any_handler() {
    let app = router(&engine());
    for token in [None, Some("nobody")] {
        let (status, _, body) = call(&app, post(token, "k1", "hi")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}: {body}");
        assert!(body.contains("unauthenticated"), "{body}");
    }
    let (status, _, body) = call(&app, post(Some("down"), "k1", "hi")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, _, _) = call(&app, get("nobody", "k1")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // None of them claimed the key: the first authenticated request runs.
    let (status, replayed, _) = call(&app, post(Some("t-ann"), "k1", "hi")).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, false));
}

#[tokio::test]
async fn the_endpoint_runs_once_replays_and_answers_the_look_up() {
    let app = router(&engine());
    let (status, replayed, first) = call(&app, post(Some("t-ann"), "k1", "hi")).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, false), "{first}");
    let (status, replayed, again) = call(&app, post(Some("t-ann"), "k1", "hi")).await;
    assert_eq!(
        (status, replayed, &again),
        (StatusCode::CREATED, true, &first)
    );
    let (status, _, body) = call(&app, post(Some("t-ann"), "k1", "other")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // The look-up: the success as 200 with the same bytes; keys are per principal.
    let (status, _, looked) = call(&app, get("t-ann", "k1")).await;
    assert_eq!((status, &looked), (StatusCode::OK, &first));
    let (status, _, body) = call(&app, get("t-bob", "k1")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("note_not_found"), "{body}");
    // That 404 stays true: bob's late request under k1 replays it instead of running.
    let (status, replayed, _) = call(&app, post(Some("t-bob"), "k1", "hi")).await;
    assert_eq!((status, replayed), (StatusCode::NOT_FOUND, true));
}

#[tokio::test]
async fn a_function_publishes_until_its_first_failure() {
    let event = |n: u8| Event {
        topic: "t".into(),
        payload: vec![n],
    };
    let fail_on = |bad: u8| {
        move |_: i64, e: &Event| {
            if e.payload[0] == bad {
                Err("down".to_string())
            } else {
                Ok(())
            }
        }
    };
    let events = vec![(1, event(1)), (2, event(2)), (3, event(3))];
    assert_eq!(fail_on(0).publish(events.clone()).await, Ok(vec![1, 2, 3]));
    assert_eq!(fail_on(2).publish(events.clone()).await, Ok(vec![1]));
    assert_eq!(fail_on(1).publish(events).await, Err("down".to_string()));
}

#[tokio::test]
async fn the_log_publisher_acknowledges_every_event() {
    let event = |n: u8| Event {
        topic: "t".into(),
        payload: vec![n],
    };
    let events = vec![(7, event(1)), (9, event(2))];
    assert_eq!(LogPublisher.publish(events).await, Ok(vec![7, 9]));
    assert_eq!(LogPublisher.publish(Vec::new()).await, Ok(vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_background_relays_each_event_and_stops_with_its_handle() {
    let engine = engine();
    let app = router(&engine);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let publisher = move |id: i64, e: &Event| -> Result<(), String> {
        sink.lock().unwrap().push((id, e.topic.clone()));
        Ok(())
    };
    let background = engine.spawn_background(&Arc::new(Note), publisher, Duration::from_secs(5));
    for key in ["a", "b"] {
        let (status, _, _) = call(&app, post(Some("t-ann"), key, "hi")).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    // Bounded wait (the relay's idle is 200 ms): both events, once each, in order.
    for _ in 0..100 {
        if seen.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let topics: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, t)| t.clone())
        .collect();
    assert_eq!(topics, ["note.written", "note.written"]);
    // Dropping the handle aborts both tasks: the relay's publisher (holding `seen`) is dropped.
    drop(background);
    for _ in 0..100 {
        if Arc::strong_count(&seen) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(Arc::strong_count(&seen), 1, "the relay task still runs");
}
