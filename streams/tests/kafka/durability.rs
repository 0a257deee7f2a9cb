//! Issue 29, item 7: the relay marks an event published on the broker's ack, so that ack
//! must mean a copy on more than one broker. On topics with one replica (or
//! `min.insync.replicas` 1) server-mock refuses to relay unless told this is the
//! single-broker development setup.

use std::time::Duration;

use crate::support::{broker, broker_url, scratch, Bin, Proc};

#[tokio::test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
async fn the_relay_refuses_topics_with_one_replica_naming_them() {
    let url = broker_url("durability");
    let dir = scratch("durability");
    broker(&url).ensure_topics().unwrap();
    let db = dir.join("mock.db").to_string_lossy().into_owned();
    let args: Vec<String> = ["--listen", "127.0.0.1:0", "--db", &db, "--broker", &url]
        .map(String::from)
        .to_vec();
    let p = Proc::start(Bin::ServerMock, &dir, &args, &[]);
    let err_path = p.stderr.clone();
    let code = p.exit_within(Duration::from_secs(60)).unwrap();
    let err = std::fs::read_to_string(err_path).unwrap();
    assert_ne!(code, Some(0), "{err}");
    for named in [
        "replication factor 1",
        "min.insync.replicas 1",
        "--kafka-single-broker-dev",
    ] {
        assert!(err.contains(named), "{named:?} not in: {err}");
    }
}
