//! The relay's producer under forced retries: answers to Produce requests are lost (the
//! broker wrote the batch, the producer never heard), so it sends again. Idempotent, the
//! log holds each message once and in order; the same run without idempotence duplicates.

use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use sendonce_streams::broker::Isolation;
use sendonce_streams::event::DONE;

use crate::support::{broker, broker_url, envelopes, read_all};

const MESSAGES: usize = 100;

/// Writes `MESSAGES` events (one key, so one partition, in order) through the proxy;
/// returns the event ids in log order and how many answers the proxy swallowed.
fn produce_through_proxy(test: &str, idempotent: bool, proxy: u16) -> Vec<i64> {
    let url = broker_url(test);
    let b = broker(&url);
    b.ensure_topics().unwrap();
    let mut config = match idempotent {
        true => b.idempotent_producer(),
        false => {
            let mut c = b.client();
            c.set("enable.idempotence", "false")
                .set("acks", "all")
                .set("max.in.flight.requests.per.connection", "1");
            c
        }
    };
    let producer: BaseProducer = config
        .set("bootstrap.servers", format!("127.0.0.1:{proxy}"))
        .set("linger.ms", "0")
        .set("retry.backoff.ms", "10")
        .set("reconnect.backoff.ms", "10")
        .set("reconnect.backoff.max.ms", "100")
        .set("message.timeout.ms", "120000")
        .create()
        .unwrap();
    let topic = b.name(DONE);
    for chunk in envelopes(1, MESSAGES, "usr_payee", 100).chunks(10) {
        for e in chunk {
            let bytes = e.to_bytes();
            producer
                .send(BaseRecord::to(&topic).key(e.key()).payload(&bytes))
                .map_err(|(e, _)| e)
                .unwrap();
        }
        producer.flush(Duration::from_secs(120)).unwrap();
    }
    read_all(&url, DONE, Isolation::ReadUncommitted)
        .iter()
        .map(|e| e.event_id)
        .collect()
}

#[test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
fn an_idempotent_producer_retrying_lost_answers_writes_each_message_once() {
    let (listen, target) = crate::proxy::ports();
    let cuts = crate::proxy::start(listen, target);

    let t = std::time::Instant::now();
    let ids = produce_through_proxy("retries-idempotent", true, listen);
    eprintln!("idempotent run: {:?}, {} cuts", t.elapsed(), cuts.count());
    let cut_idempotent = cuts.count();
    assert!(
        cut_idempotent > 0,
        "the proxy cut no Produce answer: nothing was retried"
    );
    assert_eq!(
        ids,
        (1..=MESSAGES as i64).collect::<Vec<_>>(),
        "duplicates or reordering"
    );

    // The control: the same lost answers without idempotence duplicate messages.
    let t = std::time::Instant::now();
    let ids = produce_through_proxy("retries-plain", false, listen);
    eprintln!("plain run: {:?}, {} cuts", t.elapsed(), cuts.count());
    assert!(
        cuts.count() > cut_idempotent,
        "the control run was not retried"
    );
    assert!(
        ids.len() > MESSAGES,
        "no duplicate without idempotence: the fault did not bite"
    );
}
