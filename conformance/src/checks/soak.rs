//! A short soak: a few hundred tiny transfers in parallel, each first attempt through a
//! fault of the proxy (none, dropped, duplicated, late), every one retried to a
//! definitive answer; then the payer's balance must have moved by exactly the
//! transfers the look-ups say exist, and each look-up must agree with its answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::{ensure_or_fail, fresh_key, Ctx, Outcome, Verdict};
use crate::client::{Answer, Route};
use crate::proxy::Fault;

/// The soak's check id.
pub const ID: &str = "soak.mixed";
/// Transfers in flight at once.
const WORKERS: u64 = 8;
/// The late-answer fault of the soak: short, so the soak stays short.
const LATE_TIMEOUT: Duration = Duration::from_millis(300);

/// What one transfer of the soak ended with.
struct Ended {
    key: String,
    answer: Option<Answer>,
    lookup: Option<Answer>,
}

pub async fn run(ctx: &Ctx) -> Outcome {
    if ctx.soak_transfers == 0 {
        return Ok(Verdict::Skip("--soak 0".into()));
    }
    let a = ctx.acc.a.clone();
    let before = ctx.balance(&a).await?;
    let deadline = Instant::now() + ctx.soak_time;
    let next = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(Mutex::new(Vec::new()));
    let mut set = JoinSet::new();
    for _ in 0..WORKERS.min(ctx.soak_transfers) {
        let (ctx, a, next, ended) = (ctx.clone(), a.clone(), next.clone(), ended.clone());
        set.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= ctx.soak_transfers || Instant::now() >= deadline {
                    break;
                }
                let (fault, timeout) = match i % 4 {
                    0 => (Fault::None, None),
                    1 => (Fault::DropAnswer, None),
                    2 => (Fault::Duplicate, None),
                    _ => (Fault::Delay(LATE_TIMEOUT * 2), Some(LATE_TIMEOUT)),
                };
                let key = fresh_key();
                let body = ctx.body(&a, &format!("conformance soak {i}"));
                let (answer, _) = ctx
                    .until_definitive(&a, &key, &body, Route::Proxy(fault), timeout)
                    .await;
                let lookup = ctx.lookup(&a, &key).await.ok();
                ended.lock().unwrap_or_else(|e| e.into_inner()).push(Ended {
                    key,
                    answer,
                    lookup,
                });
            }
        });
    }
    while set.join_next().await.is_some() {}
    let ended = std::mem::take(&mut *ended.lock().unwrap_or_else(|e| e.into_inner()));
    let after = ctx.balance(&a).await?;

    let mut exist = 0i64;
    let mut undecided = 0;
    for e in &ended {
        let look = e.lookup.as_ref();
        let look_id = look.filter(|l| l.status == 200).and_then(|l| l.id());
        if look_id.is_some() {
            exist += 1;
        }
        match &e.answer {
            Some(ans) => {
                ensure_or_fail!(
                    ans.status == 201,
                    "soak: key {} ended with {}, expected 201 (A has the money)",
                    e.key,
                    ans.summary()
                );
                ensure_or_fail!(
                    look_id.is_some() && look_id == ans.id(),
                    "soak: key {} answered {} but its look-up -> {}",
                    e.key,
                    ans.summary(),
                    look.map_or("no answer".into(), |l| l.summary())
                );
            }
            None => undecided += 1,
        }
    }
    let n = ended.len();
    ensure_or_fail!(
        before - after == exist * ctx.amount,
        "soak: {n} transfers ({undecided} undecided), {exist} exist by look-up, but A's balance moved {} (expected {})",
        before - after,
        exist * ctx.amount
    );
    ensure_or_fail!(n > 0, "soak: no transfer started before the deadline");
    Ok(Verdict::Pass(format!(
        "soak: {n} transfers (faults none/drop/duplicate/late), {exist} exist, {undecided} undecided; balance -{} = {exist} x {}",
        before - after,
        ctx.amount
    )))
}
