//! Figure 2, FFI: two cheap SDK queries — `network_profile()` (no I/O: the FFI round trip and an
//! enum coming back) and `transfer(local_id)` (a SQLite point read and a 16-field record) — called
//! from Kotlin (JVM/JNA) and Swift through the uniffi bindings vs the same calls in Rust.
//!
//! The bindings are generated from the release `libsendonce_ffi.so` that the drivers load, into
//! `$TARGET/bench-ffi/gen`, so the uniffi checksums always match; the drivers live in `bench/ffi/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sendonce::{NetworkProfile, Sdk, SdkConfig, TransferRequest};

use crate::ffi_kotlin;
use crate::report::{r3, Report, Row};
use crate::stats::{fmt, summarize, Summary};

/// µs per call of the two queries, per round.
#[derive(Debug, Default)]
struct Calls {
    profile: Vec<f64>,
    transfer: Vec<f64>,
    /// Kotlin only: paced calls, baselines and the pieces of a generated call (see `ffi_kotlin`).
    paced: ffi_kotlin::Paced,
}

fn rust_rounds(dir: &Path, iterations: usize, calls: &mut Calls) {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let config = SdkConfig::builder("http://127.0.0.1:9", tmp.path().join("sdk.db"))
        .build()
        .expect("config");
    let sdk = Sdk::open(config).expect("sdk");
    sdk.set_network_available(false).expect("idle");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("rt");
    let t = rt
        .block_on(sdk.send_transfer(TransferRequest {
            to_user_id: "usr_bench".into(),
            amount_minor: 100,
            currency: "BDT".into(),
            note: None,
        }))
        .expect("send");
    let mut sink = 0i64;
    let time = |n: usize, f: &mut dyn FnMut()| {
        for _ in 0..n {
            f();
        }
        let per = n / 10;
        (0..10)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..per {
                    f();
                }
                start.elapsed().as_secs_f64() * 1e6 / per as f64
            })
            .collect::<Vec<_>>()
    };
    calls.profile.extend(time(iterations, &mut || {
        sink += i64::from(sdk.network_profile() == NetworkProfile::Off)
    }));
    calls.transfer.extend(time(iterations / 10, &mut || {
        sink += sdk.transfer(&t.local_id).expect("transfer").amount_minor
    }));
    std::hint::black_box(sink);
    sdk.close();
}

fn run_cmd(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let log = String::from_utf8_lossy(&out.stdout);
        let tail = |s: &str| s.lines().rev().take(8).collect::<Vec<_>>().join(" / ");
        Err(format!(
            "{:?} failed: {} {}",
            cmd.get_program(),
            tail(&err),
            tail(&log)
        ))
    }
}

/// Builds the release library and generates Kotlin and Swift sources from it.
fn prepare(target: &Path) -> Result<PathBuf, String> {
    run_cmd(Command::new("cargo").args(["build", "--release", "-q", "-p", "sendonce-ffi"]))?;
    // scripts/bench builds it with the bench (one release build shares the dependencies).
    let bindgen = target.join("release/uniffi-bindgen");
    if !bindgen.exists() {
        run_cmd(Command::new("cargo").args([
            "build",
            "--release",
            "-q",
            "-p",
            "sendonce-uniffi-bindgen",
        ]))?;
    }
    let gen = target.join("bench-ffi/gen");
    let lib = target.join("release/libsendonce_ffi.so");
    // Same library as last time: keep the sources (and so the Kotlin and Swift builds) as they are.
    let stamp = std::fs::metadata(&lib)
        .map(|m| format!("{} {:?}", m.len(), m.modified().ok()))
        .map_err(|e| format!("{}: {e}", lib.display()))?;
    if std::fs::read_to_string(gen.join("stamp")).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(gen);
    }
    let _ = std::fs::remove_dir_all(&gen);
    for lang in ["kotlin", "swift"] {
        run_cmd(
            Command::new(&bindgen)
                .arg("generate")
                .arg(&lib)
                .args(["--language", lang, "--no-format", "--out-dir"])
                .arg(gen.join(lang)),
        )?;
    }
    // The raw core marked as apps get it (Kotlin opt-in, Swift SPI): the drivers say they use it.
    run_cmd(
        Command::new("scripts/mark-raw-core")
            .arg(gen.join("kotlin/io/sendonce/sendonce_ffi.kt"))
            .arg(gen.join("swift/SendOnceFFI.swift")),
    )?;
    std::fs::write(gen.join("stamp"), stamp).map_err(|e| e.to_string())?;
    Ok(gen)
}

/// Writes `text` to `to` unless it already holds exactly that (keeps mtimes for incremental builds).
fn write_if_changed(to: &Path, text: &[u8]) -> Result<(), String> {
    if std::fs::read(to).ok().as_deref() == Some(text) {
        return Ok(());
    }
    std::fs::write(to, text).map_err(|e| format!("{}: {e}", to.display()))
}

fn read_calls(path: &Path, calls: &mut Calls) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let nums = |k: &str| -> Vec<f64> {
        v[k].as_array()
            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default()
    };
    calls.profile.extend(nums("network_profile_us"));
    calls.transfer.extend(nums("transfer_us"));
    ffi_kotlin::read(&v, &mut calls.paced);
    Ok(v["runtime"].as_str().unwrap_or("").to_string())
}

fn kotlin(
    target: &Path,
    gen: &Path,
    iterations: usize,
    calls: &mut Calls,
) -> Result<String, String> {
    let out = target.join("bench-ffi/ffi-kotlin.json");
    let _ = std::fs::remove_file(&out);
    copy_kotlin_layer(&gen.join("kotlin/io/sendonce"))?;
    run_cmd(
        Command::new("mvn")
            .args(["-B", "-q", "-f", "bench/ffi/kotlin/pom.xml", "test"])
            // No compile daemon left behind to load the figures that follow.
            .arg("-Dkotlin.compiler.daemon=false")
            .arg(format!(
                "-Dsendonce.ffi.gen={}",
                gen.join("kotlin").display()
            ))
            .arg(format!(
                "-Dsendonce.ffi.libdir={}",
                target.join("release").display()
            ))
            .arg(format!("-Dsendonce.bench.out={}", out.display()))
            .arg(format!("-Dsendonce.bench.iterations={iterations}")),
    )?;
    read_calls(&out, calls)
}

/// The hand-written Kotlin layer of `bindings/kotlin` into the generated package `to`, so the driver
/// also times what an app calls; what the layer no longer has goes (the generated file stays).
fn copy_kotlin_layer(to: &Path) -> Result<(), String> {
    const GENERATED: &str = "sendonce_ffi.kt";
    let from = Path::new("bindings/kotlin/src/main/kotlin/io/sendonce");
    let names = |dir: &Path| -> Result<Vec<String>, String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".kt") && n != GENERATED)
            .collect())
    };
    let layer = names(from)?;
    for stale in names(to)?.into_iter().filter(|n| !layer.contains(n)) {
        std::fs::remove_file(to.join(stale)).map_err(|e| e.to_string())?;
    }
    for name in &layer {
        let text = std::fs::read(from.join(name)).map_err(|e| format!("{name}: {e}"))?;
        write_if_changed(&to.join(name), &text)?;
    }
    Ok(())
}

fn swift(
    target: &Path,
    gen: &Path,
    iterations: usize,
    calls: &mut Calls,
) -> Result<String, String> {
    // The same default and variable as scripts/setup-swift.
    let root =
        std::env::var("SENDONCE_SWIFT_ROOT").unwrap_or_else(|_| "/opt/sendonce/swift-root".into());
    if !Path::new(&root).join(".sendonce-ready").exists() {
        // A machine without the chroot yet: set it up (about a minute from Debian's packages;
        // cached outside the repo).
        run_cmd(&mut Command::new("scripts/setup-swift"))
            .map_err(|e| format!("no Swift chroot at {root}: {e}"))?;
    }
    let pkg = target.join("bench-ffi/swift");
    let src = pkg.join("Sources");
    for d in ["sendonce_ffiFFI", "SendOnceFFI", "FfiBench"] {
        std::fs::create_dir_all(src.join(d)).map_err(|e| e.to_string())?;
    }
    let copy = |from: PathBuf, to: PathBuf| {
        let text = std::fs::read(&from).map_err(|e| format!("{}: {e}", from.display()))?;
        write_if_changed(&to, &text)
    };
    copy(
        "bench/ffi/swift/Package.swift".into(),
        pkg.join("Package.swift"),
    )?;
    copy(
        "bench/ffi/swift/main.swift".into(),
        src.join("FfiBench/main.swift"),
    )?;
    // Two crates carry uniffi types (the bindings and the core's values): both Swift files in the one
    // SendOnceFFI target, both headers in one C module, as scripts/gen-bindings lays them out.
    for file in ["SendOnceFFI.swift", "SendOnceCore.swift"] {
        copy(
            gen.join("swift").join(file),
            src.join("SendOnceFFI").join(file),
        )?;
    }
    // The hand-written custom type the generated Swift names (uniffi.toml: RequestHeaders).
    copy(
        "bindings/swift/Sources/SendOnceFFI/RedactedHeaders.swift".into(),
        src.join("SendOnceFFI/RedactedHeaders.swift"),
    )?;
    let headers = ["sendonce_ffiFFI.h", "sendonceFFI.h"];
    for file in headers {
        copy(
            gen.join("swift").join(file),
            src.join("sendonce_ffiFFI").join(file),
        )?;
    }
    // No Darwin module on Linux; link the host-built library by name.
    let map = format!(
        "module sendonce_ffiFFI {{\n{}    export *\n    use \"_Builtin_stdbool\"\n    use \"_Builtin_stdint\"\n    link \"sendonce_ffi\"\n}}\n",
        headers.map(|h| format!("    header \"{h}\"\n")).concat()
    );
    write_if_changed(
        &src.join("sendonce_ffiFFI/module.modulemap"),
        map.as_bytes(),
    )?;
    let lib_dir = target.join("release");
    let chroot = |args: &[&str]| {
        let mut c = Command::new("scripts/in-swift-chroot");
        c.env("SENDONCE_FFI_LIB_DIR", &lib_dir).args(args);
        c
    };
    let pkg_s = pkg.to_str().ok_or("path")?.to_string();
    run_cmd(&mut chroot(&[
        "swift",
        "build",
        "-c",
        "release",
        "--package-path",
        &pkg_s,
    ]))?;
    let db = target.join("bench-ffi/db");
    let _ = std::fs::remove_dir_all(&db);
    std::fs::create_dir_all(&db).map_err(|e| e.to_string())?;
    let out = target.join("bench-ffi/ffi-swift.json");
    let exe = pkg.join(".build/release/FfiBench");
    run_cmd(&mut chroot(&[
        exe.to_str().ok_or("path")?,
        db.to_str().ok_or("path")?,
        &iterations.to_string(),
        out.to_str().ok_or("path")?,
    ]))?;
    read_calls(&out, calls).map(|_| "swift -c release".into())
}

fn json(s: &Summary) -> serde_json::Value {
    serde_json::json!({"p10": r3(s.p10), "p50": r3(s.p50), "p90": r3(s.p90), "n": s.n})
}

/// Runs figure 2: Rust, Kotlin, Rust, Swift, Rust (the baseline brackets each foreign run).
pub fn run(report: &mut Report, fast_dir: &Path, quick: bool) {
    let iterations = if quick { 20_000 } else { 200_000 };
    let target = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().and_then(Path::parent).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"));
    let mut rust = Calls::default();
    let (mut kt, mut sw) = (Calls::default(), Calls::default());
    rust_rounds(fast_dir, iterations, &mut rust);
    let gen = prepare(&target);
    let kt_res = gen
        .clone()
        .and_then(|g| kotlin(&target, &g, iterations, &mut kt));
    rust_rounds(fast_dir, iterations, &mut rust);
    let sw_res = gen.and_then(|g| swift(&target, &g, iterations, &mut sw));
    rust_rounds(fast_dir, iterations, &mut rust);

    let (rp, rt) = (summarize(&rust.profile), summarize(&rust.transfer));
    report.rows.push(
        Row::new(
            "2",
            "FFI µs/call, Rust (baseline): network_profile() · transfer(id)",
        )
        .subject(format!("{} · {}", fmt(rp.p50), fmt(rt.p50)))
        .baseline("in-process Rust call"),
    );
    let mut details = serde_json::json!({"rust": {"network_profile_us": json(&rp), "transfer_us": json(&rt)}, "iterations": iterations});
    for (lang, calls, res) in [("kotlin", &kt, &kt_res), ("swift", &sw, &sw_res)] {
        match res {
            Ok(runtime) => {
                let (p, t) = (summarize(&calls.profile), summarize(&calls.transfer));
                report.rows.push(
                    Row::new(
                        "2",
                        format!("FFI µs/call from {lang}: network_profile() · transfer(id)"),
                    )
                    .subject(format!(
                        "{} (p10–p90 {}–{}) · {} (p10–p90 {}–{})",
                        fmt(p.p50),
                        fmt(p.p10),
                        fmt(p.p90),
                        fmt(t.p50),
                        fmt(t.p10),
                        fmt(t.p90)
                    ))
                    .baseline(format!("Rust {} · {}", fmt(rp.p50), fmt(rt.p50)))
                    .ratio(format!(
                        "+{} µs · +{} µs",
                        fmt(p.p50 - rp.p50),
                        fmt(t.p50 - rt.p50)
                    )),
                );
                report.key(&format!("ffi_us_per_call_{lang}"), r3(t.p50));
                report.key(&format!("ffi_overhead_us_{lang}"), r3(p.p50 - rp.p50));
                details[lang] = serde_json::json!({"network_profile_us": json(&p), "transfer_us": json(&t), "runtime": runtime});
                if lang == "kotlin" {
                    ffi_kotlin::target(report, &mut details, &calls.paced, rp.p50, p.p50);
                }
            }
            Err(e) => {
                report.rows.push(
                    Row::new("2", format!("FFI from {lang}")).subject(format!("not measured: {e}")),
                );
                report.key(&format!("ffi_us_per_call_{lang}"), serde_json::Value::Null);
                if lang == "kotlin" {
                    report.key("kotlin_ffi_overhead_us", serde_json::Value::Null);
                    report.key("kotlin_app_read_us", serde_json::Value::Null);
                }
                details[lang] = serde_json::json!({"error": e});
            }
        }
    }
    report.key("ffi_us_per_call_rust", r3(rt.p50));
    report.key("ffi_overhead_us_rust", 0.0);
    report.key("ffi", details);
    report.note(
        "2 FFI",
        format!(
            "Two cheap queries on an open SDK holding one transfer (network marked unavailable so the sender is idle): \
             `network_profile()` — no I/O, measures the FFI round trip with an enum coming back — and \
             `transfer(local_id)` — one SQLite point read returning a 16-field record. {iterations} warm-up calls, then \
             10 rounds of {} calls (`transfer`: a tenth of that; Kotlin back-to-back: a quarter, since a tight loop costs it ~40 µs a call); the table shows the median round (p10–p90). \
             Kotlin: JUnit class `bench/ffi/kotlin` run by Maven (its plugins and JNA from Maven Central the first time; JVM 17, JNA, the uniffi-generated Kotlin); \
             its target row is judged on paced calls — 20 bursts of up to 1000 calls, each after a GC once JNA's \
             cleaner has emptied its allocation map, as a UI calls — next to a pure-Kotlin call and a JNA direct call \
             into libc measured the same way, and the pieces of one generated call (a call with a fresh call status; a \
             returned buffer and the call freeing it). \
             Swift: executable `bench/ffi/swift` built `-c release` and run in the Swift chroot. Both load \
             `target/release/libsendonce_ffi.so` and use bindings generated from it. The Rust baseline (same calls on \
             `sendonce::Sdk`, SQLite file on `{}`) runs before, between and after the two foreign runs. \
             \"FFI µs/call\" keys in the JSON are `transfer(id)`; `ffi_overhead_us_*` is `network_profile()` minus Rust.",
            iterations / 10,
            fast_dir.display()
        ),
    );
}
