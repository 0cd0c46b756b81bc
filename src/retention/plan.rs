//! The retention planner: which checkpoints of one thread a policy removes,
//! decided once for every backend from the thread's skeletons, and the
//! bounded batches that remove them.
//!
//! Kept, per namespace (see the module docs of [`crate::retention`]): the
//! latest, the last `n`, those newer than the age, those with an interrupt,
//! the marked ones, fork points with the first checkpoint of each branch,
//! and (closure) every ancestor a kept checkpoint's delta channels need, by
//! `prune`'s walk. The rules depend only on what stays, so a second run with
//! the same clock removes nothing: a crashed run re-run finishes the job.
//!
//! Batches remove the oldest first. Each also clears the parent of every
//! checkpoint surviving it whose parent it removes, so between batches no
//! stored checkpoint names a parent that is gone, and names the values
//! (`refs`, for backends that share values by version) that no checkpoint
//! surviving it names.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use super::RetentionPolicy;
use crate::checkpoint::{delta_channels, CheckpointMetadata};
use crate::serde::Value;

/// What retention reads of one checkpoint: no value, a few facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skeleton {
    pub(crate) ns: String,
    pub(crate) id: String,
    pub(crate) parent: Option<String>,
    /// `ts` in µs since the epoch (`None`: unreadable, counts as new).
    pub(crate) ts: Option<i64>,
    /// The metadata marks it.
    pub(crate) marked: bool,
    /// Its pending writes.
    pub(crate) writes: u64,
    /// One of them is on `__interrupt__`.
    pub(crate) interrupt: bool,
    /// The delta channels it versions without a stored value: the walk of
    /// its delta history.
    pub(crate) needs: Vec<String>,
    /// The channels it stores a value for.
    pub(crate) stores: Vec<String>,
    /// [`blob_ref`]s of the shared values it names (backends that share
    /// values by version; empty elsewhere).
    pub(crate) refs: Vec<u64>,
}

/// The facts of a skeleton read from a checkpoint's metadata and channels.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    pub(crate) marked: bool,
    pub(crate) needs: Vec<String>,
    pub(crate) stores: Vec<String>,
}

impl Facts {
    /// From the metadata and each versioned or stored channel with whether
    /// the checkpoint stores a value for it.
    pub(crate) fn new<'a>(
        metadata: &CheckpointMetadata,
        mark_key: &str,
        channels: impl IntoIterator<Item = (&'a str, bool)>,
    ) -> Facts {
        let delta = delta_channels(metadata);
        let mut facts = Facts {
            marked: is_marked(metadata, mark_key),
            ..Facts::default()
        };
        for (ch, stored) in channels {
            if stored {
                facts.stores.push(ch.to_owned());
            } else if delta.contains(&ch) {
                facts.needs.push(ch.to_owned());
            }
        }
        facts
    }
}

/// Whether `metadata` marks its checkpoint: `key` present with a value
/// other than `null` and `false`.
pub(crate) fn is_marked(metadata: &CheckpointMetadata, key: &str) -> bool {
    metadata
        .get(key)
        .is_some_and(|v| !matches!(v, Value::Nil | Value::Bool(false)))
}

/// The reference of a shared value (channel, version) in skeletons and
/// batches: a hash, computed by the same code on both sides. Two values
/// with one hash are both kept while either is named.
pub(crate) fn blob_ref(channel: &str, version: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    channel.hash(&mut h);
    version.hash(&mut h);
    h.finish()
}

/// One atomic removal: checkpoints of one namespace with their writes, the
/// parents to clear and the shared values to collect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Batch {
    pub(crate) ns: String,
    /// Checkpoint ids removed, ascending.
    pub(crate) ids: Vec<String>,
    /// Checkpoints surviving the batch whose parent it removes.
    pub(crate) clear_parent: Vec<String>,
    /// Shared values named by `ids` and by no checkpoint surviving the batch.
    pub(crate) orphan_refs: Vec<u64>,
    /// Pending writes of `ids`, as scanned.
    pub(crate) writes: u64,
    /// The namespace's greatest id when it was scanned: checkpoints with a
    /// greater one were put since, and the values they name stay.
    pub(crate) newest: String,
}

/// What a policy does to one thread.
#[derive(Debug, Default)]
pub(crate) struct ThreadPlan {
    /// The thread is idle: every checkpoint goes.
    pub(crate) delete_thread: bool,
    pub(crate) batches: Vec<Batch>,
    pub(crate) scanned: u64,
    pub(crate) kept: u64,
}

/// The plan of one thread from all its skeletons, at `now` (µs since the
/// epoch), in batches of at most `batch` checkpoints.
pub(crate) fn plan_thread(
    policy: &RetentionPolicy,
    now: i64,
    mut skeletons: Vec<Skeleton>,
    batch: usize,
) -> ThreadPlan {
    let batch = batch.max(1);
    skeletons.sort_by(|a, b| (&a.ns, &a.id).cmp(&(&b.ns, &b.id)));
    skeletons.dedup_by(|a, b| a.ns == b.ns && a.id == b.id);
    let mut plan = ThreadPlan {
        scanned: skeletons.len() as u64,
        ..ThreadPlan::default()
    };
    if skeletons.is_empty() {
        return plan;
    }
    plan.delete_thread = policy.idle_threads().is_some_and(|idle| is_idle(&skeletons, now, idle));
    if !plan.delete_thread && !policy.thins() {
        plan.kept = plan.scanned;
        return plan;
    }
    let mut start = 0;
    while start < skeletons.len() {
        let ns = &skeletons[start].ns;
        let end = start + skeletons[start..].iter().take_while(|s| &s.ns == ns).count();
        let nodes = &skeletons[start..end];
        let keep = if plan.delete_thread {
            vec![false; nodes.len()]
        } else {
            kept(policy, now, nodes)
        };
        plan.kept += keep.iter().filter(|k| **k).count() as u64;
        plan.batches.extend(batches(nodes, &keep, batch));
        start = end;
    }
    plan
}

/// Every checkpoint's `ts` reads and the newest is older than `idle`.
fn is_idle(skeletons: &[Skeleton], now: i64, idle: std::time::Duration) -> bool {
    let idle = i64::try_from(idle.as_micros()).unwrap_or(i64::MAX);
    let mut newest = i64::MIN;
    for s in skeletons {
        match s.ts {
            Some(ts) => newest = newest.max(ts),
            None => return false,
        }
    }
    now.checked_sub(newest).is_some_and(|age| age > idle)
}

/// Which checkpoints of one namespace (sorted by id) a policy keeps.
pub(crate) fn kept(policy: &RetentionPolicy, now: i64, nodes: &[Skeleton]) -> Vec<bool> {
    let n = nodes.len();
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
    let parent: Vec<Option<usize>> = nodes
        .iter()
        .map(|s| s.parent.as_deref().and_then(|p| index.get(p).copied()))
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, p) in parent.iter().enumerate() {
        if let Some(p) = *p {
            children[p].push(i);
        }
    }
    let cutoff = policy
        .newer_than()
        .map(|age| now.saturating_sub(i64::try_from(age.as_micros()).unwrap_or(i64::MAX)));
    let last = policy.last().unwrap_or(0);
    let mut keep = vec![false; n];
    let mut work = Vec::new();
    let mark = |i: usize, keep: &mut Vec<bool>, work: &mut Vec<usize>| {
        if !keep[i] {
            keep[i] = true;
            work.push(i);
        }
    };
    for (i, s) in nodes.iter().enumerate() {
        let recent = i + 1 == n || n - i <= last;
        let young = cutoff.is_some_and(|c| s.ts.is_none_or(|ts| ts >= c));
        if recent || young || s.interrupt || s.marked {
            mark(i, &mut keep, &mut work);
        }
        if children[i].len() > 1 {
            mark(i, &mut keep, &mut work);
            for &c in &children[i] {
                mark(c, &mut keep, &mut work);
            }
        }
    }
    // The delta closure: each kept checkpoint's walk, nearest ancestor
    // first, keeping while a needed channel is open. A (checkpoint, channel)
    // pair walked once is not walked again: the walk from there is the same.
    let mut walked: HashSet<(usize, &str)> = HashSet::new();
    while let Some(k) = work.pop() {
        let mut open: Vec<&str> = nodes[k].needs.iter().map(String::as_str).collect();
        let mut cur = parent[k];
        while let (false, Some(a)) = (open.is_empty(), cur) {
            mark(a, &mut keep, &mut work);
            let stores = &nodes[a].stores;
            open.retain(|ch| walked.insert((a, *ch)) && !stores.iter().any(|s| s == ch));
            cur = parent[a];
        }
    }
    keep
}

/// The removals of one namespace, oldest first, `batch` at a time.
fn batches(nodes: &[Skeleton], keep: &[bool], batch: usize) -> Vec<Batch> {
    let removed: Vec<usize> = (0..nodes.len()).filter(|&i| !keep[i]).collect();
    if removed.is_empty() {
        return Vec::new();
    }
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, s) in nodes.iter().enumerate() {
        if let Some(&p) = s.parent.as_deref().and_then(|p| index.get(p)) {
            children[p].push(i);
        }
    }
    let mut round: Vec<Option<usize>> = vec![None; nodes.len()];
    for (k, chunk) in removed.chunks(batch).enumerate() {
        for &i in chunk {
            round[i] = Some(k);
        }
    }
    let mut refcount: HashMap<u64, usize> = HashMap::new();
    let distinct = |s: &Skeleton| -> Vec<u64> {
        let mut r = s.refs.clone();
        r.sort_unstable();
        r.dedup();
        r
    };
    for s in nodes {
        for r in distinct(s) {
            *refcount.entry(r).or_default() += 1;
        }
    }
    let newest = nodes.last().map(|s| s.id.clone()).unwrap_or_default();
    let mut out = Vec::new();
    for (k, chunk) in removed.chunks(batch).enumerate() {
        let mut b = Batch {
            newest: newest.clone(),
            ns: nodes[chunk[0]].ns.clone(),
            ids: Vec::with_capacity(chunk.len()),
            clear_parent: Vec::new(),
            orphan_refs: Vec::new(),
            writes: 0,
        };
        for &i in chunk {
            b.ids.push(nodes[i].id.clone());
            b.writes = b.writes.saturating_add(nodes[i].writes);
            for &c in &children[i] {
                if round[c].is_none_or(|r| r > k) {
                    b.clear_parent.push(nodes[c].id.clone());
                }
            }
            for r in distinct(&nodes[i]) {
                if let Some(count) = refcount.get_mut(&r) {
                    *count -= 1;
                    if *count == 0 {
                        b.orphan_refs.push(r);
                    }
                }
            }
        }
        b.clear_parent.sort_unstable();
        b.clear_parent.dedup();
        out.push(b);
    }
    out
}
