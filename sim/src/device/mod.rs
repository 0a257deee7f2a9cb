//! One phone of a ride: its SDK instance (killed and reopened at random), its clock; its user's
//! taps are `taps`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use sendonce::{
    Clock, Deterministic, NetsimStats, NetworkProfile, Sdk, SdkConfig, SimClock, Transfer,
    TransferRequest, TransferState,
};

use crate::api::Api;
use crate::backend::{phone_transport, ServerLink};
use crate::keys::seeded_key;
use crate::proxy::GarbageProxy;
use crate::rng::Rng;
use crate::seen::{KeyLog, Seen};
use crate::tap::{SharedWireLog, Tap};
use crate::timeline::{Mark, SharedTimeline};

mod taps;

/// Currency of every ride.
pub const CURRENCY: &str = "BDT";

/// Real time one HTTP request may take (the server is local; this only guards against a wedge).
const REAL_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How far a stranded phone's clock jumps: past the 24 h give-up horizon.
pub const STRANDED_JUMP_MS: i64 = 25 * 3600 * 1000;

/// What every phone of a ride shares.
#[derive(Clone)]
pub struct Plan {
    /// Server base URL.
    pub base_url: String,
    /// The way to the server in a deterministic ride (`None`: real HTTP per SDK instance).
    pub link: Option<Arc<dyn ServerLink>>,
    /// Every event of the ride, for the timeline.
    pub timeline: SharedTimeline,
    /// Profile during the ride.
    pub profile: NetworkProfile,
    /// Ride seed.
    pub seed: u64,
    /// Transfers each user confirms.
    pub transfers: usize,
    /// Probability per transfer that the app is killed soon after (SDK closed mid-flight, reopened).
    pub kill_rate: f64,
    /// Probability that a transfer's Send is tapped twice at once.
    pub double_tap_rate: f64,
    /// Probability per transfer that the user taps "check status" (`resolve`) while it is still unfinished.
    pub impatient_rate: f64,
    /// Probability per transfer that the phone's clock is changed by 1-6 h either way.
    pub clock_jump_rate: f64,
    /// Probability per answer that an intermediary replaces it with a portal or proxy page.
    pub proxy_garbage_rate: f64,
    /// Mean simulated time between two transfers of one user (ms).
    pub think_mean_ms: i64,
    /// Simulated ms per real ms.
    pub speed: f64,
    /// Debug flag of the SDK: a new key per retry (must make the checker fail).
    pub new_key_per_retry: bool,
    /// Test-only builds: the SDK's classification from before only the server's answers counted.
    pub legacy_classify: bool,
    /// Every user id that can receive money (all users and the pool).
    pub recipients: Vec<String>,
    /// The pool recipient (used when a user draws itself).
    pub pool: String,
    /// The API the phones speak (and the contract they are configured with).
    pub api: Api,
    /// The way to the server outside the phones' network: the bank's app, where users pass its
    /// challenges (strong customer authentication).
    pub server: Arc<dyn ServerLink>,
}

/// A transfer the user saw confirmed on the screen.
#[derive(Debug, Clone)]
pub struct Intent {
    /// The note that names it (`ride s.. u.. t..`).
    pub note: String,
    /// Local id the composer returned.
    pub local_id: String,
}

/// One phone.
pub struct Device {
    /// Index in the ride (also the user's seed stream).
    pub index: usize,
    /// Server user id.
    pub user_id: String,
    token: String,
    db_path: PathBuf,
    /// The phone's clock (simulated, fast).
    pub clock: Arc<SimClock>,
    /// Mints the phone's idempotency keys in a deterministic ride (across every SDK instance).
    keys: Arc<Mutex<Rng>>,
    sdk: Option<Sdk>,
    log: Arc<KeyLog>,
    wire: SharedWireLog,
    plan: Arc<Plan>,
    /// Times the app was killed.
    pub kills: u32,
    /// Network simulator counts, summed over every SDK instance.
    pub net: NetsimStats,
    /// Transfers the user saw confirmed.
    pub intents: Vec<Intent>,
    /// Sends that were double-tapped.
    pub double_taps: u32,
    /// Double taps that did not return the same transfer.
    pub tap_anomalies: Vec<String>,
    /// Confirms that returned an error.
    pub confirm_errors: Vec<String>,
    /// Loses the signal for the rest of the ride, then its clock jumps past the give-up horizon before the
    /// network comes back.
    pub stranded: bool,
    signal_lost: bool,
    /// Status look-ups the app asked for (`resolve`) to settle NeedsAttention.
    pub resolves: u32,
    /// "Check status" taps on unfinished transfers during the ride.
    pub impatient_checks: u32,
    /// Send tapped again on a re-attached confirm screen after a restart.
    pub retaps_after_restart: u32,
    /// Times the phone's clock was changed during the ride.
    pub clock_jumps: u32,
    /// Ride time when the signal was lost for good (stranded phones).
    pub signal_lost_at: Option<i64>,
    /// Every clock change: (ride time, ms).
    pub jumps: Vec<(i64, i64)>,
}

impl Device {
    /// A phone for `user_id` whose SQLite file lives in `dir`; not opened yet.
    pub fn new(
        index: usize,
        user_id: String,
        token: String,
        dir: &std::path::Path,
        start_ms: i64,
        plan: Arc<Plan>,
        wire: SharedWireLog,
    ) -> Self {
        let clock = Arc::new(SimClock::new(start_ms, plan.speed));
        let log = Arc::new(KeyLog {
            seen: Mutex::default(),
            phone: index,
            clock: clock.clone(),
            timeline: plan.timeline.clone(),
        });
        Self {
            index,
            user_id,
            token,
            db_path: dir.join(format!("phone-{index}.db")),
            keys: Arc::new(Mutex::new(Rng::new(plan.seed, 90_000 + index as u64))),
            clock,
            sdk: None,
            log,
            wire,
            plan,
            kills: 0,
            net: NetsimStats::default(),
            intents: Vec::new(),
            double_taps: 0,
            tap_anomalies: Vec::new(),
            confirm_errors: Vec::new(),
            stranded: false,
            signal_lost: false,
            resolves: 0,
            impatient_checks: 0,
            retaps_after_restart: 0,
            clock_jumps: 0,
            signal_lost_at: None,
            jumps: Vec::new(),
        }
    }

    fn record(&self, mark: Mark) {
        self.plan
            .timeline
            .record(Some(self.index), self.clock.monotonic_ms(), mark);
    }

    fn sdk(&self) -> Result<&Sdk> {
        self.sdk.as_ref().context("the SDK is not open")
    }

    /// Opens (or reopens) the SDK on the phone's file and switches the ride's network profile on.
    pub async fn open(&mut self) -> Result<()> {
        let mut config = SdkConfig::builder(self.plan.base_url.clone(), self.db_path.clone())
            .access_token(self.token.clone())
            .clock(self.clock.clone())
            .request_timeout(REAL_REQUEST_TIMEOUT)
            .unsafe_new_key_per_retry(self.plan.new_key_per_retry)
            .unsafe_legacy_classify(self.plan.legacy_classify);
        if self.plan.api != Api::ServerMock {
            config = config.contract(self.plan.api.contract().clone());
        }
        if self.plan.link.is_some() {
            let keys = self.keys.clone();
            config = config.deterministic(Deterministic {
                runtime: tokio::runtime::Handle::current(),
                mint_key: Arc::new(move || seeded_key(&keys)),
            });
        }
        let config = config.build()?;
        let tap = Tap::new(
            phone_transport(self.plan.link.as_ref(), REAL_REQUEST_TIMEOUT)?,
            self.plan.api,
            self.wire.clone(),
            self.index,
            self.clock.clone(),
            self.plan.timeline.clone(),
        );
        // A fresh stream per open, so a reopened phone does not repeat the same pages.
        let stream = self.index as u64 * 1_000 + u64::from(self.kills);
        let tap = Arc::new(GarbageProxy::new(
            tap,
            self.wire.clone(),
            self.plan.proxy_garbage_rate,
            self.plan.seed,
            stream,
        ));
        let sdk = if self.plan.link.is_some() {
            // A deterministic ride's one thread: a pool thread would let the OS order events.
            Sdk::open_with_transport(config, tap)?
        } else {
            tokio::task::spawn_blocking(move || Sdk::open_with_transport(config, tap)).await??
        };
        sdk.add_listener(self.log.clone());
        let profile = if self.signal_lost {
            NetworkProfile::Offline
        } else {
            self.plan.profile.clone()
        };
        sdk.set_network_profile(profile, self.plan.seed ^ self.index as u64)?;
        self.sdk = Some(sdk);
        Ok(())
    }

    /// The app dies: the SDK stops wherever it is (requests cut off mid-flight).
    pub fn kill(&mut self) {
        if let Some(sdk) = self.sdk.take() {
            self.add_net(sdk.network_stats());
            sdk.close();
            self.kills += 1;
            self.record(Mark::Kill);
        }
    }

    fn add_net(&mut self, s: NetsimStats) {
        let n = &mut self.net;
        n.requests += s.requests;
        n.offline += s.offline;
        n.dropped_requests += s.dropped_requests;
        n.dropped_responses += s.dropped_responses;
        n.duplicated += s.duplicated;
        n.timeouts += s.timeouts;
    }

    /// Sleeps `ms` of the phone's simulated time.
    async fn sleep_sim(&self, ms: i64) {
        tokio::time::sleep(self.clock.real_duration(ms)).await;
    }

    /// The user's part of the ride: confirms transfers (some tapped twice) while the app gets killed now and then.
    pub async fn ride(&mut self) -> Result<()> {
        let plan = self.plan.clone();
        let mut rng = Rng::new(plan.seed, self.index as u64 + 1);
        // Taps follow the phone's clock (not the time each confirm took), so a ride's simulated length is its plan.
        let mut tap_at = self.now_ms();
        // A stranded phone loses the signal for good somewhere in the second half of its ride.
        let strand_at = if self.stranded {
            rng.range(plan.transfers as i64 / 2, plan.transfers as i64 - 1)
        } else {
            -1
        };
        // The user's visits to the banking app draw from a stream of their own: a server-mock ride
        // (which has no challenges) replays its seeds unchanged.
        let mut visits = Rng::new(plan.seed, 50_000 + self.index as u64);
        for t in 0..plan.transfers {
            if plan.api == Api::Bank && visits.chance(0.5) {
                self.pass_challenges().await;
            }
            if t as i64 == strand_at {
                self.signal_lost = true;
                self.signal_lost_at = Some(self.plan.timeline.at(self.clock.monotonic_ms()));
                self.record(Mark::SignalLost);
                self.sdk()?
                    .set_network_profile(NetworkProfile::Offline, 0)?;
            }
            tap_at += rng.range(0, 2 * plan.think_mean_ms);
            self.sleep_sim(tap_at - self.now_ms()).await;
            let mut to = plan.recipients[rng.below(plan.recipients.len())].clone();
            if to == self.user_id {
                to = plan.pool.clone();
            }
            let request = TransferRequest {
                to_user_id: to,
                amount_minor: rng.range(100, 200_000),
                currency: CURRENCY.into(),
                note: Some(format!("ride s{} u{} t{t}", plan.seed, self.index)),
            };
            let double = rng.chance(plan.double_tap_rate);
            let confirmed = self.confirm(request.clone(), double).await;
            if let Some(id) = confirmed
                .as_deref()
                .filter(|_| rng.chance(plan.impatient_rate))
            {
                // The user watches the spinner; if it still spins when their patience (5 s - 2.5 min)
                // runs out, they tap "check status" — so it lands on the slow attempts.
                self.sleep_sim(rng.range(5_000, 150_000)).await;
                self.check_status(id).await;
            }
            if rng.chance(plan.kill_rate) {
                // A third of kills hit right after confirm, while the first attempt is on the wire.
                let after = if rng.chance(0.33) {
                    0
                } else {
                    rng.range(0, 20_000)
                };
                self.sleep_sim(after).await;
                self.kill();
                self.sleep_sim(rng.range(1_000, 30_000)).await;
                self.open().await?;
                // Half the time the app comes back on the same confirm screen and the user taps Send again.
                if let Some(id) = confirmed.as_deref().filter(|_| rng.chance(0.5)) {
                    self.tap_again_after_restart(id, request).await;
                }
            }
            if rng.chance(plan.clock_jump_rate) {
                // The user (or the network) changes the phone's time: up to 6 h either way.
                let hours = rng.range(1, 6);
                let jump = if rng.chance(0.5) { hours } else { -hours } * 3_600_000;
                self.clock.jump(jump);
                tap_at += jump; // the user's pace does not change with the clock
                self.clock_jumps += 1;
                self.jumps
                    .push((self.plan.timeline.at(self.clock.monotonic_ms()), jump));
                self.record(Mark::ClockJump(jump));
            }
        }
        Ok(())
    }

    /// The network comes back (after a day for a stranded phone) and every transfer is brought to an end.
    pub async fn settle(&mut self, limit: Duration) -> Result<()> {
        if self.sdk.is_none() {
            self.open().await?;
        }
        if self.stranded {
            self.clock.jump(STRANDED_JUMP_MS);
            self.jumps.push((
                self.plan.timeline.at(self.clock.monotonic_ms()),
                STRANDED_JUMP_MS,
            ));
            self.record(Mark::ClockJump(STRANDED_JUMP_MS));
        }
        let stats = self.sdk()?.network_stats();
        self.add_net(stats);
        let sdk = self.sdk()?;
        sdk.set_network_profile(NetworkProfile::Off, 0)?;
        sdk.set_network_available(true)?;
        let settle_start = tokio::time::Instant::now();
        let deadline = settle_start + limit;
        let mut resolves = 0;
        for transfer in sdk.transfers()? {
            let id = transfer.local_id.clone();
            let waited = tokio::time::Instant::now();
            let mut outcome =
                match tokio::time::timeout_at(deadline, sdk.wait_for_outcome(&id)).await {
                    Ok(t) => t?,
                    Err(_) => continue, // the checker reports it as not final
                };
            if waited.elapsed() > Duration::from_secs(1) {
                tracing::warn!(phone = self.index, now = self.clock.now_ms(), before = ?transfer, after = ?outcome, "slow to settle");
            }
            // NeedsAttention: the app resolves it by status look-up (never a new key).
            // RequiresAction: the user passes the challenge, the app says so, the SDK sends again.
            while tokio::time::Instant::now() < deadline {
                match outcome.state {
                    TransferState::RequiresAction => {
                        self.pass_challenge(&outcome).await;
                        let wait = self.sdk()?.wait_for_outcome(&id);
                        outcome = match tokio::time::timeout_at(deadline, wait).await {
                            Ok(t) => t?,
                            Err(_) => break,
                        };
                    }
                    TransferState::NeedsAttention => {
                        resolves += 1;
                        let sdk = self.sdk()?;
                        match sdk.resolve(&id).await {
                            Ok(t) if t.state.is_final() => outcome = t,
                            _ => {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                outcome = sdk.transfer(&id)?;
                            }
                        }
                    }
                    _ => break,
                }
            }
        }
        self.resolves += resolves;
        tracing::info!(
            phone = self.index,
            real_ms = settle_start.elapsed().as_millis() as u64,
            clock_jumps = self.clock_jumps,
            "phone settled"
        );
        Ok(())
    }

    /// Every transfer on the phone and what the listener saw of each; closes the SDK.
    pub fn finish(&mut self) -> Result<(Vec<Transfer>, BTreeMap<String, Seen>)> {
        let transfers = self.sdk()?.transfers()?;
        if let Some(sdk) = self.sdk.take() {
            sdk.close();
        }
        let seen = self
            .log
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Ok((transfers, seen))
    }

    /// Simulated time of the phone now.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}
