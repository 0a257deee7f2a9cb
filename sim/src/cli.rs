//! Command line: `sendonce-sim ride [...]`.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use sendonce::NetworkProfile;

use crate::api::Api;
use crate::ride::RideConfig;
use crate::server::ServerFaults;

/// Train-network rides against the embedded mock server, with the invariant checker.
#[derive(Debug, Parser)]
#[command(name = "sendonce-sim", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs a ride: users on phones through a network profile, app kills, double taps; then checks the invariants.
    Ride(Box<RideArgs>),
    /// Internal: server-mock in this process, for rides that SIGKILL their server.
    #[command(hide = true)]
    Serve(ServeArgs),
}

/// `serve` options (the ride passes them).
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// SQLite file or PostgreSQL URL.
    #[arg(long)]
    pub db: String,
    /// Address to listen on.
    #[arg(long)]
    pub listen: std::net::SocketAddr,
    /// Key lock timeout in milliseconds.
    #[arg(long)]
    pub lock_timeout_ms: u64,
    /// Test-only builds: no fence.
    #[arg(long)]
    pub unsafe_no_fence: bool,
    /// The relay publishes to this Kafka broker (`ride --broker`).
    #[arg(long)]
    pub broker: Option<String>,
    /// The broker is the single-broker development setup (`ride --kafka-single-broker-dev`).
    #[arg(long)]
    pub kafka_single_broker_dev: bool,
}

/// `ride` options.
#[derive(Debug, Clone, Args)]
pub struct RideArgs {
    /// Network profile during the ride: off, offline, train, flaky, lb-replay.
    #[arg(long, default_value = "train", value_parser = parse_profile)]
    pub profile: NetworkProfile,
    /// Users, one phone (SDK instance) each.
    #[arg(long, default_value_t = 20)]
    pub users: usize,
    /// Transfers each user confirms.
    #[arg(long, default_value_t = 10)]
    pub transfers: usize,
    /// Seed of every random choice (faults, amounts, taps, kills).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Probability per transfer that the app is killed soon after (SDK closed mid-flight, reopened).
    #[arg(long, default_value_t = 0.05, value_parser = parse_rate)]
    pub kill_rate: f64,
    /// Probability per transfer that Send is tapped twice at once.
    #[arg(long, default_value_t = 0.2, value_parser = parse_rate)]
    pub double_tap_rate: f64,
    /// Probability per transfer that the user is impatient: "check status" (`Sdk::resolve`) if it still spins after 5 s-2.5 min.
    #[arg(long, default_value_t = 0.05, value_parser = parse_rate)]
    pub impatient_rate: f64,
    /// Probability per transfer that the phone's clock is changed by 1-6 hours, forwards or backwards.
    #[arg(long, default_value_t = 0.02, value_parser = parse_rate)]
    pub clock_jump_rate: f64,
    /// Probability per answer that an intermediary replaces it with a captive portal's 200 HTML page or a
    /// proxy's 404 text page (POSTs and look-ups).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub proxy_garbage_rate: f64,
    /// Fraction of phones stranded for a day before the network returns (crosses the 24 h give-up horizon).
    #[arg(long, default_value_t = 0.1, value_parser = parse_rate)]
    pub stranded: f64,
    /// How many times faster than the server's clock the phones' clocks run.
    #[arg(long, default_value_t = 200.0)]
    pub speed: f64,
    /// Mean simulated seconds between two transfers of one user.
    #[arg(long, default_value_t = 45)]
    pub think_secs: u64,
    /// Seconds (of the server's clock: simulated unless the ride is real-time) the phones get to settle
    /// once the network is back.
    #[arg(long, default_value_t = 60)]
    pub settle_secs: u64,
    /// Server-side faults during the ride (probability each of a 503, a response dropped after commit, a duplicate delivery).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub server_faults: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Deliver credits and SMS through Kafka (kafka://HOST:PORT): fraud-check, wallet and sms
    /// processes, killed now and then and replayed from offset 0 once mid-ride.
    #[arg(long)]
    pub broker: Option<String>,
    /// The broker is the single-broker development setup (scripts/kafka): the relay may
    /// publish to topics with one replica, which it refuses otherwise.
    #[arg(long)]
    pub kafka_single_broker_dev: bool,
    /// DEBUG: break the SDK on purpose (a new idempotency key per retry); the checker must fail.
    #[arg(long)]
    pub new_key_per_retry: bool,
    /// Probability that a gateway step takes 3x the key lock timeout (the server then runs with a 300 ms lock).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub slow_gateway_rate: f64,
    /// Probability every 250 ms that the server process is SIGKILLed and restarted on the same database file
    /// (real processes in real time: such a ride is not deterministic).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub server_kill_rate: f64,
    /// Probability every 250 ms that the server's wall clock jumps 1 s-1 h, forwards or backwards.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub server_clock_jump_rate: f64,
    /// DEBUG, test-only builds (cargo feature sendonce/legacy-classify): the SDK's classification from
    /// before it trusted only the server's own answers; with --proxy-garbage-rate the checker must fail.
    #[arg(long)]
    pub unsafe_legacy_classify: bool,
    /// DEBUG, test-only builds (cargo feature server-mock/unfenced): the server moves money even when a
    /// request lost its key lock; the checker must fail.
    #[arg(long)]
    pub unsafe_no_fence: bool,
    /// DEBUG, test-only builds (cargo feature server-mock/unsafe-relay): the broker relay marks events
    /// published without the broker's acknowledgement; with the broker crashed (--broker) the checker
    /// must fail.
    #[arg(long)]
    pub unsafe_relay_marks_unacked: bool,
    /// A PostgreSQL cluster (postgres://USER@HOST:PORT/DB, what scripts/pg start prints): the ride's
    /// server runs on a fresh database of it instead of a SQLite file.
    #[arg(long)]
    pub db: Option<String>,
    /// Server instances on that database behind a round-robin balancer (retries and replays land on
    /// different instances); needs --db.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub instances: u16,
    /// Real HTTP on loopback, thread pools and real time instead of the deterministic simulation
    /// (the report then varies from run to run).
    #[arg(long)]
    pub real_time: bool,
    /// Draws the ride as an SVG here: one lane per phone over simulated time.
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<std::path::PathBuf>,
    /// The server's API: server-mock's transfers, or `bank`, a bank's own payment orders (its own
    /// paths, key header, error codes and strong customer authentication) sent as operations.
    #[arg(long, value_enum, default_value_t = Api::ServerMock)]
    pub api: Api,
}

impl RideArgs {
    /// The ride these options ask for.
    pub fn config(&self) -> RideConfig {
        RideConfig {
            profile: self.profile.clone(),
            users: self.users,
            transfers: self.transfers,
            seed: self.seed,
            kill_rate: self.kill_rate,
            double_tap_rate: self.double_tap_rate,
            impatient_rate: self.impatient_rate,
            clock_jump_rate: self.clock_jump_rate,
            proxy_garbage_rate: self.proxy_garbage_rate,
            stranded_rate: self.stranded,
            speed: self.speed,
            think_mean_ms: (self.think_secs * 1000) as i64,
            settle_limit: Duration::from_secs(self.settle_secs),
            new_key_per_retry: self.new_key_per_retry,
            legacy_classify: self.unsafe_legacy_classify,
            server_fault_rate: self.server_faults,
            broker: self.broker.clone(),
            server: ServerFaults {
                slow_gateway_rate: self.slow_gateway_rate,
                kill_rate: self.server_kill_rate,
                clock_jump_rate: self.server_clock_jump_rate,
                unfenced: self.unsafe_no_fence,
                relay_marks_unacked: self.unsafe_relay_marks_unacked,
                postgres: self.db.clone(),
                instances: usize::from(self.instances),
                kafka_single_broker_dev: self.kafka_single_broker_dev,
            },
            real_time: self.real_time,
            timeline: self.timeline.clone(),
            api: self.api,
        }
    }
}

fn parse_profile(s: &str) -> Result<NetworkProfile, String> {
    NetworkProfile::from_name(s).ok_or_else(|| {
        format!("unknown profile {s:?}; one of off, offline, train, flaky, lb-replay")
    })
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{s:?} is not a probability between 0 and 1")),
    }
}
