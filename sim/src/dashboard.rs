//! The user's web dashboard: a second reader of a transfer's status, next to the phone.
//!
//! It looks a key up once its POST has been on the wire longer than the server's lock
//! timeout: exactly when a server that lost the request's lease (and has no fence) could
//! answer "not found" and then move the money anyway. Its answers go into the wire log, so
//! the checker holds them against the ledger like every other answer (invariant 6).

use std::time::Duration;

use anyhow::Result;
use sendonce::transport::HttpResponse;

use crate::tap::{KeyAnswer, SharedWireLog};

/// How often the dashboard looks at the wire.
const POLL: Duration = Duration::from_millis(25);

/// Polls until `stop` fires; returns how many look-ups it made.
pub async fn watch(
    wire: SharedWireLog,
    base_url: String,
    after: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<u64> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
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
            let Ok(r) = http
                .get(format!("{base_url}/v1/transfers?idempotency_key={key}"))
                .header("authorization", auth)
                .send()
                .await
            else {
                continue; // a server restart: the dashboard just misses one
            };
            let status = r.status().as_u16();
            let body = r.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
            let response = HttpResponse {
                status,
                headers: Vec::new(),
                body,
            };
            look_ups += 1;
            let mut log = wire.lock().unwrap_or_else(|p| p.into_inner());
            log.answers.push(KeyAnswer::new(&key, &response, true));
        }
    }
}
