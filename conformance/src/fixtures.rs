//! The accounts the kit moves money with: read from a fixtures file (a real backend), or
//! created through server-mock's test API.

use std::path::Path;

use serde::Deserialize;
use serde_json::json;

use crate::client::{Api, Call};
use crate::SetupError;

/// Opening balance of each paying user the kit creates through the test API.
const TEST_API_BALANCE: i64 = 1_000_000;

/// The fixtures file: at least two paying users, a recipient, and allowances.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixtures {
    /// Paying users; the first two are used (A and B).
    pub users: Vec<FixtureUser>,
    /// The account every transfer goes to (not one of the paying users).
    pub recipient_id: String,
    /// Optional: a user whose wallet holds less than `--amount-minor`, in the same
    /// currency as A (for the stored-402 check; it is skipped without one).
    #[serde(default)]
    pub broke_token: Option<String>,
}

/// One paying user of the fixtures.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureUser {
    /// Bearer token.
    pub token: String,
    /// Wallet currency (`BDT`).
    pub currency: String,
    /// The most the kit may move out of this wallet, in minor units.
    pub allowance_minor: i64,
}

/// A user the kit acts as.
#[derive(Debug, Clone)]
pub struct User {
    /// `A`, `B` or `broke`: how evidence lines name them.
    pub name: &'static str,
    /// Bearer token.
    pub token: String,
    /// The backend's id for them (from `GET /v1/wallet`).
    pub user_id: String,
    /// Wallet currency.
    pub currency: String,
    /// The most the kit may move out of this wallet.
    pub allowance_minor: i64,
}

/// Everyone the checks need.
#[derive(Debug, Clone)]
pub struct Accounts {
    /// First payer.
    pub a: User,
    /// Second payer (per-user key scope, look-up scope).
    pub b: User,
    /// A payer who cannot pay (stored 402), if there is one.
    pub broke: Option<User>,
    /// Where the money goes.
    pub recipient_id: String,
}

impl Fixtures {
    /// Reads and validates a fixtures file.
    pub fn load(path: &Path) -> Result<Self, SetupError> {
        let bad = |why: String| SetupError::Fixtures(format!("{}: {why}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let f: Fixtures = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if f.users.len() < 2 {
            return Err(bad("needs at least two users".into()));
        }
        for (i, u) in f.users.iter().enumerate() {
            if u.token.trim().is_empty() || u.currency.trim().is_empty() {
                return Err(bad(format!("users[{i}]: empty token or currency")));
            }
            if u.allowance_minor < 0 {
                return Err(bad(format!("users[{i}]: negative allowance_minor")));
            }
        }
        if f.recipient_id.trim().is_empty() {
            return Err(bad("empty recipient_id".into()));
        }
        Ok(f)
    }

    /// Resolves the users' ids through `GET /v1/wallet`.
    pub async fn accounts(self, api: &Api, token_b: Option<&str>) -> Result<Accounts, SetupError> {
        let mut users = self.users.into_iter();
        let (ua, ub) = (
            users.next().expect("checked"),
            users.next().expect("checked"),
        );
        let a = resolve(api, "A", &ua.token, ua.allowance_minor).await?;
        let b = resolve(api, "B", token_b.unwrap_or(&ub.token), ub.allowance_minor).await?;
        let broke = match self.broke_token {
            Some(t) => Some(resolve(api, "broke", &t, 0).await?),
            None => None,
        };
        for (u, want) in [(&a, &ua.currency), (&b, &ub.currency)] {
            if &u.currency != want {
                return Err(SetupError::Fixtures(format!(
                    "user {}'s wallet is in {}, the fixtures say {want}",
                    u.name, u.currency
                )));
            }
            if u.user_id == self.recipient_id {
                return Err(SetupError::Fixtures(format!(
                    "recipient_id is user {}'s own id (a self-transfer is invalid)",
                    u.name
                )));
            }
        }
        Ok(Accounts {
            a,
            b,
            broke,
            recipient_id: self.recipient_id,
        })
    }
}

/// Creates A, B, a broke user and a recipient through `POST /v1/test/users`.
pub async fn test_api_accounts(
    api: &Api,
    currency: &str,
    token_b: Option<&str>,
) -> Result<Accounts, SetupError> {
    let a = create(api, "A", currency, TEST_API_BALANCE).await?;
    let b = match token_b {
        Some(t) => {
            let mut b = resolve(api, "B", t, 0).await?;
            b.allowance_minor = balance(api, &b).await?;
            b
        }
        None => create(api, "B", currency, TEST_API_BALANCE).await?,
    };
    let broke = create(api, "broke", currency, 0).await?;
    let recipient = create(api, "recipient", currency, 0).await?;
    Ok(Accounts {
        a,
        b,
        broke: Some(broke),
        recipient_id: recipient.user_id,
    })
}

async fn create(
    api: &Api,
    name: &'static str,
    currency: &str,
    balance: i64,
) -> Result<User, SetupError> {
    let body = json!({"display_name": format!("conformance {name}"), "balance_minor": balance, "currency": currency})
        .to_string();
    let answer = api
        .send(Call::post(
            "/v1/test/users",
            api.test_token(),
            body.as_bytes(),
        ))
        .await
        .map_err(|e| SetupError::Unreachable(crate::client::error_chain(&e)))?;
    if answer.status != 201 {
        return Err(SetupError::TestApi(format!(
            "POST /v1/test/users -> {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        )));
    }
    let (Some(user_id), Some(token)) = (answer.field("user_id"), answer.field("token")) else {
        return Err(SetupError::TestApi(
            "POST /v1/test/users: no user_id/token in the answer".into(),
        ));
    };
    Ok(User {
        name,
        token,
        user_id,
        currency: currency.to_string(),
        allowance_minor: balance,
    })
}

async fn resolve(
    api: &Api,
    name: &'static str,
    token: &str,
    allowance: i64,
) -> Result<User, SetupError> {
    let answer = api
        .send(Call::get(api.account_path(), Some(token)))
        .await
        .map_err(|e| SetupError::Unreachable(crate::client::error_chain(&e)))?;
    if answer.status != 200 {
        return Err(SetupError::Fixtures(format!(
            "GET {} as user {name} -> {} (is the token valid?)",
            api.account_path(),
            answer.summary()
        )));
    }
    let (Some(user_id), Some(currency)) = (answer.field("user_id"), answer.field("currency"))
    else {
        return Err(SetupError::Fixtures(format!(
            "GET {} as user {name}: no user_id/currency",
            api.account_path()
        )));
    };
    Ok(User {
        name,
        token: token.to_string(),
        user_id,
        currency,
        allowance_minor: allowance,
    })
}

/// The user's balance from `GET /v1/wallet`.
pub async fn balance(api: &Api, user: &User) -> Result<i64, SetupError> {
    let answer = api
        .send(Call::get(api.account_path(), Some(&user.token)))
        .await
        .map_err(|e| SetupError::Unreachable(crate::client::error_chain(&e)))?;
    answer
        .json()
        .and_then(|v| v.get("balance_minor")?.as_i64())
        .filter(|_| answer.status == 200)
        .ok_or_else(|| {
            SetupError::Fixtures(format!(
                "GET {} as user {} -> {}",
                api.account_path(),
                user.name,
                answer.summary()
            ))
        })
}
