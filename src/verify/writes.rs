//! The checks of pending writes: task ids and paths as Python computes them,
//! special indexes, and the shape of interrupt and resume writes.

use std::collections::{HashMap, HashSet};

use super::thread::{Found, Summary};
use super::ViolationKind;
use crate::checkpoint::{channels, special_write_idx, PendingWrite, NULL_TASK_ID};
use crate::serde::py::{Interrupt, Send};
use crate::serde::Value;
use crate::task::{interrupt_id, pull_task_id, push_task_id, task_checkpoint_ns, TaskPath, INTERRUPT};

/// A `Send` task's write, checked once the parent's `Send`s are known.
#[derive(Debug)]
pub(super) struct DeferredPush {
    task_id: String,
    index: u64,
    channel: String,
}

/// Checks the writes of one checkpoint, records its `Send`s and deferred
/// `Send` task writes in `cp`; returns how many task ids were not
/// recomputed.
pub(super) fn check(cp: &mut Summary, writes: &[PendingWrite], out: &mut Vec<Found>) -> usize {
    let mut unchecked = 0;
    // the number of answers each task's own `__resume__` write holds
    let mut answers: HashMap<&str, usize> = HashMap::new();
    for w in writes {
        if w.channel == channels::RESUME && w.task_id != NULL_TASK_ID {
            answers.insert(&w.task_id, w.value.as_array().map_or(0, <[Value]>::len));
        }
    }
    // a task's writes share one id: checked once
    let mut pulls: HashSet<(&str, &str)> = HashSet::new();
    for w in writes {
        index(w, out);
        if w.channel == channels::TASKS {
            cp.sends.push(Send::from_value(&w.value).ok().map(|s| s.node));
        }
        match &*w.channel {
            channels::INTERRUPT => {
                let answered = answers.get(w.task_id.as_str()).copied().unwrap_or(0);
                interrupt(cp, w, answered, out);
            }
            channels::RESUME => resume(w, out),
            _ => {}
        }
        if w.task_id == NULL_TASK_ID {
            if !w.task_path.is_empty() {
                out.push((
                    ViolationKind::TaskId,
                    Some(w.channel.clone()),
                    format!(
                        "a write to {:?} without a task (NULL_TASK_ID) has task path {:?}; Python stores none",
                        w.channel, w.task_path
                    ),
                ));
            }
            continue;
        }
        if w.task_path.is_empty() {
            unchecked += 1;
            continue;
        }
        let Ok(path) = w.task_path.parse::<TaskPath>() else {
            if w.task_path.starts_with('~') {
                unchecked += 1;
            } else {
                out.push((
                    ViolationKind::TaskId,
                    Some(w.channel.clone()),
                    format!(
                        "the write to {:?} has task path {:?}, not one LangGraph writes",
                        w.channel, w.task_path
                    ),
                ));
            }
            continue;
        };
        // version-1 checkpoints hash task ids with SHA-1
        let Some(step) = cp.step.and_then(|s| s.checked_add(1)).filter(|_| cp.v >= 2) else {
            unchecked += 1;
            continue;
        };
        match path {
            TaskPath::Pull { node } => {
                let key = (w.task_id.as_str(), w.task_path.as_str());
                if !pulls.insert(key) {
                    continue;
                }
                let expected = pull_ids(cp, &node, step);
                let ok = expected.contains(&w.task_id);
                if !ok {
                    out.push((
                        ViolationKind::TaskId,
                        Some(w.channel.clone()),
                        format!(
                            "the write to {:?} has task id {}, not the id of the pull task of node {node:?} at step {step} ({})",
                            w.channel,
                            w.task_id,
                            expected.join(" or ")
                        ),
                    ));
                }
            }
            TaskPath::Push { index } if cp.v >= 4 => cp.pushes.push(DeferredPush {
                task_id: w.task_id.clone(),
                index,
                channel: w.channel.clone(),
            }),
            TaskPath::Interrupt { index } => {
                // update_state's task: a fresh id from the updated checkpoint,
                // or the id of a task prepared for the node (not recomputed)
                let fresh = cp.parent.as_deref().and_then(|p| update_task_id(p, index));
                if fresh.as_deref() != Some(w.task_id.as_str()) {
                    unchecked += 1;
                }
            }
            _ => unchecked += 1,
        }
    }
    unchecked
}

/// The ids Python may give the pull task of `node` prepared from `cp`: its
/// triggers are `__start__` for `__start__` (and for a functional-API
/// entrypoint: a graph with no `branch:to:` channel), otherwise
/// `branch:to:<node>` and the `join:…:<node>` channels the checkpoint has,
/// or the node's own channel (graphs written before `branch:to:`).
fn pull_ids(cp: &Summary, node: &str, step: i64) -> Vec<String> {
    let functional = !cp.versions.keys().any(|ch| ch.starts_with("branch:to:"));
    let mut candidates: Vec<Vec<String>> = Vec::new();
    if node == "__start__" || functional {
        candidates.push(vec!["__start__".to_owned()]);
    }
    if node != "__start__" {
        let mut triggers = vec![format!("branch:to:{node}")];
        let suffix = format!(":{node}");
        triggers.extend(
            cp.versions
                .keys()
                .filter(|ch| ch.starts_with("join:") && ch.ends_with(&suffix))
                .cloned(),
        );
        candidates.push(triggers);
        candidates.push(vec![node.to_owned()]);
    }
    candidates
        .iter()
        .filter_map(|t| {
            let refs: Vec<&str> = t.iter().map(String::as_str).collect();
            pull_task_id(&cp.id, &cp.ns, step, node, &refs).ok()
        })
        .collect()
}

/// The id `update_state` gives the `index`-th update of a step without a
/// prepared task: a UUID v5 of the updated checkpoint's id.
fn update_task_id(checkpoint_id: &str, index: u64) -> Option<String> {
    let base = uuid::Uuid::parse_str(checkpoint_id).ok()?;
    let name = if index == 0 {
        INTERRUPT.to_owned()
    } else {
        format!("{INTERRUPT}:{index}")
    };
    Some(uuid::Uuid::new_v5(&base, name.as_bytes()).to_string())
}

/// A special channel's write has its fixed index, another write a
/// non-negative one.
fn index(w: &PendingWrite, out: &mut Vec<Found>) {
    match special_write_idx(&w.channel) {
        Some(idx) if idx != w.idx => out.push((
            ViolationKind::WriteIndex,
            Some(w.channel.clone()),
            format!(
                "the write to {:?} has index {}, not the channel's fixed index {idx}",
                w.channel, w.idx
            ),
        )),
        None if w.idx < 0 => out.push((
            ViolationKind::WriteIndex,
            Some(w.channel.clone()),
            format!(
                "the write to {:?} has the negative index {} of a special channel",
                w.channel, w.idx
            ),
        )),
        _ => {}
    }
}

/// An `__interrupt__` write: from a task, a list of `Interrupt`s whose ids
/// are the task's interrupt ids (the `k`-th interrupt of a task that has
/// `answered` answers, `k <= answered`), or else ids a subgraph the task ran
/// raised (kept in `cp.relayed`, checked once the thread is read).
fn interrupt(cp: &mut Summary, w: &PendingWrite, answered: usize, out: &mut Vec<Found>) {
    let mut bad = |message: String| {
        out.push((ViolationKind::InterruptWrite, Some(w.channel.clone()), message));
    };
    if w.task_id == NULL_TASK_ID {
        bad("an interrupt is written by the task that raised it, not under NULL_TASK_ID".to_owned());
        return;
    }
    let Some(items) = w.value.as_array() else {
        bad(format!(
            "the interrupt write of task {} is not a list of Interrupts",
            w.task_id
        ));
        return;
    };
    let task_ns = match w.task_path.parse::<TaskPath>() {
        Ok(TaskPath::Pull { node }) => Some(task_checkpoint_ns(&cp.ns, &node, &w.task_id)),
        _ => None,
    };
    for (i, item) in items.iter().enumerate() {
        let it = match Interrupt::from_value(item) {
            Ok(it) => it,
            Err(e) => {
                bad(format!(
                    "item {i} of the interrupt write of task {} is not a langgraph.types.Interrupt: {e}",
                    w.task_id
                ));
                continue;
            }
        };
        let hex = it.id.len() == 32 && it.id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !hex {
            bad(format!(
                "interrupt {i} of task {} has id {:?}, not 32 hex digits",
                w.task_id, it.id
            ));
            continue;
        }
        if let Some(ns) = &task_ns {
            if (0..=answered).any(|k| interrupt_id(ns, k) == it.id) {
                cp.raised.push(it.id);
            } else {
                let message = format!(
                    "interrupt {i} of task {} has id {}, not an interrupt id of the task's namespace {ns:?} (first {}) nor one a subgraph raised under it",
                    w.task_id,
                    it.id,
                    interrupt_id(ns, 0)
                );
                cp.relayed.push((ns.clone(), it.id, message));
            }
        }
    }
}

/// A `__resume__` write: a task's holds the list of answers it consumed;
/// one without a task holds the caller's answer (`None` is no answer).
fn resume(w: &PendingWrite, out: &mut Vec<Found>) {
    let message = if w.task_id == NULL_TASK_ID {
        w.value
            .is_nil()
            .then(|| "the resume write without a task holds None, which Python does not take as an answer".to_owned())
    } else {
        w.value.as_array().is_none().then(|| {
            format!(
                "the resume write of task {} is not a list of answers (Python writes the task's answers as a list)",
                w.task_id
            )
        })
    };
    if let Some(message) = message {
        out.push((ViolationKind::ResumeWrite, Some(w.channel.clone()), message));
    }
}

/// The `Send` task writes of `child` against the `Send`s written under its
/// parent.
pub(super) fn check_pushes(child: &Summary, parent: &Summary, out: &mut Vec<Found>) {
    let Some(step) = child.step.and_then(|s| s.checked_add(1)) else {
        return;
    };
    let mut done: Vec<(&str, u64)> = Vec::new();
    for p in &child.pushes {
        if done.contains(&(p.task_id.as_str(), p.index)) {
            continue;
        }
        done.push((p.task_id.as_str(), p.index));
        let send = usize::try_from(p.index).ok().and_then(|i| parent.sends.get(i));
        let message = match send {
            None => Some(format!(
                "the write to {:?} comes from Send task {} of index {}, but the parent wrote {} Send(s)",
                p.channel,
                p.task_id,
                p.index,
                parent.sends.len()
            )),
            Some(None) => None,
            Some(Some(node)) => match push_task_id(&child.id, &child.ns, step, node, p.index) {
                Ok(id) if id == p.task_id => None,
                Ok(id) => Some(format!(
                    "the write to {:?} has task id {}, not the id of Send task {} to node {node:?} at step {step} ({id})",
                    p.channel, p.task_id, p.index
                )),
                Err(_) => None,
            },
        };
        if let Some(message) = message {
            out.push((ViolationKind::TaskId, Some(p.channel.clone()), message));
        }
    }
}
