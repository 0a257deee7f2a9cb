//! The user's taps on one phone: Send (once or twice at once), Send again after the app
//! restarted, "check status", and (on the bank) passing a challenge in the banking app.

use sendonce::{Composer, Result, Transfer, TransferRequest, TransferState};

use super::{Device, Intent};
use crate::api::Api;
use crate::bank;

/// Send on a confirm screen: the transfer itself (server-mock), or the bank's payment order for it.
async fn send(
    api: Api,
    user: &str,
    composer: &Composer,
    request: &TransferRequest,
) -> Result<Transfer> {
    match api {
        Api::ServerMock => composer.confirm(request.clone()).await,
        Api::Bank => {
            composer
                .confirm_operation(bank::operation(user, request))
                .await
        }
    }
}

impl Device {
    /// After a restart the confirm screen is re-attached to its transfer (`composer_for`) and Send is tapped
    /// again: it must return the same transfer unless that one already ended in a definitive no.
    pub(super) async fn tap_again_after_restart(
        &mut self,
        local_id: &str,
        request: TransferRequest,
    ) {
        let note = request.note.clone().unwrap_or_default();
        let Some(sdk) = self.sdk.as_ref() else { return };
        self.retaps_after_restart += 1;
        let again = match sdk.composer_for(local_id) {
            Ok(composer) => send(self.plan.api, &self.user_id, &composer, &request).await,
            Err(e) => Err(e),
        };
        match again {
            Ok(t) if t.local_id == local_id => {}
            Ok(t) => {
                let ended = sdk.transfer(local_id).is_ok_and(|f| {
                    matches!(f.state, TransferState::Rejected | TransferState::Failed)
                });
                if ended {
                    self.intents.push(Intent {
                        note,
                        local_id: t.local_id,
                    });
                } else {
                    self.tap_anomalies.push(format!(
                        "{note}: Send tapped again after a restart minted {} while {local_id} was unfinished",
                        t.local_id
                    ));
                }
            }
            Err(e) => self.tap_anomalies.push(format!(
                "{note}: Send tapped again after a restart failed: {e}"
            )),
        }
    }

    /// The user taps "check status" on a transfer that is not final yet (the SDK must not end it early).
    pub(super) async fn check_status(&mut self, local_id: &str) {
        let Some(sdk) = self.sdk.as_ref() else { return };
        if sdk.transfer(local_id).is_ok_and(|t| !t.state.is_final()) {
            let _ = sdk.resolve(local_id).await;
            self.impatient_checks += 1;
        }
    }

    /// One confirm screen: Send tapped once, or twice at once (both must return the same transfer).
    /// Returns the local id of the confirmed transfer.
    pub(super) async fn confirm(
        &mut self,
        request: TransferRequest,
        double: bool,
    ) -> Option<String> {
        let note = request.note.clone().unwrap_or_default();
        let composer = match self.sdk().and_then(|s| Ok(s.composer()?)) {
            Ok(c) => c,
            Err(e) => {
                self.confirm_errors.push(format!("{note}: composer: {e}"));
                return None;
            }
        };
        let (api, user) = (self.plan.api, self.user_id.clone());
        let (first, second) = if double {
            self.double_taps += 1;
            let (a, b) = tokio::join!(
                send(api, &user, &composer, &request),
                send(api, &user, &composer, &request)
            );
            (a, Some(b))
        } else {
            (send(api, &user, &composer, &request).await, None)
        };
        let first = match first {
            Ok(t) => t,
            Err(e) => {
                self.confirm_errors.push(format!("{note}: {e}"));
                return None;
            }
        };
        self.intents.push(Intent {
            note: note.clone(),
            local_id: first.local_id.clone(),
        });
        match second {
            Some(Ok(t)) if t.local_id != first.local_id => {
                // Legitimate only if the first was already a definitive no (Send is enabled again then).
                let first_now = self.sdk().and_then(|s| Ok(s.transfer(&first.local_id)?));
                let rejected = first_now.is_ok_and(|f| {
                    matches!(f.state, TransferState::Rejected | TransferState::Failed)
                });
                if rejected {
                    self.intents.push(Intent {
                        note,
                        local_id: t.local_id,
                    });
                } else {
                    self.tap_anomalies.push(format!(
                        "{note}: the second tap minted transfer {} while {} was still unfinished",
                        t.local_id, first.local_id
                    ));
                }
            }
            Some(Err(e)) => self
                .tap_anomalies
                .push(format!("{note}: the second tap failed: {e}")),
            _ => {}
        }
        Some(first.local_id)
    }

    /// The user opens the banking app and passes the challenge of every parked payment order.
    pub(super) async fn pass_challenges(&mut self) {
        let Some(parked) = self.sdk.as_ref().and_then(|s| s.transfers().ok()) else {
            return;
        };
        for t in parked
            .iter()
            .filter(|t| t.state == TransferState::RequiresAction)
        {
            self.pass_challenge(t).await;
        }
    }

    /// The user passes `t`'s challenge in the banking app; the app tells the SDK, which sends the
    /// same key and bytes again. A challenge the bank no longer knows, or a closed SDK, is left
    /// for the next visit.
    pub(super) async fn pass_challenge(&self, t: &Transfer) {
        let Some(challenge) = t
            .required_action
            .as_ref()
            .and_then(|a| a.challenge_id.as_deref())
        else {
            return;
        };
        if let Err(e) = bank::approve(&self.plan.server, &self.token, challenge).await {
            tracing::warn!(phone = self.index, "{e:#}");
            return;
        }
        if let Some(sdk) = self.sdk.as_ref() {
            if let Err(e) = sdk.action_completed(&t.local_id) {
                tracing::warn!(
                    phone = self.index,
                    local_id = t.local_id,
                    "action_completed: {e}"
                );
            }
        }
    }
}
