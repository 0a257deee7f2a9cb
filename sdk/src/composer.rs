//! The confirm screen's state machine: one composer per screen, one transfer per intent.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::confirm::persist;
use crate::core::Core;
use crate::error::{Result, SdkError};
use crate::model::{
    Rejection, RejectionReason, RequiredAction, Transfer, TransferRequest, TransferState,
};
use crate::operation::Operation;

/// What the confirm screen shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComposerState {
    /// The user is filling in the form.
    Editing,
    /// Confirmed; the first attempt is on its way.
    Submitting {
        /// The persisted transfer, once written.
        transfer: Option<Transfer>,
    },
    /// The outcome is not known yet; the SDK keeps trying with the same key.
    Waiting {
        /// The transfer (attempts, next attempt time, last error).
        transfer: Transfer,
        /// True when the SDK waits for a fresh access token rather than the network.
        needs_auth: bool,
    },
    /// The money moved: show the receipt.
    Done {
        /// The succeeded transfer (server transfer id, amounts).
        receipt: Transfer,
    },
    /// A definitive no: nothing moved.
    Rejected {
        /// Why.
        reason: Rejection,
        /// The transfer.
        transfer: Transfer,
    },
    /// The SDK stopped sending after the give-up horizon; the outcome is being resolved by look-up.
    NeedsAttention {
        /// The transfer.
        transfer: Transfer,
    },
    /// The server wants the customer to complete a step (open `action.url`, answer the challenge);
    /// then the app calls `action_completed`. Send stays disabled: a second tap returns this operation.
    RequiresAction {
        /// The parked operation.
        transfer: Transfer,
        /// What the customer must do.
        action: RequiredAction,
    },
}

impl ComposerState {
    /// The state a transfer puts the screen in.
    pub fn of(t: &Transfer) -> Self {
        match t.state {
            TransferState::Pending => Self::Submitting {
                transfer: Some(t.clone()),
            },
            TransferState::Sending if t.attempts <= 1 => Self::Submitting {
                transfer: Some(t.clone()),
            },
            TransferState::Sending | TransferState::Retrying => Self::Waiting {
                transfer: t.clone(),
                needs_auth: false,
            },
            TransferState::AuthRequired => Self::Waiting {
                transfer: t.clone(),
                needs_auth: true,
            },
            TransferState::Succeeded => Self::Done { receipt: t.clone() },
            TransferState::Rejected | TransferState::Failed => Self::Rejected {
                reason: t.rejection.clone().unwrap_or(Rejection {
                    reason: RejectionReason::Other("unknown".into()),
                    code: "unknown".into(),
                    detail: String::new(),
                    http_status: 0,
                }),
                transfer: t.clone(),
            },
            TransferState::NeedsAttention => Self::NeedsAttention {
                transfer: t.clone(),
            },
            TransferState::RequiresAction => Self::RequiresAction {
                transfer: t.clone(),
                action: t.required_action.clone().unwrap_or(RequiredAction {
                    code: "unknown".into(),
                    url: None,
                    challenge_id: None,
                }),
            },
        }
    }

    /// Whether the Send button is enabled: only before the first confirm, or after a definitive no.
    ///
    /// After `Done` it stays off until `new_intent()`: a late second tap on a fast success must not pay twice.
    pub fn send_enabled(&self) -> bool {
        matches!(self, Self::Editing | Self::Rejected { .. })
    }
}

/// Told of every state change of one composer.
pub trait ComposerListener: Send + Sync {
    /// The screen should show `state`.
    fn on_state_changed(&self, state: ComposerState);
}

/// One confirm screen's state machine.
pub struct Composer {
    core: Arc<Core>,
    shared: Arc<Shared>,
    // Serialises confirms: two taps racing each other still mint one key.
    confirm_lock: tokio::sync::Mutex<()>,
    follower: JoinHandle<()>,
}

struct Shared {
    current: Mutex<Option<String>>,
    state: watch::Sender<ComposerState>,
    listener: Mutex<Option<Arc<dyn ComposerListener>>>,
}

impl Shared {
    fn current(&self) -> Option<String> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Re-reads the followed transfer; read and publish happen under one lock so a stale read never wins.
    fn refresh(&self, core: &Core) -> Result<()> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = current.as_deref() {
            if let Some(t) = core.store.get(id)? {
                self.state.send_replace(ComposerState::of(&t));
            }
        }
        Ok(())
    }

    fn set(&self, id: Option<String>, state: ComposerState) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        *current = id;
        self.state.send_replace(state);
    }
}

impl Composer {
    pub(crate) fn new(core: Arc<Core>, handle: Handle, attached: Option<Transfer>) -> Self {
        let initial = attached
            .as_ref()
            .map(ComposerState::of)
            .unwrap_or(ComposerState::Editing);
        let shared = Arc::new(Shared {
            current: Mutex::new(attached.map(|t| t.local_id)),
            state: watch::channel(initial).0,
            listener: Mutex::new(None),
        });
        let follower = handle.spawn(follow(core.clone(), shared.clone()));
        Self {
            core,
            shared,
            confirm_lock: tokio::sync::Mutex::new(()),
            follower,
        }
    }

    /// The user tapped Send: the first call mints the key and persists the transfer; every later call
    /// returns that same transfer until a definitive no (or `new_intent`).
    pub async fn confirm(&self, request: TransferRequest) -> Result<Transfer> {
        self.confirm_operation(Operation::transfer(request)).await
    }

    /// The user tapped Send on an operation of the app's own API: as [`Composer::confirm`].
    pub async fn confirm_operation(&self, operation: Operation) -> Result<Transfer> {
        let _one_at_a_time = self.confirm_lock.lock().await;
        if let Some(id) = self.shared.current() {
            let existing = self
                .core
                .store
                .get(&id)?
                .ok_or_else(|| SdkError::NotFound(id.clone()))?;
            if !ComposerState::of(&existing).send_enabled() {
                return Ok(existing);
            }
        }
        let previous = self.shared.state.borrow().clone();
        self.shared
            .set(None, ComposerState::Submitting { transfer: None });
        match persist(&self.core, operation).await {
            Ok(transfer) => {
                self.shared.set(
                    Some(transfer.local_id.clone()),
                    ComposerState::of(&transfer),
                );
                self.shared.refresh(&self.core)?;
                Ok(transfer)
            }
            Err(e) => {
                self.shared.set(None, previous);
                Err(e)
            }
        }
    }

    /// What the screen shows now.
    pub fn state(&self) -> ComposerState {
        self.shared.state.borrow().clone()
    }

    /// Whether the Send button is enabled.
    pub fn send_enabled(&self) -> bool {
        self.state().send_enabled()
    }

    /// The transfer this screen follows, if confirmed.
    pub fn transfer(&self) -> Result<Option<Transfer>> {
        match self.shared.current() {
            Some(id) => self.core.store.get(&id),
            None => Ok(None),
        }
    }

    /// Starts a new intent (the user chose "send another"); refused unless the current transfer is final.
    ///
    /// Allowed only in Editing, Done and a definitive Rejected/Failed: in every other state (NeedsAttention
    /// included) money may have moved, and a new intent would mint a second key for it.
    pub fn new_intent(&self) -> Result<()> {
        if !matches!(
            self.state(),
            ComposerState::Editing | ComposerState::Done { .. } | ComposerState::Rejected { .. }
        ) {
            return Err(SdkError::TransferUnfinished);
        }
        // The screen's state may lag the store by one event: the persisted state decides.
        if let Some(transfer) = self.transfer()? {
            if !transfer.state.is_final() {
                return Err(SdkError::TransferUnfinished);
            }
        }
        self.shared.set(None, ComposerState::Editing);
        Ok(())
    }

    /// Sets (or clears) the listener told of every state change, in order.
    pub fn set_listener(&self, listener: Option<Arc<dyn ComposerListener>>) {
        *self
            .shared
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = listener;
    }

    /// A receiver of state changes (Rust callers).
    pub fn subscribe(&self) -> watch::Receiver<ComposerState> {
        self.shared.state.subscribe()
    }
}

impl Drop for Composer {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

/// Keeps the state in step with the followed transfer and tells the listener, outside any lock.
async fn follow(core: Arc<Core>, shared: Arc<Shared>) {
    let mut events = core.events.subscribe();
    let mut states = shared.state.subscribe();
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(t) if shared.current().as_deref() == Some(t.local_id.as_str()) => {
                    if let Err(e) = shared.refresh(&core) {
                        tracing::warn!(error = %e, "composer could not read its transfer");
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    let _ = shared.refresh(&core);
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            changed = states.changed() => {
                if changed.is_err() {
                    return;
                }
                let state = states.borrow_and_update().clone();
                let listener = shared.listener.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(listener) = listener {
                    if catch_unwind(AssertUnwindSafe(|| listener.on_state_changed(state))).is_err() {
                        tracing::warn!("a composer listener panicked; ignored");
                    }
                }
            }
        }
    }
}
