//! The gateway's persisted record of a key: what an authorisation is, when one is voided,
//! and the gateway's counters — the types both stores' gateway statements share.
//!
//! Every authorisation ends **captured or voided**, as a customer's held funds must: the
//! debit's transaction captures the key's authorisation; every other final outcome of a key
//! voids it (a stored 402 or 422, a look-up's closing 404, the guard's answer after an
//! earlier debit, a failed commit that releases the key, a request fenced out after the key
//! got its outcome), and a void is recorded in `gateway_voids`, once per authorisation. A key
//! merely released keeps its authorisation for the retry (the reaper finishes a retry slower
//! than its lease with it). A key voided and then claimed again gets a fresh authorisation.

/// What the gateway returned for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// Gateway-side id, the same for every call with the key.
    pub authorization_id: String,
    /// How many times the key was presented.
    pub calls: u32,
}

/// When a settle (`store::*::keys::settle`) voids the key's uncaptured authorisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Unless a request holds the key: the caller's transaction just gave the key its
    /// outcome without a debit (or released it after a failed commit, or found the key's
    /// debit made for another request), so no authorisation given so far will be captured.
    UnlessHeld,
    /// Only if the key has its outcome (a completed row): a request fenced out sees a key
    /// released, held by a retry, or decided; only the last one will never use the
    /// authorisation it may have written late (the retry's gateway step gets it back, and
    /// the reaper finishes a retry slower than its lease with it).
    IfDecided,
}

/// The gateway's counters, from its tables: they survive restarts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Authorisations given (live, captured and voided).
    pub authorizations: i64,
    /// Calls, repeats included.
    pub calls: i64,
    /// Authorisations captured by a debit.
    pub captures: i64,
    /// Authorisations voided.
    pub voids: i64,
}
