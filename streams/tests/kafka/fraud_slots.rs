//! Issue 29, item 4: two fraud-check slots. The owner of a partition frozen past its
//! session timeout after its "large transfer" SMS must not let the next owner send it
//! again; a rebalance in the middle of a batch must not commit outputs without their
//! inputs' offsets.

use std::path::Path;
use std::time::{Duration, Instant};

use sendonce_streams::broker::Isolation;
use sendonce_streams::crash;
use sendonce_streams::event::{APPROVED, DONE, LARGE};

use crate::support::{
    broker, broker_url, group_state, produce, read_all, scratch, sms_everywhere, spread_envelopes,
    wait_caught_up, Bin, Proc, SETTLE_LIMIT,
};

/// Transfers from this amount on get the payer's SMS.
const LARGE_AMOUNT: i64 = 1_000;
/// What the large-transfer SMS says, wherever it is recorded.
const LARGE_SMS: &str = "%large transfer%";

/// Fraud-check slot `slot` (its own transactional id and its own files).
fn fraud_check(dir: &Path, url: &str, slot: u32, crash_at: Option<&str>) -> Proc {
    let args: Vec<String> = vec![
        "--broker".into(),
        url.into(),
        "--transactional-id".into(),
        format!("fraud-check-{slot}"),
        "--large-amount".into(),
        LARGE_AMOUNT.to_string(),
        "--max-poll-interval".into(),
        "6s".into(),
    ];
    let env: Vec<(&str, &str)> = crash_at
        .map(|c| ("SENDONCE_CRASH_AT", c))
        .into_iter()
        .collect();
    Proc::start(Bin::FraudCheck, dir, &args, &env)
}

fn sms(dir: &Path, url: &str) -> Proc {
    let db = dir.join("sms.db").to_string_lossy().into_owned();
    let args = ["--broker".into(), url.into(), "--db".into(), db];
    Proc::start(Bin::Sms, dir, &args, &[])
}

/// Topics the SMS consumer reads.
const SMS_TOPICS: [&str; 2] = [APPROVED, LARGE];

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn a_slot_frozen_past_its_session_after_the_sms_leaves_one_sms_across_both_slots() {
    let url = broker_url("fraud-slots");
    let dir = scratch("fraud-slots");
    broker(&url).ensure_topics().unwrap();
    produce(&url, DONE, &spread_envelopes(1, 1, 5 * LARGE_AMOUNT));
    let mut f0 = fraud_check(&dir, &url, 0, Some(crash::FRAUD_BEFORE_COMMIT));
    f0.wait_line(&format!("CRASHPOINT {}", crash::FRAUD_BEFORE_COMMIT));
    // Frozen whole (heartbeats too) past the 6 s session timeout; slot 1 takes over.
    f0.signal("STOP");
    let f1 = fraud_check(&dir, &url, 1, None);
    let s = sms(&dir, &url);
    tokio::time::sleep(Duration::from_secs(8)).await;
    f0.resume();
    f0.signal("CONT");
    // The thawed slot finds its generation gone: its transaction cannot commit.
    let code = f0.exit_within(Duration::from_secs(60));
    wait_caught_up(&url, "fraud-check", DONE).await;
    for topic in SMS_TOPICS {
        wait_caught_up(&url, "sms", topic).await;
    }
    f1.kill();
    s.kill();
    let approved = read_all(&url, APPROVED, Isolation::ReadCommitted);
    assert_eq!(approved.len(), 1, "approvals in the committed log");
    assert_eq!(
        sms_everywhere(&dir, LARGE_SMS),
        1,
        "large-transfer SMS across both slots (slot 0 exit: {code:?})"
    );
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn a_rebalance_in_the_middle_of_a_batch_approves_each_transfer_once() {
    const N: usize = 60;
    let url = broker_url("fraud-rebalance");
    let dir = scratch("fraud-rebalance");
    broker(&url).ensure_topics().unwrap();
    let events = spread_envelopes(1, N, 100);
    produce(&url, DONE, &events);
    let mut f0 = fraud_check(&dir, &url, 0, Some(crash::FRAUD_MID_BATCH));
    f0.wait_line(&format!("CRASHPOINT {}", crash::FRAUD_MID_BATCH));
    // Slot 1 joins while slot 0 holds one message of its batch: the group prepares a
    // rebalance, which slot 0's next poll serves in the middle of the batch.
    let f1 = fraud_check(&dir, &url, 1, None);
    let deadline = Instant::now() + SETTLE_LIMIT;
    while group_state(&url, "fraud-check") != "PreparingRebalance" {
        assert!(Instant::now() < deadline, "slot 1 never joined");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Slot 0 learns of it from its next heartbeat (every second): its revocation then
    // waits in its queue behind the messages it has fetched.
    tokio::time::sleep(Duration::from_secs(2)).await;
    f0.resume();
    wait_caught_up(&url, "fraud-check", DONE).await;
    f0.kill();
    f1.kill();
    let mut seen: Vec<String> = read_all(&url, APPROVED, Isolation::ReadCommitted)
        .into_iter()
        .map(|e| e.transfer.transfer_id)
        .collect();
    seen.sort();
    let mut want: Vec<String> = events
        .iter()
        .map(|e| e.transfer.transfer_id.clone())
        .collect();
    want.sort();
    assert_eq!(seen, want, "each transfer approved exactly once");
}
