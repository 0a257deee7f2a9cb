//! Invariant 7: only the server's own definitive answers end a transfer; what an intermediary (captive
//! portal, proxy, a redirect followed as GET) says is "unknown", and the SDK retries with the same key.

mod common;

use std::time::Duration;

use common::scripted::{
    arrivals, created, problem, req, rig, rig_with, settle, wait, Answer, Rig, HTML, JSON, OK,
};
use sendonce::TransferState;

#[tokio::test]
async fn a_2xx_without_a_transfer_for_this_key_is_not_a_success() {
    let rig = rig(vec![
        // A captive portal's login page.
        Answer(200, vec![HTML], "<html><body>Sign in to Station Wi-Fi</body></html>"),
        // A proxy's empty 204.
        Answer(204, vec![], ""),
        // Valid JSON, but some other request's transfer (a cache, a redirect to another resource).
        Answer(
            200,
            vec![JSON],
            r#"{"transfer_id":"t_other","status":"completed","idempotency_key":"someone-elses-key"}"#,
        ),
        // JSON without any key at all.
        Answer(201, vec![JSON], r#"{"transfer_id":"t_2","status":"completed"}"#),
        created(),
    ])
    .await;
    let t = settle(&rig).await;
    assert_eq!(t.state, TransferState::Succeeded);
    assert_eq!(
        t.attempts, 5,
        "every 2xx that is not a transfer for this key is retried: {t:?}"
    );
    assert_eq!(t.server_transfer_id.as_deref(), Some("t_1"));
    let seen = arrivals(&rig);
    assert!(
        seen.iter().all(|a| a.key == t.idempotency_key),
        "same key on every retry"
    );
}

#[tokio::test]
async fn a_4xx_that_is_not_the_servers_problem_json_is_retried_not_rejected() {
    let answers = [
        Answer(
            400,
            vec![HTML],
            "<html><h1>400 Bad Request</h1>nginx</html>",
        ),
        Answer(404, vec![HTML], "<html><h1>404 Not Found</h1></html>"),
        Answer(
            413,
            vec![("content-type", "text/plain")],
            "Request Entity Too Large",
        ),
        Answer(415, vec![], ""),
        Answer(
            402,
            vec![HTML],
            "<html>Payment Required: buy more Wi-Fi time</html>",
        ),
        Answer(422, vec![HTML], "<html>Unprocessable</html>"),
        // JSON with a code, but not the server's problem+json.
        Answer(404, vec![JSON], r#"{"code":"invalid_request"}"#),
        // A corporate proxy's block page and a portal's login challenge: not the server refusing the token.
        Answer(403, vec![HTML], "<html>Blocked by policy</html>"),
        Answer(401, vec![("content-type", "text/plain")], "Login required"),
    ];
    for answer in answers {
        let status = answer.0;
        let rig = rig(vec![answer.clone(), created()]).await;
        let t = settle(&rig).await;
        assert_eq!(t.state, TransferState::Succeeded, "{answer:?}: {t:?}");
        assert_eq!(t.attempts, 2, "{answer:?}");
        assert!(t.rejection.is_none(), "status {status}");
    }
}

#[tokio::test]
async fn a_problem_json_4xx_with_a_code_stays_definitive() {
    let rig = rig(vec![problem(
        400,
        r#"{"code":"invalid_request","detail":"amount"}"#,
    )])
    .await;
    let t = settle(&rig).await;
    assert_eq!(t.state, TransferState::Rejected);
    assert_eq!(t.rejection.unwrap().code, "invalid_request");
    assert_eq!(arrivals(&rig).len(), 1);
}

/// A transfer the SDK gave up on (every POST answered 503), resolved through look-ups that answer `lookup`.
async fn given_up(lookup: Answer) -> Rig {
    let rig = rig_with(
        vec![problem(503, r#"{"code":"service_unavailable"}"#)],
        |c| c.give_up_after(Duration::from_millis(300)),
    )
    .await;
    rig.script.lock().unwrap().lookup = Some(lookup);
    rig
}

#[tokio::test]
async fn on_a_look_up_only_the_servers_transfer_not_found_means_not_executed() {
    let not_the_server = [
        Answer(404, vec![HTML], "<html><h1>404 Not Found</h1></html>"),
        // The server's problem+json, but for an unknown route (a server without the look-up).
        problem(404, r#"{"code":"not_found","detail":"no route"}"#),
        // The right code without the server's content type.
        Answer(404, vec![JSON], r#"{"code":"transfer_not_found"}"#),
        Answer(400, vec![HTML], "<html>Bad Request</html>"),
        Answer(405, vec![], ""),
        Answer(410, vec![HTML], "<html>Gone</html>"),
        Answer(500, vec![HTML], "<html>Internal Server Error</html>"),
        Answer(502, vec![HTML], "<html>Bad Gateway</html>"),
        Answer(402, vec![HTML], "<html>Payment Required</html>"),
        Answer(200, vec![HTML], "<html>Sign in to Station Wi-Fi</html>"),
        Answer(
            200,
            vec![JSON],
            r#"{"transfer_id":"t_other","status":"completed","idempotency_key":"someone-elses-key"}"#,
        ),
    ];
    let rig = given_up(not_the_server[0].clone()).await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    let parked = wait(&rig.sdk, &t.local_id).await;
    assert_eq!(parked.state, TransferState::NeedsAttention, "{parked:?}");
    for answer in not_the_server {
        rig.script.lock().unwrap().lookup = Some(answer.clone());
        let after = rig.sdk.resolve(&t.local_id).await.unwrap();
        assert_eq!(
            after.state,
            TransferState::NeedsAttention,
            "{answer:?} must not end the transfer: {after:?}"
        );
        let why = after.last_error.unwrap_or_default();
        assert!(why.contains(&answer.0.to_string()), "{answer:?}: {why}");
    }
    rig.script.lock().unwrap().lookup = Some(problem(
        404,
        r#"{"status":404,"code":"transfer_not_found","detail":"no transfer of yours matches"}"#,
    ));
    let ended = rig.sdk.resolve(&t.local_id).await.unwrap();
    assert_eq!(ended.state, TransferState::Failed, "{ended:?}");
    assert_eq!(ended.rejection.unwrap().code, "not_executed");
}

#[tokio::test]
async fn on_a_look_up_a_transfer_for_this_key_is_a_success() {
    let rig = given_up(Answer(200, vec![HTML], "<html>portal</html>")).await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    assert_eq!(
        wait(&rig.sdk, &t.local_id).await.state,
        TransferState::NeedsAttention
    );
    rig.script.lock().unwrap().lookup = Some(Answer(200, vec![JSON], OK));
    let done = rig.sdk.resolve(&t.local_id).await.unwrap();
    assert_eq!(done.state, TransferState::Succeeded);
    assert_eq!(done.server_transfer_id.as_deref(), Some("t_1"));
}

#[tokio::test]
async fn on_a_look_up_a_stored_rejection_replayed_by_the_server_is_definitive() {
    let stored = Answer(
        402,
        vec![common::scripted::PROBLEM, ("idempotent-replayed", "true")],
        r#"{"code":"insufficient_funds","detail":"balance 10"}"#,
    );
    let rig = given_up(Answer(502, vec![HTML], "<html>Bad Gateway</html>")).await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    assert_eq!(
        wait(&rig.sdk, &t.local_id).await.state,
        TransferState::NeedsAttention
    );
    rig.script.lock().unwrap().lookup = Some(stored);
    let ended = rig.sdk.resolve(&t.local_id).await.unwrap();
    assert_eq!(ended.state, TransferState::Rejected);
    assert_eq!(ended.rejection.unwrap().code, "insufficient_funds");
}
