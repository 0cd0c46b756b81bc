//! Two more graphs of the mini runtime against Python LangGraph on SQLite
//! files, with the same graphs in Python (`scripts/runtime_branch_peer.py`):
//!
//! * `publish`: an interrupt raised inside a subgraph and answered from the
//!   parent, by the interrupt's id (`Command(resume={id: answer})`) and by
//!   value. The runtime's rows equal Python's row for row, Python resumes
//!   the runtime's thread at the interrupt and the runtime resumes Python's;
//! * `chat`: LangChain messages merged by `add_messages` (ids, a rewrite by
//!   id, a `RemoveMessage`), with an interrupt: the same rows, the same
//!   message bytes, and each side resumes the other's thread.
//!
//! Every thread either side writes passes the row verifier.

#[path = "../../examples/mini_runtime/chat.rs"]
mod chat;
#[path = "../../examples/mini_runtime/publish.rs"]
mod publish;

use checkpointer::prelude::*;
use checkpointer::serde::py::{Interrupt, MessageKind};
use checkpointer::step::Resume;
use serde_json::Value as Json;

use crate::harness;
use crate::mini_runtime::{assert_verifies, comparable, graph, normalized, runtime, rust_history};
use crate::side_by_side::{self, open, SideBySide};
use graph::State;
use runtime::{End, Options};

/// The Python side of these tests.
const PEER: &str = "runtime_branch_peer.py";

fn root() -> Value {
    Value::map::<&str>([])
}

/// Both files' rows of thread `t`, normalized, are equal, row by row; the
/// dumps as the peer printed them.
fn assert_same_rows(side: &SideBySide, checkpoints: usize) -> (Json, Json) {
    let (ours, theirs) = (side.dump(&side.ours, "t"), side.dump(&side.theirs, "t"));
    side_by_side::assert_same_rows(&normalized(&ours), &normalized(&theirs), checkpoints);
    (ours, theirs)
}

/// The one pending interrupt of the thread's root, as the parent sees it.
async fn pending_id(thread: &Thread) -> String {
    let waiting: StateSnapshot<Value> = thread.state().await.unwrap().unwrap();
    let interrupts: Vec<&Value> = waiting.interrupts().collect();
    assert_eq!(interrupts.len(), 1, "one interrupt waits");
    Interrupt::from_value(interrupts[0]).unwrap().id
}

fn last(state: &State) -> &str {
    state.messages.last().map_or("", |m| m.content.as_str())
}

/// The parent answers the subgraph's interrupt by its id, in both
/// languages: the same rows, the answer stored under the subgraph's task.
async fn subgraph_interrupt_resumed_by_id_stores_what_python_stores() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let (ours, theirs) = (&side.ours, &side.theirs);
    let db = theirs.as_path();
    side.graph("run", "publish", db, "t", &["--input", "hi"]);
    side.graph("resume", "publish", db, "t", &["--answer", "yes", "--by-id"]);

    let saver = open(ours).await;
    let (g, t, opts) = (publish::graph(), Thread::new(saver.clone(), "t"), Options::default());
    let run = g
        .invoke(&t, Some(graph::user_input(0, "hi").unwrap()), None, root(), &opts)
        .await
        .unwrap();
    assert_eq!(
        run.ran,
        [
            "__start__",
            "plan",
            "write",
            "write/__start__",
            "write/draft",
            "write/confirm"
        ]
    );
    let End::Interrupted(asked) = run.end else {
        panic!("expected the subgraph's interrupt")
    };
    let id = pending_id(&t).await;
    assert_eq!(
        asked[0].id, id,
        "the parent sees the subgraph's interrupt under its own id"
    );

    // An id that is not pending is refused, and nothing is stored.
    let wrong = t.resume(Resume::ById(vec![("0".repeat(32), Value::from("yes"))])).await;
    assert!(matches!(
        wrong.unwrap_err().as_step(),
        Some(checkpointer::step::StepError::UnknownInterrupt { .. })
    ));

    let run = g
        .run(
            t.resume(Resume::ById(vec![(id, Value::from("yes"))])).await.unwrap(),
            &opts,
        )
        .await
        .unwrap();
    assert_eq!(run.ran, ["write", "write/confirm", "wrap"]);
    let End::Done(state) = run.end else {
        panic!("expected the end")
    };
    let contents: Vec<&str> = state.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["hi", "plan", "draft", "published", "done"]);

    // 5 root checkpoints and 4 in the subgraph's namespace
    assert_same_rows(&side, 9);
    side.assert_both_verify(&saver, "t", 9).await;

    // The verifier takes the parent's copy of the subgraph's interrupt only
    // when the subgraph raised that id: changed, it is a violation.
    let mut tuples = saver
        .list_vec(
            Some(CheckpointConfig::in_scope("t", NsScope::All)),
            ListOptions::default(),
        )
        .await
        .unwrap();
    let relayed = tuples
        .iter_mut()
        .filter(|t| t.config.ns().is_empty())
        .flat_map(|t| t.pending_writes.iter_mut())
        .find(|w| w.channel == "__interrupt__")
        .expect("the parent's task stores the subgraph's interrupt");
    let mut it = Interrupt::from_value(&relayed.value.as_array().unwrap()[0]).unwrap();
    it.id = "0123456789abcdef0123456789abcdef".into();
    relayed.value = Value::from(vec![it.to_value()]);
    let mut verifier = checkpointer::verify::ThreadVerifier::new("t");
    for tuple in &tuples {
        verifier.push(tuple);
    }
    let report = verifier.finish();
    assert_eq!(report.violations.len(), 1, "{:#?}", report.violations);
    let v = &report.violations[0];
    assert_eq!(v.kind, checkpointer::verify::ViolationKind::InterruptWrite);
    assert!(
        v.message.contains("nor one a subgraph raised under it"),
        "{}",
        v.message
    );
}

/// The parent answers without an id (`Command(resume=value)`): stored
/// under the parent's checkpoint, taken by the subgraph's task.
async fn subgraph_interrupt_resumed_by_value_stores_what_python_stores() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let (ours, theirs) = (&side.ours, &side.theirs);
    let db = theirs.as_path();
    side.graph("run", "publish", db, "t", &["--input", "hi"]);
    side.graph("resume", "publish", db, "t", &["--answer", "no"]);

    let saver = open(ours).await;
    let (g, t, opts) = (publish::graph(), Thread::new(saver.clone(), "t"), Options::default());
    g.invoke(&t, Some(graph::user_input(0, "hi").unwrap()), None, root(), &opts)
        .await
        .unwrap();
    let run = g
        .invoke(&t, None, Some(Value::from("no")), root(), &opts)
        .await
        .unwrap();
    let End::Done(state) = run.end else {
        panic!("expected the end")
    };
    assert_eq!(state.messages[3].content, "dropped");
    assert_same_rows(&side, 9);
    side.assert_both_verify(&saver, "t", 9).await;
}

/// Python reads the runtime's interrupted thread as the runtime does and
/// answers the subgraph's interrupt by id; the runtime reads the result.
async fn python_resumes_the_runtime_at_the_subgraph_interrupt() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let path = &side.ours;
    let db = path.as_path();
    let saver = open(path).await;
    let (g, t, opts) = (publish::graph(), Thread::new(saver.clone(), "t"), Options::default());
    g.invoke(&t, Some(graph::user_input(0, "hi").unwrap()), None, root(), &opts)
        .await
        .unwrap();
    let history = || side.graph("history", "publish", db, "t", &[]);
    let theirs = history();
    assert_eq!(comparable(&theirs), rust_history(&t).await);
    assert_eq!(theirs[0]["next"], serde_json::json!(["write"]));
    assert_eq!(theirs[0]["tasks"][0]["interrupt_ids"][0], pending_id(&t).await.as_str());

    let out = side.graph("resume", "publish", db, "t", &["--answer", "yes", "--by-id"]);
    assert_eq!(out["values"]["messages"][3]["content"], "published");
    let now: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(last(&now.values), "done");
    assert!(now.next.is_empty());
    assert_eq!(comparable(&history()), rust_history(&t).await);
    assert_eq!(assert_verifies(&saver, "t").await, 9);
}

/// The runtime answers, by id, the subgraph interrupt Python stopped at;
/// Python reads the result.
async fn the_runtime_resumes_python_at_the_subgraph_interrupt() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let path = &side.ours;
    let db = path.as_path();
    let out = side.graph("run", "publish", db, "t", &["--input", "hi"]);
    assert_eq!(out["interrupted"], true);
    let saver = open(path).await;
    let (g, t, opts) = (publish::graph(), Thread::new(saver.clone(), "t"), Options::default());
    let id = pending_id(&t).await;
    assert_eq!(out["interrupts"][0]["id"], id.as_str());
    let run = g
        .run(
            t.resume(Resume::ById(vec![(id, Value::from("no"))])).await.unwrap(),
            &opts,
        )
        .await
        .unwrap();
    assert_eq!(run.ran, ["write", "write/confirm", "wrap"], "draft's writes are reused");
    let End::Done(state) = run.end else {
        panic!("expected the end")
    };
    assert_eq!(state.messages[3].content, "dropped");
    let theirs = side.graph("history", "publish", db, "t", &[]);
    assert_eq!(theirs[0]["values"]["messages"][4]["content"], "done");
    assert_eq!(comparable(&theirs), rust_history(&t).await);
    assert_eq!(assert_verifies(&saver, "t").await, 9);
}

/// The texts of a chat state, `type:id:content`.
fn chat_texts(state: &chat::ChatState) -> Vec<String> {
    state
        .messages
        .iter()
        .map(|m| {
            format!(
                "{}:{}:{}",
                m.kind.type_name(),
                m.id.as_deref().unwrap_or(""),
                m.text().unwrap_or("")
            )
        })
        .collect()
}

/// Python's values of a chat state in the same shape.
fn chat_texts_of(values: &Json) -> Vec<String> {
    values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}:{}:{}",
                m["type"].as_str().unwrap(),
                m["id"].as_str().unwrap(),
                m["content"].as_str().unwrap()
            )
        })
        .collect()
}

const CHAT_END: [&str; 3] = ["human:human-0:hi", "ai:ai-1:hello!", "ai:ai-3:it is noon"];

/// The `add_messages` graph: the same rows as Python's, and the same bytes
/// for every message write.
async fn add_messages_graph_stores_what_python_stores() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let (ours, theirs) = (&side.ours, &side.theirs);
    let db = theirs.as_path();
    side.graph("run", "chat", db, "t", &["--input", "hi"]);
    side.graph("resume", "chat", db, "t", &["--answer", "the time, please"]);

    let saver = open(ours).await;
    let (g, t, opts) = (chat::graph(), Thread::new(saver.clone(), "t"), Options::default());
    let run = g
        .invoke(&t, Some(chat::input("human-0", "hi").unwrap()), None, root(), &opts)
        .await
        .unwrap();
    assert!(matches!(run.end, End::Interrupted(_)));
    let run = g
        .invoke(&t, None, Some(Value::from("the time, please")), root(), &opts)
        .await
        .unwrap();
    let End::Done(state) = run.end else {
        panic!("expected the end")
    };
    assert_eq!(chat_texts(&state), CHAT_END);
    assert!(state.messages.iter().all(|m| m.kind != MessageKind::Remove));

    let (raw_ours, raw_theirs) = assert_same_rows(&side, 6);
    // The message writes, byte for byte (they hold no checkpoint-derived id).
    let messages = |dump: &Json| -> Vec<Json> {
        dump["writes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["channel"] == "messages")
            .map(|w| w["value_hex"].clone())
            .collect()
    };
    assert_eq!(messages(&raw_ours).len(), 5, "input, greet, ask, answer, tidy");
    assert_eq!(messages(&raw_ours), messages(&raw_theirs));
    side.assert_both_verify(&saver, "t", 6).await;
}

/// Each side resumes the other's `add_messages` thread at its interrupt.
async fn add_messages_threads_resume_across_languages() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let path = &side.ours;
    let db = path.as_path();
    let saver = open(path).await;
    let (g, opts) = (chat::graph(), Options::default());

    // The runtime stops at `ask`; Python answers.
    let ours = Thread::new(saver.clone(), "ours");
    g.invoke(&ours, Some(chat::input("human-0", "hi").unwrap()), None, root(), &opts)
        .await
        .unwrap();
    let out = side.graph("resume", "chat", db, "ours", &["--answer", "the time, please"]);
    assert_eq!(chat_texts_of(&out["values"]), CHAT_END);
    let now: StateSnapshot<chat::ChatState> = ours.state().await.unwrap().unwrap();
    assert_eq!(chat_texts(&now.values), CHAT_END);
    assert_eq!(assert_verifies(&saver, "ours").await, 6);

    // Python stops at `ask`; the runtime answers, by id.
    let out = side.graph("run", "chat", db, "theirs", &["--input", "hi"]);
    assert_eq!(out["next"], serde_json::json!(["ask"]));
    let theirs = Thread::new(saver.clone(), "theirs");
    let id = pending_id(&theirs).await;
    let run = g
        .run(
            theirs
                .resume(Resume::ById(vec![(id, Value::from("the time, please"))]))
                .await
                .unwrap(),
            &opts,
        )
        .await
        .unwrap();
    assert_eq!(run.ran, ["ask", "answer", "tidy"]);
    let history = side.graph("history", "chat", db, "theirs", &[]);
    assert_eq!(chat_texts_of(&history[0]["values"]), CHAT_END);
    assert_eq!(history[0]["next"], serde_json::json!([]));
    assert_eq!(assert_verifies(&saver, "theirs").await, 6);
}

/// After a fork, Python's `get_state_history` lists both branches,
/// interleaved by checkpoint id, exactly as `Thread::history` does; one
/// branch (`Thread::branch`) is the parent chain of the newest checkpoint
/// in Python's own list.
async fn history_interleaves_branches_as_python_lists_them() {
    let Some(side) = SideBySide::new(PEER) else {
        return;
    };
    let path = &side.ours;
    let db = path.as_path();
    let saver = open(path).await;
    let (g, t, opts) = (chat::graph(), Thread::new(saver.clone(), "t"), Options::default());
    g.invoke(&t, Some(chat::input("human-0", "hi").unwrap()), None, root(), &opts)
        .await
        .unwrap();
    g.invoke(&t, None, Some(Value::from("the time, please")), root(), &opts)
        .await
        .unwrap();
    // back to the checkpoint that waited for the question, asked anew
    let before: Vec<StateSnapshot<chat::ChatState>> = t.history(ListOptions::default()).await.unwrap();
    let waiting = before.iter().find(|s| s.next == ["ask"]).unwrap();
    t.fork(waiting.config.checkpoint_id().unwrap()).await.unwrap();
    let run = g.invoke(&t, None, None, root(), &opts).await.unwrap();
    assert!(matches!(run.end, End::Interrupted(_)), "the fork asks again");
    let run = g
        .invoke(&t, None, Some(Value::from("the weather")), root(), &opts)
        .await
        .unwrap();
    assert!(matches!(run.end, End::Done(_)));

    let id_of = |s: &Json, key: &str| s[key].as_str().map(str::to_owned);
    let theirs = side.graph("history", "chat", db, "t", &[]);
    let theirs: Vec<(Option<String>, Option<String>)> = theirs
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (id_of(s, "checkpoint_id"), id_of(s, "parent_checkpoint_id")))
        .collect();
    let history: Vec<StateSnapshot<chat::ChatState>> = t.history(ListOptions::default()).await.unwrap();
    let ours: Vec<(Option<String>, Option<String>)> = history
        .iter()
        .map(|s| {
            let parent = s
                .parent_config
                .as_ref()
                .and_then(|p| p.checkpoint_id())
                .map(str::to_owned);
            (s.config.checkpoint_id().map(str::to_owned), parent)
        })
        .collect();
    assert_eq!(ours, theirs, "the whole history, as get_state_history lists it");
    assert_eq!(ours.len(), 6 + 4, "the first run's 6 and the fork's 4");

    // Python's list, followed by parent ids from its newest: one branch.
    let mut chain = Vec::new();
    let mut next = theirs[0].0.clone();
    while let Some(id) = next {
        let at = theirs.iter().find(|(c, _)| c.as_deref() == Some(id.as_str())).unwrap();
        chain.push(id);
        next = at.1.clone();
    }
    let branch: Vec<StateSnapshot<chat::ChatState>> = t.branch(None, 100).await.unwrap();
    let branch: Vec<String> = branch
        .iter()
        .map(|s| s.config.checkpoint_id().unwrap().to_owned())
        .collect();
    assert_eq!(branch, chain);
    assert!(branch.len() < ours.len(), "the abandoned checkpoints are not on it");
    let last: StateSnapshot<chat::ChatState> = t.state().await.unwrap().unwrap();
    assert!(chat_texts(&last.values).contains(&"ai:ai-3:it is noon".to_owned()));
    assert_eq!(assert_verifies(&saver, "t").await, 10);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    macro_rules! trial {
        ($f:ident) => {
            harness::tokio(
                concat!("runtime_branch::", stringify!($f)),
                &[&crate::PYTHON],
                2,
                $f,
            )
        };
    }
    vec![
        trial!(subgraph_interrupt_resumed_by_id_stores_what_python_stores),
        trial!(subgraph_interrupt_resumed_by_value_stores_what_python_stores),
        trial!(python_resumes_the_runtime_at_the_subgraph_interrupt),
        trial!(the_runtime_resumes_python_at_the_subgraph_interrupt),
        trial!(add_messages_graph_stores_what_python_stores),
        trial!(add_messages_threads_resume_across_languages),
        trial!(history_interleaves_branches_as_python_lists_them),
    ]
}
