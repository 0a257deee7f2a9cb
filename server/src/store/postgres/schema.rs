//! The PostgreSQL tables of the contract: the key table partitioned by day (expiry drops a
//! partition), its claim as one function, and the instances' heartbeats. An application
//! creates them with its own tables, in one transaction under its schema lock.

use deadpool_postgres::GenericClient;

use crate::store::DbError;

/// The contract's tables, functions and indexes (idempotent DDL).
pub const TABLES: &str = r#"
-- Partitioned by expiry bucket (a day): expiry drops a whole partition, never deletes
-- rows. PostgreSQL's unique constraints hold within a partition only, so the primary key
-- carries the bucket; claims serialise per key across partitions with an advisory lock
-- (see keys.rs), and the ledger's one-debit-per-key index is the last guard after expiry.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    user_id         TEXT NOT NULL,
    idem_key        TEXT NOT NULL,
    request_hash    BYTEA NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),
    lock_id         TEXT NOT NULL,
    locked_at_ms    BIGINT NOT NULL,
    -- The lease: the holder's instance id and its monotonic time when it took the lock
    -- (judged against that instance's heartbeat, see lease.rs).
    lock_instance   TEXT NOT NULL DEFAULT '',
    lock_mono_ms    BIGINT NOT NULL DEFAULT 0,
    request_body    BYTEA,
    created_at_ms   BIGINT NOT NULL,
    bucket          BIGINT NOT NULL,
    response_status INTEGER,
    response_body   BYTEA,
    PRIMARY KEY (user_id, idem_key, bucket)
) PARTITION BY RANGE (bucket);
-- The rows still in progress: the reaper reads them all, and the fence, the completion
-- and the release find theirs by key and lock id. (An earlier index on lock_instance
-- alone matched those statements' `state = 'in_progress'` too, and the planner chose it:
-- each fence then walked the index's every entry, dead ones included — O(rows since the
-- last vacuum) per request.)
DROP INDEX IF EXISTS idempotency_keys_in_progress;
CREATE INDEX IF NOT EXISTS idempotency_keys_in_progress_by_key
    ON idempotency_keys (user_id, idem_key, lock_id) WHERE state = 'in_progress';

-- The contract's claim (also the bench floor's, floor.rs): the key lock serialises one
-- (user, key) across day partitions; in a volatile function each statement then takes a
-- fresh snapshot, so the NOT EXISTS sees every claim committed before the lock was granted.
-- No ON CONFLICT: every claim holds the lock, so none can race this insert — one that
-- bypassed it fails with 23505, which keys.rs reads as a taken key. A claim moves no money,
-- so its commit need not wait for the disk (`SET LOCAL`: until the caller's implicit commit).
CREATE OR REPLACE FUNCTION sendonce_claim_key(
    p_user TEXT, p_key TEXT, p_hash BYTEA, p_lock TEXT, p_now BIGINT, p_bucket BIGINT,
    p_instance TEXT, p_mono BIGINT, p_body BYTEA) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true),
            pg_advisory_xact_lock(hashtextextended(p_user || chr(31) || p_key, 0));
    INSERT INTO idempotency_keys
        (user_id, idem_key, request_hash, state, lock_id, locked_at_ms, created_at_ms,
         bucket, lock_instance, lock_mono_ms, request_body)
    SELECT p_user, p_key, p_hash, 'in_progress', p_lock, p_now, p_now, p_bucket, p_instance,
           p_mono, p_body
    WHERE NOT EXISTS
        (SELECT 1 FROM idempotency_keys k WHERE k.user_id = p_user AND k.idem_key = p_key);
    RETURN FOUND;
END $$;

-- Every live server process bumps its row with its own monotonic milliseconds.
CREATE TABLE IF NOT EXISTS server_instances (
    instance_id TEXT PRIMARY KEY,
    mono_ms     BIGINT NOT NULL
);
-- Each instance's wall clock at its last heartbeat: key expiry goes by the earliest of
-- the instances' (heartbeat.rs), so one clock stepped forward expires nothing early.
ALTER TABLE server_instances ADD COLUMN IF NOT EXISTS wall_ms BIGINT;
"#;

/// Creates [`TABLES`] on `c` (inside the caller's transaction, if it has one).
pub async fn create<C: GenericClient>(c: &C) -> Result<(), DbError> {
    c.batch_execute(TABLES).await?;
    Ok(())
}

/// Creates a new, empty database `{prefix}_{random}` on the cluster `url` and returns its
/// URL (the same cluster, the new database): tests, rides and benchmarks each start from one.
pub async fn fresh_database(url: &str, prefix: &str) -> Result<String, DbError> {
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(DbError::Task(format!("bad database prefix {prefix:?}")));
    }
    let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let task = tokio::spawn(conn);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await?;
    drop(client);
    let _ = task.await;
    // The key-value `dbname` overrides the URL's own (also for a unix-socket host).
    let sep = if url.contains('?') { '&' } else { '?' };
    Ok(format!("{url}{sep}dbname={name}"))
}
