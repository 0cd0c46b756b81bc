//! Python LangGraph reads a store the crate retained and continues its
//! threads: a real graph runs on Python's `SqliteSaver` / `PostgresSaver`
//! (a loop of ten steps and a fork), the crate keeps the last three
//! checkpoints of the thread, then Python's `get_state_history` runs to its
//! end (the oldest kept checkpoint has no parent), `get_state` reads the
//! latest and `invoke` continues the thread.

use crate::harness;
use crate::{postgres_support, sqlite_support};

use checkpointer::postgres::PostgresSaver;
use checkpointer::retention::{RetainOptions, RetentionPolicy};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::CheckpointSaver;

const GRAPH: &str = r#"
import json, operator, sys
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START, END

class State(TypedDict):
    count: int
    log: Annotated[list, operator.add]

def inc(state):
    return {"count": state["count"] + 1, "log": [state["count"]]}

def more(state):
    return "inc" if state["count"] % 10 != 0 else END

builder = StateGraph(State)
builder.add_node("inc", inc)
builder.add_edge(START, "inc")
builder.add_conditional_edges("inc", more, ["inc", END])

def saver_cm(kind, where):
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        return SqliteSaver.from_conn_string(where)
    from langgraph.checkpoint.postgres import PostgresSaver
    return PostgresSaver.from_conn_string(where)

kind, where, phase = sys.argv[1], sys.argv[2], sys.argv[3]
config = {"configurable": {"thread_id": "kept"}}
with saver_cm(kind, where) as saver:
    if kind == "postgres":
        saver.setup()
    graph = builder.compile(checkpointer=saver)
    if phase == "run":
        graph.invoke({"count": 1, "log": []}, config, durability="sync")
        history = list(graph.get_state_history(config))
        # a fork: a new value on the fifth-newest checkpoint
        graph.update_state(history[4].config, {"count": 5})
        print(json.dumps({"history": len(history)}))
    else:
        history = list(graph.get_state_history(config))
        oldest = history[-1]
        state = graph.get_state(config)
        out = graph.invoke({"count": 11, "log": []}, config, durability="sync")
        after = list(graph.get_state_history(config))
        print(json.dumps({
            "history": len(history),
            "oldest_parent": oldest.parent_config,
            "count": state.values["count"],
            "continued": out["count"],
            "after": len(after),
        }))
"#;

fn python(kind: &str, where_: &str, phase: &str) -> serde_json::Value {
    let python = sqlite_support::require_python().unwrap();
    let out = sqlite_support::run_python_script(&python, GRAPH, &[kind, where_, phase]);
    serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap()
}

async fn retain_and_check(saver: &dyn CheckpointSaver, kind: &str, where_: &str) {
    let ran = python(kind, where_, "run");
    assert!(ran["history"].as_u64().unwrap() >= 10, "{ran}");
    let options = RetainOptions::default().threads(["kept"]).batch(2);
    let report = saver
        .retain(&RetentionPolicy::new().keep_last(3), options)
        .await
        .unwrap();
    assert!(report.checkpoints_removed >= 5, "{report:?}");
    let got = python(kind, where_, "check");
    // the fork point (and the first checkpoint of each branch) stay too
    let kept = got["history"].as_u64().unwrap();
    assert!((3..=6).contains(&kept), "{got}");
    assert_eq!(got["oldest_parent"], serde_json::Value::Null, "{got}");
    assert_eq!(got["count"], 5, "{got}");
    assert_eq!(got["continued"], 20, "{got}");
    assert!(got["after"].as_u64().unwrap() > kept, "{got}");
    let verified = checkpointer::verify::verify_thread(saver, "kept").await.unwrap();
    assert!(
        verified
            .of_kind(checkpointer::verify::ViolationKind::MissingParent)
            .next()
            .is_none(),
        "{verified:?}"
    );
}

async fn python_reads_a_retained_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retained.sqlite");
    let where_ = path.to_str().unwrap().to_owned();
    let saver = SqliteSaver::open(&path).await.unwrap();
    retain_and_check(&saver, "sqlite", &where_).await;
}

async fn python_reads_a_retained_postgres_store() {
    let db = match postgres_support::create_database().await {
        Ok(db) => db,
        Err(reason) => return postgres_support::skip(&reason),
    };
    let url = postgres_support::url_of(&db);
    let saver = PostgresSaver::open(&url).await.unwrap();
    retain_and_check(&saver, "postgres", &url).await;
    drop(saver);
    postgres_support::drop_database(&db).await;
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "retention::python_reads_a_retained_sqlite_store",
            &[&crate::PYTHON],
            2,
            python_reads_a_retained_sqlite_store,
        ),
        harness::tokio(
            "retention::python_reads_a_retained_postgres_store",
            &[&crate::PYTHON, &crate::POSTGRES],
            2,
            python_reads_a_retained_postgres_store,
        ),
    ]
}
