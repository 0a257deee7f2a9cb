//! Requests on one key that overlap: the in-flight lock (409) and "N at once, one
//! transfer", measured through the look-up and the payer's balance.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use tokio::task::JoinSet;

use super::{ensure_or_fail, fresh_key, Ctx, Outcome, Verdict, PARALLEL};
use crate::client::{Answer, Call, Route};

/// Gateway latency set through the test API, so the first request is surely running
/// when the duplicates arrive.
const SLOW_GATEWAY_MS: u64 = 1500;

/// Sends `n` copies of the same request at once.
async fn parallel(ctx: &Ctx, key: &str, body: &[u8], n: u64) -> Vec<reqwest::Result<Answer>> {
    let mut set = JoinSet::new();
    for _ in 0..n {
        let (api, token, key, body) = (
            ctx.api.clone(),
            ctx.acc.a.token.clone(),
            key.to_string(),
            body.to_vec(),
        );
        let path = ctx.op.path.clone();
        set.spawn(async move {
            let mut call = Call::post(path, Some(&token), &body);
            call.key = Some(key.as_bytes());
            api.send(call).await
        });
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(r) = r {
            out.push(r);
        }
    }
    out
}

fn tally(answers: &[reqwest::Result<Answer>]) -> String {
    let mut counts = std::collections::BTreeMap::<String, u32>::new();
    for a in answers {
        let k = match a {
            Ok(a) => a.label(),
            Err(_) => "no answer".into(),
        };
        *counts.entry(k).or_default() += 1;
    }
    counts
        .iter()
        .map(|(k, n)| format!("{n}x {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub async fn one_key(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let body = ctx.body(a, "conformance concurrency.one-key");
    let before = ctx.balance(a).await?;
    let answers = parallel(ctx, &key, &body, PARALLEL).await;
    let seen = tally(&answers);
    let ok: Vec<&Answer> = answers.iter().filter_map(|r| r.as_ref().ok()).collect();
    let fresh = fresh_201s(&ok);
    ensure_or_fail!(fresh <= 1, "{PARALLEL} parallel POSTs on key {key} -> {seen}: {fresh} fresh 201s, expected at most one");
    let ids: std::collections::BTreeSet<_> = ok
        .iter()
        .filter(|x| x.status == 201)
        .filter_map(|x| x.id())
        .collect();
    ensure_or_fail!(
        ids.len() <= 1,
        "{PARALLEL} parallel POSTs on key {key} -> {seen}: {} different transfer ids",
        ids.len()
    );
    // Whatever was still running settles now; its answer is the key's outcome.
    let (settled, _) = ctx
        .until_definitive(a, &key, &body, Route::Direct, None)
        .await;
    let Some(settled) = settled else {
        return Ok(Verdict::Fail(format!("{PARALLEL} parallel POSTs on key {key} -> {seen}; retries never got a definitive answer")));
    };
    let look = ctx.lookup(a, &key).await?;
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before - after == ctx.amount,
        "{PARALLEL} parallel POSTs on key {key} -> {seen}; A's balance moved {} (expected {} once)",
        before - after,
        ctx.amount
    );
    ensure_or_fail!(
        look.status == 200 && look.id() == settled.id(),
        "{PARALLEL} parallel POSTs on key {key} -> {seen}; retry -> {}, look-up -> {}, expected the same transfer",
        settled.summary(),
        look.summary()
    );
    Ok(Verdict::Pass(format!(
        "{PARALLEL} parallel POSTs on key {key} -> {seen}; one transfer, balance -{}",
        ctx.amount
    )))
}

pub async fn in_flight(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let body = ctx.body(a, "conformance replay.in-flight");
    let before = ctx.balance(a).await?;
    // server-mock's test API can slow the gateway; anything else is raced.
    let saved = if ctx.test_api {
        get_faults(ctx).await
    } else {
        None
    };
    let slowed = saved.is_some()
        && set_faults(
            ctx,
            &serde_json::json!({"gateway_delay_ms": SLOW_GATEWAY_MS}),
        )
        .await
        .is_ok();
    if !slowed {
        // No way to slow the backend: race, and judge only what overlapped.
        let answers = parallel(ctx, &key, &body, PARALLEL).await;
        let seen = tally(&answers);
        let ok: Vec<&Answer> = answers.iter().filter_map(|r| r.as_ref().ok()).collect();
        let fresh = fresh_201s(&ok);
        ensure_or_fail!(
            fresh <= 1,
            "{PARALLEL} parallel POSTs on key {key} -> {seen}: {fresh} fresh 201s"
        );
        let busy: Vec<&&Answer> = ok.iter().filter(|x| x.status == 409).collect();
        if busy.is_empty() {
            return Ok(Verdict::Skip(format!(
                "{PARALLEL} parallel POSTs on key {key} -> {seen}: none overlapped the first"
            )));
        }
        let good = busy.iter().all(|x| {
            x.code().as_deref() == Some("idempotency_key_in_use")
                && x.header("retry-after").is_some()
        });
        ensure_or_fail!(good, "{PARALLEL} parallel POSTs on key {key} -> {seen}: a 409 without idempotency_key_in_use / Retry-After");
        return Ok(Verdict::Pass(format!(
            "{PARALLEL} parallel POSTs on key {key} -> {seen}"
        )));
    }

    let first = {
        let (api, token, key, body) = (ctx.api.clone(), a.token.clone(), key.clone(), body.clone());
        let path = ctx.op.path.clone();
        tokio::spawn(async move {
            let mut call = Call::post(path, Some(&token), &body);
            call.key = Some(key.as_bytes());
            api.send(call).await
        })
    };
    // Give the first request time to claim the key; the gateway keeps it running for
    // SLOW_GATEWAY_MS, so duplicates sent now overlap it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut dups = Vec::new();
    for _ in 0..PARALLEL {
        if first.is_finished() {
            break;
        }
        let d = ctx.post(a, &key, &body, Route::Direct).await;
        let overlapped = !first.is_finished();
        dups.push((d, overlapped));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let first = first.await;
    restore_faults(ctx, saved).await;
    let first = first?;
    let first = match first {
        Ok(f) => f,
        Err(e) => {
            return Ok(Verdict::Fail(format!(
                "POST key {key} with a slow gateway: {}",
                super::no_answer(&e)
            )))
        }
    };
    let seen = dups
        .iter()
        .map(|(d, _)| d.as_ref().map_or("no answer".into(), |a| a.summary()))
        .collect::<Vec<_>>()
        .join(", ");
    let story = format!("POST key {key} (gateway slowed to {SLOW_GATEWAY_MS} ms) -> {}; duplicates meanwhile -> [{seen}]", first.summary());
    // Whichever of them reached the backend first is the one that runs (under load a
    // duplicate can overtake the first): exactly one executes, the rest wait or replay.
    let all: Vec<&Answer> = std::iter::once(&first)
        .chain(dups.iter().filter_map(|(d, _)| d.as_ref().ok()))
        .collect();
    let executed = fresh_201s(&all);
    ensure_or_fail!(executed <= 1, "{story}: {executed} executed as new transfers, expected one (the others 409 idempotency_key_in_use)");
    let busy_ok = |x: &Answer| {
        x.status == 409
            && x.code().as_deref() == Some("idempotency_key_in_use")
            && x.header("retry-after").is_some()
    };
    let others_ok = all.iter().all(|x| (x.status == 201) || busy_ok(x));
    ensure_or_fail!(
        others_ok,
        "{story}: expected 201 once and 409 idempotency_key_in_use with Retry-After while it ran"
    );
    let overlapped_busy = dups
        .iter()
        .any(|(d, overlapped)| *overlapped && d.as_ref().is_ok_and(busy_ok));
    if !overlapped_busy {
        return Ok(Verdict::Skip(format!(
            "{story}: no duplicate overlapped the running request"
        )));
    }
    // A first request slower than the backend's lease may itself end in a 409 (it lost
    // the key and moved nothing); the key's outcome is whatever the retry gets.
    let settled = ctx.settle(a, &key, &body).await?;
    ensure_or_fail!(
        settled.status == 201,
        "{story}; retried -> {}, expected 201",
        settled.summary()
    );
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before - after == ctx.amount,
        "POST key {key} + duplicates: A's balance moved {} (expected {})",
        before - after,
        ctx.amount
    );
    Ok(Verdict::Pass(story))
}

async fn get_faults(ctx: &Ctx) -> Option<Value> {
    let a = ctx
        .api
        .send(Call::get("/v1/test/faults", ctx.api.test_token()))
        .await
        .ok()?;
    a.json().filter(|_| a.status == 200)
}

async fn set_faults(ctx: &Ctx, patch: &Value) -> anyhow::Result<()> {
    let body = patch.to_string().into_bytes();
    let mut call = Call::post("/v1/test/faults", ctx.api.test_token(), &body);
    call.method = Method::PUT;
    let a = ctx.api.send(call).await?;
    anyhow::ensure!(a.status == 200, "PUT /v1/test/faults -> {}", a.summary());
    Ok(())
}

/// Back to what was set before the check (DELETE clears, then the old switches again).
async fn restore_faults(ctx: &Ctx, saved: Option<Value>) {
    let mut call = Call::get("/v1/test/faults", ctx.api.test_token());
    call.method = Method::DELETE;
    let _ = ctx.api.send(call).await;
    if let Some(Value::Object(map)) = saved {
        let kept: serde_json::Map<_, _> = map.into_iter().filter(|(_, v)| !v.is_null()).collect();
        if !kept.is_empty() {
            let _ = set_faults(ctx, &Value::Object(kept)).await;
        }
    }
}

/// Answers that are a fresh 201 (a first execution), not a replay.
fn fresh_201s(answers: &[&Answer]) -> usize {
    answers
        .iter()
        .filter(|x| x.status == 201 && !x.replayed())
        .count()
}
