//! Figure 3, what-if: the first request's database writes replayed directly on SQLite (server-mock's
//! own schema and functions, one client, real disk): every commit FULL, each durability change alone,
//! and as built (only the debit FULL), against the plain insert. It shows what each fsync costs; it is
//! not the server (no HTTP, no auth reads, no gateway record, no relay batching).

use std::path::Path;
use std::time::Instant;

use rusqlite::{params, Connection, TransactionBehavior};
use sendonce_server::fingerprint::request_hash;
use sendonce_server::store::sqlite::Db;
use sendonce_server::store::sqlite::{keys, outbox};
use sendonce_server::store::NewKey;
use sendonce_server::{Claim, Lease};
use server_mock::consumers::{Consumer, TransferDone};
use server_mock::ledger::{self, TransferRecord};

use crate::report::{r3, Report, Row};
use crate::stats::{fmt, summarize};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Plain,
    AllFull,
    ClaimNormal,
    RelayOneFsync,
    AsBuilt,
}

const VARIANTS: [Variant; 5] = [
    Variant::Plain,
    Variant::AllFull,
    Variant::ClaimNormal,
    Variant::RelayOneFsync,
    Variant::AsBuilt,
];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain insert",
            Variant::AllFull => "every commit FULL (5 commits, 5 fsyncs)",
            Variant::ClaimNormal => "claim committed with synchronous=NORMAL",
            Variant::RelayOneFsync => "relay: one fsync per batch",
            Variant::AsBuilt => "as built: claim and relay at NORMAL, the debit FULL (1 fsync)",
        }
    }
}

fn sync(c: &Connection, full: bool) -> rusqlite::Result<()> {
    c.pragma_update(None, "synchronous", if full { "FULL" } else { "NORMAL" })
}

/// One request's writes; returns seconds.
fn one(
    c: &mut Connection,
    v: Variant,
    user: &str,
    n: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    let start = Instant::now();
    if v == Variant::Plain {
        c.execute(
            "INSERT INTO bench_plain (user_id, to_user_id, amount_minor, currency, note, created_at_ms)
             VALUES (?1, 'usr_to', 1, 'BDT', 'bench', ?2)",
            params![user, n as i64],
        )?;
        return Ok(start.elapsed().as_secs_f64());
    }
    let claim_normal = matches!(v, Variant::ClaimNormal | Variant::AsBuilt);
    let relay_one = matches!(v, Variant::RelayOneFsync | Variant::AsBuilt);
    let key = uuid::Uuid::new_v4().to_string();
    let lock = uuid::Uuid::new_v4().simple().to_string();
    let hash = request_hash("POST", "/v1/transfers", key.as_bytes());
    let now = 1_700_000_000_000 + n as i64;
    sync(c, !claim_normal)?;
    let claimed = keys::claim(
        c,
        &NewKey {
            user_id: user,
            key: &key,
            hash: &hash,
            lock_id: &lock,
            lease: Lease {
                instance: "bench",
                mono_ms: n as i64,
            },
            body: key.as_bytes(),
            now_ms: now,
            bucket_width_ms: 86_400_000,
        },
    )?;
    assert!(matches!(claimed, Claim::Acquired));
    sync(c, true)?;
    let record = TransferRecord {
        transfer_id: format!("tr_{}", uuid::Uuid::now_v7().simple()),
        from_user_id: user.into(),
        to_user_id: "usr_to".into(),
        amount_minor: 1,
        currency: "BDT".into(),
        note: Some("bench".into()),
        created_at_ms: now,
        idempotency_key: key.clone(),
    };
    let body = record.to_json();
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let _balance = ledger::balance(&tx, user)?;
    ledger::insert_debit(&tx, &record, &hash)?;
    let event = outbox::insert_one(&tx, user, &key, now, "TransferDone", &body)?;
    keys::complete(&tx, user, &key, &lock, 201, &body)?;
    tx.commit()?;
    // The relay, for a batch of one (what a single client sees).
    let done: TransferDone = serde_json::from_slice(&body)?;
    sync(c, !relay_one)?;
    for consumer in Consumer::ALL {
        consumer.handle_batch(c, &[(event, done.clone())], now)?;
    }
    // In WAL mode the last FULL commit's fsync also makes the earlier NORMAL commits durable.
    // As built, the mark commits NORMAL with the consumers (one relay transaction, no fsync).
    sync(c, v != Variant::AsBuilt)?;
    outbox::mark_through(c, event, now)?;
    Ok(start.elapsed().as_secs_f64())
}

/// Mean-able samples (ms) per variant, with the database file in `dir`.
fn measure(dir: &Path, per_variant: usize) -> Vec<Vec<f64>> {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let path = tmp.path().join("writes.db");
    // The server's own schema and pragmas.
    drop(Db::open(path.to_str().expect("utf-8"), server_mock::schema::create).expect("schema"));
    let mut c = Connection::open(&path).expect("open");
    c.pragma_update(None, "journal_mode", "WAL").expect("wal");
    sync(&c, true).expect("full");
    let users: Vec<String> = (0..32).map(|i| format!("usr_{i:02}")).collect();
    for u in &users {
        ledger::deposit(&c, u, 1_000_000_000_000, "BDT", 0).expect("deposit");
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    for n in 0..per_variant + 10 {
        // Round robin over the variants (ABCDE, rotated every time): noise hits all of them.
        for k in 0..VARIANTS.len() {
            let i = (k + n) % VARIANTS.len();
            let t = one(&mut c, VARIANTS[i], &users[n % users.len()], n).expect("writes");
            if n >= 10 {
                samples[i].push(t * 1e3);
            }
        }
    }
    samples
}

/// Runs the what-if rows of figure 3 on the real disk (`dir`) and on tmpfs (`fast_dir`: CPU only).
pub fn run(report: &mut Report, dir: &Path, fast_dir: &Path, per_variant: usize) {
    let samples = measure(dir, per_variant);
    let cpu = measure(fast_dir, per_variant);
    let cpu_plain = summarize(&cpu[0]).mean;
    let cpu_full = summarize(&cpu[1]).mean;
    let cpu_built = summarize(&cpu[4]).mean;
    let plain = summarize(&samples[0]);
    let mut details = serde_json::Map::new();
    let cells: Vec<String> = VARIANTS
        .iter()
        .zip(&samples)
        .skip(1)
        .map(|(v, s)| {
            let s = summarize(s);
            details.insert(v.name().into(), serde_json::json!({"ms_p50": r3(s.p50), "ms_mean": r3(s.mean), "over_plain_mean": r3(s.mean / plain.mean)}));
            format!("{}: {} ms ({}×)", v.name(), fmt(s.mean), fmt(s.mean / plain.mean))
        })
        .collect();
    details.insert(
        "plain insert".into(),
        serde_json::json!({"ms_p50": r3(plain.p50), "ms_mean": r3(plain.mean)}),
    );
    report.rows.push(
        Row::new(
            "3",
            "what-if: first-request writes replayed on SQLite, 1 client, mean ms per request",
        )
        .subject(cells.join("; "))
        .baseline(format!("plain insert {} ms", fmt(plain.mean))),
    );
    details.insert(
        "tmpfs_ms_mean".into(),
        serde_json::json!({"plain": r3(cpu_plain), "every_commit_full": r3(cpu_full), "as_built": r3(cpu_built)}),
    );
    report.rows.push(
        Row::new(
            "3",
            format!(
                "what-if on {} (no fsync cost), mean ms: every commit FULL · as built",
                fast_dir.display()
            ),
        )
        .subject(format!(
            "{} ({}×) · {} ({}×)",
            fmt(cpu_full),
            fmt(cpu_full / cpu_plain),
            fmt(cpu_built),
            fmt(cpu_built / cpu_plain)
        ))
        .baseline(format!("plain insert {} ms", fmt(cpu_plain))),
    );
    report.key(
        "server_write_path_what_if",
        serde_json::Value::Object(details),
    );
    report.note(
        "3 what-if",
        format!(
            "The database writes of one first request, replayed with server-mock's own schema and functions \
             (`keys::claim`/`complete` of sendonce-server, `ledger::insert_debit`, the outbox insert, `Consumer::handle_batch` for \
             both consumers, the `published` mark) on one connection, WAL + synchronous=FULL, file in `{}`, {per_variant} \
             requests per variant, variants round-robin. \"claim committed with synchronous=NORMAL\": the claim's commit \
             does not fsync (the debit commit's fsync covers it, WAL being append-only). \"relay: one fsync per batch\": \
             the two consumer commits do not fsync, the `published` mark does (equivalent, for durability, to one \
             transaction). \"as built\": both, and the mark at NORMAL too, as server-mock commits a relay batch (its \
             events are durable in the debit's outbox rows). Means, because single fsyncs are bimodal on this disk.",
            dir.display()
        ),
    );
}
