//! The reaper: resolves keys stuck `IN_PROGRESS` and expires old key buckets.

use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::watch;

use crate::retention::{Trimmed, TRIM_CHUNK};
use crate::{gateway, ledger, transfer, App};
use sendonce_server::store::sqlite::keys;
use sendonce_server::store::DbError;

/// What one reaper pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Stuck keys completed from a ledger debit (money had moved).
    pub completed: usize,
    /// Stuck keys the gateway had authorised but no debit followed (the holder died or
    /// stalled between the phases): finished here, through the same fenced commit.
    pub finished: usize,
    /// Stuck keys released (no money moved, nothing authorised): a retry will execute once.
    pub released: usize,
    /// Key rows removed by bucket expiry.
    pub expired: usize,
}

/// How often the reaper looks: a quarter of the lock timeout, between 20 ms and 1 s.
pub fn interval(lock_timeout: Duration) -> Duration {
    (lock_timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

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
        let t = app.store.trim(cut).await?;
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

/// One pass: resolve every key whose lease ran out, then expire old buckets.
pub async fn pass(app: &App) -> Result<Pass, DbError> {
    let mut p = Pass::default();
    // The lease is measured in monotonic time, never the wall clock (each store says how
    // it judges another process's locks).
    let timeout_ms = i64::try_from(app.config.lock_timeout.as_millis()).unwrap_or(i64::MAX);
    let stuck = app.store.stuck_keys(timeout_ms).await?;
    let rules = app.rules(transfer::Authorised::Yes);
    for key in stuck {
        let now = app.clock.now_ms();
        let (user, k) = (key.user.clone(), key.key.clone());
        // One key that cannot be resolved now (its rows locked by a stalled session past
        // the store's lock wait) must not hold up the others: the next pass tries it again.
        match app.store.resolve(key, now, rules).await {
            Ok(Resolved::Completed) => p.completed += 1,
            Ok(Resolved::Finished) => p.finished += 1,
            Ok(Resolved::Released) => p.released += 1,
            Ok(Resolved::Moved) => {}
            Err(e) => tracing::warn!(%e, user, key = k, "stuck key not resolved this pass"),
        }
    }
    if p.finished > 0 {
        app.relay_wake.notify_one();
    }
    // Whole expired buckets (and the gateway's records after the same window), by a time
    // a wall-clock step alone cannot move (`AppState::expiry_now`).
    if let Some(now) = app.expiry_now() {
        p.expired = app.store.expire(now, app.key_window_ms()).await?;
    }
    Ok(p)
}

/// A key whose lease ran out.
#[derive(Debug, Clone)]
pub struct Stuck {
    /// Owner of the key.
    pub user: String,
    /// The key.
    pub key: String,
    /// The lock it is held under.
    pub lock_id: String,
    /// Stored request fingerprint.
    pub hash: Vec<u8>,
    /// Stored request body (finishes an authorised transfer).
    pub body: Option<Vec<u8>>,
}

impl From<sendonce_server::store::Stuck> for Stuck {
    fn from(s: sendonce_server::store::Stuck) -> Self {
        Self {
            user: s.fence.scope,
            key: s.fence.key,
            lock_id: s.fence.lock_id,
            hash: s.hash,
            // A key claimed before the body column existed has none (read back as empty).
            body: (!s.body.is_empty()).then_some(s.body),
        }
    }
}

/// What the reaper did with one stuck key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// Money had moved: completed from the ledger debit.
    Completed,
    /// Authorised but not debited: finished through the fenced commit.
    Finished,
    /// Neither: released, so a retry executes once.
    Released,
    /// Its holder finished (or lost) it meanwhile: nothing to do.
    Moved,
}

/// Resolves one stuck key in one transaction: the ledger says whether money moved, the
/// gateway whether it was authorised; only a key with neither is released.
pub(crate) fn resolve(
    conn: &mut Connection,
    s: &Stuck,
    now_ms: i64,
    rules: transfer::Rules,
) -> Result<Resolved, DbError> {
    if !keys::holds(conn, &s.user, &s.key, &s.lock_id)? {
        return Ok(Resolved::Moved);
    }
    if let Some((record, stored_hash)) = ledger::debit_by_key(conn, &s.user, &s.key)? {
        // The debit answers only the request it was made for (the guard of
        // `store::sqlite::commit::commit_transfer`): a key reused with another body after its row expired
        // is released, and its retry gets 422 from that guard instead of a replay of money
        // moved for another body.
        // Either way, an authorisation this holder took after that debit is not used.
        if stored_hash != s.hash {
            keys::release(conn, &s.user, &s.key, &s.lock_id)?;
            gateway::settle(conn, &s.user, &s.key, now_ms, gateway::Settle::UnlessHeld)?;
            return Ok(Resolved::Released);
        }
        keys::complete(conn, &s.user, &s.key, &s.lock_id, 201, &record.to_json())?;
        gateway::settle(conn, &s.user, &s.key, now_ms, gateway::Settle::UnlessHeld)?;
        return Ok(Resolved::Completed);
    }
    let record = s
        .body
        .as_deref()
        .and_then(|b| transfer::record_from_body(&s.user, &s.key, b, now_ms));
    match (gateway::lookup(conn, &s.user, &s.key)?, record) {
        // Authorised: finish it as its holder would have, so the key is never released
        // into a second authorisation. The holder, if still alive, is fenced out.
        (Some(_), Some(record)) => {
            crate::store::sqlite::commit::commit_transfer(
                conn, &record, &s.hash, &s.lock_id, rules,
            )?;
            Ok(Resolved::Finished)
        }
        _ => {
            keys::release(conn, &s.user, &s.key, &s.lock_id)?;
            Ok(Resolved::Released)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ledger::TransferRecord;
    use rusqlite::params;
    use sendonce_server::store::sqlite::{Db, Durability};

    /// Key rows removed per expiry transaction (as the SQLite store does).
    const EXPIRE_CHUNK: usize = 1_000;

    fn stuck_key(c: &Connection, key: &str, instance: &str, mono: i64) {
        c.execute(
            "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state, lock_id,
                 locked_at_ms, created_at_ms, bucket, lock_instance, lock_mono_ms, request_body)
             VALUES ('u1', ?1, x'00', 'in_progress', 'dead', 0, 0, 0, ?2, ?3,
                     CAST('{\"to_user_id\":\"u2\",\"amount_minor\":7,\"currency\":\"BDT\"}' AS BLOB))",
            params![key, instance, mono],
        )
        .unwrap();
    }

    #[tokio::test]
    async fn ledger_then_gateway_decide_and_only_expired_leases_count() {
        let rules = transfer::Rules {
            fenced: true,
            authorised: transfer::Authorised::Yes,
            max_balance: i64::MAX / 2,
        };
        let db = Db::open(":memory:", crate::schema::create).unwrap();
        let record = TransferRecord {
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
        let outcomes = db
            .call(move |c| {
                ledger::deposit(c, "u1", 100, "BDT", 0)?;
                stuck_key(c, "moved", "me", 1_000);
                stuck_key(c, "nothing", "me", 1_000);
                stuck_key(c, "authorised", "gone", 50_000);
                stuck_key(c, "fresh", "me", 50_000);
                ledger::insert_debit(c, &record, b"\0")?;
                c.execute(
                    "INSERT INTO gateway_authorizations
                         (user_id, idem_key, authorization_id, calls, created_at_ms)
                     VALUES ('u1', 'authorised', 'auth_1', 1, 0)",
                    [],
                )?;
                let stuck: Vec<Stuck> = keys::stuck(c, "me", 10_000)?
                    .into_iter()
                    .map(Stuck::from)
                    .collect();
                let mut names: Vec<_> = stuck.iter().map(|s| s.key.clone()).collect();
                names.sort();
                assert_eq!(
                    names,
                    ["authorised", "moved", "nothing"],
                    "fresh lease kept"
                );
                stuck
                    .iter()
                    .map(|s| Ok((s.key.clone(), resolve(c, s, 2_000, rules)?)))
                    .collect::<Result<Vec<_>, DbError>>()
            })
            .await
            .unwrap();
        for (key, outcome) in outcomes {
            let want = match key.as_str() {
                "moved" => Resolved::Completed,
                "authorised" => Resolved::Finished,
                _ => Resolved::Released,
            };
            assert_eq!(outcome, want, "{key}");
        }
        let (moved, nothing, authorised, debit) = db
            .call(|c| {
                Ok((
                    keys::read(c, "u1", "moved")?,
                    keys::read(c, "u1", "nothing")?,
                    keys::read(c, "u1", "authorised")?,
                    ledger::debit_by_key(c, "u1", "authorised")?,
                ))
            })
            .await
            .unwrap();
        let moved = moved.unwrap();
        assert!(moved.completed);
        assert_eq!(moved.status, Some(201));
        assert_eq!(
            moved.body,
            Some(expected),
            "rebuilt from the ledger, byte-identical"
        );
        assert!(nothing.is_none(), "released so a retry executes once");
        let authorised = authorised.unwrap();
        assert_eq!((authorised.completed, authorised.status), (true, Some(201)));
        assert_eq!(
            debit.unwrap().0.amount_minor,
            7,
            "finished from the stored body"
        );
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
