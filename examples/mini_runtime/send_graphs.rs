//! Two more graphs for the mini runtime, the same in Python in
//! `scripts/mini_runtime_send_peer.py`:
//!
//! * `map_reduce`: `START` sends one packet `{"item": i}` to `worker` per
//!   input item; each worker appends `10·i` to `results` (a list reduced by
//!   appending) and goes to `reduce`, which sums them into `total`. A worker
//!   given a negative item asks whether to keep it (an interrupt in a `Send`
//!   task).
//! * `join`: `START → a → b`, and `c` waits for both `a` and `b` (LangGraph's
//!   `add_edge(["a", "b"], "c")`); each node appends its name to `log`.
//!
//! Their threads carry the graph's [`Topology`] (nodes and joins).

use checkpointer::prelude::*;
use checkpointer::reducer::append;
use checkpointer::serde::py::Send as Packet;
use checkpointer::step::Topology;
use serde::{Deserialize, Serialize};

use super::runtime::{Action, Edge, Graph, Node, NodeResult};

/// The map-reduce state (a worker's packet deserializes into it too: only
/// `item` set). Unset fields are left out, as Python's state shows them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct MapReduce {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<i64>>,
    #[serde(default)]
    pub results: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// A worker's input: its packet's item (never a channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<i64>,
}

/// The join graph's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Log {
    #[serde(default)]
    pub log: Vec<String>,
}

/// The input of a map-reduce run over `items`.
pub fn items_input(items: &[i64]) -> Vec<(String, Value)> {
    vec![("items".to_owned(), Value::from(items.to_vec()))]
}

fn fan(state: &MapReduce) -> Vec<Packet> {
    let items = state.items.as_deref().unwrap_or_default();
    items
        .iter()
        .map(|&i| Packet::new("worker", Value::map([("item", Value::from(i))])))
        .collect()
}

fn worker(state: &MapReduce, ctx: &mut TaskContext) -> NodeResult {
    let item = state.item.unwrap_or_default();
    let results = if item < 0 {
        let question = Value::map([("question", Value::from(format!("keep {item}?")))]);
        let answer = ctx.interrupt(question)?;
        if answer.as_str() == Some("yes") {
            vec![-item * 10]
        } else {
            vec![]
        }
    } else {
        vec![item * 10]
    };
    Ok(vec![("results".to_owned(), Value::from(results))])
}

fn reduce(state: &MapReduce, _: &mut TaskContext) -> NodeResult {
    Ok(vec![(
        "total".to_owned(),
        Value::from(state.results.iter().sum::<i64>()),
    )])
}

fn nothing<S>(_: &S, _: &mut TaskContext) -> NodeResult {
    Ok(Vec::new())
}

/// The map-reduce graph and its topology.
pub fn map_reduce() -> (Graph<MapReduce>, Topology) {
    let node = |name, action, edge| Node { name, action, edge };
    let graph = Graph {
        entry: START,
        nodes: vec![
            node(START, Action::Run(nothing), Edge::Fan(fan)),
            node("worker", Action::Run(worker), Edge::To("reduce")),
            node("reduce", Action::Run(reduce), Edge::End),
        ],
        reducers: Reducers::new().field("results", append::<i64>),
    };
    (graph, Topology::new(["worker", "reduce"]))
}

fn log(state: &Log, tag: &str) -> NodeResult {
    let _ = state;
    Ok(vec![("log".to_owned(), Value::from(vec![tag]))])
}

/// The join graph and its topology (`c` waits for `a` and `b`).
pub fn join() -> Result<(Graph<Log>, Topology)> {
    let graph = Graph {
        entry: "a",
        nodes: vec![
            Node {
                name: "a",
                action: Action::Run(|s, _| log(s, "a")),
                edge: Edge::To("b"),
            },
            Node {
                name: "b",
                action: Action::Run(|s, _| log(s, "b")),
                edge: Edge::End,
            },
            Node {
                name: "c",
                action: Action::Run(|s, _| log(s, "c")),
                edge: Edge::End,
            },
        ],
        reducers: Reducers::new().field("log", append::<String>),
    };
    Ok((graph, Topology::new(["a", "b", "c"]).join(&["a", "b"], "c")?))
}
