//! Stable names for the ids a deterministic ride cannot fix: a phone's local ids (UUID v7, from
//! the OS clock) and the server's transfer and user ids (random). A failing seed's report names
//! them by what they are in the ride, so its replay prints the same sentences.

use std::collections::BTreeMap;

use crate::checker::{Check, PhoneView, ServerView};

/// Id → stable name.
#[derive(Debug, Default)]
pub struct Aliases(BTreeMap<String, String>);

impl Aliases {
    /// `p3.2` for phone 3's third transfer (in the order it was confirmed), `tr@e41` for the transfer
    /// whose debit is ledger entry 41, `user 3` / `pool` for the users (in `users` order, pool last).
    pub fn of_ride(phones: &[PhoneView], server: &ServerView, users: &[String]) -> Self {
        let mut names = BTreeMap::new();
        for phone in phones {
            let mut by_time: Vec<_> = phone.transfers.iter().collect();
            // Local ids are UUID v7: monotonic within the process, so this is the confirmation order.
            by_time.sort_by(|a, b| {
                (a.created_at_ms, &a.local_id).cmp(&(b.created_at_ms, &b.local_id))
            });
            for (n, t) in by_time.iter().enumerate() {
                names.insert(t.local_id.clone(), format!("p{}.{n}", phone.index));
            }
        }
        for e in server.ledger.iter().filter(|e| e.kind == "debit") {
            if let Some(id) = &e.transfer_id {
                names
                    .entry(id.clone())
                    .or_insert_with(|| format!("tr@e{}", e.entry_id));
            }
        }
        for (i, user) in users.iter().enumerate() {
            let name = if i + 1 == users.len() {
                "pool".to_string()
            } else {
                format!("user {i}")
            };
            names.insert(user.clone(), name);
        }
        Self(names)
    }

    /// `text` with every known id replaced by its name.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (id, name) in &self.0 {
            if out.contains(id.as_str()) {
                out = out.replace(id.as_str(), name);
            }
        }
        out
    }

    /// Every failure sentence of `check` with stable names.
    pub fn rename(&self, check: &mut Check) {
        for v in &mut check.verdicts {
            for f in &mut v.failures {
                *f = self.apply(f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_every_known_id() {
        let a = Aliases(
            [
                ("tr_1".to_string(), "tr@e4".to_string()),
                ("usr_9".into(), "pool".into()),
            ]
            .into(),
        );
        assert_eq!(
            a.apply("debit tr_1 by usr_9 and tr_1"),
            "debit tr@e4 by pool and tr@e4"
        );
        assert_eq!(a.apply("nothing here"), "nothing here");
    }
}
