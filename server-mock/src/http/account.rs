//! Wallet, profile (a naturally idempotent SET) and beneficiaries (unique per phone).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::{authenticate, json, parse_json, read_body, require_json};
use crate::app::App;
use crate::store::NewBeneficiary;
use sendonce_server::Problem;

use crate::text;

#[derive(Serialize)]
struct Wallet {
    user_id: String,
    balance_minor: i64,
    currency: String,
}

/// `GET /v1/wallet`: the balance is the sum of the caller's ledger.
pub async fn wallet(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    let caller = authenticate(&app, &headers).await?;
    let balance = app
        .store()
        .balance(caller.user_id.clone())
        .await
        .map_err(crate::problem::from_db)?;
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

/// `PUT /v1/profile`: a SET, so repeating it changes nothing and needs no key.
pub async fn put_profile(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let (parts, body) = req.into_parts();
    let caller = authenticate(&app, &parts.headers).await?;
    require_json(&parts.headers)?;
    let body: ProfileBody = parse_json(&read_body(&parts.headers, body).await?)?;
    let display_name = text::clean("display_name", &body.display_name, 100)?;
    app.store()
        .set_display_name(caller.user_id.clone(), display_name.clone())
        .await
        .map_err(crate::problem::from_db)?;
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
    let name = text::clean("name", &body.name, 100)?;
    let outcome = app
        .store()
        .add_beneficiary(NewBeneficiary {
            beneficiary_id: format!("ben_{}", uuid::Uuid::now_v7().simple()),
            user_id: caller.user_id,
            phone,
            name,
            now_ms: app.clock.now_ms(),
            max_per_user: MAX_BENEFICIARIES,
        })
        .await
        .map_err(crate::problem::from_db)?;
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
