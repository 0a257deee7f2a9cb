//! The one-time migrations of databases made by older server-mocks, each in the schema's
//! transaction and idempotent: a database already migrated is left as it is.

use sendonce_server::store::postgres::{inbox as lib_inbox, outbox as lib_outbox};
use sendonce_server::store::DbError;

/// Moves the events and inbox records of a database made when server-mock had its own
/// `outbox` and `inbox` tables into the library's, keeping every event id (the inbox records
/// name them) and whether it was published, then drops the old tables — in the schema's
/// transaction, so a crash midway leaves the old tables whole for the next start.
pub(super) async fn outbox(tx: &deadpool_postgres::Transaction<'_>) -> Result<(), DbError> {
    let old = tx
        .query_one("SELECT to_regclass('outbox') IS NOT NULL", &[])
        .await?;
    if !old.get::<_, bool>(0) {
        return Ok(());
    }
    let events = tx
        .query(
            "SELECT event_id, kind, payload, created_at_ms, published FROM outbox ORDER BY event_id",
            &[],
        )
        .await?;
    let events: Vec<_> = events
        .iter()
        .map(|r| crate::outbox::imported(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    lib_outbox::import(tx, &events).await?;
    let records = tx
        .query("SELECT consumer, event_id, processed_at_ms FROM inbox", &[])
        .await?;
    for r in &records {
        lib_inbox::import(tx, r.get(0), r.get(1), r.get(2)).await?;
    }
    tx.batch_execute("DROP TABLE outbox; DROP TABLE inbox;")
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::*;

    /// A database from when server-mock kept its own `outbox` and `inbox`: opening it moves every
    /// event to the library's outbox under its id (published or not, as it was) and every inbox
    /// record with it, drops the old tables, and a new event never takes an old id.
    #[tokio::test]
    async fn a_database_with_the_old_outbox_keeps_its_events_and_their_inbox_records() {
        let Ok(url) = std::env::var("SENDONCE_TEST_POSTGRES") else {
            eprintln!("skipped: SENDONCE_TEST_POSTGRES is not set (scripts/pg start prints it)");
            return;
        };
        let url = fresh_database(&url, "m").await.expect("a fresh database");
        let old = pool(&url, 1).unwrap();
        let c = old.get().await.unwrap();
        c.batch_execute(
            "CREATE TABLE outbox (event_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                 kind TEXT NOT NULL, transfer_id TEXT NOT NULL, payload TEXT NOT NULL,
                 created_at_ms BIGINT NOT NULL, published BOOLEAN NOT NULL DEFAULT FALSE);
             CREATE TABLE inbox (consumer TEXT NOT NULL, event_id BIGINT NOT NULL,
                 processed_at_ms BIGINT NOT NULL, PRIMARY KEY (consumer, event_id));
             INSERT INTO outbox (kind, transfer_id, payload, created_at_ms, published) VALUES
                 ('TransferDone', 'tr_1', '{\"from_user_id\":\"u1\",\"idempotency_key\":\"k1\"}', 10, TRUE),
                 ('TransferDone', 'tr_2', '{\"from_user_id\":\"u1\",\"idempotency_key\":\"k2\"}', 20, FALSE);
             INSERT INTO inbox VALUES ('wallet_credit', 1, 5), ('sms', 1, 5);",
        )
        .await
        .unwrap();
        drop(c);
        let store = PgStore::open(
            &url,
            2,
            crate::config::DbTimeouts::default(),
            Instance::new(),
            Arc::default(),
        )
        .await
        .expect("open");
        let c = store.client().await.unwrap();
        let gone = opt(
            &c,
            "SELECT to_regclass('outbox') IS NULL AND to_regclass('inbox') IS NULL",
            &[],
        );
        assert!(
            gone.await.unwrap().unwrap().get::<_, bool>(0),
            "the old tables are gone"
        );
        assert_eq!(lib_outbox::counts(&c).await.unwrap(), (2, 1));
        assert_eq!(
            sendonce_server::store::postgres::inbox::count(&c)
                .await
                .unwrap(),
            2
        );
        let moved = rows(
            &c,
            "SELECT event_id, scope, idem_key, topic FROM sendonce_outbox ORDER BY event_id",
            &[],
        )
        .await
        .unwrap();
        let moved: Vec<(i64, String, String, String)> = moved
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        assert_eq!(
            moved[1],
            (2, "u1".into(), "k2".into(), "TransferDone".into())
        );
        let ev = sendonce_server::Event {
            topic: "t".into(),
            payload: b"{}".to_vec(),
        };
        sendonce_server::store::postgres::outbox::insert(&c, "u1", "k3", 30, &[ev])
            .await
            .unwrap();
        assert_eq!(lib_outbox::counts(&c).await.unwrap(), (3, 2));
        let newest = opt(&c, "SELECT MAX(event_id) FROM sendonce_outbox", &[])
            .await
            .unwrap();
        assert_eq!(
            newest.unwrap().get::<_, i64>(0),
            3,
            "the next id after the moved ones"
        );
    }
}
