//! Named points where a test stops a process (`SENDONCE_CRASH_AT=point[:nth]`).
//!
//! At the point the process prints `CRASHPOINT <point>` on stdout and waits for a line on
//! stdin: the test then kills it there with SIGKILL (a crash between two writes), or
//! sends a line to let it go on (a paused zombie that wakes up later).

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// The relay has the broker's ack and has not marked the events published.
pub const RELAY_AFTER_ACK: &str = "relay-after-ack";
/// The fraud check queued its outputs (the payer's SMS request included) and has not
/// committed its Kafka transaction.
pub const FRAUD_BEFORE_COMMIT: &str = "fraud-before-commit";
/// The fraud check holds the first message of a batch and will poll for more (a
/// rebalance served by those polls lands in the middle of the batch).
pub const FRAUD_MID_BATCH: &str = "fraud-mid-batch";
/// The wallet committed its credit and has not committed its offset.
pub const WALLET_AFTER_DB: &str = "wallet-after-db";
/// The SMS consumer committed its SMS and has not committed its offset.
pub const SMS_AFTER_DB: &str = "sms-after-db";

static PASSES: AtomicU64 = AtomicU64::new(0);

/// Stops here if `SENDONCE_CRASH_AT` names `point` and this is its nth pass (default 1st).
pub fn point(point: &str) {
    let Ok(spec) = std::env::var("SENDONCE_CRASH_AT") else {
        return;
    };
    let (name, nth) = match spec.split_once(':') {
        Some((name, n)) => (name, n.parse().unwrap_or(1)),
        None => (spec.as_str(), 1),
    };
    if name != point || PASSES.fetch_add(1, Ordering::SeqCst) + 1 != nth {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "CRASHPOINT {point}");
    let _ = out.flush();
    drop(out);
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
}
