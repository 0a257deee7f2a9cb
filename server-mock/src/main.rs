//! server-mock binary: `server-mock --listen 127.0.0.1:8080 --db ./mock.db`.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use server_mock::{parse_duration, start, ServerConfig};

/// Mock payments server enforcing the sendonce idempotency contract.
#[derive(Parser, Debug)]
#[command(name = "server-mock", version)]
struct Args {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// SQLite database file, :memory:, or a PostgreSQL URL (postgres://USER@HOST:PORT/DB,
    /// postgresql://..., or a unix socket: postgres://USER@%2Fdir%2Fsock/DB or ?host=/dir).
    #[arg(long, default_value = "./mock.db")]
    db: String,
    /// Most PostgreSQL connections this instance opens; requests beyond wait, then get 503.
    #[arg(long, default_value_t = server_mock::config::DEFAULT_POOL_SIZE)]
    db_pool: usize,
    /// PostgreSQL `lock_timeout`: a request waiting longer for a lock gives up with 503.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    db_lock_timeout: Duration,
    /// PostgreSQL `statement_timeout`: the longest one statement may run.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    db_statement_timeout: Duration,
    /// PostgreSQL `idle_in_transaction_session_timeout`: a session (of a frozen instance)
    /// idle this long inside a transaction is ended, and its locks come free.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    db_idle_in_transaction_timeout: Duration,
    /// How long idempotency keys are kept (e.g. 48h).
    #[arg(long, default_value = "48h", value_parser = parse_duration)]
    key_window: Duration,
    /// How long a key may stay in progress before the reaper resolves it.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    lock_timeout: Duration,
    /// How long a published outbox event is kept (a replay reaches back this far).
    #[arg(long, default_value = "7d", value_parser = parse_duration)]
    outbox_retention: Duration,
    /// How long the consumers' inbox rows are kept (at least --outbox-retention; a row also
    /// stays while its event is in the outbox).
    #[arg(long, default_value = "8d", value_parser = parse_duration)]
    inbox_window: Duration,
    /// How long the record of a sent SMS is kept.
    #[arg(long, default_value = "30d", value_parser = parse_duration)]
    sms_retention: Duration,
    /// Simulated payment gateway latency.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    gateway_delay: Duration,
    /// Do not mount the /v1/test and /v1/bench endpoints.
    #[arg(long)]
    no_test_api: bool,
    /// Bearer token the test API requires; needed to serve it beyond loopback.
    #[arg(long, env = "SENDONCE_TEST_API_TOKEN", hide_env_values = true)]
    test_api_token: Option<String>,
    /// A host name the test API answers besides loopback ones (repeatable).
    #[arg(long = "allow-host")]
    allow_hosts: Vec<String>,
    /// A request's headers must arrive within this; also closes idle keep-alive connections.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    header_read_timeout: Duration,
    /// Longest time to answer a request (then 503 with Retry-After).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    request_timeout: Duration,
    /// Open connections at most; more get 503 and are closed.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Transfer requests per user per second, sustained (then 429 with Retry-After).
    #[arg(long, default_value_t = 100.0)]
    rate_limit: f64,
    /// Transfer requests per user allowed at once above the rate.
    #[arg(long, default_value_t = 200.0)]
    rate_burst: f64,
    /// New idempotency keys per user per hour.
    #[arg(long, default_value_t = 20_000)]
    keys_per_hour: u32,
    /// Where the relay publishes outbox events: kafka://HOST:PORT[/NAMESPACE], or in-process.
    #[arg(long, default_value = "in-process", value_parser = server_mock::config::Destination::parse)]
    broker: server_mock::config::Destination,
    /// Relay to a single-broker development setup: topics with one replica or
    /// min.insync.replicas 1 (refused without this: an ack there is one copy).
    #[arg(long)]
    kafka_single_broker_dev: bool,
    /// Test-only builds (feature `unfenced`): move money even when the key's lock was lost.
    #[arg(long, hide = true)]
    unsafe_no_fence: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    if args.key_window <= args.lock_timeout {
        eprintln!("--key-window must be longer than --lock-timeout");
        return ExitCode::from(2);
    }
    let retention = server_mock::retention::Retention {
        outbox: args.outbox_retention,
        inbox: args.inbox_window,
        sms: args.sms_retention,
    };
    if let Err(e) = retention.check() {
        eprintln!("{e}");
        return ExitCode::from(2);
    }
    let rate_ok = |r: f64| r.is_finite() && (0.001..=1e6).contains(&r);
    if !rate_ok(args.rate_limit) || !rate_ok(args.rate_burst) || args.rate_burst < 1.0 {
        eprintln!("--rate-limit must be 0.001-1e6 per second and --rate-burst 1-1e6");
        return ExitCode::from(2);
    }
    // The update is needed in test-only builds (one more field: the fence switch).
    #[allow(clippy::needless_update)]
    let config = ServerConfig {
        db: args.db,
        db_pool: args.db_pool.max(1),
        db_timeouts: server_mock::config::DbTimeouts {
            lock: args.db_lock_timeout,
            statement: args.db_statement_timeout,
            idle_in_transaction: args.db_idle_in_transaction_timeout,
        },
        key_window: args.key_window,
        lock_timeout: args.lock_timeout,
        retention,
        gateway_delay: args.gateway_delay,
        test_api: !args.no_test_api,
        test_api_token: args.test_api_token.map(server_mock::Secret::new),
        allow_hosts: args.allow_hosts,
        limits: server_mock::config::Limits {
            header_read_timeout: args.header_read_timeout,
            request_timeout: args.request_timeout,
            max_connections: args.max_connections.max(1),
        },
        quotas: server_mock::quota::QuotaLimits {
            requests_per_second: args.rate_limit,
            burst: args.rate_burst,
            keys_per_hour: args.keys_per_hour,
        },
        broker: args.broker,
        kafka_single_broker_dev: args.kafka_single_broker_dev,
        ..ServerConfig::default()
    };
    let config = match args.unsafe_no_fence {
        false => config,
        true => match config.without_fence() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("--unsafe-no-fence: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let server = match start(config, args.listen).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("server-mock: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The one stdout line scripts wait for.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on {}", server.addr);
    let _ = out.flush();
    drop(out);

    wait_for_signal().await;
    tracing::info!("shutting down");
    server.shutdown().await;
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
