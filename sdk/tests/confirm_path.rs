//! The store's own work between the user's tap and the disk: group commit of concurrent
//! confirmations, a WAL that stays bounded under back-to-back confirmations, and a prune backlog
//! that drains while the SDK runs.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use common::scripted::{req, until};
use sendonce::{NetworkProfile, Sdk, SdkConfig, SimClock, TransferState};

const DAY: i64 = 86_400_000;
const START: i64 = 1_800_000_000_000;

fn offline(db: &Path, clock: &Arc<SimClock>) -> Sdk {
    Sdk::open(
        SdkConfig::builder("http://127.0.0.1:9", db)
            .clock(clock.clone())
            .network_profile(NetworkProfile::Offline)
            .build()
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_confirmations_each_get_their_own_durable_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = Arc::new(offline(&db, &clock));
    sdk.set_network_available(false).unwrap();
    // Many taps at once: whatever queues while one commits shares the next commit.
    let confirmed = async_taps(&sdk, 200).await;
    each_its_own_durable_row(sdk, &db, &clock, confirmed, 200);
}

/// Blocking callers commit on their own threads while async callers go through the store thread:
/// whichever commits takes everything waiting, from both paths, and every caller still gets its
/// own row with its own key, durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_and_async_confirmations_at_once_each_get_their_own_durable_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = Arc::new(offline(&db, &clock));
    sdk.set_network_available(false).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let sdk = sdk.clone();
            std::thread::spawn(move || {
                (0..50)
                    .map(|i| {
                        let mut r = req();
                        r.amount_minor = 1_000 + t * 50 + i;
                        sdk.send_transfer_blocking(r).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut confirmed = async_taps(&sdk, 100).await;
    for t in threads {
        confirmed.extend(t.join().unwrap());
    }
    each_its_own_durable_row(sdk, &db, &clock, confirmed, 300);
}

#[test]
fn a_blocking_confirmation_after_close_is_closed_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = offline(&db, &clock);
    sdk.send_transfer_blocking(req()).unwrap();
    sdk.close();
    assert!(matches!(
        sdk.send_transfer_blocking(req()),
        Err(sendonce::SdkError::Closed)
    ));
    drop(sdk);
    assert_eq!(
        offline(&db, &clock).unfinished_transfers().unwrap().len(),
        1
    );
}

/// `n` async confirmations at once, amounts 1..=n, each on a task of its own.
async fn async_taps(sdk: &Arc<Sdk>, n: i64) -> Vec<sendonce::Transfer> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let sdk = sdk.clone();
            tokio::spawn(async move {
                let mut r = req();
                r.amount_minor = 1 + i;
                sdk.send_transfer(r).await.unwrap()
            })
        })
        .collect();
    let mut confirmed = Vec::new();
    for t in tasks {
        confirmed.push(t.await.unwrap());
    }
    confirmed
}

/// Checks that `confirmed` are `n` transfers, each with its own local id, key and row, and that a
/// new instance on the file finds every one of them.
fn each_its_own_durable_row(
    sdk: Arc<Sdk>,
    db: &Path,
    clock: &Arc<SimClock>,
    confirmed: Vec<sendonce::Transfer>,
    n: usize,
) {
    let ids: HashSet<_> = confirmed.iter().map(|t| t.local_id.clone()).collect();
    let keys: HashSet<_> = confirmed
        .iter()
        .map(|t| t.idempotency_key.clone())
        .collect();
    assert_eq!(ids.len(), n, "one local id per tap");
    assert_eq!(keys.len(), n, "one key per tap");
    for t in &confirmed {
        let stored = sdk.transfer(&t.local_id).unwrap();
        assert_eq!(
            stored.amount_minor, t.amount_minor,
            "each caller got its own row"
        );
        assert_eq!(stored.idempotency_key, t.idempotency_key);
        assert_eq!(stored.state, TransferState::Pending);
    }
    sdk.close();
    drop(sdk);
    // Durable: a new instance finds every one of them.
    let sdk = offline(db, clock);
    assert_eq!(sdk.unfinished_transfers().unwrap().len(), n);
}

/// Failed before the checkpoint moved onto the writer connection: checkpoints from a second
/// connection ran concurrently with the next confirmation, the WAL never restarted, and it grew by
/// ~28 KiB per confirmation (115 MB after 4,000 on this machine's disk).
/// The same with blocking confirmations: they commit on the caller's thread, and the checkpoint they
/// make due is the store thread's (failed when nothing asked it to).
#[test]
fn the_wal_stays_bounded_under_back_to_back_blocking_confirmations() {
    wal_stays_bounded(|sdk| {
        sdk.send_transfer_blocking(req()).unwrap();
    });
}

#[test]
fn the_wal_stays_bounded_under_back_to_back_confirmations() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    wal_stays_bounded(|sdk| {
        rt.block_on(sdk.send_transfer(req())).unwrap();
    });
}

fn wal_stays_bounded(confirm: impl Fn(&Sdk)) {
    // On the disk, not tmpfs: a checkpoint there takes long enough to overlap the next write.
    std::fs::create_dir_all("../target/test-tmp").unwrap();
    let dir = tempfile::tempdir_in("../target/test-tmp").unwrap();
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = offline(&db, &clock);
    sdk.set_network_available(false).unwrap();
    let wal = dir.path().join("d.db-wal");
    let mut largest = 0;
    for _ in 0..1_500 {
        confirm(&sdk);
        largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    // 500 commits of ~7 pages between checkpoints, and the 16 MiB journal_size_limit.
    assert!(
        largest <= 20 << 20,
        "the WAL reached {largest} bytes after 1,500 confirmations"
    );
}

/// Writes `n` finished transfers that ended `age_ms` before `now` straight into the file.
fn add_finished(db: &Path, n: usize, now: i64, age_ms: i64) {
    let mut conn = rusqlite::Connection::open(db).unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO transfers (local_id, idem_key, to_user_id, amount_minor, currency, body, state, \
                 created_at_ms, updated_at_ms) VALUES (?1, ?2, 'u_1', 1, 'BDT', x'7b7d', 'succeeded', ?3, ?3)",
            )
            .unwrap();
        for i in 0..n {
            insert
                .execute(rusqlite::params![
                    format!("old-{i:06}"),
                    format!("key-{i:06}"),
                    now - age_ms
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// Failed before the sender came back for a backlog after a short pause: open pruned 10,000 rows,
/// the sender's first turn 10,000 more, and the rest waited an hour.
#[tokio::test]
async fn a_prune_backlog_drains_while_the_sdk_runs() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    offline(&db, &clock).close();
    add_finished(&db, 45_000, START, 40 * DAY);
    let sdk = offline(&db, &clock);
    // Nothing else wakes the sender: no transfer to send, no network.
    sdk.set_network_available(false).unwrap();
    until(
        "every finished transfer past the retention is pruned",
        || sdk.transfers_page(None, 10).unwrap().is_empty(),
    )
    .await;
}

/// A second open of a file that another instance is writing (and checkpointing: the WAL restarts every
/// few hundred commits) must say `AlreadyOpen`, never `StorageCorrupt`: the pre-open identity check reads
/// the file without locks, and a checkpoint in progress makes such a read see a half-written file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_open_during_checkpoints_is_already_open_not_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = Arc::new(offline(&db, &clock));
    sdk.set_network_available(false).unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prober = {
        let (db, clock, done) = (db.clone(), clock.clone(), done.clone());
        std::thread::spawn(move || {
            let mut corrupt = 0;
            let mut tries = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                tries += 1;
                match Sdk::open(
                    SdkConfig::builder("http://127.0.0.1:9", &db)
                        .clock(clock.clone())
                        .build()
                        .unwrap(),
                ) {
                    Err(sendonce::SdkError::AlreadyOpen(_)) => {}
                    Err(sendonce::SdkError::StorageCorrupt(e)) => {
                        corrupt += 1;
                        eprintln!("second open said StorageCorrupt: {e}");
                    }
                    other => panic!("second open: {:?}", other.map(|_| "opened")),
                }
            }
            (tries, corrupt)
        })
    };
    for i in 0..3_000 {
        let mut r = req();
        r.amount_minor = 1 + i;
        sdk.send_transfer(r).await.unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (tries, corrupt) = prober.join().unwrap();
    assert!(tries > 0);
    assert_eq!(
        corrupt, 0,
        "{corrupt} of {tries} second opens called a live file corrupt"
    );
}

/// The SDK's runtime threads run `SCHED_BATCH` (they never preempt the thread that woke them:
/// a confirmation's caller is not held up by the listeners' dispatcher it wakes), while the
/// store thread, which an async caller waits on, keeps the default policy. Read from the
/// kernel's own record of each thread (`/proc/self/task/*/stat`, field 41).
#[cfg(target_os = "linux")]
#[test]
fn the_runtime_threads_never_preempt_their_wakers_and_the_store_thread_keeps_its_policy() {
    const SCHED_OTHER: u32 = 0;
    const SCHED_BATCH: u32 = 3;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(SimClock::new(START, 1.0));
    let sdk = offline(&dir.path().join("d.db"), &clock);
    let policies = || -> Vec<(String, u32)> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| {
                let t = t.ok()?.path();
                let stat = std::fs::read_to_string(t.join("stat")).ok()?;
                let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
                let policy = rest.split(' ').nth(38)?.parse().ok()?;
                Some((name.to_string(), policy))
            })
            .filter(|(name, _)| name.starts_with("sendonce"))
            .collect()
    };
    // Each worker sets its policy as it starts (here and in any SDK another test of this binary
    // opens meanwhile): a bounded wait for all of them.
    let mut seen = policies();
    for _ in 0..100 {
        let workers = seen.iter().filter(|(n, _)| n == "sendonce");
        if workers.clone().count() >= 2 && workers.clone().all(|(_, p)| *p == SCHED_BATCH) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen = policies();
    }
    let workers: Vec<_> = seen.iter().filter(|(n, _)| n == "sendonce").collect();
    assert!(workers.len() >= 2, "the runtime's two workers: {seen:?}");
    assert!(workers.iter().all(|(_, p)| *p == SCHED_BATCH), "{seen:?}");
    // Other tests of this binary may have SDKs open too: every store thread is checked.
    let store: Vec<_> = seen.iter().filter(|(n, _)| n == "sendonce-store").collect();
    assert!(!store.is_empty(), "{seen:?}");
    assert!(store.iter().all(|(_, p)| *p == SCHED_OTHER), "{seen:?}");
    drop(sdk);
}
