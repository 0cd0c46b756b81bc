//! One thread's checks: each checkpoint on its own as it is read, then each
//! parent link once the whole thread is read.

use std::collections::{HashMap, HashSet};

use super::delta::{self, DeltaFacts};
use super::writes::{self, DeferredPush};
use super::{Report, Violation, ViolationKind};
use crate::checkpoint::{channels, ChannelVersions, CheckpointSource, CheckpointTuple, SharedMap};
use crate::saver::ThreadKeys;
use crate::version::ChannelVersion;

/// The key of `versions_seen` that holds delta-channel bookkeeping, not
/// channel versions.
const SNAPSHOT_BUMPS: &str = "__snapshot_bumps__";

/// What the parent-link checks need of one checkpoint: no channel values.
#[derive(Debug)]
pub(super) struct Summary {
    pub(super) ns: String,
    pub(super) id: String,
    pub(super) parent: Option<String>,
    pub(super) step: Option<i64>,
    pub(super) source: Option<CheckpointSource>,
    pub(super) v: i64,
    pub(super) versions: ChannelVersions,
    pub(super) seen: SharedMap<String, ChannelVersions>,
    pub(super) updated: Option<Vec<String>>,
    /// The channels that hold something to read (a join barrier only when
    /// every source has written: Python does not list one still waiting).
    pub(super) valued: HashSet<String>,
    pub(super) writes: usize,
    /// The nodes of the `Send`s written to `__pregel_tasks` under this
    /// checkpoint, in the order the runtime applies them.
    pub(super) sends: Vec<Option<String>>,
    /// `Send` task writes, checked once the parent is known.
    pub(super) pushes: Vec<DeferredPush>,
    /// What the delta-channel checks need.
    pub(super) delta: DeltaFacts,
    /// The ids of the interrupts its tasks raised themselves.
    pub(super) raised: Vec<String>,
    /// Interrupts stored under a task that are not the task's own, checked
    /// once the whole thread is read (a subgraph's, raised in a namespace
    /// under the task's): (the task's namespace, the id, what is wrong
    /// otherwise).
    pub(super) relayed: Vec<(String, String, String)>,
}

/// Verifies one thread fed tuple by tuple, in any order: what
/// [`verify_thread`](super::verify_thread) runs over a saver's stream, and
/// what a test runs over tuples it built or changed.
///
/// ```
/// use checkpointer::prelude::*;
/// use checkpointer::verify::{ThreadVerifier, ViolationKind};
///
/// let tuple = |id: &str, parent: Option<&str>, step: i64| CheckpointTuple {
///     config: CheckpointConfig::new("t").with_checkpoint_id(id),
///     checkpoint: Checkpoint::new(step),
///     metadata: CheckpointMetadata::new(CheckpointSource::Loop, step),
///     parent_config: parent.map(|p| CheckpointConfig::new("t").with_checkpoint_id(p)),
///     pending_writes: Vec::new(),
/// };
/// let mut verifier = ThreadVerifier::new("t");
/// verifier.push(&tuple("1f1ebff3-b562-633c-8000-6a20b254e3b2", Some("1f1ebff3-b562-633c-8000-6a20b254e3b1"), 3));
/// verifier.push(&tuple("1f1ebff3-b562-633c-8000-6a20b254e3b1", None, 1));
/// let report = verifier.finish();
/// let kinds: Vec<ViolationKind> = report.violations.iter().map(|v| v.kind).collect();
/// assert_eq!(kinds, [ViolationKind::StepNumber]);
/// assert_eq!(report.violations[0].message, "step 3 does not follow the parent's step 1 (a loop checkpoint takes step 2)");
/// ```
#[derive(Debug)]
pub struct ThreadVerifier {
    thread_id: String,
    nodes: Vec<Summary>,
    report: Report,
}

impl ThreadVerifier {
    /// A verifier for the thread `thread_id`.
    pub fn new(thread_id: impl Into<String>) -> Self {
        ThreadVerifier {
            thread_id: thread_id.into(),
            nodes: Vec::new(),
            report: Report {
                threads: 1,
                ..Report::default()
            },
        }
    }

    /// Checks one checkpoint of the thread on its own and keeps what its
    /// parent links need.
    pub fn push(&mut self, tuple: &CheckpointTuple) {
        let cp = &tuple.checkpoint;
        let ns = tuple.config.ns().to_owned();
        let id = tuple.config.checkpoint_id().unwrap_or(cp.id.as_str()).to_owned();
        let mut summary = Summary {
            ns,
            id,
            parent: tuple
                .parent_config
                .as_ref()
                .and_then(|p| p.checkpoint_id())
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            step: tuple.metadata.step(),
            source: tuple.metadata.source(),
            v: cp.v,
            versions: cp.channel_versions.clone(),
            seen: cp.versions_seen.clone(),
            updated: cp.updated_channels.as_deref().map(<[String]>::to_vec),
            valued: cp
                .channel_values
                .iter()
                .filter(|(c, v)| crate::step::schedule::readable(c, v))
                .map(|(c, _)| c.clone())
                .collect(),
            writes: tuple.pending_writes.len(),
            sends: Vec::new(),
            pushes: Vec::new(),
            delta: DeltaFacts::default(),
            raised: Vec::new(),
            relayed: Vec::new(),
        };
        self.report.checkpoints += 1;
        self.report.writes += tuple.pending_writes.len();
        let mut found = Vec::new();
        summary.delta = delta::facts(tuple, &mut found);
        seen_not_ahead(&summary, &mut found);
        updated_listed(&summary, &mut found);
        self.report.unchecked_task_ids += writes::check(&mut summary, &tuple.pending_writes, &mut found);
        for (kind, channel, message) in found {
            let v = self.violation(kind, &summary.ns, &summary.id, channel, message);
            self.report.violations.push(v);
        }
        self.nodes.push(summary);
    }

    /// Reports the writes `keys` holds for checkpoints that are not stored.
    pub fn check_orphans(&mut self, keys: &ThreadKeys) {
        let mut runs: Vec<((&str, &str), usize)> = Vec::new();
        for w in keys.orphan_writes() {
            let key = (w.checkpoint_ns.as_str(), w.checkpoint_id.as_str());
            match runs.last_mut() {
                Some((k, n)) if *k == key => *n += 1,
                _ => runs.push((key, 1)),
            }
        }
        for ((ns, id), n) in runs {
            let v = self.violation(
                ViolationKind::OrphanWrites,
                ns,
                id,
                None,
                format!("{n} stored write(s) for a checkpoint that is not stored"),
            );
            self.report.violations.push(v);
        }
    }

    /// Checks every parent link and returns the report.
    pub fn finish(mut self) -> Report {
        let by_id: HashMap<(&str, &str), usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| ((n.ns.as_str(), n.id.as_str()), i))
            .collect();
        let mut out = Vec::new();
        let mut writes_reported = HashSet::new();
        let deltas = delta::by_namespace(self.nodes.iter());
        let no_delta = HashSet::new();
        let parent_of = |n: &Summary| {
            let id = n.parent.as_deref()?;
            by_id.get(&(n.ns.as_str(), id)).map(|&p| &self.nodes[p])
        };
        // the snapshots each checkpoint stores at a version of its own (a
        // store of blobs by version also shows an older one, unchanged)
        let fresh: Vec<HashSet<String>> = self
            .nodes
            .iter()
            .map(|n| delta::fresh_snapshots(n, parent_of(n)))
            .collect();
        for (at, child) in self.nodes.iter().enumerate() {
            let delta_channels = deltas.get(child.ns.as_str()).unwrap_or(&no_delta);
            let mut found = Vec::new();
            delta::check_counters(child, &fresh[at], &mut found);
            out.extend(found.into_iter().map(|(k, ch, m)| (child, k, ch, m)));
            let Some(parent_id) = child.parent.as_deref() else {
                self.report.unchecked_task_ids += child.pushes.len();
                let mut found = Vec::new();
                delta::check_root(child, delta_channels, &mut found);
                out.extend(found.into_iter().map(|(k, ch, m)| (child, k, ch, m)));
                continue;
            };
            let Some(&p) = by_id.get(&(child.ns.as_str(), parent_id)) else {
                self.report.unchecked_task_ids += child.pushes.len();
                out.push((
                    child,
                    ViolationKind::MissingParent,
                    None,
                    format!("its parent checkpoint {parent_id} is not stored (a pruned thread clears the parent id instead)"),
                ));
                continue;
            };
            let parent = &self.nodes[p];
            let mut found = Vec::new();
            link(child, parent, &mut found);
            writes::check_pushes(child, parent, &mut found);
            let link = delta::Link {
                child,
                parent,
                child_fresh: &fresh[at],
                parent_fresh: &fresh[p],
            };
            link.check(delta_channels, &mut found);
            out.extend(found.into_iter().map(|(k, ch, m)| (child, k, ch, m)));
            if child.source == Some(CheckpointSource::Loop)
                && parent.writes == 0
                && child.updated.as_ref().is_some_and(|u| !u.is_empty())
                && writes_reported.insert(p)
            {
                out.push((
                    parent,
                    ViolationKind::MissingWrites,
                    None,
                    format!(
                        "its pending writes are missing (its child {} is a loop step that updated {} channel(s))",
                        child.id,
                        child.updated.as_ref().map_or(0, Vec::len)
                    ),
                ));
            }
        }
        // an interrupt relayed by a task that ran a subgraph: raised by a
        // task in a namespace under the task's
        let mut raised_in: HashMap<&str, Vec<&str>> = HashMap::new();
        for n in &self.nodes {
            for id in &n.raised {
                raised_in.entry(id.as_str()).or_default().push(n.ns.as_str());
            }
        }
        for n in &self.nodes {
            for (task_ns, id, message) in &n.relayed {
                let under = |ns: &&str| {
                    ns.strip_prefix(task_ns.as_str())
                        .is_some_and(|r| r.is_empty() || r.starts_with('|'))
                };
                if !raised_in.get(id.as_str()).is_some_and(|nss| nss.iter().any(under)) {
                    out.push((
                        n,
                        ViolationKind::InterruptWrite,
                        Some(channels::INTERRUPT.to_owned()),
                        message.clone(),
                    ));
                }
            }
        }
        let found: Vec<Violation> = out
            .into_iter()
            .map(|(at, kind, channel, message)| self.violation(kind, &at.ns, &at.id, channel, message))
            .collect();
        self.report.violations.extend(found);
        self.report
    }

    fn violation(
        &self,
        kind: ViolationKind,
        ns: &str,
        id: &str,
        channel: Option<String>,
        message: String,
    ) -> Violation {
        Violation {
            kind,
            thread_id: self.thread_id.clone(),
            checkpoint_ns: ns.to_owned(),
            checkpoint_id: id.to_owned(),
            channel,
            message,
        }
    }
}

/// A violation found at one checkpoint: kind, channel, message.
pub(super) type Found = (ViolationKind, Option<String>, String);

/// No node has seen a version the checkpoint does not have yet.
fn seen_not_ahead(cp: &Summary, out: &mut Vec<Found>) {
    for (node, seen) in cp.seen.iter() {
        if node == SNAPSHOT_BUMPS {
            continue;
        }
        for (ch, s) in seen.iter() {
            match cp.versions.get(ch) {
                Some(v) if s <= v => {}
                Some(v) => out.push((
                    ViolationKind::VersionsSeenAhead,
                    Some(ch.clone()),
                    format!("node {node:?} has seen version {s} of channel {ch:?}, newer than its version {v}"),
                )),
                None => out.push((
                    ViolationKind::VersionsSeenAhead,
                    Some(ch.clone()),
                    format!("node {node:?} has seen version {s} of channel {ch:?}, which has no version"),
                )),
            }
        }
    }
}

/// `updated_channels` is sorted, without repeats, and names versioned
/// channels.
fn updated_listed(cp: &Summary, out: &mut Vec<Found>) {
    let Some(updated) = &cp.updated else { return };
    if updated.windows(2).any(|w| w[0] >= w[1]) {
        out.push((
            ViolationKind::UpdatedChannels,
            None,
            format!("updated_channels {updated:?} is not sorted without repeats"),
        ));
    }
    for ch in updated {
        if !cp.versions.contains_key(ch) {
            out.push((
                ViolationKind::UpdatedChannels,
                Some(ch.clone()),
                format!("updated_channels lists channel {ch:?}, which has no version"),
            ));
        }
    }
}

/// The checks of one parent link.
fn link(child: &Summary, parent: &Summary, out: &mut Vec<Found>) {
    // exit-mode stubs have no source: nothing is promised about them
    let Some(source) = child.source else { return };
    step_follows(child, parent, source, out);
    let mut changed: Vec<(&String, &ChannelVersion)> = Vec::new();
    for (ch, pv) in parent.versions.iter() {
        match child.versions.get(ch) {
            None => out.push((
                ViolationKind::VersionBackwards,
                Some(ch.clone()),
                format!("channel {ch:?} has version {pv} in the parent and none here"),
            )),
            Some(cv) if cv < pv => out.push((
                ViolationKind::VersionBackwards,
                Some(ch.clone()),
                format!("channel {ch:?} went back from version {pv} in the parent to {cv}"),
            )),
            Some(_) => {}
        }
    }
    for (ch, cv) in child.versions.iter() {
        if parent.versions.get(ch).is_none_or(|pv| cv > pv) {
            changed.push((ch, cv));
        }
    }
    one_version(parent, &changed, out);
    if matches!(source, CheckpointSource::Loop | CheckpointSource::Update) {
        updated_match(child, parent, &changed, out);
    }
}

/// `metadata.step` follows the parent's as Python numbers steps.
fn step_follows(child: &Summary, parent: &Summary, source: CheckpointSource, out: &mut Vec<Found>) {
    let (Some(step), Some(parent_step)) = (child.step, parent.step) else {
        return;
    };
    let Some(next) = parent_step.checked_add(1) else { return };
    let ok = match source {
        CheckpointSource::Fork => step >= next,
        _ => step == next,
    };
    if !ok {
        let takes = match source {
            CheckpointSource::Fork => format!("a fork takes step {next} or later"),
            other => format!("a {} checkpoint takes step {next}", other.as_str()),
        };
        out.push((
            ViolationKind::StepNumber,
            None,
            format!("step {step} does not follow the parent's step {parent_step} ({takes})"),
        ));
    }
}

/// Every changed channel took the step's one version: the parent's newest
/// version's counter plus one, the same version for all.
fn one_version(parent: &Summary, changed: &[(&String, &ChannelVersion)], out: &mut Vec<Found>) {
    let newest = parent.versions.values().max();
    let expected = match newest {
        None => Some(1),
        Some(v) => v.counter().and_then(|c| c.checked_add(1)),
    };
    let mut bad = false;
    if let Some(expected) = expected {
        for (ch, v) in changed {
            if let Some(c) = v.counter() {
                if c != expected {
                    bad = true;
                    let after = newest.map_or_else(|| "none".to_owned(), ToString::to_string);
                    out.push((
                        ViolationKind::VersionPerStep,
                        Some((*ch).clone()),
                        format!(
                            "channel {ch:?} changed to version {v} (counter {c}), not the step's version: counter {expected}, one after the parent's newest version {after}"
                        ),
                    ));
                }
            }
        }
    }
    if !bad {
        if let Some((first_ch, first)) = changed.first() {
            if let Some((ch, v)) = changed.iter().find(|(_, v)| v != first) {
                out.push((
                    ViolationKind::VersionPerStep,
                    Some((*ch).clone()),
                    format!(
                        "channel {ch:?} changed to version {v} and channel {first_ch:?} to {first} in one step: a step makes one version"
                    ),
                ));
            }
        }
    }
}

/// `updated_channels` names the channels whose version changed, and only
/// channels the step emptied are left out.
fn updated_match(child: &Summary, parent: &Summary, changed: &[(&String, &ChannelVersion)], out: &mut Vec<Found>) {
    let Some(updated) = &child.updated else { return };
    for ch in updated {
        if !changed.iter().any(|(c, _)| *c == ch) && child.versions.contains_key(ch) {
            out.push((
                ViolationKind::UpdatedChannels,
                Some(ch.clone()),
                format!("updated_channels lists channel {ch:?}, whose version did not change"),
            ));
        }
    }
    for (ch, v) in changed {
        // the runtime never lists the channel of pending `Send`s
        if updated.iter().any(|u| u == *ch) || *ch == channels::TASKS {
            continue;
        }
        // a consumed trigger: a node saw the parent's version as it ran
        // (`__interrupt__` holds what the last interrupt check saw instead)
        let emptied = !child.valued.contains(*ch)
            || parent.versions.get(*ch).is_some_and(|pv| {
                child
                    .seen
                    .iter()
                    .filter(|(node, _)| *node != channels::INTERRUPT && *node != SNAPSHOT_BUMPS)
                    .any(|(_, seen)| seen.get(*ch).is_some_and(|s| s == pv))
            });
        if !emptied {
            out.push((
                ViolationKind::UpdatedChannels,
                Some((*ch).clone()),
                format!(
                    "channel {ch:?} changed to version {v} and holds a value, but updated_channels does not list it"
                ),
            ));
        }
    }
}
