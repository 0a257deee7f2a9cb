//! Outbox storage on PostgreSQL: a relay batch claimed with `FOR UPDATE SKIP LOCKED`, so
//! relays in N instances take disjoint batches; each consumer's inbox absorbs whatever is
//! still delivered twice (a replay, a batch retried after a conflict).

use deadpool_postgres::Transaction;

use super::{exec, opt, rows};
use crate::consumers::{self, Consumer, TransferDone};
use crate::db::DbError;
use crate::outbox::{self, BATCH};

/// Delivers one batch to the in-process consumers and marks it published, in one
/// transaction; returns how many events it handled (0: none free).
pub(super) async fn publish_batch(tx: &Transaction<'_>, now_ms: i64) -> Result<usize, DbError> {
    let events: Vec<(i64, String)> = rows(
        tx,
        "SELECT event_id, payload FROM outbox WHERE NOT published
         ORDER BY event_id LIMIT $1 FOR UPDATE SKIP LOCKED",
        &[&i64::try_from(BATCH).unwrap_or(64)],
    )
    .await?
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect();
    if events.is_empty() {
        return Ok(0);
    }
    let mut decoded = outbox::decode(&events);
    // Credits lock the recipients' balance rows: always in one order, so two relays'
    // batches never wait on each other in a cycle.
    decoded.sort_by(|a, b| {
        let (ra, rb) = (a.1.record(0), b.1.record(0));
        (ra.to_user_id, a.0).cmp(&(rb.to_user_id, b.0))
    });
    for consumer in Consumer::ALL {
        for (event_id, event) in &decoded {
            handle(tx, consumer, *event_id, event, now_ms).await?;
        }
    }
    let ids: Vec<i64> = events.iter().map(|(id, _)| *id).collect();
    exec(
        tx,
        "UPDATE outbox SET published = TRUE WHERE event_id = ANY($1)",
        &[&ids],
    )
    .await?;
    Ok(events.len())
}

/// One delivery: the inbox insert and the effect share the transaction.
async fn handle(
    tx: &Transaction<'_>,
    consumer: Consumer,
    event_id: i64,
    event: &TransferDone,
    now_ms: i64,
) -> Result<(), DbError> {
    let fresh = exec(
        tx,
        "INSERT INTO inbox (consumer, event_id, processed_at_ms) VALUES ($1, $2, $3)
         ON CONFLICT (consumer, event_id) DO NOTHING",
        &[&consumer.name(), &event_id, &now_ms],
    )
    .await?;
    if fresh == 0 {
        return Ok(());
    }
    let t = event.record(now_ms);
    match consumer {
        Consumer::WalletCredit => {
            exec(
                tx,
                "INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key,
                                     counterparty, currency, note, created_at_ms)
                 VALUES ($1, 'credit', $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &t.to_user_id,
                    &t.amount_minor,
                    &t.transfer_id,
                    &t.idempotency_key,
                    &t.from_user_id,
                    &t.currency,
                    &t.note,
                    &now_ms,
                ],
            )
            .await?;
        }
        Consumer::Sms => {
            let sender: Option<String> = opt(
                tx,
                "SELECT display_name FROM users WHERE user_id = $1",
                &[&t.from_user_id],
            )
            .await?
            .map(|r| r.get(0));
            exec(
                tx,
                "INSERT INTO sms (user_id, transfer_id, text, created_at_ms)
                 VALUES ($1, $2, $3, $4)",
                &[
                    &t.to_user_id,
                    &t.transfer_id,
                    &consumers::sms_text(event, sender.as_deref()),
                    &now_ms,
                ],
            )
            .await?;
        }
    }
    Ok(())
}
