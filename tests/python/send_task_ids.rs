//! Task ids of a graph Python runs now (Sends, a join, an entrypoint's
//! calls, an `update_state`), recomputed by `checkpointer::task` as the
//! fixtures' are (`tests/sqlite/task_ids.rs`, whose checks this reuses).

use crate::{fixture_task_ids, harness, sqlite_support};

const PYTHON_RUN: &str = r#"
import operator, sqlite3, sys
from typing import Annotated, TypedDict
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

class S(TypedDict):
    items: list
    out: Annotated[list, operator.add]

def node(tag):
    return lambda state: {"out": [tag]}

g = StateGraph(S)
g.add_node("worker", lambda state: {"out": state["items"]})
for tag in "abc":
    g.add_node(tag, node(tag))
g.add_conditional_edges(START, lambda s: [Send("worker", {"items": [i], "out": []}) for i in s["items"]], ["worker"])
g.add_edge(START, "a")
g.add_edge(START, "b")
g.add_edge(["a", "b"], "c")
g.add_edge("worker", END)
g.add_edge("c", END)
conn = sqlite3.connect(sys.argv[1], check_same_thread=False)
saver = SqliteSaver(conn)
app = g.compile(checkpointer=saver)
config = {"configurable": {"thread_id": "send"}}
app.invoke({"items": [1, 2, 3], "out": []}, config)
app.update_state(config, {"out": ["u"]}, as_node="c")

@task
def add_one(x):
    return x + 1

@entrypoint(checkpointer=saver)
def wf(x):
    return add_one(add_one(x).result()).result()

wf.invoke(1, {"configurable": {"thread_id": "functional"}})
conn.commit()
"#;

/// Send tasks, a join trigger and an entrypoint, run by Python now: their
/// ids are recomputed as the fixtures' are (calls and the `update_state`
/// task are counted, their paths parsed, their ids not recomputed).
fn python_send_and_join_task_ids_are_recomputed() {
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("send.sqlite");
    sqlite_support::run_python_script(&python, PYTHON_RUN, &[db.to_str().unwrap()]);
    let counts = fixture_task_ids::check_fixture("python run", &db);
    println!("python run: {counts:?}");
    // __start__ (7 writes), a, b (2 each), c (1), wf (2); three Sends; two
    // calls and the update.
    assert_eq!((counts.pull, counts.push, counts.other), (14, 3, 3), "{counts:?}");
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::test(
        "send_task_ids::python_send_and_join_task_ids_are_recomputed",
        &[&crate::PYTHON],
        python_send_and_join_task_ids_are_recomputed,
    )]
}
