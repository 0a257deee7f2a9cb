//! Where a confirmation is committed: on the store thread for an async caller, on the caller's own
//! thread for one that may block.
//!
//! An async confirmation must never block the caller's executor (a Kotlin or Swift main thread,
//! another async runtime) with an fsync, so its commit runs elsewhere: a thread that does nothing
//! else, fed by a channel — a cheaper place than tokio's blocking pool (no task to allocate, no pool
//! lock, no idle-thread timer). It answers the caller before it tells listeners.
//!
//! A caller already on a thread that may block (Kotlin's `Dispatchers.IO`, tokio's
//! `spawn_blocking`) needs no hop: [`persist_blocking`] commits on that thread, saving the two
//! wake-ups of the hop (the store thread's, then the caller's).
//!
//! Either way, whoever commits holds the committer lock and takes every confirmation waiting at that
//! moment, from both paths, into its commit (group commit: one fsync for all of them).

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

/// Where a confirmation's caller waits for its answer.
type Answer = oneshot::Receiver<Result<Transfer>>;

/// What the store thread is asked to do.
enum Msg {
    /// Commit this confirmation (with whatever else is waiting).
    Confirm(Job),
    /// A caller's thread committed: checkpoint the WAL if it is due, off that caller's path.
    Checkpoint(Arc<Core>),
}

/// The store thread's channel, and the confirmations waiting for a committer; the thread ends
/// when this is dropped.
pub(crate) struct Confirmer {
    jobs: Mutex<Sender<Msg>>,
    /// Confirmations of blocking callers not yet taken into a commit.
    waiting: Mutex<Vec<Job>>,
    /// Held by whoever commits (the store thread or a blocking caller), so that commits queue
    /// behind one another and the next one takes everything waiting.
    committer: Mutex<()>,
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
            waiting: Mutex::new(Vec::new()),
            committer: Mutex::new(()),
        })
    }

    fn send(&self, msg: Msg) -> Result<()> {
        lock(&self.jobs)
            .send(msg)
            .map_err(|_| SdkError::Internal("the store thread stopped".into()))
    }

    /// Commits `group` and every confirmation waiting, as the one committer.
    fn commit(&self, mut group: Vec<Job>) {
        let _committer = lock(&self.committer);
        group.append(&mut lock(&self.waiting));
        if group.is_empty() {
            return;
        }
        if catch_unwind(AssertUnwindSafe(|| commit_group(group))).is_err() {
            // Its callers' replies were dropped with the group: they get Internal.
            tracing::error!("a confirmation panicked while committing; its caller gets Internal");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic under these locks leaves nothing half-done: a commit rolls back, a queue stays a queue.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Validates the operation and fixes its bytes (its codec runs here, once), then has the store thread
/// mint the key and commit operation + key + body + headers; resolves when the row is durable. The
/// caller's thread only waits, never writes.
pub(crate) async fn persist(core: &Arc<Core>, op: Operation) -> Result<Transfer> {
    let (job, answer) = prepare(core, op)?;
    if let Some(job) = job {
        core.confirmer.send(Msg::Confirm(job))?;
    }
    answer.await.unwrap_or_else(|_| Err(lost(core)))
}

/// Like [`persist`], committing on the calling thread, which blocks until the row is durable.
/// For a caller on a thread that may block; confirmations of other threads waiting at that moment
/// share its commit, and it may commit theirs. Never on a UI thread or an async executor's worker.
pub(crate) fn persist_blocking(core: &Arc<Core>, op: Operation) -> Result<Transfer> {
    let (job, mut answer) = prepare(core, op)?;
    if let Some(job) = job {
        lock(&core.confirmer.waiting).push(job);
        // Whoever took the committer lock after the push (this thread, or one before it) took
        // this job into its commit and answered it before letting go: the answer is there.
        core.confirmer.commit(Vec::new());
        if core.store.checkpoint_due() {
            // Not on this caller's time: the store thread does it between commits. The row is
            // durable whatever happens here, so a failure must not become the caller's answer.
            if let Err(e) = core.confirmer.send(Msg::Checkpoint(core.clone())) {
                tracing::warn!(error = %e, "WAL checkpoint not handed off; retried after the next commits");
            }
        }
    }
    answer.try_recv().unwrap_or_else(|_| Err(lost(core)))
}

/// Fixes the operation's bytes and makes its job, with the receiver of its answer. In a
/// simulation (one thread: another would let the OS order its events) the job is committed here
/// and `None` is left to commit.
fn prepare(core: &Arc<Core>, op: Operation) -> Result<(Option<Job>, Answer)> {
    let op = op.commit()?;
    let (reply, answer) = oneshot::channel();
    let job = Job {
        core: core.clone(),
        op,
        reply,
    };
    if core.config.deterministic.is_some() {
        commit_group(vec![job]);
        checkpoint(core);
        return Ok((None, answer));
    }
    Ok((Some(job), answer))
}

/// The error of a confirmation whose answer never came.
fn lost(core: &Core) -> SdkError {
    if core.is_closed() {
        SdkError::Closed
    } else {
        SdkError::Internal("the store thread stopped".into())
    }
}

fn checkpoint(core: &Core) {
    if let Err(e) = core.store.checkpoint_if_due() {
        tracing::warn!(error = %e, "WAL checkpoint failed; retried after the next commits");
    }
}

/// The store thread: takes whatever confirmations are waiting and commits them together.
fn serve(queue: Receiver<Msg>) {
    while let Ok(first) = queue.recv() {
        let mut core = None;
        let mut group = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Confirm(job) => {
                    core = Some(job.core.clone());
                    group.push(job);
                }
                Msg::Checkpoint(c) => core = Some(c),
            }
            if group.len() < MAX_GROUP {
                next = queue.try_recv().ok();
            }
        }
        let Some(core) = core else { continue };
        core.confirmer.commit(group);
        // Between confirmations, after their callers have their answers.
        checkpoint(&core);
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
