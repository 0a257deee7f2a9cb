//! The whole system as one stateright model: the state, the actions, and which actions are enabled.

use std::fmt;

use stateright::{Model, Property};

use crate::network::{Msg, Network};
use crate::phone::{Phone, Wire};
use crate::server::Server;

/// How far the checker explores: sizes and fault budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// Name printed in reports (`ci`, `deep`).
    pub name: &'static str,
    /// Phones of the same user (one account, one balance).
    pub phones: u8,
    /// Opening balances to start from, in transfers' worth (each transfer moves 1).
    pub balances: &'static [u8],
    /// Taps on Send per phone (the first confirm plus double taps, or a new intent after a no).
    pub taps: u8,
    /// Attempts before the schedule gives up (the horizon in model time, one cap per attempt).
    pub attempts: u8,
    /// Status look-ups per transfer after giving up.
    pub lookups: u8,
    /// Network faults: a request or an answer lost, a request duplicated, an attempt offline.
    pub net_faults: u8,
    /// Steps slower than the lease (the lease is lost while the step still runs).
    pub slow_steps: u8,
    /// App kills (and reopens) between persisted steps.
    pub app_crashes: u8,
    /// Server process kills between phases.
    pub server_crashes: u8,
    /// Key rows may expire (the key window ends) once the client's retry window is over for them.
    pub expiry: bool,
}

impl Bound {
    /// The bound CI runs: one phone, every fault once or twice.
    pub const CI: Bound = Bound {
        name: "ci",
        phones: 1,
        balances: &[0, 2],
        taps: 2,
        attempts: 2,
        lookups: 2,
        net_faults: 2,
        slow_steps: 1,
        app_crashes: 1,
        server_crashes: 1,
        expiry: true,
    };

    /// The deeper bound documented in the README: longer retries, more faults, three opening balances.
    pub const DEEP: Bound = Bound {
        name: "deep",
        phones: 1,
        balances: &[0, 1, 2],
        taps: 2,
        attempts: 3,
        lookups: 2,
        net_faults: 3,
        slow_steps: 2,
        app_crashes: 1,
        server_crashes: 1,
        expiry: true,
    };

    /// Two phones of one user racing for a balance of 1, with a small fault budget.
    pub const PAIR: Bound = Bound {
        name: "pair",
        phones: 2,
        balances: &[1],
        taps: 1,
        attempts: 2,
        lookups: 1,
        net_faults: 2,
        slow_steps: 1,
        app_crashes: 1,
        server_crashes: 1,
        expiry: true,
    };

    /// A bound by name.
    pub fn named(name: &str) -> Option<Bound> {
        match name {
            "ci" => Some(Self::CI),
            "deep" => Some(Self::DEEP),
            "pair" => Some(Self::PAIR),
            _ => None,
        }
    }
}

/// Deliberate bugs switched on in the model (never in the real code) to show the checker finds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// The commit does not check that its request still holds the key's lock.
    NoFence,
    /// Every retry mints a new idempotency key (what `unsafe_new_key_per_retry` does).
    NewKeyPerRetry,
    /// The composer's Send button stays enabled while Waiting.
    ResendInWaiting,
    /// No reaper: a key whose lease ran out stays in progress (shows the liveness check bites).
    NoReaper,
}

impl Mutant {
    /// A mutant by its CLI name.
    pub fn named(name: &str) -> Option<Mutant> {
        match name {
            "no-fence" => Some(Self::NoFence),
            "new-key-per-retry" => Some(Self::NewKeyPerRetry),
            "resend-in-waiting" => Some(Self::ResendInWaiting),
            "no-reaper" => Some(Self::NoReaper),
            _ => None,
        }
    }
}

/// An idempotency key: which phone minted it and its number on that phone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// Minting phone.
    pub phone: u8,
    /// Sequence number on that phone.
    pub n: u8,
}

impl Key {
    /// The key as sent in `Idempotency-Key` (and expected back in a transfer body).
    pub fn wire(self) -> String {
        format!("key-{}-{}", self.phone, self.n)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k{}.{}", self.phone, self.n)
    }
}

/// Fault budgets still available on this path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Budget {
    /// See [`Bound::net_faults`].
    pub net: u8,
    /// See [`Bound::slow_steps`].
    pub slow: u8,
    /// See [`Bound::app_crashes`].
    pub app_crash: u8,
    /// See [`Bound::server_crashes`].
    pub server_crash: u8,
}

/// What the server said about a key, kept to hold it against the ledger then and later (invariant 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Said {
    /// A 201 or a look-up's 200: money moved for this key.
    Debited(Key),
    /// A 402 or a by-key 404: no money moved for this key, ever.
    NotDebited(Key),
}

/// One global state: every phone, the network, the server and what is left of the fault budgets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The phones, by id.
    pub phones: Vec<Phone>,
    /// Messages in flight.
    pub net: Network,
    /// The server's persisted tables and its running requests.
    pub server: Server,
    /// Faults left.
    pub budget: Budget,
    /// Every definitive thing the server said, sorted, without repeats.
    pub said: Vec<Said>,
}

impl State {
    /// Records what an answer said about a key.
    pub fn record_said(&mut self, said: Option<Said>) {
        if let Some(s) = said {
            if let Err(at) = self.said.binary_search(&s) {
                self.said.insert(at, s);
            }
        }
    }
}

/// One step of the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The user taps Send on phone p.
    Tap(u8),
    /// Phone p's sender persists attempt start for transfer t (state Sending, attempts + 1).
    Begin(u8, u8),
    /// The request leaves phone p for transfer t (same key, same bytes).
    Send(u8, u8),
    /// The attempt finds no network (`TransportError::Offline`): a fault.
    Offline(u8, u8),
    /// The attempt times out (`TransportError::Timeout`); a fault while its answer could still come.
    Timeout(u8, u8),
    /// Phone p looks transfer t up by key after giving up.
    LookUp(u8, u8),
    /// Phone p's app is killed and reopened.
    AppCrash(u8),
    /// Message i arrives (request at the server, answer at the phone).
    Deliver(usize),
    /// Message i is lost: a fault.
    Drop(usize),
    /// Request i is delivered twice (a load balancer's replay): a fault.
    Duplicate(usize),
    /// Server request j runs its next phase (gateway, then the fenced commit).
    Step(usize),
    /// Server request j's current step outlasts its lease: a fault.
    Slow(usize),
    /// The reaper resolves a key whose lease ran out.
    Reap(Key),
    /// The server process is killed and restarted on the same database.
    ServerCrash,
    /// Key row k (and its gateway record) expires with its day bucket; the ledger stays.
    Expire(Key),
}

/// The model: a bound, an optional mutant, and whether only fault-free steps are offered.
#[derive(Debug, Clone, Copy)]
pub struct Protocol {
    /// Sizes and budgets.
    pub bound: Bound,
    /// The bug switched on, if any.
    pub mutant: Option<Mutant>,
    /// Fair mode: no faults, no taps, no look-up limit (used to drain a state for liveness).
    pub fair: bool,
    /// Check only this property (to search for its shortest counterexample).
    pub only: Option<&'static str>,
}

impl Protocol {
    /// The model at this bound with this mutant.
    pub fn new(bound: Bound, mutant: Option<Mutant>) -> Self {
        Self {
            bound,
            mutant,
            fair: false,
            only: None,
        }
    }

    /// Whether this mutant is on.
    pub fn is(&self, m: Mutant) -> bool {
        self.mutant == Some(m)
    }

    /// The same model offering only the steps of a fair, fault-free world.
    pub fn fair(&self) -> Self {
        Self {
            fair: true,
            ..*self
        }
    }

    fn phone_actions(&self, s: &State, p: &Phone, out: &mut Vec<Action>) {
        let id = p.id;
        // A tap while Send is disabled returns the same transfer and changes nothing: not a step.
        if !self.fair && p.taps_left > 0 && crate::phone::send_enabled(self, &p.composer()) {
            out.push(Action::Tap(id));
        }
        for (i, t) in p.transfers.iter().enumerate() {
            let i = i as u8;
            match t.wire {
                Wire::Idle if t.sendable() => out.push(Action::Begin(id, i)),
                Wire::Idle
                    if t.state == sendonce::TransferState::NeedsAttention
                        && (self.fair || t.lookups < self.bound.lookups) =>
                {
                    out.push(Action::LookUp(id, i))
                }
                Wire::Begun => {
                    out.push(Action::Send(id, i));
                    if !self.fair && s.budget.net > 0 {
                        out.push(Action::Offline(id, i));
                    }
                }
                Wire::Awaiting { .. } => {
                    let pending = s.net.awaits(id, i, t.tag) || s.server.serves(id, i, t.tag);
                    // With nothing left to answer, the timeout is what the phone sees next; while an
                    // answer may still come, timing out first is the "answer lost" fault.
                    if !pending || (!self.fair && s.budget.net > 0) {
                        out.push(Action::Timeout(id, i));
                    }
                }
                Wire::Idle => {}
            }
        }
        let in_flight = p.transfers.iter().any(|t| t.wire != Wire::Idle);
        if !self.fair && in_flight && s.budget.app_crash > 0 {
            out.push(Action::AppCrash(id));
        }
    }
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let b = &self.bound;
        b.balances
            .iter()
            .map(|&opening| State {
                phones: (0..b.phones).map(|id| Phone::new(id, b.taps)).collect(),
                net: Network::default(),
                server: Server::new(opening),
                budget: Budget {
                    net: b.net_faults,
                    slow: b.slow_steps,
                    app_crash: b.app_crashes,
                    server_crash: b.server_crashes,
                },
                said: Vec::new(),
            })
            .collect()
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        for p in &s.phones {
            self.phone_actions(s, p, out);
        }
        for (i, m) in s.net.msgs.iter().enumerate() {
            out.push(Action::Deliver(i));
            if !self.fair && s.budget.net > 0 {
                out.push(Action::Drop(i));
                if !matches!(m, Msg::Answer { .. }) {
                    out.push(Action::Duplicate(i));
                }
            }
        }
        for (j, job) in s.server.jobs.iter().enumerate() {
            out.push(Action::Step(j));
            if !self.fair && s.budget.slow > 0 && s.server.lease_held(job) {
                out.push(Action::Slow(j));
            }
        }
        if !self.is(Mutant::NoReaper) {
            for key in s.server.reapable() {
                out.push(Action::Reap(key));
            }
        }
        if !self.fair && s.budget.server_crash > 0 && s.server.busy() {
            out.push(Action::ServerCrash);
        }
        if !self.fair && self.bound.expiry {
            out.extend(s.server.expirable(s).into_iter().map(Action::Expire));
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut n = s.clone();
        match action {
            Action::Tap(p) => crate::phone::tap(self, &mut n, p),
            Action::Begin(p, t) => crate::phone::begin(self, &mut n, p, t),
            Action::Send(p, t) => crate::phone::send(&mut n, p, t),
            Action::Offline(p, t) => {
                n.budget.net -= 1;
                crate::phone::conclude(self, &mut n, p, t, Err(crate::phone::offline()));
            }
            Action::Timeout(p, t) => {
                let tag = n.phones[p as usize].transfers[t as usize].tag;
                if s.net.awaits(p, t, tag) || s.server.serves(p, t, tag) {
                    n.budget.net -= 1;
                }
                crate::phone::conclude(self, &mut n, p, t, Err(crate::phone::timeout()));
            }
            Action::LookUp(p, t) => crate::phone::look_up(&mut n, p, t),
            Action::AppCrash(p) => {
                n.budget.app_crash -= 1;
                n.phones[p as usize].crash();
                // Its connections are gone: answers on their way to it are read by nobody.
                n.net
                    .msgs
                    .retain(|m| !matches!(m, Msg::Answer { reply, .. } if reply.phone == p));
            }
            Action::Deliver(i) => crate::network::deliver(self, &mut n, i),
            Action::Drop(i) => {
                n.budget.net -= 1;
                n.net.msgs.remove(i);
            }
            Action::Duplicate(i) => {
                n.budget.net -= 1;
                let m = n.net.msgs[i];
                n.net.push(m);
            }
            Action::Step(j) => crate::server::step(self, &mut n, j),
            Action::Slow(j) => {
                n.budget.slow -= 1;
                n.server.lose_lease(j);
            }
            Action::Reap(key) => n.server.reap(self, key),
            Action::ServerCrash => {
                n.budget.server_crash -= 1;
                n.server.crash();
            }
            Action::Expire(key) => {
                n.server.rows.remove(&key);
                n.server.gateway.remove(&key);
            }
        }
        Some(n)
    }

    fn format_step(&self, last: &State, action: Action) -> Option<String> {
        Some(crate::properties::describe(self, last, action))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut all = crate::properties::all();
        if let Some(name) = self.only {
            all.retain(|p| p.name == name);
        }
        all
    }
}
