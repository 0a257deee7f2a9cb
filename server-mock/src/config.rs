//! Server configuration and the duration syntax used by the command line.

use std::time::Duration;

/// PostgreSQL connections per server instance (`--db-pool`).
pub const DEFAULT_POOL_SIZE: usize = 16;

/// Everything a server instance needs to know before it starts.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// SQLite file path, `:memory:` for a throw-away database, or a PostgreSQL URL
    /// (`postgres://`, `postgresql://`, a unix socket as `?host=/dir` or `%2Fdir` host).
    pub db: String,
    /// Most PostgreSQL connections this instance opens (unused with SQLite).
    pub db_pool: usize,
    /// How long PostgreSQL may make this instance wait (unused with SQLite).
    pub db_timeouts: DbTimeouts,
    /// How long a finished idempotency key is remembered (must exceed the client's retry window).
    pub key_window: Duration,
    /// How long a key may stay `IN_PROGRESS` before the reaper resolves it.
    pub lock_timeout: Duration,
    /// How long published outbox events, inbox rows and SMS records are kept.
    pub retention: crate::retention::Retention,
    /// Simulated latency of the payment gateway step.
    pub gateway_delay: Duration,
    /// Whether the `/v1/test/*` and `/v1/bench/*` endpoints are mounted.
    pub test_api: bool,
    /// Bearer token the test API requires (needed when listening beyond loopback).
    pub test_api_token: Option<Secret>,
    /// Host names the test API answers besides loopback ones (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// Connection limits: slow or idle clients cannot hold the server.
    pub limits: Limits,
    /// Per-user request rate and keys per hour.
    pub quotas: crate::quota::QuotaLimits,
    /// Highest balance a wallet may reach; a transfer past it is refused (stored 422).
    pub max_balance_minor: i64,
    /// Where the relay publishes outbox events (`--broker`).
    pub broker: Destination,
    /// The single-broker development setup (`--kafka-single-broker-dev`): relay to topics
    /// with one replica, whose acks a lost broker can take back. Off, the relay refuses them.
    pub kafka_single_broker_dev: bool,
    /// Test-only builds: the debit transaction skips the lock check (the fence), so tests
    /// and rides can show the double payments it prevents. Never in a shipped binary.
    #[cfg(feature = "unfenced")]
    pub unfenced: bool,
    /// Test-only builds: the broker relay marks every batch published whether or not the broker
    /// acknowledged it (at most once), so a ride can show the events a broker outage then loses.
    #[cfg(feature = "unsafe-relay")]
    pub relay_marks_unacked: bool,
    /// Deterministic simulations only (`sendonce-sim ride`): the wall clock starts at this time
    /// and follows tokio's (paused) clock, and the database runs on the caller's thread (no
    /// writer thread, no blocking pool), so a seed replays the same ride.
    pub simulated_start_ms: Option<i64>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            db: ":memory:".to_string(),
            db_pool: DEFAULT_POOL_SIZE,
            db_timeouts: DbTimeouts::default(),
            key_window: Duration::from_secs(48 * 3600),
            lock_timeout: Duration::from_secs(60),
            retention: crate::retention::Retention::default(),
            gateway_delay: Duration::from_millis(5),
            test_api: true,
            test_api_token: None,
            allow_hosts: Vec::new(),
            limits: Limits::default(),
            quotas: crate::quota::QuotaLimits::default(),
            // 10^17 minor units: 10^5 x the largest test deposit, 10^-2 x i64::MAX.
            max_balance_minor: 100_000_000_000_000_000,
            broker: Destination::InProcess,
            kafka_single_broker_dev: false,
            #[cfg(feature = "unfenced")]
            unfenced: false,
            #[cfg(feature = "unsafe-relay")]
            relay_marks_unacked: false,
            simulated_start_ms: None,
        }
    }
}

/// What one client may hold of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A request's headers must arrive within this (also closes idle keep-alive connections).
    pub header_read_timeout: Duration,
    /// A request must be answered within this, or it gets 503 with `Retry-After`.
    pub request_timeout: Duration,
    /// Open connections at most; more are answered 503 and closed.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            // Above the longest injected gateway delay a test uses, below a client's patience.
            request_timeout: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}

/// The PostgreSQL session limits every pooled connection of an instance runs under, so a
/// session frozen inside a transaction (a stopped instance, a paused VM, an idle `psql`)
/// costs the others at most a bounded wait and a retryable answer, never a hang.
///
/// Why these defaults (server-mock/README.md, "Long transactions"): every transaction of
/// a request runs for milliseconds, so a lock wait of [`DbTimeouts::lock`] (2 s) already
/// means someone is stuck — the request gives up, releases its key and answers 503 with
/// `Retry-After`, well inside a client's patience and the key's lease (60 s). A statement
/// may run for [`DbTimeouts::statement`] (10 s): ten times the slowest read of the
/// benchmarks, a sixth of the request timeout. A session idle inside its transaction for
/// [`DbTimeouts::idle_in_transaction`] (5 s) is ended by the server — only a frozen
/// instance is idle there longer than a scheduling hiccup — so its row locks come free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbTimeouts {
    /// `lock_timeout`: longest wait for any lock (row, table, advisory).
    pub lock: Duration,
    /// `statement_timeout`: longest run of one statement.
    pub statement: Duration,
    /// `idle_in_transaction_session_timeout`: a session idle this long inside a
    /// transaction is ended by the server, its transaction rolled back.
    pub idle_in_transaction: Duration,
}

impl Default for DbTimeouts {
    fn default() -> Self {
        Self {
            lock: Duration::from_secs(2),
            statement: Duration::from_secs(10),
            idle_in_transaction: Duration::from_secs(5),
        }
    }
}

/// A secret value whose `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the one place that compares it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl ServerConfig {
    /// Why this configuration must not serve on `listen`, if it must not: the test API
    /// mints money, so beyond loopback it needs a token.
    pub fn refuse_listen(&self, listen: std::net::SocketAddr) -> Option<String> {
        (self.test_api && self.test_api_token.is_none() && !listen.ip().is_loopback()).then(|| {
            format!(
                "refusing to serve the test API on {listen} without --test-api-token \
                 (or pass --no-test-api)"
            )
        })
    }

    /// This configuration with the fence switched off, in a test-only build (feature
    /// `unfenced`); any other build refuses, so a shipped binary can never run unfenced.
    pub fn without_fence(self) -> Result<Self, String> {
        #[cfg(feature = "unfenced")]
        {
            Ok(Self {
                unfenced: true,
                ..self
            })
        }
        #[cfg(not(feature = "unfenced"))]
        {
            let _ = self;
            Err("this build has no unfenced mode (a test-only build with the cargo feature `unfenced` has)".into())
        }
    }
}

impl ServerConfig {
    /// This configuration with a broker relay that marks unacknowledged batches published, in a
    /// test-only build (feature `unsafe-relay`); any other build refuses.
    pub fn marking_unacked(self) -> Result<Self, String> {
        #[cfg(feature = "unsafe-relay")]
        {
            Ok(Self {
                relay_marks_unacked: true,
                ..self
            })
        }
        #[cfg(not(feature = "unsafe-relay"))]
        {
            let _ = self;
            Err("this build has no unsafe relay (a test-only build with the cargo feature `unsafe-relay` has)".into())
        }
    }

    /// Whether the relay marks batches the broker did not acknowledge (test-only builds).
    pub fn relay_marks_unacked(&self) -> bool {
        #[cfg(feature = "unsafe-relay")]
        {
            self.relay_marks_unacked
        }
        #[cfg(not(feature = "unsafe-relay"))]
        {
            false
        }
    }
}

/// Parses `500ms`, `30s`, `10m`, `48h` or `2d` (a bare number means seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected e.g. 500ms, 30s, 10m, 48h"))?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("invalid duration unit {unit:?} in {text:?}")),
    };
    value
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration {text:?} is too large"))
}

/// Where outbox events go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Destination {
    /// The wallet and SMS consumers inside this process, on this database.
    #[default]
    InProcess,
    /// A Kafka broker: `kafka://HOST:PORT[/NAMESPACE]`.
    Kafka(String),
}

impl Destination {
    /// Parses `--broker`: `kafka://…`, or `in-process`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "in-process" => Ok(Destination::InProcess),
            s if s.starts_with("kafka://") => Ok(Destination::Kafka(s.to_string())),
            s => Err(format!(
                "--broker must be kafka://HOST:PORT or in-process, got {s:?}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_broker_flag() {
        assert_eq!(Destination::parse("in-process"), Ok(Destination::InProcess));
        assert_eq!(
            Destination::parse("kafka://127.0.0.1:9092/ns"),
            Ok(Destination::Kafka("kafka://127.0.0.1:9092/ns".into()))
        );
        assert!(Destination::parse("127.0.0.1:9092").is_err());
    }

    #[test]
    fn parses_all_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("48h"), Ok(Duration::from_secs(48 * 3600)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(2 * 86400)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }
}
