//! The reaper: keys whose holder died or stalled past its lease, resolved by asking the
//! application ([`Operation::recover`]) before anything is released; and expiry of whole
//! key buckets.
//!
//! The reaper acts as the key's holder, under the same lock id, so the fence keeps both
//! honest: if the holder commits first, the reaper's release or commit finds the key no
//! longer `IN_PROGRESS` under that lock and does nothing; if the reaper goes first, the
//! holder's fence fails and its work never runs.

use std::time::Duration;

use super::{duration_ms, Engine, Operation};
use crate::problem::Problem;
use crate::store::{DbError, Reap, Stuck};

/// The reaper's answer from the application for one stuck key.
#[derive(Debug)]
pub enum Recovery<I, S> {
    /// The external step happened (an authorisation exists): finish the request as its
    /// holder would have, through the same fenced unit of work, with this input and step.
    Finish(I, S),
    /// Nothing happened outside the database: release the key, so the client's retry
    /// runs the request once.
    Release,
    /// Cannot tell yet (the side effect's owner is unreachable): keep the key, ask again
    /// next pass. The client meanwhile gets 409 and retries.
    Hold,
}

/// What one reaper pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Stuck keys finished through the fenced unit of work.
    pub finished: usize,
    /// Stuck keys whose unit of work found its work already done under the key (a guard
    /// that outlives the key row: server-mock's ledger) and completed the key from it —
    /// the commit's answer is a replay.
    pub completed: usize,
    /// Stuck keys released (or found finished by their holder meanwhile).
    pub released: usize,
    /// Stuck keys kept for the next pass.
    pub held: usize,
    /// Key rows removed by bucket expiry.
    pub expired: usize,
}

/// How often the reaper looks: a quarter of the lock timeout, between 20 ms and 1 s.
pub fn interval(lock_timeout: Duration) -> Duration {
    (lock_timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

/// The default question: an operation without an external step has nothing outside the
/// database to ask about (its work and its key commit together), so release.
pub(super) async fn release<I, S>() -> Result<Recovery<I, S>, Problem> {
    Ok(Recovery::Release)
}

impl<S: Reap> Engine<S> {
    /// One pass: every key whose lease (`lock_timeout` of its holder's monotonic time) ran
    /// out is resolved as `op` answers; then whole expired buckets go.
    pub async fn reap<O: Operation<S>>(
        &self,
        op: &O,
        lock_timeout: Duration,
    ) -> Result<Pass, DbError> {
        let mut pass = Pass::default();
        for stuck in self.store.stuck(duration_ms(lock_timeout)).await? {
            let mut resolved = self.resolve(op, &stuck).await;
            // A connection lost mid-call (a cut, a failover) left the key as it was or
            // resolved by this very call — fenced either way — so it is asked once more now,
            // on a fresh connection, rather than a whole interval later.
            if matches!(&resolved, Err(e) if e.is_connection_lost()) {
                resolved = self.resolve(op, &stuck).await;
            }
            // One key that cannot be resolved now must not hold up the others.
            match resolved {
                Ok(Resolved::Finished) => pass.finished += 1,
                Ok(Resolved::Completed) => pass.completed += 1,
                Ok(Resolved::Released) => pass.released += 1,
                Ok(Resolved::Held) => pass.held += 1,
                Err(e) => {
                    tracing::warn!(%e, key = %stuck.fence.key, "stuck key not resolved this pass");
                    pass.held += 1;
                }
            }
        }
        if let Some(now) = self.expiry_now() {
            pass.expired = self.store.expire(now, self.key_window_ms).await?;
        }
        Ok(pass)
    }

    /// Runs [`Engine::reap`] every [`interval`] until the task is dropped or aborted.
    pub async fn reap_forever<O: Operation<S>>(&self, op: &O, lock_timeout: Duration) {
        loop {
            tokio::time::sleep(interval(lock_timeout)).await;
            match self.reap(op, lock_timeout).await {
                Ok(p) if p != Pass::default() => tracing::info!(?p, "reaper pass"),
                Ok(_) => {}
                Err(e) => tracing::warn!(%e, "reaper pass failed"),
            }
        }
    }

    async fn resolve<O: Operation<S>>(&self, op: &O, stuck: &Stuck) -> Result<Resolved, DbError> {
        let fence = &stuck.fence;
        match op.recover(stuck).await {
            Ok(Recovery::Finish(input, step)) => {
                let answer = self
                    .store
                    .commit_stuck(fence, op.work(fence, input, step))
                    .await?;
                // A lost fence answers 409: the holder finished (or released) it meanwhile.
                Ok(if answer.status == 409 {
                    Resolved::Released
                } else if answer.replayed {
                    Resolved::Completed
                } else {
                    Resolved::Finished
                })
            }
            Ok(Recovery::Release) => {
                self.store.release_stuck(fence).await?;
                Ok(Resolved::Released)
            }
            Ok(Recovery::Hold) => Ok(Resolved::Held),
            Err(problem) => {
                tracing::warn!(code = problem.code, detail = %problem.detail, key = %fence.key, "recovery failed; key held");
                Ok(Resolved::Held)
            }
        }
    }
}

enum Resolved {
    Finished,
    Completed,
    Released,
    Held,
}
