//! A store for retention crash tests, the same on every backend: threads of
//! long chains with interrupts, marks, a fork and a delta channel, with
//! deterministic ids, so the checkpoints a policy keeps can be computed on
//! an `InMemorySaver` filled the same way.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use checkpointer::retention::{RetainOptions, RetentionPolicy};
use checkpointer::verify::{verify_thread, ViolationKind};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, CheckpointTuple, InMemorySaver, ListOptions, Value,
};

pub const THREADS: [&str; 3] = ["retain-a", "retain-b", "retain-c"];
pub const STEPS: u64 = 150;

pub fn policy() -> RetentionPolicy {
    RetentionPolicy::new().keep_last(10)
}

pub fn options() -> RetainOptions {
    RetainOptions::default().batch(4)
}

fn id(i: u64) -> String {
    format!("1ef00000-0000-6000-8000-{i:012x}")
}

/// Fills `saver` with the threads: each a chain of [`STEPS`] checkpoints
/// with a write each, an interrupt every 37 steps, a mark every 53, a
/// delta channel with a seed every 25 steps, and a fork at step 60.
pub async fn fill(saver: &dyn CheckpointSaver) {
    for (t, thread) in THREADS.iter().enumerate() {
        let mut parent = CheckpointConfig::new(*thread);
        let mut at_60 = None;
        for i in 0..STEPS {
            let mut cp = Checkpoint::new(i as i64);
            cp.id = id(i * 4 + t as u64);
            cp.ts = "2024-01-01T00:00:00+00:00".into();
            let v = ChannelVersion::Int(i as i64 + 1);
            cp.channel_values.insert("step".into(), Value::Int(i as i64));
            cp.channel_versions.insert("step".into(), v.clone());
            cp.channel_versions.insert("log".into(), v.clone());
            if i % 25 == 0 {
                cp.channel_values
                    .insert("log".into(), Value::from(vec![format!("seed {i}")]));
            }
            let mut md = CheckpointMetadata::new(CheckpointSource::Loop, i as i64);
            md.insert(
                "counters_since_delta_snapshot",
                Value::map([("log", Value::from(vec![(i % 25) as i64, (i % 25) as i64]))]),
            );
            if i % 53 == 7 {
                md.insert("pinned", true);
            }
            let new: ChannelVersions = cp.channel_versions.clone();
            parent = saver.put(&parent, &cp, &md, &new).await.unwrap();
            let mut writes = vec![("log".to_owned(), Value::from(format!("w{i}")))];
            if i % 37 == 5 {
                writes.push(("__interrupt__".to_owned(), Value::from("ask")));
            }
            saver.put_writes(&parent, &writes, "task", "").await.unwrap();
            if i == 60 {
                at_60 = Some(parent.clone());
            }
        }
        // a fork from step 60, one checkpoint long, older than the tip
        let mut cp = Checkpoint::new(61);
        cp.id = id(STEPS * 4 + t as u64);
        cp.ts = "2024-01-01T00:00:00+00:00".into();
        let md = CheckpointMetadata::new(CheckpointSource::Update, 61);
        saver
            .put(&at_60.unwrap(), &cp, &md, &ChannelVersions::new())
            .await
            .unwrap();
    }
}

/// Every checkpoint of the threads, by (thread, ns, id).
pub async fn snapshot(saver: &dyn CheckpointSaver) -> BTreeMap<(String, String, String), CheckpointTuple> {
    let mut out = BTreeMap::new();
    for thread in THREADS {
        let all = saver
            .list_vec(Some(CheckpointConfig::all_namespaces(thread)), ListOptions::default())
            .await
            .unwrap();
        for t in all {
            let key = (thread.to_owned(), t.config.ns().to_owned(), t.checkpoint.id.clone());
            out.insert(key, t);
        }
    }
    out
}

/// The keys the policy keeps: the survivors of an uninterrupted run on an
/// `InMemorySaver` filled the same way.
pub async fn expected_kept() -> Vec<(String, String, String)> {
    let memory = InMemorySaver::new();
    fill(&memory).await;
    memory.retain(&policy(), options()).await.unwrap();
    snapshot(&memory).await.into_keys().collect()
}

/// After an interrupted run: every thread reads whole, `verify` finds no
/// missing parent and no orphan write, and every kept checkpoint is as it
/// was (its parent kept or cleared).
pub async fn check_after_crash(
    saver: &dyn CheckpointSaver,
    original: &BTreeMap<(String, String, String), CheckpointTuple>,
    kept: &[(String, String, String)],
) {
    let now = snapshot(saver).await;
    for key in kept {
        let before = &original[key];
        let after = now.get(key).unwrap_or_else(|| panic!("{key:?} is gone"));
        assert_eq!(after.checkpoint, before.checkpoint, "{key:?}");
        assert_eq!(after.metadata, before.metadata, "{key:?}");
        assert_eq!(after.pending_writes, before.pending_writes, "{key:?}");
        if after.parent_config != before.parent_config {
            assert_eq!(after.parent_config, None, "{key:?}: parent changed");
        }
    }
    for thread in THREADS {
        let report = verify_thread(saver, thread).await.unwrap();
        for kind in [ViolationKind::MissingParent, ViolationKind::OrphanWrites] {
            let found: Vec<_> = report.of_kind(kind).collect();
            assert!(found.is_empty(), "{thread}: {found:?}");
        }
    }
}

/// The end state once a run completes: exactly the kept checkpoints.
pub async fn check_finished(saver: &dyn CheckpointSaver, kept: &[(String, String, String)]) {
    let report = saver.retain(&policy(), options()).await.unwrap();
    let _ = report;
    let now: Vec<_> = snapshot(saver).await.into_keys().collect();
    assert_eq!(now, kept);
}

/// `RETAIN_CRASH_ROUNDS`, 5 unless set.
pub fn rounds() -> usize {
    std::env::var("RETAIN_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

/// The child's side of a crash round: the policy run whole on `saver`,
/// `START` printed before and `DONE` after.
pub async fn child_run(saver: &dyn CheckpointSaver) {
    println!("START");
    saver.retain(&policy(), options()).await.unwrap();
    println!("DONE");
}

/// Starts `child` (which runs [`child_run`]) and SIGKILLs it at a random
/// moment after its `START`; whether it had printed `DONE` by then.
pub fn kill_midway(mut child: Command) -> bool {
    let mut child = child.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        if line == "START" {
            break;
        }
    }
    std::thread::sleep(random_pause(400));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    lines.any(|l| l.is_ok_and(|l| l == "DONE"))
}

/// The rounds of a retention crash test on `saver`'s store: each refills
/// the store (so each kill lands in a run), runs `child()` and kills it
/// midway, then checks what is left ([`check_after_crash`]) and runs
/// `after_round` (a reader in another language); then one uninterrupted
/// run leaves exactly what the policy keeps.
pub async fn crash_rounds<F: std::future::Future<Output = ()>>(
    saver: &dyn CheckpointSaver,
    child: impl Fn() -> Command,
    mut after_round: impl FnMut() -> F,
) {
    let rounds = rounds();
    let kept = expected_kept().await;
    fill(saver).await;
    let original = snapshot(saver).await;
    let mut killed_mid_run = 0;
    for round in 0..rounds {
        fill(saver).await;
        let finished = kill_midway(child());
        if !finished {
            killed_mid_run += 1;
        }
        check_after_crash(saver, &original, &kept).await;
        after_round().await;
        eprintln!(
            "round {round}: killed {}",
            if finished { "after the run" } else { "mid-run" }
        );
    }
    assert!(killed_mid_run > 0 || rounds == 0, "no round killed a run at work");
    check_finished(saver, &kept).await;
}

/// Python LangGraph on the store: a graph whose state is the fill's
/// channels (`step`, and `log` as a plain value), on Python's own saver of
/// `kind` ("sqlite": a file path; "postgres": a URL). `read`: each thread's
/// `get_state_history` run to its end, its length and whether its oldest
/// has no parent, and `get_state`'s step; `resume`: each thread continued
/// from its latest checkpoint with a new input, the step its node wrote.
const PYTHON_READER: &str = r#"
import json, sys
from typing import TypedDict
from langgraph.graph import StateGraph, START, END

class State(TypedDict, total=False):
    step: int
    log: list

builder = StateGraph(State)
builder.add_node("bump", lambda s: {"step": s["step"] + 1})
builder.add_edge(START, "bump")
builder.add_edge("bump", END)

def saver_cm(kind, where):
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        return SqliteSaver.from_conn_string(where)
    from langgraph.checkpoint.postgres import PostgresSaver
    return PostgresSaver.from_conn_string(where)

kind, where, phase, threads = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
out = {}
with saver_cm(kind, where) as saver:
    graph = builder.compile(checkpointer=saver)
    for thread in threads:
        config = {"configurable": {"thread_id": thread}}
        if phase == "read":
            history = list(graph.get_state_history(config))
            out[thread] = {
                "history": len(history),
                "oldest_has_parent": history[-1].parent_config is not None,
                "step": graph.get_state(config).values.get("step"),
            }
        else:
            latest = graph.get_state(config).values.get("step", 0)
            done = graph.invoke({"step": latest}, config, durability="sync")
            out[thread] = {"latest": latest, "step": done["step"]}
print(json.dumps(out))
"#;

/// Runs [`PYTHON_READER`] on the store (`CHECKPOINTER_PYTHON`; without it
/// the read is skipped with a note, and fails under `CI=true`).
pub fn python_reader(kind: &str, store: &str, phase: &str) -> Option<serde_json::Value> {
    let python = match std::env::var("CHECKPOINTER_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("CHECKPOINTER_PYTHON is not set (CI=true)"),
        _ => {
            eprintln!("CHECKPOINTER_PYTHON is not set: Python LangGraph's read skipped");
            return None;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("reader.py");
    std::fs::write(&script, PYTHON_READER).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .args([kind, store, phase])
        .args(THREADS)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Python LangGraph failed on the store:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    Some(serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap())
}

/// After a crash round: Python LangGraph reads every thread's history to
/// its end, as long as Rust lists it, and its latest state.
pub async fn python_reads(saver: &dyn CheckpointSaver, kind: &str, store: &str) {
    let Some(got) = python_reader(kind, store, "read") else {
        return;
    };
    for thread in THREADS {
        let rust = saver
            .list_vec(Some(CheckpointConfig::new(thread)), ListOptions::default())
            .await
            .unwrap();
        let seen = &got[thread];
        assert_eq!(seen["history"].as_u64(), Some(rust.len() as u64), "{thread}: {seen}");
        let oldest = rust.last().unwrap();
        assert_eq!(
            seen["oldest_has_parent"].as_bool(),
            Some(oldest.parent_config.is_some()),
            "{thread}: {seen}"
        );
        assert_eq!(seen["step"].as_i64(), step_of(&rust[0]), "{thread}: {seen}");
    }
}

/// At the end: Python LangGraph continues every thread from its latest
/// checkpoint; the step its node wrote follows the latest, and the thread
/// still verifies.
pub async fn python_resumes(saver: &dyn CheckpointSaver, kind: &str, store: &str) {
    let Some(got) = python_reader(kind, store, "resume") else {
        return;
    };
    for thread in THREADS {
        let seen = &got[thread];
        let latest = seen["latest"].as_i64().unwrap();
        assert_eq!(seen["step"].as_i64(), Some(latest + 1), "{thread}: {seen}");
        let now = saver.latest(thread).await.unwrap().unwrap();
        assert_eq!(step_of(&now), Some(latest + 1), "{thread}");
        let report = verify_thread(saver, thread).await.unwrap();
        let missing: Vec<_> = report.of_kind(ViolationKind::MissingParent).collect();
        assert!(missing.is_empty(), "{thread}: {missing:?}");
    }
}

/// The `step` value of a checkpoint (the fork point's child has none).
fn step_of(t: &CheckpointTuple) -> Option<i64> {
    match t.checkpoint.channel_values.get("step") {
        Some(Value::Int(i)) => Some(*i),
        _ => None,
    }
}

/// A random pause before a kill or an abort.
pub fn random_pause(max_ms: u64) -> Duration {
    Duration::from_millis(rand::random::<u64>() % max_ms.max(1))
}
