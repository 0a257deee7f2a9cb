//! The first request with a key, its replays, and the answers that must (402) or must
//! not (validation) be stored with the key.

use super::{ensure_or_fail, fresh_key, problem, Bad, Ctx, Outcome, Verdict};
use crate::client::Route;

pub async fn first(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let body = ctx.body(a, "conformance create.first");
    let before = ctx.balance(a).await?;
    let answer = ctx.post(a, &key, &body, Route::Direct).await?;
    ensure_or_fail!(
        answer.status == 201,
        "POST key {key} (first) -> {}, expected 201",
        answer.summary()
    );
    let json = answer.json().unwrap_or_default();
    let sent: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let echoed = ctx
        .op
        .echo
        .iter()
        .all(|f| json.get(f).is_some() && json.get(f) == sent.get(f));
    ensure_or_fail!(
        answer.id().is_some() && echoed,
        "POST key {key} -> 201 body {}, expected the operation ({} and {} as sent)",
        String::from_utf8_lossy(&answer.body),
        ctx.op.id_field,
        ctx.op.echo.join(", ")
    );
    ensure_or_fail!(
        !answer.replayed(),
        "POST key {key} (first use) -> 201 with Idempotent-Replayed: true, expected a fresh answer"
    );
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before - after == ctx.amount,
        "POST key {key} -> 201 but A's balance moved {} (expected {})",
        before - after,
        ctx.amount
    );
    Ok(Verdict::Pass(format!(
        "POST key {key} -> {}, balance -{}",
        answer.summary(),
        ctx.amount
    )))
}

pub async fn identical(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let body = ctx.body(a, "conformance replay.identical");
    let first = ctx.settle(a, &key, &body).await?;
    ensure_or_fail!(
        first.status == 201,
        "POST key {key} (first) -> {}, expected 201",
        first.summary()
    );
    let before = ctx.balance(a).await?;
    let again = ctx.post(a, &key, &body, Route::Direct).await?;
    ensure_or_fail!(
        again.status == first.status,
        "POST key {key} again, same body -> {}, expected the stored {}",
        again.summary(),
        first.status
    );
    ensure_or_fail!(
        again.body == first.body,
        "POST key {key} again -> {} with a body that differs from the first answer's ({} vs {} bytes), expected byte-identical",
        again.summary(),
        again.body.len(),
        first.body.len()
    );
    ensure_or_fail!(
        again.replayed(),
        "POST key {key} again -> {} without Idempotent-Replayed: true (got {:?})",
        again.summary(),
        again.header("idempotent-replayed")
    );
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before == after,
        "POST key {key} again -> {} but A's balance moved {before} -> {after}",
        again.summary()
    );
    Ok(Verdict::Pass(format!(
        "POST key {key} twice -> {} then {}, byte-identical, nothing moved",
        first.summary(),
        again.summary()
    )))
}

pub async fn other_body(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let body = ctx.body(a, "conformance replay.other-body");
    let other = ctx.body(a, "conformance replay.other-body, changed");
    let first = ctx.settle(a, &key, &body).await?;
    ensure_or_fail!(
        first.status == 201,
        "POST key {key} (first) -> {}, expected 201",
        first.summary()
    );
    let before = ctx.balance(a).await?;
    let changed = ctx.post(a, &key, &other, Route::Direct).await?;
    let r = problem(&changed, 422, "idempotency_key_reused");
    ensure_or_fail!(
        r.is_ok(),
        "POST key {key} with another body {}",
        r.unwrap_err()
    );
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before == after,
        "POST key {key}, other body -> 422 but A's balance moved {before} -> {after}"
    );
    let again = ctx.post(a, &key, &body, Route::Direct).await?;
    ensure_or_fail!(
        again.status == 201 && again.body == first.body,
        "after the 422, POST key {key} with the first body -> {}, expected the stored 201 again",
        again.summary()
    );
    Ok(Verdict::Pass(format!(
        "POST key {key} -> 201, other body -> {}, first body again -> {}",
        changed.summary(),
        again.summary()
    )))
}

pub async fn per_user(ctx: &Ctx) -> Outcome {
    let (a, b) = (&ctx.acc.a, &ctx.acc.b);
    let key = fresh_key();
    // Same bytes for both when they share a currency: only the user differs.
    let body_a = ctx.body(a, "conformance scope.per-user");
    let body_b = ctx.body(b, "conformance scope.per-user");
    let first = ctx.settle(a, &key, &body_a).await?;
    ensure_or_fail!(
        first.status == 201,
        "POST as A key {key} -> {}, expected 201",
        first.summary()
    );
    let (a0, b0) = (ctx.balance(a).await?, ctx.balance(b).await?);
    let other = ctx.settle(b, &key, &body_b).await?;
    ensure_or_fail!(
        other.status == 201 && other.id() != first.id(),
        "POST as A key {key} -> {}, then as B with the same key -> {}, expected a new 201 of B's own",
        first.summary(),
        other.summary()
    );
    let (a1, b1) = (ctx.balance(a).await?, ctx.balance(b).await?);
    ensure_or_fail!(
        a0 == a1 && b0 - b1 == ctx.amount,
        "B's request with A's key -> 201 but A moved {} and B moved {} (expected 0 and {})",
        a0 - a1,
        b0 - b1,
        ctx.amount
    );
    Ok(Verdict::Pass(format!(
        "key {key}: A -> {}, B -> {}, each paid once",
        first.summary(),
        other.summary()
    )))
}

pub async fn payment_required(ctx: &Ctx) -> Outcome {
    let Some(broke) = &ctx.acc.broke else {
        return Ok(Verdict::Skip(
            "no broke user (fixtures: broke_token)".into(),
        ));
    };
    let before = ctx.balance(broke).await?;
    if before >= ctx.amount {
        return Ok(Verdict::Skip(format!(
            "the broke user holds {before}, not less than {}",
            ctx.amount
        )));
    }
    let key = fresh_key();
    let body = ctx.body(broke, "conformance funds.402-stored");
    let first = ctx.settle(broke, &key, &body).await?;
    let r = problem(&first, 402, "insufficient_funds");
    ensure_or_fail!(
        r.is_ok(),
        "POST key {key} from a wallet holding {before} {}",
        r.unwrap_err()
    );
    let again = ctx.post(broke, &key, &body, Route::Direct).await?;
    ensure_or_fail!(
        again.status == 402 && again.replayed() && again.body == first.body,
        "POST key {key} -> 402, again -> {} (body {}), expected the stored 402: byte-identical, Idempotent-Replayed: true",
        again.summary(),
        if again.body == first.body { "identical" } else { "different" }
    );
    Ok(Verdict::Pass(format!(
        "POST key {key} -> {}, again -> {}",
        first.summary(),
        again.summary()
    )))
}

/// A validation error answers `status code` and leaves the key free for a valid body.
pub async fn not_stored(ctx: &Ctx, what: &str, status: u16, code: &str, bad: Bad) -> Outcome {
    let a = &ctx.acc.a;
    let key = fresh_key();
    let before = ctx.balance(a).await?;
    let invalid = ctx
        .post(a, &key, &ctx.bad_body(a, bad), Route::Direct)
        .await?;
    let r = problem(&invalid, status, code);
    ensure_or_fail!(r.is_ok(), "POST key {key} with {what} {}", r.unwrap_err());
    let mid = ctx.balance(a).await?;
    ensure_or_fail!(
        before == mid,
        "POST key {key} with {what} -> {} but A's balance moved {before} -> {mid}",
        invalid.summary()
    );
    let valid = ctx
        .settle(a, &key, &ctx.body(a, "conformance validation"))
        .await?;
    ensure_or_fail!(
        valid.status == 201,
        "POST key {key} with {what} -> {}, then a valid body with the same key -> {}, expected 201 (the key must stay free)",
        invalid.summary(),
        valid.summary()
    );
    Ok(Verdict::Pass(format!(
        "POST key {key} with {what} -> {}, then valid -> {}",
        invalid.summary(),
        valid.summary()
    )))
}
