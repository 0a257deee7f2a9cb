//! The money decision of phase 3, written once for both stores: from what the fenced
//! transaction read (the debit already made under the key, if any, and both balances) to
//! what it writes and answers. Pure: each store reads, asks [`decide`] and writes the
//! [`Verdict`] with its own SQL (SQLite: `store/sqlite/commit.rs`; PostgreSQL:
//! `store/postgres/commit.rs`), so the rule cannot drift between them.
//!
//! PostgreSQL's one-statement fast path (`FAST_DEBIT`) restates the debit's preconditions
//! in SQL so the common case costs one round trip; it writes only when they all hold and
//! leaves every other case to this decision. `store/postgres/fast_path_tests.rs` checks, on
//! every combination phase 3 can meet, that it debits exactly when [`decide`] says
//! [`Verdict::Debit`].

use axum::http::StatusCode;

use crate::ledger::{MoneyReads, TransferRecord};

/// Largest amount a transfer may move, in minor units (validation's limit; the test API may
/// lower it, never raise it past this).
pub const MAX_AMOUNT_MINOR: i64 = 1_000_000_000_000;
use sendonce_server::{Answer, Problem};

/// What the money transaction enforces besides the ledger's own constraints.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Check the lock first (always, but in a test-only unfenced build).
    pub fenced: bool,
    /// Whether the gateway authorised the payment.
    pub authorised: Authorised,
    /// Highest balance a recipient may reach (far below i64::MAX, so credits in flight
    /// can never overflow a balance into a float).
    pub max_balance: i64,
}

/// Whether the gateway authorised the payment before the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorised {
    /// It did: the commit may move money.
    Yes,
    /// The balance pre-check skipped it: the commit may only store a 402.
    No,
}

/// What phase 3 does, once the fence holds.
#[derive(Debug)]
pub enum Verdict {
    /// Every check passed: the debit, the capture of its authorisation, its outbox event
    /// and the key completed with the 201, together.
    Debit,
    /// No money moves.
    Unmoved(Unmoved),
}

/// A verdict that moves no money: how the key is written, and the answer.
#[derive(Debug)]
pub struct Unmoved {
    /// The key row's write (the fence, on SQLite: it applies only under our lock).
    pub write: KeyWrite,
    /// Whether the key's uncaptured authorisation is voided (`gateway::Settle::
    /// UnlessHeld`): every outcome but a release for a retry, which will use it.
    pub void_authorisation: bool,
    /// The answer.
    pub answer: Answer,
}

/// How a verdict without a debit leaves the key.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyWrite {
    /// Completed with this stored answer (replayed to every retry).
    Complete {
        /// HTTP status.
        status: u16,
        /// Body bytes.
        body: Vec<u8>,
    },
    /// Released: the retry runs the whole request again.
    Release,
}

/// The decision, in its order: the ledger's last guard (money already moved for this key),
/// the sender's balance (402), the recipient's highest balance (422), an unauthorised
/// commit (409, released for the retry); else the debit.
pub fn decide(reads: &MoneyReads, record: &TransferRecord, hash: &[u8], rules: Rules) -> Verdict {
    if let Some((existing, stored_hash)) = &reads.debit {
        return Verdict::Unmoved(already_debited(existing, stored_hash, hash));
    }
    let amount = record.amount_minor;
    let refusal = if reads.balance < amount {
        Some(insufficient_funds(reads.balance, amount))
    } else if recipient_full(reads.recipient_balance, amount, rules.max_balance) {
        Some(recipient_balance_limit())
    } else {
        None
    };
    if let Some(problem) = refusal {
        let write = KeyWrite::Complete {
            status: problem.status.as_u16(),
            body: problem.body_bytes(),
        };
        return Verdict::Unmoved(unmoved(write, true, problem.into()));
    }
    if rules.authorised == Authorised::No {
        // Money arrived since the pre-check: no debit without the gateway. The retry runs
        // the whole path.
        let retry = unmoved(KeyWrite::Release, false, Problem::key_in_use().into());
        return Verdict::Unmoved(retry);
    }
    Verdict::Debit
}

/// The last guard: money already moved for this key (the key row expired or was reaped
/// while an earlier attempt still ran, or a concurrent debit won): the same request
/// replays the ledger's 201, another body gets 422 and the key is released.
pub fn already_debited(existing: &TransferRecord, stored_hash: &[u8], hash: &[u8]) -> Unmoved {
    if stored_hash == hash {
        let body = existing.to_json();
        let write = KeyWrite::Complete {
            status: 201,
            body: body.clone(),
        };
        unmoved(write, true, Answer::replay(201, body))
    } else {
        unmoved(KeyWrite::Release, true, Problem::key_reused().into())
    }
}

fn unmoved(write: KeyWrite, void_authorisation: bool, answer: Answer) -> Unmoved {
    Unmoved {
        write,
        void_authorisation,
        answer,
    }
}

/// The stored 402 of a transfer the balance does not cover.
pub fn insufficient_funds(balance: i64, amount: i64) -> Problem {
    Problem::new(
        StatusCode::PAYMENT_REQUIRED,
        "insufficient_funds",
        format!("balance {balance} is less than amount {amount}"),
    )
}

/// The stored 422 of a transfer that would take the recipient past the highest balance.
pub fn recipient_balance_limit() -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "recipient_balance_limit",
        "the recipient's balance would exceed the highest balance a wallet may hold",
    )
}

/// Whether crediting `amount` takes a recipient holding `balance` past `max_balance`.
pub fn recipient_full(balance: i64, amount: i64, max_balance: i64) -> bool {
    balance.checked_add(amount).is_none_or(|b| b > max_balance)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(amount_minor: i64) -> TransferRecord {
        TransferRecord {
            transfer_id: "tr_1".into(),
            from_user_id: "u1".into(),
            to_user_id: "u2".into(),
            amount_minor,
            currency: "BDT".into(),
            note: None,
            created_at_ms: 0,
            idempotency_key: "k".into(),
        }
    }

    fn reads(balance: i64, recipient_balance: i64, debit: Option<&[u8]>) -> MoneyReads {
        MoneyReads {
            debit: debit.map(|h| (record(5), h.to_vec())),
            balance,
            recipient_balance,
        }
    }

    fn rules(authorised: Authorised) -> Rules {
        Rules {
            fenced: true,
            authorised,
            max_balance: 1_000,
        }
    }

    fn status(v: &Verdict) -> Option<(u16, bool)> {
        match v {
            Verdict::Debit => None,
            Verdict::Unmoved(u) => Some((u.answer.status, u.answer.replayed)),
        }
    }

    /// The guard comes before every balance check: a key whose money moved answers from
    /// the ledger even when the balance no longer covers it (it was spent by that debit).
    #[test]
    fn the_ledger_guard_decides_first() {
        let same = decide(
            &reads(0, 0, Some(b"h")),
            &record(5),
            b"h",
            rules(Authorised::No),
        );
        assert_eq!(status(&same), Some((201, true)));
        let Verdict::Unmoved(same) = same else {
            unreachable!()
        };
        assert_eq!(
            same.write,
            KeyWrite::Complete {
                status: 201,
                body: record(5).to_json()
            }
        );
        let other = decide(
            &reads(0, 0, Some(b"x")),
            &record(5),
            b"h",
            rules(Authorised::Yes),
        );
        assert_eq!(status(&other), Some((422, false)));
    }

    #[test]
    fn refusals_are_stored_and_void_the_authorisation() {
        for (reads, code) in [(reads(4, 0, None), 402), (reads(5, 996, None), 422)] {
            match decide(&reads, &record(5), b"h", rules(Authorised::Yes)) {
                Verdict::Unmoved(Unmoved {
                    write: KeyWrite::Complete { status, .. },
                    void_authorisation: true,
                    answer,
                }) => assert_eq!((status, answer.status), (code, code)),
                v => panic!("{code}: {v:?}"),
            }
        }
    }

    #[test]
    fn an_unauthorised_commit_releases_for_the_retry_and_keeps_the_authorisation() {
        match decide(
            &reads(5, 995, None),
            &record(5),
            b"h",
            rules(Authorised::No),
        ) {
            Verdict::Unmoved(Unmoved {
                write: KeyWrite::Release,
                void_authorisation: false,
                answer,
            }) => assert_eq!(answer.status, 409),
            v => panic!("{v:?}"),
        }
        let ok = decide(
            &reads(5, 995, None),
            &record(5),
            b"h",
            rules(Authorised::Yes),
        );
        assert!(matches!(ok, Verdict::Debit));
    }

    #[test]
    fn a_recipient_at_the_edge_of_i64_is_full() {
        assert!(recipient_full(i64::MAX, 1, i64::MAX));
        assert!(!recipient_full(0, 1_000, 1_000));
        assert!(recipient_full(1, 1_000, 1_000));
    }
}
