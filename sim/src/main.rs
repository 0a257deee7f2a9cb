//! `sendonce-sim ride`: one command runs a whole train ride and checks every invariant.

use std::process::ExitCode;

use clap::Parser;
use sendonce_sim::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error,tower_http=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let built = match &cli.command {
        Command::Ride(args) => sendonce_sim::ride::runtime(&args.config()),
        Command::Serve(_) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    };
    let runtime = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sendonce-sim: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Serve(a) => {
            let lock = std::time::Duration::from_millis(a.lock_timeout_ms);
            match runtime.block_on(sendonce_sim::server::serve(
                a.db,
                a.listen,
                lock,
                a.unsafe_no_fence,
                a.broker,
                a.kafka_single_broker_dev,
            )) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("sendonce-sim serve: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Ride(args) => match runtime.block_on(sendonce_sim::run(&args.config())) {
            Ok(report) => {
                if args.json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&report).unwrap_or_default()
                    );
                } else {
                    print!("{}", report.human());
                }
                if report.invariants_ok {
                    ExitCode::SUCCESS
                } else {
                    if args.json {
                        for v in report.invariants.iter().filter(|v| !v.ok) {
                            eprintln!("FAIL {}: {}", v.name, v.failures.join("; "));
                        }
                    }
                    ExitCode::from(1)
                }
            }
            Err(e) => {
                eprintln!("sendonce-sim: the ride could not run: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}
