//! server-mock's PostgreSQL tables: the SQLite schema's twins. The key table (partitioned by
//! day) and the instances' heartbeats are sendonce-server's, created first in the same
//! transaction.

use sendonce_server::store::postgres::schema as keys_schema;
use sendonce_server::store::postgres::{inbox, outbox};
use sendonce_server::store::DbError;

/// Advisory lock id that serialises schema creation between instances starting at once
/// (`CREATE ... IF NOT EXISTS` is not safe against a concurrent twin).
const SCHEMA_LOCK: i64 = 0x5345_4e44_0001;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS users (
    user_id             TEXT PRIMARY KEY,
    token               TEXT NOT NULL UNIQUE,
    display_name        TEXT NOT NULL,
    currency            TEXT NOT NULL,
    created_at_ms       BIGINT NOT NULL,
    token_expires_at_ms BIGINT
);

-- Phase 1 in one statement (keys.rs `claim`; `sendonce_claim_key` is sendonce-server's):
-- the claim's transaction is this call's. The
-- sender's balance comes back with it: the advisory pre-check, read after the claim in the
-- same visit.
CREATE OR REPLACE FUNCTION sendonce_claim(
    p_user TEXT, p_key TEXT, p_hash BYTEA, p_lock TEXT, p_now BIGINT, p_bucket BIGINT,
    p_instance TEXT, p_mono BIGINT, p_body BYTEA, OUT claimed BOOLEAN, OUT balance BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    claimed := sendonce_claim_key(p_user, p_key, p_hash, p_lock, p_now, p_bucket, p_instance,
                                  p_mono, p_body);
    IF claimed THEN
        SELECT b.balance_minor INTO balance FROM balances b WHERE b.user_id = p_user;
    END IF;
    balance := COALESCE(balance, 0);
END $$;

CREATE TABLE IF NOT EXISTS gateway_authorizations (
    user_id          TEXT NOT NULL,
    idem_key         TEXT NOT NULL,
    authorization_id TEXT NOT NULL,
    calls            BIGINT NOT NULL,
    created_at_ms    BIGINT NOT NULL,
    -- Set by the debit's statement (commit.rs): the funds it held moved.
    captured_at_ms   BIGINT,
    PRIMARY KEY (user_id, idem_key)
);
CREATE INDEX IF NOT EXISTS gateway_authorizations_age ON gateway_authorizations (created_at_ms);

-- Authorisations voided (the key's outcome did not use them), moved out of
-- gateway_authorizations by the transaction that decided it, once each (keys.rs `settle`).
CREATE TABLE IF NOT EXISTS gateway_voids (
    authorization_id TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL,
    idem_key         TEXT NOT NULL,
    calls            BIGINT NOT NULL,
    created_at_ms    BIGINT NOT NULL,
    voided_at_ms     BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS gateway_voids_age ON gateway_voids (voided_at_ms);

CREATE TABLE IF NOT EXISTS ledger (
    entry_id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('deposit', 'debit', 'credit')),
    amount_minor  BIGINT NOT NULL CHECK (amount_minor > 0),
    transfer_id   TEXT,
    idem_key      TEXT,
    request_hash  BYTEA,
    counterparty  TEXT,
    currency      TEXT NOT NULL,
    note          TEXT,
    created_at_ms BIGINT NOT NULL
);
-- The last guard: one debit per (user, key), even after the key's partition was dropped.
CREATE UNIQUE INDEX IF NOT EXISTS ledger_one_debit_per_key
    ON ledger (user_id, idem_key) WHERE kind = 'debit';
CREATE INDEX IF NOT EXISTS ledger_user ON ledger (user_id);
CREATE INDEX IF NOT EXISTS ledger_transfer ON ledger (transfer_id);

-- A gateway table made before captures were recorded: add the column, and mark captured
-- every authorisation whose key has a debit (it was captured when that debit committed).
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_schema = current_schema()
                     AND table_name = 'gateway_authorizations'
                     AND column_name = 'captured_at_ms') THEN
        ALTER TABLE gateway_authorizations ADD COLUMN captured_at_ms BIGINT;
        UPDATE gateway_authorizations g SET captured_at_ms = g.created_at_ms
        WHERE EXISTS (SELECT 1 FROM ledger l WHERE l.kind = 'debit'
                        AND l.user_id = g.user_id AND l.idem_key = g.idem_key);
    END IF;
END $$;

-- Balance cache: the sum of the user's ledger, kept by a trigger in the same transaction
-- as every entry (the ledger is insert-only). Its row is also the lock that serialises
-- one sender's debits.
CREATE TABLE IF NOT EXISTS balances (
    user_id       TEXT PRIMARY KEY,
    balance_minor BIGINT NOT NULL
);
CREATE OR REPLACE FUNCTION ledger_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO balances (user_id, balance_minor)
    VALUES (NEW.user_id,
            CASE NEW.kind WHEN 'debit' THEN -NEW.amount_minor ELSE NEW.amount_minor END)
    ON CONFLICT (user_id) DO UPDATE
        SET balance_minor = balances.balance_minor + EXCLUDED.balance_minor;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER ledger_balance_insert AFTER INSERT ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_balance();

-- The outbox and the consumers' inbox are the library's (`sendonce_outbox`, `sendonce_inbox`);
-- databases made before keep their events (`migrate::outbox`).

CREATE TABLE IF NOT EXISTS sms (
    sms_id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       TEXT NOT NULL,
    transfer_id   TEXT NOT NULL,
    text          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS beneficiaries (
    beneficiary_id TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL,
    phone          TEXT NOT NULL,
    name           TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    UNIQUE (user_id, phone)
);

CREATE TABLE IF NOT EXISTS bench_plain (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       TEXT NOT NULL,
    to_user_id    TEXT NOT NULL,
    amount_minor  BIGINT NOT NULL,
    currency      TEXT NOT NULL,
    note          TEXT,
    created_at_ms BIGINT NOT NULL
);

-- Benchmark peer: the record table of a Powertools-style idempotency layer (peer.rs).
CREATE TABLE IF NOT EXISTS bench_peer_keys (
    user_id               TEXT NOT NULL,
    idem_key              TEXT NOT NULL,
    status                TEXT NOT NULL,
    payload_hash          BYTEA NOT NULL,
    expiry_ms             BIGINT NOT NULL,
    in_progress_expiry_ms BIGINT NOT NULL,
    response              BYTEA,
    PRIMARY KEY (user_id, idem_key)
);
"#;

/// Creates every table (idempotent; safe when several instances start at once).
pub(super) async fn create(client: &mut deadpool_postgres::Client) -> Result<(), DbError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await?;
    tx.batch_execute(keys_schema::TABLES).await?;
    tx.batch_execute(outbox::TABLE).await?;
    tx.batch_execute(inbox::TABLE).await?;
    tx.batch_execute(SCHEMA).await?;
    super::migrate::outbox(&tx).await?;
    tx.commit().await?;
    Ok(())
}
