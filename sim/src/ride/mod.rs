//! One ride: server up, users created, phones through the profile, network back, settle, check.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sendonce::{Clock, SimClock, SystemClock, TransferState};

use crate::aliases::Aliases;
use crate::api::Api;
use crate::backend::kafka::{self, KafkaSide};
use crate::backend::{self, Determinism, Kind};
use crate::checker::{check, check_parked, PhoneView, ServerView};
use crate::dashboard;
use crate::device::{Device, Plan, CURRENCY};
use crate::report::{percentile, RealTime, Report};
use crate::rng::Rng;
use crate::seen::needed_attention;
use crate::server::{self, Chaos};
use crate::tap::{SharedWireLog, WireLog};
use crate::testapi::TestApi;
use crate::timeline::{Mark, SharedTimeline, Timeline};

mod config;

pub use config::{runtime, RideConfig, SIMULATED_START_MS};

struct Account {
    user_id: String,
    token: String,
}

/// Runs the whole ride and returns the report (its verdicts say whether every invariant held).
pub async fn run(cfg: &RideConfig) -> Result<Report> {
    if cfg.users == 0 {
        bail!("a ride needs at least one user");
    }
    cfg.check()?;
    let started = Instant::now();
    let kind = cfg.backend();
    let dir = scratch_dir(kind).context("temp dir")?;
    let start_ms = if kind == Kind::Simulated {
        SIMULATED_START_MS
    } else {
        SystemClock.now_ms()
    };
    let mut kafka = match &cfg.broker {
        Some(url) => Some(KafkaSide::start(url, dir.path(), cfg.seed)?),
        None => None,
    };
    let relay = kafka.as_ref().map(|k| k.url());
    let db = dir.path().join("server.db");
    let mut server = match cfg.api {
        Api::ServerMock => backend::start(kind, &db, &cfg.server, start_ms, relay).await?,
        Api::Bank => backend::start_bank(cfg.seed, cfg.real_time).await?,
    };
    let mut determinism = server.determinism();
    if kafka.is_some() {
        determinism = determinism.and(kafka::NOT_DETERMINISTIC);
    }
    let api = TestApi::new(server.link());
    let timeline: SharedTimeline = Arc::new(Timeline::new(start_ms));

    let mut rng = Rng::new(cfg.seed, 0);
    let pool = api.create_user("recipient pool", 0, CURRENCY).await?;
    let mut accounts = Vec::with_capacity(cfg.users);
    for i in 0..cfg.users {
        let per = cfg.transfers.max(1) as i64;
        // A quarter of the riders are short of money, so some transfers end in a definitive no (402).
        let balance = if rng.chance(0.25) {
            rng.range(0, per * 30_000)
        } else {
            rng.range(per * 60_000, per * 150_000)
        };
        let u = api
            .create_user(&format!("rider {i}"), balance, CURRENCY)
            .await?;
        accounts.push(Account {
            user_id: u.user_id,
            token: u.token,
        });
    }
    accounts.push(Account {
        user_id: pool.user_id.clone(),
        token: pool.token,
    });
    let balance_before = total_balance(&api, &accounts).await?;
    // Every fault switch the ride wants, kept to restore after a server restart.
    let mut faults = cfg.server.patch();
    let rate = cfg.server_fault_rate;
    faults["error_503_rate"] = rate.into();
    faults["drop_response_after_commit_rate"] = rate.into();
    faults["duplicate_delivery_rate"] = rate.into();
    faults["seed"] = cfg.seed.into();
    api.put_faults(&faults).await?;
    let stranded: Vec<bool> = (0..cfg.users)
        .map(|_| rng.chance(cfg.stranded_rate))
        .collect();

    let plan = Arc::new(Plan {
        base_url: server.base_url(),
        link: server.phone_link(),
        timeline: timeline.clone(),
        profile: cfg.profile.clone(),
        seed: cfg.seed,
        transfers: cfg.transfers,
        kill_rate: cfg.kill_rate,
        double_tap_rate: cfg.double_tap_rate,
        impatient_rate: cfg.impatient_rate,
        clock_jump_rate: cfg.clock_jump_rate,
        proxy_garbage_rate: cfg.proxy_garbage_rate,
        think_mean_ms: cfg.think_mean_ms,
        speed: cfg.speed,
        new_key_per_retry: cfg.new_key_per_retry,
        legacy_classify: cfg.legacy_classify,
        recipients: accounts.iter().map(|a| a.user_id.clone()).collect(),
        pool: pool.user_id,
        api: cfg.api,
        server: server.link(),
    });
    let wire: SharedWireLog = Arc::new(Mutex::new(WireLog::default()));
    let ride_clock = Arc::new(SimClock::new(start_ms, cfg.speed));

    // How late timers fire while a real-time ride runs: at N x speed, every ms late is N ms of
    // simulated time. (A deterministic ride's clock is simulated: nothing to measure.)
    let probing = Arc::new(std::sync::atomic::AtomicBool::new(
        determinism != Determinism::Deterministic,
    ));
    let lag_probe = tokio::spawn({
        let probing = probing.clone();
        async move {
            let mut lags = Vec::new();
            while probing.load(std::sync::atomic::Ordering::Relaxed) {
                let asked = Duration::from_millis(10);
                let at = Instant::now();
                tokio::time::sleep(asked).await;
                lags.push(at.elapsed().saturating_sub(asked).as_millis() as i64);
            }
            lags
        }
    });

    // The ride: every phone at once.
    let mut tasks = Vec::new();
    for (i, account) in accounts.iter().take(cfg.users).enumerate() {
        let mut device = Device::new(
            i,
            account.user_id.clone(),
            account.token.clone(),
            dir.path(),
            start_ms,
            plan.clone(),
            wire.clone(),
        );
        device.stranded = stranded[i];
        tasks.push(tokio::spawn(async move {
            device.open().await?;
            device.ride().await?;
            anyhow::Ok(device)
        }));
    }
    // Meanwhile the server is broken now and then (kills, clock jumps) until the phones are done.
    // With gateway steps slower than the lock, the user's web dashboard also reads the keys
    // of slow requests: the second reader that sees a lost lease.
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let (stop_dashboard, dashboard_stopped) = tokio::sync::oneshot::channel();
    let (stop_kafka, kafka_stopped) = tokio::sync::oneshot::channel::<()>();
    let phones = async move {
        let mut devices = Vec::new();
        for task in tasks {
            devices.push(task.await??);
        }
        drop((stop, stop_dashboard, stop_kafka));
        anyhow::Ok(devices)
    };
    let link = server.link();
    let chaos = server::chaos(
        &mut server,
        &api,
        &cfg.server,
        &faults,
        cfg.seed,
        (&timeline, &ride_clock),
        stopped,
    );
    let dashboard = async {
        if cfg.server.slow_gateway_rate > 0.0 {
            let after = cfg.server.lock_timeout() + std::time::Duration::from_millis(100);
            dashboard::watch(wire.clone(), link, after, dashboard_stopped).await
        } else {
            Ok(0)
        }
    };
    let kafka_chaos = async {
        match kafka.as_mut() {
            Some(k) => k.chaos(cfg.seed, kafka_stopped).await.map(Some),
            None => Ok(None),
        }
    };
    let (devices, chaos, dashboard, kafka_chaos) =
        tokio::join!(phones, chaos, dashboard, kafka_chaos);
    let (devices, mut chaos, dashboard) = (devices?, chaos?, dashboard?);
    if let Some(k) = kafka_chaos? {
        tracing::info!(
            kills = k.kills,
            replays = k.replays,
            "Kafka consumers broken"
        );
    }
    chaos.dashboard_look_ups = dashboard;
    let ride_sim_ms = ride_clock.now_ms() - start_ms;
    probing.store(false, std::sync::atomic::Ordering::Relaxed);
    let mut lags = lag_probe.await.unwrap_or_default();
    lags.sort_unstable();
    let lag_p99_real_ms = percentile(&lags, 99.0);

    // The network comes back (and the server heals); every phone settles.
    let settle_start = Instant::now();
    timeline.record(None, ride_clock.monotonic_ms(), Mark::Settle);
    api.clear_faults().await?;
    let mut tasks = Vec::new();
    for mut device in devices {
        let limit = cfg.settle_limit;
        tasks.push(tokio::spawn(async move {
            device.settle(limit).await?;
            anyhow::Ok(device)
        }));
    }
    let mut devices = Vec::new();
    for task in tasks {
        devices.push(task.await??);
    }
    let settle_real = settle_start.elapsed();
    tracing::info!("phones settled; draining the server's outbox");
    let mut settled = api.settle().await?;
    for _ in 0..5 {
        if settled.outbox_pending == 0 {
            break;
        }
        settled = api.settle().await?;
    }

    tracing::info!(?settled, "server settled");
    if let Some(k) = &kafka {
        k.settle(cfg.settle_limit.max(Duration::from_secs(60)))
            .await?;
        tracing::info!("Kafka consumers settled");
    }
    let mut phones = Vec::new();
    let mut attention = 0usize;
    for device in &mut devices {
        let (transfers, seen) = device.finish()?;
        attention += needed_attention(&seen).len();
        phones.push(PhoneView {
            index: device.index,
            user_id: device.user_id.clone(),
            transfers,
            seen,
            intents: device.intents.clone(),
            tap_anomalies: device.tap_anomalies.clone(),
        });
    }
    let mut server_view = ServerView {
        ledger: api.ledger().await?,
        sms: api.sms().await?,
        balance_before,
        balance_after: total_balance(&api, &accounts).await?,
    };
    if let Some(k) = &kafka {
        // Credits and SMS live in the consumers' databases; the wallet's balances add to
        // the server's (which saw only deposits and debits).
        let first = server_view
            .ledger
            .iter()
            .map(|e| e.entry_id)
            .max()
            .unwrap_or(0)
            + 1;
        let credits = k.credits(first)?;
        server_view.balance_after += credits.iter().map(|e| e.amount_minor).sum::<i64>();
        server_view.ledger.extend(credits);
        server_view.sms = k.sms()?;
    }
    tracing::info!("ledger read; stopping the server");
    server.shutdown().await;
    tracing::info!("server stopped");

    let wire = std::mem::take(&mut *wire.lock().unwrap_or_else(|p| p.into_inner()));
    let mut verdicts = check(&phones, &server_view, &wire);
    if cfg.api == Api::Bank {
        verdicts.verdicts.push(check_parked(&phones));
    }
    if determinism == Determinism::Deterministic {
        let users: Vec<String> = accounts.iter().map(|a| a.user_id.clone()).collect();
        Aliases::of_ride(&phones, &server_view, &users).rename(&mut verdicts);
    }
    if let Some(path) = &cfg.timeline {
        let lanes = crate::timeline::lanes(&plan, &devices, start_ms, &timeline.events());
        let title = format!(
            "sendonce ride: profile {}, seed {}, {} phones",
            cfg.profile.name(),
            cfg.seed,
            cfg.users
        );
        let svg = crate::svg::render(&title, &lanes, &timeline.events());
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    let real = RealTime {
        real_ms: started.elapsed().as_millis() as u64,
        settle_real_ms: settle_real.as_millis() as u64,
        timer_lag_p99_real_ms: lag_p99_real_ms,
    };
    Ok(build_report(
        cfg,
        determinism,
        &devices,
        &phones,
        &wire,
        verdicts,
        attention,
        ride_sim_ms,
        settled.keys_in_progress,
        chaos,
        real,
    ))
}

/// Where the ride's SQLite files live. A deterministic ride runs on one thread, where every fsync
/// stops the whole ride for real (never for simulated) time: its files go to RAM (`/dev/shm`)
/// unless `TMPDIR` says otherwise. A real-time ride keeps real disks (their latency is part of it).
fn scratch_dir(kind: Kind) -> std::io::Result<tempfile::TempDir> {
    let shm = std::path::Path::new("/dev/shm");
    if kind == Kind::Simulated && std::env::var_os("TMPDIR").is_none() && shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new()
            .prefix("sendonce-ride")
            .tempdir_in(shm)
        {
            return Ok(dir);
        }
    }
    tempfile::tempdir()
}

async fn total_balance(api: &TestApi, accounts: &[Account]) -> Result<i64> {
    let mut sum = 0;
    for a in accounts {
        sum += api.balance(&a.token).await?;
    }
    Ok(sum)
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    cfg: &RideConfig,
    determinism: Determinism,
    devices: &[Device],
    phones: &[PhoneView],
    wire: &WireLog,
    verdicts: crate::checker::Check,
    needs_attention: usize,
    ride_sim_ms: i64,
    keys_in_progress: i64,
    chaos: Chaos,
    real_time: RealTime,
) -> Report {
    let all = || phones.iter().flat_map(|p| &p.transfers);
    let count = |s: TransferState| all().filter(|t| t.state == s).count();
    // Phones whose clock jumped (stranded for a day, or changed by the user) would skew the percentiles.
    let stranded: BTreeMap<usize, bool> = devices
        .iter()
        .map(|d| (d.index, d.stranded || d.clock_jumps > 0))
        .collect();
    let mut ttc: Vec<i64> = phones
        .iter()
        .filter(|p| !stranded.get(&p.index).copied().unwrap_or(false))
        .flat_map(|p| &p.transfers)
        .filter(|t| t.state == TransferState::Succeeded)
        .map(|t| t.updated_at_ms - t.created_at_ms)
        .collect();
    ttc.sort_unstable();
    let net = devices.iter().map(|d| &d.net);
    Report {
        profile: cfg.profile.name().to_string(),
        replay_header: cfg.api.replay_header_name(),
        seed: cfg.seed,
        users: cfg.users,
        transfers_per_user: cfg.transfers,
        kill_rate: cfg.kill_rate,
        speed: cfg.speed,
        new_key_per_retry: cfg.new_key_per_retry,
        transfers: all().count(),
        confirmed: devices.iter().map(|d| d.intents.len()).sum(),
        double_taps: devices.iter().map(|d| d.double_taps as u64).sum(),
        confirm_errors: devices.iter().map(|d| d.confirm_errors.len()).sum(),
        succeeded: count(TransferState::Succeeded),
        rejected: count(TransferState::Rejected),
        failed: count(TransferState::Failed),
        needs_attention,
        not_final: all().filter(|t| !t.state.is_final()).count(),
        double_debits: verdicts.double_debits,
        lost: verdicts.lost,
        mismatches: verdicts.mismatches,
        orphan_debits: verdicts.orphan_debits,
        attempts: all().map(|t| t.attempts as u64).sum(),
        replays_seen: all().filter(|t| t.replayed).count(),
        wire_posts: wire.posts,
        wire_look_ups: wire.look_ups,
        wire_replays: wire.replays,
        conflicts_409: wire.status(409),
        server_5xx: wire.statuses_in(500..600),
        lost_responses: net.clone().map(|n| n.dropped_responses).sum(),
        lost_requests: net.clone().map(|n| n.dropped_requests).sum(),
        timeouts: net.clone().map(|n| n.timeouts).sum(),
        duplicated: net.clone().map(|n| n.duplicated).sum(),
        offline_refusals: net.map(|n| n.offline).sum(),
        kills: devices.iter().map(|d| d.kills as u64).sum(),
        stranded_users: devices.iter().filter(|d| d.stranded).count(),
        resolves: devices.iter().map(|d| d.resolves as u64).sum(),
        impatient_checks: devices.iter().map(|d| d.impatient_checks as u64).sum(),
        retaps_after_restart: devices.iter().map(|d| d.retaps_after_restart as u64).sum(),
        clock_jumps: devices.iter().map(|d| d.clock_jumps as u64).sum(),
        keys_in_progress,
        slow_gateway_rate: cfg.server.slow_gateway_rate,
        unfenced: cfg.server.unfenced,
        server_kills: chaos.kills,
        server_clock_jumps: chaos.clock_jumps,
        dashboard_look_ups: chaos.dashboard_look_ups,
        proxy_garbage: wire.garbage,
        time_to_confirm_p50_ms: percentile(&ttc, 50.0),
        time_to_confirm_p99_ms: percentile(&ttc, 99.0),
        simulated_ride_ms: ride_sim_ms,
        deterministic: determinism == Determinism::Deterministic,
        not_deterministic_because: match determinism {
            Determinism::Deterministic => None,
            Determinism::RealTime(why) => Some(why),
        },
        real_time,
        invariants_ok: verdicts.ok(),
        invariants: verdicts.verdicts,
    }
}
