//! Group commit under failures: a failed job rolls back only itself, a refused insert leaves
//! the rest committed, a lone failure runs once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::store::sqlite::Db;

use super::*;

/// The tests' own table: deposits per user, and a tag each may use once.
fn schema(c: &Connection) -> Result<(), DbError> {
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS deposits
         (user_id TEXT NOT NULL, amount INTEGER NOT NULL, tag TEXT UNIQUE)",
    )?;
    Ok(())
}

fn open() -> Connection {
    Db::configure(Connection::open_in_memory().unwrap(), schema).unwrap()
}

fn deposit(c: &Connection, user: &str, amount: i64) -> Result<(), DbError> {
    c.execute(
        "INSERT INTO deposits (user_id, amount) VALUES (?1, ?2)",
        (user, amount),
    )?;
    Ok(())
}

fn balance(c: &Connection, user: &str) -> i64 {
    c.query_row(
        "SELECT COALESCE(SUM(amount), 0) FROM deposits WHERE user_id = ?1",
        [user],
        |r| r.get(0),
    )
    .unwrap()
}

/// A job depositing 5 then (unless it fails) 7 for `user`, counting its runs.
fn deposit_job(
    user: &'static str,
    fail: bool,
    runs: &Arc<AtomicUsize>,
) -> (
    Box<dyn GroupJob>,
    oneshot::Receiver<Result<&'static str, DbError>>,
) {
    let (tx, rx) = oneshot::channel();
    let runs = Arc::clone(runs);
    let f = move |c: &mut Connection| {
        runs.fetch_add(1, Ordering::SeqCst);
        deposit(c, user, 5)?;
        if fail {
            return Err(DbError::Task("job failed".into()));
        }
        deposit(c, user, 7)?;
        Ok(user)
    };
    (Box::new(Write::new(f, tx)), rx)
}

fn answer(rx: oneshot::Receiver<Result<&'static str, DbError>>) -> Result<&'static str, String> {
    rx.blocking_recv().unwrap().map_err(|e| e.to_string())
}

#[test]
fn a_failing_job_rolls_back_only_itself_and_the_group_runs_again_job_by_job() {
    let mut c = open();
    let runs = Arc::new(AtomicUsize::new(0));
    let (a, ra) = deposit_job("a", false, &runs);
    let (b, rb) = deposit_job("b", true, &runs);
    let (d, rd) = deposit_job("d", false, &runs);
    run_group(&mut c, Durability::Full, vec![a, b, d]);
    assert_eq!(answer(ra), Ok("a"));
    assert_eq!(answer(rb), Err("database task failed: job failed".into()));
    assert_eq!(answer(rd), Ok("d"));
    let balances: Vec<i64> = ["a", "b", "d"].iter().map(|u| balance(&c, u)).collect();
    assert_eq!(
        balances,
        [12, 0, 12],
        "only the failed job's writes are gone"
    );
    // a and b ran back to back, b failed, and all three ran again in SAVEPOINTs.
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    assert!(c.is_autocommit(), "no transaction left open");
}

#[test]
fn a_job_whose_insert_rolls_the_transaction_back_is_left_out_and_the_rest_commit() {
    let mut c = open();
    // A tag used once (as the ledger's one-debit-per-key index guards a key).
    let once = "INSERT OR ROLLBACK INTO deposits (user_id, amount, tag) VALUES ('a', -1, 'k')";
    c.execute(once, []).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let (a, ra) = deposit_job("a", false, &runs);
    // The unique index refuses the tag's second use: `OR ROLLBACK`.
    let (tx, rguard) = oneshot::channel();
    let guard: Box<dyn GroupJob> = Box::new(Write::new(
        move |c: &mut Connection| Ok(c.execute(once, [])?),
        tx,
    ));
    let (d, rd) = deposit_job("d", false, &runs);
    run_group(&mut c, Durability::Full, vec![a, guard, d]);
    assert_eq!((answer(ra), answer(rd)), (Ok("a"), Ok("d")));
    let refused = rguard.blocking_recv().unwrap().unwrap_err();
    assert!(refused.to_string().contains("UNIQUE"), "{refused}");
    let used: i64 = c
        .query_row("SELECT COUNT(*) FROM deposits WHERE tag = 'k'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(used, 1, "the tag was used once");
    assert_eq!(balance(&c, "a"), 12 - 1);
    assert_eq!(balance(&c, "d"), 12);
    assert!(c.is_autocommit());
}

#[test]
fn a_group_without_failures_runs_each_job_once_and_a_lone_failure_is_not_rerun() {
    let mut c = open();
    let runs = Arc::new(AtomicUsize::new(0));
    let (a, ra) = deposit_job("a", false, &runs);
    let (b, rb) = deposit_job("b", false, &runs);
    run_group(&mut c, Durability::Normal, vec![a, b]);
    assert_eq!((answer(ra), answer(rb)), (Ok("a"), Ok("b")));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let (lone, rl) = deposit_job("l", true, &runs);
    run_group(&mut c, Durability::Full, vec![lone]);
    assert!(answer(rl).is_err());
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "a lone failed job runs once"
    );
    assert_eq!(balance(&c, "l"), 0);
    let sync: i64 = c.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
    assert_eq!(sync, 2, "FULL restored after a NORMAL group");
}
