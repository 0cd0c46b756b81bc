//! Whether a thread's rows hang together: what a copy cut short, a crash
//! between two writes or a hand-edited store leaves behind.
//!
//! * a checkpoint names a parent that the namespace does not have (also
//!   what pruning leaves: the latest checkpoint keeps its parent's id);
//! * a checkpoint has no pending writes although its child is a loop step
//!   that updated channels (the writes of a step are stored on the
//!   checkpoint the step started from);
//! * writes are stored for a checkpoint that does not exist.

use std::collections::{HashMap, HashSet};

use checkpointer::saver::ThreadKeys;
use checkpointer::{CheckpointTuple, Value};

/// What the checks need of one checkpoint.
#[derive(Debug, Clone)]
pub struct Node {
    pub ns: String,
    pub id: String,
    pub parent: Option<String>,
    /// `metadata.source == "loop"`.
    pub loop_step: bool,
    /// `updated_channels`, when the checkpoint has them (version 4).
    pub updated: Option<Vec<String>>,
    /// Channel versions, as text.
    pub versions: HashMap<String, String>,
    pub writes: usize,
}

impl Node {
    /// From a tuple read through the saver.
    pub fn of_tuple(t: &CheckpointTuple) -> Node {
        let cp = &t.checkpoint;
        Node {
            ns: t.config.ns().to_owned(),
            id: t.config.checkpoint_id.clone().unwrap_or_default(),
            parent: t.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
            loop_step: matches!(t.metadata.get("source"), Some(Value::Str(s)) if s.as_str() == "loop"),
            updated: cp.updated_channels.as_deref().map(<[String]>::to_vec),
            versions: cp
                .channel_versions
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            writes: t.pending_writes.len(),
        }
    }

    /// From a checkpoint of a dump (`render::dump`), in namespace `ns`.
    pub fn of_dump(ns: &str, cp: &serde_json::Value) -> Node {
        let c = &cp["checkpoint"];
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Node {
            ns: ns.to_owned(),
            id: text(&cp["checkpoint_id"]),
            parent: cp["parent_checkpoint_id"].as_str().map(str::to_owned),
            loop_step: cp["metadata"]["source"] == "loop",
            updated: c["updated_channels"].as_array().map(|l| l.iter().map(text).collect()),
            versions: c["channel_versions"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), text(v))).collect())
                .unwrap_or_default(),
            writes: cp["pending_writes"].as_array().map_or(0, Vec::len),
        }
    }
}

/// The problems of one thread, each naming thread, namespace and checkpoint.
/// `keys`: what the thread stores (see `CheckpointSaver::thread_keys`).
pub fn problems(thread: &str, nodes: &[Node], keys: &ThreadKeys) -> Vec<String> {
    let by_id: HashMap<(&str, &str), &Node> = nodes.iter().map(|n| ((n.ns.as_str(), n.id.as_str()), n)).collect();
    let at = |ns: &str, id: &str| {
        if ns.is_empty() {
            format!("thread {thread:?}, checkpoint {id}")
        } else {
            format!("thread {thread:?}, namespace {ns:?}, checkpoint {id}")
        }
    };
    let mut out = Vec::new();
    // the children of each checkpoint that are loop steps with updates
    let mut reported_writes: HashSet<(&str, &str)> = HashSet::new();
    for n in nodes {
        let Some(parent_id) = n.parent.as_deref() else {
            continue;
        };
        let Some(parent) = by_id.get(&(n.ns.as_str(), parent_id)) else {
            out.push(format!(
                "{}: its parent checkpoint {parent_id} is missing (a copy cut short, or the thread was pruned)",
                at(&n.ns, &n.id)
            ));
            continue;
        };
        if !n.loop_step || parent.writes > 0 {
            continue;
        }
        let updated: Vec<&str> = match &n.updated {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => n
                .versions
                .iter()
                .filter(|(ch, v)| parent.versions.get(*ch) != Some(*v))
                .map(|(ch, _)| ch.as_str())
                .collect(),
        };
        if !updated.is_empty() && reported_writes.insert((parent.ns.as_str(), parent.id.as_str())) {
            out.push(format!(
                "{}: its pending writes are missing (its child {} is a loop step that updated {} channel(s))",
                at(&parent.ns, &parent.id),
                n.id,
                updated.len()
            ));
        }
    }
    // writes come sorted by (namespace, checkpoint): count each run
    let mut orphans: Vec<((&str, &str), usize)> = Vec::new();
    for w in keys.orphan_writes() {
        let key = (w.checkpoint_ns.as_str(), w.checkpoint_id.as_str());
        match orphans.last_mut() {
            Some((k, n)) if *k == key => *n += 1,
            _ => orphans.push((key, 1)),
        }
    }
    for ((ns, id), n) in orphans {
        out.push(format!(
            "{}: {n} stored write(s) for a checkpoint that does not exist",
            at(ns, id)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use checkpointer::saver::{CheckpointKey, WriteKey};

    use super::*;

    fn node(id: &str, parent: Option<&str>, loop_step: bool, updated: &[&str], writes: usize) -> Node {
        Node {
            ns: String::new(),
            id: id.into(),
            parent: parent.map(Into::into),
            loop_step,
            updated: Some(updated.iter().map(|s| s.to_string()).collect()),
            versions: HashMap::new(),
            writes,
        }
    }

    #[test]
    fn a_whole_thread_has_no_problem() {
        let nodes = [
            node("1", None, false, &[], 1),
            node("2", Some("1"), true, &["a"], 2),
            node("3", Some("2"), true, &["a"], 0),
        ];
        assert!(problems("t", &nodes, &ThreadKeys::default()).is_empty());
    }

    #[test]
    fn missing_parents_writes_and_checkpoints_are_named() {
        let nodes = [
            node("2", Some("1"), true, &["a"], 0),
            node("3", Some("2"), true, &["a"], 0),
        ];
        let orphan = |idx: i64| WriteKey {
            checkpoint_ns: String::new(),
            checkpoint_id: "9".into(),
            task_id: "task".into(),
            task_path: String::new(),
            idx,
            channel: "a".into(),
        };
        let stored = |id: &str| CheckpointKey {
            checkpoint_ns: String::new(),
            checkpoint_id: id.into(),
            parent_checkpoint_id: Some("1".into()),
        };
        let keys = ThreadKeys {
            checkpoints: vec![stored("2"), stored("3")],
            writes: vec![orphan(0), orphan(1)],
        };
        let got = problems("t", &nodes, &keys);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].starts_with("thread \"t\", checkpoint 2: its parent checkpoint 1 is missing"));
        assert!(got[1].starts_with("thread \"t\", checkpoint 2: its pending writes are missing"));
        assert!(got[2].starts_with("thread \"t\", checkpoint 9: 2 stored write(s)"));
    }
}
