//! The README's line counts are the code's: each file's lines of code (comments and blank
//! lines aside, as rustfmt lays them out) as its table says, and the service's total as its
//! text says — so the claim "a service on the library is about 150 lines" is checked, not kept.

fn lines_of_code(path: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

#[test]
fn the_readme_counts_what_the_files_hold() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{dir}/README.md")).unwrap();
    let mut service = 0;
    for file in ["src/shop.rs", "src/main.rs", "src/demo.rs"] {
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{file}` |")))
            .unwrap_or_else(|| panic!("README.md has no table row for {file}"));
        let stated: usize = row
            .trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let counted = lines_of_code(&format!("{dir}/{file}"));
        assert_eq!(stated, counted, "README.md's count for {file}");
        if file != "src/demo.rs" {
            service += counted;
        }
    }
    let total = format!("at this commit: {service} for the\nservice");
    assert!(
        readme.contains(&total),
        "README.md should state the service's {service} lines"
    );
}
