//! The command line: run the checker at a bound, print counts, time and PASS/FAIL with counterexamples.

use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model, Path};

use crate::model::{Action, Bound, Mutant, Protocol, State};
use crate::properties::{describe, drain, DRAIN_LIMIT, LIVENESS};

/// Fair-world steps printed after a liveness counterexample.
const FAIR_STEPS_SHOWN: usize = 16;

/// How one property came out.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Property name.
    pub name: &'static str,
    /// Whether it held (an `always` with no counterexample, a `sometimes` with an example).
    pub passed: bool,
    /// The counterexample (or, for a `sometimes`, the example), step by step.
    pub trace: Option<Vec<String>>,
    /// True for a reachability example rather than an invariant.
    pub example: bool,
}

/// What one run of the checker found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The bound explored.
    pub bound: Bound,
    /// The mutant switched on.
    pub mutant: Option<Mutant>,
    /// States generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique: usize,
    /// Longest path explored.
    pub depth: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Per property, in the model's order.
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// The outcome of the named property.
    pub fn outcome(&self, name: &str) -> &Outcome {
        self.outcomes
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("no property named {name:?}"))
    }

    /// Whether every property held.
    pub fn passed(&self) -> bool {
        // A mutant run stops early, so an example it did not reach is no failure.
        self.outcomes
            .iter()
            .all(|o| o.passed || (o.example && self.mutant.is_some()))
    }

    /// The report as printed by the CLI.
    pub fn render(&self) -> String {
        let mut out = format!(
            "bound: {} ({:?})\nmutant: {}\nstates explored: {}\nunique states: {}\nmax depth: {}\ntime: {:.1} s\n",
            self.bound.name,
            self.bound,
            self.mutant.map_or("none".to_string(), |m| format!("{m:?}")),
            self.states,
            self.unique,
            self.depth,
            self.elapsed.as_secs_f64()
        );
        if self.mutant.is_some() {
            out.push_str("(a mutant run stops at its first failure: \"pass\" = not violated in the states explored)\n");
        }
        for o in &self.outcomes {
            let verdict = match (o.passed, self.mutant) {
                (false, Some(_)) if o.example => "n/a ",
                (false, _) => "FAIL",
                (true, Some(_)) if !o.example => "pass",
                (true, _) => "PASS",
            };
            out.push_str(&format!("{verdict}  {}\n", o.name));
            if let (false, Some(trace)) = (o.passed || o.example, &o.trace) {
                out.push_str("      counterexample:\n");
                for (i, step) in trace.iter().enumerate() {
                    out.push_str(&format!("      {:>2}. {step}\n", i + 1));
                }
            }
        }
        out
    }
}

/// Explores every state of the model within `bound` (BFS) and checks every property.
pub fn check(bound: Bound, mutant: Option<Mutant>) -> Report {
    let model = Protocol::new(bound, mutant);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = Instant::now();
    let mut builder = model.checker().threads(threads);
    if mutant.is_some() {
        // A mutant only has to show its bug; some (resend-in-waiting) double the phones' state space.
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    let checker = builder.spawn_bfs().join();
    let elapsed = started.elapsed();
    let outcomes = model
        .properties()
        .iter()
        .map(|p| {
            let example = p.expectation == Expectation::Sometimes;
            let trace = match checker.discovery(p.name) {
                // The checker keeps the last violation it met, not the first: search again for the shortest.
                Some(_) if !example => shortest(bound, mutant, p.name),
                found => found.map(|path| steps(&model, path)),
            };
            Outcome {
                name: p.name,
                passed: trace.is_some() == example,
                trace,
                example,
            }
        })
        .collect();
    Report {
        bound,
        mutant,
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
        elapsed,
        outcomes,
    }
}

/// The shortest counterexample to one property (BFS, one thread, stopping at the first violation).
pub fn shortest(bound: Bound, mutant: Option<Mutant>, name: &'static str) -> Option<Vec<String>> {
    let model = Protocol {
        only: Some(name),
        ..Protocol::new(bound, mutant)
    };
    let checker = model
        .checker()
        .threads(1)
        .finish_when(HasDiscoveries::AnyOf([name].into()))
        .spawn_bfs()
        .join();
    let path = checker.discovery(name)?;
    let last = path.last_state().clone();
    let mut trace = steps(&model, path);
    if name == LIVENESS {
        // The state is reachable; what fails is the fair world's way out of it: show that too.
        let full = Protocol::new(bound, mutant);
        let (_, _, taken) = drain(&full, &last);
        let mut cur = last;
        for (i, a) in taken.iter().enumerate() {
            if i == FAIR_STEPS_SHOWN {
                trace.push(format!("(fair world) ... {} more steps", taken.len() - i));
                break;
            }
            trace.push(format!("(fair world) {}", describe(&full, &cur, *a)));
            cur = full.next_state(&cur, *a).expect("every action moves");
        }
        trace.push(if taken.len() >= DRAIN_LIMIT {
            "(fair world) goes round without end: not every transfer is final".into()
        } else {
            "(fair world) stops: not every transfer is final and agreeing with the ledger".into()
        });
    }
    Some(trace)
}

fn steps(model: &Protocol, path: Path<State, Action>) -> Vec<String> {
    path.into_vec()
        .into_iter()
        .filter_map(|(state, action)| action.map(|a| describe(model, &state, a)))
        .collect()
}

const USAGE: &str = "usage: sendonce-model check [--bound ci|deep|pair] [--mutant no-fence|new-key-per-retry|resend-in-waiting|no-reaper]";

/// Runs the CLI on these arguments; returns the exit code (0 all pass, 1 a failure, 2 bad usage).
pub fn main(args: Vec<String>) -> i32 {
    let mut args = args.into_iter();
    if args.next().as_deref() != Some("check") {
        eprintln!("{USAGE}");
        return 2;
    }
    let (mut bound, mut mutant) = (Bound::CI, None);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--bound" => match Bound::named(&value) {
                Some(b) => bound = b,
                None => {
                    eprintln!("unknown bound {value:?}\n{USAGE}");
                    return 2;
                }
            },
            "--mutant" => match Mutant::named(&value) {
                Some(m) => mutant = Some(m),
                None => {
                    eprintln!("unknown mutant {value:?}\n{USAGE}");
                    return 2;
                }
            },
            _ => {
                eprintln!("unknown argument {flag:?}\n{USAGE}");
                return 2;
            }
        }
    }
    let report = check(bound, mutant);
    print!("{}", report.render());
    if report.passed() {
        0
    } else {
        1
    }
}
