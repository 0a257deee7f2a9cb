//! The SQLite key table on its own, against real files: the primary key decides a race,
//! the fence admits only the lock's holder, every path that finds a row compares the
//! fingerprint, a look-up's "not executed" stays true, and expiry goes a bucket at a time.

use std::sync::{Arc, Barrier};

use rusqlite::Connection;
use sendonce_server::decision::{Claim, Existing};
use sendonce_server::expiry::bucket_width_ms;
use sendonce_server::fingerprint::request_hash;
use sendonce_server::store::sqlite::keys;
use sendonce_server::Instance;

mod common;

use common::{new_key, status_of, WINDOW};

fn open(path: &std::path::Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    keys::create(&c).unwrap();
    c
}

fn claim(
    c: &mut Connection,
    who: &Instance,
    key: &str,
    body: &[u8],
    lock: &str,
    now: i64,
) -> Claim {
    let hash = request_hash("POST", "/v1/orders", body);
    keys::claim(c, &new_key(who, key, &hash, body, lock, now)).unwrap()
}

#[test]
fn one_of_many_concurrent_claims_wins_and_the_others_see_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    drop(open(&path));
    let who = Instance::new();
    let start = Arc::new(Barrier::new(8));
    let runs: Vec<_> = (0..8)
        .map(|i| {
            let (path, who, start) = (path.clone(), who.clone(), start.clone());
            std::thread::spawn(move || {
                let mut c = open(&path);
                start.wait();
                // Half the racers send another body under the same key.
                let body: &[u8] = if i % 2 == 0 {
                    b"{\"a\":1}"
                } else {
                    b"{\"a\":2}"
                };
                (
                    i,
                    claim(&mut c, &who, "race", body, &format!("lock{i}"), 1_000),
                )
            })
        })
        .collect();
    let results: Vec<_> = runs.into_iter().map(|r| r.join().unwrap()).collect();
    let winners: Vec<_> = results
        .iter()
        .filter(|(_, c)| matches!(c, Claim::Acquired))
        .collect();
    assert_eq!(winners.len(), 1, "the primary key decides: {results:?}");
    let winner_parity = winners[0].0 % 2;
    for (i, c) in results {
        if matches!(c, Claim::Acquired) {
            continue;
        }
        // A claim that lost the race compares the fingerprint like a row read up front:
        // the same body waits (409), another body is a reused key (422).
        let expected = if i % 2 == winner_parity { 409 } else { 422 };
        assert_eq!(status_of(c), expected, "racer {i}");
    }
}

#[test]
fn only_the_lock_holder_passes_the_fence_and_completes() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(&dir.path().join("k.db"));
    let who = Instance::new();
    assert!(matches!(
        claim(&mut c, &who, "k", b"{}", "mine", 1),
        Claim::Acquired
    ));
    assert!(keys::holds(&c, "u1", "k", "mine").unwrap());
    assert!(!keys::holds(&c, "u1", "k", "theirs").unwrap());
    assert!(!keys::complete(&c, "u1", "k", "theirs", 201, b"x").unwrap());
    // Released (nothing committed): the next claim runs from scratch, and the old lock is
    // fenced out for good.
    keys::release(&c, "u1", "k", "mine").unwrap();
    assert!(matches!(
        claim(&mut c, &who, "k", b"{}", "next", 2),
        Claim::Acquired
    ));
    assert!(!keys::holds(&c, "u1", "k", "mine").unwrap());
    assert!(keys::complete(&c, "u1", "k", "next", 201, b"{\"id\":1}").unwrap());
    assert!(
        !keys::holds(&c, "u1", "k", "next").unwrap(),
        "a completed key holds no lock"
    );
    // Finished: the same request replays byte for byte, another body is 422 — on the claim path.
    match claim(&mut c, &who, "k", b"{}", "late", 3) {
        Claim::Exists(e @ Existing::Completed { .. }) => {
            let a = e.answer();
            assert_eq!(
                (a.status, a.replayed, a.body.as_slice()),
                (201, true, &b"{\"id\":1}"[..])
            );
        }
        other => panic!("expected the stored answer, got {other:?}"),
    }
    assert_eq!(
        status_of(claim(&mut c, &who, "k", b"{\"x\":1}", "late", 3)),
        422
    );
    // Keys are scoped per user: another user's row under the same key is not this one.
    assert!(keys::read(&c, "u2", "k").unwrap().is_none());
}

#[test]
fn a_closed_key_answers_its_404_to_every_later_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(&dir.path().join("k.db"));
    let who = Instance::new();
    let width = bucket_width_ms(WINDOW);
    assert!(
        keys::close_unexecuted(&mut c, "u1", "gone", 5, width, b"not found")
            .unwrap()
            .is_none()
    );
    // A late duplicate of the request the look-up said was never executed: not executed now either.
    assert_eq!(
        status_of(claim(&mut c, &who, "gone", b"{}", "late", 6)),
        404
    );
    // Closing again finds the row: the first close decided.
    let row = keys::close_unexecuted(&mut c, "u1", "gone", 7, width, b"other")
        .unwrap()
        .unwrap();
    assert_eq!(row.body.as_deref(), Some(&b"not found"[..]));
}

#[test]
fn expiry_removes_whole_buckets_only_after_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(&dir.path().join("k.db"));
    let who = Instance::new();
    let day = bucket_width_ms(WINDOW);
    claim(&mut c, &who, "early", b"{}", "a", 10 * day + 1);
    claim(&mut c, &who, "late", b"{}", "b", 10 * day + day - 1);
    claim(&mut c, &who, "next", b"{}", "c", 11 * day);
    // Bucket 10 ends at 11·day; it may go at 11·day + window, not a millisecond before.
    assert_eq!(keys::expire(&c, 11 * day + WINDOW - 1, WINDOW).unwrap(), 0);
    assert_eq!(keys::expire(&c, 11 * day + WINDOW, WINDOW).unwrap(), 2);
    assert!(keys::read(&c, "u1", "next").unwrap().is_some());
    // In chunks: the same rule, at most `limit` rows a call.
    claim(&mut c, &who, "n2", b"{}", "d", 11 * day + 5);
    assert_eq!(
        keys::expire_chunk(&c, 12 * day + WINDOW, WINDOW, 1).unwrap(),
        1
    );
    assert_eq!(
        keys::expire_chunk(&c, 12 * day + WINDOW, WINDOW, 1).unwrap(),
        1
    );
    assert_eq!(
        keys::expire_chunk(&c, 12 * day + WINDOW, WINDOW, 1).unwrap(),
        0
    );
}

/// `read_beside` answers what `read` and the application's own query answer, in one
/// statement: with and without a key row, with and without the application's value.
#[test]
fn a_key_read_beside_an_application_value_answers_as_the_two_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(&dir.path().join("k.db"));
    c.execute_batch("CREATE TABLE users (user_id TEXT PRIMARY KEY, currency TEXT NOT NULL);")
        .unwrap();
    c.execute("INSERT INTO users VALUES ('u2', 'BDT')", [])
        .unwrap();
    let who = Instance::new();
    let beside = keys::ReadBeside::new("SELECT currency FROM users WHERE user_id = ?3");
    let claimed = claim(&mut c, &who, "k1", b"{}", "lock", 1_000);
    assert!(matches!(claimed, Claim::Acquired), "{claimed:?}");
    for (key, recipient) in [
        ("k1", "u2"),
        ("k1", "nobody"),
        ("k2", "u2"),
        ("k2", "nobody"),
    ] {
        let (row, value) = keys::read_beside(&c, "u1", key, &beside, recipient).unwrap();
        let alone = keys::read(&c, "u1", key).unwrap();
        assert_eq!(row.is_some(), key == "k1");
        assert_eq!(format!("{row:?}"), format!("{alone:?}"), "{key}");
        let expected = (recipient == "u2").then(|| "BDT".to_string());
        assert_eq!(value, expected, "{key} {recipient}");
    }
}
