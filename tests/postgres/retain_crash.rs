//! Crash safety of retention on PostgreSQL: this binary re-run as a child
//! (the same trial, `CHECKPOINTER_RETAIN_CRASH_URL` set) applies a policy in
//! batches of four and is SIGKILLed at a random moment; each batch is one
//! transaction, so the server rolls back the one in flight. Then every
//! thread reads whole, `verify` finds no missing parent and no orphan
//! write, and every checkpoint the policy keeps is as it was; after the
//! rounds one uninterrupted run leaves exactly what the policy keeps.
//! `RETAIN_CRASH_ROUNDS` sets the number of rounds (default 5).

use std::process::Command;

use checkpointer::postgres::PostgresSaver;

use crate::retention_support as support;
use crate::{harness, postgres_support};

const CHILD_ENV: &str = "CHECKPOINTER_RETAIN_CRASH_URL";
const NAME: &str = "retain_crash::retention_survives_sigkill";

async fn retention_survives_sigkill() {
    if let Ok(url) = std::env::var(CHILD_ENV) {
        let saver = PostgresSaver::open(&url).await.unwrap();
        support::child_run(&saver).await;
        return;
    }
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let url = postgres_support::url_of(&db.0);
    let saver = PostgresSaver::open(&url).await.unwrap();
    let child = || {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.arg(NAME).env(CHILD_ENV, &url);
        cmd
    };
    support::crash_rounds(&saver, child, || support::python_reads(&saver, "postgres", &url)).await;
    support::python_resumes(&saver, "postgres", &url).await;
    drop(saver);
    drop(db);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::tokio(NAME, &[&crate::POSTGRES], 2, retention_survives_sigkill)]
}
