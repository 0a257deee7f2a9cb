//! What the run found: one line per check, the summary, and the `--json` / `--junit`
//! files.

use std::path::Path;

use serde::Serialize;

use crate::client::Exchange;

/// PASS, FAIL or SKIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// The contract held.
    Pass,
    /// It did not.
    Fail,
    /// Not checkable here.
    Skip,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// Stable check id.
    pub id: String,
    /// PASS / FAIL / SKIP.
    pub status: Status,
    /// One line: request, answer, what was expected.
    pub evidence: String,
    /// Seconds it took.
    pub seconds: f64,
    /// Every request and answer, kept for failed checks only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<Exchange>,
}

impl CheckResult {
    /// `PASS <id> <evidence>`.
    pub fn line(&self) -> String {
        format!("{} {} {}", self.status.as_str(), self.id, self.evidence)
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The backend checked.
    pub base_url: String,
    /// The money plan announced before the first check.
    pub plan: String,
    /// What actually left A's and B's wallets during the checks.
    pub moved: String,
    /// The same as numbers (A, B), when both balances could be read.
    pub moved_minor: Option<(i64, i64)>,
    /// Every check, in order.
    pub checks: Vec<CheckResult>,
}

impl Report {
    /// How many checks have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// The result of check `id`.
    pub fn get(&self, id: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// `N passed, N failed, N skipped`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.count(Status::Pass),
            self.count(Status::Fail),
            self.count(Status::Skip)
        )
    }

    /// Writes the report as JSON (failed checks carry their exchanges).
    pub fn write_json(&self, path: &Path) -> std::io::Result<()> {
        #[derive(Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            report: &'a Report,
            passed: usize,
            failed: usize,
            skipped: usize,
        }
        let out = Out {
            report: self,
            passed: self.count(Status::Pass),
            failed: self.count(Status::Fail),
            skipped: self.count(Status::Skip),
        };
        std::fs::write(
            path,
            serde_json::to_vec_pretty(&out).map_err(std::io::Error::other)?,
        )
    }

    /// Writes the report as JUnit XML: one testsuite, one testcase per check.
    pub fn write_junit(&self, path: &Path) -> std::io::Result<()> {
        let total: f64 = self.checks.iter().map(|c| c.seconds).sum();
        let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        x.push_str(&format!(
            "<testsuites><testsuite name=\"sendonce-conformance\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\" time=\"{total:.3}\">\n",
            self.checks.len(),
            self.count(Status::Fail),
            self.count(Status::Skip)
        ));
        x.push_str(&format!(
            "  <properties><property name=\"base_url\" value=\"{}\"/><property name=\"plan\" value=\"{}\"/></properties>\n",
            esc(&self.base_url),
            esc(&self.plan)
        ));
        for c in &self.checks {
            let (group, _) = c.id.split_once('.').unwrap_or((&c.id, ""));
            x.push_str(&format!(
                "  <testcase classname=\"conformance.{}\" name=\"{}\" time=\"{:.3}\">",
                esc(group),
                esc(&c.id),
                c.seconds
            ));
            match c.status {
                Status::Pass => {}
                Status::Skip => x.push_str(&format!("<skipped message=\"{}\"/>", esc(&c.evidence))),
                Status::Fail => {
                    let detail = serde_json::to_string_pretty(&c.exchanges).unwrap_or_default();
                    x.push_str(&format!(
                        "<failure message=\"{}\" type=\"contract\">{}</failure>",
                        esc(&c.evidence),
                        esc(&detail)
                    ));
                }
            }
            x.push_str("</testcase>\n");
        }
        x.push_str("</testsuite></testsuites>\n");
        std::fs::write(path, x)
    }
}

/// XML text/attribute escaping; characters XML 1.0 cannot carry become `?`.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\n' => o.push_str("&#10;"),
            '\t' | '\r' => o.push(ch),
            c if (c as u32) < 0x20 => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(esc("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;?");
    }
}
