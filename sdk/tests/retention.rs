//! Storage stays bounded (issue 13 point 9): finished transfers are pruned after the retention, never
//! an unfinished one, at open and while the SDK runs; the history is listed in stable pages.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::scripted::{created, problem, req, serve, until, wait, Script, Shared};
use sendonce::{
    NetworkProfile, Sdk, SdkConfig, SdkConfigBuilder, SdkError, SimClock, TransferState,
};

const DAY: i64 = 86_400_000;
const START: i64 = 1_800_000_000_000;

fn config(url: &str, db: &std::path::Path, clock: &Arc<SimClock>) -> SdkConfigBuilder {
    SdkConfig::builder(url, db)
        .clock(clock.clone())
        .retry_base(Duration::from_millis(10))
        .retry_cap(Duration::from_millis(100))
}

async fn scripted(answers: Vec<common::scripted::Answer>) -> String {
    let script: Shared = Arc::new(Mutex::new(Script {
        answers,
        ..Default::default()
    }));
    serve(script).await
}

fn gone(sdk: &Sdk, local_id: &str) -> bool {
    matches!(sdk.transfer(local_id), Err(SdkError::NotFound(_)))
}

#[tokio::test]
async fn only_finished_transfers_older_than_the_retention_are_pruned() {
    let url = scripted(vec![
        created(),
        problem(
            402,
            r#"{"code":"insufficient_funds","detail":"balance 10"}"#,
        ),
        problem(401, r#"{"code":"unauthenticated"}"#),
        created(),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = Sdk::open(
        config(&url, &db, &clock)
            .access_token("tok-1")
            .build()
            .unwrap(),
    )
    .unwrap();
    let succeeded = wait(&sdk, &sdk.send_transfer(req()).await.unwrap().local_id).await;
    assert_eq!(succeeded.state, TransferState::Succeeded);
    let rejected = wait(&sdk, &sdk.send_transfer(req()).await.unwrap().local_id).await;
    assert_eq!(rejected.state, TransferState::Rejected);
    let parked = sdk.send_transfer(req()).await.unwrap();
    until("the third transfer waits for a token", || {
        sdk.transfer(&parked.local_id).unwrap().state == TransferState::AuthRequired
    })
    .await;

    clock.jump(20 * DAY);
    let recent = wait(&sdk, &sdk.send_transfer(req()).await.unwrap().local_id).await;
    assert_eq!(recent.state, TransferState::Succeeded);

    // 31 days after the first two ended: pruned while the SDK runs (the next confirm wakes the sender).
    clock.jump(11 * DAY);
    let newest = wait(&sdk, &sdk.send_transfer(req()).await.unwrap().local_id).await;
    until("finished transfers past the retention are pruned", || {
        gone(&sdk, &succeeded.local_id) && gone(&sdk, &rejected.local_id)
    })
    .await;
    assert_eq!(
        sdk.transfer(&parked.local_id).unwrap().state,
        TransferState::AuthRequired,
        "an unfinished transfer is never pruned, however old"
    );
    assert!(!gone(&sdk, &recent.local_id), "11 days old: kept");
    assert!(!gone(&sdk, &newest.local_id));
    sdk.close();
    drop(sdk);

    // At open: the transfer that ended 31 days ago is gone before the first call.
    clock.jump(20 * DAY);
    let sdk = Sdk::open(config(&url, &db, &clock).build().unwrap()).unwrap();
    assert!(gone(&sdk, &recent.local_id));
    assert!(!gone(&sdk, &newest.local_id), "20 days old: kept");
    assert_eq!(
        sdk.transfer(&parked.local_id).unwrap().state,
        TransferState::AuthRequired
    );
    assert_eq!(sdk.transfers().unwrap().len(), 2);
}

/// A year of daily use (30 transfers a day) keeps about retention × rate rows, never the whole year.
#[tokio::test]
async fn a_year_of_use_keeps_the_row_count_bounded() {
    const PER_DAY: usize = 30;
    const RETENTION_DAYS: usize = 30;
    let url = scripted(vec![created()]).await;
    // Fast storage for 11 000 transfers: a RAM file system when there is one (still a real SQLite file).
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = Sdk::open(
        config(&url, &db, &clock)
            .access_token("tok-1")
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut most = 0;
    for day in 0..365 {
        let mut ids = Vec::with_capacity(PER_DAY);
        for _ in 0..PER_DAY {
            ids.push(sdk.send_transfer(req()).await.unwrap().local_id);
        }
        for id in &ids {
            assert_eq!(wait(&sdk, id).await.state, TransferState::Succeeded);
        }
        let rows = sdk.transfers().unwrap().len();
        most = most.max(rows);
        assert!(
            rows <= (RETENTION_DAYS + 1) * PER_DAY,
            "day {day}: {rows} rows kept, more than {} days of transfers",
            RETENTION_DAYS + 1
        );
        clock.jump(DAY);
    }
    assert!(
        most >= RETENTION_DAYS * PER_DAY,
        "a month of history is kept ({most} rows at most)"
    );
}

#[tokio::test]
async fn pages_are_ordered_and_stable_across_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = Sdk::open(
        config("http://127.0.0.1:9", &dir.path().join("d.db"), &clock)
            .network_profile(NetworkProfile::Offline)
            .build()
            .unwrap(),
    )
    .unwrap();
    for _ in 0..25 {
        sdk.send_transfer(req()).await.unwrap();
        clock.jump(1000);
    }
    let all: Vec<String> = sdk
        .transfers()
        .unwrap()
        .into_iter()
        .map(|t| t.local_id)
        .collect();
    let first = sdk.transfers_page(None, 10).unwrap();
    assert_eq!(first.len(), 10);
    // Newer transfers arrive while the user scrolls: the next pages neither repeat nor skip anything.
    for _ in 0..5 {
        sdk.send_transfer(req()).await.unwrap();
        clock.jump(1000);
    }
    let mut paged: Vec<String> = first.iter().map(|t| t.local_id.clone()).collect();
    loop {
        let page = sdk
            .transfers_page(paged.last().map(String::as_str), 10)
            .unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 10);
        paged.extend(page.into_iter().map(|t| t.local_id));
    }
    assert_eq!(paged, all, "the pages are the list as it was, newest first");
    assert_eq!(sdk.transfers().unwrap().len(), 30);
    assert!(sdk.transfers_page(None, 0).unwrap().is_empty());
    assert_eq!(sdk.transfers_page(None, 1000).unwrap().len(), 30);
    assert!(matches!(
        sdk.transfers_page(Some("no-such-transfer"), 10),
        Err(SdkError::NotFound(_))
    ));
}

#[test]
fn retention_is_validated_like_every_other_setting() {
    let build = |d: Duration| {
        SdkConfig::builder("https://x.example", "/tmp/x.db")
            .retention(d)
            .build()
    };
    let default = SdkConfig::builder("https://x.example", "/tmp/x.db")
        .build()
        .unwrap();
    assert_eq!(default.retention, Duration::from_secs(30 * 24 * 3600));
    for bad in [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_secs(59),
        Duration::from_secs(3651 * 24 * 3600),
        Duration::MAX,
    ] {
        let err = build(bad).unwrap_err();
        assert!(
            matches!(err, SdkError::InvalidConfig(_)),
            "{bad:?}: {err:?}"
        );
    }
    for good in [
        Duration::from_secs(3600),
        Duration::from_secs(7 * 24 * 3600),
    ] {
        assert_eq!(build(good).unwrap().retention, good);
    }
}

/// A long backlog (a first open after an upgrade, years of history) is pruned in bounded batches
/// that go on at the sender's next turns, not one batch limit per hour.
#[tokio::test]
async fn a_long_backlog_is_pruned_batch_after_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    let open = || {
        Sdk::open(
            config("http://127.0.0.1:9", &db, &clock)
                .network_profile(NetworkProfile::Offline)
                .build()
                .unwrap(),
        )
        .unwrap()
    };
    let sdk = open();
    let unfinished = sdk.send_transfer(req()).await.unwrap();
    sdk.close();
    drop(sdk);
    // 12 000 transfers that ended a year ago: more than one prune call deletes.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000)
             INSERT INTO transfers (local_id, idem_key, to_user_id, amount_minor, currency, body, state,
                created_at_ms, updated_at_ms)
             SELECT 'old-' || i, 'key-' || i, 'u_bob', 5, 'BDT', X'7B7D', 'succeeded', {t}, {t} FROM n;",
            t = START - 365 * DAY
        ))
        .unwrap();
    let sdk = open();
    until("the whole backlog is pruned", || {
        sdk.transfers().unwrap().len() == 1
    })
    .await;
    assert_eq!(sdk.transfers().unwrap()[0].local_id, unfinished.local_id);
}
