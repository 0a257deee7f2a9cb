//! The relay's Kafka publisher against a real broker (`SENDONCE_KAFKA=kafka://host:port`, started by
//! the kafka stage of scripts/test-all): every outbox event reaches its topic with its event id, and a
//! relay that lost the acknowledgements (a crash between publish and mark) publishes them again — the
//! consumer's inbox, in the transaction of its effect, applies each once.
//!
//! Ignored without a broker; `cargo test -p sendonce-server --features kafka --test kafka_relay --
//! --include-ignored` with `SENDONCE_KAFKA` set runs it.

mod sqlite_engine_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use sendonce_server::engine::Publish;
use sendonce_server::kafka::{event_id, KafkaPublish};
use sendonce_server::outcome::Event;
use sendonce_server::store::sqlite::{inbox, Db};
use sqlite_engine_support::fixture;

fn bootstrap() -> String {
    let url = std::env::var("SENDONCE_KAFKA")
        .expect("SENDONCE_KAFKA=kafka://host:port (scripts/kafka start)");
    let rest = url.strip_prefix("kafka://").unwrap_or(&url);
    rest.split('/').next().unwrap().to_string()
}

/// The fixture's operation publishes to `paid`; made here if the broker does not have it yet.
async fn ensure_topic(bootstrap: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let topic = NewTopic::new("paid", 3, TopicReplication::Fixed(1));
    // "already exists" is fine: the test reads only the keys it made.
    let _ = admin.create_topics([&topic], &AdminOptions::new()).await;
}

/// Publishes through Kafka but never reports an acknowledgement: the relay crashed before marking.
struct LostAcks(KafkaPublish);

impl Publish for LostAcks {
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        self.0.publish(events).await?;
        Ok(Vec::new())
    }
}

/// Every message on `paid` whose payload is one of `keys`, as (event id, payload), until each key
/// was seen `copies` times or the time is up.
fn consume(bootstrap: &str, keys: &[String], copies: usize) -> Vec<(i64, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set(
            "group.id",
            format!("kafka-relay-test-{}", uuid::Uuid::new_v4()),
        )
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&["paid"]).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut count: HashMap<String, usize> = HashMap::new();
    while Instant::now() < deadline
        && keys
            .iter()
            .any(|k| count.get(k).copied().unwrap_or(0) < copies)
    {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let payload = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
        if keys.contains(&payload) {
            *count.entry(payload.clone()).or_default() += 1;
            seen.push((
                event_id(&m).expect("every message carries its event id"),
                payload,
            ));
        }
    }
    seen
}

/// The consumer's side: each (event id, payload) applied through the inbox in the transaction of
/// its effect. Returns how many effects it applied.
async fn apply(db: &Db, messages: Vec<(i64, String)>) -> usize {
    db.call(move |c| {
        c.execute_batch("CREATE TABLE IF NOT EXISTS effects (payload TEXT NOT NULL)")?;
        let tx = c.transaction()?;
        let mut applied = 0;
        for (id, payload) in &messages {
            if inbox::first_time(&tx, "effects", *id, 0)? {
                tx.execute("INSERT INTO effects (payload) VALUES (?1)", [payload])?;
                applied += 1;
            }
        }
        tx.commit()?;
        Ok(applied)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: SENDONCE_KAFKA (the kafka stage)"]
async fn every_event_reaches_kafka_with_its_id_and_a_lost_ack_is_applied_once() {
    let bootstrap = bootstrap();
    ensure_topic(&bootstrap).await;
    let f = fixture();
    let keys: Vec<String> = (0..3).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    f.pay_each(&keys.iter().map(String::as_str).collect::<Vec<_>>())
        .await;

    // The relay crashed between publishing and marking: everything goes out again next round.
    let kafka = KafkaPublish::connect(&bootstrap, Duration::from_secs(30)).unwrap();
    assert_eq!(
        f.engine
            .relay(&LostAcks(
                KafkaPublish::connect(&bootstrap, Duration::from_secs(30)).unwrap()
            ))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        f.engine.relay(&kafka).await.unwrap(),
        3,
        "acknowledged and marked"
    );
    assert_eq!(
        f.engine.relay(&kafka).await.unwrap(),
        0,
        "nothing left to publish"
    );

    let messages = consume(&bootstrap, &keys, 2);
    assert_eq!(
        messages.len(),
        6,
        "each event twice on the topic: {messages:?}"
    );
    let mut ids: Vec<i64> = messages.iter().map(|(id, _)| *id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        3,
        "one event id per event, the same in both copies"
    );
    // The consumer applies what it reads; the inbox drops the second copy of each.
    assert_eq!(apply(&f.db, messages.clone()).await, 3);
    assert_eq!(
        apply(&f.db, messages).await,
        0,
        "a replay from an old offset applies nothing"
    );
}
