//! The server's faults during a ride: gateway steps slower than the key lock, SIGKILLs and
//! restarts (see `backend`), its wall clock jumping either way; and the `serve` subcommand.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use sendonce::{Clock, SimClock};
use serde_json::{json, Value};
use server_mock::config::Destination;
use server_mock::ServerConfig;

use crate::backend::{Backend, Kind};
use crate::timeline::{Mark, SharedTimeline};

use crate::rng::Rng;
use crate::testapi::TestApi;

/// Server-side faults of a ride.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerFaults {
    /// Probability that one gateway step takes 3x the lock timeout.
    pub slow_gateway_rate: f64,
    /// Probability per tick (every [`TICK`]) that the server process is SIGKILLed and restarted.
    pub kill_rate: f64,
    /// Probability per tick that the server's wall clock jumps, forwards or backwards.
    pub clock_jump_rate: f64,
    /// Test-only builds: the server moves money even when a request lost its lock.
    pub unfenced: bool,
    /// Test-only builds: the broker relay marks events it could not publish (lost on a broker outage).
    pub relay_marks_unacked: bool,
    /// A PostgreSQL cluster URL: the ride's server runs on a fresh database of it
    /// (`None`: a SQLite file).
    pub postgres: Option<String>,
    /// Server instances on that database, behind a round-robin balancer (see `backend::balanced`).
    pub instances: usize,
    /// The broker is the single-broker development setup: the relay may publish to topics
    /// with one replica (server-mock's `--kafka-single-broker-dev`).
    pub kafka_single_broker_dev: bool,
}

/// How often the ride rolls for a server kill or clock jump.
pub const TICK: Duration = Duration::from_millis(250);

impl ServerFaults {
    /// The backend these faults need: instances behind a balancer on PostgreSQL (killed or
    /// not), a child process when it gets killed, else `preferred`.
    pub fn backend(&self, preferred: Kind) -> Kind {
        if self.postgres.is_some() {
            Kind::Balanced
        } else if self.kill_rate > 0.0 {
            Kind::Child
        } else {
            preferred
        }
    }

    /// The server's configuration on the SQLite file `db`; its relay publishes to `broker`
    /// (a `kafka://` address) when given.
    pub fn server_config(&self, db: &Path, broker: Option<&str>) -> Result<ServerConfig> {
        let mut config = ServerConfig {
            db: db.display().to_string(),
            lock_timeout: self.lock_timeout(),
            broker: broker.map_or(Destination::InProcess, |b| Destination::Kafka(b.into())),
            kafka_single_broker_dev: self.kafka_single_broker_dev,
            ..ServerConfig::default()
        };
        if self.unfenced {
            config = config.without_fence().map_err(anyhow::Error::msg)?;
        }
        if self.relay_marks_unacked {
            config = config.marking_unacked().map_err(anyhow::Error::msg)?;
        }
        Ok(config)
    }

    /// The lock timeout: short when gateway steps are to outlive it.
    pub fn lock_timeout(&self) -> Duration {
        if self.slow_gateway_rate > 0.0 {
            Duration::from_millis(300)
        } else {
            ServerConfig::default().lock_timeout
        }
    }

    /// The fault switches these add to the ride's others (re-applied after each restart).
    pub fn patch(&self) -> Value {
        json!({
            "slow_gateway_rate": self.slow_gateway_rate,
            "slow_gateway_ms": 3 * self.lock_timeout().as_millis() as u64,
        })
    }
}

/// The `serve` subcommand: server-mock in this process until killed.
pub async fn serve(
    db: String,
    listen: SocketAddr,
    lock_timeout: Duration,
    unfenced: bool,
    broker: Option<String>,
    kafka_single_broker_dev: bool,
) -> Result<()> {
    let mut config = ServerConfig {
        db,
        lock_timeout,
        broker: broker.map_or(Destination::InProcess, Destination::Kafka),
        kafka_single_broker_dev,
        ..ServerConfig::default()
    };
    if unfenced {
        config = config.without_fence().map_err(anyhow::Error::msg)?;
    }
    let server = server_mock::start(config, listen).await?;
    println!("listening on {}", server.addr);
    std::future::pending::<()>().await;
    Ok(())
}

/// What the chaos loop did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Chaos {
    /// Server processes SIGKILLed (and restarted).
    pub kills: u64,
    /// Server clock jumps.
    pub clock_jumps: u64,
    /// Look-ups by the user's web dashboard (see `dashboard`).
    pub dashboard_look_ups: u64,
}

/// Breaks the server every [`TICK`] until `stop` fires: SIGKILL + restart, clock jumps
/// (1 s to 1 h, either way), each followed by a reaper pass. `faults_patch` is the fault
/// state to restore after a restart (faults live in the server's memory).
pub async fn chaos(
    server: &mut Box<dyn Backend>,
    api: &TestApi,
    faults: &ServerFaults,
    faults_patch: &Value,
    seed: u64,
    (timeline, clock): (&SharedTimeline, &SimClock),
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<Chaos> {
    let mut rng = Rng::new(seed, 7_777);
    let mut done = Chaos::default();
    if faults.kill_rate == 0.0 && faults.clock_jump_rate == 0.0 {
        // Nothing to break: no ticks on the timeline of a deterministic ride either.
        let _ = stop.await;
        return Ok(done);
    }
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(done),
            _ = tokio::time::sleep(TICK) => {}
        }
        if rng.chance(faults.kill_rate) {
            server.kill_and_restart().await?;
            api.put_faults(faults_patch).await?;
            done.kills += 1;
            timeline.record(None, clock.monotonic_ms(), Mark::ServerKill);
        }
        if rng.chance(faults.clock_jump_rate) {
            let ms = rng.range(1_000, 3_600_000) * if rng.chance(0.5) { 1 } else { -1 };
            // A refused or failed jump (server just restarted) is only a lost fault.
            if api.jump_clock(ms).await.is_ok() {
                let _ = api.reap().await;
                done.clock_jumps += 1;
                timeline.record(None, clock.monotonic_ms(), Mark::ServerClockJump(ms));
            }
        }
    }
}
