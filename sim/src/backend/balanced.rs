//! Several server-mock instances on one PostgreSQL database behind a round-robin load
//! balancer, for `sendonce-sim ride --db postgres://… --instances N`: every request (a
//! phone's retry, a load-balancer replay, a look-up) goes to the next instance, so the
//! attempts of one transfer land on different processes of the same database.
//!
//! The test API's switches that live in one instance's memory (faults, clock, limits)
//! are sent to every instance. An instance that drops a connection (the "response lost
//! after commit" fault) makes the balancer answer 502, as a real one would: an
//! intermediary's answer, which the phone must treat as unknown.
//!
//! With `--server-kill-rate` the instances are child processes (see `child`), SIGKILLed one
//! at a time in turn and restarted on the same port: a dead instance's claims wait out their
//! lock while the balancer sends the phones' replays to the others.
//!
//! Real sockets, a real database and real time: such a ride is not deterministic.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::Response;
use sendonce::transport::BoxFuture;
use server_mock::{RunningServer, ServerConfig};

use super::child::ServerProcess;
use super::{Backend, Determinism, Entry};
use crate::server::ServerFaults;

/// The instances and the balancer in front of them.
pub struct Balanced {
    servers: Vec<Instance>,
    /// SIGKILLs so far: the next one kills instance `kills % servers.len()`.
    kills: usize,
    task: tokio::task::JoinHandle<()>,
    entry: Entry,
}

/// One instance behind the balancer.
enum Instance {
    /// In this process: cheap, and nothing to kill.
    InProcess(RunningServer),
    /// A child process, for rides that SIGKILL their servers.
    Process(ServerProcess),
}

impl Instance {
    async fn start(config: ServerConfig, faults: &ServerFaults) -> Result<Self> {
        Ok(if faults.kill_rate > 0.0 {
            Self::Process(ServerProcess::start(&config, faults.unfenced).await?)
        } else {
            Self::InProcess(
                server_mock::start(config, "127.0.0.1:0".parse()?)
                    .await
                    .context("starting server-mock on PostgreSQL")?,
            )
        })
    }

    fn base_url(&self) -> String {
        let addr = match self {
            Self::InProcess(s) => s.addr,
            Self::Process(p) => p.addr,
        };
        format!("http://{addr}")
    }
}

struct Upstreams {
    bases: Vec<String>,
    next: AtomicUsize,
    client: reqwest::Client,
}

/// Test-API paths whose state is per instance: sent to all of them.
fn broadcast(path: &str) -> bool {
    matches!(
        path,
        "/v1/test/faults" | "/v1/test/clock" | "/v1/test/limits"
    )
}

impl Balanced {
    /// Starts `faults.instances` servers (each its own pool, reaper, relay and heartbeat;
    /// child processes when the ride kills servers) on a fresh database of `cluster`, and
    /// the balancer on a free port.
    pub async fn start(cluster: &str, faults: &ServerFaults, config: ServerConfig) -> Result<Self> {
        let db = server_mock::store::postgres::fresh_database(cluster, "ride")
            .await
            .context("a fresh database for the ride")?;
        let mut servers = Vec::new();
        for _ in 0..faults.instances.max(1) {
            let config = ServerConfig {
                db: db.clone(),
                ..config.clone()
            };
            servers.push(Instance::start(config, faults).await?);
        }
        let upstreams = Arc::new(Upstreams {
            bases: servers.iter().map(Instance::base_url).collect(),
            next: AtomicUsize::new(0),
            client: reqwest::Client::builder()
                .retry(reqwest::retry::never())
                .timeout(Duration::from_secs(90))
                .build()?,
        });
        let app = axum::Router::new().fallback(forward).with_state(upstreams);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let entry = Entry::http(listener.local_addr()?)?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            servers,
            kills: 0,
            task,
            entry,
        })
    }
}

impl Backend for Balanced {
    fn entry(&self) -> &Entry {
        &self.entry
    }
    fn determinism(&self) -> Determinism {
        let killed = match self.servers.first() {
            Some(Instance::Process(_)) => " (child processes SIGKILLed and restarted)",
            _ => "",
        };
        Determinism::RealTime(format!(
            "--db postgres://…: {} server instance(s){killed} on a real PostgreSQL database \
             behind a balancer, over real HTTP in real time",
            self.servers.len()
        ))
    }
    fn kill_and_restart(&mut self) -> BoxFuture<'_, Result<()>> {
        let n = self.kills % self.servers.len();
        self.kills += 1;
        Box::pin(async move {
            match &mut self.servers[n] {
                Instance::Process(p) => p.kill_and_restart().await,
                // Started in this process because the ride kills nothing.
                Instance::InProcess(_) => Ok(()),
            }
        })
    }
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            self.task.abort();
            for s in self.servers {
                match s {
                    Instance::InProcess(s) => s.shutdown().await,
                    Instance::Process(p) => drop(p),
                }
            }
        })
    }
}

async fn forward(State(up): State<Arc<Upstreams>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = to_bytes(body, 1 << 20).await else {
        return status(StatusCode::PAYLOAD_TOO_LARGE);
    };
    let path_q = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let targets: Vec<&String> = if broadcast(parts.uri.path()) {
        up.bases.iter().collect()
    } else {
        let n = up.next.fetch_add(1, Ordering::Relaxed);
        vec![&up.bases[n % up.bases.len()]]
    };
    let mut first = None;
    for base in targets {
        let mut r = up
            .client
            .request(parts.method.clone(), format!("{base}{path_q}"))
            .body(body.clone());
        for (name, value) in &parts.headers {
            if !hop_by_hop(name) {
                r = r.header(name, value);
            }
        }
        let answer = match r.send().await {
            Ok(a) => {
                let mut out = Response::builder().status(a.status().as_u16());
                for (name, value) in a.headers() {
                    if !hop_by_hop(name) {
                        out = out.header(name, value);
                    }
                }
                match a.bytes().await {
                    Ok(bytes) => out
                        .body(Body::from(bytes))
                        .unwrap_or_else(|_| status(StatusCode::BAD_GATEWAY)),
                    Err(_) => status(StatusCode::BAD_GATEWAY),
                }
            }
            Err(_) => status(StatusCode::BAD_GATEWAY),
        };
        first.get_or_insert(answer);
    }
    first.unwrap_or_else(|| status(StatusCode::BAD_GATEWAY))
}

fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host" | "connection" | "content-length" | "transfer-encoding" | "keep-alive"
    )
}

fn status(code: StatusCode) -> Response {
    let mut r = Response::new(Body::from(format!("balancer: {code}")));
    *r.status_mut() = code;
    r
}
