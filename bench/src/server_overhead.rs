//! Figure 3, server: first requests, replays and concurrent same-key duplicates against the
//! plain insert endpoint (`POST /v1/bench/plain`, no idempotency) on the same server and database.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::report::{r3, Report, Row};
use crate::server::{self, Answer, User};
use crate::stats::{fmt, spread, summarize, Summary};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Plain,
    /// The least a first request honouring the contract does (`POST /v1/bench/floor`).
    Floor,
    /// What a team would ship instead: a Powertools-style layer (`POST /v1/bench/peer`).
    Peer,
    First,
    Replay,
    Dup,
}

const KINDS: [Kind; 6] = [
    Kind::Plain,
    Kind::Floor,
    Kind::Peer,
    Kind::First,
    Kind::Replay,
    Kind::Dup,
];
/// The target for first/plain at 16 in flight, unless the measured floor is above it.
const TARGET_16_IN_FLIGHT: f64 = 2.0;
/// Copies of one key sent at once in the duplicate workload.
const DUP_COPIES: usize = 4;

impl Kind {
    /// The row label's word for it.
    fn short(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Floor => "contract floor",
            Kind::Peer => "peer",
            Kind::First => "first",
            Kind::Replay => "replay",
            Kind::Dup => "duplicates",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain insert",
            Kind::Floor => "contract floor",
            Kind::Peer => "peer (Powertools-style layer)",
            Kind::First => "first request",
            Kind::Replay => "replay",
            Kind::Dup => "same-key duplicates ×4",
        }
    }
}

struct Ctx {
    base: String,
    client: reqwest::Client,
    senders: Vec<User>,
    to: String,
    /// Completed (sender index, key) pairs for replays.
    done: Mutex<Vec<(usize, String)>>,
}

/// One workload for `dur` with `conc` requests in flight; returns the answers and the elapsed time.
async fn measure(ctx: &Arc<Ctx>, kind: Kind, conc: usize, dur: Duration) -> (Vec<Answer>, f64) {
    let start = Instant::now();
    let deadline = start + dur;
    let tasks = if kind == Kind::Dup {
        (conc / DUP_COPIES).max(1)
    } else {
        conc
    };
    let mut handles = Vec::new();
    for t in 0..tasks {
        let ctx = ctx.clone();
        handles.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let mut i = t;
            while Instant::now() < deadline {
                let s = i % ctx.senders.len();
                i += tasks;
                let user = &ctx.senders[s];
                let body = server::transfer_body(&ctx.to, 1);
                let transfers = format!("{}/v1/transfers", ctx.base);
                match kind {
                    Kind::Plain | Kind::Floor | Kind::Peer => {
                        let path = match kind {
                            Kind::Plain => "plain",
                            Kind::Floor => "floor",
                            _ => "peer",
                        };
                        let url = format!("{}/v1/bench/{path}", ctx.base);
                        out.push(server::post(&ctx.client, &url, &user.token, None, body).await);
                    }
                    Kind::First => {
                        let key = uuid::Uuid::new_v4().to_string();
                        let a =
                            server::post(&ctx.client, &transfers, &user.token, Some(&key), body)
                                .await;
                        if a.status == 201 {
                            ctx.done.lock().expect("pool").push((s, key));
                        }
                        out.push(a);
                    }
                    Kind::Replay => {
                        let (s, key) = {
                            let pool = ctx.done.lock().expect("pool");
                            pool[(i * 7919) % pool.len()].clone()
                        };
                        let token = &ctx.senders[s].token;
                        out.push(
                            server::post(&ctx.client, &transfers, token, Some(&key), body).await,
                        );
                    }
                    Kind::Dup => {
                        let key = uuid::Uuid::new_v4().to_string();
                        let copies: Vec<_> = (0..DUP_COPIES)
                            .map(|_| {
                                let (c, url, token, key, body) = (
                                    ctx.client.clone(),
                                    transfers.clone(),
                                    user.token.clone(),
                                    key.clone(),
                                    body.clone(),
                                );
                                tokio::spawn(async move {
                                    server::post(&c, &url, &token, Some(&key), body).await
                                })
                            })
                            .collect();
                        let mut answers = Vec::new();
                        for h in copies {
                            answers.push(h.await.expect("copy"));
                        }
                        out.extend(answers);
                    }
                }
            }
            out
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.expect("load task"));
    }
    (all, start.elapsed().as_secs_f64())
}

#[derive(Default)]
struct Acc {
    ms: Vec<f64>,
    rps_rounds: Vec<f64>,
    statuses: BTreeMap<String, usize>,
}

impl Acc {
    fn add(&mut self, answers: &[Answer], secs: f64) {
        self.rps_rounds.push(answers.len() as f64 / secs);
        for a in answers {
            self.ms.push(a.secs * 1e3);
            let k = match (a.status, a.replayed) {
                (201, false) => "201".to_string(),
                (201, true) => "201 replayed".to_string(),
                (s, _) => s.to_string(),
            };
            *self.statuses.entry(k).or_default() += 1;
        }
    }
}

/// Runs the four workloads in rotating order for `rounds` rounds at `conc` in flight.
async fn series(ctx: &Arc<Ctx>, conc: usize, rounds: usize, dur: Duration) -> BTreeMap<Kind, Acc> {
    let mut acc: BTreeMap<Kind, Acc> = KINDS.iter().map(|k| (*k, Acc::default())).collect();
    for round in 0..rounds {
        let mut order = KINDS.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        order.rotate_left(round / 2 % KINDS.len());
        for kind in order {
            let (answers, secs) = measure(ctx, kind, conc, dur).await;
            acc.get_mut(&kind).expect("kind").add(&answers, secs);
        }
    }
    acc
}

fn lat_json(s: &Summary) -> serde_json::Value {
    serde_json::json!({"mean": r3(s.mean), "p50": r3(s.p50), "p90": r3(s.p90), "p99": r3(s.p99), "mad": r3(s.mad), "n": s.n})
}

/// The server, its users and (for `warm_up`, or a replay workload's pool) a warm-up round.
async fn setup(
    dir: &Path,
    warm_up: &[Kind],
) -> (tempfile::TempDir, server_mock::RunningServer, Arc<Ctx>) {
    std::fs::create_dir_all(dir).expect("the bench directory");
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let db = tmp.path().join("server.db");
    let srv = server::start(db.to_str().expect("utf-8 path"), Duration::ZERO).await;
    let base = srv.base_url();
    let client = server::client();
    let mut senders = Vec::new();
    for i in 0..32 {
        senders.push(
            server::create_user(&client, &base, &format!("sender{i}"), 1_000_000_000_000_000).await,
        );
    }
    let to = server::create_user(&client, &base, "recipient", 0)
        .await
        .user_id;
    let ctx = Arc::new(Ctx {
        base,
        client,
        senders,
        to,
        done: Mutex::new(Vec::new()),
    });
    // Warm-up, and a pool of finished keys for the first replay round.
    for &kind in warm_up {
        measure(&ctx, kind, 8, Duration::from_millis(300)).await;
    }
    (tmp, srv, ctx)
}

/// For profiling (`sendonce-bench child workload KIND SECS CONC DIR`): one workload alone.
pub async fn single(kind: &str, secs: f64, conc: usize, dir: &Path) {
    let kind = match kind {
        "plain" => Kind::Plain,
        "floor" => Kind::Floor,
        "peer" => Kind::Peer,
        "first" => Kind::First,
        "replay" => Kind::Replay,
        _ => Kind::Dup,
    };
    // No warm-up (time-bound, so its request count would vary) unless replays need keys:
    // a profile then subtracts a run of 0 requests to get exactly the requests' cost.
    let warm_up: &[Kind] = if kind == Kind::Replay {
        &[Kind::First]
    } else {
        &[]
    };
    let (_tmp, srv, ctx) = setup(dir, warm_up).await;
    let (answers, took) = measure(&ctx, kind, conc, Duration::from_secs_f64(secs)).await;
    let lat = summarize(&answers.iter().map(|a| a.secs * 1e3).collect::<Vec<_>>());
    srv.shutdown().await;
    println!(
        "{} requests of {} in {took:.2} s: {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms",
        answers.len(),
        kind.name(),
        answers.len() as f64 / took,
        lat.p50,
        lat.p99
    );
}

/// Runs figure 3 with the database in `dir`.
pub async fn run(report: &mut Report, dir: &Path, rounds: usize, dur: Duration) {
    let (_tmp, srv, ctx) = setup(dir, &KINDS).await;
    let loaded = series(&ctx, 16, rounds, dur).await;
    let single = series(&ctx, 1, rounds, dur / 2).await;
    srv.shutdown().await;

    let mut details = serde_json::Map::new();
    for (label, acc) in [("loaded_16", &loaded), ("single_client", &single)] {
        let mut m = serde_json::Map::new();
        for (kind, a) in acc {
            let rps = summarize(&a.rps_rounds);
            m.insert(
                kind.name().into(),
                serde_json::json!({"rps_rounds": {"p10": r3(rps.p10), "p50": r3(rps.p50), "p90": r3(rps.p90)},
                    "latency_ms": lat_json(&summarize(&a.ms)), "statuses": a.statuses}),
            );
        }
        details.insert(label.into(), m.into());
    }

    // Cost ratios per round (same round, same machine state): time per request of A over B.
    let per_round = |a: Kind, b: Kind| -> Summary {
        let (x, y) = (&loaded[&a].rps_rounds, &loaded[&b].rps_rounds);
        summarize(&x.iter().zip(y).map(|(ra, rb)| rb / ra).collect::<Vec<_>>())
    };
    let rps = |k: Kind| summarize(&loaded[&k].rps_rounds).p50;
    let lat = |k: Kind| summarize(&loaded[&k].ms);
    let first_over_plain = rps(Kind::Plain) / rps(Kind::First);
    let floor_over_plain = rps(Kind::Plain) / rps(Kind::Floor);
    let first_over_floor = rps(Kind::Floor) / rps(Kind::First);
    let first_over_peer = rps(Kind::Peer) / rps(Kind::First);
    let peer_over_plain = rps(Kind::Plain) / rps(Kind::Peer);
    let replay_over_first = rps(Kind::First) / rps(Kind::Replay);
    let dup_over_plain = rps(Kind::Plain) / rps(Kind::Dup);
    let fop = per_round(Kind::First, Kind::Plain);
    let flp = per_round(Kind::Floor, Kind::Plain);
    let fof = per_round(Kind::First, Kind::Floor);
    let fope = per_round(Kind::First, Kind::Peer);
    let pop = per_round(Kind::Peer, Kind::Plain);
    let rof = per_round(Kind::Replay, Kind::First);
    let dop = per_round(Kind::Dup, Kind::Plain);

    let row = |kind: Kind, vs: Kind, ratio: f64, rr: &Summary| {
        let (l, lb) = (lat(kind), lat(vs));
        Row::new(
            "3",
            format!(
                "{} vs {}, 16 in flight, gateway_delay 0: req/s; p50/p99 ms",
                kind.name(),
                vs.name()
            ),
        )
        .subject(format!(
            "{} req/s; {}/{} ms",
            fmt(rps(kind)),
            fmt(l.p50),
            fmt(l.p99)
        ))
        .baseline(format!(
            "{} req/s; {}/{} ms",
            fmt(rps(vs)),
            fmt(lb.p50),
            fmt(lb.p99)
        ))
        .ratio(format!("{} · per round {}", fmt(ratio), spread(rr)))
    };
    // Issue 19: where the target is below what the contract itself costs here (the floor,
    // measured in this run), the target is that floor + 25 %; both stay in the table.
    let (target, target_text) = if floor_over_plain > TARGET_16_IN_FLIGHT {
        let t = floor_over_plain * 1.25;
        (
            t,
            format!(
                "≤ {} (measured floor {} + 25 %; {TARGET_16_IN_FLIGHT} is below it)",
                fmt(t),
                fmt(floor_over_plain)
            ),
        )
    } else {
        (TARGET_16_IN_FLIGHT, format!("≤ {TARGET_16_IN_FLIGHT}"))
    };
    report.rows.push(
        row(Kind::First, Kind::Plain, first_over_plain, &fop)
            .target(target_text, first_over_plain <= target),
    );
    // The floor is a measurement, not a subject: the first request's row carries the target.
    report
        .rows
        .push(row(Kind::Floor, Kind::Plain, floor_over_plain, &flp));
    report
        .rows
        .push(row(Kind::First, Kind::Floor, first_over_floor, &fof));
    // What fencing, the gateway record and the outbox cost over what most teams ship.
    report
        .rows
        .push(row(Kind::Peer, Kind::Plain, peer_over_plain, &pop));
    report
        .rows
        .push(row(Kind::First, Kind::Peer, first_over_peer, &fope));
    report.rows.push(
        row(Kind::Replay, Kind::First, replay_over_first, &rof)
            .target("< 1", replay_over_first < 1.0),
    );
    let dup_statuses = format!("{:?}", loaded[&Kind::Dup].statuses);
    report
        .rows
        .push(row(Kind::Dup, Kind::Plain, dup_over_plain, &dop));
    let s = |k: Kind| summarize(&single[&k].ms);
    let first_over_plain_single = s(Kind::First).p50 / s(Kind::Plain).p50;
    // One client at a time: p50/p99 of `a` against `b`, the ratio at p50.
    let single_row = |a: Kind, b: Kind| {
        let (sa, sb) = (s(a), s(b));
        Row::new(
            "3",
            format!(
                "one client at a time, p50/p99 ms: {} vs {}",
                a.short(),
                b.short()
            ),
        )
        .subject(format!("{}/{}", fmt(sa.p50), fmt(sa.p99)))
        .baseline(format!("{}/{}", fmt(sb.p50), fmt(sb.p99)))
        .ratio(format!("{} (p50)", fmt(sa.p50 / sb.p50)))
    };
    report
        .rows
        .push(single_row(Kind::First, Kind::Plain).target("≤ 2.5", first_over_plain_single <= 2.5));
    report.rows.push(single_row(Kind::Floor, Kind::Plain));
    report.rows.push(single_row(Kind::First, Kind::Peer));
    report.rows.push(single_row(Kind::Replay, Kind::First));
    report.key("server_first_over_plain_ratio", r3(first_over_plain));
    report.key("server_floor_over_plain_ratio", r3(floor_over_plain));
    report.key("server_first_over_peer_ratio", r3(first_over_peer));
    report.key("server_peer_over_plain_ratio", r3(peer_over_plain));
    report.key(
        "server_first_over_plain_ratio_single",
        r3(first_over_plain_single),
    );
    report.key("server_replay_over_first_ratio", r3(replay_over_first));
    report.key("server_dup_over_plain_ratio", r3(dup_over_plain));
    report.key("server", serde_json::Value::Object(details));
    report.note(
        "3 server",
        format!(
            "server-mock in process, SQLite file (WAL, synchronous=FULL) in a temporary directory under `{}`, \
             **gateway_delay 0** so only the idempotency machinery differs from the baseline. 32 sender users, \
             one recipient, amount 1. Each round runs the six workloads for {:.1} s each in rotating order \
             (plain, floor, peer, first, replay, duplicates; reversed and rotated every round), {rounds} rounds at 16 requests \
             in flight through one keep-alive reqwest client, then the same at 1 in flight. First = fresh key; \
             replay = a key that completed earlier, same body; duplicates = {DUP_COPIES} concurrent copies of a \
             fresh key (statuses seen: {dup_statuses}); floor = `POST /v1/bench/floor`, the least a first \
             request honouring the contract does (claim, gateway record, then the sender's balance read and \
             completion + debit + outbox event, each one statement; the relay delivers the event as for a transfer); \
             peer = `POST /v1/bench/peer`, what a team would ship instead: a Powertools-style layer on the same \
             database (a conditional insert of an in-progress record, committed like the claim; the handler's \
             balance read, debit and inline credit, FULL; the record updated to completed with the response, \
             FULL; no fence, no gateway record, no outbox: `server-mock/src/store/sqlite/peer.rs`). Ratios are cost ratios: baseline req/s ÷ subject req/s, \
             per round and over the medians. The plain endpoint does the same auth, parsing and recipient check \
             and one INSERT on the same writer connection.",
            dir.display(),
            dur.as_secs_f64()
        ),
    );
}
