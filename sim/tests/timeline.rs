//! `sendonce-sim ride --timeline FILE.svg` draws the ride: a picture rsvg-convert renders at the
//! size it declares, one lane per phone plus the server's, with the ride's marks on it.

use std::path::Path;
use std::process::Command;

/// Width and height of a PNG, from its IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

/// Renders `svg` with rsvg-convert (Debian librsvg2-bin; scripts/setup-toolchains installs it).
fn render(svg: &Path) -> Vec<u8> {
    let png = svg.with_extension("png");
    let status = Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png)
        .arg(svg)
        .status()
        .expect(
            "rsvg-convert on PATH (apt-get install librsvg2-bin, or run scripts/setup-toolchains)",
        );
    assert!(
        status.success(),
        "rsvg-convert could not render {}",
        svg.display()
    );
    std::fs::read(png).unwrap()
}

#[test]
fn the_timeline_is_a_valid_picture_of_the_right_size() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("ride.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_sendonce-sim"))
        .args([
            "ride",
            "--seed",
            "7",
            "--users",
            "5",
            "--transfers",
            "6",
            "--kill-rate",
            "0.2",
        ])
        .args([
            "--server-faults",
            "0.05",
            "--clock-jump-rate",
            "0.2",
            "--server-clock-jump-rate",
            "0.05",
        ])
        .arg("--timeline")
        .arg(&svg)
        .output()
        .expect("sendonce-sim runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    for lane in ["server", "phone 0", "phone 4"] {
        assert!(text.contains(&format!(">{lane}</text>")), "no lane {lane}");
    }
    assert!(
        !text.contains(">phone 5</text>"),
        "one lane per phone, no more"
    );
    // Attempts (grey ticks), answers, final states, kills and clock jumps are all on it.
    for mark in [
        "stroke=\"#555\"",
        "fill=\"#2a9d2a\"",
        "l5 5 l-5 5",
        "stroke-width=\"2.5\"",
        "<title>clock",
    ] {
        assert!(text.matches(mark).count() > 1, "no {mark} on the timeline");
    }

    let png = render(&svg);
    assert_eq!(
        png_size(&png),
        (sendonce_sim::svg::WIDTH, sendonce_sim::svg::height(5))
    );
    // Not a blank page: the same size with nothing on it compresses to far less.
    let blank = dir.path().join("blank.svg");
    std::fs::write(
        &blank,
        sendonce_sim::svg::render("", &vec![sendonce_sim::svg::Lane::default(); 5], &[]),
    )
    .unwrap();
    let empty = render(&blank);
    assert_eq!(png_size(&empty), png_size(&png));
    assert!(
        png.len() > 2 * empty.len(),
        "the ride's picture looks empty ({} vs {} bytes)",
        png.len(),
        empty.len()
    );
}
