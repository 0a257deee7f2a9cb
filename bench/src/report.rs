//! The table: printed, written to BENCHMARKS.md (with the command and machine facts) and BENCHMARKS.json.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Map, Value};

/// One line of the table: a figure's subject against its baseline.
#[derive(Debug, Clone)]
pub struct Row {
    pub figure: &'static str,
    pub metric: String,
    pub subject: String,
    pub baseline: String,
    pub ratio: String,
    pub target: String,
    /// `Some(true)` met, `Some(false)` missed, `None` no target.
    pub met: Option<bool>,
}

impl Row {
    pub fn new(figure: &'static str, metric: impl Into<String>) -> Self {
        Self {
            figure,
            metric: metric.into(),
            subject: String::new(),
            baseline: "—".into(),
            ratio: "—".into(),
            target: "—".into(),
            met: None,
        }
    }
    pub fn subject(mut self, s: impl Into<String>) -> Self {
        self.subject = s.into();
        self
    }
    pub fn baseline(mut self, s: impl Into<String>) -> Self {
        self.baseline = s.into();
        self
    }
    pub fn ratio(mut self, s: impl Into<String>) -> Self {
        self.ratio = s.into();
        self
    }
    pub fn target(mut self, s: impl Into<String>, met: bool) -> Self {
        self.target = s.into();
        self.met = Some(met);
        self
    }
    fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "",
        }
    }
}

/// Everything one run produced.
#[derive(Debug, Default)]
pub struct Report {
    pub rows: Vec<Row>,
    /// Flat keys asked for by the issue, plus per-figure detail objects.
    pub json: Map<String, Value>,
    /// Method notes per figure, in the order the figures ran.
    pub notes: Vec<(String, String)>,
    /// Wall time per figure (s).
    pub timings: Vec<(String, f64)>,
}

impl Report {
    pub fn key(&mut self, name: &str, value: impl Into<Value>) {
        self.json.insert(name.to_string(), value.into());
    }
    pub fn note(&mut self, figure: &str, text: impl Into<String>) {
        self.notes.push((figure.to_string(), text.into()));
    }
}

/// Facts about the machine the numbers come from.
pub fn machine_facts() -> Vec<(&'static str, String)> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_string())
        })
        .and_then(|kib| kib.parse::<f64>().ok())
        .map(|kib| format!("{:.1} GiB", kib / 1024.0 / 1024.0))
        .unwrap_or_default();
    let out = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    vec![
        ("date", out("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"])),
        ("nproc", out("nproc", &[])),
        ("cpu", cpu),
        ("memory", mem),
        ("kernel", out("uname", &["-sr"])),
        ("rustc", out("rustc", &["--version"])),
        ("git", out("git", &["rev-parse", "--short", "HEAD"])),
    ]
}

/// The table as Markdown.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| # | metric | sendonce (subject) | baseline | ratio | target | verdict |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.figure,
            r.metric,
            r.subject,
            r.baseline,
            r.ratio,
            r.target,
            r.verdict()
        ));
    }
    s
}

/// Writes BENCHMARKS.md and BENCHMARKS.json into `out`.
pub fn write(
    report: &mut Report,
    out: &Path,
    command: &str,
    total_s: f64,
    analysis: Option<&str>,
) -> std::io::Result<()> {
    let facts = machine_facts();
    let mut md = String::from("# sendonce benchmarks\n\n");
    md.push_str(
        "The cost of exactly-once, each figure measured against its baseline **in the same run** \
         (baseline and subject rounds interleaved, ABAB, so machine noise hits both). \
         Ratios are cost ratios (subject ÷ baseline, time per operation): below 1 means the subject is cheaper. \
         Spreads are p10–p90 of per-round values unless stated. This file is generated; do not edit it by hand \
         (the analysis section comes from `bench/notes/analysis.md`).\n\n",
    );
    md.push_str(&format!(
        "Command: `{command}`\n\nRun time: {total_s:.0} s\n\n"
    ));
    md.push_str("| machine | |\n|---|---|\n");
    for (k, v) in &facts {
        md.push_str(&format!("| {k} | {v} |\n"));
    }
    md.push_str("\n## Results\n\n");
    let verdicts = |met: bool| {
        report
            .rows
            .iter()
            .filter(|r| r.met == Some(met))
            .map(|r| format!("{} {} ({})", r.figure, r.metric, r.target))
            .collect::<Vec<_>>()
    };
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join("; ")
        }
    };
    md.push_str(&format!(
        "Targets met: {}.\n\nTargets missed: {}.\n\n",
        list(verdicts(true)),
        list(verdicts(false))
    ));
    md.push_str(&table(&report.rows));
    md.push_str("\nTime per figure: ");
    md.push_str(
        &report
            .timings
            .iter()
            .map(|(f, s)| format!("{f} {s:.0} s"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    md.push_str("\n\n## Method, per figure\n\n");
    for (fig, text) in &report.notes {
        md.push_str(&format!("**{fig}.** {text}\n\n"));
    }
    if let Some(a) = analysis {
        md.push_str("## Analysis of missed targets (profiles)\n\n");
        md.push_str(a.trim());
        md.push('\n');
    }
    std::fs::write(out.join("BENCHMARKS.md"), md)?;

    let facts_json: Map<String, Value> = facts
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(v.clone())))
        .collect();
    report.key("command", command);
    report.key("run_time_s", (total_s * 10.0).round() / 10.0);
    report.key("machine", Value::Object(facts_json));
    let targets: Vec<Value> = report
        .rows
        .iter()
        .filter(|r| r.met.is_some())
        .map(|r| json!({"figure": r.figure, "metric": r.metric, "target": r.target, "met": r.met}))
        .collect();
    report.key("targets", targets);
    let text = serde_json::to_string_pretty(&Value::Object(report.json.clone()))
        .unwrap_or_else(|_| "{}".into());
    std::fs::write(out.join("BENCHMARKS.json"), text + "\n")
}

/// Rounds for JSON (3 significant decimals is plenty for noisy timings).
pub fn r3(x: f64) -> Value {
    if x.is_finite() {
        json!((x * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}
