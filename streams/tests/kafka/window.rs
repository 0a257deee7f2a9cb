//! The seed's replay story: an inbox that keeps 24 h in front of a topic that keeps 7 d.
//! The guard refuses that configuration at start; forced past it, a replay of five-day-old
//! events finds the inbox empty and the wallet's own guard on the transfer absorbs it
//! (the seed credited everybody twice); a window covering the topic absorbs it in the inbox.

use std::path::Path;

use sendonce_streams::event::APPROVED;

use crate::support::{
    absorbed, broker, broker_url, count, envelopes, produce, scratch, wait_caught_up, Bin, Proc,
};

const EVENTS: usize = 10;

pub fn wallet(dir: &Path, url: &str, window: &str, extra: &[&str]) -> Proc {
    let mut args: Vec<String> = ["--broker", url, "--db"].map(String::from).to_vec();
    args.push(dir.join("wallet.db").to_string_lossy().into_owned());
    args.extend(["--inbox-window".to_string(), window.to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    Proc::start(Bin::Wallet, dir, &args, &[])
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn a_wallet_whose_inbox_is_shorter_than_retention_refuses_to_start() {
    let url = broker_url("window-guard");
    let dir = scratch("window-guard");
    broker(&url).ensure_topics().unwrap();
    let p = wallet(&dir, &url, "24h", &[]);
    let err_path = p.stderr.clone();
    assert_eq!(p.wait_exit(), Some(2));
    let err = std::fs::read_to_string(err_path).unwrap();
    assert!(err.contains("inbox window 1d"), "{err}");
    let topic = broker(&url).name(APPROVED);
    assert!(
        err.contains(&format!(
            "topic {topic} can still deliver (retention.ms 604800000 + segment.ms 3600000 + \
             log.retention.check.interval.ms 300000 = 7d 1h 5m)"
        )),
        "{err}"
    );
}

/// Credits, and the redeliveries the inbox and the wallet's guard absorbed, after: 10
/// events handled, the wallet stopped, its offsets reset (a replay from the oldest
/// offset), and the wallet started again five simulated days later.
async fn credits_after_five_day_replay(
    test: &str,
    window: &str,
    extra: &[&str],
) -> (i64, i64, i64) {
    let url = broker_url(test);
    let dir = scratch(test);
    let b = broker(&url);
    b.ensure_topics().unwrap();
    produce(&url, APPROVED, &envelopes(1, EVENTS, "usr_payee", 100));
    let first = wallet(&dir, &url, window, extra);
    wait_caught_up(&url, "wallet", APPROVED).await;
    first.kill();
    b.reset_group(&b.name("wallet")).unwrap();
    let mut later = extra.to_vec();
    later.extend(["--clock-offset", "5d"]);
    let second = wallet(&dir, &url, window, &later);
    wait_caught_up(&url, "wallet", APPROVED).await;
    second.kill();
    let db = rusqlite::Connection::open(dir.join("wallet.db")).unwrap();
    (
        count(&db, "SELECT COUNT(*) FROM credits"),
        absorbed(&db),
        count(&db, "SELECT COALESCE(MAX(n), 0) FROM guard_absorbed"),
    )
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn a_24h_inbox_bypassing_the_check_is_saved_by_the_credits_guard() {
    let (credits, inbox, guard) =
        credits_after_five_day_replay("window-bypassed", "24h", &["--unsafe-skip-window-check"])
            .await;
    let n = EVENTS as i64;
    assert_eq!(
        (credits, inbox, guard),
        (n, 0, n),
        "the inbox forgot all; the guard absorbed all"
    );
}

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn an_inbox_covering_retention_absorbs_the_same_replay() {
    let (credits, inbox, guard) = credits_after_five_day_replay("window-guarded", "8d", &[]).await;
    let n = EVENTS as i64;
    assert_eq!((credits, inbox, guard), (n, n, 0));
}
