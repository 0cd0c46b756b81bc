//! `checkpointer::reducer::add_messages` against LangGraph's own
//! `langgraph.graph.message.add_messages`, run by the peer venv on the same
//! inputs: the same messages in the same order (type, id, content), the same
//! msgpack bytes when every input has an id, and an error where Python
//! raises one.

use checkpointer::prelude::*;
use checkpointer::reducer::{Reducers, REMOVE_ALL_MESSAGES};
use checkpointer::serde::msgpack;
use checkpointer::serde::py::{Message, MessageKind};
use serde_json::{json, Value as Json};

use crate::{harness, sqlite_support};

const PYTHON: &str = r#"
import json, sys, uuid
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import add_messages

def build(m):
    kind, content, mid = m["type"], m.get("content", ""), m.get("id")
    if kind == "remove":
        return RemoveMessage(id=mid)
    if kind == "tool":
        return ToolMessage(content=content, tool_call_id=m["tool_call_id"], id=mid)
    cls = {"human": HumanMessage, "ai": AIMessage, "system": SystemMessage}[kind]
    return cls(content=content, id=mid)

def given(ms):
    return [build(m) for m in ms] if isinstance(ms, list) else build(ms)

serde = JsonPlusSerializer()
out = []
for case in json.load(open(sys.argv[1])):
    try:
        merged = add_messages(given(case["left"]), given(case["right"]))
    except ValueError as e:
        out.append({"error": str(e)})
        continue
    summary = []
    for m in merged:
        mid = m.id
        try:
            new = uuid.UUID(mid).version == 4 and mid not in json.dumps(case)
        except ValueError:
            new = False
        summary.append({"type": m.type, "id": "<new>" if new else mid, "content": m.content})
    out.append({"ok": summary, "hex": serde.dumps_typed(merged)[1].hex()})
json.dump(out, sys.stdout)
"#;

fn h(id: &str, content: &str) -> Json {
    json!({"type": "human", "id": id, "content": content})
}

fn ai(id: &str, content: &str) -> Json {
    json!({"type": "ai", "id": id, "content": content})
}

fn rm(id: &str) -> Json {
    json!({"type": "remove", "id": id})
}

/// The cases: (left, right), each a message or a list of them.
fn cases() -> Vec<(Json, Json)> {
    let no_id = |kind: &str, content: &str| json!({"type": kind, "content": content});
    vec![
        (json!([h("1", "hi")]), json!([ai("2", "hello")])),
        (json!([h("1", "hi"), ai("2", "hello")]), json!([ai("2", "hello again")])),
        (json!([h("1", "hi")]), ai("2", "one message, not a list")),
        (json!([]), json!([h("1", "first")])),
        (json!([h("1", "a"), ai("2", "b"), h("3", "c")]), json!([rm("2")])),
        (json!([h("1", "a"), ai("2", "b")]), json!([rm("1"), h("1", "a again")])),
        (json!([h("1", "a")]), json!([ai("2", "b"), rm("2")])),
        (json!([h("1", "a")]), json!([rm("9")])),
        (
            json!([h("1", "a"), ai("2", "b")]),
            json!([rm(REMOVE_ALL_MESSAGES), h("3", "c")]),
        ),
        (
            json!([h("1", "a")]),
            json!([
                h("3", "c"),
                rm(REMOVE_ALL_MESSAGES),
                h("4", "d"),
                rm(REMOVE_ALL_MESSAGES),
                h("5", "e")
            ]),
        ),
        (json!([h("1", "a")]), json!([ai("2", "b"), ai("2", "b twice")])),
        (
            json!([{"type": "system", "id": "s", "content": "be brief"}]),
            json!([{"type": "tool", "id": "t", "content": "42", "tool_call_id": "call-1"}, rm("s")]),
        ),
        (json!([no_id("human", "a")]), json!([no_id("ai", "b"), h("1", "c")])),
        (json!([h("1", "a")]), json!([rm("1"), rm("1")])),
    ]
}

fn message(m: &Json) -> Message {
    let content = m["content"].as_str().unwrap_or("");
    let built = match m["type"].as_str().unwrap() {
        "human" => Message::human(content),
        "ai" => Message::ai(content),
        "system" => Message::system(content),
        "tool" => Message::tool(content, m["tool_call_id"].as_str().unwrap()),
        "remove" => return Message::remove(m["id"].as_str().unwrap()),
        other => panic!("{other}"),
    };
    match m["id"].as_str() {
        Some(id) => built.with_id(id),
        None => built,
    }
}

fn value(ms: &Json) -> Value {
    match ms {
        Json::Array(items) => Value::from(items.iter().map(|m| message(m).to_value()).collect::<Vec<_>>()),
        one => message(one).to_value(),
    }
}

fn type_name(kind: MessageKind) -> &'static str {
    kind.type_name()
}

/// The Rust reducer's result in the shape the script prints.
fn rust(left: &Json, right: &Json) -> Json {
    let reducers = Reducers::new().messages::<Message>("messages");
    let case = serde_json::to_string(&json!([left, right])).unwrap();
    match reducers.reduce("messages", Some(&value(left)), value(right)) {
        Err(e) => json!({"error": e.to_string()}),
        Ok(merged) => {
            let messages: Vec<Message> = from_value_ref(&merged).unwrap();
            let summary: Vec<Json> = messages
                .iter()
                .map(|m| {
                    let id = m.id.clone().unwrap();
                    let new = uuid::Uuid::parse_str(&id).is_ok_and(|u| u.get_version_num() == 4) && !case.contains(&id);
                    json!({"type": type_name(m.kind), "id": if new { "<new>".to_owned() } else { id }, "content": m.content.as_str()})
                })
                .collect();
            let hex: String = msgpack::encode(&merged)
                .unwrap()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            json!({"ok": summary, "hex": hex})
        }
    }
}

fn add_messages_matches_python() {
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("cases.json");
    let cases = cases();
    let as_json: Vec<Json> = cases.iter().map(|(l, r)| json!({"left": l, "right": r})).collect();
    std::fs::write(&input, serde_json::to_string(&as_json).unwrap()).unwrap();
    let stdout = sqlite_support::run_python_script(&python, PYTHON, &[input.to_str().unwrap()]);
    let theirs: Vec<Json> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(theirs.len(), cases.len());
    for (i, ((left, right), theirs)) in cases.iter().zip(&theirs).enumerate() {
        let ours = rust(left, right);
        if let Some(error) = theirs.get("error") {
            let ours = ours["error"]
                .as_str()
                .unwrap_or_else(|| panic!("case {i}: Python raised {error}, we gave {ours}"));
            assert!(ours.contains("doesn't exist"), "case {i}: {ours}");
            continue;
        }
        assert_eq!(ours["ok"], theirs["ok"], "case {i}: {left} + {right}");
        if !ours["ok"].to_string().contains("<new>") {
            assert_eq!(ours["hex"], theirs["hex"], "case {i}: the stored bytes differ");
        }
    }
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::test(
        "add_messages::add_messages_matches_python",
        &[&crate::PYTHON],
        add_messages_matches_python,
    )]
}
