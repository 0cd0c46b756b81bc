//! Atomic steps under SIGKILL, on any backend by URL: a child process (this
//! test binary re-run) stores steps with `put_step_with_writes` in a loop on
//! two threads at once — one through a fenced saver, one through the plain
//! saver — each step three tasks' writes (two each) and the next
//! checkpoint, every write's value naming the checkpoint it precedes. The
//! parent kills the child with SIGKILL after a random number of
//! acknowledged steps and a random delay (so most kills land inside a step),
//! checks the steps written since the last kill with one `list` per thread,
//! starts a new child that resumes each thread from its latest checkpoint,
//! and repeats. After the last round it checks each whole thread.
//!
//! The check, for every checkpoint C listed: if C has a child X (the
//! checkpoint whose parent is C), C's pending writes are exactly the step's
//! six writes naming X; if C has none (the tip), C has no pending writes.
//! So no checkpoint is present without its step's writes, and no step's
//! writes without their checkpoint.
//!
//! `CHECKPOINTER_STEP_CRASH_ROUNDS` sets the number of rounds (default 100;
//! the 10 000 of `docs/reliability.md` are this with the variable set).

#![allow(dead_code)] // each binary uses what it needs

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::atomic::AtomicSteps;
use checkpointer::fence::Fence;
use checkpointer::{
    CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt, CheckpointSource, CheckpointTuple,
    ListOptions, OpenOptions, PendingWrite, StepCheckpoint, Value,
};

/// The child's store URL: set, the process is a child.
pub const CHILD_URL: &str = "CHECKPOINTER_STEP_CRASH_URL";
/// The child's thread-id base.
const CHILD_THREAD: &str = "CHECKPOINTER_STEP_CRASH_THREAD";
const TASKS: usize = 3;
const LEASE: Duration = Duration::from_secs(600);

/// The number of rounds: `CHECKPOINTER_STEP_CRASH_ROUNDS`, default 100.
pub fn rounds() -> usize {
    std::env::var("CHECKPOINTER_STEP_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// The two threads of a run: (fenced, plain).
fn threads(base: &str) -> [String; 2] {
    [format!("{base}-fenced"), format!("{base}-plain")]
}

/// The writes a step makes before the checkpoint `next`, stored against
/// its parent: each task's two, values naming `next`.
fn step_writes(next: &str) -> Vec<PendingWrite> {
    (0..TASKS)
        .flat_map(|k| {
            let path = format!("~__pregel_pull, node{k}");
            [
                PendingWrite::new(format!("task-{k}"), "w", format!("{next}/{k}/0")).with_task_path(path.clone()),
                PendingWrite::new(format!("task-{k}"), "v", format!("{next}/{k}/1"))
                    .with_task_path(path)
                    .with_idx(1),
            ]
        })
        .collect()
}

/// Runs the child when this process is one (`CHILD_URL` set): stores steps
/// until killed; never returns then. Returns when the process is not a
/// child.
pub fn child_if_asked() {
    let Ok(url) = std::env::var(CHILD_URL) else { return };
    let base = std::env::var(CHILD_THREAD).expect("thread base");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let admin = OpenOptions::new().open(&url).await.expect("open");
        let plain = admin.saver();
        let (_encoded, fenced) = admin
            .fenced(Fence::new(format!("{base}-writer"), LEASE))
            .expect("fenced");
        let [fenced_thread, plain_thread] = threads(&base);
        // the same writer identity as the killed child: it takes its
        // lease back at once (a restarted worker)
        fenced.acquire(&fenced_thread).await.expect("acquire");
        let plain = plain.clone();
        let a = tokio::spawn(async move { steps(fenced.as_ref(), &fenced_thread, "fenced").await });
        let b = tokio::spawn(async move {
            let atomic = plain
                .as_fenceable()
                .expect("every saver of the crate stores atomic steps");
            steps(atomic, &plain_thread, "plain").await
        });
        let (a, b) = futures::future::join(a, b).await;
        a.expect("fenced writer");
        b.expect("plain writer");
    });
    std::process::exit(0);
}

async fn steps(saver: &dyn AtomicSteps, thread: &str, tag: &str) {
    let mut parent: Option<CheckpointTuple> = saver.latest(thread).await.expect("latest");
    let mut n: i64 = parent.as_ref().map_or(-1, |t| t.metadata.step().unwrap_or(0));
    loop {
        n += 1;
        let next = |v: Option<&checkpointer::ChannelVersion>| saver.get_next_version(v);
        let (config, mut step) = match &parent {
            Some(t) => (t.config.clone(), t.checkpoint.successor(n)),
            None => (CheckpointConfig::new(thread), StepCheckpoint::first(n)),
        };
        let id = step.checkpoint().id.clone();
        step.write("n", Value::from(id.as_str()), next).expect("write");
        let writes = if parent.is_some() { step_writes(&id) } else { Vec::new() };
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, n);
        let stored = saver
            .put_step_with_writes(&config, &step, &meta, &writes)
            .await
            .unwrap_or_else(|e| panic!("step {n} of {thread}: {e}"));
        let mut out = std::io::stdout().lock();
        writeln!(out, "ACK {tag}").expect("stdout");
        out.flush().expect("stdout");
        parent = Some(stored);
    }
}

/// Checks one listing of a thread, newest first (a window of its newest
/// checkpoints, or all of them): every checkpoint with a child in the window
/// holds exactly the child's step writes, the newest holds none (it is the
/// tip: nothing was written after it). Returns the number checked.
fn check_window(thread: &str, tuples: &[CheckpointTuple], whole: bool, round: usize) -> usize {
    for (i, t) in tuples.iter().enumerate() {
        let id = &t.checkpoint.id;
        let mut got = t.pending_writes.clone();
        got.sort_by(|a, b| (&a.task_path, &a.task_id, a.idx).cmp(&(&b.task_path, &b.task_id, b.idx)));
        match i.checked_sub(1).map(|c| &tuples[c]) {
            None => assert!(
                got.is_empty(),
                "round {round}, {thread}: writes stored against the tip {id} without the checkpoint they precede: {got:?}"
            ),
            Some(child) => {
                let parent_id = child.parent_config.as_ref().and_then(|p| p.checkpoint_id.as_deref());
                assert_eq!(parent_id, Some(id.as_str()), "round {round}, {thread}: not one lineage");
                let want = step_writes(&child.checkpoint.id);
                assert_eq!(
                    got, want,
                    "round {round}, {thread}: the writes against {id} are not exactly those of the step that stored {}",
                    child.checkpoint.id
                );
            }
        }
    }
    if whole {
        let root = tuples.last().expect("a checkpoint");
        assert!(
            root.parent_config.is_none(),
            "{thread}: the oldest checkpoint has a parent"
        );
    }
    tuples.len()
}

async fn check(saver: &dyn CheckpointSaver, base: &str, limit: Option<usize>, round: usize) -> usize {
    let mut checked = 0;
    for thread in threads(base) {
        let options = ListOptions {
            limit,
            ..ListOptions::default()
        };
        let tuples = saver
            .list_vec(Some(CheckpointConfig::new(&thread)), options)
            .await
            .expect("list");
        if tuples.is_empty() {
            continue;
        }
        checked += check_window(&thread, &tuples, limit.is_none(), round);
    }
    checked
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    /// Kills.
    pub rounds: usize,
    /// Steps the children acknowledged.
    pub acked: usize,
    /// Checkpoints in the two threads at the end.
    pub checkpoints: usize,
    /// Wall time.
    pub elapsed: Duration,
}

/// Runs `rounds` kill rounds of a child made by `child` (the test binary,
/// with the arguments that run [`child_if_asked`]) against the store at
/// `url`, which the parent reads through `saver`.
pub async fn run(saver: Arc<dyn CheckpointSaver>, url: &str, child: impl Fn() -> Command, rounds: usize) -> Report {
    let base = format!("step-crash-{:x}", rand::random::<u64>());
    let start = Instant::now();
    let mut acked = 0;
    for round in 0..rounds {
        let mut cmd = child();
        let mut proc = cmd
            .env(CHILD_URL, url)
            .env(CHILD_THREAD, &base)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the child");
        let mut lines = BufReader::new(proc.stdout.take().expect("stdout")).lines();
        // after 1 to 6 acknowledged steps (of either thread), 0 to 1.5 ms on
        let wait_for = rand::random_range(1..=6);
        let mut seen = 0;
        while seen < wait_for {
            match lines.next() {
                Some(Ok(line)) if line.starts_with("ACK ") => seen += 1,
                Some(Ok(_)) => {}
                _ => break,
            }
        }
        if seen < wait_for {
            let status = proc.wait().expect("wait");
            let mut err = String::new();
            proc.stderr.take().expect("stderr").read_to_string(&mut err).ok();
            panic!("round {round}: the child ended by itself ({status}) after {seen} steps: {err}");
        }
        let delay = Duration::from_micros(rand::random_range(0..1500));
        let until = Instant::now() + delay;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        proc.kill().expect("SIGKILL");
        proc.wait().expect("wait");
        let rest = lines
            .filter(|l| l.as_ref().is_ok_and(|l| l.starts_with("ACK ")))
            .count();
        acked += seen + rest;
        // the steps of this round (at most `seen + rest` per thread), the
        // step in flight, and the one before them
        check(saver.as_ref(), &base, Some(seen + rest + 2), round).await;
    }
    let checkpoints = check(saver.as_ref(), &base, None, rounds).await;
    assert!(
        checkpoints >= acked,
        "{acked} steps acknowledged, {checkpoints} checkpoints stored"
    );
    for thread in threads(&base) {
        // the plain saver may delete the fenced thread: the lease is the
        // killed children's identity, not this saver's
        let _ = saver.delete_thread(&thread).await;
    }
    Report {
        rounds,
        acked,
        checkpoints,
        elapsed: start.elapsed(),
    }
}
