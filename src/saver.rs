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

/// A stream of checkpoint tuples, newest first. It owns what it reads from
/// (a saver moves a shared handle of its state into it), so it may be held
/// past the borrow of the saver that made it.
pub type CheckpointStream = BoxStream<'static, Result<CheckpointTuple>>;

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
/// - Input limits ([`crate::limits`]) are checked before anything is stored
///   or read, with the same error on every backend: `put` refuses an empty
///   `checkpoint.id` with [`Error::InvalidInput`] (check `put_empty_checkpoint_id_refused`);
///   a channel value, metadata value or write value nested deeper than
///   [`MAX_NESTING`](crate::limits::MAX_NESTING) levels is refused with
///   [`Error::Serde`] and nothing of the call is stored, while one at the limit
///   reads back unchanged (checks `put_nesting_at_limit_round_trips`,
///   `put_nesting_beyond_limit_refused`, `put_writes_nesting_beyond_limit_refused`);
///   a filter value nested deeper makes `list` and `list_threads` fail with
///   [`Error::InvalidInput`] (check `list_filter_nesting_beyond_limit_refused`).
///   Comparing wide maps costs O(n log n), not a search per key (check
///   `list_filter_wide_maps_compare_by_content`).
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
    fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> CheckpointStream;

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
    /// ancestry of a checkpoint, to rebuild delta channels (the walk: see
    /// `docs/design.md`, *Delta channel history*).
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

/// Forwards every method of the trait, defaulted ones included, to `$inner`;
/// the lint makes forgetting one (which would silently answer `Unsupported`
/// or the default version scheme) a compile error.
macro_rules! forward_saver {
    ($($wrapper:ident)::+) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<S: CheckpointSaver + ?Sized> CheckpointSaver for $($wrapper)::+<S> {
            async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
                (**self).get_tuple(config).await
            }

            fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> CheckpointStream {
                (**self).list(config, options)
            }

            async fn put(
                &self,
                config: &CheckpointConfig,
                checkpoint: &Checkpoint,
                metadata: &CheckpointMetadata,
                new_versions: &ChannelVersions,
            ) -> Result<CheckpointConfig> {
                (**self).put(config, checkpoint, metadata, new_versions).await
            }

            async fn put_writes(
                &self,
                config: &CheckpointConfig,
                writes: &[(String, Value)],
                task_id: &str,
                task_path: &str,
            ) -> Result<()> {
                (**self).put_writes(config, writes, task_id, task_path).await
            }

            async fn delete_thread(&self, thread_id: &str) -> Result<()> {
                (**self).delete_thread(thread_id).await
            }

            fn capabilities(&self) -> Capabilities {
                (**self).capabilities()
            }

            async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
                (**self).delete_for_runs(run_ids).await
            }

            async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
                (**self).copy_thread(source, target).await
            }

            async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
                (**self).prune(thread_ids, strategy).await
            }

            async fn get_delta_channel_history(
                &self,
                config: &CheckpointConfig,
                channels: &[String],
            ) -> Result<IndexMap<String, DeltaChannelHistory>> {
                (**self).get_delta_channel_history(config, channels).await
            }

            async fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
                (**self).list_threads(options).await
            }

            fn get_next_version(&self, current: Option<&ChannelVersion>) -> ChannelVersion {
                (**self).get_next_version(current)
            }
        }
    };
}

// A shared or boxed saver is a saver: `Arc<SqliteSaver>` where a generic
// `S: CheckpointSaver` is wanted, `Arc<dyn CheckpointSaver>` passed on as is.
forward_saver!(std::sync::Arc);
forward_saver!(Box);

fn unsupported<S: ?Sized>(operation: &'static str) -> Error {
    Error::Unsupported {
        operation,
        implementer: std::any::type_name::<S>(),
    }
}

/// The operations of [`CheckpointSaver`], one name for each everywhere:
/// [`Capabilities::supports`], the conformance suite, fault injection
/// (`testing::Op`) and tracing spans ([`Operation::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Operation {
    /// [`CheckpointSaver::get_tuple`].
    GetTuple,
    /// [`CheckpointSaver::list`].
    List,
    /// [`CheckpointSaver::put`].
    Put,
    /// [`CheckpointSaver::put_writes`].
    PutWrites,
    /// [`CheckpointSaver::delete_thread`].
    DeleteThread,
    /// [`CheckpointSaver::delete_for_runs`] (extended).
    DeleteForRuns,
    /// [`CheckpointSaver::copy_thread`] (extended).
    CopyThread,
    /// [`CheckpointSaver::prune`] (extended).
    Prune,
    /// [`CheckpointSaver::get_delta_channel_history`] (extended).
    DeltaChannelHistory,
    /// [`CheckpointSaver::list_threads`] (extended).
    ListThreads,
}

impl Operation {
    /// Every operation, required ones first.
    pub const ALL: [Operation; 10] = [
        Operation::GetTuple,
        Operation::List,
        Operation::Put,
        Operation::PutWrites,
        Operation::DeleteThread,
        Operation::DeleteForRuns,
        Operation::CopyThread,
        Operation::Prune,
        Operation::DeltaChannelHistory,
        Operation::ListThreads,
    ];

    /// The position in [`Operation::ALL`].
    #[cfg(feature = "conformance")]
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The method's name, as tracing spans record it in their `op` field.
    ///
    /// ```
    /// use checkpointer::saver::Operation;
    /// assert_eq!(Operation::DeltaChannelHistory.name(), "get_delta_channel_history");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Operation::GetTuple => "get_tuple",
            Operation::List => "list",
            Operation::Put => "put",
            Operation::PutWrites => "put_writes",
            Operation::DeleteThread => "delete_thread",
            Operation::DeleteForRuns => "delete_for_runs",
            Operation::CopyThread => "copy_thread",
            Operation::Prune => "prune",
            Operation::DeltaChannelHistory => "get_delta_channel_history",
            Operation::ListThreads => "list_threads",
        }
    }

    /// Whether the operation is optional (declared in [`Capabilities`]).
    pub fn is_extended(self) -> bool {
        !matches!(
            self,
            Operation::GetTuple | Operation::List | Operation::Put | Operation::PutWrites | Operation::DeleteThread
        )
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

    /// Whether the backend implements `op`: always for the required
    /// operations, as declared for the extended ones.
    ///
    /// ```
    /// use checkpointer::saver::{Capabilities, Operation};
    /// assert!(Capabilities::none().supports(Operation::Put));
    /// assert!(!Capabilities::none().supports(Operation::Prune));
    /// assert!(Capabilities::all().supports(Operation::Prune));
    /// ```
    pub fn supports(&self, op: Operation) -> bool {
        match op {
            Operation::DeleteForRuns => self.delete_for_runs,
            Operation::CopyThread => self.copy_thread,
            Operation::Prune => self.prune,
            Operation::DeltaChannelHistory => self.delta_channel_history,
            Operation::ListThreads => self.list_threads,
            Operation::GetTuple | Operation::List | Operation::Put | Operation::PutWrites | Operation::DeleteThread => {
                true
            }
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
///
/// Linear in the size of the values, plus O(n log n) to match the keys of
/// each map of more than a few entries; it walks without recursion, so any
/// depth is safe. Maps whose keys are themselves lists, maps or extension
/// values (which JSON never has) match those keys by a linear search.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    json_eq_at(a, b, 0)
}

/// Map keys that are lists or maps are compared by a nested [`json_eq_at`];
/// `key_depth` counts those nestings and stops them at the decoder's limit.
fn json_eq_at(a: &Value, b: &Value, key_depth: usize) -> bool {
    use Value::*;
    let mut stack: Vec<(&Value, &Value)> = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Array(x), Array(y)) => {
                if x.len() != y.len() {
                    return false;
                }
                stack.extend(x.iter().zip(y.iter()));
            }
            (Map(x), Map(y)) => {
                if x.len() != y.len() || !match_entries(x, y, key_depth, &mut stack) {
                    return false;
                }
            }
            (Nil, Nil) => {}
            (Bool(x), Bool(y)) if x == y => {}
            (Str(x), Str(y)) if x == y => {}
            (Bin(x), Bin(y)) if x == y => {}
            (Ext(x), Ext(y)) if x == y => {}
            _ => match (a.as_number(), b.as_number()) {
                (Some(x), Some(y)) if x == y => {}
                _ => return false,
            },
        }
    }
    true
}

/// A map key as equality sees it, for the keys that have one (scalars).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum KeyForm<'a> {
    Nil,
    Bool(bool),
    /// The bits of the number as `f64`, `-0.0` as `0.0` (NaN has no form:
    /// it equals nothing).
    Number(u64),
    Str(&'a str),
    Bin(&'a [u8]),
}

fn key_form(key: &Value) -> Option<KeyForm<'_>> {
    Some(match key {
        Value::Nil => KeyForm::Nil,
        Value::Bool(b) => KeyForm::Bool(*b),
        Value::Str(s) => KeyForm::Str(s.as_str()),
        Value::Bin(b) => KeyForm::Bin(b),
        _ => match key.as_number() {
            Some(n) if n.is_nan() => return None,
            Some(n) => KeyForm::Number(if n == 0.0 { 0 } else { n.to_bits() }),
            None => return None,
        },
    })
}

/// Pairs each entry of `x` with the first entry of `y` whose key equals its
/// key, pushing the value pairs to compare; false when a key has no match.
fn match_entries<'a>(
    x: &'a [(Value, Value)],
    y: &'a [(Value, Value)],
    key_depth: usize,
    stack: &mut Vec<(&'a Value, &'a Value)>,
) -> bool {
    let composite_eq =
        |k: &Value, k2: &Value| key_depth < crate::serde::msgpack::MAX_DEPTH && json_eq_at(k, k2, key_depth + 1);
    if x.len() <= 8 {
        // A handful of entries: a scan is cheaper than an index.
        for (k, v) in x {
            let Some((_, v2)) = y.iter().find(|(k2, _)| match (key_form(k), key_form(k2)) {
                (Some(p), Some(q)) => p == q,
                _ => composite_eq(k, k2),
            }) else {
                return false;
            };
            stack.push((v, v2));
        }
        return true;
    }
    // The keys of `y` that have a form, sorted by it; among equal forms the
    // first entry in `y` comes first (a stable sort), as a scan would find it.
    let mut index: Vec<(KeyForm<'a>, usize)> = y
        .iter()
        .enumerate()
        .filter_map(|(i, (k, _))| key_form(k).map(|f| (f, i)))
        .collect();
    index.sort_by(|p, q| p.0.cmp(&q.0));
    for (k, v) in x {
        let found = match key_form(k) {
            Some(form) => {
                let at = index.partition_point(|(f, _)| *f < form);
                index.get(at).filter(|(f, _)| *f == form).map(|&(_, i)| i)
            }
            None => y
                .iter()
                .position(|(k2, _)| key_form(k2).is_none() && composite_eq(k, k2)),
        };
        let Some(i) = found else {
            return false;
        };
        stack.push((v, &y[i].1));
    }
    true
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

/// The history of one delta channel (see `docs/design.md`, *Delta channel
/// history*).
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
pub(crate) fn op_span(op: &'static str, thread_id: &str, ns: &str, checkpoint_id: Option<&str>) -> tracing::Span {
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
pub(crate) async fn traced<T>(span: tracing::Span, fut: impl Future<Output = Result<T>>) -> Result<T> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: Vec<(Value, Value)>) -> Value {
        Value::Map(entries.into())
    }

    #[test]
    fn json_eq_maps_by_content() {
        let keys = |n: usize, rev: bool| {
            let mut e: Vec<(Value, Value)> = (0..n)
                .map(|i| (Value::from(format!("k{i}")), Value::Int(i as i64)))
                .collect();
            if rev {
                e.reverse();
            }
            map(e)
        };
        for n in [0, 1, 8, 9, 20_000] {
            assert!(json_eq(&keys(n, false), &keys(n, true)), "{n}");
        }
        let mut changed = match keys(50, true) {
            Value::Map(m) => m.to_vec(),
            _ => unreachable!(),
        };
        changed[10].1 = Value::Int(-1);
        assert!(!json_eq(&keys(50, false), &map(changed)));
        // Numbers as keys compare by value, never equal booleans; NaN equals nothing.
        let numeric = |k: Value| {
            map((0..10)
                .map(|i| (Value::Int(i), Value::Nil))
                .chain([(k, Value::Nil)])
                .collect())
        };
        assert!(json_eq(&numeric(Value::Float(100.0)), &numeric(Value::Int(100))));
        assert!(json_eq(&numeric(Value::Float(-0.0)), &numeric(Value::UInt(0))));
        assert!(!json_eq(&numeric(Value::Bool(true)), &numeric(Value::Int(1))));
        assert!(!json_eq(
            &numeric(Value::Float(f64::NAN)),
            &numeric(Value::Float(f64::NAN))
        ));
        assert!(!json_eq(&numeric(Value::from("1")), &numeric(Value::Int(1))));
        // Composite keys match by content too.
        let composite = |rev: bool| {
            let mut e: Vec<(Value, Value)> = (0..12)
                .map(|i| (Value::Array(vec![Value::Int(i), keys(3, rev)].into()), Value::Int(i)))
                .collect();
            if rev {
                e.reverse();
            }
            map(e)
        };
        assert!(json_eq(&composite(false), &composite(true)));
        // A duplicate key pairs with its first occurrence, as a scan finds it.
        let dup = |first: i64| {
            map((0..10)
                .map(|i| (Value::from(format!("k{i}")), Value::Int(i)))
                .chain([(Value::from("k0"), Value::Int(first))])
                .collect())
        };
        assert!(json_eq(&dup(0), &dup(0)));
    }

    /// `Arc` and `Box` of a saver forward every method, the defaulted
    /// extended ones included (a wrapper relying on the defaults would
    /// answer `Unsupported`).
    #[tokio::test]
    async fn arc_and_box_forward_every_method() {
        use std::sync::Arc;
        let inner = Arc::new(crate::InMemorySaver::new());
        let wrappers: Vec<Box<dyn CheckpointSaver>> = vec![
            Box::new(inner.clone()),
            Box::new(Box::new(inner.clone()) as Box<dyn CheckpointSaver>),
            Box::new(Arc::new(inner.clone()) as Arc<dyn CheckpointSaver>),
        ];
        for (i, saver) in wrappers.iter().enumerate() {
            assert_eq!(saver.capabilities(), Capabilities::all());
            let source = format!("source-{i}");
            let stored = saver
                .put(
                    &CheckpointConfig::new(&source),
                    &Checkpoint::new(0),
                    &CheckpointMetadata::default(),
                    &ChannelVersions::new(),
                )
                .await
                .unwrap();
            saver.copy_thread(&source, &format!("copy-{i}")).await.unwrap();
            assert!(inner.latest(&format!("copy-{i}")).await.unwrap().is_some());
            assert!(saver.list_threads(ListThreadsOptions::default()).await.unwrap().len() >= 2);
            let history = saver.get_delta_channel_history(&stored, &[]).await.unwrap();
            assert!(history.is_empty());
            saver
                .prune(std::slice::from_ref(&source), PruneStrategy::KeepLatest)
                .await
                .unwrap();
            saver.delete_for_runs(&["none".to_owned()]).await.unwrap();
            assert!(saver.get_next_version(None).to_string().starts_with("0000"));
        }
    }

    #[test]
    fn json_eq_walks_any_depth_without_recursion() {
        let deep = |leaf: i64| (0..200_000).fold(Value::Int(leaf), |v, _| Value::Array(vec![v].into()));
        let (a, b, c) = (deep(1), deep(1), deep(2));
        assert!(json_eq(&a, &b));
        assert!(!json_eq(&a, &c));
        // Dropping values this deep recurses in `Drop`: leak them.
        std::mem::forget((a, b, c));
    }
}
