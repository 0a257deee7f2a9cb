//! Outbox storage on PostgreSQL: a relay batch claimed with `FOR UPDATE SKIP LOCKED`, so
//! relays in N instances take disjoint batches; each consumer's inbox absorbs whatever is
//! still delivered twice (a replay, a batch retried after a conflict).
//!
//! Set-based: a batch costs the same four statements whatever its size (`BEGIN`, the
//! claiming read, one write, `COMMIT`) instead of five per event — under load the relay's
//! statements were a third of a first request's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use super::rows;
use crate::consumers::{self, TransferDone};
use crate::outbox::{self, BATCH};
use sendonce_server::store::postgres::{inbox, outbox as lib_outbox};
use sendonce_server::store::DbError;
use sendonce_server::Event;

/// The free events, oldest first, each with its sender's display name as it is now (the
/// SMS names the sender); locked so no other relay takes them (the library's claim,
/// `outbox::claim_sql`, with server-mock's column and condition).
///
/// An event is free only if its recipient's balance row (which its credit updates) is
/// free too, and that row is locked here with it (`SKIP LOCKED`, so the claim never
/// waits): a session frozen while holding one user's row (a stopped instance between its
/// debit's statements, an idle `psql`) delays that user's credits only, and the batch goes
/// on with everyone else's instead of failing whole at each attempt. A recipient without a
/// balance row yet (never credited) has nothing to wait for.
static CLAIM_BATCH: LazyLock<String> = LazyLock::new(|| {
    let recipient = "convert_from(o.payload, 'UTF8')::jsonb ->> 'to_user_id'";
    let sender = "convert_from(o.payload, 'UTF8')::jsonb ->> 'from_user_id'";
    lib_outbox::claim_sql(
        &format!(", (SELECT u.display_name FROM users u WHERE u.user_id = {sender})"),
        &format!(
            "AND (EXISTS (SELECT 1 FROM balances b WHERE b.user_id = {recipient}
                          FOR UPDATE SKIP LOCKED)
                  OR NOT EXISTS (SELECT 1 FROM balances b WHERE b.user_id = {recipient}))"
        ),
    )
});

/// The whole batch's deliveries in one statement: per consumer, the inbox records of the
/// batch (the library's `inbox::record_sql`: a redelivered event yields no row) and the
/// effect of exactly the fresh ones, then the batch marked published (`outbox::mark_sql`) —
/// all in the relay's transaction, so an inbox record never commits without its effect.
///
/// `$1` is in the credits' lock order (recipient, then event): the ledger trigger locks
/// each recipient's balance row as the rows are inserted, in `ORDER BY n` order, so two
/// relays' batches never wait on each other in a cycle. `$6` are the SMS texts, made by
/// [`consumers::sms_text`] in Rust.
static DELIVER: LazyLock<String> = LazyLock::new(|| {
    let credit_inbox = inbox::record_sql("'wallet_credit'", "batch ORDER BY n", "$2");
    let sms_inbox = inbox::record_sql("'sms'", "batch ORDER BY n", "$2");
    let published = lib_outbox::mark_sql("$11", "$2");
    format!(
        "WITH
     batch AS (
         SELECT * FROM unnest($1::bigint[], $3::text[], $4::bigint[], $5::text[],
                              $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
             WITH ORDINALITY AS b(event_id, to_user_id, amount_minor, transfer_id, sms_text,
                                  idem_key, from_user_id, currency, note, n)),
     credit_inbox AS ({credit_inbox}),
     credits AS (
         INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key,
                             counterparty, currency, note, created_at_ms)
         SELECT b.to_user_id, 'credit', b.amount_minor, b.transfer_id, b.idem_key,
                b.from_user_id, b.currency, b.note, $2
         FROM batch b JOIN credit_inbox USING (event_id) ORDER BY b.n
         RETURNING 1),
     sms_inbox AS ({sms_inbox}),
     texts AS (
         INSERT INTO sms (user_id, transfer_id, text, created_at_ms)
         SELECT b.to_user_id, b.transfer_id, b.sms_text, $2
         FROM batch b JOIN sms_inbox USING (event_id) ORDER BY b.n
         RETURNING 1),
     published AS ({published})
     SELECT (SELECT count(*) FROM credits), (SELECT count(*) FROM texts),
            (SELECT count(*) FROM published)"
    )
});

/// Relay batches by size since the process started: 1, 2–3, 4–7, …, ≥ 128 events.
static BATCH_SIZES: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

/// How many relay batches of each size (1, 2–3, 4–7, 8–15, 16–31, 32–63, 64–127, ≥ 128
/// events) this process's PostgreSQL relays have delivered so far, for the benchmarks.
pub fn batch_sizes() -> [u64; 8] {
    std::array::from_fn(|i| BATCH_SIZES[i].load(Ordering::Relaxed))
}

/// Delivers one batch to the in-process consumers and marks it published, in one
/// transaction; returns how many events it handled (0: none free).
pub(super) async fn publish_batch(tx: &Transaction<'_>, now_ms: i64) -> Result<usize, DbError> {
    let claimed = rows(tx, &CLAIM_BATCH, &[&i64::try_from(BATCH).unwrap_or(64)]).await?;
    if claimed.is_empty() {
        return Ok(0);
    }
    let events: Vec<(i64, Event)> = claimed.iter().map(lib_outbox::claimed).collect();
    let senders: std::collections::HashMap<i64, Option<String>> =
        claimed.iter().map(|r| (r.get(0), r.get(3))).collect();
    let mut decoded = outbox::decode(&events);
    decoded.sort_by(|a, b| {
        let (ra, rb) = (a.1.record(0), b.1.record(0));
        (ra.to_user_id, a.0).cmp(&(rb.to_user_id, b.0))
    });
    let b = Columns::of(&decoded, &senders, now_ms);
    // Every claimed id, unreadable payloads included: they are logged and never block.
    let ids: Vec<i64> = events.iter().map(|(id, _)| *id).collect();
    let params: [&(dyn ToSql + Sync); 11] = [
        &b.event_id,
        &now_ms,
        &b.to_user_id,
        &b.amount_minor,
        &b.transfer_id,
        &b.sms_text,
        &b.idem_key,
        &b.from_user_id,
        &b.currency,
        &b.note,
        &ids,
    ];
    rows(tx, &DELIVER, &params).await?;
    let bucket = (usize::BITS - events.len().leading_zeros()).saturating_sub(1) as usize;
    BATCH_SIZES[bucket.min(7)].fetch_add(1, Ordering::Relaxed);
    Ok(events.len())
}

/// The batch as one array per column, in lock order, for [`DELIVER`].
#[derive(Default)]
struct Columns {
    event_id: Vec<i64>,
    to_user_id: Vec<String>,
    amount_minor: Vec<i64>,
    transfer_id: Vec<String>,
    sms_text: Vec<String>,
    idem_key: Vec<String>,
    from_user_id: Vec<String>,
    currency: Vec<String>,
    note: Vec<Option<String>>,
}

impl Columns {
    fn of(
        decoded: &[(i64, TransferDone)],
        senders: &std::collections::HashMap<i64, Option<String>>,
        now_ms: i64,
    ) -> Self {
        let mut c = Columns::default();
        for (event_id, event) in decoded {
            let sender = senders.get(event_id).cloned().flatten();
            let t = event.record(now_ms);
            c.event_id.push(*event_id);
            c.sms_text
                .push(consumers::sms_text(event, sender.as_deref()));
            c.to_user_id.push(t.to_user_id);
            c.amount_minor.push(t.amount_minor);
            c.transfer_id.push(t.transfer_id);
            c.idem_key.push(t.idempotency_key);
            c.from_user_id.push(t.from_user_id);
            c.currency.push(t.currency);
            c.note.push(t.note);
        }
        c
    }
}
