//! `wallet --broker kafka://… --db wallet.db`: credits approved transfers, once each.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = sendonce_streams::cli::Args::parse();
    sendonce_streams::cli::consumer_main::<sendonce_streams::wallet::Wallet>(args)
}
