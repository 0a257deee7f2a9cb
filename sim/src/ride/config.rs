//! What a ride can be asked to do, the backend that follows from it, and its runtime.

use std::path::PathBuf;
use std::time::Duration;

use sendonce::NetworkProfile;

use crate::api::Api;
use crate::backend::Kind;
use crate::server::ServerFaults;

/// Where every deterministic ride starts: 2026-01-01T00:00:00Z (simulated, on phones and server).
pub const SIMULATED_START_MS: i64 = 1_767_225_600_000;

/// Everything a ride can be asked to do.
#[derive(Debug, Clone)]
pub struct RideConfig {
    /// Network profile during the ride.
    pub profile: NetworkProfile,
    /// Users (phones).
    pub users: usize,
    /// Transfers each user confirms.
    pub transfers: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Probability per transfer that the app is killed and reopened.
    pub kill_rate: f64,
    /// Probability per transfer of a double tap on Send.
    pub double_tap_rate: f64,
    /// Probability per transfer of a "check status" tap (`resolve`) while it is unfinished.
    pub impatient_rate: f64,
    /// Probability per transfer that the phone's clock is changed by 1-6 h either way.
    pub clock_jump_rate: f64,
    /// Probability per answer that an intermediary replaces it (a 200 HTML page or a 404 text page).
    pub proxy_garbage_rate: f64,
    /// Fraction of phones stranded for a day (their clock jumps past the give-up horizon).
    pub stranded_rate: f64,
    /// Simulated ms per real ms.
    pub speed: f64,
    /// Mean simulated time between two transfers of a user (ms).
    pub think_mean_ms: i64,
    /// Real time allowed for the phones to settle once the network is back.
    pub settle_limit: Duration,
    /// SDK debug flag: a new key per retry (the checker must fail).
    pub new_key_per_retry: bool,
    /// Test-only SDK builds: the legacy classification (the checker must fail with portal pages).
    pub legacy_classify: bool,
    /// Server-side faults during the ride: probability of a 503, of a response dropped after commit and of a
    /// duplicate delivery (each); 0 for none.
    pub server_fault_rate: f64,
    /// Slow gateway steps, server kills, server clock jumps (and, in test-only builds, no fence).
    pub server: ServerFaults,
    /// Credits and SMS through this Kafka broker (`crate::backend::kafka`) instead of in-process.
    pub broker: Option<String>,
    /// Real HTTP on loopback and real time instead of the deterministic simulation.
    pub real_time: bool,
    /// Where to draw the ride as an SVG, if anywhere.
    pub timeline: Option<PathBuf>,
    /// The API the phones speak: server-mock's, or a bank's own (`crate::bank`).
    pub api: Api,
}

impl RideConfig {
    /// The server backend this ride runs on (a relay to a real broker needs real time).
    pub fn backend(&self) -> Kind {
        self.server
            .backend(if self.real_time || self.broker.is_some() {
                Kind::Loopback
            } else {
                Kind::Simulated
            })
    }

    /// Refuses what the chosen API's server cannot do: the bank runs in this process on memory, so
    /// server kills, server clocks, gateways, PostgreSQL and Kafka are server-mock's alone.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.api != Api::Bank {
            return Ok(());
        }
        let s = &self.server;
        let refused = [
            (self.broker.is_some(), "--broker"),
            (s.postgres.is_some() || s.instances > 1, "--db/--instances"),
            (s.kill_rate > 0.0, "--server-kill-rate"),
            (s.clock_jump_rate > 0.0, "--server-clock-jump-rate"),
            (s.slow_gateway_rate > 0.0, "--slow-gateway-rate"),
            (s.unfenced, "--unsafe-no-fence"),
            (s.relay_marks_unacked, "--unsafe-relay-marks-unacked"),
            (self.legacy_classify, "--unsafe-legacy-classify"),
        ];
        match refused.iter().find(|(on, _)| *on) {
            Some((_, flag)) => anyhow::bail!(
                "{flag} is server-mock's: the bank backend (--api bank) has no such part"
            ),
            None => Ok(()),
        }
    }

    /// Whether this ride replays its seed (then it must run on [`runtime`]'s paused clock).
    pub fn deterministic(&self) -> bool {
        self.backend() == Kind::Simulated
    }
}

/// The runtime a ride needs: one thread with a paused clock for a deterministic ride (tokio's
/// clock then jumps to the next timer whenever every task waits), real threads and time otherwise.
pub fn runtime(cfg: &RideConfig) -> std::io::Result<tokio::runtime::Runtime> {
    if cfg.deterministic() {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    }
}

impl Default for RideConfig {
    fn default() -> Self {
        Self {
            profile: NetworkProfile::Train,
            users: 20,
            transfers: 10,
            seed: 1,
            kill_rate: 0.05,
            double_tap_rate: 0.2,
            impatient_rate: 0.05,
            clock_jump_rate: 0.02,
            proxy_garbage_rate: 0.0,
            stranded_rate: 0.1,
            speed: 200.0,
            think_mean_ms: 45_000,
            settle_limit: Duration::from_secs(60),
            new_key_per_retry: false,
            legacy_classify: false,
            server_fault_rate: 0.0,
            server: ServerFaults::default(),
            broker: None,
            real_time: false,
            timeline: None,
            api: Api::ServerMock,
        }
    }
}
