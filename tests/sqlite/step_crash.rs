//! Atomic steps under SIGKILL on one SQLite file
//! (`tests/support/step_crash.rs`): the child is this binary re-run as
//! `step_crash_child`.

use std::process::Command;
use std::sync::Arc;

use checkpointer::sqlite::SqliteSaver;

use crate::sqlite_support::test_name;
use crate::step_crash_support as step_crash;

/// The child: stores steps until killed. Ignored unless run by the parent.
#[test]
#[ignore = "run by atomic_steps_survive_sigkill in a child process"]
fn step_crash_child() {
    step_crash::child_if_asked();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_steps_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("steps.sqlite");
    let url = format!("sqlite://{}", path.display());
    let saver = Arc::new(SqliteSaver::open(&path).await.unwrap());
    let child = || {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        let name = test_name(concat!(module_path!(), "::step_crash_child"));
        cmd.args([name, "--exact", "--ignored", "--nocapture", "--test-threads=1"]);
        cmd
    };
    let report = step_crash::run(saver, &url, child, step_crash::rounds()).await;
    println!("sqlite: {report:?}");
}
