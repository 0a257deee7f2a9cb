//! What grows with every transfer stays flat under a long run (issue 29 item 10): published
//! outbox events, the consumers' inbox rows and SMS records go once past their retention,
//! and a replay of what is left still credits and texts nobody twice.
//!
//! Before the trim, every count below grew by one round's rows per round (8 rounds: 80
//! outbox rows, 160 inbox rows, 80 SMS against bounds of 10, 20 and 10).

use std::time::Duration;

use serde_json::json;
use server_mock::retention::Retention;

use crate::common::*;

const ROUNDS: usize = 8;
const PER_ROUND: usize = 10;

#[tokio::test]
async fn outbox_inbox_and_sms_stay_flat_over_many_rounds() {
    let s = start_with(|c| {
        c.retention = Retention {
            outbox: Duration::from_secs(1),
            inbox: Duration::from_secs(2),
            sms: Duration::from_secs(2),
        };
    })
    .await;
    let alice = s.user("alice", 1_000_000).await;
    let bob = s.user("bob", 0).await;
    let mut most = (0, 0, 0);
    for round in 0..ROUNDS {
        // Each round is 3 s after the last on the server's clock: its rows are past every
        // retention, and the new claims carry the time forward (a step alone does not).
        let r = s
            .post_json("/v1/test/clock", &json!({"advance_ms": 3_000}))
            .await;
        assert_eq!(r.status, 200);
        for i in 0..PER_ROUND {
            let key = format!("r{round}-{i}");
            let r = s
                .transfer(&alice.token, Some(&key), &transfer_body(&bob.id, 100))
                .await;
            assert_eq!(r.status, 201, "{:?}", r.json());
        }
        s.settle().await;
        let r = s.post_json("/v1/test/reap", &json!({})).await;
        assert_eq!(r.status, 200);
        let stats = s.get("/v1/test/stats", None).await.json();
        let n = |k: &str| stats[k].as_i64().unwrap();
        most = (
            most.0.max(n("outbox_rows")),
            most.1.max(n("inbox_rows")),
            most.2.max(n("sms_sent")),
        );
    }
    let round = PER_ROUND as i64;
    assert!(
        most.0 <= round && most.1 <= 2 * round && most.2 <= round,
        "outbox, inbox, SMS rows at most (one round's): {most:?}"
    );
    // The events still in the outbox are replayed: their inbox rows were kept, so nobody is
    // credited or texted twice.
    let r = s
        .post_json("/v1/test/outbox/replay", &json!({"from_event": 0}))
        .await;
    assert!(r.json()["republished"].as_i64().unwrap() >= 1);
    s.settle().await;
    let entries = s.ledger().await;
    let kind = |k: &str| entries.iter().filter(|e| e["kind"] == k).count();
    assert_eq!(kind("debit"), ROUNDS * PER_ROUND);
    assert_eq!(kind("credit"), ROUNDS * PER_ROUND, "no double credit");
    assert_eq!(s.balance(&bob).await, (ROUNDS * PER_ROUND * 100) as i64);
    let stats = s.get("/v1/test/stats", None).await.json();
    assert!(stats["sms_sent"].as_i64().unwrap() <= round, "no SMS again");
    s.stop().await;
}

#[tokio::test]
async fn an_inbox_window_shorter_than_the_outbox_retention_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = server_mock::ServerConfig {
        db: dir.path().join("mock.db").to_string_lossy().into_owned(),
        retention: Retention {
            outbox: Duration::from_secs(60),
            inbox: Duration::from_secs(30),
            sms: Duration::from_secs(60),
        },
        ..Default::default()
    };
    let err = server_mock::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("--inbox-window"), "{err}");
}
