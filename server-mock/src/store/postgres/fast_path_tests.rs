//! The one-statement debit (`commit::FAST_DEBIT`) against the full decision path
//! (`commit::decided`, which asks `ledger::decide`: the decision SQLite's commit asks
//! too), on every combination of what phase 3 can find: the fast statement
//! must debit exactly when the full path would, answer the same, and leave everything
//! else to it untouched. Two fresh databases of the test cluster, one per path, set up
//! alike; skipped (and passing) without `SENDONCE_TEST_POSTGRES`.

use super::commit::{decided, fast_debit};
use super::tests::fresh;
use super::*;
use crate::ledger::decide::Authorised;
use crate::store::{Fixtures, NewUser};

const AMOUNT: i64 = 100;
const MAX_BALANCE: i64 = 1_000;

/// One situation phase 3 can meet.
#[derive(Debug, Clone, Copy)]
struct Case {
    /// The sender's balance (0: no balance row at all).
    sender: i64,
    /// The recipient's balance (950: one more transfer passes the highest balance).
    recipient: i64,
    /// A debit for this key already in the ledger: `Some(same request)`.
    debited: Option<bool>,
    /// Whether we still hold the key's lock.
    held: bool,
    authorised: Authorised,
}

fn cases() -> Vec<Case> {
    let mut all = Vec::new();
    for sender in [0, AMOUNT - 1, 1_000] {
        for recipient in [0, 950] {
            for debited in [None, Some(true), Some(false)] {
                for held in [true, false] {
                    for authorised in [Authorised::Yes, Authorised::No] {
                        all.push(Case {
                            sender,
                            recipient,
                            debited,
                            held,
                            authorised,
                        });
                    }
                }
            }
        }
    }
    all
}

fn user(id: String, balance_minor: i64) -> NewUser {
    NewUser {
        token_hash: format!("sha256:{id}"),
        display_name: id.clone(),
        user_id: id,
        currency: "BDT".into(),
        balance_minor,
        now_ms: 0,
        token_expires_at_ms: i64::MAX,
    }
}

/// Sets case `n` up on `store`; returns the commit's record.
async fn set_up(store: &PgStore, n: usize, c: Case) -> TransferRecord {
    let (sender, recipient, key) = (format!("s{n}"), format!("r{n}"), format!("k{n}"));
    store
        .create_user(user(sender.clone(), c.sender))
        .await
        .unwrap();
    store
        .create_user(user(recipient.clone(), c.recipient))
        .await
        .unwrap();
    if let Some(same) = c.debited {
        // An earlier attempt's debit whose key row has gone (expired, then claimed again).
        let hash: &[u8] = if same { b"h" } else { b"other" };
        exec(
            &store.client().await.unwrap(),
            "INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, request_hash,
                                 counterparty, currency, created_at_ms)
             VALUES ($1, 'debit', 1, 'tr_earlier', $2, $3, $4, 'BDT', 5)",
            &[&sender, &key, &hash, &recipient],
        )
        .await
        .unwrap();
    }
    let (claim, _) = store
        .claim_with_balance(NewClaim {
            user_id: sender.clone(),
            key: key.clone(),
            hash: b"h".to_vec(),
            lock_id: "lock".into(),
            body: b"{}".to_vec(),
            now_ms: 10,
            bucket_width_ms: 86_400_000,
        })
        .await
        .unwrap();
    assert!(matches!(claim, Claim::Acquired), "{claim:?}");
    TransferRecord {
        transfer_id: format!("tr{n}"),
        from_user_id: sender,
        to_user_id: recipient,
        amount_minor: AMOUNT,
        currency: "BDT".into(),
        note: Some("rent".into()),
        created_at_ms: 20,
        idempotency_key: key,
    }
}

/// Everything phase 3 can change, for one case.
async fn state(store: &PgStore, r: &TransferRecord) -> Vec<String> {
    let c = store.client().await.unwrap();
    let rows = rows(
        &c,
        "SELECT 'ledger ' || kind || ' ' || amount_minor || ' ' || COALESCE(transfer_id, '')
         FROM ledger WHERE user_id IN ($1, $2) AND kind <> 'deposit'
         UNION ALL SELECT 'key ' || state || ' ' || COALESCE(response_status, 0) || ' '
                          || encode(COALESCE(response_body, ''), 'escape')
         FROM idempotency_keys WHERE user_id = $1
         UNION ALL SELECT 'outbox ' || convert_from(payload, 'UTF8') FROM sendonce_outbox
         WHERE convert_from(payload, 'UTF8')::jsonb ->> 'transfer_id' = $3
         UNION ALL SELECT 'balance ' || user_id || ' ' || balance_minor
         FROM balances WHERE user_id IN ($1, $2)
         ORDER BY 1",
        &[&r.from_user_id, &r.to_user_id, &r.transfer_id],
    )
    .await
    .unwrap();
    rows.iter().map(|row| row.get(0)).collect()
}

#[tokio::test]
async fn the_one_statement_debit_decides_as_the_full_path_in_every_case() {
    let Some(fast) = fresh(2).await else { return };
    let full = fresh(2).await.expect("a second database");
    let mut debits = 0;
    for (n, c) in cases().into_iter().enumerate() {
        let (a, b) = (set_up(&fast, n, c).await, set_up(&full, n, c).await);
        let lock_id = if c.held { "lock" } else { "lost" };
        let rules = Rules {
            fenced: true,
            authorised: c.authorised,
            max_balance: MAX_BALANCE,
        };
        // The fast path as `commit` takes it, then the full path where it wrote nothing.
        let fast_debited = c.authorised == Authorised::Yes
            && fast_debit(&fast, &a, &a.to_json(), b"h", lock_id, MAX_BALANCE)
                .await
                .unwrap();
        let fast_answer = if fast_debited {
            Answer::committed(a.to_json())
        } else {
            decided(&fast, &a, b"h", lock_id, rules).await.unwrap()
        };
        let full_answer = decided(&full, &b, b"h", lock_id, rules).await.unwrap();
        let shape = |x: &Answer| (x.status, x.body.clone(), x.replayed, x.committed);
        assert_eq!(shape(&fast_answer), shape(&full_answer), "case {n}: {c:?}");
        assert_eq!(fast_debited, full_answer.committed, "case {n}: {c:?}");
        assert_eq!(
            state(&fast, &a).await,
            state(&full, &b).await,
            "case {n}: {c:?}"
        );
        debits += usize::from(fast_debited);
    }
    // Held, authorised, enough money, room at the recipient, no earlier debit.
    assert_eq!(debits, 1, "exactly one case debits");
}
