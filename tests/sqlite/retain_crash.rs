//! Crash safety of retention on SQLite: a child process (this binary, re-run
//! as `retain_crash_child`) applies a policy in batches of four to a store
//! of long threads and is SIGKILLed at a random moment; then every thread
//! reads whole, `verify` finds no missing parent and no orphan write, and
//! every checkpoint the policy keeps is as it was. After the rounds one
//! uninterrupted run leaves exactly what the policy keeps.
//! `RETAIN_CRASH_ROUNDS` sets the number of rounds (default 5).

use checkpointer::sqlite::SqliteSaver;

use crate::retention_support as support;
use crate::sqlite_support::{child_test, in_child};

const CHILD_ENV: &str = "CHECKPOINTER_RETAIN_CRASH_DB";

#[test]
#[ignore = "run by retention_survives_sigkill in a child process"]
fn retain_crash_child() {
    in_child(CHILD_ENV, |path| async move {
        let saver = SqliteSaver::open(&path).await.unwrap();
        support::child_run(&saver).await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retain.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let child = || child_test(concat!(module_path!(), "::retain_crash_child"), CHILD_ENV, &path, false);
    let store = path.to_str().unwrap();
    support::crash_rounds(&saver, child, || support::python_reads(&saver, "sqlite", store)).await;
    support::python_resumes(&saver, "sqlite", store).await;
    saver.close().await.unwrap();
}
