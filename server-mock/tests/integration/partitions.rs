//! Key expiry by dropping day partitions (PostgreSQL only): after a simulated week the key
//! table holds only the window's partitions, no key row was ever deleted one by one, and
//! a key reused after its partition was dropped still cannot debit twice.

use serde_json::json;

use crate::common::*;

const DAY_MS: i64 = 86_400_000;

async fn sql_count(url: &str, sql: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(conn);
    let n: i64 = client.query_one(sql, &[]).await.expect(sql).get(0);
    drop(client);
    let _ = task.await;
    n
}

#[tokio::test]
async fn a_week_of_keys_expires_by_partition_drop_and_an_old_key_still_debits_once() {
    if postgres().is_none() {
        eprintln!("skipped: SENDONCE_TEST_POSTGRES is not set (scripts/pg start prints it)");
        return;
    }
    let s = start_default().await; // 48 h window: one partition per day
    let db = s.server.app().config.db.clone();
    let (a, b) = (s.user("A", 1_000_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 100);
    let first = s.transfer(&a.token, Some("day-0"), &body).await;
    assert_eq!(first.status, 201);
    for day in 1..=7 {
        s.post_json("/v1/test/clock", &json!({"advance_ms": DAY_MS}))
            .await;
        let r = s
            .transfer(&a.token, Some(&format!("day-{day}")), &body)
            .await;
        assert_eq!(r.status, 201, "day {day}");
        let reaped = s.post_json("/v1/test/reap", &json!({})).await;
        assert_eq!(reaped.status, 200);
    }
    let parts = "SELECT COUNT(*) FROM pg_inherits WHERE inhparent = 'idempotency_keys'::regclass";
    // The window (2 days) + today + a week ahead, whatever the number of days gone by.
    let flat = sql_count(&db, parts).await;
    assert!(flat <= 11, "{flat} partitions after a week");
    let keys = s.get("/v1/test/stats", None).await.json()["idempotency_keys"]
        .as_i64()
        .unwrap();
    assert!(keys <= 3, "{keys} key rows kept of 8");
    let deleted = sql_count(
        &db,
        "SELECT COALESCE(SUM(n_tup_del), 0)::BIGINT FROM pg_stat_user_tables
         WHERE relname LIKE 'idempotency_keys%'",
    )
    .await;
    assert_eq!(deleted, 0, "expiry never deletes key rows one by one");

    // day-0's partition is gone: the same request claims afresh and the ledger answers.
    let again = s.transfer(&a.token, Some("day-0"), &body).await;
    assert_eq!(again.status, 201);
    assert_eq!(
        again.body, first.body,
        "the original transfer, byte for byte"
    );
    let other = s
        .transfer(&a.token, Some("day-0"), &transfer_body(&b.id, 999))
        .await;
    assert_eq!(other.code(), "idempotency_key_reused");
    assert_eq!(
        s.debits_for(&a, "day-0").await,
        1,
        "one debit for the old key"
    );
    assert_eq!(s.balance(&a).await, 1_000_000 - 8 * 100);
    s.stop().await;
}
