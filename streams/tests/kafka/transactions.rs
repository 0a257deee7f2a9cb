//! Kafka's own guarantees as the pipeline uses them: aborted transactions are invisible
//! to `read_committed` readers, and a second fraud check with the same
//! `transactional.id` fences the first (a paused zombie that wakes up writes nothing).

use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use sendonce_streams::broker::Isolation;
use sendonce_streams::crash;
use sendonce_streams::event::{APPROVED, DONE};

use crate::support::{
    broker, broker_url, envelopes, not_once, read_all, wait_caught_up, Bin, Pipeline, LARGE_SMS,
};

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn read_committed_sees_committed_transactions_only() {
    let url = broker_url("txn-visibility");
    let b = broker(&url);
    b.ensure_topics().unwrap();
    let producer: BaseProducer = b
        .idempotent_producer()
        .set("transactional.id", b.name("txn-visibility"))
        .create()
        .unwrap();
    let t = Duration::from_secs(30);
    producer.init_transactions(t).unwrap();
    let topic = b.name(APPROVED);
    let write = |first: i64| {
        for e in envelopes(first, 5, "usr_payee", 100) {
            let bytes = e.to_bytes();
            producer
                .send(BaseRecord::to(&topic).key(e.key()).payload(&bytes))
                .map_err(|(e, _)| e)
                .unwrap();
        }
        producer.flush(t).unwrap();
    };
    producer.begin_transaction().unwrap();
    write(1);
    producer.abort_transaction(t).unwrap();
    producer.begin_transaction().unwrap();
    write(100);
    producer.commit_transaction(t).unwrap();

    let mut committed: Vec<i64> = read_all(&url, APPROVED, Isolation::ReadCommitted)
        .iter()
        .map(|e| e.event_id)
        .collect();
    committed.sort();
    assert_eq!(committed, (100..105).collect::<Vec<_>>());
    let uncommitted = read_all(&url, APPROVED, Isolation::ReadUncommitted);
    assert_eq!(
        uncommitted.len(),
        10,
        "read_uncommitted sees the aborted five too"
    );
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn a_second_fraud_check_fences_the_paused_first_one() {
    const N: usize = 12;
    let mut p = Pipeline::start(
        "zombie",
        1,
        Some((Bin::FraudCheck, crash::FRAUD_BEFORE_COMMIT)),
    );
    let api = p.api();
    let payer = api.user("payer", 1_000 * N as i64).await;
    let payee = api.user("payee", 0).await;
    let mut ids = Vec::new();
    for i in 0..N {
        ids.push(
            api.transfer(&payer, &payee, 1_000, &format!("zombie-{i}"))
                .await,
        );
    }
    // A is paused inside its first transaction: output written, nothing committed.
    let mut zombie = p.fraud.take().unwrap();
    zombie.wait_line(&format!("CRASHPOINT {}", crash::FRAUD_BEFORE_COMMIT));
    // B, same transactional.id: its init_transactions fences A and aborts A's transaction.
    p.restart(Bin::FraudCheck, None);
    wait_caught_up(&p.url, "fraud-check", DONE).await;
    p.settle().await;
    // A wakes up and tries to commit: it must be refused and stop.
    zombie.resume();
    let stderr = zombie.stderr.clone();
    let code = zombie.wait_exit();
    let err = std::fs::read_to_string(stderr).unwrap();
    assert_eq!(code, Some(3), "the zombie must stop as fenced:\n{err}");
    assert!(err.contains("fenced"), "{err}");
    p.settle().await;

    let committed = read_all(&p.url, APPROVED, Isolation::ReadCommitted);
    let mut seen: Vec<String> = committed
        .iter()
        .map(|e| e.transfer.transfer_id.clone())
        .collect();
    seen.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(
        seen, want,
        "each transfer approved exactly once in the committed log"
    );
    let all = read_all(&p.url, APPROVED, Isolation::ReadUncommitted);
    assert!(
        all.len() > N,
        "the zombie's aborted writes are in the log ({})",
        all.len()
    );
    assert_eq!(not_once(&p.db("wallet.db"), "credits", &ids), vec![]);
    assert_eq!(not_once(&p.db("sms.db"), LARGE_SMS, &ids), vec![]);
}
