//! What the three consumer binaries share: logging, the broker, database and clock flags, and
//! exit codes (2: refused to start, 3: fenced, 1: any other failure).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::consume::{self, ConsumeError, Effect};
use crate::inbox::Clock;
use crate::Broker;

/// Flags every consumer process takes.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// The broker: kafka://HOST:PORT[/NAMESPACE].
    #[arg(long)]
    pub broker: String,
    /// Test-only: the clock runs this far ahead (simulated days, e.g. 5d).
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub clock_offset: Option<Duration>,
}

impl Common {
    /// The broker, or the exit code for a bad address.
    pub fn broker(&self) -> Result<Broker, ExitCode> {
        Broker::parse(&self.broker).map_err(|e| {
            eprintln!("{e}");
            ExitCode::from(2)
        })
    }

    /// The clock the flags ask for.
    pub fn clock(&self) -> Clock {
        Clock {
            offset: self.clock_offset.unwrap_or_default(),
        }
    }
}

/// Logs to stderr, `RUST_LOG` or `info`.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
}

/// An inbox window: a duration, or forever (`None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(pub Option<Duration>);

/// `500ms`, `30s`, `15m`, `24h`, `7d`, or `forever`.
pub fn parse_window(s: &str) -> Result<Window, String> {
    match s {
        "forever" => Ok(Window(None)),
        s => parse_duration(s).map(|d| Window(Some(d))),
    }
}

/// `500ms`, `30s`, `15m`, `24h`, `7d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("not a duration: {s:?}"))?;
    let ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("unknown unit in {s:?} (ms, s, m, h, d)")),
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("too long: {s:?}"))
}

/// The inbox window by default: covers the topics this crate creates (7 days' retention
/// + 1 hour's segments + the broker's 5-minute retention check), with a day to spare.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(8 * 86_400);

/// Flags of a consumer with an inbox (`wallet`, `sms`).
#[derive(clap::Parser, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    /// This consumer's SQLite database file.
    #[arg(long)]
    pub db: PathBuf,
    /// How long the inbox remembers an event: at least what its topics can still deliver
    /// (retention + segment time + the broker's retention check), or forever.
    #[arg(long, default_value = "8d", value_parser = parse_window)]
    inbox_window: Window,
    /// Test-only: start even when the inbox window is shorter than that.
    #[arg(long, hide = true)]
    unsafe_skip_window_check: bool,
}

/// Runs consumer `E` with the command line's settings.
pub fn consumer_main<E: Effect>(args: Args) -> ExitCode {
    init_logging();
    let Ok(broker) = args.common.broker() else {
        return ExitCode::from(2);
    };
    let settings = consume::Settings {
        broker,
        db: args.db.clone(),
        inbox_window: args.inbox_window.0,
        skip_window_check: args.unsafe_skip_window_check,
        clock: args.common.clock(),
    };
    match consume::run::<E>(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ ConsumeError::Window(_)) => {
            eprintln!("{}: {e}", E::NAME);
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("{}: {e}", E::NAME);
            ExitCode::FAILURE
        }
    }
}
