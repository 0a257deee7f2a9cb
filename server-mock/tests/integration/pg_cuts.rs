//! PostgreSQL connections cut mid-transaction and mid-COMMIT under load (issue 32 part 3): a TCP
//! proxy between server-mock and its cluster closes connections at random points, and right after
//! forwarding a COMMIT (the commit may or may not have happened; the server cannot know). The
//! server must never answer as if it knew: every request retried with its key ends in exactly one
//! debit, no 201 without one, no key stuck past the lock timeout, and the pool recovers.
//! PostgreSQL only (`SENDONCE_TEST_POSTGRES`); the cuts replay from `SEED`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{fresh_db, postgres, start_with, transfer_body};

/// The seed of every cut (change it to explore; a failure names it).
const SEED: u64 = 0x5eed_c0de;
/// Chance per forwarded chunk that the connection is cut after it.
const CUT: f64 = 0.02;
/// Chance that a connection is cut right after a COMMIT reached the cluster, before its answer.
const CUT_AFTER_COMMIT: f64 = 0.3;

/// xorshift64*: small, and the same cuts for the same seed.
struct Rng(u64);

impl Rng {
    fn chance(&mut self, p: f64) -> bool {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
}

struct CutProxy {
    port: u16,
    cutting: Arc<AtomicBool>,
    cuts: Arc<AtomicUsize>,
}

async fn cut_proxy(upstream: SocketAddr) -> CutProxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cutting = Arc::new(AtomicBool::new(false));
    let cuts = Arc::new(AtomicUsize::new(0));
    let (on, count) = (cutting.clone(), cuts.clone());
    tokio::spawn(async move {
        for n in 1u64.. {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let Ok(server) = TcpStream::connect(upstream).await else {
                continue;
            };
            let rng = Rng(SEED ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            tokio::spawn(pipe(client, server, rng, on.clone(), count.clone()));
        }
    });
    CutProxy {
        port,
        cutting,
        cuts,
    }
}

/// Forwards both ways until either side closes or a cut; dropping both sockets is the cut.
async fn pipe(
    mut client: TcpStream,
    mut server: TcpStream,
    mut rng: Rng,
    cutting: Arc<AtomicBool>,
    cuts: Arc<AtomicUsize>,
) {
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        let cut = tokio::select! {
            r = client.read(&mut up) => {
                let Ok(n @ 1..) = r else { return };
                if server.write_all(&up[..n]).await.is_err() {
                    return;
                }
                let commit = up[..n].windows(6).any(|w| w.eq_ignore_ascii_case(b"COMMIT"));
                rng.chance(CUT) || (commit && rng.chance(CUT_AFTER_COMMIT))
            }
            r = server.read(&mut down) => {
                let Ok(n @ 1..) = r else { return };
                if client.write_all(&down[..n]).await.is_err() {
                    return;
                }
                rng.chance(CUT)
            }
        };
        if cut && cutting.load(Ordering::SeqCst) {
            cuts.fetch_add(1, Ordering::SeqCst);
            return;
        }
    }
}

#[tokio::test]
async fn connections_cut_mid_transaction_and_mid_commit_leave_every_answer_true() {
    let Some(cluster) = postgres() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = fresh_db(dir.path(), "unused").await;
    let port: u16 = cluster
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .expect("a cluster on 127.0.0.1:PORT (scripts/pg start)");
    let proxy = cut_proxy(SocketAddr::from(([127, 0, 0, 1], port))).await;
    let proxied = db.replace(
        &format!("127.0.0.1:{port}"),
        &format!("127.0.0.1:{}", proxy.port),
    );
    let s = Arc::new(
        start_with(|c| {
            c.db = proxied;
            c.lock_timeout = Duration::from_secs(2);
        })
        .await,
    );
    let bob = s.user("bob", 0).await;
    let mut payers = Vec::new();
    for i in 0..8 {
        payers.push(s.user(&format!("payer{i}"), 1_000_000).await);
    }

    proxy.cutting.store(true, Ordering::SeqCst);
    let body = transfer_body(&bob.id, 100);
    let mut load = tokio::task::JoinSet::new();
    for (i, payer) in payers.iter().cloned().enumerate() {
        let (s, body) = (s.clone(), body.clone());
        load.spawn(async move {
            let mut seen = Vec::new();
            for t in 0..6 {
                let key = format!("cut-{i}-{t}");
                let r = s.transfer_until_done(&payer.token, &key, &body).await;
                seen.push((key, r.status, r.code()));
            }
            (i, seen)
        });
    }
    let mut answers = load.join_all().await;
    answers.sort_by_key(|(i, _)| *i);
    proxy.cutting.store(false, Ordering::SeqCst);
    let cuts = proxy.cuts.load(Ordering::SeqCst);
    assert!(cuts > 0, "no connection was cut: the test proves nothing");

    let mut transfers = 0;
    for (i, seen) in &answers {
        for (key, status, code) in seen {
            assert_eq!(
                *status, 201,
                "{key}: {status} {code} (seed {SEED:#x}, {cuts} cuts)"
            );
            assert_eq!(s.debits_for(&payers[*i], key).await, 1, "{key}: one debit");
            transfers += 1;
        }
        assert_eq!(s.balance(&payers[*i]).await, 1_000_000 - 600, "payer{i}");
    }
    // The pool recovered: a new request is answered at once.
    let fresh = s.transfer(&payers[0].token, Some("after"), &body).await;
    assert_eq!(fresh.status, 201, "{:?}", fresh.json());
    eprintln!("{cuts} connections cut, {transfers} transfers each debited once");
    s.settle().await;
    let Ok(s) = Arc::try_unwrap(s) else {
        panic!("a load task still holds the server")
    };
    s.stop().await;
}
