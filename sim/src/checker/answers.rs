//! Invariant 6: the server never contradicts its ledger, held against every answer the wire
//! tap and the dashboards saw.

use std::collections::BTreeMap;

use super::Findings;
use crate::tap::KeyAnswer;
use crate::testapi::Entry;

/// Invariant 6: every answer the server gave about a key agrees with the ledger at the end.
pub(super) fn check_answers(
    answers: &[KeyAnswer],
    debits_by_key: &BTreeMap<&str, Vec<&Entry>>,
) -> Findings {
    let mut out = Findings::default();
    for a in answers {
        let debit = debits_by_key
            .get(a.key.as_str())
            .and_then(|d| d.first())
            .and_then(|d| d.transfer_id.as_deref());
        let what = if a.look_up { "look-up" } else { "POST" };
        if a.says_not_moved() && debit.is_some() {
            out.add(
                1,
                format!(
                    "key {}: the server answered a {what} {} {} (no money moved) but the ledger has debit {}",
                    a.key,
                    a.status,
                    a.code.as_deref().unwrap_or(""),
                    debit.unwrap_or_default()
                ),
            );
        } else if (200..300).contains(&a.status)
            && a.transfer_id.is_some()
            && a.transfer_id.as_deref() != debit
        {
            out.add(
                1,
                format!(
                    "key {}: the server answered a {what} {} naming {} but the ledger has {debit:?}",
                    a.key,
                    a.status,
                    a.transfer_id.as_deref().unwrap_or_default()
                ),
            );
        }
    }
    out
}
