//! Replays every committed input of every fuzz target (the seeds and whatever the fuzzer kept,
//! fuzz/corpus/<target>/, and each input that once broke a property, fuzz/regressions/<target>/):
//! what `scripts/fuzz` explores for minutes, CI checks in seconds.

use std::path::{Path, PathBuf};

use sendonce::transport::HttpResponse;
use sendonce::Verdict;
use sendonce_fuzz::{answer, oracle, TARGETS};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

#[test]
fn every_kept_input_of_every_target_holds_its_property() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, check) in TARGETS {
        let corpus = inputs(&root.join("corpus").join(name));
        assert!(!corpus.is_empty(), "fuzz/corpus/{name} has no seeds");
        let regressions = inputs(&root.join("regressions").join(name));
        for file in corpus.iter().chain(&regressions) {
            let data = std::fs::read(file).unwrap();
            if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
                std::panic::resume_unwind(Box::new(format!(
                    "{} breaks {name}: {panic:?}",
                    file.display()
                )));
            }
        }
        eprintln!(
            "{name}: {} inputs, {} regressions",
            corpus.len(),
            regressions.len()
        );
    }
}

/// The classification every 2xx trusted (the SDK's `legacy-classify` feature): the oracle must
/// catch it on the seeds, or the target could not fail.
fn trusting(r: &HttpResponse) -> Verdict {
    match r.status {
        200..=299 => Verdict::Succeeded {
            server_transfer_id: "t".into(),
            replayed: false,
        },
        _ => Verdict::Retry {
            retry_after_ms: None,
            error: String::new(),
        },
    }
}

#[test]
fn the_oracle_refuses_a_classification_that_trusts_any_2xx() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/classify");
    let caught = inputs(&dir)
        .iter()
        .filter_map(|f| answer::decode(&std::fs::read(f).unwrap()))
        .filter(|(c, r)| oracle::judge(c, r, answer::KEY, &trusting(r)).is_err())
        .count();
    assert!(caught > 0, "no seed tells a portal's 200 from the server's");
}
