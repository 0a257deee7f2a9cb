//! `sendonce-model check [--bound ci|deep] [--mutant no-fence|new-key-per-retry|resend-in-waiting|no-reaper]`.

fn main() {
    std::process::exit(sendonce_model::cli::main(
        std::env::args().skip(1).collect(),
    ));
}
