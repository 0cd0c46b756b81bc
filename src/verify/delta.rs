//! The checks of delta channels (LangGraph's `DeltaChannel`): a channel whose
//! checkpoints store its value only now and then (a `_DeltaSnapshot`), and
//! otherwise only its version, its value being rebuilt from the writes
//! stored under the ancestors since the last snapshot.

use std::collections::{HashMap, HashSet};

use super::thread::{Found, Summary};
use super::ViolationKind;
use crate::checkpoint::{delta_channels, CheckpointSource, CheckpointTuple};
use crate::serde::{ExtKind, Value};

/// The metadata key of the delta counters: `{channel: [updates, supersteps]}`
/// since the channel's last snapshot.
const COUNTERS: &str = "counters_since_delta_snapshot";

/// What the delta checks keep of one checkpoint.
#[derive(Debug, Default)]
pub(super) struct DeltaFacts {
    /// The channels named as delta channels by the metadata.
    pub(super) named: Vec<String>,
    /// The channels whose stored value is a `_DeltaSnapshot`.
    pub(super) snapshots: HashSet<String>,
    /// The well-formed counters, `None` when the metadata has none.
    pub(super) counters: Option<HashMap<String, (i64, i64)>>,
    /// The channels the pending writes stored under the checkpoint touch.
    pub(super) written: HashSet<String>,
    /// The channels whose counter is malformed (reported on its own).
    pub(super) malformed: HashSet<String>,
}

/// Reads the delta facts of `tuple` and checks the shape of its counters: a
/// map of channel to `[updates, supersteps]`, two integers with
/// `0 <= updates <= supersteps`, never both 0 (a reset counter is left out).
pub(super) fn facts(tuple: &CheckpointTuple, out: &mut Vec<Found>) -> DeltaFacts {
    let snapshots: HashSet<String> = tuple
        .checkpoint
        .channel_values
        .iter()
        .filter(|(_, v)| matches!(v, Value::Ext(e) if e.kind() == ExtKind::DeltaSnapshot))
        .map(|(c, _)| c.clone())
        .collect();
    let mut malformed = HashSet::new();
    let mut bad = |channel: Option<&str>, message: String| {
        malformed.extend(channel.map(str::to_owned));
        out.push((ViolationKind::DeltaCounters, channel.map(str::to_owned), message));
    };
    let counters = match tuple.metadata.get(COUNTERS) {
        None => None,
        Some(Value::Map(entries)) => {
            let mut counters = HashMap::new();
            for (key, value) in entries.iter() {
                let Some(ch) = key.as_str() else {
                    bad(
                        None,
                        format!("{COUNTERS} has a key that is not a channel name: {key:?}"),
                    );
                    continue;
                };
                let pair = value.as_array().and_then(|items| match items {
                    [Value::Int(u), Value::Int(s)] => Some((*u, *s)),
                    _ => None,
                });
                match pair {
                    None => bad(
                        Some(ch),
                        format!("{COUNTERS} of channel {ch:?} is not [updates, supersteps]: {value:?}"),
                    ),
                    Some((u, s)) if u < 0 || u > s || s == 0 => bad(
                        Some(ch),
                        format!(
                            "{COUNTERS} of channel {ch:?} is [{u}, {s}]: a superstep counts every update, so 0 <= updates <= supersteps, and a reset counter is left out"
                        ),
                    ),
                    Some(pair) => {
                        counters.insert(ch.to_owned(), pair);
                    }
                }
            }
            Some(counters)
        }
        Some(other) => {
            bad(None, format!("{COUNTERS} is not a map of channels: {other:?}"));
            None
        }
    };
    DeltaFacts {
        named: delta_channels(&tuple.metadata).into_iter().map(str::to_owned).collect(),
        snapshots,
        counters,
        written: tuple.pending_writes.iter().map(|w| w.channel.clone()).collect(),
        malformed,
    }
}

/// The delta channels of each namespace of a thread: every channel a
/// checkpoint of the namespace names as one or stores a snapshot of.
pub(super) fn by_namespace<'a>(nodes: impl Iterator<Item = &'a Summary>) -> HashMap<&'a str, HashSet<String>> {
    let mut all: HashMap<&str, HashSet<String>> = HashMap::new();
    for n in nodes {
        let set = all.entry(n.ns.as_str()).or_default();
        set.extend(n.delta.named.iter().cloned());
        set.extend(n.delta.snapshots.iter().cloned());
    }
    all
}

/// The channels `cp` snapshots itself: a `_DeltaSnapshot` value at a version
/// its parent does not have (a store that keeps values by version, as
/// PostgreSQL's blobs do, also shows the snapshot of an unchanged channel).
pub(super) fn fresh_snapshots(cp: &Summary, parent: Option<&Summary>) -> HashSet<String> {
    cp.delta
        .snapshots
        .iter()
        .filter(|ch| parent.is_none_or(|p| p.versions.get(ch.as_str()) != cp.versions.get(ch.as_str())))
        .cloned()
        .collect()
}

/// A channel snapshotted at `cp` has no counter: a snapshot resets it.
pub(super) fn check_counters(cp: &Summary, fresh: &HashSet<String>, out: &mut Vec<Found>) {
    let Some(counters) = &cp.delta.counters else { return };
    let mut kept: Vec<(&String, &(i64, i64))> = counters.iter().filter(|(ch, _)| fresh.contains(*ch)).collect();
    kept.sort_unstable();
    for (ch, (u, s)) in kept {
        out.push((
            ViolationKind::DeltaCounters,
            Some(ch.clone()),
            format!(
                "channel {ch:?} is snapshotted here but {COUNTERS} still counts [{u}, {s}] for it (a snapshot resets its counter)"
            ),
        ));
    }
}

/// A checkpoint without a parent that versions a delta channel must store
/// its value: nothing before it is left to rebuild the value from, so it
/// would read as empty (what pruning a delta thread without keeping the
/// ancestors back to the snapshot, or a copy that starts mid-thread,
/// leaves).
pub(super) fn check_root(root: &Summary, delta: &HashSet<String>, out: &mut Vec<Found>) {
    let mut lost: Vec<&String> = delta
        .iter()
        .filter(|ch| root.versions.contains_key(*ch) && !root.valued.contains(*ch))
        .collect();
    lost.sort_unstable();
    for ch in lost {
        out.push((
            ViolationKind::DeltaHistory,
            Some(ch.clone()),
            format!(
                "delta channel {ch:?} has version {} here but no stored value, and the checkpoint has no parent to rebuild it from: it reads as empty",
                root.versions[ch.as_str()]
            ),
        ));
    }
}

/// One parent link, with the channels each side snapshots itself.
pub(super) struct Link<'a> {
    pub(super) child: &'a Summary,
    pub(super) parent: &'a Summary,
    pub(super) child_fresh: &'a HashSet<String>,
    pub(super) parent_fresh: &'a HashSet<String>,
}

impl Link<'_> {
    /// The checks of one parent link of consecutive steps: a delta channel
    /// that changed without a snapshot has its write under the parent (its
    /// only record), and the counters advance as the runtime advances them
    /// (every superstep counts, an update when the step updated the channel,
    /// a snapshot resets).
    pub(super) fn check(&self, delta: &HashSet<String>, out: &mut Vec<Found>) {
        let (child, parent) = (self.child, self.parent);
        let consecutive = matches!((child.step, parent.step), (Some(c), Some(p)) if p.checked_add(1) == Some(c));
        if !consecutive || delta.is_empty() {
            return;
        }
        let mut names: Vec<&String> = delta.iter().collect();
        names.sort_unstable();
        if child.source == Some(CheckpointSource::Loop) {
            for ch in &names {
                let Some(v) = child.versions.get(ch.as_str()) else {
                    continue;
                };
                let changed = parent.versions.get(ch.as_str()).is_none_or(|pv| v > pv);
                if changed && !self.child_fresh.contains(ch.as_str()) && !parent.delta.written.contains(ch.as_str()) {
                    out.push((
                        ViolationKind::DeltaWrites,
                        Some((*ch).clone()),
                        format!(
                            "delta channel {ch:?} changed to version {v} with no snapshot here, but the parent {} stores no write to it: the update is lost",
                            parent.id
                        ),
                    ));
                }
            }
        }
        self.counters_advance(&names, out);
    }

    fn counters_advance(&self, names: &[&String], out: &mut Vec<Found>) {
        let (child, parent) = (self.child, self.parent);
        let counted = matches!(
            child.source,
            Some(CheckpointSource::Loop | CheckpointSource::Input | CheckpointSource::Update)
        );
        // a runtime that keeps no counters (LangGraph.js) is not checked
        let kept = child.delta.counters.is_some() || parent.delta.counters.is_some();
        let Some(updated) = child.updated.as_ref().filter(|_| counted && kept) else {
            return;
        };
        let none = HashMap::new();
        let counters = child.delta.counters.as_ref().unwrap_or(&none);
        let before = parent.delta.counters.as_ref();
        for ch in names {
            let ch = ch.as_str();
            let skip = self.child_fresh.contains(ch)
                || child.delta.malformed.contains(ch)
                || parent.delta.malformed.contains(ch);
            if skip {
                continue;
            }
            // a snapshot in the parent reset the channel's counter
            let (u, s) = match before.and_then(|c| c.get(ch)) {
                Some(&pair) if !self.parent_fresh.contains(ch) => pair,
                _ => (0, 0),
            };
            let Some(s) = s.checked_add(1) else { continue };
            let u = if updated.iter().any(|c| c == ch) {
                u.saturating_add(1)
            } else {
                u
            };
            let got = counters.get(ch);
            if got != Some(&(u, s)) {
                let got = got.map_or_else(|| "none".to_owned(), |(gu, gs)| format!("[{gu}, {gs}]"));
                out.push((
                    ViolationKind::DeltaCounters,
                    Some(ch.to_owned()),
                    format!(
                        "{COUNTERS} of delta channel {ch:?} is {got}, but the parent's advanced by this step is [{u}, {s}] (no snapshot here)"
                    ),
                ));
            }
        }
    }
}
