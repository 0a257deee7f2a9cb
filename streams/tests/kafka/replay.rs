//! A replay of every topic from offset 0 after 1,000 transfers: the relay republishes its
//! whole outbox, and every consumer group starts again from the oldest offset. Balances,
//! credits and SMS counts do not move.

use sendonce_streams::broker::Isolation;
use sendonce_streams::event::APPROVED;

use crate::support::{absorbed, count, not_once, read_all, Bin, Pipeline, RECEIVED_SMS};

const PAYERS: usize = 10;
const PER_PAYER: usize = 100;
const LARGE: i64 = 5_000;

/// What the consumers' databases hold: (credits, recipient SMS, large SMS, balances).
fn snapshot(p: &Pipeline) -> (i64, i64, i64, Vec<(String, i64)>) {
    let wallet = p.db("wallet.db");
    let mut stmt = wallet
        .prepare("SELECT user_id, balance_minor FROM balances ORDER BY user_id")
        .unwrap();
    let balances = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (
        count(&wallet, "SELECT COUNT(*) FROM credits"),
        count(
            &p.db("sms.db"),
            "SELECT COUNT(*) FROM sms WHERE kind = 'received'",
        ),
        count(
            &p.db("sms.db"),
            "SELECT COUNT(*) FROM sms WHERE kind = 'large'",
        ),
        balances,
    )
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn replaying_every_topic_from_offset_zero_after_1000_transfers_changes_nothing() {
    let mut p = Pipeline::start("replay-1000", LARGE, None);
    let api = p.api();
    let mut payers = Vec::new();
    let mut payees = Vec::new();
    for i in 0..PAYERS {
        payers.push(api.user(&format!("payer{i}"), 1_000_000).await);
        payees.push(api.user(&format!("payee{i}"), 0).await);
    }
    // Ten payers at once, each its 100 transfers in order; every tenth is large.
    let mut tasks = Vec::new();
    for (i, (payer, payee)) in payers.into_iter().zip(payees).enumerate() {
        let api = p.api();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for j in 0..PER_PAYER {
                let amount = if j % 10 == 0 { LARGE } else { 100 + j as i64 };
                ids.push(
                    api.transfer(&payer, &payee, amount, &format!("r{i}-{j}"))
                        .await,
                );
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await.unwrap());
    }
    assert_eq!(ids.len(), PAYERS * PER_PAYER);
    p.settle().await;
    let before = snapshot(&p);
    assert_eq!(not_once(&p.db("wallet.db"), "credits", &ids), vec![]);
    assert_eq!(not_once(&p.db("sms.db"), RECEIVED_SMS, &ids), vec![]);
    assert_eq!(
        before.2,
        (PAYERS * PER_PAYER / 10) as i64,
        "one large SMS per large transfer"
    );

    // Every topic from offset 0: the relay's outbox republished onto transfers.done, and
    // each group's offsets deleted while it is stopped.
    let b = crate::support::broker(&p.url);
    for bin in [Bin::FraudCheck, Bin::Wallet, Bin::Sms] {
        p.proc(bin).take().unwrap().kill();
    }
    for group in ["fraud-check", "wallet", "sms"] {
        b.reset_group(&b.name(group)).unwrap();
    }
    let replayed = p.api().replay_outbox(0).await;
    assert_eq!(replayed, (PAYERS * PER_PAYER) as i64);
    for bin in [Bin::FraudCheck, Bin::Wallet, Bin::Sms] {
        p.restart(bin, None);
    }
    p.settle().await;

    assert_eq!(
        snapshot(&p),
        before,
        "the replay moved balances or sent SMS"
    );
    // It really went through again: each consumer absorbed every event at least twice
    // (the outbox republish and the offset-0 replay), and the approved topic holds them.
    let n = (PAYERS * PER_PAYER) as i64;
    assert!(
        absorbed(&p.db("wallet.db")) >= 2 * n,
        "wallet absorbed too few"
    );
    assert!(absorbed(&p.db("sms.db")) >= 2 * n, "sms absorbed too few");
    assert!(read_all(&p.url, APPROVED, Isolation::ReadCommitted).len() as i64 >= 2 * n);
}
