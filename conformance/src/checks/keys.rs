//! Credentials and the `Idempotency-Key` header: what must be refused before anything
//! runs, and which spellings of a key are the same key.

use super::{ensure_or_fail, fresh_key, problem, Ctx, Outcome, Verdict};
use crate::client::Route;

pub async fn auth_missing(ctx: &Ctx) -> Outcome {
    let body = ctx.body(&ctx.acc.a, "conformance auth.missing");
    let key = fresh_key();
    let a = ctx
        .post_raw(None, Some(key.as_bytes()), &body, Route::Direct, None)
        .await?;
    let r = problem(&a, 401, "unauthenticated");
    ensure_or_fail!(
        r.is_ok(),
        "POST /v1/transfers without Authorization {}",
        r.unwrap_err()
    );
    Ok(Verdict::Pass(format!(
        "POST without Authorization -> {}",
        a.summary()
    )))
}

pub async fn auth_invalid(ctx: &Ctx) -> Outcome {
    let body = ctx.body(&ctx.acc.a, "conformance auth.invalid");
    let key = fresh_key();
    let token = format!("not-a-token-{}", uuid::Uuid::new_v4());
    let a = ctx
        .post_raw(
            Some(&token),
            Some(key.as_bytes()),
            &body,
            Route::Direct,
            None,
        )
        .await?;
    let r = problem(&a, 401, "unauthenticated");
    ensure_or_fail!(
        r.is_ok(),
        "POST /v1/transfers with an unknown bearer token {}",
        r.unwrap_err()
    );
    Ok(Verdict::Pass(format!(
        "POST with an unknown token -> {}",
        a.summary()
    )))
}

pub async fn missing(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let body = ctx.body(a, "conformance key.missing");
    let before = ctx.balance(a).await?;
    let answer = ctx
        .post_raw(Some(&a.token), None, &body, Route::Direct, None)
        .await?;
    let r = problem(&answer, 400, "idempotency_key_missing");
    ensure_or_fail!(
        r.is_ok(),
        "POST /v1/transfers without Idempotency-Key {}",
        r.unwrap_err()
    );
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before == after,
        "POST without a key -> {} but A's balance moved {before} -> {after}",
        answer.summary()
    );
    Ok(Verdict::Pass(format!(
        "POST without a key -> {}, nothing moved",
        answer.summary()
    )))
}

/// Each of `keys` must get 400 `idempotency_key_invalid` and move nothing.
pub async fn invalid(ctx: &Ctx, what: &str, keys: &[&[u8]]) -> Outcome {
    let a = &ctx.acc.a;
    let before = ctx.balance(a).await?;
    let mut seen = Vec::new();
    for key in keys {
        let body = ctx.body(a, "conformance key.invalid");
        let answer = ctx
            .post_raw(Some(&a.token), Some(key), &body, Route::Direct, None)
            .await?;
        let shown = String::from_utf8_lossy(key);
        let shown: String = shown.chars().take(24).collect();
        let r = problem(&answer, 400, "idempotency_key_invalid");
        ensure_or_fail!(
            r.is_ok(),
            "POST with key {shown:?} ({what}, {} bytes) {}",
            key.len(),
            r.unwrap_err()
        );
        seen.push(answer.summary());
    }
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before == after,
        "invalid keys ({what}) answered 400 but A's balance moved {before} -> {after}"
    );
    Ok(Verdict::Pass(format!(
        "POST with key ({what}) -> {}",
        seen.join(", ")
    )))
}

pub async fn max_length(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let key = format!("{}-", uuid::Uuid::new_v4().simple());
    let key = format!("{key}{}", "k".repeat(255 - key.len()));
    let body = ctx.body(a, "conformance key.max-length");
    let answer = ctx.settle(a, &key, &body).await?;
    ensure_or_fail!(
        answer.status == 201,
        "POST with a 255-character key -> {}, expected 201",
        answer.summary()
    );
    Ok(Verdict::Pass(format!(
        "POST with a 255-character key -> {}",
        answer.summary()
    )))
}

pub async fn sf_string(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let bare = fresh_key();
    let quoted = format!("\"{bare}\"");
    let body = ctx.body(a, "conformance key.sf-string");
    let before = ctx.balance(a).await?;
    let first = ctx.settle(a, &quoted, &body).await?;
    ensure_or_fail!(
        first.status == 201,
        "POST with key {quoted} (an sf-string) -> {}, expected 201",
        first.summary()
    );
    let second = ctx.post(a, &bare, &body, Route::Direct).await?;
    ensure_or_fail!(
        second.status == 201 && second.replayed() && second.body == first.body,
        "POST with key {quoted} -> 201, then the bare key {bare} with the same body -> {} (body {}), \
         expected the same key: a byte-identical replay with Idempotent-Replayed: true",
        second.summary(),
        if second.body == first.body { "identical" } else { "different" }
    );
    let after = ctx.balance(a).await?;
    ensure_or_fail!(
        before - after == ctx.amount,
        "quoted and bare key answered 201 and a replay, but A's balance moved {} (expected {})",
        before - after,
        ctx.amount
    );
    Ok(Verdict::Pass(format!(
        "POST key \"K\" -> {}, then key K -> {}, moved {} once",
        first.summary(),
        second.summary(),
        ctx.amount
    )))
}

pub async fn problem_shape(ctx: &Ctx) -> Outcome {
    let a = &ctx.acc.a;
    let body = ctx.body(a, "conformance problem.shape");
    let answer = ctx
        .post_raw(Some(&a.token), None, &body, Route::Direct, None)
        .await?;
    let json = answer.json().unwrap_or_default();
    let text = |f: &str| json.get(f).is_some_and(|v| v.is_string());
    let status_ok = json.get("status").and_then(|v| v.as_u64()) == Some(u64::from(answer.status));
    let ct = answer.header("content-type").unwrap_or("").to_string();
    ensure_or_fail!(
        ct.starts_with("application/problem+json") && text("type") && text("title") && text("code") && status_ok,
        "POST without a key -> {} content-type {ct:?} body {}, expected application/problem+json with \
         string type/title/code and status {}",
        answer.status,
        String::from_utf8_lossy(&answer.body),
        answer.status
    );
    Ok(Verdict::Pass(format!(
        "POST without a key -> {} application/problem+json {{type,title,status,code}}",
        answer.summary()
    )))
}
