//! Wallet, profile (a naturally idempotent SET) and beneficiaries (unique per phone).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::{authenticate, json, parse_json, read_body, require_json};
use crate::problem::Problem;
use crate::{ledger, App};

#[derive(Serialize)]
struct Wallet {
    user_id: String,
    balance_minor: i64,
    currency: String,
}

/// `GET /v1/wallet`: the balance is the sum of the caller's ledger.
pub async fn wallet(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    let caller = authenticate(&app, &headers).await?;
    let user = caller.user_id.clone();
    let balance = app
        .db
        .read(move |c| ledger::balance(c, &user))
        .await
        .map_err(Problem::from_db)?;
    Ok(json(
        StatusCode::OK,
        &Wallet {
            user_id: caller.user_id,
            balance_minor: balance,
            currency: caller.currency,
        },
    ))
}

#[derive(Deserialize)]
struct ProfileBody {
    display_name: String,
}

#[derive(Serialize)]
struct Profile {
    user_id: String,
    display_name: String,
}

/// Validates a stored name and returns the value to store: trimmed, 1..=`max_chars`
/// characters, no control characters or bidi overrides (they would reach SMS texts).
pub(crate) fn clean_text(field: &str, value: &str, max_chars: usize) -> Result<String, Problem> {
    let trimmed = value.trim();
    let n = trimmed.chars().count();
    if n == 0 || n > max_chars {
        return Err(Problem::invalid(format!(
            "{field} must have 1 to {max_chars} characters"
        )));
    }
    if let Some(bad) = trimmed.chars().find(|&c| forbidden_char(c)) {
        return Err(Problem::invalid(format!(
            "{field} must not contain control or bidi characters (found U+{:04X})",
            u32::from(bad)
        )));
    }
    Ok(trimmed.to_string())
}

/// Control characters (newlines included) and the bidi controls that can make a text read
/// differently from what it says (U+061C, U+200E/F, U+202A-E, U+2066-9).
pub(crate) fn forbidden_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `PUT /v1/profile`: a SET, so repeating it changes nothing and needs no key.
pub async fn put_profile(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let (parts, body) = req.into_parts();
    let caller = authenticate(&app, &parts.headers).await?;
    require_json(&parts.headers)?;
    let body: ProfileBody = parse_json(&read_body(&parts.headers, body).await?)?;
    let display_name = clean_text("display_name", &body.display_name, 100)?;
    let (user, name) = (caller.user_id.clone(), display_name.clone());
    app.db
        .call(move |c| {
            c.execute(
                "UPDATE users SET display_name = ?2 WHERE user_id = ?1",
                params![user, name],
            )?;
            Ok(())
        })
        .await
        .map_err(Problem::from_db)?;
    Ok(json(
        StatusCode::OK,
        &Profile {
            user_id: caller.user_id,
            display_name,
        },
    ))
}

#[derive(Deserialize)]
struct BeneficiaryBody {
    phone: String,
    name: String,
}

#[derive(Serialize)]
struct Beneficiary {
    beneficiary_id: String,
    phone: String,
    name: String,
    created_at: String,
}

/// Beneficiaries one user may keep.
pub const MAX_BENEFICIARIES: i64 = 200;

/// `POST /v1/beneficiaries`: UNIQUE (user, phone) turns a repeat into 200 with the original.
pub async fn post_beneficiary(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let (parts, body) = req.into_parts();
    let caller = authenticate(&app, &parts.headers).await?;
    require_json(&parts.headers)?;
    let body: BeneficiaryBody = parse_json(&read_body(&parts.headers, body).await?)?;
    let phone = body.phone.trim().to_string();
    let phone_ok = (3..=20).contains(&phone.len())
        && phone
            .chars()
            .enumerate()
            .all(|(i, ch)| ch.is_ascii_digit() || (i == 0 && ch == '+'));
    if !phone_ok {
        return Err(Problem::invalid(
            "phone must be 3 to 20 digits, optionally after +",
        ));
    }
    let name = clean_text("name", &body.name, 100)?;
    let id = format!("ben_{}", uuid::Uuid::now_v7().simple());
    let now = app.clock.now_ms();
    let user = caller.user_id;
    let outcome = app
        .db
        .call(move |c| {
            // A cap per user, so beneficiaries cannot grow without bound; a repeat of an
            // existing phone is still answered with its record.
            let (count, exists): (i64, bool) = c.query_row(
                "SELECT COUNT(*), COALESCE(SUM(phone = ?2), 0) > 0 FROM beneficiaries WHERE user_id = ?1",
                params![user, phone],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            if count >= MAX_BENEFICIARIES && !exists {
                return Ok(None);
            }
            // The unique constraint decides; the select only reads the winner.
            let inserted = c.execute(
                "INSERT INTO beneficiaries (beneficiary_id, user_id, phone, name, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (user_id, phone) DO NOTHING",
                params![id, user, phone, name, now],
            )?;
            let row = c
                .query_row(
                    "SELECT beneficiary_id, phone, name, created_at_ms FROM beneficiaries
                     WHERE user_id = ?1 AND phone = ?2",
                    params![user, phone],
                    |r| {
                        Ok(Beneficiary {
                            beneficiary_id: r.get(0)?,
                            phone: r.get(1)?,
                            name: r.get(2)?,
                            created_at: crate::clock::rfc3339(r.get(3)?),
                        })
                    },
                )
                .optional()?;
            Ok(Some((inserted == 1, row)))
        })
        .await
        .map_err(Problem::from_db)?;
    let Some((created, row)) = outcome else {
        return Err(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "beneficiary_limit",
            format!("at most {MAX_BENEFICIARIES} beneficiaries per user"),
        ));
    };
    let row = row.ok_or_else(|| Problem::internal("beneficiary vanished after insert"))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json(status, &row))
}
