//! The task ids Python's runtime stored with its pending writes
//! (`testdata/fixtures/*.sqlite`) are the ids `checkpointer::task` computes
//! from the checkpoint each write belongs to, and every stored `task_path`
//! parses as a `TaskPath` and renders back to itself.
//!
//! A write stored under checkpoint `C` belongs to a task prepared from `C`,
//! which ran at step `C.metadata.step + 1`. For a pull task the node comes
//! from the path and its triggers from `StateGraph`'s channel naming
//! (`__start__` for the `__start__` node and a functional-API entrypoint,
//! `branch:to:<node>` and any `join:...:<node>` channel for the others); the
//! test also checks that the
//! node was due to run, as the runtime decides: a trigger channel's version in
//! `C` is newer than the version the node last saw. For a `Send` task the node
//! is the `index`-th `Send` written to `__pregel_tasks` under `C`'s parent, in
//! the order the runtime applies writes.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use checkpointer::serde::py::Send;
use checkpointer::serde::{JsonPlusSerializer, Serializer};
use checkpointer::task::{pull_task_id, push_task_id, TaskPath, NULL_TASK_ID};
use checkpointer::{ChannelVersion, Checkpoint};

/// One stored checkpoint: its step, parent and decoded body.
struct Stored {
    step: i64,
    parent: Option<String>,
    checkpoint: Checkpoint,
}

/// One stored write.
struct Write {
    thread: String,
    ns: String,
    checkpoint_id: String,
    task_id: String,
    task_path: String,
    idx: i64,
    channel: String,
    value: (String, Vec<u8>),
}

/// What the test saw, for the printed summary.
#[derive(Default, Debug)]
pub(crate) struct Counts {
    pub(crate) pull: usize,
    pub(crate) push: usize,
    /// Writes of calls and `update_state` tasks, whose ids are not recomputed.
    pub(crate) other: usize,
    /// Writes without a task (`NULL_TASK_ID`, or no path).
    pub(crate) no_task: usize,
}

#[test]
fn fixture_task_ids_are_recomputed() {
    let testdata = crate::sqlite_support::testdata_dir();
    let mut total = Counts::default();
    for (name, path) in crate::sqlite_support::fixtures(&testdata) {
        let counts = check_fixture(&name, &path);
        println!("{name}: {counts:?}");
        total.pull += counts.pull;
        total.push += counts.push;
        total.other += counts.other;
        total.no_task += counts.no_task;
    }
    println!(
        "task ids recomputed for {} pending writes ({} of pull tasks, {} of Send tasks); {} writes of other tasks and {} without a task not recomputed",
        total.pull + total.push,
        total.pull,
        total.push,
        total.other,
        total.no_task
    );
    assert!(
        total.pull > 0,
        "no pull-task writes in the fixtures: the test checked nothing"
    );
}

/// The graph shapes the testdata fixtures lack, run by Python's runtime into a
/// fresh `SqliteSaver` database: a `START` edge sending three packets to
/// `worker` beside two nodes joined into a third (a `join:a+b:c` trigger), an
/// `update_state`, and a functional-API entrypoint making two calls.
/// Recomputes the task id of every pending write of `path` and counts them.
pub(crate) fn check_fixture(name: &str, path: &Path) -> Counts {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let checkpoints = read_checkpoints(&conn);
    let writes = read_writes(&conn);
    let mut counts = Counts::default();
    for w in &writes {
        if w.task_id == NULL_TASK_ID || w.task_path.is_empty() {
            counts.no_task += 1;
            continue;
        }
        let at = format!(
            "{name}: write {}/{:?}/{} idx {} ({})",
            w.thread, w.ns, w.checkpoint_id, w.idx, w.task_path
        );
        let task_path: TaskPath = w
            .task_path
            .parse()
            .unwrap_or_else(|e| panic!("{at}: task path does not parse: {e}"));
        assert_eq!(task_path.to_string(), w.task_path, "{at}: task path renders back");
        let key = (w.thread.clone(), w.ns.clone(), w.checkpoint_id.clone());
        let stored = checkpoints
            .get(&key)
            .unwrap_or_else(|| panic!("{at}: the write's checkpoint is not stored"));
        assert!(stored.checkpoint.v >= 2, "{at}: v1 checkpoints hash with SHA-1");
        let step = stored.step + 1;
        match &task_path {
            TaskPath::Pull { node } => {
                let cp = &stored.checkpoint;
                let triggers = triggers(node, cp);
                let refs: Vec<&str> = triggers.iter().map(String::as_str).collect();
                assert!(due(node, &triggers, cp), "{at}: {node} was not due to run");
                let id = pull_task_id(&w.checkpoint_id, &w.ns, step, node, &refs).unwrap();
                assert_eq!(id, w.task_id, "{at}: pull task id (triggers {refs:?}, step {step})");
                counts.pull += 1;
            }
            TaskPath::Push { index } => {
                let parent = stored
                    .parent
                    .as_ref()
                    .unwrap_or_else(|| panic!("{at}: a Send task under a checkpoint without parent"));
                let sends = sends(&writes, &w.thread, &w.ns, parent);
                let send = sends
                    .get(usize::try_from(*index).unwrap())
                    .unwrap_or_else(|| panic!("{at}: {} sends under the parent", sends.len()));
                let id = push_task_id(&w.checkpoint_id, &w.ns, step, &send.node, *index).unwrap();
                assert_eq!(id, w.task_id, "{at}: Send task id (node {}, step {step})", send.node);
                counts.push += 1;
            }
            _ => counts.other += 1,
        }
    }
    counts
}

/// Every checkpoint by (thread, ns, id).
fn read_checkpoints(conn: &Connection) -> BTreeMap<(String, String, String), Stored> {
    let mut stmt = conn
        .prepare(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata \
             FROM checkpoints",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                (r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?),
                r.get::<_, Option<String>>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Vec<u8>>(5)?,
                r.get::<_, Vec<u8>>(6)?,
            ))
        })
        .unwrap();
    let mut out = BTreeMap::new();
    for row in rows {
        let (key, parent, tag, blob, metadata) = row.unwrap();
        let value = JsonPlusSerializer.loads_typed(&tag, &blob).unwrap();
        let checkpoint = Checkpoint::from_value(&value).unwrap();
        let metadata: serde_json::Value = serde_json::from_slice(&metadata).unwrap();
        let step = metadata["step"].as_i64().expect("metadata step");
        out.insert(
            key,
            Stored {
                step,
                parent,
                checkpoint,
            },
        );
    }
    out
}

fn read_writes(conn: &Connection) -> Vec<Write> {
    let mut stmt = conn
        .prepare(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value \
             FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_path, task_id, idx",
        )
        .unwrap();
    stmt.query_map([], |r| {
        Ok(Write {
            thread: r.get(0)?,
            ns: r.get(1)?,
            checkpoint_id: r.get(2)?,
            task_id: r.get(3)?,
            task_path: r.get(4)?,
            idx: r.get(5)?,
            channel: r.get(6)?,
            value: (r.get(7)?, r.get(8)?),
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The trigger channels `StateGraph` gives `node`: `__start__` for the
/// `__start__` node; `branch:to:<node>` and the `join:<a>+<b>:<node>`
/// channels (those the checkpoint knows) for the others. A graph without any
/// `branch:to:` channel is a functional-API one, whose entrypoint node is
/// triggered by `__start__`.
fn triggers(node: &str, cp: &Checkpoint) -> Vec<String> {
    let functional = !cp.channel_versions.keys().any(|ch| ch.starts_with("branch:to:"));
    if node == "__start__" || functional {
        return vec!["__start__".to_owned()];
    }
    let mut out = vec![format!("branch:to:{node}")];
    let suffix = format!(":{node}");
    out.extend(
        cp.channel_versions
            .keys()
            .filter(|ch| ch.starts_with("join:") && ch.ends_with(&suffix))
            .cloned(),
    );
    out
}

/// Whether the runtime would prepare `node` from `cp`: a trigger channel's
/// version is newer than the one the node last saw (any version when it has
/// seen none of them).
fn due(node: &str, triggers: &[String], cp: &Checkpoint) -> bool {
    let seen = cp.versions_seen.get(node);
    triggers.iter().any(|ch| match cp.channel_versions.get(ch) {
        None => false,
        Some(v) => match seen.and_then(|s| s.get(ch)) {
            None => true,
            Some(s) => newer(v, s),
        },
    })
}

/// Python's `>` on two versions of one checkpoint.
fn newer(a: &ChannelVersion, b: &ChannelVersion) -> bool {
    match (a, b) {
        (ChannelVersion::Str(a), ChannelVersion::Str(b)) => a > b,
        _ => a.counter() > b.counter(),
    }
}

/// The `Send`s written to `__pregel_tasks` under checkpoint `parent`, in the
/// order the runtime applies them (by task path, task id, then index; `writes`
/// is sorted so).
fn sends(writes: &[Write], thread: &str, ns: &str, parent: &str) -> Vec<Send> {
    writes
        .iter()
        .filter(|w| w.thread == thread && w.ns == ns && w.checkpoint_id == parent && w.channel == "__pregel_tasks")
        .map(|w| {
            let value = JsonPlusSerializer.loads_typed(&w.value.0, &w.value.1).unwrap();
            Send::from_value(&value).unwrap()
        })
        .collect()
}
