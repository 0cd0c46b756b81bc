//! A chat graph over LangChain messages merged by LangGraph's
//! `add_messages` (state `messages: Annotated[list, add_messages]`):
//! `START → greet → ask → answer → tidy → END`. `ask` asks the human
//! (an interrupt) and adds their question, `answer` adds a reply and
//! rewrites the greeting by its id, `tidy` removes the question with a
//! `RemoveMessage`. The same graph in Python is `chat` in
//! `scripts/runtime_branch_peer.py`.

use checkpointer::prelude::*;
use checkpointer::serde::py::{Message, MessageKind};
use serde::{Deserialize, Serialize};

use super::runtime::{Action, Edge, Graph, Node, NodeResult};

/// The state: LangChain messages, merged by `add_messages`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ChatState {
    #[serde(default)]
    pub messages: Vec<Message>,
}

/// The input of a turn: one human message with its id.
pub fn input(id: &str, text: &str) -> Result<Vec<(String, Value)>> {
    checkpointer::state::writes(&ChatState {
        messages: vec![Message::human(text).with_id(id)],
    })
}

fn writes(messages: Vec<Message>) -> NodeResult {
    Ok(checkpointer::state::writes(&ChatState { messages })?)
}

fn greet(state: &ChatState, _: &mut TaskContext) -> NodeResult {
    let id = format!("ai-{}", state.messages.len());
    writes(vec![Message::ai("hello! what can I do?").with_id(id)])
}

fn ask(state: &ChatState, ctx: &mut TaskContext) -> NodeResult {
    let question = ctx.interrupt("what do you want to know?")?;
    let id = format!("human-{}", state.messages.len());
    writes(vec![Message::human(question).with_id(id)])
}

fn answer(state: &ChatState, _: &mut TaskContext) -> NodeResult {
    let greeting = state.messages.iter().find(|m| m.kind == MessageKind::Ai);
    let greeting = greeting.and_then(|m| m.id.clone()).unwrap_or_default();
    let id = format!("ai-{}", state.messages.len());
    writes(vec![
        Message::ai("it is noon").with_id(id),
        Message::ai("hello!").with_id(greeting),
    ])
}

fn tidy(state: &ChatState, _: &mut TaskContext) -> NodeResult {
    let question = state.messages.iter().rev().find(|m| m.kind == MessageKind::Human);
    let question = question.and_then(|m| m.id.clone()).unwrap_or_default();
    writes(vec![Message::remove(question)])
}

/// The graph.
pub fn graph() -> Graph<ChatState> {
    let node = |name, action, edge| Node { name, action, edge };
    Graph {
        entry: "greet",
        nodes: vec![
            node("greet", Action::Run(greet), Edge::To("ask")),
            node("ask", Action::Run(ask), Edge::To("answer")),
            node("answer", Action::Run(answer), Edge::To("tidy")),
            node("tidy", Action::Run(tidy), Edge::End),
        ],
        reducers: Reducers::new().messages::<Message>("messages"),
    }
}
