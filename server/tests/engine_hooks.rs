//! The engine's optional hooks ([`Operation::look`], [`Operation::admit`],
//! [`Operation::claim`]) on SQLite: an application that reads beside phase 0 and beside the
//! claim, and keeps a quota of new keys, gets the contract's answers unchanged — a seen key
//! replays whatever validation now says, a refusal or a quota stores nothing, a lost claim
//! never reaches the step.

mod sqlite_engine_support;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sendonce_server::store::sqlite::{SqliteKeys, Work};
use sendonce_server::store::{Claims, DbError, Fence, NewKey};
use sendonce_server::{Claim, Engine, Look, Operation, Problem, Request};
use sqlite_engine_support::{fixture, request, Pay};

/// [`Pay`] with a lowerable amount limit, a quota of new keys, and the number of payments
/// already made read beside the claim (what the step then saw, in order).
struct Hooked {
    pay: Pay,
    limit: AtomicI64,
    quota: AtomicI64,
    looks: AtomicUsize,
    validations: AtomicUsize,
    seen_by_step: Mutex<Vec<(String, i64)>>,
}

impl Hooked {
    fn new() -> Self {
        Self {
            pay: Pay::default(),
            limit: AtomicI64::new(100),
            quota: AtomicI64::new(100),
            looks: AtomicUsize::new(0),
            validations: AtomicUsize::new(0),
            seen_by_step: Mutex::new(Vec::new()),
        }
    }

    fn check(&self, body: &[u8]) -> Result<i64, Problem> {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| Problem::invalid(e.to_string()))?;
        match v["amount"].as_i64() {
            Some(n) if (1..=self.limit.load(Ordering::SeqCst)).contains(&n) => Ok(n),
            _ => Err(Problem::invalid("amount out of range")),
        }
    }
}

impl Operation<SqliteKeys> for Hooked {
    /// The amount, and the payments made before the claim.
    type Input = (i64, i64);
    type Step = ();

    async fn validate(&self, _: &str, body: &[u8]) -> Result<(i64, i64), Problem> {
        self.validations.fetch_add(1, Ordering::SeqCst);
        Ok((self.check(body)?, 0))
    }

    async fn look(&self, store: &SqliteKeys, req: &Request) -> Result<Look<(i64, i64)>, DbError> {
        self.looks.fetch_add(1, Ordering::SeqCst);
        Ok(match store.read(&req.scope, &req.key).await? {
            Some(row) => Look::Seen(row),
            None => Look::New(self.check(&req.body).map(|n| (n, 0))),
        })
    }

    fn admit(&self, _: &str) -> Result<(), Problem> {
        if self.quota.fetch_sub(1, Ordering::SeqCst) > 0 {
            return Ok(());
        }
        self.quota.fetch_add(1, Ordering::SeqCst);
        Err(Problem::rate_limited("too many new keys", 60))
    }

    async fn claim(
        &self,
        store: &SqliteKeys,
        new: NewKey<'_>,
        (amount, _): (i64, i64),
    ) -> Result<(Claim, (i64, i64)), DbError> {
        let count = "SELECT count(*) FROM runs";
        let made = store
            .db()
            .read(move |c| Ok(c.query_row(count, [], |r| r.get(0))?));
        let (claimed, made) = tokio::try_join!(store.claim(new), made)?;
        Ok((claimed, (amount, made)))
    }

    async fn step(&self, fence: &Fence, &(_, made): &(i64, i64)) -> Result<(), Problem> {
        self.seen_by_step
            .lock()
            .unwrap()
            .push((fence.key.clone(), made));
        Ok(())
    }

    fn work(&self, fence: &Fence, (amount, _): (i64, i64), step: ()) -> Work {
        Operation::<SqliteKeys>::work(&self.pay, fence, amount, step)
    }
}

fn hooked() -> (
    sqlite_engine_support::Fixture,
    Arc<Engine<SqliteKeys>>,
    Hooked,
) {
    let f = fixture();
    let engine = f.engine.clone();
    (f, engine, Hooked::new())
}

#[tokio::test]
async fn a_seen_key_replays_through_the_look_even_when_validation_now_refuses() {
    let (f, engine, op) = hooked();
    let first = engine.run(&op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((first.status, first.replayed), (201, false));
    op.limit.store(1, Ordering::SeqCst);
    let again = engine.run(&op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!(
        (again.status, again.replayed, again.body),
        (201, true, first.body)
    );
    let refused = engine.run(&op, &request("k2", r#"{"amount":5}"#)).await;
    assert_eq!(refused.status, 400);
    assert!(
        engine.store().read("u1", "k2").await.unwrap().is_none(),
        "a refusal is not stored"
    );
    assert_eq!((f.runs("k").await, f.runs("k2").await), (1, 0));
    // The overridden look ran every time; the default path's validate never did.
    assert_eq!(op.looks.load(Ordering::SeqCst), 3);
    assert_eq!(op.validations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_quota_refusal_stores_nothing_and_the_same_key_runs_once_admitted() {
    let (f, engine, op) = hooked();
    op.quota.store(0, Ordering::SeqCst);
    let refused = engine.run(&op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!(refused.status, 429);
    assert!(engine.store().read("u1", "k").await.unwrap().is_none());
    assert!(
        op.seen_by_step.lock().unwrap().is_empty(),
        "nothing claimed, no step"
    );
    op.quota.store(1, Ordering::SeqCst);
    let ran = engine.run(&op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((ran.status, ran.replayed), (201, false));
    // The quota is spent, yet a seen key still answers: admission is for new keys only.
    let again = engine.run(&op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((again.status, again.replayed), (201, true));
    assert_eq!(op.quota.load(Ordering::SeqCst), 0);
    assert_eq!(f.runs("k").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_claim_reads_beside_reaches_the_step_and_a_lost_claim_never_does() {
    let (f, engine, op) = hooked();
    for k in ["k1", "k2"] {
        let a = engine.run(&op, &request(k, r#"{"amount":1}"#)).await;
        assert_eq!(a.status, 201);
    }
    let op = Arc::new(op);
    let duplicates: Vec<_> = (0..8)
        .map(|_| {
            let (engine, op) = (engine.clone(), op.clone());
            tokio::spawn(async move { engine.run(&*op, &request("k3", r#"{"amount":1}"#)).await })
        })
        .collect();
    for d in duplicates {
        assert!(matches!(d.await.unwrap().status, 201 | 409));
    }
    let seen = op.seen_by_step.lock().unwrap().clone();
    let expected = [("k1", 0), ("k2", 1), ("k3", 2)].map(|(k, n)| (k.to_string(), n));
    assert_eq!(
        seen, expected,
        "one step per key, each seeing the payments before its claim"
    );
    assert_eq!(f.runs("k3").await, 1);
}
