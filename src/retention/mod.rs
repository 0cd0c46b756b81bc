//! Retention: policies that keep a store small without breaking time
//! travel, applied online in bounded, atomic, resumable batches.
//!
//! A [`RetentionPolicy`] says what stays; [`CheckpointSaver::retain`]
//! applies it (or, with [`RetainOptions::dry_run`], says what it would
//! remove) and returns a [`RetentionReport`]. The savers' builders can also
//! run a policy in the background (`retention(policy, every)`).
//!
//! Per thread and namespace a checkpoint stays when any of these holds:
//!
//! - it is the namespace's latest checkpoint (always);
//! - it is one of the last `n` ([`RetentionPolicy::keep_last`]);
//! - its `ts` is newer than an age ([`RetentionPolicy::keep_newer_than`]);
//! - it holds an interrupt (a pending write on `__interrupt__`) (always);
//! - it is a fork point (more than one child) or the first checkpoint of
//!   one of a fork point's branches (always);
//! - its metadata marks it ([`RetentionPolicy::mark_key`], `pinned` by
//!   default: any value but `null` and `false`) (always);
//! - a kept checkpoint's delta channels need it to rebuild (always; the
//!   walk of `prune`'s rule: up to the nearest stored value).
//!
//! A kept checkpoint keeps its pending writes; a removed one goes with its
//! writes and the values no remaining checkpoint names. A kept checkpoint
//! whose parent was removed forgets it: its parent id is cleared, so
//! `get_tuple` and `list` give it `parent_config: None` (in Rust and in
//! Python LangGraph) and a history walk ends there.
//!
//! With [`RetentionPolicy::delete_idle_threads`], a thread whose newest
//! checkpoint `ts` (any namespace) is older than the age goes whole.
//!
//! ```
//! use std::time::Duration;
//! use checkpointer::prelude::*;
//! use checkpointer::retention::{RetainOptions, RetentionPolicy};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! let saver = InMemorySaver::new();
//! let mut parent = CheckpointConfig::new("t");
//! for step in 0..10 {
//!     let checkpoint = Checkpoint::new(step);
//!     let metadata = CheckpointMetadata::new(CheckpointSource::Loop, step);
//!     parent = saver.put(&parent, &checkpoint, &metadata, &Default::default()).await?;
//! }
//! // keep the last three steps and anything a week old or newer
//! let policy = RetentionPolicy::new()
//!     .keep_last(3)
//!     .keep_newer_than(Duration::from_secs(7 * 86_400));
//! let report = saver.retain(&policy, RetainOptions::default().dry_run(true)).await?;
//! assert_eq!(report.checkpoints_removed, 0); // all ten are newer than a week
//! let report = saver.retain(&RetentionPolicy::new().keep_last(3), RetainOptions::default()).await?;
//! assert_eq!(report.checkpoints_removed, 7);
//! assert_eq!(saver.list_vec(None, ListOptions::default()).await?.len(), 3);
//! # Ok(())
//! # }
//! ```
//!
//! [`CheckpointSaver::retain`]: crate::saver::CheckpointSaver::retain

pub(crate) mod plan;
#[cfg(test)]
mod tests;
mod ts;

use std::time::Duration;

pub(crate) use ts::parse_ts_micros;

use crate::error::{Error, Result};

/// The metadata key that marks a checkpoint to keep, unless the policy names
/// another ([`RetentionPolicy::mark_key`]).
pub const DEFAULT_MARK_KEY: &str = "pinned";

/// The largest batch [`RetainOptions::batch`] accepts.
pub const MAX_BATCH: usize = 4096;

/// The batch size unless [`RetainOptions::batch`] says otherwise:
/// checkpoints removed per atomic step.
pub const DEFAULT_BATCH: usize = 256;

/// The rest unless [`RetainOptions::rest`] says otherwise: after each step
/// retention waits 4 times as long as the step took, so it holds the store
/// at most a fifth of the time.
pub const DEFAULT_REST: u32 = 4;

/// The longest one rest lasts, however long its step took.
pub const MAX_REST: Duration = Duration::from_secs(5);

/// The wait after a step that took `took`, with rest `rest` (see
/// [`RetainOptions::rest`]).
fn rest_after(took: Duration, rest: u32) -> Duration {
    took.checked_mul(rest).unwrap_or(MAX_REST).min(MAX_REST)
}

/// Waits `rest` times as long as the step begun at `started` took (at
/// most [`MAX_REST`]; nothing for 0): the writes beside a retention or
/// reclaim step find the store free.
pub(crate) async fn rest(started: std::time::Instant, rest: u32) {
    if rest > 0 {
        tokio::time::sleep(rest_after(started.elapsed(), rest)).await;
    }
}

/// What a retention run keeps (see the [module docs](self)). Built from
/// [`RetentionPolicy::new`], which keeps everything, by adding rules;
/// checked by [`RetentionPolicy::validate`] before anything is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPolicy {
    keep_last: Option<usize>,
    keep_newer_than: Option<Duration>,
    idle: Option<Duration>,
    mark_key: String,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy::new()
    }
}

impl RetentionPolicy {
    /// A policy with no rule yet (refused as it is: it would remove nothing).
    pub fn new() -> Self {
        RetentionPolicy {
            keep_last: None,
            keep_newer_than: None,
            idle: None,
            mark_key: DEFAULT_MARK_KEY.to_owned(),
        }
    }

    /// Keeps the last `n` checkpoints (by id) of each thread and namespace.
    /// `0` keeps only what is always kept, and is refused unless idle
    /// threads are deleted.
    #[must_use]
    pub fn keep_last(mut self, n: usize) -> Self {
        self.keep_last = Some(n);
        self
    }

    /// Keeps the checkpoints whose `ts` is at most `age` old. A checkpoint
    /// whose `ts` does not read as an RFC 3339 instant counts as new.
    #[must_use]
    pub fn keep_newer_than(mut self, age: Duration) -> Self {
        self.keep_newer_than = Some(age);
        self
    }

    /// Deletes whole threads whose newest checkpoint (in any namespace) is
    /// older than `age` (opt-in).
    #[must_use]
    pub fn delete_idle_threads(mut self, age: Duration) -> Self {
        self.idle = Some(age);
        self
    }

    /// The metadata key whose presence (any value but `null` and `false`)
    /// keeps a checkpoint; [`DEFAULT_MARK_KEY`] unless set.
    #[must_use]
    pub fn mark_key(mut self, key: impl Into<String>) -> Self {
        self.mark_key = key.into();
        self
    }

    /// The `keep_last` rule, if set.
    pub fn last(&self) -> Option<usize> {
        self.keep_last
    }

    /// The `keep_newer_than` age, if set.
    pub fn newer_than(&self) -> Option<Duration> {
        self.keep_newer_than
    }

    /// The idle age after which a thread is deleted, if set.
    pub fn idle_threads(&self) -> Option<Duration> {
        self.idle
    }

    /// The metadata key that marks a checkpoint to keep.
    pub fn marked_by(&self) -> &str {
        &self.mark_key
    }

    /// Whether checkpoints are thinned inside threads (a `keep_last` or
    /// `keep_newer_than` rule); without one only idle threads go.
    pub(crate) fn thins(&self) -> bool {
        self.keep_last.is_some() || self.keep_newer_than.is_some()
    }

    /// Refuses a policy that contradicts itself or would remove a thread's
    /// latest checkpoint without deleting whole threads.
    ///
    /// # Errors
    /// [`Error::InvalidPolicy`] with the [`PolicyError`].
    pub fn validate(&self) -> Result<()> {
        let refuse = |e: PolicyError| Err(Error::InvalidPolicy(e));
        if self.mark_key.is_empty() {
            return refuse(PolicyError::EmptyMarkKey);
        }
        if !self.thins() && self.idle.is_none() {
            return refuse(PolicyError::NoRule);
        }
        if self.idle == Some(Duration::ZERO) {
            return refuse(PolicyError::IdleZero);
        }
        if self.idle.is_none() {
            if self.keep_last == Some(0) {
                return refuse(PolicyError::KeepsNoLatest("keep_last(0)"));
            }
            if self.keep_newer_than == Some(Duration::ZERO) {
                return refuse(PolicyError::KeepsNoLatest("keep_newer_than(0)"));
            }
        }
        if let (Some(keep), Some(idle)) = (self.keep_newer_than, self.idle) {
            if idle < keep {
                return refuse(PolicyError::IdleBeforeKept { keep, idle });
            }
        }
        Ok(())
    }
}

/// Why a [`RetentionPolicy`] is refused (inside [`Error::InvalidPolicy`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// No rule: neither `keep_last`, `keep_newer_than` nor
    /// `delete_idle_threads`, so the policy would remove nothing.
    #[error("the policy has no rule (keep_last, keep_newer_than or delete_idle_threads)")]
    NoRule,
    /// A rule that keeps no checkpoint of a thread, not even its latest,
    /// without deleting whole threads.
    #[error("{0} keeps no checkpoint, not even a thread's latest, and whole threads are not deleted")]
    KeepsNoLatest(&'static str),
    /// `delete_idle_threads(0)` would delete every thread, live ones too.
    #[error("delete_idle_threads(0) would delete every thread")]
    IdleZero,
    /// Threads would be deleted while their checkpoints are still kept for
    /// their age.
    #[error("delete_idle_threads({idle:?}) deletes threads whose checkpoints keep_newer_than({keep:?}) keeps")]
    IdleBeforeKept {
        /// The `keep_newer_than` age.
        keep: Duration,
        /// The `delete_idle_threads` age.
        idle: Duration,
    },
    /// The mark key is empty.
    #[error("the mark key is empty")]
    EmptyMarkKey,
}

/// Which threads a retention run looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetainThreads {
    /// Every thread of the store, in id order, a page at a time.
    #[default]
    All,
    /// These threads (unknown ones are skipped).
    List(Vec<String>),
}

/// How [`CheckpointSaver::retain`](crate::saver::CheckpointSaver::retain)
/// runs.
///
/// ```
/// use checkpointer::retention::{RetainOptions, RetainThreads};
/// let o = RetainOptions::default().dry_run(true).batch(64).threads(["a", "b"]);
/// assert!(o.dry_run && o.batch == 64);
/// assert_eq!(o.threads, RetainThreads::List(vec!["a".into(), "b".into()]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetainOptions {
    /// Only count what would go; write nothing.
    pub dry_run: bool,
    /// Checkpoints removed per atomic step (1 to [`MAX_BATCH`];
    /// [`DEFAULT_BATCH`]). Redis takes at most 32 per step, each step one
    /// script on its single thread; SQLite commits a step in slices of
    /// about a millisecond, between the writes beside it.
    pub batch: usize,
    /// The threads to look at.
    pub threads: RetainThreads,
    /// Name each checkpoint removed (or that a dry run would remove) in
    /// [`RetentionReport::removed`]; memory grows with their number.
    pub list_removed: bool,
    /// After each step (a page of skeletons read, a batch removed), wait
    /// `rest` times as long as the step took (at most [`MAX_REST`]), so
    /// that the writes beside retention find the store free most of the
    /// time: with `r`, retention takes at most `1 / (r + 1)` of it
    /// ([`DEFAULT_REST`]; 0: no wait, as fast as the store goes).
    pub rest: u32,
}

impl Default for RetainOptions {
    fn default() -> Self {
        RetainOptions {
            dry_run: false,
            batch: DEFAULT_BATCH,
            threads: RetainThreads::All,
            list_removed: false,
            rest: DEFAULT_REST,
        }
    }
}

impl RetainOptions {
    /// Only count what would go.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Name each checkpoint removed in [`RetentionReport::removed`].
    #[must_use]
    pub fn list_removed(mut self, list: bool) -> Self {
        self.list_removed = list;
        self
    }

    /// Checkpoints removed per atomic step.
    #[must_use]
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch;
        self
    }

    /// The wait after each step, in multiples of the step's time (0: none).
    #[must_use]
    pub fn rest(mut self, rest: u32) -> Self {
        self.rest = rest;
        self
    }

    /// Only these threads.
    #[must_use]
    pub fn threads<I, S>(mut self, threads: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.threads = RetainThreads::List(threads.into_iter().map(Into::into).collect());
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(Error::invalid(format!(
                "a retention batch is 1 to {MAX_BATCH} checkpoints, not {}",
                self.batch
            )));
        }
        if let RetainThreads::List(ids) = &self.threads {
            if ids.iter().any(String::is_empty) {
                return Err(Error::invalid("a thread id to retain is empty"));
            }
        }
        Ok(())
    }
}

/// What a retention run did, or with [`RetainOptions::dry_run`] would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetentionReport {
    /// Whether this was a dry run (nothing written).
    pub dry_run: bool,
    /// Threads read.
    pub threads_scanned: u64,
    /// Threads removed whole as idle.
    pub threads_deleted: u64,
    /// Checkpoints read.
    pub checkpoints_scanned: u64,
    /// Checkpoints removed (or that would be).
    pub checkpoints_removed: u64,
    /// Pending writes removed with them (or that would be).
    pub writes_removed: u64,
    /// Kept checkpoints whose parent was removed (their parent cleared).
    pub parents_cleared: u64,
    /// Atomic removal steps run (or that would be).
    pub batches: u64,
    /// With [`RetainOptions::list_removed`], the checkpoints removed (or
    /// that would be), thread by thread; otherwise empty.
    pub removed: Vec<RemovedCheckpoint>,
}

/// A checkpoint a retention run removed or, in a dry run, would remove.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemovedCheckpoint {
    /// Its thread.
    pub thread_id: String,
    /// Its namespace.
    pub checkpoint_ns: String,
    /// Its id.
    pub checkpoint_id: String,
}

/// A background retention task (started by a saver's builder with
/// `retention(policy, every)`): it runs the policy every period and stops
/// when its saver (every clone) is dropped, or when this handle is.
#[derive(Debug)]
pub struct RetentionTask(tokio::task::AbortHandle);

impl RetentionTask {
    pub(crate) fn new(handle: tokio::task::AbortHandle) -> Self {
        RetentionTask(handle)
    }

    /// Whether the task has stopped.
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Drop for RetentionTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
