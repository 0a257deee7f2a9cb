//! `sendonce-conformance`: the sendonce idempotency contract checked black-box against
//! any backend URL, with a chaos proxy of its own between the kit and the backend.
//!
//! [`run`] does everything the binary does and returns the [`report::Report`], so tests
//! can run the kit in process.

pub mod checks;
pub mod client;
pub mod error_text;
pub mod fixtures;
pub mod operation;
pub mod proxy;
pub mod report;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;

use checks::{Check, Ctx, Verdict, CHECKS};
use client::Api;
use report::{CheckResult, Report, Status};

/// Command line of `sendonce-conformance`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "sendonce-conformance",
    version,
    about = "Checks a backend against the sendonce idempotency contract"
)]
#[command(group = clap::ArgGroup::new("accounts").required(true).args(["test_api", "fixtures"]))]
pub struct Args {
    /// Backend base URL, e.g. `http://127.0.0.1:8080` or `https://staging.example.com`
    #[arg(long, value_name = "URL")]
    pub base_url: String,
    /// Create the users through server-mock's test API (POST /v1/test/users).
    #[arg(long)]
    pub test_api: bool,
    /// JSON file with the users' tokens, currencies, allowances and a recipient id.
    #[arg(long, value_name = "FILE")]
    pub fixtures: Option<PathBuf>,
    /// Bearer token of server-mock's test API, when it was started with `--test-api-token`.
    #[arg(long, value_name = "TOKEN", requires = "test_api")]
    pub test_api_token: Option<String>,
    /// Bearer token of the second user (instead of the fixtures' second user or a created one).
    #[arg(long, value_name = "TOKEN")]
    pub token_b: Option<String>,
    /// Smallest amount to move per transfer, in minor units.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i64).range(1..))]
    pub amount_minor: i64,
    /// Currency of the users created with --test-api.
    #[arg(long, default_value = "BDT")]
    pub currency: String,
    /// Write the results (with every request and answer of a failed check) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the results as JUnit XML.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Transfers in the soak (0 skips it); lowered to fit the fixtures' allowance.
    #[arg(long, default_value_t = 200)]
    pub soak: u64,
    /// The soak starts no new transfer after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub soak_seconds: u64,
    /// Client timeout per request, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Client timeout of the late-answer chaos check (the proxy holds the answer 500 ms longer).
    #[arg(long, default_value_t = 1_000)]
    pub late_timeout_ms: u64,
    /// The operation to check, as a JSON profile (path, body template, look-up, account
    /// path, codes: see README); server-mock's transfers when absent.
    #[arg(long, value_name = "FILE")]
    pub operation: Option<PathBuf>,
    /// Run only the checks whose id starts with this (repeatable).
    #[arg(long, value_name = "PREFIX")]
    pub only: Vec<String>,
}

/// Why the kit could not run at all (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// No answer from the backend.
    #[error("backend unreachable: {0}")]
    Unreachable(String),
    /// The fixtures are unusable.
    #[error("bad fixtures: {0}")]
    Fixtures(String),
    /// The test API refused.
    #[error("test API: {0}")]
    TestApi(String),
    /// The checks would need more money than the fixtures allow.
    #[error("allowance too small: {0}")]
    Allowance(String),
    /// Something local (the proxy, a report file).
    #[error("{0}")]
    Local(String),
}

/// Runs the selected checks, printing one line per check (and the plan first) to `out`.
pub async fn run(args: &Args, out: &mut (dyn Write + Send)) -> Result<Report, SetupError> {
    let mut api = Api::new(&args.base_url, Duration::from_millis(args.timeout_ms))
        .map_err(|e| SetupError::Local(e.to_string()))?;
    api.set_test_token(args.test_api_token.clone());
    let op = match &args.operation {
        Some(path) => operation::Operation::load(path).map_err(SetupError::Fixtures)?,
        None => operation::Operation::default(),
    };
    api.set_operation(&op.account_path, &op.id_field);
    let acc = if args.test_api {
        fixtures::test_api_accounts(&api, &args.currency, args.token_b.as_deref()).await?
    } else {
        let path = args
            .fixtures
            .as_ref()
            .expect("clap requires --test-api or --fixtures");
        fixtures::Fixtures::load(path)?
            .accounts(&api, args.token_b.as_deref())
            .await?
    };
    let selected: Vec<&Check> = CHECKS
        .iter()
        .filter(|c| args.only.is_empty() || args.only.iter().any(|p| c.id.starts_with(p.as_str())))
        .collect();
    let (soak, plan) = plan(args, &acc, &selected)?;
    let line = |out: &mut (dyn Write + Send), s: &str| {
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    line(out, &plan);

    let proxy = proxy::ChaosProxy::start(&args.base_url)
        .await
        .map_err(|e| SetupError::Local(format!("chaos proxy: {e}")))?;
    api.set_proxy(proxy.base_url());
    let start = balances(&api, &acc).await;
    let _ = api.take_log();
    let ctx = Ctx {
        api,
        acc,
        amount: args.amount_minor,
        test_api: args.test_api,
        soak_transfers: soak,
        soak_time: Duration::from_secs(args.soak_seconds),
        late_timeout: Duration::from_millis(args.late_timeout_ms),
        op: std::sync::Arc::new(op),
    };
    let mut results = Vec::new();
    for check in selected {
        let t0 = Instant::now();
        let outcome = checks::run(check.id, &ctx).await;
        let (status, evidence) = match outcome {
            Ok(Verdict::Pass(e)) => (Status::Pass, e),
            Ok(Verdict::Fail(e)) => (Status::Fail, e),
            Ok(Verdict::Skip(e)) => (Status::Skip, e),
            Err(e) => (
                Status::Fail,
                format!("no answer where one was needed: {}", chain(&e)),
            ),
        };
        let log = ctx.api.take_log();
        let result = CheckResult {
            id: check.id.to_string(),
            status,
            evidence: evidence.replace('\n', " "),
            seconds: t0.elapsed().as_secs_f64(),
            exchanges: if status == Status::Fail {
                log
            } else {
                Vec::new()
            },
        };
        line(out, &result.line());
        results.push(result);
    }
    let end = balances(&ctx.api, &ctx.acc).await;
    let moved_minor = start
        .zip(end)
        .map(|((a0, b0), (a1, b1))| (a0 - a1, b0 - b1));
    let moved = match (start, end) {
        (Some((a0, b0)), Some((a1, b1))) => format!(
            "moved: {} from A, {} from B ({} {} minor units in total, as measured by GET {})",
            a0 - a1,
            b0 - b1,
            (a0 - a1) + (b0 - b1),
            ctx.acc.a.currency,
            ctx.api.account_path()
        ),
        _ => format!("moved: unknown (GET {} failed)", ctx.api.account_path()),
    };
    line(out, &moved);
    let report = Report {
        base_url: args.base_url.clone(),
        plan,
        moved,
        moved_minor,
        checks: results,
    };
    line(out, &report.summary());
    if let Some(p) = &args.json {
        report
            .write_json(p)
            .map_err(|e| SetupError::Local(format!("{}: {e}", p.display())))?;
    }
    if let Some(p) = &args.junit {
        report
            .write_junit(p)
            .map_err(|e| SetupError::Local(format!("{}: {e}", p.display())))?;
    }
    Ok(report)
}

/// The money plan: what the checks move, the worst case, and the soak size that fits.
fn plan(
    args: &Args,
    acc: &fixtures::Accounts,
    selected: &[&Check],
) -> Result<(u64, String), SetupError> {
    let amount = args.amount_minor as u64;
    let sum = |f: fn(&checks::Cost) -> u64| selected.iter().map(|c| f(&c.cost)).sum::<u64>();
    let (a, a_worst, b, b_worst) = (
        sum(|c| c.a),
        sum(|c| c.a_worst),
        sum(|c| c.b),
        sum(|c| c.b_worst),
    );
    let allow_a = acc.a.allowance_minor.max(0) as u64;
    let allow_b = acc.b.allowance_minor.max(0) as u64;
    for (name, worst, allow) in [("A", a_worst, allow_a), ("B", b_worst, allow_b)] {
        if worst * amount > allow {
            return Err(SetupError::Allowance(format!(
                "user {name} may spend {allow}, the checks could move up to {} ({worst} x {amount})",
                worst * amount
            )));
        }
    }
    let with_soak = selected.iter().any(|c| c.id == checks::soak::ID);
    let room = (allow_a - a_worst * amount) / (checks::soak_worst(1) * amount);
    let soak = if with_soak { args.soak.min(room) } else { 0 };
    let (a, a_worst) = (a + soak, a_worst + checks::soak_worst(soak));
    let cur = &acc.a.currency;
    let text = format!(
        "plan: {} checks against {}; will move {} {cur} minor units in total ({} from A, {} from B, {} each), \
         at most {} if the backend executed every request sent ({} from A, {} from B); allowance A {allow_a}, B {allow_b}{}",
        selected.len(),
        args.base_url,
        (a + b) * amount,
        a * amount,
        b * amount,
        amount,
        (a_worst + b_worst) * amount,
        a_worst * amount,
        b_worst * amount,
        if with_soak && soak < args.soak { format!("; soak lowered to {soak} transfers to fit") } else { String::new() },
    );
    Ok((soak, text))
}

async fn balances(api: &Api, acc: &fixtures::Accounts) -> Option<(i64, i64)> {
    let a = fixtures::balance(api, &acc.a).await.ok()?;
    let b = fixtures::balance(api, &acc.b).await.ok()?;
    Some((a, b))
}

fn chain(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}
