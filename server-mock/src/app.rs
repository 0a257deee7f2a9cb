//! One server instance's shared state: its configuration, the backend, the engine, the
//! clock, the faults and quotas, and the wake-ups between its tasks.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::ServerConfig;
use crate::faults::Faults;
use crate::ledger::decide::MAX_AMOUNT_MINOR;
use crate::quota;
use crate::store::contract::Backend;
use crate::store::{self, Instance, SharedFixtures, SharedStore};
use sendonce_server::clock::Clock;
use sendonce_server::store::DbError;
use sendonce_server::Engine;

/// Shared state of one server instance.
pub struct AppState {
    /// Configuration it was started with.
    pub config: ServerConfig,
    /// The same backend as the test API and the bench endpoints see it.
    pub fixtures: SharedFixtures,
    /// The one clock (shared with the store, which publishes it for expiry).
    pub clock: Arc<Clock>,
    /// Injected faults (shared with the engine's store, whose request commits they can fail).
    pub faults: Arc<Faults>,
    /// Who this server process is: key locks it holds carry its id, and lock ages are
    /// measured from its start, never from the wall clock.
    pub instance: Instance,
    /// Per-user request and key quotas.
    pub quotas: quota::Quotas,
    /// Largest transfer amount accepted now (the test API can lower it).
    max_amount_minor: AtomicI64,
    /// Wakes the relay (a transfer committed, a replay was requested).
    pub relay_wake: Notify,
    /// Wakes the reaper (the clock moved).
    pub reaper_wake: Notify,
    /// The contract's engine over the same backend: runs each transfer request
    /// ([`crate::transfer::execute`]) and keeps the newest claim expiry goes by.
    pub engine: Engine<Backend>,
}

/// Handle to the shared state.
pub type App = Arc<AppState>;

impl AppState {
    /// Opens the database and builds the state (no background tasks yet).
    pub async fn open(config: ServerConfig) -> Result<App, ServerError> {
        let instance = Instance::new();
        let (opened, clock) = match config.simulated_start_ms {
            Some(start) => (
                store::open_inline(&config.db, instance.clone())?,
                Arc::new(Clock::simulated(start)),
            ),
            None => {
                let clock = Arc::new(Clock::default());
                let opened = store::open(
                    &config.db,
                    config.db_pool,
                    config.db_timeouts,
                    instance.clone(),
                    clock.clone(),
                )
                .await?;
                (opened, clock)
            }
        };
        let faults = Arc::new(Faults::new(config.gateway_delay));
        let fail_commit = {
            let faults = faults.clone();
            move || faults.fail_commit()
        };
        let backend = Backend::new(
            opened.store.clone(),
            instance.clone(),
            clock.clone(),
            fail_commit,
        );
        let engine = Engine::new(backend)
            .clock(clock.clone())
            .key_window(config.key_window);
        Ok(Arc::new(Self {
            faults,
            quotas: quota::Quotas::new(config.quotas),
            instance,
            max_amount_minor: AtomicI64::new(MAX_AMOUNT_MINOR),
            config,
            fixtures: opened.fixtures,
            clock,
            relay_wake: Notify::new(),
            reaper_wake: Notify::new(),
            engine,
        }))
    }

    /// The time key expiry goes by: this clock's now, but never later than the newest claim
    /// this process made plus the monotonic time since (`None` before its first claim:
    /// nothing to expire by yet). A wall clock stepped forward expires nothing by itself:
    /// only elapsed time, or claims stamped by the new time, move expiry on. (A process
    /// cannot tell a step from elapsed time once it serves claims at the stepped time; on
    /// PostgreSQL the other live instances' clocks bound it too, see the store's `expire`.)
    /// The storage backend (SQLite or PostgreSQL), chosen by `config.db`: the one the
    /// engine holds.
    pub fn store(&self) -> &SharedStore {
        self.engine.store().store()
    }

    pub fn expiry_now(&self) -> Option<i64> {
        self.engine.expiry_now()
    }

    /// Largest amount a transfer may move now.
    pub fn max_amount_minor(&self) -> i64 {
        self.max_amount_minor.load(Ordering::SeqCst)
    }

    /// Sets the amount limit (test API), clamped to 1..=[`MAX_AMOUNT_MINOR`].
    pub fn set_max_amount_minor(&self, limit: i64) -> i64 {
        let limit = limit.clamp(1, MAX_AMOUNT_MINOR);
        self.max_amount_minor.store(limit, Ordering::SeqCst);
        limit
    }

    /// What the money transaction enforces for a request the gateway did (or did not) authorise.
    pub(crate) fn rules(
        &self,
        authorised: crate::ledger::decide::Authorised,
    ) -> crate::ledger::decide::Rules {
        crate::ledger::decide::Rules {
            fenced: self.fenced(),
            authorised,
            max_balance: self.config.max_balance_minor,
        }
    }

    /// Whether the debit transaction checks the lock (always, unless a test-only build
    /// switched the fence off to show what it prevents).
    pub fn fenced(&self) -> bool {
        #[cfg(feature = "unfenced")]
        if self.config.unfenced {
            return false;
        }
        true
    }

    /// The key window in milliseconds.
    pub fn key_window_ms(&self) -> i64 {
        i64::try_from(self.config.key_window.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The database could not be opened or migrated.
    #[error("database: {0}")]
    Db(#[from] DbError),
    /// The listen address could not be bound.
    #[error("cannot listen: {0}")]
    Io(#[from] std::io::Error),
    /// The configuration is unsafe on this address.
    #[error("{0}")]
    Refused(String),
}
