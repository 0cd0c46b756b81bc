//! Crash safety of retention on SQLite: a child process (this binary, re-run
//! as `retain_crash_child`) applies a policy in batches of four to a store
//! of long threads and is SIGKILLed at a random moment; then every thread
//! reads whole, `verify` finds no missing parent and no orphan write, and
//! every checkpoint the policy keeps is as it was. After the rounds one
//! uninterrupted run leaves exactly what the policy keeps.
//! `RETAIN_CRASH_ROUNDS` sets the number of rounds (default 5).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use checkpointer::sqlite::SqliteSaver;
use checkpointer::CheckpointSaver;

use crate::retention_support as support;
use crate::sqlite_support::test_name;

const CHILD_ENV: &str = "CHECKPOINTER_RETAIN_CRASH_DB";

#[test]
#[ignore = "run by retention_survives_sigkill in a child process"]
fn retain_crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let saver = SqliteSaver::open(&path).await.unwrap();
        println!("START");
        saver.retain(&support::policy(), support::options()).await.unwrap();
        println!("DONE");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_survives_sigkill() {
    let rounds: usize = std::env::var("RETAIN_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retain.sqlite");
    let kept = support::expected_kept().await;
    let saver = SqliteSaver::open(&path).await.unwrap();
    support::fill(&saver).await;
    let original = support::snapshot(&saver).await;
    saver.close().await.unwrap();
    let mut killed_mid_run = 0;
    for round in 0..rounds {
        // the fill is restored each round, so each kill lands in a run
        let saver = SqliteSaver::open(&path).await.unwrap();
        support::fill(&saver).await;
        saver.close().await.unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                test_name(concat!(module_path!(), "::retain_crash_child")),
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
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
        let saver = SqliteSaver::open(&path).await.unwrap();
        support::check_after_crash(&saver, &original, &kept).await;
        saver.close().await.unwrap();
        eprintln!(
            "round {round}: killed {}",
            if finished { "after the run" } else { "mid-run" }
        );
    }
    assert!(killed_mid_run > 0 || rounds == 0, "no round killed a run at work");
    let saver = SqliteSaver::open(&path).await.unwrap();
    support::check_finished(&saver, &kept).await;
}
