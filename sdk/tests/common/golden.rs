//! The store files older SDKs wrote (`tests/golden/`, each made by its version's own code: see its README).

use std::path::{Path, PathBuf};

/// A copy of `tests/golden/<file>` in `dir` (as `device.db`), for a test to open and change.
pub fn copy(file: &str, dir: &Path) -> PathBuf {
    let db = dir.join("device.db");
    std::fs::copy(
        format!("{}/tests/golden/{file}", env!("CARGO_MANIFEST_DIR")),
        &db,
    )
    .unwrap_or_else(|e| panic!("tests/golden/{file}: {e}"));
    db
}
