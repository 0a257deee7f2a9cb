//! Faults on the wire, through the kit's chaos proxy: each transfer is retried with the
//! same key and bytes until a definitive answer, then the money must have moved once.

use std::time::Duration;

use super::{ensure_or_fail, fresh_key, Ctx, Outcome, Verdict};
use crate::client::Route;
use crate::proxy::Fault;

pub async fn answer_dropped(ctx: &Ctx) -> Outcome {
    once(
        ctx,
        "answer dropped after the backend replied",
        Fault::DropAnswer,
        None,
        true,
    )
    .await
}

pub async fn delivered_twice(ctx: &Ctx) -> Outcome {
    once(ctx, "delivered twice", Fault::Duplicate, None, false).await
}

pub async fn answer_late(ctx: &Ctx) -> Outcome {
    let hold = ctx.late_timeout + Duration::from_millis(500);
    once(
        ctx,
        "answer held past the client's timeout",
        Fault::Delay(hold),
        Some(ctx.late_timeout),
        true,
    )
    .await
}

/// One transfer whose first attempt suffers `fault`. `executed_first`: the first
/// attempt reached the backend and ran, so the definitive answer must be a replay.
async fn once(
    ctx: &Ctx,
    what: &str,
    fault: Fault,
    timeout: Option<Duration>,
    executed_first: bool,
) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let body = ctx.body(a, "conformance chaos");
    let before = ctx.balance(a).await?;
    let (answer, lost) = ctx
        .until_definitive(a, &key, &body, Route::Proxy(fault), timeout)
        .await;
    let Some(answer) = answer else {
        return Ok(Verdict::Fail(format!(
            "POST key {key} ({what}) then retries: no definitive answer"
        )));
    };
    let look = ctx.lookup(a, &key).await?;
    let after = ctx.balance(a).await?;
    let story = format!(
        "POST key {key} ({what}, {lost} attempt(s) without an answer), retried -> {}",
        answer.summary()
    );
    ensure_or_fail!(answer.status == 201, "{story}, expected 201");
    ensure_or_fail!(
        !executed_first || lost == 0 || answer.replayed(),
        "{story}: the first attempt ran on the backend, so its retry must be a replay with Idempotent-Replayed: true"
    );
    ensure_or_fail!(
        before - after == ctx.amount,
        "{story}; A's balance moved {} (expected {} once)",
        before - after,
        ctx.amount
    );
    ensure_or_fail!(
        look.status == 200 && look.body == answer.body,
        "{story}; look-up -> {}, expected 200 byte-identical to the transfer",
        look.summary()
    );
    Ok(Verdict::Pass(format!(
        "{story}; look-up {}, balance -{} once",
        look.status, ctx.amount
    )))
}
