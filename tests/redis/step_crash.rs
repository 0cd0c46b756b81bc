//! Atomic steps under SIGKILL on the Redis server
//! (`tests/support/step_crash.rs`), on a key prefix of its own: the child
//! is this binary re-run with `CHECKPOINTER_STEP_CRASH_URL` set, which
//! `main` hands to the child.

use std::process::Command;
use std::sync::Arc;

use crate::harness;
use crate::redis_support::{cleanup, fresh_prefix, saver_on, url};
use crate::step_crash_support as step_crash;

async fn atomic_steps_survive_sigkill() {
    let prefix = fresh_prefix();
    let saver = Arc::new(saver_on(prefix.clone()).await);
    let child = || Command::new(std::env::current_exe().unwrap());
    let store = format!("{}?prefix={prefix}", url());
    let report = step_crash::run(saver, &store, child, step_crash::rounds()).await;
    println!("redis: {report:?}");
    cleanup(&prefix).await;
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::tokio(
        "step_crash::atomic_steps_survive_sigkill",
        &[&crate::REDIS],
        2,
        atomic_steps_survive_sigkill,
    )]
}
