//! Atomic steps under SIGKILL on one PostgreSQL database
//! (`tests/support/step_crash.rs`): the child is this binary re-run with
//! `CHECKPOINTER_STEP_CRASH_URL` set, which `main` hands to the child.

use std::process::Command;
use std::sync::Arc;

use checkpointer::postgres::StatementMode;

use crate::harness;
use crate::postgres_support::{saver_on, shared_database, url_of};
use crate::step_crash_support as step_crash;

async fn atomic_steps_survive_sigkill() {
    let Some(db) = shared_database() else { return };
    let saver = Arc::new(saver_on(&db, StatementMode::Prepared, 2));
    let child = || Command::new(std::env::current_exe().unwrap());
    let report = step_crash::run(saver, &url_of(&db), child, step_crash::rounds()).await;
    println!("postgres: {report:?}");
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::tokio(
        "step_crash::atomic_steps_survive_sigkill",
        &[&crate::POSTGRES],
        2,
        atomic_steps_survive_sigkill,
    )]
}
