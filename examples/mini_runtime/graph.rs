//! The example graph: `START → agent`, `agent → tools | review | END`
//! (a conditional edge), `tools → agent` (a subgraph with one node,
//! `lookup`), `review → END` (asks a human through an interrupt). The same
//! graph in Python is `scripts/mini_runtime_peer.py`.

use checkpointer::prelude::*;
use checkpointer::state;
use serde::{Deserialize, Serialize};

use super::runtime::{Action, Ctx, Edge, Graph, Node, NodeResult};

/// A chat message, stored as the dict `{"id", "role", "content"}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Message {
    pub id: String,
    pub role: String,
    pub content: String,
}

/// The graph's state: one channel, `messages`, merged by id.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct State {
    #[serde(default)]
    pub messages: Vec<Message>,
}

/// What a node returns: the messages it adds.
#[derive(Serialize)]
struct Update {
    messages: Vec<Message>,
}

/// The `messages` reducer: a message whose id is already there replaces it,
/// others are appended (Python's `add_by_id`).
pub fn add_by_id(old: Option<&Value>, new: Value) -> Result<Value> {
    let mut merged: Vec<Message> = match old {
        Some(v) if *v != Value::Nil => from_value_ref(v)?,
        _ => Vec::new(),
    };
    let added: Vec<Message> = if new == Value::Nil {
        Vec::new()
    } else {
        from_value(new)?
    };
    for m in added {
        match merged.iter_mut().find(|x| x.id == m.id) {
            Some(slot) => *slot = m,
            None => merged.push(m),
        }
    }
    to_value(&merged)
}

/// The input of one user turn on a thread holding `len` messages.
pub fn user_input(len: usize, text: &str) -> Result<Vec<(String, Value)>> {
    state::writes(&Update {
        messages: vec![msg(format!("user-{len}"), "user", text)],
    })
}

fn msg(id: String, role: &str, content: &str) -> Message {
    Message {
        id,
        role: role.to_owned(),
        content: content.to_owned(),
    }
}

/// One new message from `role`, id numbered like Python's.
fn say(state: &State, role: &str, content: &str) -> NodeResult {
    let prefix = if role == "tool" { "tool" } else { "ai" };
    let id = format!("{prefix}-{}", state.messages.len());
    Ok(state::writes(&Update {
        messages: vec![msg(id, role, content)],
    })?)
}

fn agent(state: &State, _: &mut Ctx) -> NodeResult {
    let last = state.messages.last().map(|m| (m.role.as_str(), m.content.as_str()));
    match last {
        Some(("user", text)) if text.contains("weather") => say(state, "ai", "calling the weather tool"),
        Some(("tool", text)) => say(state, "ai", &format!("answer: {text}")),
        Some((_, text)) => say(state, "ai", &format!("echo: {text}")),
        None => say(state, "ai", "echo: "),
    }
}

fn route(state: &State) -> Option<&'static str> {
    let last = state.messages.last()?;
    if last.role == "ai" && last.content == "calling the weather tool" {
        Some("tools")
    } else if last.content.starts_with("answer: ") {
        Some("review")
    } else {
        None
    }
}

fn lookup(state: &State, _: &mut Ctx) -> NodeResult {
    say(state, "tool", "sunny in Paris")
}

fn review(state: &State, ctx: &mut Ctx) -> NodeResult {
    let answer = ctx.interrupt(Value::map([("question", Value::from("send the answer?"))]))?;
    let verdict = if answer.as_str() == Some("yes") {
        "sent"
    } else {
        "discarded"
    };
    say(state, "ai", verdict)
}

/// The graph.
pub fn graph() -> Graph<State> {
    let reducers = vec![("messages", add_by_id as super::runtime::Reducer)];
    let tools = Graph {
        entry: "lookup",
        nodes: vec![Node {
            name: "lookup",
            action: Action::Run(lookup),
            edge: Edge::End,
        }],
        reducers: reducers.clone(),
    };
    Graph {
        entry: "agent",
        nodes: vec![
            Node {
                name: "agent",
                action: Action::Run(agent),
                edge: Edge::Route(route),
            },
            Node {
                name: "tools",
                action: Action::Subgraph(Box::new(tools)),
                edge: Edge::To("agent"),
            },
            Node {
                name: "review",
                action: Action::Run(review),
                edge: Edge::End,
            },
        ],
        reducers,
    }
}
