//! README.md shows what `sendonce-sim ride` prints when it works. This runs the same ride and checks
//! that every line README.md shows is printed, in order, with numbers masked (a change in how many
//! attempts a ride took is no documentation defect; a line that is no longer printed is).

use std::process::Command;

/// The marker on the line before README.md's ride output block (scripts/check-readme requires it).
const MARKER: &str = "<!-- checked: output of sim/tests/readme_ride.rs -->";

/// The fenced block after `MARKER`.
fn readme_block() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the repo root");
    let mut lines = readme.lines().skip_while(|l| l.trim() != MARKER).skip(1);
    let fence = lines.next().expect("a fenced block after the marker");
    assert!(
        fence.starts_with("```"),
        "the marker is not followed by a fence: {fence}"
    );
    lines
        .take_while(|l| !l.starts_with("```"))
        .map(str::to_string)
        .collect()
}

/// The line with every number (a digit, then digits, `.` and `,`) replaced by `#`, trailing blanks
/// dropped, and a duration's unit with it: the real-time lines print `789 ms` on one run and `8.0 s` on
/// a slower one (the test failed whenever the whole ride took under a second).
fn masked(line: &str) -> String {
    masked_numbers(line)
        .replace("# ms", "# s")
        .replace("# µs", "# s")
}

fn masked_numbers(line: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in line.trim_end().chars() {
        in_number = c.is_ascii_digit() || (in_number && (c == '.' || c == ','));
        if !in_number {
            out.push(c);
        } else if !out.ends_with('#') {
            out.push('#');
        }
    }
    out
}

#[test]
fn the_readme_shows_what_the_ride_prints() {
    let shown = readme_block();
    assert!(
        shown.len() >= 5,
        "README.md's ride output is too short to be real: {shown:?}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sendonce-sim"))
        .arg("ride")
        .output()
        .expect("run sendonce-sim ride");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the README's ride failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Vec<String> = stdout.lines().map(masked).collect();
    let mut at = 0;
    for line in &shown {
        let want = masked(line);
        match printed[at..].iter().position(|p| *p == want) {
            Some(i) => at += i + 1,
            None => panic!(
                "README.md shows a line the ride no longer prints (numbers masked):\n  {line}\n\
                 the ride printed:\n{stdout}"
            ),
        }
    }
}
