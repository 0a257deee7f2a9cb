//! Each mutant switched on in the model must make the checker fail with the property it breaks.

use sendonce_model::cli::shortest;
use sendonce_model::properties::{ANSWERS_AGREE, LIVENESS, NO_DOUBLE_DEBIT, ONE_INTENT};
use sendonce_model::{Bound, Mutant};

/// The shortest counterexample, printed (run with `--nocapture` to read it); panics if there is none.
fn counterexample(mutant: Mutant, property: &'static str) -> Vec<String> {
    let trace = shortest(Bound::CI, Some(mutant), property).unwrap_or_else(|| {
        panic!("{mutant:?}: the checker found no counterexample to {property:?}")
    });
    println!("{mutant:?} breaks {property:?}:");
    for (i, step) in trace.iter().enumerate() {
        println!("  {:>2}. {step}", i + 1);
    }
    trace
}

#[test]
fn without_the_fence_a_slow_step_debits_after_a_look_up_said_404() {
    let trace = counterexample(Mutant::NoFence, ANSWERS_AGREE);
    let text = trace.join("\n");
    let at = |needle: &str| {
        trace
            .iter()
            .position(|s| s.contains(needle))
            .unwrap_or_else(|| panic!("no step with {needle:?} in\n{text}"))
    };
    // The lease story, in this order: the step loses its lease, the key is given up by the server,
    // a look-up (or a retry) decides, and only then the old step's unfenced commit moves money.
    let lease = at("outlasts its lease");
    let released = at("released");
    let not_found = at("404 transfer_not_found");
    let debit = at("LEDGER DEBIT");
    assert!(
        lease < released && released < not_found && not_found < debit,
        "{text}"
    );
    assert!(trace[debit].contains("commit (fence removed)"), "{text}");
}

#[test]
fn a_new_key_per_retry_debits_twice() {
    let trace = counterexample(Mutant::NewKeyPerRetry, NO_DOUBLE_DEBIT);
    let debits = trace.iter().filter(|s| s.contains("LEDGER DEBIT")).count();
    assert_eq!(debits, 2, "{}", trace.join("\n"));
}

#[test]
fn resend_in_waiting_mints_a_second_intent() {
    let trace = counterexample(Mutant::ResendInWaiting, ONE_INTENT);
    let last = trace.last().expect("a non-empty trace");
    assert!(
        last.contains("taps Send") && last.contains("\"Waiting\"") && last.contains("mints"),
        "{}",
        trace.join("\n")
    );
}

#[test]
fn without_the_reaper_a_server_crash_leaves_a_transfer_unfinished() {
    let trace = counterexample(Mutant::NoReaper, LIVENESS);
    let text = trace.join("\n");
    assert!(text.contains("server process killed"), "{text}");
    assert!(
        trace
            .last()
            .is_some_and(|s| s.contains("goes round without end")),
        "{text}"
    );
}
