//! The `CheckpointSaver` trait every backend implements.

use std::fmt;
use std::future::Future;
use std::time::Instant;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use indexmap::IndexMap;
use tracing::Instrument;

use crate::checkpoint::{ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::serde::Value;
use crate::version::{next_version, ChannelVersion};

/// A stream of checkpoint tuples, newest first.
pub type CheckpointStream<'a> = BoxStream<'a, Result<CheckpointTuple>>;

/// Durable storage for a graph's checkpoints and pending writes.
///
/// Frameworks hold savers as `Arc<dyn CheckpointSaver>` and pick the backend at
/// run time. The five required operations are those of LangGraph's
/// `BaseCheckpointSaver`; the extended ones have default bodies returning
/// [`Error::Unsupported`], and [`CheckpointSaver::capabilities`] says which a
/// backend implements.
///
/// # Contract
///
/// Every backend of this crate behaves identically; the conformance suite
/// (`checkpointer::conformance`, feature `conformance`) checks each rule below
/// under the name given in parentheses.
///
/// - `put` stores the checkpoint under (thread, namespace, `checkpoint.id`),
///   records `config.checkpoint_id` as its parent and returns a config naming the
///   stored checkpoint (checks `put_returns_config`, `put_parent_config`). Putting the
///   same id again replaces checkpoint and metadata (check `put_overwrites_same_id`).
/// - A value present in `channel_values` is stored whether or not its channel is
///   in `new_versions`; a channel in `new_versions` but absent from
///   `channel_values` has no value; channels not written by this put are read
///   from the version the checkpoint names (checks `put_keeps_values_outside_new_versions`,
///   `put_incremental_channel_update`, `put_new_channel_added`, `put_channel_removed`).
/// - `get_tuple` without a checkpoint id returns the checkpoint with the greatest
///   id in (thread, namespace), with an id exactly that checkpoint, never a
///   fallback (checks `get_tuple_latest_is_max_id`, `get_tuple_nonexistent_checkpoint_id`).
///   Namespaces and threads are isolated (check `get_tuple_respects_namespace`).
/// - `put_writes` gives each write the index of its position in the call, or the
///   fixed index of a special channel; a regular write keeps the first value
///   stored for (task_id, idx), a special-channel write (`__error__`,
///   `__scheduled__`, `__interrupt__`, `__resume__`) replaces it, decided per
///   write (checks `put_writes_idempotent`, `put_writes_special_channels_overwrite`,
///   `put_writes_mixed_batch_per_write`). Writes may arrive before their
///   checkpoint (check `put_writes_before_checkpoint`).
/// - Pending writes come back sorted by (task_path, task_id, idx)
///   (check `pending_writes_sorted`).
/// - `list` yields newest first (checkpoint id descending; ties by thread id, then
///   namespace, descending) (check `list_ordering`); `checkpoint_ns: None` in the
///   config means every namespace (check `list_all_namespaces`); `before` keeps ids
///   strictly smaller (check `list_before_excludes_boundary`); `limit` applies after
///   the filter (check `list_limit_after_filter`).
/// - The metadata filter is the AND of JSON-value equality per top-level key;
///   nested maps compare by content, not key order; numbers compare by value
///   and never equal booleans; a `null` filter value matches a missing key; any
///   key string is data (checks `list_filter_nested_key_order`, `list_filter_null_matches_missing`,
///   `list_filter_bool_is_not_int`, `list_filter_hostile_keys`).
/// - `delete_thread` removes every checkpoint, write and stored value of the
///   thread in all namespaces and nothing else; an unknown thread is a no-op
///   (checks `delete_thread_removes_all_namespaces`, `delete_thread_preserves_other_threads`).
/// - Extended operations are available exactly when [`Capabilities`] says so;
///   otherwise they return [`Error::Unsupported`] (check `capabilities_match_behaviour`).
#[async_trait]
pub trait CheckpointSaver: Send + Sync + fmt::Debug {
    /// Fetches one checkpoint: the one named by `config.checkpoint_id`, or the
    /// latest of (thread, namespace) when no id is given.
    ///
    /// # Errors
    /// Storage failures and undecodable stored bytes.
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>>;

    /// Lists checkpoints newest first. `config = None` lists every thread;
    /// `config.checkpoint_ns = None` every namespace of the thread; a
    /// `config.checkpoint_id` restricts to that checkpoint.
    ///
    /// The stream pages through storage; it never holds the whole history.
    fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> CheckpointStream<'_>;

    /// Stores a checkpoint. `config.checkpoint_id`, if any, is its parent;
    /// `new_versions` names the channels whose values changed since the parent.
    ///
    /// # Errors
    /// Unencodable values, storage failures. Nothing is stored on error.
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig>;

    /// Stores the writes a task made against `config.checkpoint_id` (required).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] without a checkpoint id; unencodable values;
    /// storage failures. Nothing is stored on error.
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()>;

    /// Deletes every checkpoint, write and stored value of a thread.
    ///
    /// # Errors
    /// Storage failures.
    async fn delete_thread(&self, thread_id: &str) -> Result<()>;

    /// The extended operations this backend implements.
    fn capabilities(&self) -> Capabilities {
        Capabilities::none()
    }

    /// Deletes every checkpoint whose metadata `run_id` is one of `run_ids`, in
    /// every thread and namespace, with its writes.
    ///
    /// # Errors
    /// [`Error::Unsupported`] unless [`Capabilities::delete_for_runs`].
    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        let _ = run_ids;
        Err(unsupported::<Self>("delete_for_runs"))
    }

    /// Copies every checkpoint, write and value of thread `source` to thread
    /// `target`, keeping ids, parents, namespaces and metadata. An unknown
    /// source copies nothing.
    ///
    /// # Errors
    /// [`Error::ThreadExists`] when `target` already has checkpoints;
    /// [`Error::Unsupported`] unless [`Capabilities::copy_thread`].
    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let _ = (source, target);
        Err(unsupported::<Self>("copy_thread"))
    }

    /// Removes old checkpoints of the given threads (see [`PruneStrategy`]).
    ///
    /// # Errors
    /// [`Error::Unsupported`] unless [`Capabilities::prune`].
    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let _ = (thread_ids, strategy);
        Err(unsupported::<Self>("prune"))
    }

    /// The writes and nearest stored value (seed) of each channel along the
    /// ancestry of a checkpoint, to rebuild delta channels (spec §10.3).
    ///
    /// # Errors
    /// [`Error::Unsupported`] unless [`Capabilities::delta_channel_history`].
    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<IndexMap<String, DeltaChannelHistory>> {
        let _ = (config, channels);
        Err(unsupported::<Self>("get_delta_channel_history"))
    }

    /// Threads with their latest checkpoint, ordered by thread id.
    ///
    /// # Errors
    /// [`Error::Unsupported`] unless [`Capabilities::list_threads`].
    async fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
        let _ = options;
        Err(unsupported::<Self>("list_threads"))
    }

    /// The version that follows `current` for a channel.
    fn get_next_version(&self, current: Option<&ChannelVersion>) -> ChannelVersion {
        next_version(current)
    }
}

fn unsupported<S: ?Sized>(operation: &'static str) -> Error {
    Error::Unsupported {
        operation,
        implementer: std::any::type_name::<S>(),
    }
}

/// Which extended operations a backend implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// [`CheckpointSaver::delete_for_runs`].
    pub delete_for_runs: bool,
    /// [`CheckpointSaver::copy_thread`].
    pub copy_thread: bool,
    /// [`CheckpointSaver::prune`].
    pub prune: bool,
    /// [`CheckpointSaver::get_delta_channel_history`].
    pub delta_channel_history: bool,
    /// [`CheckpointSaver::list_threads`].
    pub list_threads: bool,
}

impl Capabilities {
    /// No extended operation.
    pub const fn none() -> Self {
        Capabilities {
            delete_for_runs: false,
            copy_thread: false,
            prune: false,
            delta_channel_history: false,
            list_threads: false,
        }
    }

    /// Every extended operation.
    pub const fn all() -> Self {
        Capabilities {
            delete_for_runs: true,
            copy_thread: true,
            prune: true,
            delta_channel_history: true,
            list_threads: true,
        }
    }
}

/// Options of [`CheckpointSaver::list`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListOptions {
    /// Metadata equality per key, AND-ed (see the trait's contract).
    pub filter: IndexMap<String, Value>,
    /// Only checkpoints whose id is strictly smaller than this one.
    pub before: Option<String>,
    /// At most this many tuples, counted after the filter.
    pub limit: Option<usize>,
}

impl ListOptions {
    /// Adds a metadata filter entry.
    pub fn filter(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.filter.insert(key.into(), value.into());
        self
    }

    /// Sets `before`.
    pub fn before(mut self, checkpoint_id: impl Into<String>) -> Self {
        self.before = Some(checkpoint_id.into());
        self
    }

    /// Sets `limit`.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// Whether `metadata` satisfies `filter`: every filter key's value equals the
/// metadata's value under (check `json_eq`); a `null` filter value also matches a
/// missing key.
pub fn metadata_matches(metadata: &CheckpointMetadata, filter: &IndexMap<String, Value>) -> bool {
    filter_matches(|key| metadata.get(key), filter)
}

/// [`metadata_matches`] on metadata looked up by `get`, for a saver that
/// filters stored metadata without building a [`CheckpointMetadata`].
pub(crate) fn filter_matches<'a>(get: impl Fn(&str) -> Option<&'a Value>, filter: &IndexMap<String, Value>) -> bool {
    filter.iter().all(|(key, want)| match get(key) {
        Some(have) => json_eq(have, want),
        None => matches!(want, Value::Nil),
    })
}

/// JSON-value equality: numbers by value (never equal to booleans), maps by
/// content regardless of key order, arrays element-wise.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    use Value::*;
    match (a, b) {
        (Nil, Nil) => true,
        (Bool(x), Bool(y)) => x == y,
        (Str(x), Str(y)) => x == y,
        (Bin(x), Bin(y)) => x == y,
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Map(x), Map(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.iter()
                        .find(|(k2, _)| json_eq(k, k2))
                        .is_some_and(|(_, v2)| json_eq(v, v2))
                })
        }
        (Ext(x), Ext(y)) => x == y,
        _ => match (a.as_number(), b.as_number()) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

/// How [`CheckpointSaver::prune`] thins a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneStrategy {
    /// Keep the latest checkpoint of each namespace with its writes, plus the
    /// ancestors a delta channel needs to rebuild; per-call subgraph namespaces
    /// of older root checkpoints are removed.
    KeepLatest,
    /// Remove everything of the threads.
    Delete,
}

/// The history of one delta channel (spec §1.8).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeltaChannelHistory {
    /// The channel's writes, oldest checkpoint first, each checkpoint's in
    /// (task_path, task_id, idx) order.
    pub writes: Vec<PendingWrite>,
    /// The nearest stored value of the channel, as stored (a delta snapshot
    /// ext or a plain value); `None` when the walk reached the root.
    pub seed: Option<Value>,
}

/// Options of [`CheckpointSaver::list_threads`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListThreadsOptions {
    /// Metadata filter applied to each thread's latest checkpoint.
    pub filter: IndexMap<String, Value>,
    /// Only threads whose id sorts after this one (the cursor of the next page).
    pub after: Option<String>,
    /// At most this many threads.
    pub limit: Option<usize>,
}

/// A thread and its latest checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadInfo {
    /// The thread.
    pub thread_id: String,
    /// The checkpoint with the greatest id in any namespace of the thread.
    pub latest: CheckpointConfig,
    /// That checkpoint's metadata.
    pub metadata: CheckpointMetadata,
}

/// Conveniences over any [`CheckpointSaver`]; never implemented by backends.
#[async_trait]
pub trait CheckpointSaverExt: CheckpointSaver {
    /// The checkpoint alone, as [`CheckpointSaver::get_tuple`] finds it.
    ///
    /// # Errors
    /// As `get_tuple`.
    async fn get(&self, config: &CheckpointConfig) -> Result<Option<Checkpoint>> {
        Ok(self.get_tuple(config).await?.map(|t| t.checkpoint))
    }

    /// The latest checkpoint of a thread's root namespace.
    ///
    /// # Errors
    /// As `get_tuple`.
    async fn latest(&self, thread_id: &str) -> Result<Option<CheckpointTuple>> {
        self.get_tuple(&CheckpointConfig::new(thread_id)).await
    }

    /// [`CheckpointSaver::list`] collected into a vector.
    ///
    /// # Errors
    /// The first error of the stream.
    async fn list_vec(&self, config: Option<CheckpointConfig>, options: ListOptions) -> Result<Vec<CheckpointTuple>> {
        let mut out = Vec::new();
        let mut stream = self.list(config, options);
        while let Some(item) = stream.next().await {
            out.push(item?);
        }
        Ok(out)
    }
}

impl<S: CheckpointSaver + ?Sized> CheckpointSaverExt for S {}

/// A `tracing` span for one saver operation, with the fields users filter on.
/// Backends wrap each operation in it with (check `traced`).
pub fn op_span(op: &'static str, thread_id: &str, ns: &str, checkpoint_id: Option<&str>) -> tracing::Span {
    tracing::debug_span!(
        "checkpointer",
        op,
        thread_id,
        checkpoint_ns = ns,
        checkpoint_id,
        duration_us = tracing::field::Empty,
    )
}

/// Runs `fut` inside `span`, recording its duration (`duration_us`) and any
/// error.
pub async fn traced<T>(span: tracing::Span, fut: impl Future<Output = Result<T>>) -> Result<T> {
    if span.is_disabled() {
        // No subscriber wants it: no clock reads, no instrumentation.
        return fut.await;
    }
    let start = Instant::now();
    let out = fut.instrument(span.clone()).await;
    span.record("duration_us", start.elapsed().as_micros() as u64);
    if let Err(err) = &out {
        tracing::debug!(parent: &span, error = %err, "checkpointer operation failed");
    }
    out
}
