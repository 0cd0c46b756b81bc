//! The mini runtime's `Send` and join graphs (`examples/mini_runtime/send_graphs.rs`)
//! against the same graphs in Python LangGraph (`scripts/mini_runtime_send_peer.py`),
//! on SQLite files, both directions:
//!
//! * the rows the runtime stores equal, up to ids, timestamps and the
//!   random part of versions, the rows Python stores for the same runs
//!   (push tasks with Python's ids and paths, `__pregel_tasks`, a join
//!   barrier's set as it fills and empties);
//! * Python reads the runtime's threads step by step as the runtime reads
//!   them, and resumes an interrupt raised in a `Send` task; the runtime
//!   reads and resumes Python's;
//! * the row verifier finds nothing on any of these threads.

#[path = "../../examples/mini_runtime/send_graphs.rs"]
mod send_graphs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::sqlite::SqliteSaver;
use serde::Serialize;
use serde_json::Value as Json;

pub(crate) use crate::mini_runtime::runtime;
use crate::mini_runtime::{assert_verifies, comparable, normalized};
use crate::{harness, sqlite_support};
use runtime::{End, Options, Run};
use send_graphs::{Log, MapReduce};

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/mini_runtime_send_peer.py")
}

/// Runs a command of the Python peer and returns its JSON output.
fn python(py: &Path, args: &[&str]) -> Json {
    let (ok, stdout, stderr) = sqlite_support::run_python(py, &peer_script(), args);
    assert!(ok, "mini_runtime_send_peer.py {args:?} failed:\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// `run`, `resume` or `history` of `graph` on `db`'s thread `thread`.
fn py(py_bin: &Path, cmd: &str, graph: &str, db: &Path, thread: &str, extra: &[&str]) -> Json {
    let db = db.to_str().unwrap();
    let args = [&["--graph", graph, "--db", db, "--thread", thread][..], extra].concat();
    python(py_bin, &[&[cmd][..], &args].concat())
}

/// A dump of `db`'s thread with its writes in Python's order of a step
/// (task path, then index) instead of the task ids' (hashes that differ
/// between the two runs), normalized.
fn dump(py_bin: &Path, db: &Path, thread: &str) -> Json {
    let mut dump = python(py_bin, &["dump", "--db", db.to_str().unwrap(), "--thread", thread]);
    let writes = dump["writes"].as_array_mut().unwrap();
    writes.sort_by_key(|w| {
        let s = |k: &str| w[k].as_str().unwrap_or_default().to_owned();
        (
            s("checkpoint_id"),
            s("checkpoint_ns"),
            s("task_path"),
            w["idx"].as_i64(),
        )
    });
    normalized(&dump)
}

/// The runtime's history in the shape `history` prints.
async fn history<S: serde::de::DeserializeOwned + Serialize>(thread: &Thread) -> Json {
    let history: Vec<StateSnapshot<S>> = thread.history(ListOptions::default()).await.unwrap();
    let interrupt = |i: &Value| {
        let i = checkpointer::serde::py::Interrupt::from_value(i).unwrap();
        from_value_ref::<Json>(&i.value).unwrap()
    };
    let snapshots = history.iter().map(|s| {
        let tasks = s.tasks.iter().map(|t| {
            let interrupts: Vec<Json> = t.interrupts.iter().map(interrupt).collect();
            serde_json::json!({"id": t.id, "name": t.name, "interrupts": interrupts})
        });
        serde_json::json!({
            "checkpoint_id": s.config.checkpoint_id(),
            "parent_checkpoint_id": s.parent_config.as_ref().and_then(|p| p.checkpoint_id()),
            "step": s.step(),
            "source": s.metadata.get("source").and_then(Value::as_str),
            "next": s.next,
            "values": serde_json::to_value(&s.values).unwrap(),
            "tasks": tasks.collect::<Vec<_>>(),
        })
    });
    Json::Array(snapshots.collect())
}

fn root() -> Value {
    Value::map::<&str>([])
}

async fn saver(path: &Path) -> Arc<dyn CheckpointSaver> {
    Arc::new(SqliteSaver::open(path).await.unwrap())
}

fn done<S: std::fmt::Debug>(run: Run<S>) -> S {
    match run.end {
        End::Done(state) => state,
        other => panic!("expected the end, got {other:?}"),
    }
}

/// Equal dumps, row by row, then as a whole.
fn assert_same_rows(ours: &Json, theirs: &Json, checkpoints: usize) {
    for table in ["checkpoints", "writes"] {
        let (a, b) = (ours[table].as_array().unwrap(), theirs[table].as_array().unwrap());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert_eq!(x, y, "{table} row {i} differs (ours, then Python's)");
        }
        assert_eq!(a.len(), b.len(), "{table}: ours, then Python's");
    }
    assert_eq!(ours["checkpoints"].as_array().unwrap().len(), checkpoints);
    assert_eq!(ours, theirs);
}

/// Map-reduce over [1, -2, 3] (the second worker asks and is kept), then
/// over [4], on both sides.
async fn map_reduce_stores_what_python_stores() {
    let Some(py_bin) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (rust_db, py_db) = (dir.path().join("rust.sqlite"), dir.path().join("python.sqlite"));
    py(
        &py_bin,
        "run",
        "send",
        &py_db,
        "t",
        &["--input", r#"{"items": [1, -2, 3]}"#],
    );
    py(&py_bin, "resume", "send", &py_db, "t", &["--answer", "yes"]);
    let out = py(&py_bin, "run", "send", &py_db, "t", &["--input", r#"{"items": [4]}"#]);
    assert_eq!(out["values"]["total"], 100);

    let saver = saver(&rust_db).await;
    let (g, topology) = send_graphs::map_reduce();
    let t = Thread::new(saver.clone(), "t").with_topology(topology);
    let opts = Options::default();
    let input = send_graphs::items_input(&[1, -2, 3]);
    let run = g.invoke(&t, Some(input), None, root(), &opts).await.unwrap();
    assert_eq!(run.ran, ["__start__", "worker", "worker", "worker"]);
    let End::Interrupted(interrupts) = &run.end else {
        panic!("the second worker asks: {:?}", run.end)
    };
    assert_eq!(interrupts.len(), 1);
    let run = g
        .invoke(&t, None, Some(Value::from("yes")), root(), &opts)
        .await
        .unwrap();
    assert_eq!(run.ran, ["worker", "reduce"], "the other workers' writes are reused");
    assert_eq!(done(run).total, Some(60));
    let input = send_graphs::items_input(&[4]);
    let state = done(g.invoke(&t, Some(input), None, root(), &opts).await.unwrap());
    assert_eq!((state.results, state.total), (vec![10, 20, 30, 40], Some(100)));

    assert_same_rows(&dump(&py_bin, &rust_db, "t"), &dump(&py_bin, &py_db, "t"), 8);
    assert_eq!(assert_verifies(&saver, "t").await, 8);
    assert_eq!(assert_verifies(&self::saver(&py_db).await, "t").await, 8);
}

/// The join graph run twice on one thread, on both sides: the barrier
/// waits for `b` a step after `a` wrote, fires `c`, and empties.
async fn join_stores_what_python_stores() {
    let Some(py_bin) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (rust_db, py_db) = (dir.path().join("rust.sqlite"), dir.path().join("python.sqlite"));
    py(&py_bin, "run", "join", &py_db, "t", &["--input", r#"{"log": ["in"]}"#]);
    py(
        &py_bin,
        "run",
        "join",
        &py_db,
        "t",
        &["--input", r#"{"log": ["again"]}"#],
    );

    let saver = saver(&rust_db).await;
    let (g, topology) = send_graphs::join().unwrap();
    let t = Thread::new(saver.clone(), "t").with_topology(topology);
    let opts = Options::default();
    for first in ["in", "again"] {
        let input = checkpointer::state::to_channels(&Log {
            log: vec![first.into()],
        })
        .unwrap();
        let run = g.invoke(&t, Some(input), None, root(), &opts).await.unwrap();
        assert_eq!(run.ran, ["__start__", "a", "b", "c"]);
    }
    let history: Vec<StateSnapshot<Log>> = t.history(ListOptions::default()).await.unwrap();
    assert_eq!(history[0].values.log, ["in", "a", "b", "c", "again", "a", "b", "c"]);

    assert_same_rows(&dump(&py_bin, &rust_db, "t"), &dump(&py_bin, &py_db, "t"), 10);
    assert_eq!(assert_verifies(&saver, "t").await, 10);
    assert_eq!(assert_verifies(&self::saver(&py_db).await, "t").await, 10);
}

/// Python reads the runtime's map-reduce thread at the interrupt of a
/// `Send` task, resumes it, and the runtime continues it.
async fn python_resumes_the_runtime_send_thread() {
    let Some(py_bin) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mini.sqlite");
    let saver = saver(&db).await;
    let (g, topology) = send_graphs::map_reduce();
    let t = Thread::new(saver.clone(), "r").with_topology(topology);
    let opts = Options::default();
    let input = send_graphs::items_input(&[1, -2, 3]);
    let run = g.invoke(&t, Some(input), None, root(), &opts).await.unwrap();
    assert!(matches!(run.end, End::Interrupted(_)));

    let theirs = py(&py_bin, "history", "send", &db, "r", &[]);
    assert_eq!(comparable(&theirs), history::<MapReduce>(&t).await);
    assert_eq!(theirs[0]["next"], serde_json::json!(["worker", "worker", "worker"]));
    assert_eq!(theirs[0]["tasks"][1]["interrupts"][0]["question"], "keep -2?");
    let path = &theirs[0]["tasks"][1]["path"];
    assert_eq!(path, &serde_json::json!(["__pregel_push", 1, false]));

    let out = py(&py_bin, "resume", "send", &db, "r", &["--answer", "no"]);
    assert_eq!(out["values"]["total"], 40);
    let now: StateSnapshot<MapReduce> = t.state().await.unwrap().unwrap();
    assert_eq!((now.values.results, now.values.total), (vec![10, 30], Some(40)));
    assert_eq!(
        comparable(&py(&py_bin, "history", "send", &db, "r", &[])),
        history::<MapReduce>(&t).await
    );

    let input = send_graphs::items_input(&[5, 6]);
    let state = done(g.invoke(&t, Some(input), None, root(), &opts).await.unwrap());
    assert_eq!(state.total, Some(150));
    assert_eq!(
        comparable(&py(&py_bin, "history", "send", &db, "r", &[])),
        history::<MapReduce>(&t).await
    );
    assert_verifies(&saver, "r").await;
}

/// The runtime reads and resumes Python's map-reduce thread (only the
/// interrupted `Send` task runs again), and continues Python's join thread
/// half way through a barrier; Python reads both.
async fn the_runtime_resumes_python_send_and_join_threads() {
    let Some(py_bin) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("py.sqlite");
    let out = py(
        &py_bin,
        "run",
        "send",
        &db,
        "p",
        &["--input", r#"{"items": [1, -2, 3]}"#],
    );
    assert_eq!(out["interrupted"], true);

    let saver = saver(&db).await;
    let (g, topology) = send_graphs::map_reduce();
    let t = Thread::new(saver.clone(), "p").with_topology(topology);
    let waiting: StateSnapshot<MapReduce> = t.state().await.unwrap().unwrap();
    assert_eq!(waiting.next, ["worker", "worker", "worker"]);
    assert_eq!(
        waiting.interrupts().count(),
        1,
        "Python's interrupt is under the runtime's push task id"
    );
    assert_eq!(
        comparable(&py(&py_bin, "history", "send", &db, "p", &[])),
        history::<MapReduce>(&t).await
    );
    let opts = Options::default();
    let run = g
        .invoke(&t, None, Some(Value::from("yes")), root(), &opts)
        .await
        .unwrap();
    assert_eq!(run.ran, ["worker", "reduce"]);
    assert_eq!(done(run).total, Some(60));
    let theirs = py(&py_bin, "history", "send", &db, "p", &[]);
    assert_eq!(theirs[0]["values"]["total"], 60);
    assert_eq!(comparable(&theirs), history::<MapReduce>(&t).await);
    let out = py(&py_bin, "run", "send", &db, "p", &["--input", r#"{"items": [7]}"#]);
    assert_eq!(out["values"]["total"], 130);
    assert_verifies(&saver, "p").await;

    // Python's join thread, continued by the runtime from a fresh run
    py(&py_bin, "run", "join", &db, "j", &["--input", r#"{"log": ["in"]}"#]);
    let (g, topology) = send_graphs::join().unwrap();
    let t = Thread::new(saver.clone(), "j").with_topology(topology);
    assert_eq!(
        comparable(&py(&py_bin, "history", "join", &db, "j", &[])),
        history::<Log>(&t).await
    );
    let input = checkpointer::state::to_channels(&Log {
        log: vec!["again".into()],
    })
    .unwrap();
    let state = done(g.invoke(&t, Some(input), None, root(), &opts).await.unwrap());
    assert_eq!(state.log, ["in", "a", "b", "c", "again", "a", "b", "c"]);
    assert_eq!(
        comparable(&py(&py_bin, "history", "join", &db, "j", &[])),
        history::<Log>(&t).await
    );
    assert_verifies(&saver, "j").await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "runtime_send::map_reduce_stores_what_python_stores",
            &[&crate::PYTHON],
            2,
            map_reduce_stores_what_python_stores,
        ),
        harness::tokio(
            "runtime_send::join_stores_what_python_stores",
            &[&crate::PYTHON],
            2,
            join_stores_what_python_stores,
        ),
        harness::tokio(
            "runtime_send::python_resumes_the_runtime_send_thread",
            &[&crate::PYTHON],
            2,
            python_resumes_the_runtime_send_thread,
        ),
        harness::tokio(
            "runtime_send::the_runtime_resumes_python_send_and_join_threads",
            &[&crate::PYTHON],
            2,
            the_runtime_resumes_python_send_and_join_threads,
        ),
    ]
}
