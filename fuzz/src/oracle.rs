//! What a verdict may be, judged from the answer alone and independently of the SDK's code:
//! DESIGN.md invariant 7 (the phone never believes what the server does not hold) as a check.

use sendonce::transport::HttpResponse;
use sendonce::{Locator, ResponseContract, Verdict};

/// The string (or number, as text) at `locator` in `r`, read without the SDK's helpers.
pub fn located(locator: &Locator, r: &HttpResponse) -> Option<String> {
    match locator {
        Locator::Header(name) => r
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone()),
        Locator::Body(pointer) => {
            let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
            match v.pointer(pointer)? {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            }
        }
    }
}

/// The server's own error: its media type and a non-empty code where the contract says.
pub fn own_error_code(c: &ResponseContract, r: &HttpResponse) -> Option<String> {
    let media = r
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.split(';').next().unwrap_or_default().trim().to_string())?;
    if !media.eq_ignore_ascii_case(c.problem.content_type.trim()) {
        return None;
    }
    located(&Locator::Body(c.problem.code.clone()), r).filter(|code| !code.is_empty())
}

/// `Ok` when `verdict` is one the answer allows for an attempt sent with `key`; else why not.
pub fn judge(
    c: &ResponseContract,
    r: &HttpResponse,
    key: &str,
    verdict: &Verdict,
) -> Result<(), String> {
    let names_key = c
        .key_echo
        .as_ref()
        .and_then(|l| located(l, r))
        .is_some_and(|echo| echo == key);
    let code = own_error_code(c, r);
    let final_error = |what: &str| -> Result<String, String> {
        if !(400..=499).contains(&r.status) {
            return Err(format!("{what} on status {}", r.status));
        }
        code.clone()
            .ok_or_else(|| format!("{what} on an answer that is not the server's own error"))
    };
    match verdict {
        Verdict::Succeeded {
            server_transfer_id,
            replayed,
        } => {
            if !(200..=299).contains(&r.status) || !names_key {
                return Err("succeeded on an answer that does not name the key".into());
            }
            if server_transfer_id.is_empty()
                || located(&c.operation_id, r).as_ref() != Some(server_transfer_id)
            {
                return Err(format!(
                    "operation id {server_transfer_id:?} is not the answer's"
                ));
            }
            let header = c.replayed_header.as_ref().and_then(|h| {
                r.headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(h))
                    .map(|(_, v)| v.eq_ignore_ascii_case("true"))
            });
            if *replayed != header.unwrap_or(false) {
                return Err(format!("replayed {replayed} against the header"));
            }
        }
        Verdict::Rejected(rejection) => {
            let code = final_error("rejected")?;
            if matches!(r.status, 408 | 409 | 425 | 429) {
                return Err(format!("rejected on a {} (send again)", r.status));
            }
            if c.key_in_use.contains(&code) || rejection.code != code {
                return Err(format!(
                    "rejected with code {:?} for {code:?}",
                    rejection.code
                ));
            }
            if rejection.http_status != r.status {
                return Err("rejection carries another status".into());
            }
        }
        Verdict::Failed(rejection) => {
            let code = final_error("failed")?;
            if !c.key_reused.contains(&code) || rejection.code != code {
                return Err(format!("failed on {code:?}, not a key-reuse code"));
            }
        }
        Verdict::RequiresAction(action) => {
            let code = final_error("requires action")?;
            let rule = c.action_required.as_ref().ok_or("no action rule")?;
            if !rule.codes.contains(&code) || action.code != code {
                return Err(format!("requires action on {code:?}"));
            }
        }
        Verdict::AuthRequired(_) => {
            final_error("auth required")?;
        }
        Verdict::Retry { retry_after_ms, .. } => {
            if retry_after_ms.is_some_and(|ms| ms < 0) {
                return Err("negative retry-after".into());
            }
        }
    }
    Ok(())
}
