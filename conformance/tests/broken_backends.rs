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
        "24",
        "--late-timeout-ms",
        "300",
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

/// Which checks each mutant must fail (the README's table).
const CAUGHT: &[(Mutation, &[&str])] = &[
    (
        Mutation::IgnoresKey,
        &[
            "replay.identical",
            "concurrency.one-key",
            "chaos.answer-dropped",
            "soak.mixed",
        ],
    ),
    (
        Mutation::NoInFlightLock,
        &[
            "replay.in-flight",
            "concurrency.one-key",
            "chaos.delivered-twice",
        ],
    ),
    (Mutation::IgnoresBody, &["replay.other-body"]),
    (Mutation::GlobalKeys, &["scope.per-user"]),
    (
        Mutation::NoReplayHeader,
        &["replay.identical", "funds.402-stored"],
    ),
    (Mutation::ReplayReserialised, &["replay.identical"]),
    (Mutation::PaymentRequiredNotStored, &["funds.402-stored"]),
    (
        Mutation::ServerErrorOnBadKey,
        &[
            "key.empty",
            "key.too-long",
            "key.not-visible-ascii",
            "key.malformed-quotes",
        ],
    ),
    (
        Mutation::StoresValidation,
        &[
            "validation.amount",
            "validation.malformed-json",
            "validation.unknown-recipient",
        ],
    ),
    (Mutation::LookupNotFinal, &["lookup.404-final"]),
    (Mutation::LookupAnyUser, &["lookup.own-only"]),
    (Mutation::PlainJsonErrors, &["problem.shape", "key.missing"]),
    (Mutation::NoKeyLengthLimit, &["key.too-long"]),
    (Mutation::QuotesAreLiteral, &["key.sf-string"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_correct_mock_passes() {
    let report = kit(Mutation::None).await;
    assert_eq!(report.count(Status::Fail), 0, "{}", lines(&report));
    assert_eq!(report.count(Status::Skip), 0, "{}", lines(&report));
}

/// All mutants at once: the runs mostly wait (slow gateway, held answers), so they
/// share the time instead of queueing behind the test harness's two threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mutant_fails_its_checks() {
    let mut set = tokio::task::JoinSet::new();
    for &(m, ids) in CAUGHT {
        set.spawn(async move { (m, ids, kit(m).await) });
    }
    let mut missed = Vec::new();
    while let Some(done) = set.join_next().await {
        let (m, ids, report) = done.unwrap();
        let failed: Vec<_> = report
            .checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.id.as_str())
            .collect();
        eprintln!("{m:?} failed: {}", failed.join(" "));
        for id in ids {
            let c = report.get(id).unwrap_or_else(|| panic!("no check {id}"));
            if c.status != Status::Fail {
                missed.push(format!("{m:?} must fail {id}, got: {}", c.line()));
            } else {
                assert!(
                    !c.exchanges.is_empty(),
                    "{m:?} {id}: a failed check keeps its exchanges"
                );
            }
        }
    }
    assert!(
        missed.is_empty(),
        "mutants not caught:\n{}",
        missed.join("\n")
    );
}
