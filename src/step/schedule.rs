//! Which tasks a checkpoint runs next and the checkpoint a step's writes
//! make, with `Send` (push) tasks and join barriers, as LangGraph 1.x
//! stores them:
//!
//! * a task's `Send`s are writes to `__pregel_tasks`; the step's closing
//!   checkpoint holds the list of all of them (in task-path order), and the
//!   next step runs one push task per packet (path
//!   [`TaskPath::Push`], id [`push_task_id`](crate::task::push_task_id),
//!   trigger `__pregel_push`), whatever `versions_seen` says; the step after
//!   that empties the list (`[]`, a new version, not in `updated_channels`);
//! * a join `join:<a>+<b>:<c>` holds the set of sources that have written
//!   (a Python `set`); each write adds its source (a new version, listed in
//!   `updated_channels` only once the set is full), `c` runs when the set
//!   is full, and the step that runs `c` empties it (a new version, not
//!   listed).

use std::collections::{BTreeMap, BTreeSet};

use crate::checkpoint::channels::{ERROR, INTERRUPT, START, TASKS};
use crate::checkpoint::{Checkpoint, CheckpointMetadata, PendingWrite, StepCheckpoint};
use crate::error::{Error, Result};
use crate::serde::py::{Send, Set};
use crate::serde::Value;
use crate::task::{pull_task_id_at, push_task_id_at, TaskPath, PUSH};
use crate::thread::{is_ephemeral, triggered_node, ChannelReducer, TaskState, TaskWrites, BRANCH_TO};
use crate::version::ChannelVersion;

use super::topology::{Join, Topology, JOIN};
use super::StepError;

/// The node a join barrier channel wakes.
fn join_target(channel: &str) -> Option<String> {
    Join::parse(channel).map(|j| j.target)
}

/// The join whose barrier is `channel`: the declared one, or the one its
/// name describes.
fn barrier(channel: &str, topology: Option<&Topology>) -> Option<Join> {
    if !channel.starts_with(JOIN) {
        return None;
    }
    topology
        .and_then(|t| t.join_of(channel).cloned())
        .or_else(|| Join::parse(channel))
}

/// The sources a barrier value records (a Python `set` of node names).
fn barrier_seen(channel: &str, value: &Value) -> Result<Vec<String>> {
    let mut seen = Set::<String>::from_value(value)
        .map_err(|_| StepError::Reducer {
            channel: channel.to_owned(),
            reason: "the barrier does not hold a set of node names".to_owned(),
        })?
        .0;
    seen.sort_unstable();
    seen.dedup();
    Ok(seen)
}

/// Whether every source of `join` has written.
fn is_full(seen: &[String], join: &Join) -> bool {
    let mut names: Vec<&str> = join.sources.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    names.len() == seen.len() && names.iter().zip(seen).all(|(a, b)| *a == b)
}

/// A barrier value: the sorted set of `seen`.
fn barrier_value(seen: &[String]) -> Result<Value> {
    Set(seen.to_vec()).to_value()
}

/// Whether `value`, held by `channel`, is something a node can read: any
/// value but a join barrier still waiting for a source.
pub(crate) fn readable(channel: &str, value: &Value) -> bool {
    match barrier(channel, None) {
        Some(join) => barrier_seen(channel, value).is_ok_and(|seen| is_full(&seen, &join)),
        None => true,
    }
}

/// Whether `channel` holds something a node can read.
fn available(checkpoint: &Checkpoint, channel: &str, topology: Option<&Topology>) -> bool {
    let Some(value) = checkpoint.channel_values.get(channel) else {
        return false;
    };
    match barrier(channel, topology) {
        Some(join) => barrier_seen(channel, value).is_ok_and(|seen| is_full(&seen, &join)),
        None => true,
    }
}

/// See [`crate::thread::next_tasks`]; `topology` gives the declared nodes,
/// their order and their triggers.
pub(crate) fn next_tasks_in(
    checkpoint: &Checkpoint,
    ns: &str,
    metadata: &CheckpointMetadata,
    pending_writes: &[PendingWrite],
    topology: Option<&Topology>,
) -> Result<Vec<TaskState>> {
    let step = match metadata.get("step") {
        Some(Value::Int(i)) => i128::from(*i),
        Some(Value::UInt(u)) => i128::from(*u),
        _ => -1,
    } + 1;
    let step = step.to_string();
    let mut tasks: Vec<TaskState> = Vec::new();
    // one push task per pending `Send`, in packet order (Python skips a
    // packet that is not a `Send` or names no node of the graph)
    if let Some(packets) = checkpoint.channel_values.get(TASKS).and_then(Value::as_array) {
        for (index, packet) in packets.iter().enumerate() {
            let Ok(send) = Send::from_value(packet) else {
                continue;
            };
            if topology.is_some_and(|t| !t.has_node(&send.node)) {
                continue;
            }
            let index = u64::try_from(index).map_err(|_| Error::invalid("too many pending sends"))?;
            tasks.push(TaskState {
                id: push_task_id_at(&checkpoint.id, ns, &step, &send.node, index)?,
                path: TaskPath::Push { index },
                triggers: vec![PUSH.to_owned()],
                input: Some(send.arg),
                name: send.node,
                interrupts: Vec::new(),
                error: None,
                writes: Vec::new(),
            });
        }
    }
    // the candidate nodes and their triggers
    let mut candidates: Vec<(String, Vec<String>)> = Vec::new();
    if checkpoint.channel_versions.contains_key(START) {
        candidates.push((START.to_owned(), vec![START.to_owned()]));
    }
    match topology {
        Some(t) => candidates.extend(t.nodes().iter().map(|n| (n.clone(), t.triggers(n)))),
        None => {
            let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for channel in checkpoint.channel_versions.keys() {
                let node = match triggered_node(channel) {
                    Some(START) => continue,
                    Some(node) => node.to_owned(),
                    None => match join_target(channel) {
                        Some(node) => node,
                        None => continue,
                    },
                };
                let triggers = by_node
                    .entry(node.clone())
                    .or_insert_with(|| vec![format!("{BRANCH_TO}{node}")]);
                if channel.starts_with(JOIN) {
                    triggers.push(channel.clone());
                }
            }
            for (node, mut triggers) in by_node {
                triggers.sort_unstable();
                candidates.push((node, triggers));
            }
        }
    }
    for (node, triggers) in candidates {
        let seen = checkpoint.versions_seen.get(&node);
        let woken = triggers.iter().any(|channel| {
            let Some(version) = checkpoint.channel_versions.get(channel) else {
                return false;
            };
            available(checkpoint, channel, topology) && seen.and_then(|s| s.get(channel)).is_none_or(|s| version > s)
        });
        if !woken {
            continue;
        }
        let refs: Vec<&str> = triggers.iter().map(String::as_str).collect();
        tasks.push(TaskState {
            id: pull_task_id_at(&checkpoint.id, ns, &step, &node, &refs)?,
            path: TaskPath::pull(node.as_str()),
            name: node,
            triggers,
            input: None,
            interrupts: Vec::new(),
            error: None,
            writes: Vec::new(),
        });
    }
    place_writes(&mut tasks, pending_writes);
    Ok(tasks)
}

/// Gives each task the writes stored under its id: one pass over the
/// writes, each placed by a binary search over the ids
/// (O((writes + tasks) log tasks)), in stored order.
fn place_writes(tasks: &mut [TaskState], pending_writes: &[PendingWrite]) {
    let mut by_id: Vec<(String, usize)> = tasks.iter().enumerate().map(|(i, t)| (t.id.clone(), i)).collect();
    by_id.sort_unstable();
    for w in pending_writes {
        let Ok(at) = by_id.binary_search_by(|(id, _)| id.as_str().cmp(w.task_id.as_str())) else {
            continue;
        };
        let task = &mut tasks[by_id[at].1];
        match w.channel.as_str() {
            INTERRUPT => match &w.value {
                Value::Array(items) => task.interrupts.extend(items.iter().cloned()),
                other => task.interrupts.push(other.clone()),
            },
            ERROR => task.error = Some(w.value.clone()),
            _ => {}
        }
        task.writes.push(w.clone());
    }
}

/// Whether a task's triggers are those of a push task.
pub(crate) fn is_push(triggers: &[String]) -> bool {
    matches!(triggers, [t] if t == PUSH)
}

/// Refuses `__pregel_tasks` writes that are not a `Send` to a declared node.
///
/// # Errors
/// [`StepError::UnknownNode`]; [`Error::InvalidInput`] for a value that is
/// not a `Send`.
pub(crate) fn check_sends(writes: &[(String, Value)], topology: Option<&Topology>) -> Result<()> {
    for (channel, value) in writes.iter().filter(|(c, _)| c == TASKS) {
        let send =
            Send::from_value(value).map_err(|_| Error::invalid(format!("a write to {channel} that is not a Send")))?;
        if !topology.is_some_and(|t| t.has_node(&send.node)) {
            return Err(StepError::UnknownNode {
                node: send.node,
                declared: topology.map(|t| t.nodes().to_vec()).unwrap_or_default(),
            }
            .into());
        }
    }
    Ok(())
}

/// See [`crate::thread::apply_writes`]; `topology` gives the declared
/// joins (others are read from their channel's name).
pub(crate) fn apply_writes_in(
    parent: &Checkpoint,
    step: i64,
    tasks: &[TaskWrites<'_>],
    version: &ChannelVersion,
    reducer: Option<&ChannelReducer<'_>>,
    topology: Option<&Topology>,
) -> Result<StepCheckpoint> {
    let mut next = parent.successor(step);
    let v = |_: Option<&ChannelVersion>| Ok(version.clone());
    for task in tasks {
        let triggers: Vec<&str> = task.triggers.iter().map(String::as_str).collect();
        next.mark_seen(task.node, &triggers);
    }
    // consume the triggers read: a one-step value goes, a full barrier
    // empties; a trigger with nothing in it (`__pregel_push`, a join
    // target's idle `branch:to:`) is left alone
    let mut triggers: Vec<&str> = tasks
        .iter()
        .flat_map(|t| t.triggers.iter().map(String::as_str))
        .collect();
    triggers.sort_unstable();
    triggers.dedup();
    for trigger in triggers {
        let Some(value) = next.value(trigger) else {
            continue;
        };
        match barrier(trigger, topology) {
            Some(join) => {
                if is_full(&barrier_seen(trigger, value)?, &join) {
                    next.write_unlisted(trigger, barrier_value(&[])?, v)?;
                }
            }
            None => {
                next.bump(trigger, v)?;
            }
        }
    }
    let mut written: Vec<&str> = Vec::new();
    let mut sends: Vec<Value> = Vec::new();
    let mut arrivals: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for (channel, value) in tasks.iter().flat_map(|t| t.writes) {
        if channel == TASKS {
            sends.push(value.clone());
            continue;
        }
        if channel.starts_with(JOIN) {
            arrivals.entry(channel.as_str()).or_default().push(value);
            continue;
        }
        if channel.starts_with("__") && channel != START {
            continue; // __resume__, __interrupt__, …: not state
        }
        let value = match reducer {
            Some(reduce) => reduce(channel, next.value(channel), value.clone())?,
            None => value.clone(),
        };
        next.write(channel, value, v)?;
        written.push(channel);
    }
    if !sends.is_empty() {
        next.write(TASKS, Value::from(sends), v)?;
        written.push(TASKS);
    }
    for (channel, names) in arrivals {
        arrive(&mut next, channel, &names, topology, version)?;
    }
    written.sort_unstable();
    let stale: Vec<String> = next
        .channels_with_values()
        .filter(|c| is_ephemeral(c) && written.binary_search(&c.as_str()).is_err())
        .cloned()
        .collect();
    for channel in stale {
        next.bump(&channel, v)?;
    }
    // the sends of the step before are handed out: the list empties
    let ran = tasks.iter().any(|t| !t.triggers.is_empty());
    let pending = next
        .value(TASKS)
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if ran && pending && written.binary_search(&TASKS).is_err() {
        next.write_unlisted(TASKS, Value::from(Vec::<Value>::new()), v)?;
    }
    Ok(next)
}

/// Adds the sources `names` to the barrier `channel`.
fn arrive(
    next: &mut StepCheckpoint,
    channel: &str,
    names: &[&Value],
    topology: Option<&Topology>,
    version: &ChannelVersion,
) -> Result<()> {
    let v = |_: Option<&ChannelVersion>| Ok(version.clone());
    let join = barrier(channel, topology).ok_or_else(|| StepError::Reducer {
        channel: channel.to_owned(),
        reason: "not a join barrier's name (join:<a>+<b>:<node>)".to_owned(),
    })?;
    let mut sources: Vec<&str> = join.sources.iter().map(String::as_str).collect();
    sources.sort_unstable();
    let mut seen: BTreeSet<String> = match next.value(channel) {
        Some(value) => barrier_seen(channel, value)?.into_iter().collect(),
        None => BTreeSet::new(),
    };
    let mut changed = false;
    for name in names {
        let name = name.as_str().filter(|n| sources.binary_search(n).is_ok());
        let name = name.ok_or_else(|| StepError::Reducer {
            channel: channel.to_owned(),
            reason: format!("a write that is not one of the join's sources {:?}", join.sources),
        })?;
        changed |= seen.insert(name.to_owned());
    }
    let seen: Vec<String> = seen.into_iter().collect();
    if changed {
        if is_full(&seen, &join) {
            next.write(channel, barrier_value(&seen)?, v)?;
        } else {
            next.write_unlisted(channel, barrier_value(&seen)?, v)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::CheckpointSource;
    use crate::version::next_version;

    fn send(node: &str) -> Value {
        Send::new(node, Value::from(1)).to_value()
    }

    /// A step-0 checkpoint holding `packets` as its pending sends.
    fn with_sends(packets: Vec<Value>) -> (Checkpoint, CheckpointMetadata) {
        let mut step = Checkpoint::new(0).successor(0);
        step.write(TASKS, Value::from(packets), next_version).unwrap();
        (
            step.into_checkpoint(),
            CheckpointMetadata::new(CheckpointSource::Loop, 0),
        )
    }

    #[test]
    fn packets_that_are_not_sends_or_name_undeclared_nodes_are_skipped_keeping_indexes() {
        let (cp, meta) = with_sends(vec![send("w"), Value::from("junk"), send("gone"), send("w")]);
        let tasks = next_tasks_in(&cp, "", &meta, &[], None).unwrap();
        let paths: Vec<String> = tasks.iter().map(|t| t.path.to_string()).collect();
        assert_eq!(paths.len(), 3, "{paths:?}");
        let topology = Topology::new(["w"]);
        let tasks = next_tasks_in(&cp, "", &meta, &[], Some(&topology)).unwrap();
        let indexes: Vec<TaskPath> = tasks.iter().map(|t| t.path.clone()).collect();
        assert_eq!(indexes, [TaskPath::Push { index: 0 }, TaskPath::Push { index: 3 }]);
        assert_eq!(tasks[1].id, crate::task::push_task_id(&cp.id, "", 1, "w", 3).unwrap());
        // an empty list schedules nothing
        let (cp, meta) = with_sends(Vec::new());
        assert!(next_tasks_in(&cp, "", &meta, &[], None).unwrap().is_empty());
    }

    #[test]
    fn a_barrier_is_readable_only_when_full() {
        let set = |names: &[&str]| Set(names.iter().map(|n| (*n).to_owned()).collect()).to_value().unwrap();
        assert!(!readable("join:a+b:c", &set(&["a"])));
        assert!(!readable("join:a+b:c", &set(&[])));
        assert!(readable("join:a+b:c", &set(&["b", "a"])));
        assert!(!readable("join:a+b:c", &Value::from("a")), "not a set: nothing to read");
        assert!(readable("branch:to:c", &Value::Nil));
        assert!(Join::parse("join::c").is_none() && Join::parse("join:a+b:").is_none());
    }

    #[test]
    fn a_barrier_write_from_a_node_that_is_not_a_source_is_a_typed_error() {
        let parent = Checkpoint::new(0);
        let writes = [("join:a+b:c".to_owned(), Value::from("z"))];
        let triggers = ["branch:to:z".to_owned()];
        let task = TaskWrites {
            node: "z",
            triggers: &triggers,
            writes: &writes,
        };
        let v = next_version(None).unwrap();
        let err = apply_writes_in(&parent, 1, &[task], &v, None, None).unwrap_err();
        assert!(matches!(err.as_step(), Some(StepError::Reducer { .. })), "{err}");
    }
}
