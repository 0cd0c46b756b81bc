//! Helpers shared by the SQLite integration tests: where the shared fixtures
//! and the Python peer live, temporary copies, and a tiny graph runner.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this run is CI (`CI=true`), where a missing prerequisite fails.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// `../shared` (or the nearest ancestor's `shared/`) holding `fixtures/` and
/// `peer/`; `CHECKPOINTER_SHARED_DIR` overrides.
pub fn shared_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("CHECKPOINTER_SHARED_DIR") {
        return Some(PathBuf::from(dir));
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .skip(1)
        .map(|a| a.join("shared"))
        .find(|d| d.join("fixtures").is_dir())
}

/// The shared directory, or `None` after printing why the test is skipped.
/// In CI a missing directory fails the test.
pub fn require_shared() -> Option<PathBuf> {
    match shared_dir() {
        Some(d) => Some(d),
        None if in_ci() => panic!("../shared/fixtures is missing: compatibility tests cannot run in CI"),
        None => {
            eprintln!("skipped: ../shared/fixtures not found (set CHECKPOINTER_SHARED_DIR)");
            None
        }
    }
}

/// The Python of the peer venv (`CHECKPOINTER_PYTHON`, made by
/// `scripts/python-venv.sh`), or `None` after printing why the test is
/// skipped. In CI a missing Python fails the test.
pub fn require_python() -> Option<PathBuf> {
    match std::env::var("CHECKPOINTER_PYTHON") {
        Ok(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ if in_ci() => panic!("CHECKPOINTER_PYTHON is not set: the Python compatibility tests must run in CI"),
        _ => {
            eprintln!(
                "skipped: set CHECKPOINTER_PYTHON=$(scripts/python-venv.sh) to run the Python compatibility checks"
            );
            None
        }
    }
}

/// The fixture databases (`*.sqlite`) with their names, sorted.
pub fn fixtures(shared: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(shared.join("fixtures"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_owned();
            name.ends_with(".sqlite").then_some((name, path))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixtures in {}", shared.display());
    out
}

/// A copy of `file` in a fresh temporary directory (the saver writes to the
/// files it opens: WAL mode, indexes), under the same file name.
pub fn temp_copy(file: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join(file.file_name().unwrap());
    std::fs::copy(file, &copy).unwrap();
    (dir, copy)
}

/// Runs a Python script with arguments; returns (status ok, stdout, stderr).
pub fn run_python(python: &Path, script: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
