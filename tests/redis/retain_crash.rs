//! Crash safety of retention on Redis: this binary re-run as a child (the
//! same trial, `CHECKPOINTER_RETAIN_CRASH_URL` set to the store's URL with
//! its key prefix) applies a policy in batches of four and is SIGKILLed at
//! a random moment; each batch is one script, which the server runs whole
//! or not at all. Then every thread reads whole, `verify` finds no missing
//! parent and no orphan write, and every checkpoint the policy keeps is as
//! it was; after the rounds one uninterrupted run leaves exactly what the
//! policy keeps. `RETAIN_CRASH_ROUNDS` sets the number of rounds (default 5).

use std::process::Command;

use crate::harness;
use crate::redis_support::{cleanup, fresh_prefix, saver_on, url};
use crate::retention_support as support;

const CHILD_ENV: &str = "CHECKPOINTER_RETAIN_CRASH_URL";
const NAME: &str = "retain_crash::retention_survives_sigkill";

async fn retention_survives_sigkill() {
    if let Ok(store) = std::env::var(CHILD_ENV) {
        let saver = checkpointer::open(&store).await.unwrap();
        support::child_run(saver.as_ref()).await;
        return;
    }
    let prefix = fresh_prefix();
    let saver = saver_on(prefix.clone()).await;
    let store = format!("{}?prefix={prefix}", url());
    let child = || {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.arg(NAME).env(CHILD_ENV, &store);
        cmd
    };
    // no Python LangGraph saver reads this layout (the package's own
    // RedisSaver does, in python/tests): Rust's reads only
    support::crash_rounds(&saver, child, || async {}).await;
    drop(saver);
    cleanup(&prefix).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::tokio(NAME, &[&crate::REDIS], 2, retention_survives_sigkill)]
}
