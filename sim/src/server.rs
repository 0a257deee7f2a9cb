//! The ride's server: server-mock in this process (the default), or in a child process
//! that the ride SIGKILLs and restarts on the same database file and port, with its
//! gateway made slower than the key lock and its wall clock jumping either way.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use server_mock::relay::Destination;
use server_mock::{RunningServer, ServerConfig};

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
    /// A PostgreSQL cluster URL: the ride's server runs on a fresh database of it
    /// (`None`: a SQLite file).
    pub postgres: Option<String>,
    /// Server instances on that database, behind a round-robin balancer (see `balancer`).
    pub instances: usize,
}

/// How often the ride rolls for a server kill or clock jump.
pub const TICK: Duration = Duration::from_millis(250);

impl ServerFaults {
    /// Whether the server must run as a child process (it gets killed).
    fn child(&self) -> bool {
        self.kill_rate > 0.0
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

/// A server-mock the ride can break.
pub enum RideServer {
    /// In this process: nothing to kill.
    InProcess(RunningServer),
    /// A child process (`sendonce-sim serve`) on a fixed port.
    Child(ChildServer),
    /// Several instances on one PostgreSQL database behind a balancer.
    Balanced(crate::balancer::Balanced),
}

/// The child process and what it takes to start it again.
pub struct ChildServer {
    child: Child,
    args: Vec<String>,
    addr: SocketAddr,
}

impl RideServer {
    /// Starts the server on `db` as `faults` needs it; its relay publishes to `broker`
    /// (a `kafka://` address) when given.
    pub async fn start(db: &Path, faults: &ServerFaults, broker: Option<String>) -> Result<Self> {
        let mut config = ServerConfig {
            db: db.display().to_string(),
            lock_timeout: faults.lock_timeout(),
            broker: broker.map_or(Destination::InProcess, Destination::Kafka),
            ..ServerConfig::default()
        };
        if faults.unfenced {
            config = config.without_fence().map_err(anyhow::Error::msg)?;
        }
        if faults.postgres.is_none() && faults.instances > 1 {
            bail!("--instances needs --db postgres://... (several instances share one database)");
        }
        if let Some(cluster) = &faults.postgres {
            if faults.child() {
                bail!("--server-kill-rate with --db postgres://... is not supported yet");
            }
            let balanced =
                crate::balancer::Balanced::start(cluster, faults.instances, config).await?;
            return Ok(Self::Balanced(balanced));
        }
        if !faults.child() {
            let server = server_mock::start(config, "127.0.0.1:0".parse()?)
                .await
                .context("starting server-mock")?;
            return Ok(Self::InProcess(server));
        }
        // A free port, kept across restarts so the phones' base URL stays valid.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let mut args = vec![
            "serve".to_string(),
            "--db".into(),
            config.db.clone(),
            "--listen".into(),
            addr.to_string(),
            "--lock-timeout-ms".into(),
            config.lock_timeout.as_millis().to_string(),
        ];
        if faults.unfenced {
            args.push("--unsafe-no-fence".into());
        }
        if let Destination::Kafka(url) = &config.broker {
            args.extend(["--broker".into(), url.clone()]);
        }
        let child = spawn(&args, addr).await?;
        Ok(Self::Child(ChildServer { child, args, addr }))
    }

    /// `http://IP:PORT`, the same across restarts.
    pub fn base_url(&self) -> String {
        match self {
            Self::InProcess(s) => s.base_url(),
            Self::Child(c) => format!("http://{}", c.addr),
            Self::Balanced(b) => b.base_url(),
        }
    }

    /// SIGKILLs the child and starts it again on the same file and port.
    pub async fn kill_and_restart(&mut self) -> Result<()> {
        let Self::Child(c) = self else { return Ok(()) };
        c.child.kill().context("SIGKILL server-mock")?;
        let _ = c.child.wait();
        c.child = spawn(&c.args, c.addr).await?;
        Ok(())
    }

    /// Stops the server.
    pub async fn shutdown(self) {
        match self {
            Self::InProcess(s) => s.shutdown().await,
            Self::Balanced(b) => b.shutdown().await,
            Self::Child(mut c) => {
                let _ = c.child.kill();
                let _ = c.child.wait();
            }
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `sendonce-sim serve ARGS` and waits for its "listening on" line. The port may
/// still be held for a moment by the killed process: retried a few times.
async fn spawn(args: &[String], addr: SocketAddr) -> Result<Child> {
    let exe = std::env::current_exe().context("own executable")?;
    for _ in 0..50 {
        let mut child = Command::new(&exe)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning the server child")?;
        let stdout = child.stdout.take().context("child stdout")?;
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        })
        .await??;
        if line.starts_with("listening on") {
            return Ok(child);
        }
        let _ = child.wait();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("server-mock child did not start on {addr}")
}

/// The `serve` subcommand: server-mock in this process until killed.
pub async fn serve(
    db: PathBuf,
    listen: SocketAddr,
    lock_timeout: Duration,
    unfenced: bool,
    broker: Option<String>,
) -> Result<()> {
    let mut config = ServerConfig {
        db: db.display().to_string(),
        lock_timeout,
        broker: broker.map_or(Destination::InProcess, Destination::Kafka),
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
    server: &mut RideServer,
    api: &TestApi,
    faults: &ServerFaults,
    faults_patch: &Value,
    seed: u64,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<Chaos> {
    let mut rng = Rng::new(seed, 7_777);
    let mut done = Chaos::default();
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(done),
            _ = tokio::time::sleep(TICK) => {}
        }
        if rng.chance(faults.kill_rate) {
            server.kill_and_restart().await?;
            api.put_faults(faults_patch).await?;
            done.kills += 1;
        }
        if rng.chance(faults.clock_jump_rate) {
            let ms = rng.range(1_000, 3_600_000) * if rng.chance(0.5) { 1 } else { -1 };
            // A refused or failed jump (server just restarted) is only a lost fault.
            if api.jump_clock(ms).await.is_ok() {
                let _ = api.reap().await;
                done.clock_jumps += 1;
            }
        }
    }
}
