//! A verifier for the rows a LangGraph runtime relies on: given a thread (or a
//! whole store) of any [`CheckpointSaver`], it checks the invariants Python
//! LangGraph keeps when it writes checkpoints and pending writes, and reports
//! every violation with the checkpoint, namespace and channel it concerns.
//!
//! A framework runs it in its tests (a thread its runtime wrote should have
//! none); `checkpointer check URL` runs it over a store.
//!
//! # What is checked
//!
//! Along each parent link (a checkpoint and its parent, in one namespace):
//!
//! | kind | rule |
//! |---|---|
//! | [`MissingParent`](ViolationKind::MissingParent) | a parent id names a checkpoint the namespace stores. A thread pruned with keep-latest clears the parent id of the checkpoints whose parent went, so it passes; a copy cut short does not. |
//! | [`VersionBackwards`](ViolationKind::VersionBackwards) | no channel's version is older in the child than in the parent, and no versioned channel disappears; versions compare as the runtime compares them ([`ChannelVersion`]'s order). |
//! | [`VersionPerStep`](ViolationKind::VersionPerStep) | every channel that changed took the one version the step made: `get_next_version` of the parent's newest version (its counter plus one), the same for all. |
//! | [`StepNumber`](ViolationKind::StepNumber) | `metadata.step` is the parent's plus one for `loop`, `input` and `update` checkpoints, and at least plus one for a `fork` (a replay's fork follows the replayed checkpoint; a copy keeps the copied checkpoint's parent and takes its step plus one). |
//! | [`UpdatedChannels`](ViolationKind::UpdatedChannels) | `updated_channels` is sorted, lists only channels whose version changed, and every changed channel missing from it is one the step emptied (a consumed trigger or a cleared ephemeral value: no value left, or a node saw its old version) or `__pregel_tasks`. |
//! | [`MissingWrites`](ViolationKind::MissingWrites) | the parent of a `loop` checkpoint that updated channels stores the pending writes those updates came from. |
//!
//! Within one checkpoint:
//!
//! | kind | rule |
//! |---|---|
//! | [`VersionsSeenAhead`](ViolationKind::VersionsSeenAhead) | no node has seen a version newer than the channel's current one, or a version of a channel that has none. |
//! | [`TaskId`](ViolationKind::TaskId) | a write's task id is the one Python computes from the checkpoint: pull tasks from the node and its triggers ([`pull_task_id`](crate::task::pull_task_id)), `Send` tasks from the parent's `__pregel_tasks` writes ([`push_task_id`](crate::task::push_task_id)), `update_state` tasks from the parent's id; writes under [`NULL_TASK_ID`](crate::task::NULL_TASK_ID) carry no task path; the path parses. |
//! | [`WriteIndex`](ViolationKind::WriteIndex) | a special channel's write has its fixed index, other writes a non-negative one. |
//! | [`InterruptWrite`](ViolationKind::InterruptWrite) | an `__interrupt__` write comes from a task and holds a list of `Interrupt`s whose ids are the task's [`interrupt_id`](crate::task::interrupt_id)s, or, for a task that ran a subgraph, ids a task of the subgraph raised (stored in a namespace under the task's). |
//! | [`ResumeWrite`](ViolationKind::ResumeWrite) | a `__resume__` write holds a list of answers when a task wrote it, and a value that is not `None` under `NULL_TASK_ID`. |
//! | [`OrphanWrites`](ViolationKind::OrphanWrites) | writes are stored only for stored checkpoints (when the saver can list a thread's keys). |
//!
//! Delta channels (LangGraph's `DeltaChannel`: a channel whose value is
//! stored only in its snapshots, `_DeltaSnapshot`, and otherwise rebuilt from
//! the writes under the ancestors since the last one), known by
//! `counters_since_delta_snapshot` naming them or a snapshot stored in the
//! namespace:
//!
//! | kind | rule |
//! |---|---|
//! | [`DeltaCounters`](ViolationKind::DeltaCounters) | `counters_since_delta_snapshot` maps channels to `[updates, supersteps]` with `0 <= updates <= supersteps`, never `[0, 0]` (a reset counter is left out), none for a channel the checkpoint snapshots (a `_DeltaSnapshot` at a version its parent does not have: PostgreSQL, storing values by version, also shows the older snapshot of an unchanged channel); from one step to the next (`loop`, `input`, `update`) each channel not snapshotted counts one more superstep, and one more update when `updated_channels` lists it. |
//! | [`DeltaWrites`](ViolationKind::DeltaWrites) | a delta channel whose version a `loop` step changed without storing a snapshot has a write under the parent checkpoint (the only record of the update). |
//! | [`DeltaHistory`](ViolationKind::DeltaHistory) | a checkpoint without a parent stores the value of every delta channel it versions (there is nothing older to rebuild it from: a pruned or copied thread must keep the ancestors back to the snapshot, or a snapshot). |
//!
//! Call tasks of the functional API (their function's name is not in the
//! row), `update_state` tasks that reused a prepared task's id, writes of
//! version-1 checkpoints and writes without a task path are counted in
//! [`Report::unchecked_task_ids`], not checked.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! use checkpointer::prelude::*;
//! use checkpointer::verify::{verify_thread, ViolationKind};
//!
//! let saver = InMemorySaver::new();
//! let config = CheckpointConfig::new("t");
//! let mut first = Checkpoint::new(-1);
//! first.channel_versions.insert("a".into(), ChannelVersion::Int(2));
//! first.versions_seen.insert("node".into(), [("a".to_owned(), ChannelVersion::Int(3))].into_iter().collect());
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! saver.put(&config, &first, &meta, &ChannelVersions::new()).await?;
//!
//! let report = verify_thread(&saver, "t").await?;
//! assert_eq!(report.checkpoints, 1);
//! assert_eq!(report.violations.len(), 1);
//! let v = &report.violations[0];
//! assert_eq!((v.kind, v.channel.as_deref()), (ViolationKind::VersionsSeenAhead, Some("a")));
//! assert_eq!(v.message, "node \"node\" has seen version 3 of channel \"a\", newer than its version 2");
//! # Ok(())
//! # }
//! ```
//!
//! # Memory
//!
//! A thread is read with [`CheckpointSaver::list`] as a stream; the verifier
//! keeps, per checkpoint, its versions, step and the few facts of its writes
//! the parent links need, never its channel values. A store is read a page
//! of threads at a time ([`CheckpointSaver::list_threads`]).

mod delta;
mod thread;
mod writes;

use std::fmt;

use futures::StreamExt;

use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::saver::{CheckpointSaver, ListOptions, ListThreadsOptions};
#[cfg(doc)]
use crate::version::ChannelVersion;

pub use thread::ThreadVerifier;

/// What rule a [`Violation`] breaks (see the [module](self) documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ViolationKind {
    /// A parent id names a checkpoint that is not stored.
    MissingParent,
    /// A channel's version is older than (or gone from) the parent's.
    VersionBackwards,
    /// A node has seen a version newer than the channel's current one.
    VersionsSeenAhead,
    /// A channel changed to a version that is not the step's one new version.
    VersionPerStep,
    /// `metadata.step` does not follow the parent's.
    StepNumber,
    /// `updated_channels` disagrees with the versions that changed.
    UpdatedChannels,
    /// A loop step's updates have no pending writes under its parent.
    MissingWrites,
    /// Writes stored for a checkpoint that is not stored.
    OrphanWrites,
    /// A write's task id (or path) is not what Python computes.
    TaskId,
    /// A write's index is not the one its channel takes.
    WriteIndex,
    /// An `__interrupt__` write is not shaped as Python writes it.
    InterruptWrite,
    /// A `__resume__` write is not shaped as Python writes it.
    ResumeWrite,
    /// `counters_since_delta_snapshot` is malformed or does not advance as
    /// the runtime advances it.
    DeltaCounters,
    /// A delta channel changed without a snapshot, and the parent stores no
    /// write to it.
    DeltaWrites,
    /// A delta channel's value cannot be rebuilt: a checkpoint without a
    /// parent versions it but stores no value for it.
    DeltaHistory,
}

impl ViolationKind {
    /// A short name, as the CLI prints it (`missing-parent`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::MissingParent => "missing-parent",
            ViolationKind::VersionBackwards => "version-backwards",
            ViolationKind::VersionsSeenAhead => "versions-seen-ahead",
            ViolationKind::VersionPerStep => "version-per-step",
            ViolationKind::StepNumber => "step-number",
            ViolationKind::UpdatedChannels => "updated-channels",
            ViolationKind::MissingWrites => "missing-writes",
            ViolationKind::OrphanWrites => "orphan-writes",
            ViolationKind::TaskId => "task-id",
            ViolationKind::WriteIndex => "write-index",
            ViolationKind::InterruptWrite => "interrupt-write",
            ViolationKind::ResumeWrite => "resume-write",
            ViolationKind::DeltaCounters => "delta-counters",
            ViolationKind::DeltaWrites => "delta-writes",
            ViolationKind::DeltaHistory => "delta-history",
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule, where it is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub kind: ViolationKind,
    /// The thread.
    pub thread_id: String,
    /// The namespace (`""` for the root graph).
    pub checkpoint_ns: String,
    /// The checkpoint the rule is broken at (for [`ViolationKind::OrphanWrites`],
    /// the id the writes name).
    pub checkpoint_id: String,
    /// The channel concerned, when one is.
    pub channel: Option<String>,
    /// What is wrong, in a sentence.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "thread {:?}", self.thread_id)?;
        if !self.checkpoint_ns.is_empty() {
            write!(f, ", namespace {:?}", self.checkpoint_ns)?;
        }
        write!(
            f,
            ", checkpoint {} [{}]: {}",
            self.checkpoint_id, self.kind, self.message
        )
    }
}

/// What a verification found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every violation, by thread, then in the order found.
    pub violations: Vec<Violation>,
    /// Threads read.
    pub threads: usize,
    /// Checkpoints read.
    pub checkpoints: usize,
    /// Pending writes read.
    pub writes: usize,
    /// Writes whose task id was not recomputed (see the module documentation).
    pub unchecked_task_ids: usize,
}

impl Report {
    /// No violation.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// The violations of one kind.
    pub fn of_kind(&self, kind: ViolationKind) -> impl Iterator<Item = &Violation> + '_ {
        self.violations.iter().filter(move |v| v.kind == kind)
    }

    /// Adds `other`'s violations and counts to these.
    pub fn merge(&mut self, other: Report) {
        self.violations.extend(other.violations);
        self.threads += other.threads;
        self.checkpoints += other.checkpoints;
        self.writes += other.writes;
        self.unchecked_task_ids += other.unchecked_task_ids;
    }
}

/// Threads read per [`CheckpointSaver::list_threads`] call by [`verify_store`].
pub const THREAD_PAGE: usize = 100;

/// Verifies one thread, every namespace of it (see the [module](self)
/// documentation). An unknown thread has no checkpoint and no violation.
///
/// # Errors
/// Storage failures, and rows the saver cannot decode, as the saver reports
/// them.
pub async fn verify_thread(saver: &dyn CheckpointSaver, thread_id: &str) -> Result<Report> {
    let mut verifier = ThreadVerifier::new(thread_id);
    let mut stream = saver.list(
        Some(CheckpointConfig::all_namespaces(thread_id)),
        ListOptions::default(),
    );
    while let Some(tuple) = stream.next().await {
        verifier.push(&tuple?);
    }
    drop(stream);
    if saver.capabilities().thread_keys {
        match saver.thread_keys(thread_id).await {
            Ok(keys) => verifier.check_orphans(&keys),
            Err(Error::Unsupported { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(verifier.finish())
}

/// Verifies every thread of a store, [`THREAD_PAGE`] threads at a time,
/// one thread in memory at a time.
///
/// # Errors
/// [`Error::Unsupported`] when the saver cannot list its threads; as
/// [`verify_thread`].
pub async fn verify_store(saver: &dyn CheckpointSaver) -> Result<Report> {
    let mut report = Report::default();
    let mut after: Option<String> = None;
    loop {
        let page = saver
            .list_threads(ListThreadsOptions {
                after: after.clone(),
                limit: Some(THREAD_PAGE),
                ..ListThreadsOptions::default()
            })
            .await?;
        for info in &page {
            report.merge(verify_thread(saver, &info.thread_id).await?);
        }
        match page.last() {
            Some(last) if page.len() >= THREAD_PAGE => after = Some(last.thread_id.clone()),
            _ => return Ok(report),
        }
    }
}
