//! Issue 29, items 1 and 9: what the broker can still deliver after the inbox forgot it.
//! Kafka deletes a closed segment only once its newest record is past `retention.ms`,
//! so a record stays readable for up to `retention.ms + segment.ms` (plus the broker's
//! retention check interval); a group reset or expired offsets then hands it to the
//! consumer again. And an event id is not a key that cannot come back: after a restore
//! the outbox may hand the same id to another transfer.

use std::time::Duration;

use sendonce_streams::broker::Isolation;
use sendonce_streams::event::APPROVED;

use crate::support::{
    absorbed, broker, broker_url, count, create_topic, envelopes, produce, read_all, scratch,
    wait_caught_up, Bin, Proc,
};
use crate::window::wallet;

const EVENTS: usize = 10;
/// The topic's retention in the test; `segment.ms` stays at the 7-day default.
const RETENTION_MS: &str = "20000";

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn a_window_covering_retention_but_not_segment_time_is_refused_naming_the_configs() {
    let url = broker_url("horizon-guard");
    let dir = scratch("horizon-guard");
    create_topic(&url, APPROVED, &[("retention.ms", RETENTION_MS)]).await;
    broker(&url).ensure_topics().unwrap();
    let p = wallet(&dir, &url, "20s", &[]);
    let err_path = p.stderr.clone();
    let code = p.exit_within(Duration::from_secs(60)).unwrap();
    let err = std::fs::read_to_string(err_path).unwrap();
    assert_eq!(code, Some(2), "{err}");
    for named in [
        "retention.ms 20000",
        "segment.ms 604800000",
        "--inbox-window",
    ] {
        assert!(err.contains(named), "{named:?} not in: {err}");
    }
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn an_offset_reset_after_the_inbox_forgot_still_credits_each_transfer_once() {
    let url = broker_url("horizon-reset");
    let dir = scratch("horizon-reset");
    let b = broker(&url);
    create_topic(&url, APPROVED, &[("retention.ms", RETENTION_MS)]).await;
    b.ensure_topics().unwrap();
    produce(&url, APPROVED, &envelopes(1, EVENTS, "usr_payee", 100));
    // Forced past the start-up check: the effect's own guard must hold on its own.
    let forced = ["--unsafe-skip-window-check"];
    let first = wallet(&dir, &url, "20s", &forced);
    wait_caught_up(&url, "wallet", APPROVED).await;
    first.kill();
    // Past the inbox window and the topic's retention: the inbox forgets (pruned at the
    // next start), the broker has not deleted the active segment.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let still = read_all(&url, APPROVED, Isolation::ReadCommitted);
    assert_eq!(still.len(), EVENTS, "the broker still delivers every event");
    b.reset_group(&b.name("wallet")).unwrap();
    let second = wallet(&dir, &url, "20s", &forced);
    wait_caught_up(&url, "wallet", APPROVED).await;
    second.kill();
    let db = rusqlite::Connection::open(dir.join("wallet.db")).unwrap();
    let credits = count(&db, "SELECT COUNT(*) FROM credits");
    let balance = count(&db, "SELECT COALESCE(SUM(balance_minor), 0) FROM balances");
    assert_eq!(
        (credits, balance),
        (EVENTS as i64, 100 * EVENTS as i64),
        "credits after the reset"
    );
    // The replay really came, past the inbox: the credits' own guard absorbed it.
    let guarded = count(&db, "SELECT COALESCE(MAX(n), 0) FROM guard_absorbed");
    assert_eq!(guarded, EVENTS as i64);
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn a_reissued_event_id_carrying_another_transfer_is_credited_and_told() {
    let url = broker_url("reissued-id");
    let dir = scratch("reissued-id");
    broker(&url).ensure_topics().unwrap();
    let before = envelopes(7, 1, "usr_payee", 100);
    // A restore (or an asynchronous replica's failover) handed event id 7 out again.
    let mut after = envelopes(7, 1, "usr_payee", 250);
    after[0].transfer.transfer_id = "tr_after_restore".into();
    produce(&url, APPROVED, &before);
    produce(&url, APPROVED, &after);
    let wallet = wallet(&dir, &url, "forever", &[]);
    let db = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let args = ["--broker".into(), url.clone(), "--db".into(), db("sms.db")];
    let sms = Proc::start(Bin::Sms, &dir, &args, &[]);
    wait_caught_up(&url, "wallet", APPROVED).await;
    wait_caught_up(&url, "sms", APPROVED).await;
    wallet.kill();
    sms.kill();
    let w = rusqlite::Connection::open(dir.join("wallet.db")).unwrap();
    assert_eq!(count(&w, "SELECT COUNT(*) FROM credits"), 2);
    assert_eq!(
        count(
            &w,
            "SELECT balance_minor FROM balances WHERE user_id = 'usr_payee'"
        ),
        350
    );
    let s = rusqlite::Connection::open(dir.join("sms.db")).unwrap();
    assert_eq!(count(&s, "SELECT COUNT(*) FROM sms"), 2);
    // Not a redelivery, and no new guard either: two transfers, two of everything.
    assert_eq!(absorbed(&w), 0);
}
