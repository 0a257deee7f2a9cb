//! A real small disk: a tmpfs mounted for one test (needs root; CI runs as root), and a filler that fills it.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

/// A mounted tmpfs, unmounted (lazily) on drop.
pub struct SmallDisk {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (e.g. "1m"); `None` when this machine cannot (not root).
    pub fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small");
        std::fs::create_dir(&path).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        mounted.then_some(Self { path, _dir: dir })
    }

    /// Fills every free byte with one file; returns its path (remove it to free the space).
    pub fn fill(&self) -> PathBuf {
        let filler = self.path.join("filler");
        fill_file(&filler);
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}

/// Appends to `path` until the file system refuses a single byte more.
fn fill_file(path: &Path) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for chunk in [64 * 1024, 4096, 512, 1] {
        let bytes = vec![0xAB; chunk];
        while file.write_all(&bytes).is_ok() {}
    }
    let _ = file.sync_all();
}
