//! The truth rules under a second contract (a bank's API): only the bank's own answers end an
//! operation; a captive portal's 200, a proxy's HTML 404 or 400 on the look-up, a 201 naming another
//! key and a 307 to another origin are "unknown" there too. A contract that could not tell them apart
//! is refused when the SDK is configured.

mod common;

use common::bank::{bank, contract, error, executed, order, settled, Reply, ERROR, HTML, JSON};
use sendonce::{Locator, RefusalCode, RejectionReason, SdkConfig, SdkError, TransferState};

#[tokio::test]
async fn a_2xx_that_does_not_name_this_key_is_not_a_success() {
    let rig = bank(vec![
        // A captive portal's login page.
        Reply(
            200,
            vec![HTML],
            "<html><body>Sign in to Station Wi-Fi</body></html>",
        ),
        // The bank's own shape, but another request's key (a cache, a mixed-up connection).
        Reply(
            201,
            vec![
                JSON,
                ("x-request-key", "someone-elses-key"),
                ("x-operation-id", "po_9"),
            ],
            r#"{"status":"EXECUTED"}"#,
        ),
        // This key, but no operation id.
        Reply(
            201,
            vec![JSON, ("x-request-key", "{key}")],
            r#"{"status":"EXECUTED"}"#,
        ),
        // The key in the body, where this contract does not look.
        Reply(
            201,
            vec![JSON],
            r#"{"idempotency_key":"{key}","transfer_id":"t_1"}"#,
        ),
        executed(),
    ])
    .await;
    let t = rig.sdk.send_operation(order("12.50")).await.unwrap();
    let t = settled(&rig.sdk, &t.local_id).await;
    assert_eq!(t.state, TransferState::Succeeded, "{t:?}");
    assert_eq!(t.attempts, 5, "every 2xx not naming this key is retried");
    assert_eq!(t.server_transfer_id.as_deref(), Some("po_1"));
    let seen = rig.arrivals();
    assert!(seen
        .iter()
        .all(|a| a.key == t.idempotency_key && a.body == seen[0].body));
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_never_followed_and_never_an_answer() {
    let rig = bank(vec![
        Reply(
            307,
            vec![("location", "http://evil.example/api/v2/payment-orders")],
            "",
        ),
        executed(),
    ])
    .await;
    let t = rig.sdk.send_operation(order("1.00")).await.unwrap();
    let t = settled(&rig.sdk, &t.local_id).await;
    assert_eq!(t.state, TransferState::Succeeded);
    assert_eq!(t.attempts, 2);
    assert_eq!(
        rig.arrivals().len(),
        2,
        "both attempts reached the bank itself"
    );
}

#[tokio::test]
async fn a_4xx_that_is_not_the_banks_own_error_is_retried() {
    let answers = [
        Reply(
            400,
            vec![HTML],
            "<html><h1>400 Bad Request</h1>nginx</html>",
        ),
        Reply(404, vec![HTML], "<html><h1>404 Not Found</h1></html>"),
        // server-mock's problem+json is not this bank's error format.
        Reply(
            402,
            vec![("content-type", "application/problem+json")],
            r#"{"code":"insufficient_funds"}"#,
        ),
        // The bank's media type without a code where the bank puts it.
        Reply(422, vec![ERROR], r#"{"code":"FUNDS_INSUFFICIENT"}"#),
        // The bank's error with a code this contract does not call definitive.
        Reply(400, vec![ERROR], r#"{"error":{"code":"SOMETHING_NEW"}}"#),
        Reply(403, vec![HTML], "<html>Blocked by policy</html>"),
    ];
    for answer in answers {
        let rig = bank(vec![answer.clone(), executed()]).await;
        let t = rig.sdk.send_operation(order("2.00")).await.unwrap();
        let t = settled(&rig.sdk, &t.local_id).await;
        assert_eq!(t.state, TransferState::Succeeded, "{answer:?}: {t:?}");
        assert_eq!(t.attempts, 2, "{answer:?}");
    }
}

#[tokio::test]
async fn the_banks_own_codes_are_mapped_to_typed_reasons() {
    for (body, reason) in [
        (
            r#"{"error":{"code":"FUNDS_INSUFFICIENT","message":"balance too low"}}"#,
            RejectionReason::InsufficientFunds,
        ),
        (
            r#"{"error":{"code":"ACCOUNT_UNKNOWN","message":"no such IBAN"}}"#,
            RejectionReason::RecipientNotFound,
        ),
        (
            r#"{"error":{"code":"LIMIT_EXCEEDED","message":"daily limit"}}"#,
            RejectionReason::Other("LIMIT_EXCEEDED".into()),
        ),
    ] {
        let rig = bank(vec![error(422, body)]).await;
        let t = rig.sdk.send_operation(order("3.00")).await.unwrap();
        let t = settled(&rig.sdk, &t.local_id).await;
        assert_eq!(t.state, TransferState::Rejected, "{body}");
        let rejection = t.rejection.unwrap();
        assert_eq!(rejection.reason, reason);
        assert_eq!(rejection.http_status, 422);
        // The reason survives a reopen (persisted, not recomputed).
        rig.sdk.close();
        drop(rig.sdk);
        let sdk =
            sendonce::Sdk::open(common::bank::config(&rig.url, &rig.db).build().unwrap()).unwrap();
        assert_eq!(
            sdk.transfer(&t.local_id).unwrap().rejection.unwrap().reason,
            reason
        );
    }
}

#[tokio::test]
async fn key_reuse_fails_at_once_and_key_in_use_waits() {
    let rig = bank(vec![
        Reply(
            409,
            vec![ERROR, ("retry-after", "0")],
            r#"{"error":{"code":"REQUEST_IN_PROGRESS"}}"#,
        ),
        error(
            422,
            r#"{"error":{"code":"REQUEST_KEY_CONFLICT","message":"other body"}}"#,
        ),
    ])
    .await;
    let t = rig.sdk.send_operation(order("4.00")).await.unwrap();
    let t = settled(&rig.sdk, &t.local_id).await;
    assert_eq!(t.state, TransferState::Failed);
    assert_eq!(t.attempts, 2);
    assert_eq!(t.rejection.unwrap().reason, RejectionReason::KeyReused);
}

/// The bank's own 503: the server was reached, so the SDK may give up sending and look the order up.
fn unavailable() -> Reply {
    error(
        503,
        r#"{"error":{"code":"UNAVAILABLE","message":"try later"}}"#,
    )
}

#[tokio::test]
async fn only_the_banks_own_not_found_ends_a_look_up() {
    let rig = common::bank::bank_with(vec![unavailable()], |c| {
        c.give_up_after(std::time::Duration::from_millis(10))
    })
    .await;
    rig.set_lookups(vec![
        Reply(404, vec![HTML], "<html><h1>404 Not Found</h1></html>"),
        Reply(400, vec![HTML], "<html>400 Bad Request</html>"),
        // server-mock's not-found is not this bank's.
        Reply(
            404,
            vec![("content-type", "application/problem+json")],
            r#"{"code":"transfer_not_found"}"#,
        ),
    ]);
    let t = rig.sdk.send_operation(order("5.00")).await.unwrap();
    let t = settled(&rig.sdk, &t.local_id).await;
    assert_eq!(t.state, TransferState::NeedsAttention);
    common::scripted::until("five look-ups", || {
        rig.script.lock().unwrap().lookup_paths.len() >= 5
    })
    .await;
    let now = rig.sdk.resolve(&t.local_id).await.unwrap();
    assert_eq!(now.state, TransferState::NeedsAttention, "{now:?}");
    {
        let script = rig.script.lock().unwrap();
        let expected = format!("/api/v2/payment-orders/by-key/{}", t.idempotency_key);
        assert!(
            script.lookup_paths.iter().all(|p| *p == expected),
            "{:?}",
            script.lookup_paths
        );
    }
    // The bank's own not-found ends it: never executed, nothing moved.
    rig.set_lookups(vec![error(404, r#"{"error":{"code":"ORDER_NOT_FOUND"}}"#)]);
    let end = rig.sdk.resolve(&t.local_id).await.unwrap();
    assert_eq!(end.state, TransferState::Failed);
    assert_eq!(end.rejection.unwrap().reason, RejectionReason::NotExecuted);
}

#[tokio::test]
async fn a_look_up_finds_the_order_by_its_key_header() {
    let rig = common::bank::bank_with(vec![unavailable()], |c| {
        c.give_up_after(std::time::Duration::from_millis(10))
    })
    .await;
    rig.set_lookups(vec![
        // The bank's shape, another key.
        Reply(
            200,
            vec![JSON, ("x-request-key", "other"), ("x-operation-id", "po_9")],
            "{}",
        ),
        Reply(200, vec![HTML], "<html>portal</html>"),
        executed(),
    ]);
    let t = rig.sdk.send_operation(order("6.00")).await.unwrap();
    let id = t.local_id.clone();
    common::scripted::until("succeeded by look-up", || {
        rig.sdk.transfer(&id).unwrap().state == TransferState::Succeeded
    })
    .await;
    let end = rig.sdk.transfer(&id).unwrap();
    assert_eq!(end.server_transfer_id.as_deref(), Some("po_1"));
    assert!(end.replayed);
    assert_eq!(
        rig.script.lock().unwrap().lookup_paths.len(),
        3,
        "the first two answers ended nothing"
    );
}

fn refused(c: sendonce::ResponseContract) -> String {
    match SdkConfig::builder("https://bank.example", "/nonexistent/x.db")
        .contract(c)
        .build()
    {
        Err(SdkError::InvalidConfig(why)) => why,
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

#[test]
fn a_contract_that_cannot_tell_the_server_from_an_intermediary_is_refused() {
    let mut c = contract();
    c.key_echo = None;
    assert!(refused(c).contains("key_echo"));
    for media in ["text/html", "application/json", "", "*/*", "text/plain"] {
        let mut c = contract();
        c.problem.content_type = media.into();
        assert!(refused(c).contains("not specific"), "{media}");
    }
    let mut c = contract();
    c.lookup.not_found_codes.clear();
    assert!(refused(c).contains("not-found"));
    let mut c = contract();
    c.lookup.path = "/api/v2/payment-orders/latest".into();
    assert!(refused(c).contains("{key}"));
    let mut c = contract();
    c.lookup.path = "//evil.example/{key}".into();
    refused(c);
    let mut c = contract();
    c.key_in_use.push("FUNDS_INSUFFICIENT".into());
    assert!(refused(c).contains("both"));
    let mut c = contract();
    c.refusals
        .push(RefusalCode::new("", RejectionReason::InvalidRequest));
    assert!(refused(c).contains("empty"));
    let mut c = contract();
    c.key_echo = Some(Locator::Body("".into()));
    refused(c);
    // The bank's own contract and the default are fine.
    SdkConfig::builder("https://bank.example", "/nonexistent/x.db")
        .contract(contract())
        .build()
        .unwrap();
    SdkConfig::builder("https://bank.example", "/nonexistent/x.db")
        .build()
        .unwrap();
}
