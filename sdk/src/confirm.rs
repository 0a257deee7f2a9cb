//! The confirm hop: new transfers are committed on one thread of their own, fed by a channel.
//!
//! A confirmation must never block the caller's executor (a Kotlin or Swift main thread, another
//! async runtime) with an fsync, so its commit runs elsewhere. A thread that does nothing else is a
//! cheaper place than tokio's blocking pool (no task to allocate, no pool lock, no idle-thread
//! timer), it answers the caller before it tells listeners, and confirmations that queue up while
//! one commits share the next commit (group commit: one fsync for all of them).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::core::{mint_key, Core};
use crate::error::{Result, SdkError};
use crate::events::SdkEvent;
use crate::model::Transfer;
use crate::operation::{Committed, Operation};
use crate::store::NewTransfer;

/// Most confirmations in one group commit.
const MAX_GROUP: usize = 64;

struct Job {
    core: Arc<Core>,
    op: Committed,
    reply: oneshot::Sender<Result<Transfer>>,
}

/// The sending side of the store thread; the thread ends when this is dropped.
pub(crate) struct Confirmer {
    jobs: Mutex<Sender<Job>>,
}

impl Confirmer {
    /// Starts the store thread.
    pub fn start() -> Result<Self> {
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("sendonce-store".into())
            .spawn(move || serve(queue))
            .map_err(|e| SdkError::Internal(format!("could not start the store thread: {e}")))?;
        Ok(Self {
            jobs: Mutex::new(jobs),
        })
    }
}

/// Validates the operation and fixes its bytes (its codec runs here, once), then has the store thread
/// mint the key and commit operation + key + body + headers; resolves when the row is durable. The
/// caller's thread only waits, never writes.
pub(crate) async fn persist(core: &Arc<Core>, op: Operation) -> Result<Transfer> {
    let op = op.commit()?;
    let (reply, answer) = oneshot::channel();
    let job = Job {
        core: core.clone(),
        op,
        reply,
    };
    if core.config.deterministic.is_some() {
        // A simulation's one thread: the store thread would let the OS order its events.
        commit_group(vec![job]);
        if let Err(e) = core.store.checkpoint_if_due() {
            tracing::warn!(error = %e, "WAL checkpoint failed; retried after the next commits");
        }
    } else {
        core.confirmer
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| SdkError::Internal("the store thread stopped".into()))?;
    }
    answer.await.unwrap_or_else(|_| {
        Err(if core.is_closed() {
            SdkError::Closed
        } else {
            SdkError::Internal("the store thread stopped".into())
        })
    })
}

/// The store thread: takes whatever confirmations are waiting and commits them together.
fn serve(queue: Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let core = group[0].core.clone();
        if catch_unwind(AssertUnwindSafe(|| commit_group(group))).is_err() {
            tracing::error!(
                "a confirmation panicked on the store thread; its caller gets Internal"
            );
        }
        // Between confirmations, after their callers have their answers.
        if let Err(e) = core.store.checkpoint_if_due() {
            tracing::warn!(error = %e, "WAL checkpoint failed; retried after the next commits");
        }
    }
}

fn commit_group(group: Vec<Job>) {
    let (closed, open): (Vec<_>, Vec<_>) = group.into_iter().partition(|j| j.core.is_closed());
    for job in closed {
        let _ = job.reply.send(Err(SdkError::Closed));
    }
    let Some(core) = open.first().map(|j| j.core.clone()) else {
        return;
    };
    let mono = core.clock.monotonic_ms();
    let now = core.clock.now_ms();
    let (new, replies): (Vec<_>, Vec<_>) = open
        .into_iter()
        .map(|job| {
            let new = NewTransfer {
                local_id: uuid::Uuid::now_v7().to_string(),
                key: mint_key(&core.config),
                op: job.op,
                now_ms: now,
            };
            (new, job.reply)
        })
        .unzip();
    let results = core.store.insert_batch(&new);
    let mut persisted = Vec::with_capacity(results.len());
    for (result, reply) in results.into_iter().zip(replies) {
        if let Ok(t) = &result {
            // Its sending time starts now, not when this instance opened.
            core.mark_elapsed(&t.local_id, mono);
            if core.config.log_personal_data {
                // The app opted in (a debug build, a support session): recipient and note, never the token.
                tracing::info!(local_id = %t.local_id, op = %t.operation_type, key = %t.idempotency_key,
                    amount = t.amount_minor, to = %t.to_user_id, note = ?t.note, "transfer persisted");
            } else {
                tracing::info!(local_id = %t.local_id, op = %t.operation_type, key = %t.idempotency_key,
                    amount = t.amount_minor, "transfer persisted");
            }
            persisted.push(t.clone());
        }
        // The caller first: listeners and the sender can learn of it a few µs later.
        let _ = reply.send(result);
    }
    if !persisted.is_empty() {
        for t in persisted {
            core.emit(SdkEvent::Confirmed {
                local_id: t.local_id.clone(),
                operation_type: t.operation_type.clone(),
            });
            core.publish(t);
        }
        // Offline, the sender's turn would only find the network unavailable: no wake-up
        // (one thread hop less per confirmation, competing with the caller for a core).
        // Nothing is missed: `set_network_available(true)` sets the flag, then wakes the
        // sender, which then finds this row (committed before the flag was read here).
        if core.network_available() {
            core.wake.notify_one();
        }
    }
}
