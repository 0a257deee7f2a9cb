//! The user's web dashboard: a second reader of a transfer's status, next to the phone.
//!
//! It looks a key up once its POST has been on the wire longer than the server's lock
//! timeout: exactly when a server that lost the request's lease (and has no fence) could
//! answer "not found" and then move the money anyway. Its answers go into the wire log, so
//! the checker holds them against the ledger like every other answer (invariant 6).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::api::Api;
use crate::backend::ServerLink;
use crate::tap::{KeyAnswer, SharedWireLog};

/// How often the dashboard looks at the wire.
const POLL: Duration = Duration::from_millis(25);

/// Polls until `stop` fires; returns how many look-ups it made.
pub async fn watch(
    wire: SharedWireLog,
    link: Arc<dyn ServerLink>,
    after: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<u64> {
    let mut asked = std::collections::HashSet::new();
    let mut look_ups = 0;
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(look_ups),
            _ = tokio::time::sleep(POLL) => {}
        }
        let due: Vec<(String, String)> = {
            let log = wire.lock().unwrap_or_else(|p| p.into_inner());
            log.in_flight
                .iter()
                .filter(|(key, (sent, _))| sent.elapsed() > after && !asked.contains(*key))
                .map(|(key, (_, auth))| (key.clone(), auth.clone()))
                .collect()
        };
        for (key, auth) in due {
            asked.insert(key.clone());
            let Ok(response) = link
                .call(
                    reqwest::Method::GET,
                    format!("/v1/transfers?idempotency_key={key}"),
                    vec![("authorization".into(), auth)],
                    Vec::new(),
                )
                .await
            else {
                continue; // a server restart: the dashboard just misses one
            };
            look_ups += 1;
            let mut log = wire.lock().unwrap_or_else(|p| p.into_inner());
            log.answers
                .push(KeyAnswer::new(Api::ServerMock, &key, &response, true));
        }
    }
}
