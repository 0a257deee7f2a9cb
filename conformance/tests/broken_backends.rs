//! The kit must be able to fail: against each mutant (one contract rule broken) it
//! reports FAIL under the check that rule belongs to; against the correct in-memory
//! mock it passes, so each failure is the mutation's doing.

mod mutants;

use clap::Parser;
use mutants::Mutation;
use sendonce_conformance::report::{Report, Status};
use sendonce_conformance::Args;

async fn kit(m: Mutation) -> Report {
    let base = mutants::start(m).await;
    let args = Args::try_parse_from([
        "sendonce-conformance",
        "--base-url",
        &base,
        "--test-api",
        "--soak",
        "40",
    ])
    .unwrap();
    sendonce_conformance::run(&args, &mut std::io::sink())
        .await
        .expect("the kit runs")
}

fn lines(r: &Report) -> String {
    r.checks
        .iter()
        .map(|c| c.line())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the kit against mutant `m` and asserts every id in `caught` FAILs.
async fn caught(m: Mutation, caught: &[&str]) {
    let report = kit(m).await;
    let failed: Vec<_> = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| c.id.as_str())
        .collect();
    eprintln!("{m:?} failed: {}", failed.join(" "));
    for id in caught {
        let c = report.get(id).unwrap_or_else(|| panic!("no check {id}"));
        assert_eq!(
            c.status,
            Status::Fail,
            "{m:?} must fail {id}; report:\n{}",
            lines(&report)
        );
        assert!(
            !c.exchanges.is_empty(),
            "a failed check keeps its exchanges"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_correct_mock_passes() {
    let report = kit(Mutation::None).await;
    assert_eq!(report.count(Status::Fail), 0, "{}", lines(&report));
    assert_eq!(report.count(Status::Skip), 0, "{}", lines(&report));
}

macro_rules! mutant {
    ($name:ident, $m:expr, $($id:literal),+) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            caught($m, &[$($id),+]).await;
        }
    };
}

mutant!(
    ignoring_the_key,
    Mutation::IgnoresKey,
    "replay.identical",
    "concurrency.one-key",
    "chaos.answer-dropped",
    "soak.mixed"
);
mutant!(
    no_in_flight_lock,
    Mutation::NoInFlightLock,
    "replay.in-flight",
    "concurrency.one-key",
    "chaos.delivered-twice"
);
mutant!(
    ignoring_the_body_fingerprint,
    Mutation::IgnoresBody,
    "replay.other-body"
);
mutant!(global_key_scope, Mutation::GlobalKeys, "scope.per-user");
mutant!(
    replay_without_header,
    Mutation::NoReplayHeader,
    "replay.identical",
    "funds.402-stored"
);
mutant!(
    replay_not_byte_identical,
    Mutation::ReplayReserialised,
    "replay.identical"
);
mutant!(
    payment_required_not_stored,
    Mutation::PaymentRequiredNotStored,
    "funds.402-stored"
);
mutant!(
    server_error_on_bad_key,
    Mutation::ServerErrorOnBadKey,
    "key.empty",
    "key.too-long",
    "key.not-visible-ascii",
    "key.malformed-quotes"
);
mutant!(
    validation_stored,
    Mutation::StoresValidation,
    "validation.amount",
    "validation.malformed-json",
    "validation.unknown-recipient"
);
mutant!(
    lookup_404_not_final,
    Mutation::LookupNotFinal,
    "lookup.404-final"
);
mutant!(
    lookup_finds_other_users,
    Mutation::LookupAnyUser,
    "lookup.own-only"
);
mutant!(
    errors_not_problem_json,
    Mutation::PlainJsonErrors,
    "problem.shape",
    "key.missing"
);
mutant!(
    no_key_length_limit,
    Mutation::NoKeyLengthLimit,
    "key.too-long"
);
mutant!(
    quoted_key_is_another_key,
    Mutation::QuotesAreLiteral,
    "key.sf-string"
);
