//! server-mock in a child process (`sendonce-sim serve`) that the ride SIGKILLs and restarts
//! on the same database and port. Real processes, real time: not deterministic.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sendonce::transport::BoxFuture;
use server_mock::config::Destination;
use server_mock::ServerConfig;

use super::{Backend, Determinism, Entry};

/// One `sendonce-sim serve` process and what it takes to start it again (also one instance
/// of the balanced backend).
pub struct ServerProcess {
    child: std::process::Child,
    args: Vec<String>,
    /// Where it listens, kept across restarts so the URLs pointing at it stay valid.
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `sendonce-sim serve` with `config` on a free loopback port.
    pub async fn start(config: &ServerConfig, unfenced: bool) -> Result<Self> {
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
        if unfenced {
            args.push("--unsafe-no-fence".into());
        }
        if let Destination::Kafka(url) = &config.broker {
            args.extend(["--broker".into(), url.clone()]);
        }
        if config.kafka_single_broker_dev {
            args.push("--kafka-single-broker-dev".into());
        }
        let child = spawn(&args, addr).await?;
        Ok(Self { child, args, addr })
    }

    /// SIGKILLs the process (no shutdown of any kind) and starts it again on the same port.
    pub async fn kill_and_restart(&mut self) -> Result<()> {
        self.child.kill().context("SIGKILL server-mock")?;
        let _ = self.child.wait();
        self.child = spawn(&self.args, self.addr).await?;
        Ok(())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The backend: one server process.
pub struct Child {
    process: ServerProcess,
    entry: Entry,
}

impl Child {
    /// Starts the process; the phones' base URL stays valid across restarts.
    pub async fn start(config: ServerConfig, unfenced: bool) -> Result<Self> {
        let process = ServerProcess::start(&config, unfenced).await?;
        let entry = Entry::http(process.addr)?;
        Ok(Self { process, entry })
    }
}

impl Backend for Child {
    fn entry(&self) -> &Entry {
        &self.entry
    }
    fn determinism(&self) -> Determinism {
        Determinism::RealTime(
            "--server-kill-rate: a real server process SIGKILLed in real time".into(),
        )
    }
    fn kill_and_restart(&mut self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.process.kill_and_restart())
    }
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { drop(self) })
    }
}

/// Starts `sendonce-sim serve ARGS` and waits for its "listening on" line. The port may
/// still be held for a moment by the killed process: retried a few times.
async fn spawn(args: &[String], addr: SocketAddr) -> Result<std::process::Child> {
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
