//! Every kill point of the pipeline (SIGKILL between two writes), each followed by one
//! credit and one SMS per transfer, and one "large transfer" SMS per large transfer.

use sendonce_streams::crash;

use crate::support::{absorbed, count, not_once, Bin, Pipeline, LARGE_SMS, RECEIVED_SMS};

/// Transfers per kill-point run.
const TRANSFERS: usize = 30;
/// Every transfer is "large", so each also gets the fraud check's SMS.
const AMOUNT: i64 = 1_000;

/// Runs `TRANSFERS` transfers with `bin` halted at `point`, killed there, restarted; then
/// checks one effect per transfer everywhere. Returns the (wallet, sms) absorbed
/// redelivery counts, so each test can show its kill really redelivered something.
async fn kill_at(test: &str, bin: Bin, point: &str) -> (i64, i64) {
    let mut p = Pipeline::start(test, AMOUNT, Some((bin, point)));
    let api = p.api();
    let payer = api.user("payer", AMOUNT * TRANSFERS as i64).await;
    let payee = api.user("payee", 0).await;
    let mut ids = Vec::new();
    for i in 0..TRANSFERS {
        if i == TRANSFERS / 2 {
            p.kill_at_crash_point(bin, point);
        }
        let api = p.api();
        ids.push(
            api.transfer(&payer, &payee, AMOUNT, &format!("{test}-{i}"))
                .await,
        );
    }
    p.settle().await;
    let (wallet, sms) = (p.db("wallet.db"), p.db("sms.db"));
    assert_eq!(not_once(&wallet, "credits", &ids), vec![], "credits");
    assert_eq!(not_once(&sms, RECEIVED_SMS, &ids), vec![], "recipient SMS");
    assert_eq!(
        not_once(&sms, LARGE_SMS, &ids),
        vec![],
        "large-transfer SMS"
    );
    let balance = count(
        &wallet,
        &format!(
            "SELECT balance_minor FROM balances WHERE user_id = '{}'",
            payee.id
        ),
    );
    assert_eq!(balance, AMOUNT * TRANSFERS as i64);
    (absorbed(&wallet), absorbed(&sms))
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn relay_killed_between_ack_and_mark_publishes_again_and_the_inboxes_absorb_it() {
    let (wallet, sms) = kill_at("relay-ack", Bin::ServerMock, crash::RELAY_AFTER_ACK).await;
    // The batch acked before the kill went out twice: each inbox saw it again (the
    // fraud check approved it twice; only its downstream inboxes can tell).
    assert!(wallet > 0 && sms > 0, "absorbed: {wallet} {sms}");
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn fraud_check_killed_before_its_commit_sends_the_sms_once() {
    let (wallet, sms) = kill_at("fraud-commit", Bin::FraudCheck, crash::FRAUD_BEFORE_COMMIT).await;
    // The killed batch's transfers were approved (and their payers told) by the restarted
    // process only, from the uncommitted offsets: no output of the killed transaction
    // reached the read_committed consumers.
    assert_eq!((wallet, sms), (0, 0), "aborted output was read");
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn wallet_killed_between_db_commit_and_offset_commit_credits_once() {
    let (wallet, _) = kill_at("wallet-db", Bin::Wallet, crash::WALLET_AFTER_DB).await;
    assert!(wallet > 0, "no redelivery reached the wallet's inbox");
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn sms_killed_between_db_commit_and_offset_commit_sends_once() {
    let (_, sms) = kill_at("sms-db", Bin::Sms, crash::SMS_AFTER_DB).await;
    assert!(sms > 0, "no redelivery reached the SMS inbox");
}
