//! `sendonce-conformance`: exit 0 when nothing failed, 1 when a check failed, 2 when it
//! could not run.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = sendonce_conformance::Args::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout();
    match rt.block_on(sendonce_conformance::run(&args, &mut out)) {
        Ok(report) if report.count(sendonce_conformance::report::Status::Fail) == 0 => {
            ExitCode::SUCCESS
        }
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
