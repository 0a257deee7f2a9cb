//! Nothing stays `Sending` (issue 13 point 6): a failed outcome write or a panicking attempt never
//! leaves a transfer on the wire with no next time until the next open.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::scripted::{base_config, created, req, serve, wait, Answer, Script, Shared, JSON, OK};
use common::tmpfs::SmallDisk;
use common::{logs, scripted::until};
use sendonce::transport::{
    BoxFuture, HttpRequest, HttpResponse, HttpTransport, Method, Transport, TransportError,
};
use sendonce::{Sdk, TransferState};
use tokio::sync::Semaphore;

/// A scripted server whose every request waits at a gate the test opens.
async fn gated(answers: Vec<Answer>) -> (Shared, Arc<Semaphore>, String) {
    let gate = Arc::new(Semaphore::new(0));
    let script: Shared = Arc::new(Mutex::new(Script {
        answers,
        gate: Some(gate.clone()),
        ..Default::default()
    }));
    let url = serve(script.clone()).await;
    (script, gate, url)
}

/// The disk fills while the request is out; the server's 201 then cannot be written. Once space is
/// back the transfer ends Succeeded in the same SDK instance.
#[tokio::test]
async fn a_full_disk_when_the_answer_arrives_does_not_leave_the_transfer_sending() {
    logs::capture();
    let Some(disk) = SmallDisk::mount("1m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    };
    let (script, gate, url) = gated(vec![created()]).await;
    let db = disk.path.join("device.db");
    let sdk = Sdk::open(base_config(&url, &db).build().unwrap()).unwrap();
    let t = sdk.send_transfer(req()).await.unwrap();
    until("the request is held by the server", || {
        script.lock().unwrap().arrivals.len() == 1
    })
    .await;
    let filler = disk.fill();
    gate.add_permits(1);
    until("the SDK reports it could not write the answer", || {
        logs::logged(&["could not be recorded", &t.local_id])
    })
    .await;
    std::fs::remove_file(&filler).unwrap();
    gate.add_permits(100);
    let done = wait(&sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded, "{done:?}");
    let seen = script.lock().unwrap().arrivals.clone();
    assert!(seen.iter().all(|a| a.key == t.idempotency_key));
}

/// The disk stays full past every write retry: the transfer is handed back to the sender, which sends
/// it again (same key) once there is space, still without reopening.
#[tokio::test]
async fn a_disk_full_past_every_write_retry_is_recovered_without_reopening() {
    logs::capture();
    let Some(disk) = SmallDisk::mount("1m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    };
    let (script, gate, url) = gated(vec![created()]).await;
    let db = disk.path.join("device.db");
    let sdk = Sdk::open(base_config(&url, &db).build().unwrap()).unwrap();
    let t = sdk.send_transfer(req()).await.unwrap();
    until("the request is held by the server", || {
        script.lock().unwrap().arrivals.len() == 1
    })
    .await;
    let filler = disk.fill();
    gate.add_permits(1);
    until("the SDK gives up writing the answer", || {
        logs::logged(&["outcome not written", &t.local_id])
    })
    .await;
    assert_eq!(
        sdk.transfer(&t.local_id).unwrap().state,
        TransferState::Sending
    );
    std::fs::remove_file(&filler).unwrap();
    gate.add_permits(100);
    let done = wait(&sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded, "{done:?}");
    let seen = script.lock().unwrap().arrivals.clone();
    assert_eq!(seen.len(), 2, "sent again once, with the same key");
    assert!(seen.iter().all(|a| a.key == t.idempotency_key));
}

/// A transport that panics inside `send` for POSTs (`panics` of them, or all) and passes the rest to HTTP.
struct Panicky {
    http: HttpTransport,
    panics: usize,
    seen: AtomicUsize,
}

impl Transport for Panicky {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        if request.method == Method::Post && self.seen.fetch_add(1, Ordering::SeqCst) < self.panics
        {
            panic!("test transport panics inside send");
        }
        self.http.send(request)
    }
}

fn panicky(panics: usize) -> Arc<Panicky> {
    Arc::new(Panicky {
        http: HttpTransport::new(Duration::from_secs(2), Duration::from_secs(2)).unwrap(),
        panics,
        seen: AtomicUsize::new(0),
    })
}

#[tokio::test]
async fn an_attempt_that_panics_is_retried_with_the_same_key() {
    let script: Shared = Arc::new(Mutex::new(Script {
        answers: vec![created()],
        ..Default::default()
    }));
    let url = serve(script.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let transport = panicky(1);
    let config = base_config(&url, &dir.path().join("d.db")).build().unwrap();
    let sdk = Sdk::open_with_transport(config, transport.clone()).unwrap();
    let t = sdk.send_transfer(req()).await.unwrap();
    let done = wait(&sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded, "{done:?}");
    assert_eq!(
        done.attempts, 2,
        "the panicked attempt counts; one more was sent"
    );
    assert!(transport.seen.load(Ordering::SeqCst) >= 2);
    let seen = script.lock().unwrap().arrivals.clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].key, t.idempotency_key);
}

#[tokio::test]
async fn resolve_works_while_every_attempt_panics() {
    let script: Shared = Arc::new(Mutex::new(Script {
        lookup: Some(Answer(200, vec![JSON, ("idempotent-replayed", "true")], OK)),
        ..Default::default()
    }));
    let url = serve(script.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = base_config(&url, &dir.path().join("d.db"))
        .request_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let transport = panicky(usize::MAX);
    let sdk = Sdk::open_with_transport(config, transport.clone()).unwrap();
    let t = sdk.send_transfer(req()).await.unwrap();
    until("an attempt panicked", || {
        transport.seen.load(Ordering::SeqCst) >= 1
    })
    .await;
    let resolved = sdk.resolve(&t.local_id).await.unwrap();
    assert_eq!(resolved.state, TransferState::Succeeded, "{resolved:?}");
    assert_eq!(resolved.server_transfer_id.as_deref(), Some("t_1"));
    assert!(
        script.lock().unwrap().arrivals.is_empty(),
        "no POST ever left"
    );
}
