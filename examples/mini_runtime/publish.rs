//! A graph whose subgraph asks a human, answered from the parent by the
//! interrupt's id (`Command(resume={id: answer})`): `START → plan → write →
//! wrap → END`, where `write` is a subgraph `START → draft → confirm → END`
//! and `confirm` interrupts. The state is the mini runtime's message list
//! (merged by id). The same graph in Python is `publish` in
//! `scripts/runtime_branch_peer.py`.

use checkpointer::prelude::*;
use serde::Serialize;

use super::graph::{Message, State};
use super::runtime::{Action, Edge, Graph, Node, NodeResult};

/// What a node returns: the messages it adds.
#[derive(Serialize)]
struct Update {
    messages: Vec<Message>,
}

/// One new AI message, id numbered like Python's (`ai-<length>`).
fn say(state: &State, content: &str) -> NodeResult {
    let message = Message {
        id: format!("ai-{}", state.messages.len()),
        role: "ai".to_owned(),
        content: content.to_owned(),
    };
    Ok(checkpointer::state::writes(&Update {
        messages: vec![message],
    })?)
}

fn plan(state: &State, _: &mut TaskContext) -> NodeResult {
    say(state, "plan")
}

fn draft(state: &State, _: &mut TaskContext) -> NodeResult {
    say(state, "draft")
}

fn confirm(state: &State, ctx: &mut TaskContext) -> NodeResult {
    let answer = ctx.interrupt(Value::map([("question", Value::from("publish the draft?"))]))?;
    say(
        state,
        if answer.as_str() == Some("yes") {
            "published"
        } else {
            "dropped"
        },
    )
}

fn wrap(state: &State, _: &mut TaskContext) -> NodeResult {
    say(state, "done")
}

fn node(name: &'static str, action: Action<State>, edge: Edge<State>) -> Node<State> {
    Node { name, action, edge }
}

/// The graph.
pub fn graph() -> Graph<State> {
    let reducers = Reducers::new().messages::<Message>("messages");
    let write = Graph {
        entry: "draft",
        nodes: vec![
            node("draft", Action::Run(draft), Edge::To("confirm")),
            node("confirm", Action::Run(confirm), Edge::End),
        ],
        reducers: reducers.clone(),
    };
    Graph {
        entry: "plan",
        nodes: vec![
            node("plan", Action::Run(plan), Edge::To("write")),
            node("write", Action::Subgraph(Box::new(write)), Edge::To("wrap")),
            node("wrap", Action::Run(wrap), Edge::End),
        ],
        reducers,
    }
}
