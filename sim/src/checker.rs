//! The invariant checker: DESIGN.md's invariants, checked against the server's ledger at quiescence.

use std::collections::{BTreeMap, BTreeSet};

use sendonce::{Transfer, TransferState};
use serde::Serialize;

use crate::device::Intent;
use crate::seen::Seen;
use crate::tap::WireLog;

mod answers;
use crate::testapi::{Entry, Sms};
use answers::check_answers;

/// Failures listed per verdict at most (the count is always exact).
const MAX_LISTED: usize = 8;

/// Everything one phone knows at the end.
#[derive(Debug, Clone)]
pub struct PhoneView {
    /// Ride index.
    pub index: usize,
    /// Server user id.
    pub user_id: String,
    /// Every transfer in its store.
    pub transfers: Vec<Transfer>,
    /// What its listener saw (keys per transfer).
    pub seen: BTreeMap<String, Seen>,
    /// What its user saw confirmed.
    pub intents: Vec<Intent>,
    /// Double taps that did not return the same transfer.
    pub tap_anomalies: Vec<String>,
}

/// The server's side at quiescence.
#[derive(Debug, Clone)]
pub struct ServerView {
    /// Every ledger entry.
    pub ledger: Vec<Entry>,
    /// Every SMS.
    pub sms: Vec<Sms>,
    /// Sum of all balances before the ride.
    pub balance_before: i64,
    /// Sum of all balances after settle.
    pub balance_after: i64,
}

/// One invariant's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// Short name.
    pub name: &'static str,
    /// Held?
    pub ok: bool,
    /// One line: what was checked, with numbers.
    pub summary: String,
    /// The first failures, each a sentence naming the transfer.
    pub failures: Vec<String>,
}

/// All verdicts plus the headline counts.
#[derive(Debug, Clone, Default)]
pub struct Check {
    /// In the order of DESIGN.md.
    pub verdicts: Vec<Verdict>,
    /// Debits beyond the first, per key and per confirmed transfer.
    pub double_debits: u64,
    /// Confirmed transfers missing from the phone or not final at quiescence.
    pub lost: u64,
    /// Transfers whose device view differs from the server's.
    pub mismatches: u64,
    /// Debits no phone's transfer accounts for.
    pub orphan_debits: u64,
}

impl Check {
    /// True when every invariant held.
    pub fn ok(&self) -> bool {
        self.verdicts.iter().all(|v| v.ok)
    }
}

#[derive(Default)]
struct Findings {
    count: u64,
    listed: Vec<String>,
}

impl Findings {
    fn add(&mut self, n: u64, message: String) {
        self.count += n;
        if self.listed.len() < MAX_LISTED {
            self.listed.push(message);
        }
    }

    fn verdict(self, name: &'static str, summary: String) -> Verdict {
        let mut failures = self.listed;
        if self.count as usize > failures.len() {
            failures.push(format!("... {} in all", self.count));
        }
        Verdict {
            name,
            ok: self.count == 0,
            summary,
            failures,
        }
    }
}

fn label(phone: &PhoneView, t: &Transfer) -> String {
    format!(
        "[{}] (user {}, local {})",
        t.note.as_deref().unwrap_or("?"),
        phone.index,
        t.local_id
    )
}

/// Every key a transfer was ever sent with: its final key, the listener's, and the wire's (by its unique note).
fn keys_of(
    phone: &PhoneView,
    t: &Transfer,
    wire_by_note: &BTreeMap<&str, BTreeSet<&str>>,
    note_count: &BTreeMap<&str, usize>,
) -> BTreeSet<String> {
    let mut keys: BTreeSet<String> = phone
        .seen
        .get(&t.local_id)
        .map(|s| s.keys.clone())
        .unwrap_or_default();
    keys.insert(t.idempotency_key.clone());
    if let Some(note) = t.note.as_deref() {
        if note_count.get(note) == Some(&1) {
            keys.extend(
                wire_by_note
                    .get(note)
                    .into_iter()
                    .flatten()
                    .map(|k| k.to_string()),
            );
        }
    }
    keys
}

/// Checks every invariant.
pub fn check(phones: &[PhoneView], server: &ServerView, wire: &WireLog) -> Check {
    let debits: Vec<&Entry> = server.ledger.iter().filter(|e| e.kind == "debit").collect();
    let mut debits_by_key: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for d in &debits {
        debits_by_key
            .entry(d.idempotency_key.as_deref().unwrap_or(""))
            .or_default()
            .push(d);
    }
    let mut wire_by_note: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (key, uses) in &wire.keys {
        for u in uses {
            if let Some(note) = u.note.as_deref() {
                wire_by_note.entry(note).or_default().insert(key);
            }
        }
    }
    let mut note_count: BTreeMap<&str, usize> = BTreeMap::new();
    for t in phones.iter().flat_map(|p| &p.transfers) {
        *note_count
            .entry(t.note.as_deref().unwrap_or(""))
            .or_default() += 1;
    }
    let credits: BTreeMap<&str, Vec<&Entry>> =
        group(server.ledger.iter().filter(|e| e.kind == "credit"), |e| {
            e.transfer_id.as_deref()
        });

    let mut double = Findings::default();
    let mut one_key = Findings::default();
    let mut lost = Findings::default();
    let mut view = Findings::default();
    let mut attributed: BTreeSet<String> = BTreeSet::new();
    let (mut total, mut final_count) = (0usize, 0usize);

    for (key, ds) in &debits_by_key {
        if ds.len() > 1 {
            double.add(
                ds.len() as u64 - 1,
                format!("key {key}: {} debits under one key", ds.len()),
            );
        }
    }
    for phone in phones {
        let local: BTreeMap<&str, &Transfer> = phone
            .transfers
            .iter()
            .map(|t| (t.local_id.as_str(), t))
            .collect();
        for intent in &phone.intents {
            if !local.contains_key(intent.local_id.as_str()) {
                lost.add(1, format!("[{}] (user {}): confirmed on screen as {} but missing from the phone's store", intent.note, phone.index, intent.local_id));
            }
        }
        for t in &phone.transfers {
            total += 1;
            let keys = keys_of(phone, t, &wire_by_note, &note_count);
            let mine: Vec<&Entry> = keys
                .iter()
                .flat_map(|k| debits_by_key.get(k.as_str()).into_iter().flatten().copied())
                .collect();
            attributed.extend(keys.iter().cloned());
            if keys.len() > 1 {
                one_key.add(1, format!("{}: sent under {} different idempotency keys (a key was minted for a retry)", label(phone, t), keys.len()));
            }
            if mine.len() > 1 {
                let per_key_excess: usize = keys
                    .iter()
                    .map(|k| {
                        debits_by_key
                            .get(k.as_str())
                            .map_or(0, |d| d.len().saturating_sub(1))
                    })
                    .sum();
                let extra = (mine.len() - 1).saturating_sub(per_key_excess);
                if extra > 0 {
                    double.add(
                        extra as u64,
                        format!(
                            "{}: confirmed once, debited {} times: {} (sent under {} keys)",
                            label(phone, t),
                            mine.len(),
                            mine.iter()
                                .map(|d| format!(
                                    "{} under key {}",
                                    d.transfer_id.as_deref().unwrap_or("?"),
                                    d.idempotency_key.as_deref().unwrap_or("?")
                                ))
                                .collect::<Vec<_>>()
                                .join(", "),
                            keys.len()
                        ),
                    );
                }
            }
            if t.state.is_final() {
                final_count += 1;
            } else {
                lost.add(
                    1,
                    format!(
                        "{}: still {:?} at quiescence (attempts {}, last error {:?})",
                        label(phone, t),
                        t.state,
                        t.attempts,
                        t.last_error
                    ),
                );
                continue;
            }
            check_view(phone, t, &mine, &credits, &mut view);
        }
    }

    let mut orphans = Findings::default();
    for d in &debits {
        let key = d.idempotency_key.as_deref().unwrap_or("");
        if !attributed.contains(key) {
            orphans.add(1, format!("debit {} of {} by {} under key {key}: no transfer on any phone accounts for it", d.transfer_id.as_deref().unwrap_or("?"), d.amount_minor, d.user_id));
        }
    }

    for (key, uses) in &wire.keys {
        let bodies: BTreeSet<&[u8]> = uses.iter().map(|u| u.body.as_slice()).collect();
        if bodies.len() > 1 {
            one_key.add(
                1,
                format!("key {key}: sent with {} different bodies", bodies.len()),
            );
        }
    }

    let mut finality = Findings::default();
    for phone in phones {
        for t in &phone.transfers {
            let Some(seen) = phone.seen.get(&t.local_id) else {
                continue;
            };
            if let (Some(first), false) = (seen.first_final, seen.after_final.is_empty()) {
                let later: Vec<String> =
                    seen.after_final.iter().map(|s| format!("{s:?}")).collect();
                finality.add(
                    1,
                    format!(
                        "{}: reached {first:?}, then was seen {} (a final state changed)",
                        label(phone, t),
                        later.join(" -> ")
                    ),
                );
            }
        }
    }

    let mut taps = Findings::default();
    for phone in phones {
        for a in &phone.tap_anomalies {
            taps.add(1, format!("user {}: {a}", phone.index));
        }
    }

    let downstream = check_downstream(&debits, &credits, &server.sms);
    let mut money = Findings::default();
    if server.balance_before != server.balance_after {
        money.add(
            1,
            format!(
                "the sum of all balances moved from {} to {} ({:+})",
                server.balance_before,
                server.balance_after,
                server.balance_after - server.balance_before
            ),
        );
    }

    let answers = check_answers(&wire.answers, &debits_by_key);

    let mut check = Check {
        double_debits: double.count,
        lost: lost.count,
        mismatches: view.count,
        orphan_debits: orphans.count,
        verdicts: Vec::new(),
    };
    let keys_total = debits_by_key.len();
    check.verdicts = vec![
        double.verdict("no double debit", format!("{} debits over {keys_total} keys and {total} transfers: at most one per key and per confirmed transfer", debits.len())),
        one_key.verdict("one key per transfer", format!("{} keys on the wire, each with one body; no key minted for a retry", wire.keys.len())),
        lost.verdict("nothing lost", format!("{final_count}/{total} transfers final on the phones; every confirmed transfer in its phone's store")),
        view.verdict("device view = server view", "Succeeded ⇔ exactly one debit with the same id, amount and recipient; Rejected/Failed ⇔ no debit".into()),
        orphans.verdict("no unexplained debit", "every debit belongs to a transfer some phone confirmed".into()),
        money.verdict("money conserved", format!("sum of balances {} before, {} after settle", server.balance_before, server.balance_after)),
        downstream.verdict("one credit and one SMS per debit", format!("{} debits, {} credits, {} SMS", debits.len(), credits.values().map(Vec::len).sum::<usize>(), server.sms.len())),
        finality.verdict("final is final", "no transfer left a final state (Succeeded, Rejected, Failed) once it reached one".into()),
        taps.verdict("double tap = one transfer", "a second tap while unfinished returns the same transfer".into()),
        answers.verdict("server agrees with its ledger", format!("{} answers about keys (POSTs and look-ups): each 2xx names the key's debit; a 402 or a by-key 404 means no debit, then or later", wire.answers.len())),
    ];
    check
}

/// Operations that waited for the customer (RequiresAction): none may give up while parked.
pub fn check_parked(phones: &[PhoneView]) -> Verdict {
    let mut gave_up = Findings::default();
    let mut parked = 0;
    for phone in phones {
        for t in &phone.transfers {
            let Some(seen) = phone.seen.get(&t.local_id) else {
                continue;
            };
            parked += usize::from(seen.parked);
            if seen.gave_up_parked {
                gave_up.add(1, format!("{}: went from RequiresAction to NeedsAttention (parked operations never give up)", label(phone, t)));
            }
        }
    }
    gave_up.verdict("parked is parked", format!("{parked} operations waited for the customer's strong authentication; none gave up while it waited, each resumed with its key"))
}

fn group<'a, T, I: Iterator<Item = &'a T>>(
    items: I,
    key: impl Fn(&'a T) -> Option<&'a str>,
) -> BTreeMap<&'a str, Vec<&'a T>> {
    let mut map: BTreeMap<&str, Vec<&T>> = BTreeMap::new();
    for item in items {
        map.entry(key(item).unwrap_or("")).or_default().push(item);
    }
    map
}

/// Device view vs server view for one final transfer.
fn check_view(
    phone: &PhoneView,
    t: &Transfer,
    mine: &[&Entry],
    credits: &BTreeMap<&str, Vec<&Entry>>,
    out: &mut Findings,
) {
    let name = label(phone, t);
    match t.state {
        TransferState::Succeeded => {
            if mine.is_empty() {
                return out.add(
                    1,
                    format!(
                        "{name}: Succeeded on the phone but the server has no debit under its key"
                    ),
                );
            }
            // Extra debits are the double-debit verdict's; here the phone's receipt must match one of them.
            let shown = t.server_transfer_id.as_deref();
            let Some(debit) = mine.iter().find(|d| d.transfer_id.as_deref() == shown) else {
                let ids: Vec<&str> = mine
                    .iter()
                    .filter_map(|d| d.transfer_id.as_deref())
                    .collect();
                return out.add(
                    1,
                    format!("{name}: phone shows server transfer {shown:?}, the ledger debit is {ids:?}"),
                );
            };
            let server_id = debit.transfer_id.as_deref();
            if debit.amount_minor != t.amount_minor || debit.user_id != phone.user_id {
                out.add(
                    1,
                    format!(
                        "{name}: phone shows {} from {}, the ledger debited {} from {}",
                        t.amount_minor, phone.user_id, debit.amount_minor, debit.user_id
                    ),
                );
            }
            let to = credits
                .get(server_id.unwrap_or(""))
                .and_then(|c| c.first())
                .map(|c| c.user_id.as_str());
            if to.is_some_and(|to| to != t.to_user_id) {
                out.add(
                    1,
                    format!(
                        "{name}: phone shows recipient {}, the ledger credited {:?}",
                        t.to_user_id, to
                    ),
                );
            }
        }
        TransferState::Rejected | TransferState::Failed if !mine.is_empty() => {
            let reason = t.rejection.as_ref().map(|r| r.code.as_str()).unwrap_or("?");
            out.add(
                1,
                format!(
                    "{name}: {:?} ({reason}) on the phone, but the server debited {} under its key",
                    t.state, mine[0].amount_minor
                ),
            );
        }
        _ => {}
    }
}

/// Every debit has exactly one credit of the same amount and one SMS; nothing downstream without a debit.
fn check_downstream(
    debits: &[&Entry],
    credits: &BTreeMap<&str, Vec<&Entry>>,
    sms: &[Sms],
) -> Findings {
    let mut out = Findings::default();
    let sms_by: BTreeMap<&str, usize> = sms.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.transfer_id.as_str()).or_default() += 1;
        m
    });
    let mut debit_ids = BTreeSet::new();
    for d in debits {
        let id = d.transfer_id.as_deref().unwrap_or("");
        debit_ids.insert(id);
        let c = credits.get(id).map_or(&[][..], Vec::as_slice);
        if c.len() != 1 {
            out.add(
                1,
                format!("transfer {id}: {} credits for one debit", c.len()),
            );
        } else if c[0].amount_minor != d.amount_minor {
            out.add(
                1,
                format!(
                    "transfer {id}: debit {} but credit {}",
                    d.amount_minor, c[0].amount_minor
                ),
            );
        }
        let n = sms_by.get(id).copied().unwrap_or(0);
        if n != 1 {
            out.add(1, format!("transfer {id}: {n} SMS for one debit"));
        }
    }
    for id in credits.keys().chain(sms_by.keys()) {
        if !debit_ids.contains(id) {
            out.add(1, format!("transfer {id}: a credit or SMS without a debit"));
        }
    }
    out
}
