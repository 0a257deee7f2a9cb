//! `fraud-check --broker kafka://… --transactional-id fraud-check-0`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use sendonce_streams::cli as common;
use sendonce_streams::fraud::{self, FraudError};

/// Reads transfers.done, writes transfers.approved / transfers.flagged transactionally.
#[derive(Parser, Debug)]
#[command(name = "fraud-check")]
struct Args {
    #[command(flatten)]
    common: common::Common,
    /// Stable per instance slot: a restart with the same id fences the old process.
    #[arg(long, default_value = "fraud-check-0")]
    transactional_id: String,
    /// Transfers above this amount (minor units) are flagged, not approved.
    #[arg(long, default_value_t = i64::MAX)]
    flag_above: i64,
    /// Transfers from this amount (minor units) on get the payer a "large transfer" SMS.
    #[arg(long, default_value_t = 1_000_000)]
    large_amount: i64,
    /// A member that stops polling this long leaves its group.
    #[arg(long, default_value = "10s", value_parser = common::parse_duration)]
    max_poll_interval: Duration,
}

fn main() -> ExitCode {
    common::init_logging();
    let args = Args::parse();
    let Ok(broker) = args.common.broker() else {
        return ExitCode::from(2);
    };
    let settings = fraud::Settings {
        broker,
        transactional_id: args.transactional_id,
        flag_above_minor: args.flag_above,
        large_minor: args.large_amount,
        max_poll_interval: args.max_poll_interval,
    };
    match fraud::run(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ FraudError::Fenced(..)) => {
            eprintln!("fraud-check: {e}");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("fraud-check: {e}");
            ExitCode::FAILURE
        }
    }
}
