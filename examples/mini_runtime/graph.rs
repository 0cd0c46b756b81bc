//! The example graph: `START → agent`, `agent → tools | review | END`
//! (a conditional edge), `tools → agent` (a subgraph with one node,
//! `lookup`), `review → END` (asks a human through an interrupt). The same
//! graph in Python is `scripts/mini_runtime_peer.py`.

use checkpointer::prelude::*;
use checkpointer::reducer::MessageLike;
use checkpointer::state;
use serde::{Deserialize, Serialize};

use super::runtime::{Action, Edge, Graph, Node, NodeResult};

/// A chat message, stored as the dict `{"id", "role", "content"}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Message {
    pub id: String,
    pub role: String,
    pub content: String,
}

/// The graph's state: one channel, `messages`, merged by id (LangGraph's
/// `add_messages`; the Python peer's `add_by_id` does the same on these).
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

impl MessageLike for Message {
    fn id(&self) -> Option<&str> {
        Some(self.id.as_str())
    }
    fn set_id(&mut self, id: String) {
        self.id = id;
    }
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

fn agent(state: &State, _: &mut TaskContext) -> NodeResult {
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

fn lookup(state: &State, _: &mut TaskContext) -> NodeResult {
    say(state, "tool", "sunny in Paris")
}

fn review(state: &State, ctx: &mut TaskContext) -> NodeResult {
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
    let reducers = Reducers::new().messages::<Message>("messages");
    let tools = Graph {
        start: Edge::To("lookup"),
        nodes: vec![Node {
            name: "lookup",
            action: Action::Run(lookup),
            edge: Edge::End,
        }],
        reducers: reducers.clone(),
    };
    Graph {
        start: Edge::To("agent"),
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
