//! Property: under the bank's contract, any sequence of intermediary garbage and non-definitive bank
//! answers ends nothing; only the bank's own definitive answer (success naming this key, a refusal
//! code, an action-required code) decides, and every attempt carries the same key and bytes.

mod common;

use common::bank::{bank, error, executed, order, sca, settled, Reply, ERROR, HTML, JSON};
use proptest::prelude::*;
use sendonce::TransferState;

/// Answers that must never end an operation under the bank's contract.
fn garbage() -> Vec<Reply> {
    vec![
        Reply(200, vec![HTML], "<html>Sign in to Station Wi-Fi</html>"),
        Reply(204, vec![], ""),
        Reply(
            201,
            vec![
                JSON,
                ("x-request-key", "another-key"),
                ("x-operation-id", "po_9"),
            ],
            "{}",
        ),
        Reply(201, vec![JSON, ("x-request-key", "{key}")], "{}"),
        Reply(
            201,
            vec![JSON],
            r#"{"idempotency_key":"{key}","transfer_id":"t_1"}"#,
        ),
        Reply(307, vec![("location", "http://evil.example/")], ""),
        Reply(302, vec![("location", "/login")], ""),
        Reply(404, vec![HTML], "<html>Not Found</html>"),
        Reply(400, vec![HTML], "<html>Bad Request</html>"),
        Reply(403, vec![HTML], "<html>Blocked</html>"),
        Reply(
            402,
            vec![("content-type", "application/problem+json")],
            r#"{"code":"insufficient_funds"}"#,
        ),
        Reply(
            422,
            vec![JSON],
            r#"{"error":{"code":"FUNDS_INSUFFICIENT"}}"#,
        ),
        Reply(400, vec![ERROR], r#"{"error":{"code":"SOMETHING_NEW"}}"#),
        Reply(422, vec![ERROR], r#"{"code":"FUNDS_INSUFFICIENT"}"#),
        Reply(502, vec![HTML], "<html>Bad gateway</html>"),
        error(503, r#"{"error":{"code":"UNAVAILABLE"}}"#),
        Reply(
            409,
            vec![ERROR, ("retry-after", "0")],
            r#"{"error":{"code":"REQUEST_IN_PROGRESS"}}"#,
        ),
        Reply(429, vec![("retry-after", "0")], ""),
        Reply(
            200,
            vec![("content-type", "application/octet-stream")],
            "\u{0}\u{1}garbage",
        ),
    ]
}

/// The bank's definitive answers and the state each one ends in.
fn definitive() -> Vec<(Reply, TransferState)> {
    vec![
        (executed(), TransferState::Succeeded),
        (
            error(422, r#"{"error":{"code":"FUNDS_INSUFFICIENT"}}"#),
            TransferState::Rejected,
        ),
        (
            error(404, r#"{"error":{"code":"ACCOUNT_UNKNOWN"}}"#),
            TransferState::Rejected,
        ),
        (
            error(422, r#"{"error":{"code":"REQUEST_KEY_CONFLICT"}}"#),
            TransferState::Failed,
        ),
        (sca(), TransferState::RequiresAction),
    ]
}

fn cases() -> u32 {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        12
    } else {
        32
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn only_the_banks_own_definitive_answer_ends_an_operation(
        noise in proptest::collection::vec(0usize..19, 0..6),
        end in 0usize..5,
    ) {
        let pool = garbage();
        let (last, expected) = definitive().swap_remove(end);
        let mut answers: Vec<Reply> = noise.iter().map(|&i| pool[i].clone()).collect();
        answers.push(last);
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let rig = bank(answers).await;
            let t = rig.sdk.send_operation(order("1.00")).await.unwrap();
            let end = settled(&rig.sdk, &t.local_id).await;
            assert_eq!(end.state, expected, "noise {noise:?}: {end:?}");
            assert_eq!(end.attempts as usize, noise.len() + 1, "no garbage ended it: {noise:?}");
            let seen = rig.arrivals();
            assert_eq!(seen.len(), noise.len() + 1);
            assert!(seen.iter().all(|a| a.key == t.idempotency_key && a.body == seen[0].body));
            if expected == TransferState::Succeeded {
                assert_eq!(end.server_transfer_id.as_deref(), Some("po_1"));
            }
            rig.sdk.close();
        });
    }
}
