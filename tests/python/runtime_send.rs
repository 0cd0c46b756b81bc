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

use std::path::Path;

use checkpointer::prelude::*;
use serde::Serialize;
use serde_json::Value as Json;

use crate::harness;
pub(crate) use crate::mini_runtime::runtime;
use crate::mini_runtime::{assert_verifies, comparable, normalized};
use crate::side_by_side::{assert_same_rows, open, SideBySide};
use runtime::{End, Options, Run};
use send_graphs::{Log, MapReduce};

/// The Python side of these tests.
const PEER: &str = "mini_runtime_send_peer.py";

/// A dump of `db`'s thread with its writes in Python's order of a step
/// (task path, then index) instead of the task ids' (hashes that differ
/// between the two runs), normalized.
fn dump(side: &SideBySide, db: &Path, thread: &str) -> Json {
    let mut dump = side.dump(db, thread);
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

fn done<S: std::fmt::Debug>(run: Run<S>) -> S {
    match run.end {
        End::Done(state) => state,
        other => panic!("expected the end, got {other:?}"),
    }
}

/// Map-reduce over [1, -2, 3] (the second worker asks and is kept), then
/// over [4], on both sides.
async fn map_reduce_stores_what_python_stores() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let (rust_db, py_db) = (&side.ours, &side.theirs);
    side.graph("run", "send", py_db, "t", &["--input", r#"{"items": [1, -2, 3]}"#]);
    side.graph("resume", "send", py_db, "t", &["--answer", "yes"]);
    let out = side.graph("run", "send", py_db, "t", &["--input", r#"{"items": [4]}"#]);
    assert_eq!(out["values"]["total"], 100);

    let saver = open(rust_db).await;
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

    assert_same_rows(&dump(&side, rust_db, "t"), &dump(&side, py_db, "t"), 8);
    side.assert_both_verify(&saver, "t", 8).await;
}

/// The join graph run twice on one thread, on both sides: the barrier
/// waits for `b` a step after `a` wrote, fires `c`, and empties.
async fn join_stores_what_python_stores() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let (rust_db, py_db) = (&side.ours, &side.theirs);
    side.graph("run", "join", py_db, "t", &["--input", r#"{"log": ["in"]}"#]);
    side.graph("run", "join", py_db, "t", &["--input", r#"{"log": ["again"]}"#]);

    let saver = open(rust_db).await;
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

    assert_same_rows(&dump(&side, rust_db, "t"), &dump(&side, py_db, "t"), 10);
    side.assert_both_verify(&saver, "t", 10).await;
}

/// The sends made by a node's conditional edge (`plan` → one `worker` per
/// planned item → `sum`) over [1, -2, 3] (the second worker asks and is
/// kept), then over [4], on both sides; Python reads the runtime's thread
/// as the runtime does.
async fn plan_sends_store_what_python_stores() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let (rust_db, py_db) = (&side.ours, &side.theirs);
    let out = side.graph("run", "plan", py_db, "t", &["--input", r#"{"items": [1, -2, 3]}"#]);
    assert_eq!(out["interrupts"][0]["value"]["question"], "keep -4?");
    side.graph("resume", "plan", py_db, "t", &["--answer", "yes"]);
    let out = side.graph("run", "plan", py_db, "t", &["--input", r#"{"items": [4]}"#]);
    assert_eq!(out["values"]["total"], 200);

    let saver = open(rust_db).await;
    let (g, topology) = send_graphs::plan_graph();
    let t = Thread::new(saver.clone(), "t").with_topology(topology);
    let opts = Options::default();
    let input = send_graphs::items_input(&[1, -2, 3]);
    let run = g.invoke(&t, Some(input), None, root(), &opts).await.unwrap();
    assert_eq!(run.ran, ["__start__", "plan", "worker", "worker", "worker"]);
    let End::Interrupted(interrupts) = &run.end else {
        panic!("the second worker asks: {:?}", run.end)
    };
    assert_eq!(interrupts.len(), 1);
    let run = g
        .invoke(&t, None, Some(Value::from("yes")), root(), &opts)
        .await
        .unwrap();
    assert_eq!(run.ran, ["worker", "sum"], "the other workers' writes are reused");
    assert_eq!(done(run).total, Some(120));
    let input = send_graphs::items_input(&[4]);
    let state = done(g.invoke(&t, Some(input), None, root(), &opts).await.unwrap());
    assert_eq!((state.results, state.total), (vec![20, 40, 60, 80], Some(200)));

    let ours = dump(&side, rust_db, "t");
    let plan_writes: Vec<&Json> = ours["writes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["task_path"] == "~__pregel_pull, plan")
        .map(|w| &w["channel"])
        .collect();
    assert_eq!(
        plan_writes,
        [
            "items",
            "__pregel_tasks",
            "__pregel_tasks",
            "__pregel_tasks",
            "items",
            "__pregel_tasks"
        ]
    );
    assert_same_rows(&ours, &dump(&side, py_db, "t"), 10);
    assert_eq!(
        comparable(&side.graph("history", "plan", rust_db, "t", &[])),
        history::<MapReduce>(&t).await
    );
    side.assert_both_verify(&saver, "t", 10).await;
}

/// A node with a join out-edge and a conditional edge (`a` of the
/// route-join graph) stores its barrier write before its route, as Python
/// does; runs "in" (a, b, c), "skip" (`a` routes to the end: the barrier
/// keeps `a`) and "again" (`a` writes the barrier again, `b` fills it, `c`
/// runs), on both sides.
async fn route_join_stores_what_python_stores() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let (rust_db, py_db) = (&side.ours, &side.theirs);
    let saver = open(rust_db).await;
    let (g, topology) = send_graphs::route_join().unwrap();
    let t = Thread::new(saver.clone(), "t").with_topology(topology);
    let opts = Options::default();
    let runs: [(&str, &[&str]); 3] = [
        ("in", &["__start__", "a", "b", "c"]),
        ("skip", &["__start__", "a"]),
        ("again", &["__start__", "a", "b", "c"]),
    ];
    for (first, ran) in runs {
        let input = format!(r#"{{"log": ["{first}"]}}"#);
        side.graph("run", "route_join", py_db, "t", &["--input", &input]);
        let input = checkpointer::state::to_channels(&Log {
            log: vec![first.into()],
        })
        .unwrap();
        let run = g.invoke(&t, Some(input), None, root(), &opts).await.unwrap();
        assert_eq!(run.ran, ran, "the run of {first:?}");
    }
    let now: StateSnapshot<Log> = t.state().await.unwrap().unwrap();
    let log = ["in", "a", "b", "c", "skip", "a", "again", "a", "b", "c"];
    assert_eq!(now.values.log, log);

    let ours = dump(&side, rust_db, "t");
    let a_writes: Vec<&Json> = ours["writes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["task_path"] == "~__pregel_pull, a")
        .map(|w| &w["channel"])
        .collect();
    let (join, route) = ("join:a+b:c", "branch:to:b");
    assert_eq!(a_writes, ["log", join, route, "log", join, "log", join, route]);
    assert_same_rows(&ours, &dump(&side, py_db, "t"), 13);
    assert_eq!(
        comparable(&side.graph("history", "route_join", rust_db, "t", &[])),
        history::<Log>(&t).await
    );
    side.assert_both_verify(&saver, "t", 13).await;
}

/// Python reads the runtime's map-reduce thread at the interrupt of a
/// `Send` task, resumes it, and the runtime continues it.
async fn python_resumes_the_runtime_send_thread() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let db = &side.ours;
    let saver = open(db).await;
    let (g, topology) = send_graphs::map_reduce();
    let t = Thread::new(saver.clone(), "r").with_topology(topology);
    let opts = Options::default();
    let input = send_graphs::items_input(&[1, -2, 3]);
    let run = g.invoke(&t, Some(input), None, root(), &opts).await.unwrap();
    assert!(matches!(run.end, End::Interrupted(_)));

    let theirs = side.graph("history", "send", db, "r", &[]);
    assert_eq!(comparable(&theirs), history::<MapReduce>(&t).await);
    assert_eq!(theirs[0]["next"], serde_json::json!(["worker", "worker", "worker"]));
    assert_eq!(theirs[0]["tasks"][1]["interrupts"][0]["question"], "keep -2?");
    let path = &theirs[0]["tasks"][1]["path"];
    assert_eq!(path, &serde_json::json!(["__pregel_push", 1, false]));

    let out = side.graph("resume", "send", db, "r", &["--answer", "no"]);
    assert_eq!(out["values"]["total"], 40);
    let now: StateSnapshot<MapReduce> = t.state().await.unwrap().unwrap();
    assert_eq!((now.values.results, now.values.total), (vec![10, 30], Some(40)));
    assert_eq!(
        comparable(&side.graph("history", "send", db, "r", &[])),
        history::<MapReduce>(&t).await
    );

    let input = send_graphs::items_input(&[5, 6]);
    let state = done(g.invoke(&t, Some(input), None, root(), &opts).await.unwrap());
    assert_eq!(state.total, Some(150));
    assert_eq!(
        comparable(&side.graph("history", "send", db, "r", &[])),
        history::<MapReduce>(&t).await
    );
    assert_verifies(&saver, "r").await;
}

/// The runtime reads and resumes Python's map-reduce thread (only the
/// interrupted `Send` task runs again), and continues Python's join thread
/// half way through a barrier; Python reads both.
async fn the_runtime_resumes_python_send_and_join_threads() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let db = &side.theirs;
    let out = side.graph("run", "send", db, "p", &["--input", r#"{"items": [1, -2, 3]}"#]);
    assert_eq!(out["interrupted"], true);

    let saver = open(db).await;
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
        comparable(&side.graph("history", "send", db, "p", &[])),
        history::<MapReduce>(&t).await
    );
    let opts = Options::default();
    let run = g
        .invoke(&t, None, Some(Value::from("yes")), root(), &opts)
        .await
        .unwrap();
    assert_eq!(run.ran, ["worker", "reduce"]);
    assert_eq!(done(run).total, Some(60));
    let theirs = side.graph("history", "send", db, "p", &[]);
    assert_eq!(theirs[0]["values"]["total"], 60);
    assert_eq!(comparable(&theirs), history::<MapReduce>(&t).await);
    let out = side.graph("run", "send", db, "p", &["--input", r#"{"items": [7]}"#]);
    assert_eq!(out["values"]["total"], 130);
    assert_verifies(&saver, "p").await;

    // Python's join thread, continued by the runtime from a fresh run
    side.graph("run", "join", db, "j", &["--input", r#"{"log": ["in"]}"#]);
    let (g, topology) = send_graphs::join().unwrap();
    let t = Thread::new(saver.clone(), "j").with_topology(topology);
    assert_eq!(
        comparable(&side.graph("history", "join", db, "j", &[])),
        history::<Log>(&t).await
    );
    let input = checkpointer::state::to_channels(&Log {
        log: vec!["again".into()],
    })
    .unwrap();
    let state = done(g.invoke(&t, Some(input), None, root(), &opts).await.unwrap());
    assert_eq!(state.log, ["in", "a", "b", "c", "again", "a", "b", "c"]);
    assert_eq!(
        comparable(&side.graph("history", "join", db, "j", &[])),
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
            "runtime_send::plan_sends_store_what_python_stores",
            &[&crate::PYTHON],
            2,
            plan_sends_store_what_python_stores,
        ),
        harness::tokio(
            "runtime_send::route_join_stores_what_python_stores",
            &[&crate::PYTHON],
            2,
            route_join_stores_what_python_stores,
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
