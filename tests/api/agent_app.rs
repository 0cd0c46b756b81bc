//! `examples/agent_app.rs`, the newcomer's agent app on the step calls: its
//! scenario (a loop back to plan, a human interrupt answered twice, a crash
//! after `act` and the rerun reusing its writes, history, a fork answered
//! differently) gives the same states on SQLite, PostgreSQL and Redis,
//! opened by URL alone, and every thread it writes passes the row verifier.
//! A child process killed with SIGKILL right after `act`'s writes are saved
//! leaves a SQLite thread that the next run finishes without running `act`
//! again.

use std::io::BufRead;
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::verify::verify_thread;

use crate::harness;

#[path = "../../examples/agent_app.rs"]
#[allow(dead_code)]
mod app;

/// The environment variable that makes this test binary the child that
/// runs up to `act` on the SQLite file it names, then waits to be killed.
pub(crate) const CHILD: &str = "CHECKPOINTER_AGENT_APP_CHILD";

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{tag}-{}-{nanos:08x}", std::process::id())
}

/// The scenario on the store at `url`: what it sees, and no violation in
/// the threads it writes.
async fn scenario_on(url: &str) {
    let saver = checkpointer::open(url).await.unwrap();
    let prefix = unique("app");
    let seen = app::scenario(saver.clone(), &prefix).await.unwrap();
    assert_eq!(
        seen.questions,
        [Value::from("approve draft 2?"), Value::from("approve draft 3?")]
    );
    assert_eq!(seen.approved.count, 3);
    assert_eq!(seen.approved.verdict, "yes");
    assert_eq!(
        seen.approved.log,
        strings(&[
            "goal: a haiku",
            "plan: draft 1",
            "act: draft 1",
            "review: too early",
            "plan: draft 2",
            "act: draft 2",
            "review: again",
            "plan: draft 3",
            "act: draft 3",
            "review: yes",
        ])
    );
    // the crash came right after act's writes were saved; the rerun reused them
    assert_eq!(seen.crashed_ran, ["__start__", "plan", "act"]);
    assert_eq!(seen.recovered_ran, ["review", "plan", "act", "review"]);
    assert_eq!(seen.recovered.count, 2, "{:?}", seen.recovered);
    assert_eq!(seen.recovered.log.iter().filter(|l| l.starts_with("act")).count(), 2);
    // history, newest first: one checkpoint per step, each naming what runs next
    let steps: Vec<i64> = seen.history.iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, (-1..=9).rev().collect::<Vec<_>>());
    let next: Vec<&str> = seen
        .history
        .iter()
        .map(|(_, n)| n.first().map_or("", String::as_str))
        .collect();
    assert_eq!(
        next,
        [
            "",
            "review",
            "act",
            "plan",
            "review",
            "act",
            "plan",
            "review",
            "act",
            "plan",
            "__start__"
        ]
    );
    // the fork from the first question, approved there at once
    assert_eq!(seen.forked.count, 2);
    assert_eq!(seen.forked.log.last().map(String::as_str), Some("review: yes"));
    assert_eq!(seen.forked.log.len(), 7);
    for thread in ["main", "crash"] {
        let report = verify_thread(saver.as_ref(), &format!("{prefix}-{thread}"))
            .await
            .unwrap();
        let shown: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert!(report.is_ok(), "{url} {thread}: {shown:#?}");
        assert!(report.checkpoints >= 6 && report.writes > 0, "{report:?}");
    }
}

async fn the_app_runs_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    scenario_on(&format!("sqlite://{}", dir.path().join("app.sqlite").display())).await;
}

#[cfg(feature = "postgres")]
async fn the_app_runs_on_postgres() {
    let Some(db) = crate::postgres_support::shared_database() else {
        return;
    };
    scenario_on(&crate::postgres_support::url_of(&db)).await;
}

#[cfg(feature = "redis")]
async fn the_app_runs_on_redis() {
    use crate::redis_support;
    let prefix = redis_support::fresh_prefix();
    scenario_on(&format!("{}?prefix={prefix}", redis_support::url())).await;
    redis_support::cleanup(&prefix).await;
}

/// The child: runs the app's thread on the SQLite file up to `act`'s saved
/// writes, says so, and waits to be killed.
pub(crate) fn child(path: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let saver = checkpointer::open(&format!("sqlite://{path}")).await.unwrap();
        let thread = Thread::new(saver.clone(), "killed");
        let input = Value::map([("log", Value::from(vec!["goal: a haiku"]))]);
        let mut ran = Vec::new();
        let end = app::run(thread.start(input, None).await.unwrap(), Some("act"), &mut ran)
            .await
            .unwrap();
        assert_eq!(end, app::End::Crashed);
        println!("saved after {ran:?}");
        tokio::time::sleep(std::time::Duration::from_secs(120)).await;
    });
}

/// A real kill -9 of a process that had saved `act`'s writes: the next run
/// reuses them (`act` does not run again, `count` is 1 after it).
async fn a_sigkilled_run_resumes_from_its_saved_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.sqlite");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .env(CHILD, &path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert_eq!(line.trim(), r#"saved after ["__start__", "plan", "act"]"#);
    assert!(!status.success(), "{status:?}");

    let saver: Arc<dyn CheckpointSaver> = checkpointer::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let thread = Thread::new(saver.clone(), "killed");
    let step = thread.step().await.unwrap().expect("the killed step is stored");
    assert_eq!(step.to_run(), Vec::<TaskState>::new(), "act's writes are reused");
    let mut ran = Vec::new();
    let end = app::run(step, None, &mut ran).await.unwrap();
    assert!(matches!(end, app::End::Asked(_)), "{end:?}");
    assert_eq!(ran, ["review", "plan", "act", "review"]);
    let state: app::State = thread.state().await.unwrap().unwrap().values;
    assert_eq!(state.count, 2);
    let report = verify_thread(saver.as_ref(), "killed").await.unwrap();
    assert!(report.is_ok(), "{:?}", report.violations);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio("agent_app::the_app_runs_on_sqlite", &[], 2, the_app_runs_on_sqlite),
        #[cfg(feature = "postgres")]
        harness::tokio(
            "agent_app::the_app_runs_on_postgres",
            &[&crate::POSTGRES],
            2,
            the_app_runs_on_postgres,
        ),
        #[cfg(feature = "redis")]
        harness::tokio(
            "agent_app::the_app_runs_on_redis",
            &[&crate::REDIS],
            2,
            the_app_runs_on_redis,
        ),
        harness::tokio(
            "agent_app::a_sigkilled_run_resumes_from_its_saved_writes",
            &[],
            2,
            a_sigkilled_run_resumes_from_its_saved_writes,
        ),
    ]
}
