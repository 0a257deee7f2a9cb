//! `sendonce-bench`: what exactly-once costs, each figure against its baseline in the same run.
//!
//! ```text
//! sendonce-bench [--quick] [--only 1,3,4,5,6,7,8,9,2] [--out DIR] [--dir DIR] [--fast-dir DIR]
//! ```
//! Writes `BENCHMARKS.md` and `BENCHMARKS.json` into `--out` (default: the current directory) and
//! prints the table. `scripts/bench` builds it in release mode and runs it from the repo root.

mod cold_open;
mod counts;
mod ffi;
mod ffi_kotlin;
mod key_table;
mod memory;
mod postgres;
mod recovery;
mod report;
mod retry_storm;
mod server;
mod server_overhead;
mod stats;
mod tap_to_durable;
mod train;
mod write_path;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use report::Report;

struct Args {
    quick: bool,
    only: Vec<String>,
    out: PathBuf,
    dir: PathBuf,
    fast_dir: PathBuf,
}

fn usage() -> ! {
    eprintln!("usage: sendonce-bench [--quick] [--only 1,2,3,4,5,6,7,8,9] [--out DIR] [--dir DIR] [--fast-dir DIR]");
    std::process::exit(2)
}

fn parse_args(argv: &[String]) -> Args {
    let fast = PathBuf::from("/dev/shm");
    let mut a = Args {
        quick: false,
        only: vec![],
        out: PathBuf::from("."),
        dir: PathBuf::from("target/bench-tmp"),
        fast_dir: if fast.is_dir() {
            fast
        } else {
            PathBuf::from("target/bench-tmp")
        },
    };
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--quick" => a.quick = true,
            "--only" => a.only = value().split(',').map(|s| s.trim().to_string()).collect(),
            "--out" => a.out = PathBuf::from(value()),
            "--dir" => a.dir = PathBuf::from(value()),
            "--fast-dir" => a.fast_dir = PathBuf::from(value()),
            _ => usage(),
        }
    }
    a
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("child") {
        match (argv.get(1).map(String::as_str), argv.get(2), argv.get(3)) {
            (Some("sdk-rss"), Some(dir), Some(n)) => {
                memory::child_sdk(std::path::Path::new(dir), n.parse().unwrap_or(0))
            }
            (Some("server"), Some(db), _) => memory::child_server(db),
            (Some("cold-open"), Some(side), Some(db)) => cold_open::child(side, Path::new(db)),
            (Some("year-rss"), Some(db), Some(n)) => {
                cold_open::child_year(Path::new(db), n.parse().unwrap_or(10_000))
            }
            (Some("tap"), Some(side), Some(n)) => {
                let dir = PathBuf::from(
                    argv.get(4)
                        .map(String::as_str)
                        .unwrap_or("target/bench-tmp"),
                );
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime")
                    .block_on(tap_to_durable::single(side, n.parse().unwrap_or(100), &dir));
            }
            (Some("workload"), Some(kind), Some(secs)) => {
                let conc = argv.get(4).and_then(|c| c.parse().ok()).unwrap_or(1);
                let dir = PathBuf::from(
                    argv.get(5)
                        .map(String::as_str)
                        .unwrap_or("target/bench-tmp"),
                );
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime")
                    .block_on(server_overhead::single(
                        kind,
                        secs.parse().unwrap_or(2.0),
                        conc,
                        &dir,
                    ));
            }
            _ => usage(),
        }
        return;
    }
    let args = parse_args(&argv);
    // Made before the run: a missing --out found at the end would throw the whole run away.
    for dir in [&args.dir, &args.out] {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("sendonce-bench: cannot create {}: {e}", dir.display());
            std::process::exit(2);
        }
    }
    let command = std::env::var("SENDONCE_BENCH_COMMAND")
        .unwrap_or_else(|_| format!("sendonce-bench {}", argv.join(" ")));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut report = Report::default();
    let started = Instant::now();
    let wants = |f: &str| args.only.is_empty() || args.only.iter().any(|o| o == f);
    let q = args.quick;
    let timed = |report: &mut Report, name: &str, f: &mut dyn FnMut(&mut Report)| {
        eprintln!("sendonce-bench: figure {name} …");
        let t = Instant::now();
        f(report);
        let s = t.elapsed().as_secs_f64();
        eprintln!("sendonce-bench: figure {name} done in {s:.1} s");
        report.timings.push((name.to_string(), s));
    };
    if wants("1") {
        timed(&mut report, "1", &mut |r| {
            rt.block_on(tap_to_durable::run(
                r,
                &args.dir,
                &args.fast_dir,
                if q { 4 } else { 48 },
                if q { 10 } else { 80 },
            ));
            counts::tap_to_durable(r, &args.fast_dir, q);
        });
    }
    if wants("3") {
        let dur = Duration::from_millis(if q { 400 } else { 2_000 });
        timed(&mut report, "3", &mut |r| {
            rt.block_on(server_overhead::run(
                r,
                &args.dir,
                if q { 2 } else { 4 },
                dur,
            ));
            write_path::run(r, &args.dir, &args.fast_dir, if q { 40 } else { 300 });
            counts::server(r, &args.fast_dir, q);
        });
    }
    if wants("4") {
        timed(&mut report, "4", &mut |r| {
            rt.block_on(recovery::run(r, &args.dir, if q { 8 } else { 40 }))
        });
    }
    if wants("5") {
        timed(&mut report, "5", &mut |r| {
            retry_storm::run(r);
            rt.block_on(train::run(
                r,
                &args.fast_dir,
                if q { 30 } else { 200 },
                100.0,
            ));
        });
    }
    if wants("6") {
        timed(&mut report, "6", &mut |r| {
            rt.block_on(key_table::run(r, &args.dir, if q { 20 } else { 100 }))
        });
    }
    if wants("7") {
        let (pending, requests) = if q {
            (1_000, 50_000)
        } else {
            (10_000, 500_000)
        };
        timed(&mut report, "7", &mut |r| {
            rt.block_on(memory::run(
                r,
                &args.fast_dir,
                &args.dir,
                pending,
                requests,
                2,
            ))
        });
    }
    if wants("8") {
        timed(&mut report, "8", &mut |r| {
            let (unfinished, finished) = if q {
                (1_000, 10_000)
            } else {
                (10_000, 100_000)
            };
            cold_open::run(
                r,
                &args.dir,
                &args.fast_dir,
                unfinished,
                finished,
                if q { 3 } else { 12 },
            )
        });
    }
    if wants("9") {
        timed(&mut report, "9", &mut |r| rt.block_on(postgres::run(r, q)));
    }
    if wants("2") {
        timed(&mut report, "2", &mut |r| ffi::run(r, &args.fast_dir, q));
    }
    let total = started.elapsed().as_secs_f64();
    report.rows.sort_by_key(|r| r.figure);
    println!("{}", report::table(&report.rows));
    report::write(&mut report, &args.out, &command, total).expect("write report");
    eprintln!(
        "sendonce-bench: wrote {} and {} in {total:.0} s",
        args.out.join("BENCHMARKS.md").display(),
        args.out.join("BENCHMARKS.json").display()
    );
}
