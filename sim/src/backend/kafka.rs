//! `ride --broker kafka://HOST:PORT`: credits and SMS reach the recipients through Kafka.
//! The ride's server relays its outbox to the broker; the fraud check, the wallet and the
//! SMS consumer run as child processes (built beside this binary: `cargo build -p
//! sendonce-streams`), are SIGKILLed and restarted now and then, and are all replayed from
//! offset 0 once mid-ride. The checker then reads credits and SMS from their databases.
//!
//! Not a server backend but beside them: any real-time backend's relay can publish to the broker.
//! Processes and a broker in real time: such a ride is not deterministic ([`NOT_DETERMINISTIC`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use rusqlite::{Connection, OpenFlags};
use sendonce_streams::event::{APPROVED, DONE, LARGE};
use sendonce_streams::Broker;

use crate::rng::Rng;
use crate::testapi::{Entry, Sms};

/// The three consumers: binary, consumer group, database file (the fraud check keeps
/// nothing outside Kafka).
const CONSUMERS: [(&str, &str, Option<&str>); 3] = [
    ("fraud-check", "fraud-check", None),
    ("wallet", "wallet", Some("wallet.db")),
    ("sms", "sms", Some("sms.db")),
];
/// What each group reads: (group, topic).
const READS: [(&str, &str); 4] = [
    ("fraud-check", DONE),
    ("wallet", APPROVED),
    ("sms", APPROVED),
    ("sms", LARGE),
];
/// How often the ride rolls for a consumer kill.
const TICK: Duration = Duration::from_millis(500);
/// Probability per tick that one consumer is SIGKILLed and restarted.
const KILL_RATE: f64 = 0.2;
/// The tick of the mid-ride replay from offset 0.
const REPLAY_TICK: u64 = 4;
/// Why a ride with `--broker` does not replay its seed.
pub const NOT_DETERMINISTIC: &str =
    "--broker: credits and SMS through a real Kafka broker and consumer processes SIGKILLed in real time";

/// What the Kafka side's chaos did.
#[derive(Debug, Default, Clone, Copy)]
pub struct KafkaChaos {
    /// Consumers SIGKILLed and restarted.
    pub kills: u64,
    /// Replays of every consumer group from offset 0.
    pub replays: u64,
}

/// The consumer processes of one ride, in a namespace of its own on the broker.
pub struct KafkaSide {
    url: String,
    broker: Broker,
    dir: PathBuf,
    bin_dir: PathBuf,
    children: Vec<Child>,
}

impl KafkaSide {
    /// Creates the ride's topics and starts the three consumers.
    pub fn start(url: &str, dir: &Path, seed: u64) -> Result<Self> {
        Broker::parse(url)?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() % 1_000_000_000;
        let url = format!(
            "{}/ride-{seed}-{}-{nanos}",
            url.trim_end_matches('/'),
            std::process::id()
        );
        let broker = Broker::parse(&url).context("--broker takes no namespace")?;
        broker.ensure_topics()?;
        // Beside this binary, or one level up when this is a test binary (target/*/deps).
        let exe = std::env::current_exe()?;
        let bin_dir = exe
            .ancestors()
            .skip(1)
            .take(2)
            .find(|d| d.join(CONSUMERS[0].0).exists())
            .unwrap_or(exe.parent().context("own directory")?)
            .to_path_buf();
        let mut side = Self {
            url,
            broker,
            dir: dir.to_path_buf(),
            bin_dir,
            children: Vec::new(),
        };
        for i in 0..CONSUMERS.len() {
            let child = side.spawn(i)?;
            side.children.push(child);
        }
        Ok(side)
    }

    /// The namespaced broker address the server's relay publishes to.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn spawn(&self, i: usize) -> Result<Child> {
        let (bin, _, db) = CONSUMERS[i];
        let exe = self.bin_dir.join(bin);
        if !exe.exists() {
            bail!(
                "{} missing: cargo build -p sendonce-streams (same profile as the ride)",
                exe.display()
            );
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{bin}.err")))?;
        let mut cmd = Command::new(exe);
        cmd.args(["--broker", &self.url]);
        if let Some(db) = db {
            cmd.arg("--db").arg(self.dir.join(db));
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {bin}"))
    }

    fn kill_and_restart(&mut self, i: usize) -> Result<()> {
        let _ = self.children[i].kill();
        let _ = self.children[i].wait();
        self.children[i] = self.spawn(i)?;
        Ok(())
    }

    /// Every consumer stopped, its group's offsets deleted, started again: each re-reads
    /// its topic from offset 0.
    async fn replay_from_zero(&mut self) -> Result<()> {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let broker = self.broker.clone();
        tokio::task::spawn_blocking(move || {
            CONSUMERS
                .iter()
                .try_for_each(|(_, group, _)| broker.reset_group(&broker.name(group)))
        })
        .await??;
        for i in 0..CONSUMERS.len() {
            self.children[i] = self.spawn(i)?;
        }
        Ok(())
    }

    /// Kills consumers now and then and replays once, until `stop` (then replays, if the
    /// ride was too short for the mid-ride one).
    pub async fn chaos(
        &mut self,
        seed: u64,
        mut stop: tokio::sync::oneshot::Receiver<()>,
    ) -> Result<KafkaChaos> {
        let mut rng = Rng::new(seed, 9_999);
        let mut done = KafkaChaos::default();
        for tick in 1.. {
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(TICK) => {}
            }
            if tick == REPLAY_TICK {
                self.replay_from_zero().await?;
                done.replays += 1;
            } else if rng.chance(KILL_RATE) {
                self.kill_and_restart(rng.below(CONSUMERS.len()))?;
                done.kills += 1;
            }
        }
        if done.replays == 0 {
            self.replay_from_zero().await?;
            done.replays += 1;
        }
        Ok(done)
    }

    /// Waits until every group has read everything (after the server's outbox drained).
    pub async fn settle(&self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let broker = self.broker.clone();
            let lags = tokio::task::spawn_blocking(move || {
                READS
                    .iter()
                    .map(|(g, t)| broker.lag(&broker.name(g), &broker.name(t)))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await?;
            match lags {
                Ok(lags) if lags.iter().all(|l| *l == 0) => return Ok(()),
                Ok(lags) if Instant::now() >= deadline => {
                    bail!("Kafka consumers still behind (fraud, wallet, sms, sms large): {lags:?}")
                }
                // A broker restarted a moment ago answers "not coordinator" for a while: asked again.
                Err(e) if Instant::now() >= deadline => return Err(e.into()),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn db(&self, name: &str) -> Result<Connection> {
        Ok(Connection::open_with_flags(
            self.dir.join(name),
            OpenFlags::SQLITE_OPEN_READ_ONLY,
        )?)
    }

    /// The wallet's credits, as ledger entries (ids after the server's own).
    pub fn credits(&self, first_id: i64) -> Result<Vec<Entry>> {
        let db = self.db("wallet.db")?;
        let mut stmt =
            db.prepare("SELECT id, user_id, amount_minor, transfer_id FROM credits ORDER BY id")?;
        let rows = stmt.query_map([], |r| {
            Ok(Entry {
                entry_id: first_id + r.get::<_, i64>(0)?,
                user_id: r.get(1)?,
                kind: "credit".to_string(),
                amount_minor: r.get(2)?,
                transfer_id: Some(r.get(3)?),
                idempotency_key: None,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The recipients' SMS.
    pub fn sms(&self) -> Result<Vec<Sms>> {
        let db = self.db("sms.db")?;
        let mut stmt = db.prepare(
            "SELECT id, user_id, transfer_id FROM sms WHERE kind = 'received' ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Sms {
                sms_id: r.get(0)?,
                user_id: r.get(1)?,
                transfer_id: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl Drop for KafkaSide {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
