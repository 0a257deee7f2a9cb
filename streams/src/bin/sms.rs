//! `sms --broker kafka://… --db sms.db`: one SMS to the recipient of each approved transfer.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = sendonce_streams::cli::Args::parse();
    sendonce_streams::cli::consumer_main::<sendonce_streams::sms::Sms>(args)
}
