//! Property tests: money is conserved under faults; no request can hurt the server.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Value};

use crate::common::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[derive(Debug, Clone)]
struct Op {
    from: usize,
    to: usize,
    amount: i64,
    key: u8,
    sends: u8,
}

#[derive(Debug, Clone)]
struct Run {
    balances: Vec<i64>,
    ops: Vec<Op>,
    drop_rate: f64,
    dup_rate: f64,
    seed: u64,
}

fn run_strategy() -> impl Strategy<Value = Run> {
    (
        prop::collection::vec(0i64..5_000, 2..=4),
        prop::collection::vec(
            (0usize..4, 0usize..4, 1i64..3_000, 0u8..6, 1u8..=2).prop_map(
                |(from, to, amount, key, sends)| Op {
                    from,
                    to,
                    amount,
                    key,
                    sends,
                },
            ),
            1..12,
        ),
        prop::sample::select(vec![0.0, 0.3]),
        prop::sample::select(vec![0.0, 0.3]),
        any::<u64>(),
    )
        .prop_map(|(balances, ops, drop_rate, dup_rate, seed)| Run {
            balances,
            ops,
            drop_rate,
            dup_rate,
            seed,
        })
}

async fn check_conservation(run: Run) -> Result<(), TestCaseError> {
    let s = start_with(|c| c.gateway_delay = Duration::from_millis(1)).await;
    let mut users = Vec::new();
    for (i, b) in run.balances.iter().enumerate() {
        users.push(s.user(&format!("u{i}"), *b).await);
    }
    s.faults(json!({
        "drop_response_after_commit_rate": run.drop_rate,
        "duplicate_delivery_rate": run.dup_rate,
        "seed": run.seed,
    }))
    .await;
    for op in &run.ops {
        let (from, to) = (op.from % users.len(), op.to % users.len());
        if from == to {
            continue;
        }
        let key = format!("k{}", op.key);
        let body = transfer_body(&users[to].id, op.amount);
        for _ in 0..op.sends {
            let r = s.transfer_until_done(&users[from].token, &key, &body).await;
            prop_assert!(
                [201, 402, 422].contains(&r.status),
                "unexpected {} {:?}",
                r.status,
                r.json()
            );
        }
    }
    s.client
        .delete(format!("{}/v1/test/faults", s.url))
        .send()
        .await
        .expect("clear faults");
    let stats = s.settle().await;
    prop_assert_eq!(&stats["keys_in_progress"], &json!(0));

    let mut total = 0;
    for u in &users {
        let b = s.balance(u).await;
        prop_assert!(b >= 0, "negative balance {}", b);
        total += b;
    }
    prop_assert_eq!(total, run.balances.iter().sum::<i64>(), "money conserved");

    let ledger = s.ledger().await;
    let of_kind = |k: &str| {
        ledger
            .iter()
            .filter(|e| e["kind"] == k)
            .cloned()
            .collect::<Vec<Value>>()
    };
    let (debits, credits) = (of_kind("debit"), of_kind("credit"));
    let mut per_key = HashSet::new();
    for d in &debits {
        prop_assert!(
            per_key.insert((d["user_id"].to_string(), d["idempotency_key"].to_string())),
            "two debits for one key"
        );
    }
    // The wallet balance (read from the maintained `balances` row) is the ledger's sum.
    for u in &users {
        let sum: i64 = ledger
            .iter()
            .filter(|e| e["user_id"] == json!(u.id))
            .map(|e| {
                let a = e["amount_minor"].as_i64().unwrap_or(0);
                if e["kind"] == "debit" {
                    -a
                } else {
                    a
                }
            })
            .sum();
        prop_assert_eq!(s.balance(u).await, sum, "balance is the sum of the ledger");
    }
    let mut credit_count: HashMap<String, usize> = HashMap::new();
    for c in &credits {
        *credit_count
            .entry(c["transfer_id"].to_string())
            .or_default() += 1;
    }
    let sms = s.get("/v1/test/sms", None).await.json();
    let mut sms_count: HashMap<String, usize> = HashMap::new();
    for m in sms.as_array().cloned().unwrap_or_default() {
        *sms_count.entry(m["transfer_id"].to_string()).or_default() += 1;
    }
    prop_assert_eq!(credits.len(), debits.len());
    prop_assert_eq!(sms_count.values().sum::<usize>(), debits.len());
    for d in &debits {
        let id = d["transfer_id"].to_string();
        prop_assert_eq!(
            credit_count.get(&id).copied(),
            Some(1),
            "one credit per debit"
        );
        prop_assert_eq!(sms_count.get(&id).copied(), Some(1), "one SMS per debit");
    }
    s.stop().await;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn money_is_conserved_after_a_randomized_run(run in run_strategy()) {
        runtime().block_on(check_conservation(run))?;
    }
}

/// One long-lived server for the fuzz cases, so "keeps serving" spans all of them.
struct Shared {
    rt: tokio::runtime::Runtime,
    url: String,
    token: String,
    recipient: String,
    client: reqwest::Client,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let rt = runtime();
        let (url, token, recipient, client) = rt.block_on(async {
            let s = start_with(|c| c.gateway_delay = Duration::ZERO).await;
            let a = s.user("fuzz", 1_000_000_000).await;
            let b = s.user("target", 0).await;
            let out = (
                s.url.clone(),
                a.token.clone(),
                b.id.clone(),
                s.client.clone(),
            );
            // Keep the server (and its temp dir) alive for the whole test binary.
            std::mem::forget(s);
            out
        });
        Shared {
            rt,
            url,
            token,
            recipient,
            client,
        }
    })
}

#[derive(Debug, Clone)]
struct Fuzz {
    method: &'static str,
    path: String,
    auth: Option<Option<Vec<u8>>>,
    key: Option<Vec<u8>>,
    content_type: Option<Vec<u8>>,
    extra: Option<(&'static str, Vec<u8>)>,
    body: FuzzBody,
}

#[derive(Debug, Clone)]
enum FuzzBody {
    Bytes(Vec<u8>),
    Transfer {
        amount: Value,
        currency: String,
        valid_to: bool,
        note: Option<String>,
    },
    Huge(usize),
}

/// Bytes a header value may carry (visible ASCII, space, tab, obs-text).
fn header_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![0x20u8..0x7f, 0x80u8..=0xff, Just(b'\t'), Just(b'"')],
        0..max,
    )
}

fn fuzz_strategy() -> impl Strategy<Value = Fuzz> {
    let method = prop::sample::select(vec!["GET", "POST", "PUT", "DELETE", "PATCH"]);
    let path = prop_oneof![
        prop::sample::select(vec![
            "/v1/transfers",
            "/v1/wallet",
            "/v1/profile",
            "/v1/beneficiaries",
            "/v1/test/users",
            "/v1/bench/plain",
            "/",
            "/v1",
        ])
        .prop_map(String::from),
        "[a-zA-Z0-9_%.-]{0,40}".prop_map(|s| format!("/v1/transfers/{s}")),
        "[a-zA-Z0-9_%\"+=&.-]{0,300}".prop_map(|s| format!("/v1/transfers?idempotency_key={s}")),
    ];
    let amount = prop_oneof![
        any::<i64>().prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,8}".prop_map(Value::from),
        Just(Value::Null),
    ];
    let body = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..400).prop_map(FuzzBody::Bytes),
        (
            amount,
            "[A-Z]{0,4}|BDT",
            any::<bool>(),
            prop::option::of(".{0,300}")
        )
            .prop_map(|(amount, currency, valid_to, note)| FuzzBody::Transfer {
                amount,
                currency,
                valid_to,
                note
            }),
        (16_000usize..20_000).prop_map(FuzzBody::Huge),
    ];
    (
        method,
        path,
        prop::option::of(prop::option::of(header_bytes(80))),
        prop::option::of(header_bytes(300)),
        prop::option::of(prop_oneof![
            Just(b"application/json".to_vec()),
            Just(b"application/json; charset=utf-8".to_vec()),
            header_bytes(40),
        ]),
        prop::option::of((
            prop::sample::select(vec![
                "content-length",
                "transfer-encoding",
                "accept",
                "x-forwarded-for",
            ]),
            header_bytes(30),
        )),
        body,
    )
        .prop_map(
            |(method, path, auth, key, content_type, extra, body)| Fuzz {
                method,
                path,
                auth,
                key,
                content_type,
                extra,
                body,
            },
        )
}

async fn fire(sh: &Shared, f: Fuzz) -> Result<(), TestCaseError> {
    let body: Vec<u8> = match &f.body {
        FuzzBody::Bytes(b) => b.clone(),
        FuzzBody::Transfer {
            amount,
            currency,
            valid_to,
            note,
        } => json!({
            "to_user_id": if *valid_to { sh.recipient.clone() } else { "usr_x".to_string() },
            "amount_minor": amount,
            "currency": currency,
            "note": note,
        })
        .to_string()
        .into_bytes(),
        FuzzBody::Huge(n) => vec![b'a'; *n],
    };
    let method = reqwest::Method::from_bytes(f.method.as_bytes()).expect("method");
    let mut req = sh
        .client
        .request(method, format!("{}{}", sh.url, f.path))
        .body(body);
    match &f.auth {
        None => {}
        Some(None) => req = req.bearer_auth(&sh.token),
        Some(Some(raw)) => {
            if let Ok(v) = reqwest::header::HeaderValue::from_bytes(raw) {
                req = req.header("authorization", v);
            }
        }
    }
    for (name, raw) in [
        ("idempotency-key", &f.key),
        ("content-type", &f.content_type),
    ] {
        if let Some(v) = raw
            .as_ref()
            .and_then(|r| reqwest::header::HeaderValue::from_bytes(r).ok())
        {
            req = req.header(name, v);
        }
    }
    // Framing headers we would corrupt on purpose would only test hyper's parser.
    if let Some((name, raw)) = &f.extra {
        if !matches!(*name, "content-length" | "transfer-encoding") {
            if let Ok(v) = reqwest::header::HeaderValue::from_bytes(raw) {
                req = req.header(*name, v);
            }
        }
    }
    let r = req
        .send()
        .await
        .map_err(|e| TestCaseError::fail(format!("no answer: {e}")))?;
    let status = r.status().as_u16();
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = r
        .bytes()
        .await
        .map_err(|e| TestCaseError::fail(format!("broken body: {e}")))?;
    prop_assert!(
        status != 500,
        "internal error for {:?}: {:?}",
        f,
        String::from_utf8_lossy(&bytes)
    );
    if status >= 400 {
        prop_assert_eq!(
            &content_type,
            "application/problem+json",
            "status {}",
            status
        );
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| TestCaseError::fail(format!("problem body is not JSON: {e}")))?;
        prop_assert!(v["code"].is_string());
        prop_assert_eq!(v["status"].as_u64(), Some(u64::from(status)));
    }
    // And the server still serves.
    let alive = sh
        .client
        .get(format!("{}/v1/wallet", sh.url))
        .bearer_auth(&sh.token)
        .send()
        .await
        .map_err(|e| TestCaseError::fail(format!("server stopped answering: {e}")))?;
    prop_assert_eq!(alive.status().as_u16(), 200);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, max_shrink_iters: 128, ..ProptestConfig::default() })]

    #[test]
    fn no_request_can_panic_or_stop_the_server(f in fuzz_strategy()) {
        let sh = shared();
        sh.rt.block_on(fire(sh, f))?;
    }
}
