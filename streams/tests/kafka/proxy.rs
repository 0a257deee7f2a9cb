//! A TCP proxy in front of the broker's fault listener that swallows every other Produce
//! answer and cuts the connection instead: the broker has written the batch, the producer
//! never hears so, and retries it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Kafka's Produce request's API key.
const PRODUCE: i16 = 0;

/// Produce answers swallowed so far.
#[derive(Default)]
pub struct Cuts {
    produce_answers: AtomicU64,
    cut: AtomicU64,
}

impl Cuts {
    /// How many connections were cut in place of a Produce answer.
    pub fn count(&self) -> u64 {
        self.cut.load(Ordering::SeqCst)
    }
}

/// `$SENDONCE_KAFKA_FAULTY` ("PROXY_PORT BROKER_PORT", from `scripts/kafka faulty`).
pub fn ports() -> (u16, u16) {
    let v = std::env::var("SENDONCE_KAFKA_FAULTY")
        .expect("SENDONCE_KAFKA_FAULTY=\"PROXY_PORT BROKER_PORT\" (scripts/kafka faulty)");
    let mut it = v.split_whitespace().map(|p| p.parse().expect("port"));
    (
        it.next().expect("proxy port"),
        it.next().expect("broker port"),
    )
}

/// Starts the proxy on `listen`, forwarding to `broker`; runs until the test process ends.
pub fn start(listen: u16, broker: u16) -> Arc<Cuts> {
    let listener = TcpListener::bind(("127.0.0.1", listen)).expect("proxy port free");
    let cuts = Arc::new(Cuts::default());
    let c = cuts.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let Ok(server) = TcpStream::connect(("127.0.0.1", broker)) else {
                continue;
            };
            let pending = Arc::new(Mutex::new(HashMap::new()));
            let (c2, p2) = (c.clone(), pending.clone());
            let (client2, server2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || requests(client2, server2, p2));
            std::thread::spawn(move || answers(server, client, pending, c2));
        }
    });
    cuts
}

/// Reads one length-prefixed frame.
fn frame(from: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    from.read_exact(&mut len).ok()?;
    let n = i32::from_be_bytes(len).max(0) as usize;
    let mut body = vec![0u8; n];
    from.read_exact(&mut body).ok()?;
    let mut all = len.to_vec();
    all.extend(body);
    Some(all)
}

/// Client → broker: forwards every request, remembering each one's API key by its
/// correlation id (request header: api_key i16, api_version i16, correlation_id i32).
fn requests(mut client: TcpStream, mut server: TcpStream, pending: Arc<Mutex<HashMap<i32, i16>>>) {
    while let Some(f) = frame(&mut client) {
        if f.len() >= 12 {
            let key = i16::from_be_bytes([f[4], f[5]]);
            let corr = i32::from_be_bytes([f[8], f[9], f[10], f[11]]);
            pending.lock().unwrap().insert(corr, key);
        }
        if server.write_all(&f).is_err() {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Both);
}

/// Broker → client: forwards answers, except every other Produce answer, which is
/// swallowed and the connection cut (response header: correlation_id i32).
fn answers(
    mut server: TcpStream,
    mut client: TcpStream,
    pending: Arc<Mutex<HashMap<i32, i16>>>,
    cuts: Arc<Cuts>,
) {
    while let Some(f) = frame(&mut server) {
        let corr = i32::from_be_bytes([f[4], f[5], f[6], f[7]]);
        let key = pending.lock().unwrap().remove(&corr);
        if key == Some(PRODUCE) && cuts.produce_answers.fetch_add(1, Ordering::SeqCst) % 2 == 1 {
            cuts.cut.fetch_add(1, Ordering::SeqCst);
            break;
        }
        if client.write_all(&f).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}
