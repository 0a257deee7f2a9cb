//! Issue 29, item 10: relays of several server-mock instances on one PostgreSQL database
//! take disjoint batches of the outbox (claimed, as the in-process relay's are), so each
//! event reaches `transfers.done` once when nothing crashes, not once per instance.

use std::collections::BTreeMap;
use std::process::Command;

use sendonce_streams::broker::Isolation;
use sendonce_streams::event::DONE;

use crate::support::{broker, broker_url, read_all, scratch, Api, Bin, Proc};

const PAYERS: usize = 4;
const PER_PAYER: usize = 40;

/// A fresh database of the `SENDONCE_TEST_POSTGRES` cluster.
fn fresh_database(cluster: &str, name: &str) -> String {
    let ok = Command::new("psql")
        .args([cluster, "-qc", &format!("CREATE DATABASE {name}")])
        .status()
        .expect("psql")
        .success();
    assert!(ok, "CREATE DATABASE {name}");
    let sep = if cluster.contains('?') { '&' } else { '?' };
    format!("{cluster}{sep}dbname={name}")
}

#[tokio::test]
#[ignore = "needs a Kafka broker and PostgreSQL: scripts/test-all kafka"]
async fn two_relays_on_one_database_publish_each_event_once() {
    let cluster = std::env::var("SENDONCE_TEST_POSTGRES")
        .expect("SENDONCE_TEST_POSTGRES=postgres://… (scripts/test-all kafka sets it)");
    let url = broker_url("relay-claims");
    broker(&url).ensure_topics().unwrap();
    let dir = scratch("relay-claims");
    let name = format!("relay_claims_{}", std::process::id());
    let db = fresh_database(&cluster, &name);
    let mut servers = Vec::new();
    let mut apis = Vec::new();
    for _ in 0..2 {
        let args: Vec<String> = [
            "--listen",
            "127.0.0.1:0",
            "--db",
            &db,
            "--broker",
            &url,
            "--kafka-single-broker-dev",
        ]
        .map(String::from)
        .to_vec();
        let mut p = Proc::start(Bin::ServerMock, &dir, &args, &[]);
        let line = p.wait_line("listening on ");
        apis.push(Api::new(&format!(
            "http://{}",
            line.trim_start_matches("listening on ").trim()
        )));
        servers.push(p);
    }
    let payee = apis[0].user("payee", 0).await;
    let mut payers = Vec::new();
    for i in 0..PAYERS {
        payers.push(apis[0].user(&format!("payer{i}"), 1_000_000).await);
    }
    // Both instances take transfers, so both relays are woken and both poll.
    let mut ids = Vec::new();
    for j in 0..PER_PAYER {
        for (i, payer) in payers.iter().enumerate() {
            let api = &apis[(i + j) % 2];
            ids.push(api.transfer(payer, &payee, 100, &format!("c{i}-{j}")).await);
        }
    }
    let deadline = std::time::Instant::now() + crate::support::SETTLE_LIMIT;
    while apis[0].stats().await["outbox_pending"].as_i64() != Some(0) {
        assert!(std::time::Instant::now() < deadline, "outbox never drained");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    drop(servers);
    let mut published: BTreeMap<String, usize> = BTreeMap::new();
    for e in read_all(&url, DONE, Isolation::ReadUncommitted) {
        *published.entry(e.transfer.transfer_id).or_default() += 1;
    }
    let twice = published.values().filter(|n| **n != 1).count();
    assert_eq!(published.len(), ids.len(), "every transfer published");
    assert_eq!(
        twice,
        0,
        "transfers published more than once (of {})",
        ids.len()
    );
}
