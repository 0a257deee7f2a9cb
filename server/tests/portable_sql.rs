//! Application SQL written once (`store::sql`), run on both stores: `$n` parameters bound by
//! number even where `$2` comes first in the text, values and NULLs read back as written, a
//! unit of work through the engine that runs once per key, and the errors a misuse gets. On
//! SQLite always; on a fresh PostgreSQL database when `SENDONCE_TEST_POSTGRES` names a cluster.

use axum::http::{HeaderMap, HeaderValue};
use sendonce_server::params;
use sendonce_server::store::postgres::{schema, PgKeys};
use sendonce_server::store::sql::{Row, Sql, Value};
use sendonce_server::store::sqlite::SqliteKeys;
use sendonce_server::store::{DbError, Fence};
use sendonce_server::{Engine, Operation, Outcome, Problem, Request};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS things (id BIGINT PRIMARY KEY, name TEXT, data BYTEA, n BIGINT);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n BIGINT NOT NULL);";

/// Counts its runs in `counters`, read back inside the same transaction; `sleep` makes it await
/// something other than its transaction.
struct Count {
    sleep: bool,
}

impl<S: Sql> Operation<S> for Count {
    type Input = ();
    type Step = ();

    async fn validate(&self, _: &str, _: &[u8]) -> Result<(), Problem> {
        Ok(())
    }

    async fn step(&self, _: &Fence, _: &()) -> Result<(), Problem> {
        Ok(())
    }

    fn work(&self, _: &Fence, _: (), _: ()) -> S::Work {
        let sleep = self.sleep;
        S::work(move |tx| {
            Box::pin(async move {
                let up = "UPDATE counters SET n = n + $2 WHERE name = $1";
                assert_eq!(tx.execute(up, params!["runs", 1i64]).await?, 1);
                if sleep {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                let row = tx
                    .query_opt("SELECT n FROM counters WHERE name = $1", params!["runs"])
                    .await?;
                let n = row.map_or(Ok(0), |r| r.int(0))?;
                Ok(Outcome::created(format!("{{\"n\":{n}}}").into_bytes()))
            })
        })
    }
}

fn request(key: &str) -> Request {
    let mut headers = HeaderMap::new();
    headers.insert("idempotency-key", HeaderValue::from_str(key).unwrap());
    Request::new("u1", "POST", "/v1/count", &headers, b"{}".to_vec()).unwrap()
}

async fn runs<S: Sql>(db: &S) -> i64 {
    let row = db.query_opt("SELECT n FROM counters WHERE name = $1", params!["runs"]);
    row.await.unwrap().unwrap().int(0).unwrap()
}

/// Everything but the unit of work that awaits something else (SQLite's own rule).
async fn portable<S: Sql + Clone>(db: S) {
    db.batch(SCHEMA).await.unwrap();
    // `$2` first in the text: SQLite numbers named parameters by first appearance.
    let insert = "INSERT INTO things (name, id, data, n) VALUES ($2, $1, $3, $4)";
    let wrote = db.execute(
        insert,
        params![7i64, "seven", vec![0u8, 255, 1], None::<i64>],
    );
    assert_eq!(wrote.await.unwrap(), 1);
    let row = db.query_opt(
        "SELECT id, name, data, n FROM things WHERE id = $1",
        params![7i64],
    );
    let row = row.await.unwrap().unwrap();
    let want = [
        Value::Int(7),
        Value::Text("seven".into()),
        Value::Bytes(vec![0, 255, 1]),
        Value::Null,
    ];
    assert_eq!(row, Row(want.to_vec()));
    assert_eq!(
        (
            row.int(0).unwrap(),
            row.text(1).unwrap(),
            row.bytes(2).unwrap()
        ),
        (7, "seven".into(), vec![0, 255, 1])
    );
    assert!(
        matches!(row.int(1), Err(DbError::Sql(_))),
        "a text column read as an integer"
    );
    // `query_one`: the one row of an aggregate (a count is an integer on both stores), and an
    // error, not a panic, for a query that read none.
    let count = "SELECT (SELECT count(*) FROM things WHERE id = $1), (SELECT count(*) FROM things)";
    let one = db.query_one(count, params![8i64]).await.unwrap();
    assert_eq!((one.int(0).unwrap(), one.int(1).unwrap()), (0, 1));
    let nothing = db.query_one("SELECT id FROM things WHERE id = $1", params![8i64]);
    assert!(matches!(nothing.await, Err(DbError::Sql(_))));
    let none = db
        .query("SELECT id FROM things WHERE id = $1", params![8i64])
        .await
        .unwrap();
    assert!(none.is_empty());
    let wrong = db
        .execute("UPDATE things SET n = $1 WHERE id = $2", params![1i64])
        .await;
    assert!(
        matches!(wrong, Err(DbError::Sql(_))),
        "one parameter for two: {wrong:?}"
    );
    // The unit of work, through the engine: once per key, its answer replayed.
    db.execute(
        "INSERT INTO counters (name, n) VALUES ($1, 0) ON CONFLICT DO NOTHING",
        params!["runs"],
    )
    .await
    .unwrap();
    let engine = Engine::new(db.clone());
    let op = Count { sleep: false };
    for replayed in [false, true] {
        let answer = engine.run(&op, &request("k-1")).await;
        assert_eq!(
            (answer.status, answer.replayed, answer.body.as_slice()),
            (201, replayed, &b"{\"n\":1}"[..])
        );
    }
    assert_eq!(runs(&db).await, 1, "the work ran once");
}

#[tokio::test]
async fn sqlite_runs_the_portable_sql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let db = SqliteKeys::open(path.to_str().unwrap(), |_| Ok(())).unwrap();
    portable(db.clone()).await;
    // A unit of work that awaits anything but its transaction is refused, and nothing of it stays.
    let engine = Engine::new(db.clone());
    let answer = engine.run(&Count { sleep: true }, &request("k-2")).await;
    assert_eq!(
        answer.status,
        500,
        "{:?}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(
        runs(&db).await,
        1,
        "the refused unit of work's update was rolled back"
    );
    let retry = engine.run(&Count { sleep: false }, &request("k-2")).await;
    assert_eq!(
        (retry.status, retry.body.as_slice()),
        (201, &b"{\"n\":2}"[..]),
        "and its key was freed"
    );
}

#[tokio::test]
async fn postgres_runs_the_same_portable_sql() {
    let Ok(url) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("SENDONCE_TEST_POSTGRES unset: the PostgreSQL portable-SQL test did not run");
        return;
    };
    let url = schema::fresh_database(&url, "portable").await.unwrap();
    portable(PgKeys::connect(&url, 4).await.unwrap()).await;
}

/// The schema, and one request under `k-1` through the engine: 201.
async fn run_once<S: Sql + Clone>(db: S) {
    db.batch(SCHEMA).await.unwrap();
    let counter = "INSERT INTO counters (name, n) VALUES ($1, 0) ON CONFLICT DO NOTHING";
    db.execute(counter, params!["runs"]).await.unwrap();
    let engine = Engine::new(db);
    let answer = engine.run(&Count { sleep: false }, &request("k-1")).await;
    assert_eq!(answer.status, 201);
}

/// The key table's read-only helpers an application's own statements and test API use:
/// `keys::completed` (no row / held / answered) and `keys::counts` on SQLite, the same counts
/// on PostgreSQL when `SENDONCE_TEST_POSTGRES` names a cluster.
#[tokio::test]
async fn key_state_and_counts_read_what_the_engine_wrote() {
    use sendonce_server::store::sqlite::keys;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    let db = SqliteKeys::open(path.to_str().unwrap(), |_| Ok(())).unwrap();
    run_once(db).await;
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(keys::completed(&conn, "u1", "k-1").unwrap(), Some(true));
    assert_eq!(keys::completed(&conn, "u1", "nothing").unwrap(), None);
    conn.execute(
        "UPDATE idempotency_keys SET state = 'in_progress' WHERE idem_key = 'k-1'",
        [],
    )
    .unwrap();
    assert_eq!(keys::completed(&conn, "u1", "k-1").unwrap(), Some(false));
    assert_eq!(keys::counts(&conn).unwrap(), (1, 1));
    let Ok(url) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        return;
    };
    let url = schema::fresh_database(&url, "kc").await.unwrap();
    let pg = PgKeys::connect(&url, 2).await.unwrap();
    run_once(pg.clone()).await;
    let client = pg.pool().get().await.unwrap();
    let counts = sendonce_server::store::postgres::keys::counts(&client).await;
    assert_eq!(counts.unwrap(), (1, 0));
}

/// `engine::TokenTable`: a token is found by its SHA-256 in the application's own table, on
/// both stores; an unknown token is nobody (401 upstream), never an error.
#[tokio::test]
async fn a_token_table_finds_the_principal_by_the_token_hash() {
    use sendonce_server::engine::{token_hash, Authenticate, TokenTable};
    async fn check<S: Sql + Clone>(db: S) {
        db.batch("CREATE TABLE IF NOT EXISTS api_keys (owner TEXT NOT NULL, hash BYTEA NOT NULL)")
            .await
            .unwrap();
        let insert = "INSERT INTO api_keys (owner, hash) VALUES ($1, $2)";
        db.execute(insert, params!["alice", token_hash("s3cret")])
            .await
            .unwrap();
        let tokens = TokenTable::new(db, "SELECT owner FROM api_keys WHERE hash = $1");
        assert_eq!(
            tokens.principal("s3cret").await.unwrap(),
            Some("alice".into())
        );
        assert_eq!(tokens.principal("s3cret ").await.unwrap(), None);
        assert_eq!(tokens.principal("").await.unwrap(), None);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    check(SqliteKeys::open(path.to_str().unwrap(), |_| Ok(())).unwrap()).await;
    if let Ok(url) = std::env::var("SENDONCE_TEST_POSTGRES") {
        let url = schema::fresh_database(&url, "tok").await.unwrap();
        check(PgKeys::connect(&url, 2).await.unwrap()).await;
    }
}
