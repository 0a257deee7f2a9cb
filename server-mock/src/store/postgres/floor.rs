//! The bench floor on PostgreSQL: the least any design honouring the contract on day
//! partitions does for one first request, each phase one autocommit statement. The claim
//! takes the key lock and looks the key up in every partition (`sendonce_claim_key`, the
//! real claim's own minus its balance read: without both, a key retried across midnight is
//! claimed twice and may get two outcomes),
//! then the gateway's record; both commits need not wait for the disk, as in
//! `keys::claim`. Then, in one synchronous commit, the fence, the sender's balance row
//! locked and checked (without it two debits overdraw), debit, outbox event and completed
//! key. Downstream, the relay delivers its event like any other: the inbox rows, credit and
//! SMS of a whole batch in one statement (`relay.rs`), which a per-request statement would
//! not beat. The gap between this and `bench_plain` is what the contract costs on this
//! machine; the gap between this and a first request is what the design adds on top (the
//! phase-0 key look-up, the balance pre-check, the key row locked before the balance row,
//! the recipient's limit).

use std::sync::LazyLock;

use super::{exec, opt, PgStore};
use crate::store::{FloorTransfer, PlainRow};
use sendonce_server::store::postgres::keys::{self, with_partition};
use sendonce_server::store::postgres::outbox;
use sendonce_server::store::DbError;

/// The contract's claim: key lock, look-up in every partition, insert (schema.rs).
const CLAIM: &str = "SELECT sendonce_claim_key($1, $2, $3, $4, $5, $6, $7, 0, $8)";

const GATEWAY: &str = "WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
     INSERT INTO gateway_authorizations
         (user_id, idem_key, authorization_id, calls, created_at_ms)
     SELECT $1, $2, $3, 1, $4 FROM async";

/// The fence and the debit as one: debit, capture and event only if the completion found the key
/// still `IN_PROGRESS` under our lock and the sender's balance, its row locked first,
/// covers the amount. (Balance row before key row: the cheaper order, which a floor with
/// no reaper to deadlock with may take.)
static DEBIT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH sender AS (
         SELECT balance_minor FROM balances WHERE user_id = $1 FOR UPDATE),
     done AS ({} RETURNING 1),
     debit AS (
         INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, request_hash,
                             counterparty, currency, note, created_at_ms)
         SELECT $1, 'debit', $2, $3, $4, $5, $6, $7, $8, $9 FROM done),
     captured AS (
         UPDATE gateway_authorizations SET captured_at_ms = $9
         WHERE user_id = $1 AND idem_key = $4 AND EXISTS (SELECT 1 FROM done))
     {} SELECT $1, $4, '{}', $10, $9 FROM done RETURNING event_id",
        keys::complete_sql(
            "$1",
            "$4",
            "'floor'",
            "201",
            "$11",
            "AND bucket = $12 AND (SELECT balance_minor FROM sender) >= $2"
        ),
        outbox::INSERT_INTO,
        crate::outbox::TRANSFER_DONE
    )
});

/// One first request's floor; returns the outbox event id.
pub(super) async fn first_request(store: &PgStore, p: PlainRow) -> Result<i64, DbError> {
    let bucket = p.bucket;
    let FloorTransfer {
        record: t,
        body,
        hash,
    } = p.floor_transfer();
    let key = t.idempotency_key.clone();
    let c = store.client().await?;
    let instance: &str = &store.instance.id;
    // As a claim does: a bucket past the partitions made ahead gets its partition first.
    let claim: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
        &t.from_user_id,
        &key,
        &hash,
        &"floor",
        &t.created_at_ms,
        &bucket,
        &instance,
        &body,
    ];
    with_partition(&store.pool, bucket, || exec(&c, CLAIM, &claim)).await?;
    let authorization = format!("auth_{}", uuid::Uuid::new_v4().simple());
    exec(
        &c,
        GATEWAY,
        &[&t.from_user_id, &key, &authorization, &t.created_at_ms],
    )
    .await?;
    let event_id: i64 = opt(
        &c,
        &DEBIT,
        &[
            &t.from_user_id,
            &t.amount_minor,
            &t.transfer_id,
            &key,
            &hash,
            &t.to_user_id,
            &t.currency,
            &t.note,
            &t.created_at_ms,
            &body,
            &body,
            &bucket,
        ],
    )
    .await?
    .ok_or_else(|| {
        DbError::Task("the floor's key was not in progress or its sender cannot cover it".into())
    })?
    .get(0);
    Ok(event_id)
}
