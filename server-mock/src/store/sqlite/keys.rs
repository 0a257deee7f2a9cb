//! Idempotency keys on SQLite as server-mock uses them: the reaper's resolution of a stuck
//! key (the debit itself is `commit`, the gateway's record `gateway`; the key table's shared
//! statements are sendonce-server's `store::sqlite::keys`). PostgreSQL's `keys.rs` makes the
//! same decisions in the same order.

use rusqlite::Connection;

use super::commit::commit_transfer;
use super::gateway::{lookup, settle};
use crate::authorization::Settle;
use crate::ledger;
use crate::ledger::body::record_from_body;
use crate::ledger::decide::Rules;
use crate::store::{Resolved, Stuck};
use sendonce_server::store::sqlite::keys;
use sendonce_server::store::DbError;

/// Resolves one stuck key in one transaction: the ledger says whether money moved, the
/// gateway whether it was authorised; only a key with neither is released.
pub(crate) fn resolve(
    conn: &mut Connection,
    s: &Stuck,
    now_ms: i64,
    rules: Rules,
) -> Result<Resolved, DbError> {
    if !keys::holds(conn, &s.user, &s.key, &s.lock_id)? {
        return Ok(Resolved::Moved);
    }
    if let Some((record, stored_hash)) = ledger::debit_by_key(conn, &s.user, &s.key)? {
        // The debit answers only the request it was made for (the guard of
        // `store::sqlite::commit::commit_transfer`): a key reused with another body after its row expired
        // is released, and its retry gets 422 from that guard instead of a replay of money
        // moved for another body.
        // Either way, an authorisation this holder took after that debit is not used.
        if stored_hash != s.hash {
            keys::release(conn, &s.user, &s.key, &s.lock_id)?;
            settle(conn, &s.user, &s.key, now_ms, Settle::UnlessHeld)?;
            return Ok(Resolved::Released);
        }
        keys::complete(conn, &s.user, &s.key, &s.lock_id, 201, &record.to_json())?;
        settle(conn, &s.user, &s.key, now_ms, Settle::UnlessHeld)?;
        return Ok(Resolved::Completed);
    }
    let record = s
        .body
        .as_deref()
        .and_then(|b| record_from_body(&s.user, &s.key, b, now_ms));
    match (lookup(conn, &s.user, &s.key)?, record) {
        // Authorised: finish it as its holder would have, so the key is never released
        // into a second authorisation. The holder, if still alive, is fenced out.
        (Some(_), Some(record)) => {
            commit_transfer(conn, &record, &s.hash, &s.lock_id, rules)?;
            Ok(Resolved::Finished)
        }
        _ => {
            keys::release(conn, &s.user, &s.key, &s.lock_id)?;
            Ok(Resolved::Released)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::decide::Authorised;
    use crate::ledger::TransferRecord;
    use rusqlite::params;
    use sendonce_server::store::sqlite::Db;

    fn stuck_key(c: &Connection, key: &str, instance: &str, mono: i64) {
        c.execute(
            "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state, lock_id,
                 locked_at_ms, created_at_ms, bucket, lock_instance, lock_mono_ms, request_body)
             VALUES ('u1', ?1, x'00', 'in_progress', 'dead', 0, 0, 0, ?2, ?3,
                     CAST('{\"to_user_id\":\"u2\",\"amount_minor\":7,\"currency\":\"BDT\"}' AS BLOB))",
            params![key, instance, mono],
        )
        .unwrap();
    }

    #[tokio::test]
    async fn ledger_then_gateway_decide_and_only_expired_leases_count() {
        let rules = Rules {
            fenced: true,
            authorised: Authorised::Yes,
            max_balance: i64::MAX / 2,
        };
        let db = Db::open(":memory:", crate::schema::create).unwrap();
        let record = TransferRecord {
            transfer_id: "tr_1".into(),
            from_user_id: "u1".into(),
            to_user_id: "u2".into(),
            amount_minor: 10,
            currency: "BDT".into(),
            note: None,
            created_at_ms: 1_000,
            idempotency_key: "moved".into(),
        };
        let expected = record.to_json();
        let outcomes = db
            .call(move |c| {
                ledger::deposit(c, "u1", 100, "BDT", 0)?;
                stuck_key(c, "moved", "me", 1_000);
                stuck_key(c, "nothing", "me", 1_000);
                stuck_key(c, "authorised", "gone", 50_000);
                stuck_key(c, "fresh", "me", 50_000);
                ledger::insert_debit(c, &record, b"\0")?;
                c.execute(
                    "INSERT INTO gateway_authorizations
                         (user_id, idem_key, authorization_id, calls, created_at_ms)
                     VALUES ('u1', 'authorised', 'auth_1', 1, 0)",
                    [],
                )?;
                let stuck: Vec<Stuck> = keys::stuck(c, "me", 10_000)?
                    .into_iter()
                    .map(Stuck::from)
                    .collect();
                let mut names: Vec<_> = stuck.iter().map(|s| s.key.clone()).collect();
                names.sort();
                assert_eq!(
                    names,
                    ["authorised", "moved", "nothing"],
                    "fresh lease kept"
                );
                stuck
                    .iter()
                    .map(|s| Ok((s.key.clone(), resolve(c, s, 2_000, rules)?)))
                    .collect::<Result<Vec<_>, DbError>>()
            })
            .await
            .unwrap();
        for (key, outcome) in outcomes {
            let want = match key.as_str() {
                "moved" => Resolved::Completed,
                "authorised" => Resolved::Finished,
                _ => Resolved::Released,
            };
            assert_eq!(outcome, want, "{key}");
        }
        let (moved, nothing, authorised, debit) = db
            .call(|c| {
                Ok((
                    keys::read(c, "u1", "moved")?,
                    keys::read(c, "u1", "nothing")?,
                    keys::read(c, "u1", "authorised")?,
                    ledger::debit_by_key(c, "u1", "authorised")?,
                ))
            })
            .await
            .unwrap();
        let moved = moved.unwrap();
        assert!(moved.completed);
        assert_eq!(moved.status, Some(201));
        assert_eq!(
            moved.body,
            Some(expected),
            "rebuilt from the ledger, byte-identical"
        );
        assert!(nothing.is_none(), "released so a retry executes once");
        let authorised = authorised.unwrap();
        assert_eq!((authorised.completed, authorised.status), (true, Some(201)));
        assert_eq!(
            debit.unwrap().0.amount_minor,
            7,
            "finished from the stored body"
        );
    }
}
