//! `GET /v1/transfers?idempotency_key=K`: how a client resolves an unknown outcome
//! without minting a new key, so its answers must agree with the money, now and later.

use super::{ensure_or_fail, fresh_key, problem, Ctx, Outcome, Verdict};
use crate::client::Route;

pub async fn found(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let created = ctx
        .settle(a, &key, &ctx.body(a, "conformance lookup.found"))
        .await?;
    ensure_or_fail!(
        created.status == 201,
        "POST key {key} -> {}, expected 201",
        created.summary()
    );
    let got = ctx.lookup(a, &key).await?;
    ensure_or_fail!(
        got.status == 200 && got.body == created.body,
        "POST key {key} -> 201, GET ?idempotency_key -> {} (body {}), expected 200 byte-identical to the 201",
        got.summary(),
        if got.body == created.body { "identical" } else { "different" }
    );
    Ok(Verdict::Pass(format!(
        "GET ?idempotency_key={key} -> {}, byte-identical to the 201",
        got.summary()
    )))
}

pub async fn unknown(ctx: &Ctx) -> Outcome {
    let key = fresh_key();
    let got = ctx.lookup(&ctx.acc.a, &key).await?;
    let r = problem(&got, 404, &ctx.op.not_found_code);
    ensure_or_fail!(
        r.is_ok(),
        "GET ?idempotency_key={key} (never used) {}",
        r.unwrap_err()
    );
    Ok(Verdict::Pass(format!(
        "GET ?idempotency_key={key} (never used) -> {}",
        got.summary()
    )))
}

pub async fn not_found_is_final(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let got = ctx.lookup(a, &key).await?;
    let r = problem(&got, 404, &ctx.op.not_found_code);
    ensure_or_fail!(
        r.is_ok(),
        "GET ?idempotency_key={key} (never used) {}",
        r.unwrap_err()
    );
    let before = ctx.balance(a).await?;
    // The late duplicate the 404 promised would never run.
    let late = ctx
        .post(
            a,
            &key,
            &ctx.body(a, "conformance lookup.404-final"),
            Route::Direct,
        )
        .await?;
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before == after && !(200..300).contains(&late.status),
        "GET ?idempotency_key={key} -> 404, then POST with that key -> {} and A's balance moved {}: \
         the 404 said the transfer did not happen",
        late.summary(),
        before - after
    );
    let again = ctx.lookup(a, &key).await?;
    ensure_or_fail!(
        again.status == 404,
        "after the 404 and a late POST, GET ?idempotency_key={key} -> {}, expected 404 still",
        again.summary()
    );
    Ok(Verdict::Pass(format!(
        "GET key {key} -> 404, late POST -> {}, nothing moved, GET again -> {}",
        late.summary(),
        again.summary()
    )))
}

pub async fn own_only(ctx: &Ctx) -> Outcome {
    let (a, b) = (&ctx.acc.a, &ctx.acc.b);
    let key = fresh_key();
    let created = ctx
        .settle(a, &key, &ctx.body(a, "conformance lookup.own-only"))
        .await?;
    ensure_or_fail!(
        created.status == 201,
        "POST as A key {key} -> {}, expected 201",
        created.summary()
    );
    let got = ctx.lookup(b, &key).await?;
    ensure_or_fail!(
        got.status == 404 && got.id().is_none(),
        "A's key {key}: GET ?idempotency_key as B -> {}, expected 404 (B has no transfer with that key)",
        got.summary()
    );
    Ok(Verdict::Pass(format!(
        "A's key {key} looked up as B -> {}",
        got.summary()
    )))
}
