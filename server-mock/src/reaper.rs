//! The reaper: the library's ([`sendonce_server::Engine::reap`]) over server-mock's store,
//! asking the transfer operation about each stuck key (`transfer::Transfer::recover`: the
//! ledger, then the gateway's record); and the retention trim of server-mock's own rows.

use std::time::Duration;

use tokio::sync::watch;

use crate::app::App;
use crate::retention::{Trimmed, TRIM_CHUNK};
use crate::transfer::Transfer;
use sendonce_server::store::DbError;

/// How often the reaper looks: a quarter of the lock timeout, between 20 ms and 1 s.
pub use sendonce_server::engine::reaper_interval as interval;
/// What one reaper pass did (the engine's count: keys completed from a ledger debit,
/// finished from an authorisation, released, held, and key rows expired).
pub use sendonce_server::engine::Pass;

/// How often rows past their retention are trimmed: retention is days, so a minute late
/// changes nothing, and the trim's few statements stay off the requests' path.
const TRIM_EVERY: Duration = Duration::from_secs(60);
/// Most chunks per trim, so a backlog (a first start after an upgrade) is worked off over
/// several rounds rather than in one long one.
const TRIM_MAX_CHUNKS: usize = 64;

/// Runs until shutdown.
pub async fn run(app: App, mut shutdown: watch::Receiver<bool>) {
    let every = interval(app.config.lock_timeout);
    let mut trimmed_at: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = app.reaper_wake.notified() => {}
            _ = tokio::time::sleep(every) => {}
        }
        match pass(&app).await {
            Ok(p) if p != Pass::default() => tracing::info!(?p, "reaper pass"),
            Ok(_) => {}
            Err(e) => tracing::warn!(%e, "reaper pass failed"),
        }
        if trimmed_at.is_none_or(|t| t.elapsed() >= TRIM_EVERY) {
            trimmed_at = Some(tokio::time::Instant::now());
            match trim(&app).await {
                Ok(t) if t.total() > 0 => tracing::info!(?t, "rows past their retention trimmed"),
                Ok(_) => {}
                Err(e) => tracing::warn!(%e, "retention trim failed"),
            }
        }
    }
}

/// Removes rows past their retention (`crate::retention`), a chunk at a time, by the same
/// step-proof time as key expiry; nothing before the first claim gives that time.
pub async fn trim(app: &App) -> Result<Trimmed, DbError> {
    let mut total = Trimmed::default();
    let Some(now) = app.expiry_now() else {
        return Ok(total);
    };
    let cut = app.config.retention.cutoffs(now);
    for _ in 0..TRIM_MAX_CHUNKS {
        let t = app.store().trim(cut).await?;
        total.outbox += t.outbox;
        total.inbox += t.inbox;
        total.sms += t.sms;
        let chunk = usize::try_from(TRIM_CHUNK).unwrap_or(usize::MAX);
        if t.outbox < chunk && t.inbox < chunk && t.sms < chunk {
            break;
        }
    }
    Ok(total)
}

/// One pass of the engine's reaper: every key whose lease ran out is resolved as the
/// transfer operation answers (the lease in monotonic time, never the wall clock: each
/// store says how it judges another process's locks); then whole expired buckets go (and
/// the gateway's records after the same window), by a time a wall-clock step alone cannot
/// move (`AppState::expiry_now`).
pub async fn pass(app: &App) -> Result<Pass, DbError> {
    let reaper = Transfer::reaper(app.clone());
    let p = app.engine.reap(&reaper, app.config.lock_timeout).await?;
    if p.finished > 0 {
        app.relay_wake.notify_one();
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    use rusqlite::params;
    use sendonce_server::store::sqlite::{keys, Db, Durability};

    /// Key rows removed per expiry transaction (as the SQLite store does).
    const EXPIRE_CHUNK: usize = 1_000;

    /// A key row `IN_PROGRESS` under `instance`'s lock, with a body of 7 to u2.
    fn stuck_key(c: &rusqlite::Connection, key: &str, instance: &str, mono: i64) {
        c.execute(
            "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state, lock_id,
                 locked_at_ms, created_at_ms, bucket, lock_instance, lock_mono_ms, request_body)
             VALUES ('u1', ?1, x'00', 'in_progress', 'dead', 0, 0, 0, ?2, ?3,
                     CAST('{\"to_user_id\":\"u2\",\"amount_minor\":7,\"currency\":\"BDT\"}' AS BLOB))",
            params![key, instance, mono],
        )
        .unwrap();
    }

    /// The engine's reaper over server-mock's store, asking `Transfer::recover`: the ledger
    /// first (a debit under the key completes it from that debit, byte-identical), then the
    /// gateway (an authorisation finishes it from the stored body), else a release.
    #[tokio::test]
    async fn ledger_then_gateway_decide_and_only_expired_leases_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reaper.db").to_string_lossy().into_owned();
        let record = crate::ledger::TransferRecord {
            transfer_id: "tr_1".into(),
            from_user_id: "u1".into(),
            to_user_id: "u2".into(),
            amount_minor: 10,
            currency: "BDT".into(),
            note: None,
            created_at_ms: 1_000,
            idempotency_key: "moved".into(),
        };
        let expected = record.to_json();
        let db = Db::open(&path, crate::schema::create).unwrap();
        db.call(move |c| {
            crate::ledger::deposit(c, "u1", 100, "BDT", 0)?;
            stuck_key(c, "moved", "me", 1_000);
            stuck_key(c, "nothing", "me", 1_000);
            stuck_key(c, "authorised", "gone", 50_000);
            stuck_key(c, "fresh", "me", 50_000);
            crate::ledger::insert_debit(c, &record, b"\0")?;
            c.execute(
                "INSERT INTO gateway_authorizations
                     (user_id, idem_key, authorization_id, calls, created_at_ms)
                 VALUES ('u1', 'authorised', 'auth_1', 1, 0)",
                [],
            )?;
            // As process "me" judges them with its lease cut-off at monotonic 10 000: another
            // process's lock at once, its own only when taken before the cut-off.
            let mut names: Vec<_> = keys::stuck(c, "me", 10_000)?
                .into_iter()
                .map(|s| s.fence.key)
                .collect();
            names.sort();
            assert_eq!(
                names,
                ["authorised", "moved", "nothing"],
                "fresh lease kept"
            );
            Ok(())
        })
        .await
        .unwrap();
        drop(db);

        // A new process on the file: every lock is another process's, so all four are stuck.
        let config = crate::config::ServerConfig {
            db: path,
            simulated_start_ms: Some(2_000),
            ..Default::default()
        };
        let app = crate::app::AppState::open(config).await.unwrap();
        // A request's commit fails under this fault; the reaper's never does (it plays a
        // request's failed commit: `Reap::commit_stuck` is the reaper's own).
        let always: crate::faults::FaultPatch =
            serde_json::from_value(serde_json::json!({"fail_commit_rate": 1.0})).unwrap();
        app.faults.apply(always).unwrap();
        let p = pass(&app).await.unwrap();
        assert_eq!(
            (p.completed, p.finished, p.released, p.held),
            (1, 1, 2, 0),
            "moved: completed; authorised: finished; nothing, fresh: released"
        );
        let row = |key: &str| app.store().key_row("u1".into(), key.into());
        let moved = row("moved").await.unwrap().expect("moved's row");
        assert_eq!((moved.completed, moved.status), (true, Some(201)));
        assert_eq!(
            moved.body,
            Some(expected),
            "rebuilt from the ledger, byte-identical"
        );
        for released in ["nothing", "fresh"] {
            let row = row(released).await.unwrap();
            assert!(
                row.is_none(),
                "{released}: released so a retry executes once"
            );
        }
        let authorised = row("authorised").await.unwrap().expect("authorised's row");
        assert_eq!((authorised.completed, authorised.status), (true, Some(201)));
        let debit = app.store().lookup("u1".into(), "authorised".into()).await;
        let debit = debit.unwrap().expect("a debit under the key");
        assert_eq!(debit.amount_minor, 7, "finished from the stored body");
    }

    #[tokio::test]
    async fn expiry_in_chunks_removes_exactly_the_expired_buckets() {
        let db = Db::open(":memory:", crate::schema::create).unwrap();
        let window = 2_000; // bucket width 2 s
        db.call(|c| {
            let tx = c.transaction()?;
            for i in 0..2_500 {
                // Buckets 0 and 1 expire at now = 6_000 (first kept bucket: 2); 2 stays.
                let bucket = if i < 2_490 { i % 2 } else { 2 };
                tx.execute(
                    "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state,
                         lock_id, locked_at_ms, created_at_ms, bucket)
                     VALUES ('u1', ?1, x'00', 'completed', 'l', ?2, ?2, ?3)",
                    params![format!("k{i}"), bucket * 2_000 + i, bucket],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
        .unwrap();
        let mut chunks = Vec::new();
        loop {
            let n = db
                .write(Durability::Full, move |c| {
                    keys::expire_chunk(c, 6_000, window, EXPIRE_CHUNK)
                })
                .await
                .unwrap();
            chunks.push(n);
            if n < EXPIRE_CHUNK {
                break;
            }
        }
        assert_eq!(chunks, vec![1_000, 1_000, 490]);
        let left: Vec<i64> = db
            .call(|c| {
                let mut st = c.prepare("SELECT bucket FROM idempotency_keys")?;
                let rows = st.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
            .unwrap();
        assert_eq!(left, vec![2; 10], "only the kept bucket remains");
    }

    #[test]
    fn interval_is_bounded() {
        assert_eq!(interval(Duration::from_secs(60)), Duration::from_secs(1));
        assert_eq!(interval(Duration::from_secs(1)), Duration::from_millis(250));
        assert_eq!(
            interval(Duration::from_millis(10)),
            Duration::from_millis(20)
        );
    }
}
