//! One graph run by the mini runtime and by Python LangGraph on two SQLite
//! files side by side, compared row by row: what the runtime tests against
//! a Python peer script (`scripts/*_peer.py`) share.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::sqlite::SqliteSaver;
use serde_json::Value as Json;

use crate::mini_runtime::assert_verifies;
use crate::sqlite_support;

/// A peer script and two files in a temporary directory: `ours` (the
/// runtime writes it) and `theirs` (Python's runtime writes it).
pub(crate) struct SideBySide {
    /// The peer venv's Python.
    pub(crate) py: PathBuf,
    script: &'static str,
    _dir: tempfile::TempDir,
    pub(crate) ours: PathBuf,
    pub(crate) theirs: PathBuf,
}

impl SideBySide {
    /// The files, for the peer `scripts/<script>`; `None` when the test is
    /// to return (as [`sqlite_support::require_python`] decides).
    pub(crate) fn new(script: &'static str) -> Option<SideBySide> {
        let py = sqlite_support::require_python()?;
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs) = (dir.path().join("rust.sqlite"), dir.path().join("python.sqlite"));
        Some(SideBySide {
            py,
            script,
            _dir: dir,
            ours,
            theirs,
        })
    }

    /// Runs a command of the peer and returns its JSON output.
    pub(crate) fn python(&self, args: &[&str]) -> Json {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scripts")
            .join(self.script);
        let (ok, stdout, stderr) = sqlite_support::run_python(&self.py, &script, args);
        assert!(ok, "{} {args:?} failed:\n{stderr}", self.script);
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    /// `run`, `resume` or `history` (`cmd`) of the peer's graph `graph` on
    /// `db`'s thread `thread`, with the command's own arguments `extra`.
    pub(crate) fn graph(&self, cmd: &str, graph: &str, db: &Path, thread: &str, extra: &[&str]) -> Json {
        let db = db.to_str().unwrap();
        self.python(&[&[cmd, "--graph", graph, "--db", db, "--thread", thread][..], extra].concat())
    }

    /// The peer's `dump` of `db`'s thread `thread`, as it prints it.
    pub(crate) fn dump(&self, db: &Path, thread: &str) -> Json {
        self.python(&["dump", "--db", db.to_str().unwrap(), "--thread", thread])
    }

    /// Thread `thread` of both files verifies, with `checkpoints`
    /// checkpoints each; `saver` is the runtime's saver on `ours`.
    pub(crate) async fn assert_both_verify(&self, saver: &Arc<dyn CheckpointSaver>, thread: &str, checkpoints: usize) {
        assert_eq!(assert_verifies(saver, thread).await, checkpoints);
        assert_eq!(assert_verifies(&open(&self.theirs).await, thread).await, checkpoints);
    }
}

/// A saver on the SQLite file `path`.
pub(crate) async fn open(path: &Path) -> Arc<dyn CheckpointSaver> {
    Arc::new(SqliteSaver::open(path).await.unwrap())
}

/// Equal dumps (normalized), row by row, then as a whole, with
/// `checkpoints` checkpoints.
pub(crate) fn assert_same_rows(ours: &Json, theirs: &Json, checkpoints: usize) {
    for table in ["checkpoints", "writes"] {
        let (a, b) = (ours[table].as_array().unwrap(), theirs[table].as_array().unwrap());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert_eq!(x, y, "{table} row {i} differs (ours, then Python's)");
        }
        assert_eq!(a.len(), b.len(), "{table}, ours then Python's: {a:#?}\n{b:#?}");
    }
    assert_eq!(ours["checkpoints"].as_array().unwrap().len(), checkpoints);
    assert_eq!(ours, theirs);
}
