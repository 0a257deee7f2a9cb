//! The PostgreSQL key table on its own, on a real cluster (`SENDONCE_TEST_POSTGRES`, set by
//! the `postgres` stage of scripts/test-all; without it these tests say so and pass): racing
//! claims across connections, the fingerprint on the claim path, the fence, release, and a
//! claim whose day has no partition yet.

use sendonce_server::decision::Claim;
use sendonce_server::fingerprint::request_hash;
use sendonce_server::store::postgres::{keys, schema};
use sendonce_server::Instance;

mod common;

use common::{new_key, status_of};

async fn pool() -> Option<deadpool_postgres::Pool> {
    let Ok(url) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("SENDONCE_TEST_POSTGRES unset: the PostgreSQL key-table tests did not run");
        return None;
    };
    let url = schema::fresh_database(&url, "lib")
        .await
        .expect("a fresh database");
    let mut config = deadpool_postgres::Config::new();
    config.url = Some(url);
    let pool = config
        .create_pool(
            Some(deadpool_postgres::Runtime::Tokio1),
            tokio_postgres::NoTls,
        )
        .expect("pool");
    schema::create(&pool.get().await.expect("a connection"))
        .await
        .expect("schema");
    Some(pool)
}

async fn claim(
    pool: &deadpool_postgres::Pool,
    who: &Instance,
    key: &str,
    body: &[u8],
    lock: &str,
    now: i64,
) -> Claim {
    let hash = request_hash("POST", "/v1/orders", body);
    keys::claim(pool, &new_key(who, key, &hash, body, lock, now))
        .await
        .expect("claim")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_claims_one_wins_and_the_fingerprint_decides_the_rest() {
    let Some(pool) = pool().await else { return };
    let who = Instance::new();
    // The day's partition does not exist yet: the first claim makes it.
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let (pool, who) = (pool.clone(), who.clone());
            tokio::spawn(async move {
                let body: &[u8] = if i % 2 == 0 {
                    b"{\"a\":1}"
                } else {
                    b"{\"a\":2}"
                };
                (
                    i,
                    claim(
                        &pool,
                        &who,
                        "race",
                        body,
                        &format!("lock{i}"),
                        5 * 86_400_000,
                    )
                    .await,
                )
            })
        })
        .collect();
    let mut results = Vec::new();
    for r in racers {
        results.push(r.await.unwrap());
    }
    let winners: Vec<_> = results
        .iter()
        .filter(|(_, c)| matches!(c, Claim::Acquired))
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(winners.len(), 1, "one claim wins: {results:?}");
    for (i, c) in results {
        if i != winners[0] {
            let expected = if i % 2 == winners[0] % 2 { 409 } else { 422 };
            assert_eq!(status_of(c), expected, "racer {i}");
        }
    }
}

#[tokio::test]
async fn the_fence_admits_only_the_holder_and_a_finished_key_replays() {
    let Some(pool) = pool().await else { return };
    let who = Instance::new();
    let now = 7 * 86_400_000;
    assert!(matches!(
        claim(&pool, &who, "k", b"{}", "mine", now).await,
        Claim::Acquired
    ));
    let c = pool.get().await.unwrap();
    assert!(keys::hold(&c, "u1", "k", "mine").await.unwrap());
    assert!(!keys::hold(&c, "u1", "k", "theirs").await.unwrap());
    keys::release(&c, "u1", "k", "mine").await.unwrap();
    assert!(
        !keys::hold(&c, "u1", "k", "mine").await.unwrap(),
        "released: fenced out"
    );
    assert!(matches!(
        claim(&pool, &who, "k", b"{}", "next", now).await,
        Claim::Acquired
    ));
    keys::complete(&c, "u1", "k", "next", 201, b"{\"id\":1}")
        .await
        .unwrap();
    match claim(&pool, &who, "k", b"{}", "late", now + 1).await {
        Claim::Exists(e) => {
            let a = e.answer();
            assert_eq!(
                (a.status, a.replayed, a.body.as_slice()),
                (201, true, &b"{\"id\":1}"[..])
            );
        }
        Claim::Acquired => panic!("a finished key was claimed again"),
    }
    assert_eq!(
        status_of(claim(&pool, &who, "k", b"{\"x\":1}", "late", now + 1).await),
        422
    );
    // Across midnight: the next day's partition, the same key — still the one row.
    assert_eq!(
        status_of(claim(&pool, &who, "k", b"{}", "late", now + 86_400_000).await),
        201
    );
}
