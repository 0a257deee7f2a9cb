//! The processes under test: started with piped stdio, halted at crash points, SIGKILLed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{bin_dir, SETTLE_LIMIT};

/// The binaries under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bin {
    ServerMock,
    FraudCheck,
    Wallet,
    Sms,
}

impl Bin {
    fn path(self) -> PathBuf {
        match self {
            Bin::FraudCheck => env!("CARGO_BIN_EXE_fraud-check").into(),
            Bin::Wallet => env!("CARGO_BIN_EXE_wallet").into(),
            Bin::Sms => env!("CARGO_BIN_EXE_sms").into(),
            Bin::ServerMock => {
                let p = bin_dir().join("server-mock");
                assert!(
                    p.exists(),
                    "{} missing: cargo build -p server-mock first (scripts/test-all kafka does)",
                    p.display()
                );
                p
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            Bin::ServerMock => "server-mock",
            Bin::FraudCheck => "fraud-check",
            Bin::Wallet => "wallet",
            Bin::Sms => "sms",
        }
    }
}

/// One running process; killed (SIGKILL) when dropped.
pub struct Proc {
    pub bin: Bin,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    pub stderr: PathBuf,
}

impl Proc {
    /// Starts `bin` with `args`, `env`, stderr into `dir/<name>-<n>.err`.
    pub fn start(bin: Bin, dir: &Path, args: &[String], env: &[(&str, &str)]) -> Proc {
        static N: AtomicU32 = AtomicU32::new(0);
        let stderr = dir.join(format!(
            "{}-{}.err",
            bin.name(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let mut cmd = Command::new(bin.path());
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .env_remove("SENDONCE_CRASH_AT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.name()));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            bin,
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        }
    }

    /// Waits for a stdout line starting with `prefix`; returns it.
    pub fn wait_line(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + SETTLE_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(_) => panic!(
                    "{} never printed {prefix:?}; exit {:?}; stderr:\n{}",
                    self.bin.name(),
                    self.child.try_wait(),
                    self.stderr_text()
                ),
            }
        }
    }

    /// Lets a process halted at a crash point go on.
    pub fn resume(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }

    /// SIGKILL, and reaps it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for it to exit by itself; returns the exit code.
    pub fn wait_exit(mut self) -> Option<i32> {
        let deadline = Instant::now() + SETTLE_LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "{} never exited",
                self.bin.name()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits at most `limit` for it to exit by itself; its exit code, or `Err` with its
    /// stderr when it is still running (it is killed then, when dropped).
    pub fn exit_within(mut self, limit: Duration) -> Result<Option<i32>, String> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Ok(status.code());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "{} still running after {limit:?}; stderr:\n{}",
            self.bin.name(),
            self.stderr_text()
        ))
    }

    /// Freezes (`SIGSTOP`: every thread, heartbeats included, as a VM pause would) or
    /// thaws (`SIGCONT`) the process.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} {}", self.child.id());
    }

    /// Everything it wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
