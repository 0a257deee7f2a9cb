//! What must hold (DESIGN.md invariants 1, 2, 3, 4, 6 and liveness), and a readable form of each step.

use sendonce::TransferState;
use stateright::{Model, Property};

use crate::model::{Action, Protocol, Said, State};
use crate::network::Msg;
use crate::phone::Transfer;
use crate::server::Row;

/// Invariant 1.
pub const NO_DOUBLE_DEBIT: &str = "inv1: at most one debit per key and per transfer";
/// Invariant 2 (safety half).
pub const DEVICE_AGREES: &str =
    "inv2: a final device state agrees with the ledger (Succeeded = one debit, Rejected/Failed = none), then and later";
/// Invariant 3 (the model's share of it).
pub const MONEY_CONSERVED: &str = "inv3: balance = opening - debits, never below zero";
/// Invariant 4, first half.
pub const NO_NEW_KEY: &str = "inv4: no key minted for a retry, no body changed under a key";
/// Invariant 4, second half: the composer.
pub const ONE_INTENT: &str =
    "inv4: one intent, one transfer (a new one only after a definitive no)";
/// Final is final.
pub const FINAL_IS_FINAL: &str = "final is final";
/// Invariant 6.
pub const ANSWERS_AGREE: &str =
    "inv6: every answer the server gave about a key agrees with the ledger, then and later";
/// Invariant 2 (liveness half), under a fair network.
pub const LIVENESS: &str =
    "liveness: from every state, a fair network makes every confirmed transfer final and agree with the ledger";

/// Every property, in report order.
pub fn all() -> Vec<Property<Protocol>> {
    vec![
        Property::always(NO_DOUBLE_DEBIT, |_, s| no_double_debit(s)),
        Property::always(DEVICE_AGREES, |_, s| device_agrees(s)),
        Property::always(MONEY_CONSERVED, |_, s: &State| s.server.balance() >= 0),
        Property::always(NO_NEW_KEY, |_, s| no_new_key(s)),
        Property::always(ONE_INTENT, |_, s| one_intent(s)),
        Property::always(FINAL_IS_FINAL, |_, s| final_is_final(s)),
        Property::always(ANSWERS_AGREE, |_, s| answers_agree(s)),
        Property::always(LIVENESS, |m, s| drain(m, s).1),
        // Examples: each must be reachable, or the properties above hold vacuously.
        Property::sometimes("example: a transfer succeeds", |_, s| {
            transfers(s).any(|t| t.state == TransferState::Succeeded)
        }),
        Property::sometimes("example: a 402 rejects a transfer", |_, s| {
            transfers(s).any(|t| t.state == TransferState::Rejected)
        }),
        Property::sometimes("example: a look-up resolves a given-up transfer", |_, s| {
            transfers(s).any(|t| t.lookups > 0 && t.state.is_final())
        }),
        Property::sometimes(
            "example: a server crash and a lost lease, then success",
            |_, s: &State| {
                s.budget.server_crash == 0
                    && s.budget.slow == 0
                    && transfers(s).any(|t| t.state == TransferState::Succeeded)
            },
        ),
        Property::sometimes(
            "example: an app crash mid-attempt, then success",
            |_, s: &State| {
                s.budget.app_crash == 0 && transfers(s).any(|t| t.state == TransferState::Succeeded)
            },
        ),
    ]
}

fn transfers(s: &State) -> impl Iterator<Item = &Transfer> {
    s.phones.iter().flat_map(|p| p.transfers.iter())
}

fn debits_of(s: &State, t: &Transfer) -> usize {
    t.keys.iter().map(|k| s.server.debits(*k)).sum()
}

fn no_double_debit(s: &State) -> bool {
    let per_key = s.server.ledger.windows(2).all(|w| w[0].0 != w[1].0);
    per_key && transfers(s).all(|t| debits_of(s, t) <= 1)
}

fn device_agrees(s: &State) -> bool {
    transfers(s).all(|t| match t.state {
        TransferState::Succeeded => debits_of(s, t) == 1,
        TransferState::Rejected | TransferState::Failed => debits_of(s, t) == 0,
        _ => true,
    })
}

fn no_new_key(s: &State) -> bool {
    let body_of = |key| transfers(s).find(|t| t.keys.contains(&key)).map(|t| t.body);
    let sent = s.net.msgs.iter().filter_map(|m| match *m {
        Msg::Post { key, body, .. } => Some((key, body)),
        _ => None,
    });
    let held = s.server.rows.iter().filter_map(|(k, r)| match *r {
        Row::InProgress { body, .. } => Some((*k, body)),
        Row::Done { body, .. } => body.map(|b| (*k, b)),
    });
    let jobs = s.server.jobs.iter().map(|j| (j.key, j.body));
    transfers(s).all(|t| t.keys.len() == 1)
        && sent
            .chain(held)
            .chain(jobs)
            .all(|(k, b)| body_of(k) == Some(b))
}

fn one_intent(s: &State) -> bool {
    s.phones.iter().all(|p| {
        p.transfers
            .windows(2)
            .all(|w| matches!(w[0].state, TransferState::Rejected | TransferState::Failed))
    })
}

fn final_is_final(s: &State) -> bool {
    transfers(s).all(|t| t.first_final.is_none_or(|f| f == t.state))
}

fn answers_agree(s: &State) -> bool {
    s.said.iter().all(|said| match *said {
        Said::Debited(k) => s.server.debits(k) == 1,
        Said::NotDebited(k) => s.server.debits(k) == 0,
    })
}

/// Steps after which a drain counts as going round without end.
pub const DRAIN_LIMIT: usize = 256;

/// Order in which the fair world takes its steps: the server first, then the wire, then the phones.
fn priority(a: &Action) -> u8 {
    match a {
        Action::Step(_) => 0,
        Action::Reap(_) => 1,
        Action::Deliver(_) => 2,
        Action::Timeout(..) => 3,
        Action::Send(..) => 4,
        Action::Begin(..) => 5,
        Action::LookUp(..) => 6,
        _ => 7,
    }
}

/// Runs the fair world from `s` (no faults, no new taps, time advanced) until nothing moves; returns the
/// end state, whether every transfer ended final and agreeing with the ledger, and the steps taken.
pub fn drain(m: &Protocol, s: &State) -> (State, bool, Vec<Action>) {
    let fair = m.fair();
    let mut cur = s.clone();
    let mut taken = Vec::new();
    let mut actions = Vec::new();
    for _ in 0..DRAIN_LIMIT {
        actions.clear();
        fair.actions(&cur, &mut actions);
        let Some(a) = actions.iter().copied().min_by_key(priority) else {
            let ok = transfers(&cur).all(|t| t.state.is_final()) && device_agrees(&cur);
            return (cur, ok, taken);
        };
        taken.push(a);
        cur = fair.next_state(&cur, a).expect("every action moves");
    }
    (cur, false, taken)
}

/// One step in words, with what it changed.
pub fn describe(m: &Protocol, s: &State, a: Action) -> String {
    let what = match a {
        Action::Tap(p) => format!(
            "phone {p}: user taps Send (screen {:?})",
            composer_name(s, p)
        ),
        Action::Begin(p, t) => format!(
            "phone {p}: sender persists the start of an attempt on {}",
            key(s, p, t)
        ),
        Action::Send(p, t) => format!(
            "phone {p}: POST /v1/transfers, Idempotency-Key {}",
            key(s, p, t)
        ),
        Action::Offline(p, t) => format!(
            "phone {p}: attempt on {} finds no network (offline)",
            key(s, p, t)
        ),
        Action::Timeout(p, t) => format!("phone {p}: request on {} times out", key(s, p, t)),
        Action::LookUp(p, t) => format!(
            "phone {p}: GET /v1/transfers?idempotency_key={}",
            key(s, p, t)
        ),
        Action::AppCrash(p) => format!("phone {p}: app killed and reopened"),
        Action::Deliver(i) => format!("network delivers {}", msg(&s.net.msgs[i])),
        Action::Drop(i) => format!("network loses {}", msg(&s.net.msgs[i])),
        Action::Duplicate(i) => format!("network duplicates {}", msg(&s.net.msgs[i])),
        Action::Step(j) => {
            let job = s.server.jobs[j];
            let phase = match (job.authorised, m.is(crate::model::Mutant::NoFence)) {
                (false, _) => "balance check + gateway",
                (true, false) => "fenced commit",
                (true, true) => "commit (fence removed)",
            };
            format!(
                "server: request on {} (lock {}) runs its {phase}",
                job.key, job.lock
            )
        }
        Action::Slow(j) => format!(
            "server: the step of {} outlasts its lease (lease lost, request still running)",
            s.server.jobs[j].key
        ),
        Action::Reap(k) => format!("reaper: resolves {k}"),
        Action::ServerCrash => "server process killed and restarted".to_string(),
        Action::Expire(k) => format!("key window of {k} ends: its row and gateway record expire"),
    };
    let Some(n) = m.next_state(s, a) else {
        return what;
    };
    let mut changes = Vec::new();
    for (p0, p1) in s.phones.iter().zip(&n.phones) {
        for (i, t1) in p1.transfers.iter().enumerate() {
            match p0.transfers.get(i) {
                Some(t0) if t0.state != t1.state || t0.keys != t1.keys => {
                    changes.push(format!("{} {:?} -> {:?}", t1.key(), t0.state, t1.state))
                }
                None => changes.push(format!("mints {} (Pending)", t1.key())),
                _ => {}
            }
        }
    }
    for (k, r) in &n.server.rows {
        if s.server.rows.get(k) != Some(r) {
            changes.push(format!("row {k}: {}", row(r)));
        }
    }
    for k in s
        .server
        .rows
        .keys()
        .filter(|k| !n.server.rows.contains_key(k))
    {
        changes.push(format!("row {k}: released"));
    }
    for k in n.server.gateway.difference(&s.server.gateway) {
        changes.push(format!("gateway authorises {k}"));
    }
    if n.server.ledger.len() > s.server.ledger.len() {
        let new: Vec<_> = n
            .server
            .ledger
            .iter()
            .filter(|d| !s.server.ledger.contains(d))
            .collect();
        changes.push(format!(
            "LEDGER DEBIT {}",
            new.iter()
                .map(|(k, _)| k.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    for m1 in n
        .net
        .msgs
        .iter()
        .filter(|x| matches!(x, Msg::Answer { .. }))
    {
        if n.net.msgs.iter().filter(|x| *x == m1).count()
            > s.net.msgs.iter().filter(|x| *x == m1).count()
        {
            changes.push(format!("answers {}", msg(m1)));
        }
    }
    if changes.is_empty() {
        what
    } else {
        format!("{what}  => {}", changes.join("; "))
    }
}

fn key(s: &State, p: u8, t: u8) -> String {
    s.phones[p as usize].transfers[t as usize].key().to_string()
}

fn composer_name(s: &State, p: u8) -> String {
    let c = s.phones[p as usize].composer();
    format!("{c:?}")
        .split([' ', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

fn row(r: &Row) -> String {
    match r {
        Row::InProgress {
            lock, lease_lost, ..
        } => {
            format!(
                "IN_PROGRESS lock {lock}{}",
                if *lease_lost { ", lease lost" } else { "" }
            )
        }
        Row::Done { stored, .. } => format!("completed {stored:?}"),
    }
}

fn msg(m: &Msg) -> String {
    match m {
        Msg::Post { key, reply, .. } => format!(
            "POST {key} (from phone {}, request {})",
            reply.phone, reply.tag
        ),
        Msg::Get { key, reply } => format!(
            "GET by key {key} (from phone {}, request {})",
            reply.phone, reply.tag
        ),
        Msg::Answer { reply, answer } => {
            let r = answer.http();
            let code = serde_json::from_slice::<serde_json::Value>(&r.body)
                .ok()
                .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_owned))
                .unwrap_or_default();
            let replay = if r.header("idempotent-replayed").is_some() {
                " (replayed)"
            } else {
                ""
            };
            let what = format!("{} {code}{replay}", r.status);
            format!(
                "{} to phone {} request {}",
                what.trim_end(),
                reply.phone,
                reply.tag
            )
        }
    }
}
