//! Crash safety of retention on PostgreSQL: this binary re-run as a child
//! (the same trial, `CHECKPOINTER_RETAIN_CRASH_URL` set) applies a policy in
//! batches of four and is SIGKILLed at a random moment; each batch is one
//! transaction, so the server rolls back the one in flight. Then every
//! thread reads whole, `verify` finds no missing parent and no orphan
//! write, and every checkpoint the policy keeps is as it was; after the
//! rounds one uninterrupted run leaves exactly what the policy keeps.
//! `RETAIN_CRASH_ROUNDS` sets the number of rounds (default 5).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use checkpointer::postgres::PostgresSaver;
use checkpointer::CheckpointSaver;

use crate::retention_support as support;
use crate::{harness, postgres_support};

const CHILD_ENV: &str = "CHECKPOINTER_RETAIN_CRASH_URL";
const NAME: &str = "retain_crash::retention_survives_sigkill";

async fn retention_survives_sigkill() {
    if let Ok(url) = std::env::var(CHILD_ENV) {
        let saver = PostgresSaver::open(&url).await.unwrap();
        println!("START");
        saver.retain(&support::policy(), support::options()).await.unwrap();
        println!("DONE");
        return;
    }
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let url = postgres_support::url_of(&db.0);
    let rounds: usize = std::env::var("RETAIN_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let kept = support::expected_kept().await;
    let saver = PostgresSaver::open(&url).await.unwrap();
    support::fill(&saver).await;
    let original = support::snapshot(&saver).await;
    let mut killed_mid_run = 0;
    for round in 0..rounds {
        support::fill(&saver).await;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg(NAME)
            .env(CHILD_ENV, &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while let Some(Ok(line)) = lines.next() {
            if line == "START" {
                break;
            }
        }
        std::thread::sleep(support::random_pause(400));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let finished = lines.any(|l| l.is_ok_and(|l| l == "DONE"));
        if !finished {
            killed_mid_run += 1;
        }
        support::check_after_crash(&saver, &original, &kept).await;
        eprintln!(
            "round {round}: killed {}",
            if finished { "after the run" } else { "mid-run" }
        );
    }
    assert!(killed_mid_run > 0 || rounds == 0, "no round killed a run at work");
    support::check_finished(&saver, &kept).await;
    drop(saver);
    drop(db);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::tokio(NAME, &[&crate::POSTGRES], 2, retention_survives_sigkill)]
}
