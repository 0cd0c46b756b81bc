//! The mini runtime (`examples/mini_runtime.rs`) against Python LangGraph on
//! one SQLite file, both directions, with the same graph written in Python
//! (`scripts/mini_runtime_peer.py`):
//!
//! * the rows the runtime stores for a run equal, up to ids, timestamps and
//!   the random part of versions, the rows Python's runtime stores for the
//!   same run;
//! * Python's `get_state_history` reads the runtime's thread step by step
//!   as the runtime's own [`Thread::history`] does, and Python resumes it;
//! * the runtime reads and resumes a thread Python interrupted, and Python
//!   reads the result.
//!
//! Needs the peer venv (`CHECKPOINTER_PYTHON`); with `CI=true` it fails
//! without it.

#[path = "../../examples/mini_runtime/graph.rs"]
pub(crate) mod graph;
#[path = "../../examples/mini_runtime/runtime.rs"]
pub(crate) mod runtime;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::sqlite::SqliteSaver;
use graph::State;
use runtime::{End, Options};
use serde_json::Value as Json;

use crate::{harness, sqlite_support};

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/mini_runtime_peer.py")
}

/// Runs the Python graph's command and returns its JSON output.
pub(crate) fn python(py: &Path, args: &[&str]) -> Json {
    let (ok, stdout, stderr) = sqlite_support::run_python(py, &peer_script(), args);
    assert!(ok, "mini_runtime_peer.py {args:?} failed:\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn root() -> Value {
    Value::map::<&str>([])
}

async fn open(path: &Path) -> (Arc<dyn CheckpointSaver>, graph::State) {
    (Arc::new(SqliteSaver::open(path).await.unwrap()), State::default())
}

/// The runtime's history in the shape `mini_runtime_peer.py history` prints.
pub(crate) async fn rust_history(thread: &Thread) -> Json {
    let history: Vec<StateSnapshot<State>> = thread.history(ListOptions::default()).await.unwrap();
    Json::Array(
        history
            .iter()
            .map(|s| {
                serde_json::json!({
                    "checkpoint_id": s.config.checkpoint_id(),
                    "parent_checkpoint_id": s.parent_config.as_ref().and_then(|p| p.checkpoint_id()),
                    "step": s.step(),
                    "source": s.metadata.get("source").and_then(Value::as_str),
                    "next": s.next,
                    "values": serde_json::to_value(&s.values).unwrap(),
                    "tasks": s.tasks.iter().map(|t| serde_json::json!({
                        "id": t.id,
                        "name": t.name,
                        "interrupts": t.interrupts.iter().map(|i| {
                            let i = checkpointer::serde::py::Interrupt::from_value(i).unwrap();
                            serde_json::to_value(from_value_ref::<serde_json::Value>(&i.value).unwrap()).unwrap()
                        }).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

/// Python's history with only the fields [`rust_history`] has.
pub(crate) fn comparable(history: &Json) -> Json {
    Json::Array(
        history
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let tasks = s["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| serde_json::json!({"id": t["id"], "name": t["name"], "interrupts": t["interrupts"]}))
                    .collect::<Vec<_>>();
                serde_json::json!({
                    "checkpoint_id": s["checkpoint_id"],
                    "parent_checkpoint_id": s["parent_checkpoint_id"],
                    "step": s["step"],
                    "source": s["source"],
                    "next": s["next"],
                    "values": s["values"],
                    "tasks": tasks,
                })
            })
            .collect(),
    )
}

/// A dump with ids replaced by their order of appearance, versions by their
/// counter and timestamps and raw bytes dropped: what must be equal between
/// two runs of the same graph on the same input.
pub(crate) fn normalized(dump: &Json) -> Json {
    let mut ids: HashMap<String, String> = HashMap::new();
    for row in dump["checkpoints"].as_array().unwrap() {
        token(&mut ids, row["checkpoint_id"].as_str().unwrap());
    }
    for row in dump["writes"].as_array().unwrap() {
        token(&mut ids, row["task_id"].as_str().unwrap());
    }
    fn walk(v: &Json, ids: &mut HashMap<String, String>) -> Json {
        match v {
            Json::String(s) => Json::String(rewrite(s, ids)),
            Json::Array(a) => Json::Array(a.iter().map(|x| walk(x, ids)).collect()),
            Json::Object(m) => Json::Object(
                m.iter()
                    .filter(|(k, _)| {
                        !matches!(
                            k.as_str(),
                            "ts" | "value_hex" | "checkpoint_hex" | "value_repr" | "__repr__"
                        )
                    })
                    .map(|(k, x)| (rewrite(k, ids), walk(x, ids)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    walk(dump, &mut ids)
}

fn token(ids: &mut HashMap<String, String>, id: &str) -> String {
    let n = ids.len();
    ids.entry(id.to_owned()).or_insert_with(|| format!("<id{n}>")).clone()
}

/// Replaces UUID-shaped ids and 32-digit hex ids inside `s`, and a version
/// string by `v<counter>`.
fn rewrite(s: &str, ids: &mut HashMap<String, String>) -> String {
    if let Some((int, _)) = s.split_once('.') {
        if int.len() == 32 && int.bytes().all(|b| b.is_ascii_digit()) {
            return format!("v{}", int.trim_start_matches('0'));
        }
    }
    if s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return token(ids, s);
    }
    let mut out = String::new();
    let mut rest = s;
    while rest.len() >= 36 {
        let head = &rest[..36];
        let uuid_like = head.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
        if uuid_like {
            out.push_str(&token(ids, head));
            rest = &rest[36..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out.push_str(rest);
    out
}

/// The run both sides make: a weather question (agent → tools subgraph →
/// agent → review, interrupted), resumed with "yes", then a second turn.
async fn the_runtime_stores_what_python_langgraph_stores() {
    let Some(py) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (rust_db, py_db) = (dir.path().join("rust.sqlite"), dir.path().join("python.sqlite"));
    let (py_db_s, rust_db_s) = (py_db.to_str().unwrap(), rust_db.to_str().unwrap());

    python(
        &py,
        &[
            "run",
            "--db",
            py_db_s,
            "--thread",
            "t",
            "--input",
            "what is the weather?",
        ],
    );
    python(&py, &["resume", "--db", py_db_s, "--thread", "t", "--answer", "yes"]);
    python(&py, &["run", "--db", py_db_s, "--thread", "t", "--input", "hello"]);
    // a manual update as `agent`, routed by agent's edge (to review)
    let update = ["update", "--db", py_db_s, "--thread", "t", "--as-node", "agent"];
    python(
        &py,
        &[
            &update[..],
            &["--id", "ai-8", "--role", "ai", "--content", "answer: rainy"],
        ]
        .concat(),
    );

    let (saver, _) = open(&rust_db).await;
    let (g, t, opts) = (graph::graph(), Thread::new(saver.clone(), "t"), Options::default());
    g.invoke(
        &t,
        Some(graph::user_input(0, "what is the weather?").unwrap()),
        None,
        root(),
        &opts,
    )
    .await
    .unwrap();
    g.invoke(&t, None, Some(Value::from("yes")), root(), &opts)
        .await
        .unwrap();
    g.invoke(&t, Some(graph::user_input(5, "hello").unwrap()), None, root(), &opts)
        .await
        .unwrap();

    let message = graph::Message {
        id: "ai-8".into(),
        role: "ai".into(),
        content: "answer: rainy".into(),
    };
    let values = checkpointer::state::writes(&State {
        messages: vec![message],
    })
    .unwrap();
    g.update_state(&t, values, "agent").await.unwrap();
    let updated: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(updated.next, ["review"]);
    assert_eq!(updated.metadata.source(), Some(CheckpointSource::Update));

    let theirs = normalized(&python(&py, &["dump", "--db", py_db_s, "--thread", "t"]));
    let ours = normalized(&python(&py, &["dump", "--db", rust_db_s, "--thread", "t"]));
    for (i, (a, b)) in ours["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .zip(theirs["checkpoints"].as_array().unwrap())
        .enumerate()
    {
        assert_eq!(a, b, "checkpoint row {i} differs (ours, then Python's)");
    }
    for (i, (a, b)) in ours["writes"]
        .as_array()
        .unwrap()
        .iter()
        .zip(theirs["writes"].as_array().unwrap())
        .enumerate()
    {
        assert_eq!(a, b, "write row {i} differs (ours, then Python's)");
    }
    assert_eq!(ours["checkpoints"].as_array().unwrap().len(), 13);
    assert_eq!(ours, theirs);

    // both threads keep every invariant the row verifier checks
    let (python_saver, _) = open(&py_db).await;
    assert_eq!(assert_verifies(&saver, "t").await, 13);
    assert_eq!(assert_verifies(&python_saver, "t").await, 13);
}

/// The thread has no violation of the row verifier; returns its number of
/// checkpoints.
pub(crate) async fn assert_verifies(saver: &Arc<dyn CheckpointSaver>, thread: &str) -> usize {
    let report = checkpointer::verify::verify_thread(saver.as_ref(), thread)
        .await
        .unwrap();
    let shown: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
    assert!(report.is_ok(), "{thread}: {shown:#?}");
    report.checkpoints
}

async fn python_reads_the_runtime_history_and_resumes_it() {
    let Some(py) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mini.sqlite");
    let db_s = db.to_str().unwrap();
    let (saver, _) = open(&db).await;
    let (g, t, opts) = (graph::graph(), Thread::new(saver.clone(), "t1"), Options::default());
    let run = g
        .invoke(
            &t,
            Some(graph::user_input(0, "what is the weather?").unwrap()),
            None,
            root(),
            &opts,
        )
        .await
        .unwrap();
    assert!(matches!(run.end, End::Interrupted(_)));

    // Python sees the same steps, next nodes, values, task ids and interrupt.
    let theirs = python(&py, &["history", "--db", db_s, "--thread", "t1"]);
    assert_eq!(comparable(&theirs), rust_history(&t).await);
    assert_eq!(theirs[0]["next"], serde_json::json!(["review"]));
    assert_eq!(theirs[0]["tasks"][0]["interrupts"][0]["question"], "send the answer?");

    // Python resumes the interrupted review; the runtime reads its steps.
    let out = python(&py, &["resume", "--db", db_s, "--thread", "t1", "--answer", "yes"]);
    assert_eq!(out["values"]["messages"][4]["content"], "sent");
    let now: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(now.values.messages.last().unwrap().content, "sent");
    assert!(now.next.is_empty());
    assert_eq!(
        comparable(&python(&py, &["history", "--db", db_s, "--thread", "t1"])),
        rust_history(&t).await
    );

    // And the runtime continues the thread Python resumed.
    let run = g
        .invoke(&t, Some(graph::user_input(5, "hello").unwrap()), None, root(), &opts)
        .await
        .unwrap();
    let End::Done(state) = run.end else {
        panic!("expected the end")
    };
    assert_eq!(state.messages.last().unwrap().content, "echo: hello");
    assert_eq!(
        comparable(&python(&py, &["history", "--db", db_s, "--thread", "t1"])),
        rust_history(&t).await
    );
    assert_verifies(&saver, "t1").await;
}

async fn the_runtime_resumes_a_python_thread_and_python_reads_it() {
    let Some(py) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("py.sqlite");
    let db_s = db.to_str().unwrap();
    let out = python(
        &py,
        &["run", "--db", db_s, "--thread", "p1", "--input", "what is the weather?"],
    );
    assert_eq!(out["interrupted"], true);

    let (saver, _) = open(&db).await;
    let (g, t, opts) = (graph::graph(), Thread::new(saver.clone(), "p1"), Options::default());
    let waiting: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(waiting.next, ["review"]);
    assert_eq!(
        waiting.interrupts().count(),
        1,
        "Python's interrupt is found under the runtime's task id"
    );
    assert_eq!(
        comparable(&python(&py, &["history", "--db", db_s, "--thread", "p1"])),
        rust_history(&t).await
    );

    let run = g
        .invoke(&t, None, Some(Value::from("no")), root(), &opts)
        .await
        .unwrap();
    assert_eq!(run.ran, ["review"]);
    let End::Done(state) = run.end else {
        panic!("expected the end")
    };
    assert_eq!(state.messages.last().unwrap().content, "discarded");

    let theirs = python(&py, &["history", "--db", db_s, "--thread", "p1"]);
    assert_eq!(theirs[0]["values"]["messages"][4]["content"], "discarded");
    assert_eq!(theirs[0]["next"], serde_json::json!([]));
    assert_eq!(comparable(&theirs), rust_history(&t).await);
    // Python continues it in turn.
    let out = python(&py, &["run", "--db", db_s, "--thread", "p1", "--input", "hello"]);
    assert_eq!(out["values"]["messages"][6]["content"], "echo: hello");
    assert_verifies(&saver, "p1").await;
}

/// Crash recovery and time travel, on the runtime alone (memory and SQLite).
async fn crash_resume_reuses_pending_writes_and_forks_branch_history() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn CheckpointSaver> = Arc::new(SqliteSaver::open(dir.path().join("c.sqlite")).await.unwrap());
    for saver in [Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>, sqlite] {
        let g = graph::graph();
        let t = Thread::new(saver.clone(), "c");
        let crash = Options {
            crash_after: Some("agent"),
        };
        let input = graph::user_input(0, "what is the weather?").unwrap();
        let err = g.invoke(&t, Some(input), None, root(), &crash).await.unwrap_err();
        assert!(err.to_string().contains("crash injected"), "{err}");
        let run = g.invoke(&t, None, None, root(), &Options::default()).await.unwrap();
        // agent's first writes were reused; it ran again only after the tool
        assert_eq!(run.ran, ["tools", "tools/__start__", "tools/lookup", "agent", "review"]);
        let history: Vec<StateSnapshot<State>> = t.history(ListOptions::default()).await.unwrap();
        let waiting = &history[0];
        assert_eq!(waiting.next, ["review"]);

        // time travel: fork the step before review and answer there
        let fork = t.fork(waiting.config.checkpoint_id().unwrap()).await.unwrap();
        let forked: StateSnapshot<State> = t.state().await.unwrap().unwrap();
        assert_eq!(forked.config, fork);
        assert_eq!(forked.parent_config, waiting.parent_config);
        assert_eq!(forked.values, waiting.values);
        // the copy is a new checkpoint: its review task runs (and asks) anew
        let run = g.invoke(&t, None, None, root(), &Options::default()).await.unwrap();
        assert!(matches!(run.end, End::Interrupted(_)), "{:?}", run.end);
        let run = g
            .invoke(&t, None, Some(Value::from("no")), root(), &Options::default())
            .await
            .unwrap();
        let End::Done(state) = run.end else {
            panic!("expected the end")
        };
        assert_eq!(state.messages.last().unwrap().content, "discarded");
        // the old branch still waits for its review
        let old: StateSnapshot<State> = t
            .state_at(waiting.config.checkpoint_id().unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(old.next, ["review"]);
        assert_eq!(old.interrupts().count(), 1);

        // A crash inside the subgraph: the rerun continues the child's own
        // checkpoints, reusing lookup's saved writes.
        let t = Thread::new(saver.clone(), "c-sub");
        let crash = Options {
            crash_after: Some("lookup"),
        };
        let input = graph::user_input(0, "what is the weather?").unwrap();
        let err = g.invoke(&t, Some(input), None, root(), &crash).await.unwrap_err();
        assert!(err.to_string().contains("crash injected after lookup"), "{err}");
        let run = g.invoke(&t, None, None, root(), &Options::default()).await.unwrap();
        assert_eq!(run.ran, ["tools", "agent", "review"], "lookup is not run again");
        let all = saver
            .list_vec(
                Some(CheckpointConfig::in_scope("c-sub", NsScope::All)),
                ListOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            all.iter().filter(|t| !t.config.ns().is_empty()).count(),
            3,
            "one child run, whole"
        );
    }
}

/// A node asking twice, in Python: answered by value, then by id.
const TWO_QUESTIONS: &str = r#"
import operator, sqlite3, sys
from typing import Annotated, TypedDict
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

class S(TypedDict):
    log: Annotated[list, operator.add]

def ask(state):
    first = interrupt("first?")
    second = interrupt("second?")
    return {"log": [first, second]}

g = StateGraph(S)
g.add_node("ask", ask)
g.add_edge(START, "ask")
g.add_edge("ask", END)
conn = sqlite3.connect(sys.argv[1], check_same_thread=False)
app = g.compile(checkpointer=SqliteSaver(conn))
cfg = {"configurable": {"thread_id": "t"}}
app.invoke({"log": ["in"]}, cfg)
app.invoke(Command(resume="a"), cfg)
app.invoke(Command(resume={app.get_state(cfg).interrupts[0].id: "b"}), cfg)
conn.commit()
"#;

/// The same run on the step calls: the rows equal Python's, but for the one
/// `__resume__` row Python's SQLite saver does not replace (it keeps the
/// first write of a special channel when a call also writes state; the
/// crate, as Python's in-memory saver, keeps the last).
async fn two_interrupts_resumed_by_value_and_id_store_what_python_stores() {
    use checkpointer::reducer::append;
    use checkpointer::step::Resume;
    let Some(py) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (rust_db, py_db) = (dir.path().join("rust.sqlite"), dir.path().join("python.sqlite"));
    let script = dir.path().join("two.py");
    std::fs::write(&script, TWO_QUESTIONS).unwrap();
    let (ok, _, stderr) = sqlite_support::run_python(&py, &script, &[py_db.to_str().unwrap()]);
    assert!(ok, "{stderr}");

    let (saver, _) = open(&rust_db).await;
    let thread = Thread::new(saver, "t");
    let reducers = Reducers::new().field("log", append::<Value>);
    async fn attempt(step: &Step) {
        for task in step.to_run() {
            let mut ctx = step.context(&task).unwrap();
            let writes = if task.name == START {
                step.input_writes(&["ask"]).unwrap()
            } else {
                match ctx.interrupt("first?").and_then(|a| Ok((a, ctx.interrupt("second?")?))) {
                    Ok((a, b)) => vec![("log".to_owned(), Value::from(vec![a, b]))],
                    Err(i) => {
                        step.interrupt(&task, &ctx, vec![i]).await.unwrap();
                        continue;
                    }
                }
            };
            step.finish(&task, &ctx, writes).await.unwrap();
        }
    }
    let step = thread
        .start(Value::map([("log", Value::from(vec!["in"]))]), None)
        .await
        .unwrap();
    attempt(&step).await;
    let step = step.close(&reducers).await.unwrap();
    attempt(&step).await;
    let step = thread.resume(Resume::Value(Value::from("a"))).await.unwrap();
    attempt(&step).await;
    let waiting: StateSnapshot<Value> = thread.state().await.unwrap().unwrap();
    let id = checkpointer::serde::py::Interrupt::from_value(waiting.interrupts().next().unwrap())
        .unwrap()
        .id;
    let step = thread.resume(Resume::ById(vec![(id, Value::from("b"))])).await.unwrap();
    attempt(&step).await;
    let step = step.close(&reducers).await.unwrap();
    assert!(step.tasks().is_empty());

    let theirs = normalized(&python(
        &py,
        &["dump", "--db", py_db.to_str().unwrap(), "--thread", "t"],
    ));
    let ours = normalized(&python(
        &py,
        &["dump", "--db", rust_db.to_str().unwrap(), "--thread", "t"],
    ));
    assert_eq!(ours["checkpoints"], theirs["checkpoints"]);
    let (ours, theirs) = (ours["writes"].as_array().unwrap(), theirs["writes"].as_array().unwrap());
    assert_eq!(ours.len(), theirs.len(), "{ours:#?}\n{theirs:#?}");
    let mut differ = Vec::new();
    for (a, b) in ours.iter().zip(theirs) {
        if a != b {
            differ.push((a["channel"].clone(), a["value"].clone(), b["value"].clone()));
        }
    }
    let known = (
        Json::from("__resume__"),
        serde_json::json!(["a", "b"]),
        serde_json::json!(["a"]),
    );
    assert_eq!(differ, [known], "only the resume row Python's SQLite saver keeps");
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "mini_runtime::the_runtime_stores_what_python_langgraph_stores",
            &[&crate::PYTHON],
            2,
            the_runtime_stores_what_python_langgraph_stores,
        ),
        harness::tokio(
            "mini_runtime::python_reads_the_runtime_history_and_resumes_it",
            &[&crate::PYTHON],
            2,
            python_reads_the_runtime_history_and_resumes_it,
        ),
        harness::tokio(
            "mini_runtime::the_runtime_resumes_a_python_thread_and_python_reads_it",
            &[&crate::PYTHON],
            2,
            the_runtime_resumes_a_python_thread_and_python_reads_it,
        ),
        harness::tokio(
            "mini_runtime::two_interrupts_resumed_by_value_and_id_store_what_python_stores",
            &[&crate::PYTHON],
            2,
            two_interrupts_resumed_by_value_and_id_store_what_python_stores,
        ),
        harness::tokio(
            "mini_runtime::crash_resume_reuses_pending_writes_and_forks_branch_history",
            &[],
            2,
            crash_resume_reuses_pending_writes_and_forks_branch_history,
        ),
    ]
}
