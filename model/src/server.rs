//! The server's phases (server-mock/src/transfer.rs, reaper.rs, http/transfers.rs), restated over a few
//! tables: key rows, gateway authorisations, the ledger, and the requests running in the process.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Key, Mutant, Protocol, State};
use crate::network::{Answer, Msg, Reply};
use crate::phone::Wire;
use sendonce::TransferState;

/// What a completed key row answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stored {
    /// The 201.
    Created,
    /// The 402.
    Insufficient,
    /// Closed by a by-key look-up's 404 (no request hash).
    Closed,
}

/// One row of `idempotency_keys`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Row {
    /// `IN_PROGRESS` under a lock, with the request body and the lease.
    InProgress {
        /// The lock id (the fence compares it).
        lock: u8,
        /// The stored request body.
        body: u8,
        /// The lease ran out (slow step, or the holding process is gone): the reaper may take it.
        lease_lost: bool,
    },
    /// Completed with a stored answer; `body` is the request fingerprint (none for a closed key).
    Done {
        /// The stored answer.
        stored: Stored,
        /// The request body it was stored for.
        body: Option<u8>,
    },
}

/// A request running inside the server process (lost if the process is killed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Job {
    /// Its key.
    pub key: Key,
    /// Its body.
    pub body: u8,
    /// Whom to answer.
    pub reply: Reply,
    /// The lock it claimed the key with.
    pub lock: u8,
    /// The gateway authorised it (phase 2 done).
    pub authorised: bool,
}

/// The server: persisted tables (survive a crash) and running jobs (do not).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Server {
    /// `idempotency_keys`.
    pub rows: BTreeMap<Key, Row>,
    /// `gateway_authorizations` (the gateway's own persisted records).
    pub gateway: BTreeSet<Key>,
    /// Ledger debits: (key, body), sorted; UNIQUE on key in the real schema.
    pub ledger: Vec<(Key, u8)>,
    /// The user's opening balance (every transfer moves 1).
    pub opening: u8,
    /// Requests in the process.
    pub jobs: Vec<Job>,
    /// Next lock id.
    pub next_lock: u8,
}

/// Whether the gateway authorised before the commit (`transfer::Authorised`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Authorised {
    Yes,
    No,
}

impl Server {
    /// An empty server with this balance.
    pub fn new(opening: u8) -> Self {
        Self {
            rows: BTreeMap::new(),
            gateway: BTreeSet::new(),
            ledger: Vec::new(),
            opening,
            jobs: Vec::new(),
            next_lock: 0,
        }
    }

    /// Balance: the opening deposit less the debits (the ledger's sum).
    pub fn balance(&self) -> i16 {
        self.opening as i16 - self.ledger.len() as i16
    }

    /// Debits for this key.
    pub fn debits(&self, key: Key) -> usize {
        self.ledger.iter().filter(|(k, _)| *k == key).count()
    }

    /// Whether a running job will answer this request.
    pub fn serves(&self, phone: u8, transfer: u8, tag: u8) -> bool {
        let want = Reply {
            phone,
            transfer,
            tag,
        };
        self.jobs.iter().any(|j| j.reply == want)
    }

    /// Whether the job's lock is held under a live lease.
    pub fn lease_held(&self, job: &Job) -> bool {
        matches!(self.rows.get(&job.key), Some(Row::InProgress { lock, lease_lost: false, .. }) if *lock == job.lock)
    }

    /// Keys the reaper would pick up: in progress with the lease run out.
    pub fn reapable(&self) -> Vec<Key> {
        self.rows
            .iter()
            .filter(|(_, r)| {
                matches!(
                    r,
                    Row::InProgress {
                        lease_lost: true,
                        ..
                    }
                )
            })
            .map(|(k, _)| *k)
            .collect()
    }

    /// Completed keys whose window may end: the client sends no more POSTs for them (the transfer is
    /// final or given up) and none is still in flight or running. Keys outlive the client's retry
    /// window by design (48 h against 24 h), so a request older than the key window is not modelled.
    pub fn expirable(&self, s: &State) -> Vec<Key> {
        self.rows
            .iter()
            .filter(|(_, r)| matches!(r, Row::Done { .. }))
            .map(|(k, _)| *k)
            .filter(|k| {
                let done = s.phones.iter().flat_map(|p| &p.transfers).any(|t| {
                    t.key() == *k
                        && (t.state.is_final() || t.state == TransferState::NeedsAttention)
                });
                let in_flight = s
                    .net
                    .msgs
                    .iter()
                    .any(|m| matches!(m, Msg::Post { key, .. } if key == k));
                done && !in_flight && !self.jobs.iter().any(|j| j.key == *k)
            })
            .collect()
    }

    /// Whether a crash would lose anything running.
    pub fn busy(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// A step outlasted its lease: the row's lease runs out while the job still lives.
    pub fn lose_lease(&mut self, j: usize) {
        let job = self.jobs[j];
        if let Some(Row::InProgress {
            lock, lease_lost, ..
        }) = self.rows.get_mut(&job.key)
        {
            if *lock == job.lock {
                *lease_lost = true;
            }
        }
    }

    /// The process dies and restarts: running jobs vanish, every lock they held has a dead lease.
    pub fn crash(&mut self) {
        self.jobs.clear();
        for row in self.rows.values_mut() {
            if let Row::InProgress { lease_lost, .. } = row {
                *lease_lost = true;
            }
        }
    }

    fn holds(&self, key: Key, lock: u8) -> bool {
        matches!(self.rows.get(&key), Some(Row::InProgress { lock: l, .. }) if *l == lock)
    }

    /// `keys::complete` (sendonce-server): a no-op unless the row is still ours.
    fn complete(&mut self, key: Key, lock: u8, stored: Stored, body: u8) {
        if self.holds(key, lock) {
            self.rows.insert(
                key,
                Row::Done {
                    stored,
                    body: Some(body),
                },
            );
        }
    }

    /// `keys::release` (sendonce-server): deletes the row only if it is still ours.
    fn release(&mut self, key: Key, lock: u8) {
        if self.holds(key, lock) {
            self.rows.remove(&key);
        }
    }

    /// `store::sqlite::commit::commit_transfer`, in its order: fence, UNIQUE guard, balance, authorisation, debit.
    fn commit(&mut self, key: Key, body: u8, lock: u8, fenced: bool, auth: Authorised) -> Answer {
        if fenced && !self.holds(key, lock) {
            return Answer::InUse;
        }
        if let Some(&(_, stored_body)) = self.ledger.iter().find(|(k, _)| *k == key) {
            if stored_body == body {
                self.complete(key, lock, Stored::Created, body);
                return Answer::Created {
                    key,
                    replayed: true,
                };
            }
            self.release(key, lock);
            return Answer::Reused;
        }
        if self.balance() < 1 {
            self.complete(key, lock, Stored::Insufficient, body);
            return Answer::Insufficient { replayed: false };
        }
        if auth == Authorised::No {
            self.release(key, lock);
            return Answer::InUse;
        }
        let at = self.ledger.partition_point(|x| x <= &(key, body));
        self.ledger.insert(at, (key, body));
        self.complete(key, lock, Stored::Created, body);
        Answer::Created {
            key,
            replayed: false,
        }
    }

    /// The reaper (server-mock's `Transfer::recover` on `Engine::reap`) for one lease-lost
    /// key: ledger, then gateway, then release.
    pub fn reap(&mut self, m: &Protocol, key: Key) {
        let Some(&Row::InProgress { lock, body, .. }) = self.rows.get(&key) else {
            return;
        };
        if self.debits(key) > 0 {
            self.complete(key, lock, Stored::Created, body);
        } else if self.gateway.contains(&key) {
            // Finished, never released: a release would let a retry authorise a second time.
            self.commit(key, body, lock, fenced(m), Authorised::Yes);
        } else {
            self.release(key, lock);
        }
    }
}

fn fenced(m: &Protocol) -> bool {
    !m.is(Mutant::NoFence)
}

/// Sends an answer and records what it said about the key.
fn answer(s: &mut State, key: Key, reply: Reply, answer: Answer) {
    s.record_said(answer.said(key));
    // Said either way; but an answer nobody waits for (the phone timed out, or was killed) is not
    // put on the wire, which spares the checker the orderings of its arrival.
    let t = &s.phones[reply.phone as usize].transfers[reply.transfer as usize];
    if t.tag == reply.tag && matches!(t.wire, Wire::Awaiting { .. }) {
        s.net.push(Msg::Answer { reply, answer });
    }
}

fn replay(stored: Stored, key: Key) -> Answer {
    match stored {
        Stored::Created => Answer::Created {
            key,
            replayed: true,
        },
        Stored::Insufficient => Answer::Insufficient { replayed: true },
        Stored::Closed => Answer::NotFound { replayed: true },
    }
}

/// A POST arrives: a seen key answers from its row (before validation); a new key is claimed (phase 1).
pub fn post(s: &mut State, key: Key, body: u8, reply: Reply) {
    match s.server.rows.get(&key).copied() {
        Some(Row::InProgress { body: b, .. }) => {
            let a = if b == body {
                Answer::InUse
            } else {
                Answer::Reused
            };
            answer(s, key, reply, a);
        }
        Some(Row::Done { stored, body: b }) => {
            // A closed key has no request hash: every request under it is "the same" and replays the 404.
            let a = if b.is_none_or(|b| b == body) {
                replay(stored, key)
            } else {
                Answer::Reused
            };
            answer(s, key, reply, a);
        }
        None => {
            let lock = s.server.next_lock;
            s.server.next_lock += 1;
            s.server.rows.insert(
                key,
                Row::InProgress {
                    lock,
                    body,
                    lease_lost: false,
                },
            );
            let job = Job {
                key,
                body,
                reply,
                lock,
                authorised: false,
            };
            let at = s.server.jobs.partition_point(|x| x <= &job);
            s.server.jobs.insert(at, job);
        }
    }
}

/// Job j runs its next phase: the balance pre-check and the gateway (2), or the fenced commit (3).
pub fn step(m: &Protocol, s: &mut State, j: usize) {
    let job = s.server.jobs[j];
    let auth = if job.authorised {
        Authorised::Yes
    } else if s.server.balance() < 1 {
        // A 402 never costs a gateway call: straight to the commit, which stores it.
        Authorised::No
    } else {
        // Idempotent on the key and persisted: a repeat gets the same authorisation.
        s.server.gateway.insert(job.key);
        s.server.jobs[j].authorised = true;
        return;
    };
    s.server.jobs.remove(j);
    let a = s
        .server
        .commit(job.key, job.body, job.lock, fenced(m), auth);
    answer(s, job.key, job.reply, a);
}

/// `GET /v1/transfers?idempotency_key=K` (`http::transfers::get_by_key`): the ledger first, then the row;
/// no row closes the key with the 404 in the same write that checks the ledger again.
pub fn get_by_key(s: &mut State, key: Key, reply: Reply) {
    let a = if s.server.debits(key) > 0 {
        Answer::Found { key }
    } else {
        match s.server.rows.get(&key).copied() {
            Some(Row::Done { stored, .. }) => replay(stored, key),
            Some(Row::InProgress { .. }) => Answer::InUse,
            None => {
                s.server.rows.insert(
                    key,
                    Row::Done {
                        stored: Stored::Closed,
                        body: None,
                    },
                );
                Answer::NotFound { replayed: false }
            }
        }
    };
    answer(s, key, reply, a);
}
