//! The row verifier (`checkpointer::verify`) over threads a runtime wrote:
//! the mini runtime's (`examples/mini_runtime`) and a Python LangGraph
//! graph's (`Send` fan-out, a join, a subgraph, two interrupts in one task
//! resumed by id and without, `update_state`, a fork and a replay) pass with
//! no violation; one fact changed at a time in a good thread is caught with
//! the right kind and message.

use std::sync::Arc;

use crate::mini_runtime::graph;
use crate::mini_runtime::runtime::{End, Options};
use checkpointer::checkpoint::channels;
use checkpointer::prelude::*;
use checkpointer::serde::py::Interrupt;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::task::NULL_TASK_ID;
use checkpointer::verify::{verify_store, verify_thread, Report, ThreadVerifier, ViolationKind};
use checkpointer::version::next_version;

use crate::{harness, sqlite_support};

fn shown(report: &Report) -> Vec<String> {
    report.violations.iter().map(ToString::to_string).collect()
}

/// The mini runtime's thread `t1`: a turn through the tool subgraph that
/// stops for review, and its resume.
async fn mini_runtime_thread(saver: Arc<dyn CheckpointSaver>) -> Vec<CheckpointTuple> {
    let g = graph::graph();
    let t = Thread::new(saver.clone(), "t1");
    let root = Value::map::<&str>([]);
    let input = graph::user_input(0, "what is the weather?").unwrap();
    let run = g
        .invoke(&t, Some(input), None, root.clone(), &Options::default())
        .await
        .unwrap();
    assert!(matches!(run.end, End::Interrupted(_)));
    let run = g
        .invoke(&t, None, Some(Value::from("yes")), root, &Options::default())
        .await
        .unwrap();
    assert!(matches!(run.end, End::Done(_)));
    saver
        .list_vec(Some(CheckpointConfig::all_namespaces("t1")), ListOptions::default())
        .await
        .unwrap()
}

/// Every thread the mini runtime writes in its scenarios (a run with an
/// interrupt and its resume, a crash and the rerun reusing pending writes, a
/// fork answered differently) has no violation, in memory and in SQLite.
async fn the_mini_runtime_threads_verify() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn CheckpointSaver> = Arc::new(SqliteSaver::open(dir.path().join("v.sqlite")).await.unwrap());
    for saver in [Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>, sqlite] {
        mini_runtime_thread(saver.clone()).await;
        let g = graph::graph();
        let root = Value::map::<&str>([]);
        for (thread, crash) in [("c", "agent"), ("c-sub", "lookup")] {
            let t = Thread::new(saver.clone(), thread);
            let input = graph::user_input(0, "what is the weather?").unwrap();
            let crashing = Options {
                crash_after: Some(crash),
            };
            g.invoke(&t, Some(input), None, root.clone(), &crashing)
                .await
                .unwrap_err();
            g.invoke(&t, None, None, root.clone(), &Options::default())
                .await
                .unwrap();
        }
        let t = Thread::new(saver.clone(), "c");
        let waiting: StateSnapshot<graph::State> = t.state().await.unwrap().unwrap();
        t.fork(waiting.config.checkpoint_id().unwrap()).await.unwrap();
        // the copy is a new checkpoint: its review task asks anew before the answer
        g.invoke(&t, None, None, root.clone(), &Options::default())
            .await
            .unwrap();
        g.invoke(&t, None, Some(Value::from("no")), root.clone(), &Options::default())
            .await
            .unwrap();
        let report = verify_store(saver.as_ref()).await.unwrap();
        assert!(report.is_ok(), "{:#?}", shown(&report));
        assert_eq!(report.threads, 3);
        assert!(report.checkpoints > 20 && report.writes > 20, "{report:?}");
    }
}

fn verify(tuples: &[CheckpointTuple]) -> Report {
    let mut v = ThreadVerifier::new("t1");
    for t in tuples {
        v.push(t);
    }
    v.finish()
}

/// The position of the first tuple (newest first) that `pred` accepts.
fn find(tuples: &[CheckpointTuple], pred: impl Fn(&CheckpointTuple) -> bool) -> usize {
    tuples.iter().position(pred).expect("the thread has such a checkpoint")
}

fn id(t: &CheckpointTuple) -> String {
    t.config.checkpoint_id().unwrap().to_owned()
}

fn parent_of<'a>(tuples: &'a [CheckpointTuple], t: &CheckpointTuple) -> &'a CheckpointTuple {
    let p = t.parent_config.as_ref().unwrap();
    &tuples[find(tuples, |x| {
        x.config.ns() == t.config.ns() && x.config.checkpoint_id() == p.checkpoint_id()
    })]
}

fn is_loop(t: &CheckpointTuple) -> bool {
    t.metadata.source() == Some(CheckpointSource::Loop) && t.parent_config.is_some()
}

fn version(text: &str) -> ChannelVersion {
    ChannelVersion::from(text)
}

/// One changed fact, the violation it must produce.
struct Mutation {
    name: &'static str,
    kind: ViolationKind,
    /// The checkpoint the violation names.
    at: String,
    channel: Option<&'static str>,
    message: String,
    tuples: Vec<CheckpointTuple>,
}

/// Each of the mutations below, applied alone to the mini runtime's good
/// thread, is reported with its kind, checkpoint, channel and message.
async fn each_mutation_is_caught() {
    let good = mini_runtime_thread(Arc::new(InMemorySaver::new())).await;
    let report = verify(&good);
    assert!(report.is_ok(), "{:#?}", shown(&report));

    // the newest root checkpoint: the last step, which wrote messages
    let head = find(&good, |t| t.config.ns().is_empty() && is_loop(t));
    let head_id = id(&good[head]);
    let parent = parent_of(&good, &good[head]).clone();
    let pv = parent.checkpoint.channel_versions.get("messages").unwrap().clone();
    let hv = good[head].checkpoint.channel_versions.get("messages").unwrap().clone();
    let newest = parent.checkpoint.max_version().unwrap().clone();
    let mut all = Vec::new();
    let mut m = |name: &'static str,
                 kind: ViolationKind,
                 at: &str,
                 channel: Option<&'static str>,
                 message: String,
                 change: &dyn Fn(&mut Vec<CheckpointTuple>)| {
        let mut tuples = good.clone();
        change(&mut tuples);
        all.push(Mutation {
            name,
            kind,
            at: at.to_owned(),
            channel,
            message,
            tuples,
        });
    };

    let back = version("00000000000000000000000000000000.0.5");
    m(
        "a version moved backwards",
        ViolationKind::VersionBackwards,
        &head_id,
        Some("messages"),
        format!("channel \"messages\" went back from version {pv} in the parent to {back}"),
        &|t| {
            t[head]
                .checkpoint
                .channel_versions
                .insert("messages".into(), back.clone());
        },
    );
    m(
        "a versioned channel dropped",
        ViolationKind::VersionBackwards,
        &head_id,
        Some("messages"),
        format!("channel \"messages\" has version {pv} in the parent and none here"),
        &|t| {
            t[head].checkpoint.channel_versions.shift_remove("messages");
            t[head].checkpoint.channel_values.shift_remove("messages");
        },
    );
    let ahead = next_version(Some(&hv)).unwrap();
    m(
        "versions_seen ahead of channel_versions",
        ViolationKind::VersionsSeenAhead,
        &head_id,
        Some("messages"),
        format!("node \"review\" has seen version {ahead} of channel \"messages\", newer than its version {hv}"),
        &|t| {
            let seen = t[head].checkpoint.versions_seen.entry("review".into()).or_default();
            seen.insert("messages".into(), ahead.clone());
        },
    );
    let parent_step = parent.metadata.step().unwrap();
    m(
        "a step skipped",
        ViolationKind::StepNumber,
        &head_id,
        None,
        format!(
            "step {} does not follow the parent's step {parent_step} (a loop checkpoint takes step {})",
            parent_step + 2,
            parent_step + 1
        ),
        &|t| {
            t[head].metadata.insert("step", parent_step + 2);
        },
    );
    let twice = next_version(Some(&hv)).unwrap();
    m(
        "two version bumps in one step",
        ViolationKind::VersionPerStep,
        &head_id,
        Some("messages"),
        format!(
            "channel \"messages\" changed to version {twice} (counter {}), not the step's version: counter {}, one after the parent's newest version {newest}",
            twice.counter().unwrap(),
            hv.counter().unwrap()
        ),
        &|t| {
            t[head].checkpoint.channel_versions.insert("messages".into(), twice.clone());
        },
    );
    // a second channel changed in the step with the same counter, another version
    let other_ch = good[head]
        .checkpoint
        .channel_versions
        .iter()
        .find(|(ch, v)| *ch != "messages" && **v == hv)
        .map(|(ch, _)| ch.clone())
        .expect("another channel changed with messages");
    let same_counter = version(&format!("{}.0.123", hv.to_string().split('.').next().unwrap()));
    m(
        "two versions in one step",
        ViolationKind::VersionPerStep,
        &head_id,
        None,
        "in one step: a step makes one version".to_owned(),
        &|t| {
            t[head]
                .checkpoint
                .channel_versions
                .insert(other_ch.clone(), same_counter.clone());
        },
    );
    let unchanged = parent
        .checkpoint
        .channel_versions
        .iter()
        .find(|(ch, v)| good[head].checkpoint.channel_versions.get(*ch) == Some(*v))
        .map(|(ch, _)| ch.clone())
        .expect("a channel the last step did not change");
    m(
        "updated_channels lists an unchanged channel",
        ViolationKind::UpdatedChannels,
        &head_id,
        None,
        format!("updated_channels lists channel {unchanged:?}, whose version did not change"),
        &|t| {
            let mut list: Vec<String> = t[head].checkpoint.updated_channels.as_deref().unwrap().to_vec();
            list.push(unchanged.clone());
            list.sort();
            t[head].checkpoint.updated_channels = Some(list.into());
        },
    );
    m(
        "updated_channels misses a written channel",
        ViolationKind::UpdatedChannels,
        &head_id,
        Some("messages"),
        format!(
            "channel \"messages\" changed to version {hv} and holds a value, but updated_channels does not list it"
        ),
        &|t| {
            let list: Vec<String> = t[head]
                .checkpoint
                .updated_channels
                .as_deref()
                .unwrap()
                .iter()
                .filter(|c| *c != "messages")
                .cloned()
                .collect();
            t[head].checkpoint.updated_channels = Some(list.into());
        },
    );

    // writes: the checkpoint review ran from holds its interrupt
    let asked = find(&good, |t| {
        t.pending_writes.iter().any(|w| w.channel == channels::INTERRUPT)
    });
    let asked_id = id(&good[asked]);
    let iw = good[asked]
        .pending_writes
        .iter()
        .position(|w| w.channel == channels::INTERRUPT)
        .unwrap();
    let review_task = good[asked].pending_writes[iw].task_id.clone();
    let agent = find(&good, |t| {
        t.config.ns().is_empty() && t.pending_writes.iter().any(|w| w.task_path == "~__pregel_pull, agent")
    });
    let agent_id = id(&good[agent]);
    let aw = good[agent]
        .pending_writes
        .iter()
        .position(|w| w.task_path == "~__pregel_pull, agent")
        .unwrap();
    let agent_task = good[agent].pending_writes[aw].task_id.clone();
    let agent_step = good[agent].metadata.step().unwrap() + 1;
    let wrong = review_task.clone();
    m(
        "a wrong task id on a write",
        ViolationKind::TaskId,
        &agent_id,
        None,
        format!(
            "has task id {wrong}, not the id of the pull task of node \"agent\" at step {agent_step} ({agent_task}"
        ),
        &|t| {
            t[agent].pending_writes[aw].task_id = wrong.clone();
        },
    );
    m(
        "a malformed interrupt write",
        ViolationKind::InterruptWrite,
        &asked_id,
        Some("__interrupt__"),
        format!("the interrupt write of task {review_task} is not a list of Interrupts"),
        &|t| {
            t[asked].pending_writes[iw].value = Value::from("send the answer?");
        },
    );
    let bad_id = "0123456789abcdef0123456789abcdef";
    m(
        "an interrupt id not derived from its task",
        ViolationKind::InterruptWrite,
        &asked_id,
        Some("__interrupt__"),
        format!("interrupt 0 of task {review_task} has id {bad_id}, not an interrupt id of the task's namespace \"review:{review_task}\""),
        &|t| {
            let w = &mut t[asked].pending_writes[iw];
            let mut it = Interrupt::from_value(&w.value.as_array().unwrap()[0]).unwrap();
            it.id = bad_id.into();
            w.value = Value::Array(vec![it.to_value()].into());
        },
    );
    m(
        "an interrupt write at a regular index",
        ViolationKind::WriteIndex,
        &asked_id,
        Some("__interrupt__"),
        "the write to \"__interrupt__\" has index 0, not the channel's fixed index -3".to_owned(),
        &|t| {
            t[asked].pending_writes[iw].idx = 0;
        },
    );
    let rw = good[asked]
        .pending_writes
        .iter()
        .position(|w| w.channel == channels::RESUME && w.task_id == NULL_TASK_ID)
        .expect("the resume answer under NULL_TASK_ID");
    m(
        "a resume write holding None",
        ViolationKind::ResumeWrite,
        &asked_id,
        Some("__resume__"),
        "the resume write without a task holds None, which Python does not take as an answer".to_owned(),
        &|t| {
            t[asked].pending_writes[rw].value = Value::Nil;
        },
    );
    m(
        "a write without a task that names a task path",
        ViolationKind::TaskId,
        &asked_id,
        Some("__resume__"),
        "a write to \"__resume__\" without a task (NULL_TASK_ID) has task path \"~__pregel_pull, review\"; Python stores none".to_owned(),
        &|t| {
            t[asked].pending_writes[rw].task_path = "~__pregel_pull, review".into();
        },
    );
    m(
        "a task's resume answers not in a list",
        ViolationKind::ResumeWrite,
        &asked_id,
        Some("__resume__"),
        format!("the resume write of task {review_task} is not a list of answers (Python writes the task's answers as a list)"),
        &|t| {
            let w = PendingWrite::new(review_task.clone(), channels::RESUME, "yes").with_task_path("~__pregel_pull, review");
            t[asked].pending_writes.push(w);
        },
    );

    // parents and writes
    let first = find(&good, |t| t.config.ns().is_empty() && t.parent_config.is_none());
    let second = find(&good, |t| {
        t.config.ns().is_empty() && t.parent_config.as_ref().and_then(|p| p.checkpoint_id()) == Some(&id(&good[first]))
    });
    let first_id = id(&good[first]);
    m(
        "a missing parent",
        ViolationKind::MissingParent,
        &id(&good[second]),
        None,
        format!("its parent checkpoint {first_id} is not stored (a pruned thread clears the parent id instead)"),
        &|t| {
            t.remove(first);
        },
    );
    m(
        "a step's pending writes missing",
        ViolationKind::MissingWrites,
        &agent_id,
        None,
        "its pending writes are missing".to_owned(),
        &|t| {
            t[agent].pending_writes.clear();
        },
    );

    assert!(all.len() >= 12, "{}", all.len());
    for mutation in &all {
        let report = verify(&mutation.tuples);
        let hit = report.violations.iter().find(|v| {
            v.kind == mutation.kind
                && v.checkpoint_id == mutation.at
                && (mutation.channel.is_none() || v.channel.as_deref() == mutation.channel)
                && v.message.contains(&mutation.message)
        });
        assert!(
            hit.is_some(),
            "{}: expected [{}] {:?} at {}, got {:#?}",
            mutation.name,
            mutation.kind,
            mutation.message,
            mutation.at,
            shown(&report)
        );
        println!("{}: {}", mutation.name, hit.unwrap());
    }

    // an explicitly pruned thread: the oldest kept checkpoint forgot its parent
    let mut pruned = good.clone();
    pruned.remove(first);
    let second = find(&pruned, |t| {
        t.config.ns().is_empty() && t.parent_config.as_ref().and_then(|p| p.checkpoint_id()) == Some(&first_id)
    });
    pruned[second].parent_config = None;
    let report = verify(&pruned);
    assert!(report.is_ok(), "{:#?}", shown(&report));
}

const PYTHON_RUN: &str = r#"
import operator, sqlite3, sys
from typing import Annotated, TypedDict
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

class S(TypedDict):
    items: list
    out: Annotated[list, operator.add]

class Sub(TypedDict):
    out: Annotated[list, operator.add]

sub = StateGraph(Sub)
sub.add_node("s1", lambda s: {"out": ["s1"]})
sub.add_node("s2", lambda s: {"out": ["s2"]})
sub.add_edge(START, "s1")
sub.add_edge("s1", "s2")
sub.add_edge("s2", END)

def ask(state):
    a = interrupt("first?")
    b = interrupt("second?")
    return {"out": [f"ask:{a}:{b}"]}

def node(tag):
    return lambda state: {"out": [tag]}

g = StateGraph(S)
g.add_node("worker", lambda state: {"out": state["items"]})
for tag in "abc":
    g.add_node(tag, node(tag))
g.add_node("sub", sub.compile())
g.add_node("ask", ask)
g.add_conditional_edges(START, lambda s: [Send("worker", {"items": [i], "out": []}) for i in s["items"]], ["worker"])
g.add_edge(START, "a")
g.add_edge(START, "b")
g.add_edge(["a", "b"], "c")
g.add_edge("c", "sub")
g.add_edge("sub", "ask")
g.add_edge("ask", END)
g.add_edge("worker", END)
conn = sqlite3.connect(sys.argv[1], check_same_thread=False)
app = g.compile(checkpointer=SqliteSaver(conn))
config = {"configurable": {"thread_id": "py"}}
app.invoke({"items": [1, 2, 3], "out": []}, config)
first = app.get_state(config).tasks[0].interrupts[0].id
app.invoke(Command(resume={first: "yes"}), config)
second = app.get_state(config).tasks[0].interrupts[0].id
assert second != first
app.invoke(Command(resume={second: "sure"}), config)
app.update_state(config, {"out": ["u"]}, as_node="c")
app.invoke({"items": [4], "out": []}, config)
app.invoke(Command(resume="plain"), config)
app.invoke(Command(resume="plain2"), config)
history = list(app.get_state_history(config))
forked = app.update_state(history[len(history) // 2].config, None, as_node="__copy__")
app.update_state(forked, {"out": ["f"]}, as_node="a")
app.invoke(None, history[-3].config)
conn.commit()
"#;

/// A thread Python LangGraph writes with every shape the verifier knows
/// has no violation; a `Send` task's id changed in it is caught.
async fn a_python_langgraph_thread_verifies() {
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("py.sqlite");
    sqlite_support::run_python_script(&python, PYTHON_RUN, &[db.to_str().unwrap()]);
    let saver = SqliteSaver::open(&db).await.unwrap();
    let report = verify_thread(&saver, "py").await.unwrap();
    assert!(report.is_ok(), "{:#?}", shown(&report));
    println!("{report:?}");
    assert!(report.checkpoints > 20, "{report:?}");
    assert!(report.writes > report.unchecked_task_ids, "{report:?}");

    let mut tuples = saver
        .list_vec(Some(CheckpointConfig::all_namespaces("py")), ListOptions::default())
        .await
        .unwrap();
    let (at, w) = tuples
        .iter()
        .enumerate()
        .find_map(|(i, t)| {
            t.pending_writes
                .iter()
                .position(|w| w.task_path.starts_with("~__pregel_push, 0000000001"))
                .map(|w| (i, w))
        })
        .expect("a Send task's write");
    let other = "00000000-0000-0000-0000-000000000001".to_owned();
    tuples[at].pending_writes[w].task_id = other.clone();
    let mut v = ThreadVerifier::new("py");
    for t in &tuples {
        v.push(t);
    }
    let report = v.finish();
    let kinds: Vec<ViolationKind> = report.violations.iter().map(|v| v.kind).collect();
    assert_eq!(kinds, [ViolationKind::TaskId], "{:#?}", shown(&report));
    assert!(
        report.violations[0].message.contains(&format!(
            "has task id {other}, not the id of Send task 1 to node \"worker\""
        )),
        "{}",
        report.violations[0]
    );
    saver.close().await.unwrap();
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "verify::the_mini_runtime_threads_verify",
            &[],
            2,
            the_mini_runtime_threads_verify,
        ),
        harness::tokio("verify::each_mutation_is_caught", &[], 2, each_mutation_is_caught),
        harness::tokio(
            "verify::a_python_langgraph_thread_verifies",
            &[&crate::PYTHON],
            2,
            a_python_langgraph_thread_verifies,
        ),
    ]
}
