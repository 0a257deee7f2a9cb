//! Processes, the broker, server-mock over HTTP, and the consumers' databases.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use rusqlite::{Connection, OpenFlags};
use sendonce_streams::broker::Isolation;
use sendonce_streams::{Broker, Envelope, TransferDone};

pub use crate::api::Api;
pub use crate::procs::{Bin, Proc};

/// Longest a test waits for the system to settle before it fails with what it saw.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(180);

/// `$SENDONCE_KAFKA` in a namespace of its own: `kafka://127.0.0.1:PORT/NAME`.
pub fn broker_url(test: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let base = std::env::var("SENDONCE_KAFKA").expect(
        "SENDONCE_KAFKA=kafka://127.0.0.1:PORT is needed (scripts/kafka start; scripts/test-all kafka sets it)",
    );
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let ns = format!(
        "{test}-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        nanos % 1_000_000_000
    );
    format!("{}/{ns}", base.trim_end_matches('/'))
}

/// The broker behind a namespaced URL.
pub fn broker(url: &str) -> Broker {
    Broker::parse(url).expect("broker url")
}

/// A scratch directory under the target dir, kept after the test for its logs.
pub fn scratch(name: &str) -> PathBuf {
    let dir = bin_dir().join("kafka-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_wallet"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The whole pipeline of one test: server-mock (relay), fraud check, wallet, SMS.
pub struct Pipeline {
    pub url: String,
    pub dir: PathBuf,
    pub server: Option<Proc>,
    pub http: String,
    pub fraud: Option<Proc>,
    pub wallet: Option<Proc>,
    pub sms: Option<Proc>,
    /// Fraud check's "large transfer" threshold.
    pub large: i64,
}

impl Pipeline {
    /// Starts all four; `crash` = (process, SENDONCE_CRASH_AT) for the one to halt.
    pub fn start(test: &str, large: i64, crash: Option<(Bin, &str)>) -> Pipeline {
        let url = broker_url(test);
        broker(&url).ensure_topics().expect("topics");
        let dir = scratch(test);
        let mut p = Pipeline {
            url,
            dir,
            server: None,
            http: String::new(),
            fraud: None,
            wallet: None,
            sms: None,
            large,
        };
        for bin in [Bin::ServerMock, Bin::FraudCheck, Bin::Wallet, Bin::Sms] {
            let env = crash.filter(|(b, _)| *b == bin).map(|(_, at)| at);
            p.restart(bin, env);
        }
        p
    }

    /// Args of `bin` in this pipeline.
    pub fn args(&self, bin: Bin) -> Vec<String> {
        let db = |name: &str| self.dir.join(name).to_string_lossy().into_owned();
        let mut a: Vec<String> = match bin {
            Bin::ServerMock => vec![
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--db".into(),
                db("mock.db"),
                "--kafka-single-broker-dev".into(),
            ],
            Bin::FraudCheck => vec!["--large-amount".into(), self.large.to_string()],
            Bin::Wallet => vec!["--db".into(), db("wallet.db")],
            Bin::Sms => vec!["--db".into(), db("sms.db")],
        };
        a.extend(["--broker".to_string(), self.url.clone()]);
        a
    }

    /// (Re)starts `bin`, halting at `crash_at` if given.
    pub fn restart(&mut self, bin: Bin, crash_at: Option<&str>) {
        let env: Vec<(&str, &str)> = crash_at
            .map(|c| ("SENDONCE_CRASH_AT", c))
            .into_iter()
            .collect();
        let mut proc = Proc::start(bin, &self.dir, &self.args(bin), &env);
        match bin {
            Bin::ServerMock => {
                let line = proc.wait_line("listening on ");
                self.http = format!("http://{}", line.trim_start_matches("listening on ").trim());
                self.server = Some(proc);
            }
            Bin::FraudCheck => self.fraud = Some(proc),
            Bin::Wallet => self.wallet = Some(proc),
            Bin::Sms => self.sms = Some(proc),
        }
    }

    /// The running process of `bin`.
    pub fn proc(&mut self, bin: Bin) -> &mut Option<Proc> {
        match bin {
            Bin::ServerMock => &mut self.server,
            Bin::FraudCheck => &mut self.fraud,
            Bin::Wallet => &mut self.wallet,
            Bin::Sms => &mut self.sms,
        }
    }

    /// Waits for `bin`'s crash point, SIGKILLs it there and starts it again, unhalted.
    pub fn kill_at_crash_point(&mut self, bin: Bin, point: &str) {
        let mut proc = self.proc(bin).take().expect("running");
        proc.wait_line(&format!("CRASHPOINT {point}"));
        proc.kill();
        self.restart(bin, None);
    }

    /// An HTTP client of server-mock.
    pub fn api(&self) -> Api {
        Api::new(&self.http)
    }

    /// Waits until the outbox is drained and every group has read everything: no event
    /// is on its way any more. Fails with the state when it does not happen in time.
    pub async fn settle(&self) {
        let b = broker(&self.url);
        let deadline = Instant::now() + SETTLE_LIMIT;
        let api = self.api();
        loop {
            let pending = api.stats().await["outbox_pending"].as_i64().unwrap_or(-1);
            let lags = [
                ("fraud-check", sendonce_streams::event::DONE),
                ("wallet", sendonce_streams::event::APPROVED),
                ("sms", sendonce_streams::event::APPROVED),
                ("sms", sendonce_streams::event::LARGE),
            ]
            .map(|(g, t)| b.lag(&b.name(g), &b.name(t)).unwrap_or(-1));
            if pending == 0 && lags == [0, 0, 0, 0] {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not settled: outbox pending {pending}, lags (fraud, wallet, sms, sms large) {lags:?}; logs in {}",
                self.dir.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Opens one consumer's database read-only.
    pub fn db(&self, name: &str) -> Connection {
        Connection::open_with_flags(self.dir.join(name), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
    }
}

/// Counts in a consumer's database.
pub fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// How many redeliveries a consumer's inbox absorbed.
pub fn absorbed(conn: &Connection) -> i64 {
    conn.query_row("SELECT COALESCE(MAX(n), 0) FROM inbox_absorbed", [], |r| {
        r.get(0)
    })
    .unwrap()
}

/// The recipients' SMS in the SMS consumer's database (a `not_once` table).
pub const RECEIVED_SMS: &str = "(SELECT * FROM sms WHERE kind = 'received')";
/// The payers' "large transfer" SMS in the SMS consumer's database (a `not_once` table).
pub const LARGE_SMS: &str = "(SELECT * FROM sms WHERE kind = 'large')";

/// Transfer ids with other than exactly one row in `table` (of `expected`; a table or a
/// parenthesised query).
pub fn not_once(conn: &Connection, table: &str, expected: &[String]) -> Vec<(String, i64)> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT COUNT(*) FROM {table} WHERE transfer_id = ?1"
        ))
        .unwrap();
    let mut bad: Vec<(String, i64)> = expected
        .iter()
        .map(|t| (t.clone(), stmt.query_row([t], |r| r.get(0)).unwrap()))
        .filter(|(_, n)| *n != 1)
        .collect();
    let total = count(conn, &format!("SELECT COUNT(*) FROM {table}"));
    if total != expected.len() as i64 {
        bad.push(("<total>".into(), total));
    }
    bad
}

/// Writes `envelopes` to `topic` (base name) with an idempotent producer, acked.
pub fn produce(url: &str, topic: &str, envelopes: &[Envelope]) {
    let b = broker(url);
    let producer: BaseProducer = b.idempotent_producer().create().unwrap();
    let topic = b.name(topic);
    for e in envelopes {
        let bytes = e.to_bytes();
        producer
            .send(
                BaseRecord::to(&topic)
                    .key(e.key())
                    .payload(&bytes)
                    .headers(e.headers()),
            )
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// `n` transfers of `amount` from `payer` to `payee`, event ids from `first`.
pub fn envelopes(first: i64, n: usize, payee: &str, amount: i64) -> Vec<Envelope> {
    (0..n as i64)
        .map(|i| Envelope {
            event_id: first + i,
            kind: "TransferDone".into(),
            transfer: TransferDone {
                transfer_id: format!("tr_{}", first + i),
                from_user_id: "usr_payer".into(),
                to_user_id: payee.into(),
                amount_minor: amount,
                currency: "BDT".into(),
            },
        })
        .collect()
}

/// Everything on `topic` (base name) as a reader with `isolation` sees it, from offset 0.
pub fn read_all(url: &str, topic: &str, isolation: Isolation) -> Vec<Envelope> {
    let b = broker(url);
    let reader = b.end_reader(&b.name("test-reader"), isolation).unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..sendonce_streams::broker::PARTITIONS {
        tpl.add_partition_offset(&b.name(topic), p, Offset::Beginning)
            .unwrap();
    }
    reader.assign(&tpl).unwrap();
    let (mut ended, mut out) = (0, Vec::new());
    let deadline = Instant::now() + SETTLE_LIMIT;
    while ended < sendonce_streams::broker::PARTITIONS {
        assert!(Instant::now() < deadline, "{topic} never reached its end");
        match reader.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => out.push(Envelope::from_message(&m).unwrap()),
            Some(Err(KafkaError::PartitionEOF(_))) => ended += 1,
            Some(Err(e)) => panic!("{e}"),
            None => {}
        }
    }
    out
}

/// Waits until `group` (base name) has read all of `topic` (base name).
pub async fn wait_caught_up(url: &str, group: &str, topic: &str) {
    let b = broker(url);
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        let lag = b.lag(&b.name(group), &b.name(topic)).unwrap();
        if lag == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{group} still {lag} behind on {topic}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates `topic` (base name) with these settings only (the broker's defaults for the
/// rest, `segment.ms` included), before [`Broker::ensure_topics`] would create it.
pub async fn create_topic(url: &str, topic: &str, configs: &[(&str, &str)]) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let b = broker(url);
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = b.client().create().unwrap();
    let name = b.name(topic);
    let mut new = NewTopic::new(
        &name,
        sendonce_streams::broker::PARTITIONS,
        TopicReplication::Fixed(1),
    );
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let results = admin
        .create_topics(&[new], &AdminOptions::new())
        .await
        .unwrap();
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("create {t}: {e}"));
    }
}

/// `n` transfers of `amount` from `n` payers (so they spread over the partitions), event
/// ids from `first`.
pub fn spread_envelopes(first: i64, n: usize, amount: i64) -> Vec<Envelope> {
    let mut out = envelopes(first, n, "usr_payee", amount);
    for (i, e) in out.iter_mut().enumerate() {
        e.transfer.from_user_id = format!("usr_payer{i}");
    }
    out
}

/// The state of `group` (base name) as its coordinator reports it (`Stable`,
/// `PreparingRebalance`, `Empty`, …).
pub fn group_state(url: &str, group: &str) -> String {
    let b = broker(url);
    let client: rdkafka::consumer::BaseConsumer = b.client().create().unwrap();
    let name = b.name(group);
    let list = client
        .fetch_group_list(Some(&name), Duration::from_secs(10))
        .unwrap();
    list.groups()
        .iter()
        .find(|g| g.name() == name)
        .map(|g| g.state().to_string())
        .unwrap_or_default()
}

/// Rows of every `sms` table in the SQLite databases of `dir` whose text matches
/// `like` (the large-transfer SMS, wherever a process records them).
pub fn sms_everywhere(dir: &Path, like: &str) -> i64 {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "db") {
            continue;
        }
        let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let has_sms = count(
            &conn,
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'sms'",
        ) == 1;
        if has_sms {
            n += conn
                .query_row("SELECT COUNT(*) FROM sms WHERE text LIKE ?1", [like], |r| {
                    r.get::<_, i64>(0)
                })
                .unwrap();
        }
    }
    n
}
