//! The verifier's delta-channel checks over a thread Python LangGraph
//! writes with a `DeltaChannel` (snapshots every two updates, a node that
//! does not write it, two runs): no violation; each of five facts changed
//! alone is caught with its kind, checkpoint, channel and message.

use checkpointer::prelude::*;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::verify::{verify_thread, Report, ThreadVerifier, ViolationKind};

use crate::{harness, sqlite_support};

const PYTHON_DELTA: &str = r#"
import sqlite3, sys
from typing import Annotated
from typing_extensions import TypedDict
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph, START, END

def extend(state, writes):
    out = list(state or [])
    for w in writes:
        out.extend(w)
    return out

class S(TypedDict):
    log: Annotated[list, DeltaChannel(extend, snapshot_frequency=2)]
    n: int

def node(tag):
    return lambda s: {"log": [tag], "n": s.get("n", 0) + 1}

g = StateGraph(S)
for t in ["n1", "n2", "n3"]:
    g.add_node(t, node(t))
g.add_node("quiet", lambda s: {"n": s["n"] + 1})
g.add_edge(START, "n1")
g.add_edge("n1", "n2")
g.add_edge("n2", "quiet")
g.add_edge("quiet", "n3")
g.add_edge("n3", END)
def run(saver):
    app = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "delta"}}
    app.invoke({"log": ["in"], "n": 0}, config)
    app.invoke({"log": ["again"]}, config)
    assert app.get_state(config).values["log"] == ["in", "n1", "n2", "n3", "again", "n1", "n2", "n3"]

if sys.argv[1].startswith("postgresql://"):
    from langgraph.checkpoint.postgres import PostgresSaver
    with PostgresSaver.from_conn_string(sys.argv[1]) as saver:
        saver.setup()
        run(saver)
else:
    conn = sqlite3.connect(sys.argv[1], check_same_thread=False)
    run(SqliteSaver(conn))
    conn.commit()
"#;

/// Runs the delta graph in Python on `store` (a SQLite path or a
/// PostgreSQL URL).
fn run_delta_graph(python: &std::path::Path, store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("delta.py");
    std::fs::write(&script, PYTHON_DELTA).unwrap();
    let (ok, _, stderr) = sqlite_support::run_python(python, &script, &[store]);
    assert!(ok, "the Python run failed:\n{stderr}");
}

fn shown(report: &Report) -> Vec<String> {
    report.violations.iter().map(ToString::to_string).collect()
}

fn verify(tuples: &[CheckpointTuple]) -> Report {
    let mut v = ThreadVerifier::new("delta");
    for t in tuples {
        v.push(t);
    }
    v.finish()
}

/// The root checkpoint of step `step` (the thread has one per step).
fn at(tuples: &[CheckpointTuple], step: i64) -> usize {
    tuples
        .iter()
        .position(|t| t.metadata.step() == Some(step))
        .expect("a checkpoint of that step")
}

fn counters(pairs: &[(&str, [i64; 2])]) -> Value {
    Value::map(pairs.iter().map(|(ch, [u, s])| (*ch, Value::from(vec![*u, *s]))))
}

const COUNTERS: &str = "counters_since_delta_snapshot";

async fn a_python_delta_thread_verifies_and_each_mutation_is_caught() {
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("delta.sqlite");
    run_delta_graph(&python, db.to_str().unwrap());
    let saver = SqliteSaver::open(&db).await.unwrap();
    let report = verify_thread(&saver, "delta").await.unwrap();
    assert!(report.is_ok(), "{:#?}", shown(&report));
    assert_eq!(report.checkpoints, 12, "{report:?}");
    let good = saver
        .list_vec(Some(CheckpointConfig::all_namespaces("delta")), ListOptions::default())
        .await
        .unwrap();
    // the crate's keep-latest prune keeps what the delta channel needs (the
    // ancestors back to its snapshot): the pruned thread verifies too
    saver.copy_thread("delta", "pruned").await.unwrap();
    saver
        .prune(&["pruned".to_owned()], checkpointer::PruneStrategy::KeepLatest)
        .await
        .unwrap();
    let pruned = verify_thread(&saver, "pruned").await.unwrap();
    assert!(pruned.is_ok(), "{:#?}", shown(&pruned));
    assert!(pruned.checkpoints < 12, "{pruned:?}");
    saver.close().await.unwrap();
    // the thread as Python wrote it: the shapes the mutations below rely on
    let step = |s: i64| &good[at(&good, s)];
    assert_eq!(step(0).metadata.get(COUNTERS), Some(&counters(&[("log", [1, 2])])));
    assert!(step(1).metadata.get(COUNTERS).is_none());
    assert!(step(1).checkpoint.channel_values.contains_key("log"));
    assert!(!step(2).checkpoint.channel_values.contains_key("log"));
    assert!(step(-1).pending_writes.iter().any(|w| w.channel == "log"));

    let id = |s: i64| step(s).config.checkpoint_id().unwrap().to_owned();
    let log_version = |s: i64| step(s).checkpoint.channel_versions["log"].clone();
    type Change = Box<dyn Fn(&mut Vec<CheckpointTuple>)>;
    let mutations: Vec<(&str, ViolationKind, String, String, Change)> = vec![
        (
            "a counter that does not advance by one superstep",
            ViolationKind::DeltaCounters,
            id(0),
            "counters_since_delta_snapshot of delta channel \"log\" is [1, 3], but the parent's advanced by this step is [1, 2] (no snapshot here)".to_owned(),
            Box::new(|t| {
                let i = at(t, 0);
                t[i].metadata.insert(COUNTERS, counters(&[("log", [1, 3])]));
            }),
        ),
        (
            "more updates than supersteps",
            ViolationKind::DeltaCounters,
            id(3),
            "counters_since_delta_snapshot of channel \"log\" is [3, 2]: a superstep counts every update, so 0 <= updates <= supersteps, and a reset counter is left out".to_owned(),
            Box::new(|t| {
                let i = at(t, 3);
                t[i].metadata.insert(COUNTERS, counters(&[("log", [3, 2])]));
            }),
        ),
        (
            "a counter kept at a snapshot",
            ViolationKind::DeltaCounters,
            id(1),
            "channel \"log\" is snapshotted here but counters_since_delta_snapshot still counts [2, 3] for it (a snapshot resets its counter)".to_owned(),
            Box::new(|t| {
                let i = at(t, 1);
                t[i].metadata.insert(COUNTERS, counters(&[("log", [2, 3])]));
            }),
        ),
        (
            "the write a delta update came from, lost",
            ViolationKind::DeltaWrites,
            id(0),
            format!(
                "delta channel \"log\" changed to version {} with no snapshot here, but the parent {} stores no write to it: the update is lost",
                log_version(0),
                id(-1)
            ),
            Box::new(|t| {
                let i = at(t, -1);
                t[i].pending_writes.retain(|w| w.channel != "log");
            }),
        ),
        (
            "history cut between a checkpoint and its snapshot",
            ViolationKind::DeltaHistory,
            id(2),
            format!(
                "delta channel \"log\" has version {} here but no stored value, and the checkpoint has no parent to rebuild it from: it reads as empty",
                log_version(2)
            ),
            Box::new(|t| {
                let i = at(t, 2);
                t[i].parent_config = None;
            }),
        ),
    ];
    for (name, kind, checkpoint, message, change) in mutations {
        let mut tuples = good.clone();
        change(&mut tuples);
        let report = verify(&tuples);
        let found: Vec<(ViolationKind, &str, Option<&str>)> = report
            .violations
            .iter()
            .map(|v| (v.kind, v.checkpoint_id.as_str(), v.channel.as_deref()))
            .collect();
        assert_eq!(
            found,
            [(kind, checkpoint.as_str(), Some("log"))],
            "{name}: {:#?}",
            shown(&report)
        );
        assert_eq!(report.violations[0].message, message, "{name}");
    }
}

/// The same graph run by Python's `PostgresSaver`: the crate's
/// `PostgresSaver` reads a thread with no violation (snapshots as blob rows
/// with an inline marker); a counter changed and a delta write deleted in
/// the rows are both caught.
#[cfg(feature = "postgres")]
async fn a_python_delta_thread_on_postgres_verifies() {
    use crate::postgres_support::{connect, create_database, drop_database, url_of};
    let Some(python) = sqlite_support::require_python() else {
        return;
    };
    let db = create_database().await.unwrap();
    run_delta_graph(&python, &url_of(&db));
    let saver = checkpointer::postgres::PostgresSaver::open(url_of(&db)).await.unwrap();
    let report = verify_thread(&saver, "delta").await.unwrap();
    assert!(report.is_ok(), "{:#?}", shown(&report));
    assert_eq!(report.checkpoints, 12, "{report:?}");
    let tuples = saver
        .list_vec(Some(CheckpointConfig::new("delta")), ListOptions::default())
        .await
        .unwrap();
    let step0 = tuples[at(&tuples, 0)].config.checkpoint_id().unwrap().to_owned();
    assert!(tuples[at(&tuples, 1)].checkpoint.channel_values.contains_key("log"));

    let client = connect(&db).await.unwrap();
    client
        .batch_execute(
            "UPDATE checkpoints SET metadata = jsonb_set(metadata, '{counters_since_delta_snapshot,log}', '[1, 3]') \
             WHERE thread_id = 'delta' AND metadata->>'step' = '0'; \
             DELETE FROM checkpoint_writes WHERE thread_id = 'delta' AND channel = 'log' AND checkpoint_id = \
             (SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'delta' AND metadata->>'step' = '-1')",
        )
        .await
        .unwrap();
    let report = verify_thread(&saver, "delta").await.unwrap();
    let mut found: Vec<(ViolationKind, String, Option<String>)> = report
        .violations
        .iter()
        .map(|v| (v.kind, v.checkpoint_id.clone(), v.channel.clone()))
        .collect();
    found.sort();
    let log = Some("log".to_owned());
    assert_eq!(
        found,
        [
            (ViolationKind::DeltaCounters, step0.clone(), log.clone()),
            (ViolationKind::DeltaWrites, step0, log),
        ],
        "{:#?}",
        shown(&report)
    );
    drop(saver);
    drop(client);
    drop_database(&db).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "verify::a_python_delta_thread_verifies_and_each_mutation_is_caught",
            &[&crate::PYTHON],
            2,
            a_python_delta_thread_verifies_and_each_mutation_is_caught,
        ),
        #[cfg(feature = "postgres")]
        harness::tokio(
            "verify::a_python_delta_thread_on_postgres_verifies",
            &[&crate::PYTHON, &crate::POSTGRES],
            2,
            a_python_delta_thread_on_postgres_verifies,
        ),
    ]
}
