//! The `CheckpointSaver` trait every backend implements.

mod filter;
mod keys;
mod operation;

#[cfg(feature = "sqlite")]
pub(crate) use filter::filter_matches;
pub use filter::{json_eq, metadata_matches};
pub use keys::{CheckpointKey, ThreadKeys, WriteKey};
pub use operation::{Capabilities, Operation};

use std::fmt;
use std::future::Future;
use std::time::Instant;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use indexmap::IndexMap;
use tracing::Instrument;

use crate::checkpoint::{
    ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite, StepCheckpoint,
};
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
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use std::sync::Arc;
/// use checkpointer::prelude::*;
/// // Chosen at run time: InMemorySaver in tests, SqliteSaver or PostgresSaver in production.
/// let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
/// let config = CheckpointConfig::new("thread-1");
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let first = saver.put(&config, &Checkpoint::new(-1), &meta, &ChannelVersions::new()).await?;
/// let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
/// saver.put(&first, &Checkpoint::new(0), &meta, &ChannelVersions::new()).await?;
/// let history = saver.list_vec(Some(config), ListOptions::default()).await?;
/// assert_eq!(history.len(), 2); // newest first
/// assert_eq!(history[0].parent_config.as_ref(), Some(&first));
/// saver.delete_thread("thread-1").await?;
/// assert!(saver.latest("thread-1").await?.is_none());
/// # Ok(())
/// # }
/// ```
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
/// - Pending writes come back sorted by (task_path, task_id, idx), each with
///   the task path of its call and its index (checks `pending_writes_sorted`,
///   `put_writes_task_path`).
/// - `thread_keys` lists every checkpoint (with its parent) and every write
///   (with its full key) the thread stores, writes of a checkpoint that is not
///   stored included, sorted by code point; a special channel's replaced
///   write is listed once; an unknown or deleted thread has none (checks
///   `thread_keys_lists_checkpoints_and_writes`,
///   `thread_keys_include_writes_of_missing_checkpoints`,
///   `thread_keys_list_a_replaced_write_once`,
///   `thread_keys_of_unknown_or_deleted_thread_are_empty`).
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
    /// It takes `config` by value (unlike `get_tuple`) because the stream
    /// outlives the call: it owns what it pages with.
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

    /// This saver's encoded I/O ([`crate::encoded`]), when it has one: every
    /// saver of this crate does; a wrapper that changes what the calls do
    /// (one injecting faults) answers `None`. The conformance suite checks
    /// encoded I/O on the savers that answer `Some`.
    fn as_encoded(&self) -> Option<&dyn crate::encoded::EncodedSaver> {
        None
    }

    /// This saver's fencing ([`crate::fence`]) and atomic steps
    /// ([`crate::atomic`]), when it has them: every saver of this crate
    /// does; a wrapper answers `None`. The conformance suite checks write
    /// ownership on the savers that answer `Some`.
    fn as_fenceable(&self) -> Option<&dyn crate::fence::Fenceable> {
        None
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

    /// Applies a retention policy (see [`crate::retention`]): per thread, the
    /// checkpoints the policy does not keep go with their writes and the
    /// values no remaining checkpoint names, oldest first, in atomic
    /// batches of [`RetainOptions::batch`](crate::retention::RetainOptions::batch)
    /// checkpoints; idle threads go whole when the policy says so. A run
    /// interrupted (a crash, an error) leaves every thread readable, and
    /// running the policy again finishes the job. With
    /// [`RetainOptions::dry_run`](crate::retention::RetainOptions::dry_run)
    /// nothing is written and the report says what would go.
    ///
    /// # Errors
    /// [`Error::InvalidPolicy`] for a policy
    /// [`RetentionPolicy::validate`](crate::retention::RetentionPolicy::validate)
    /// refuses, [`Error::InvalidInput`] for bad
    /// options, both before anything is read; [`Error::Unsupported`] unless
    /// [`Capabilities::retain`]; on a fenced saver,
    /// [`Error::Fenced`] when its writer does not hold a thread it removes
    /// from (nothing of that batch removed); storage failures (the batches
    /// before it are applied).
    async fn retain(
        &self,
        policy: &crate::retention::RetentionPolicy,
        options: crate::retention::RetainOptions,
    ) -> Result<crate::retention::RetentionReport> {
        let _ = (policy, options);
        Err(unsupported::<Self>("retain"))
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

    /// The keys of every checkpoint and write the thread stores (in every
    /// namespace), read without decoding anything: so a checkpoint whose
    /// bytes cannot be read is still named, and writes saved against a
    /// checkpoint that is not stored are seen. An unknown thread has none.
    ///
    /// # Errors
    /// [`Error::Unsupported`] unless [`Capabilities::thread_keys`]; storage
    /// failures.
    async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        let _ = thread_id;
        Err(unsupported::<Self>("thread_keys"))
    }

    /// The version that follows `current` for a channel: one that sorts
    /// above it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `current` cannot be continued
    /// ([`next_version`]).
    fn get_next_version(&self, current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
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

            fn as_encoded(&self) -> Option<&dyn crate::encoded::EncodedSaver> {
                (**self).as_encoded()
            }

            fn as_fenceable(&self) -> Option<&dyn crate::fence::Fenceable> {
                (**self).as_fenceable()
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

            async fn retain(
                &self,
                policy: &crate::retention::RetentionPolicy,
                options: crate::retention::RetainOptions,
            ) -> Result<crate::retention::RetentionReport> {
                (**self).retain(policy, options).await
            }

            async fn get_delta_channel_history(
                &self,
                config: &CheckpointConfig,
                channels: &[String],
            ) -> Result<IndexMap<String, DeltaChannelHistory>> {
                (**self).get_delta_channel_history(config, channels).await
            }

            async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
                (**self).thread_keys(thread_id).await
            }

            async fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
                (**self).list_threads(options).await
            }

            fn get_next_version(&self, current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
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

/// Options of [`CheckpointSaver::list`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::prelude::*;
/// let saver = InMemorySaver::new();
/// let mut parent = CheckpointConfig::new("t");
/// for step in 0..3 {
///     let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
///     parent = saver.put(&parent, &Checkpoint::new(step), &meta, &ChannelVersions::new()).await?;
/// }
/// // the newest checkpoint at step 1 or before, one page of one
/// let newest = parent.checkpoint_id().unwrap().to_owned();
/// let page = saver
///     .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default().before(newest).limit(1))
///     .await?;
/// assert_eq!(page[0].metadata.step(), Some(1));
/// let found = saver.list_vec(None, ListOptions::default().filter("step", 0)).await?;
/// assert_eq!(found.len(), 1);
/// # Ok(())
/// # }
/// ```
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

/// How [`CheckpointSaver::prune`] thins a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneStrategy {
    /// Keep the latest checkpoint of each namespace with its writes, plus the
    /// ancestors a delta channel needs to rebuild; per-call subgraph namespaces
    /// of older root checkpoints are removed. A kept checkpoint whose parent
    /// is not kept forgets it (`parent_config` becomes `None`), as Python's
    /// `PostgresSaver.prune` does.
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

    /// Stores a super-step's checkpoint as the child of `parent` (the config
    /// of the checkpoint it follows, or of the thread for the first) and
    /// returns the tuple a runner continues from, without reading it back:
    /// the stored config, the checkpoint and metadata (shared with `step`
    /// and `metadata`, not copied), the parent's config, and no pending
    /// writes yet. It is the tuple `get_tuple` would return for a checkpoint
    /// whose changed channels all have new versions, as [`StepCheckpoint`]
    /// gives them.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use checkpointer::prelude::*;
    /// let saver = InMemorySaver::new();
    /// let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
    /// let mut step = StepCheckpoint::first(-1);
    /// step.write(START, "hi", next)?;
    /// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    /// let first = saver.put_step(&CheckpointConfig::new("t"), &step, &meta).await?;
    /// let mut step = first.checkpoint.successor(0);
    /// step.bump(START, next)?.write("greeting", "hi", next)?;
    /// let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    /// let second = saver.put_step(&first.config, &step, &meta).await?;
    /// assert_eq!(second.parent_config.as_ref(), Some(&first.config));
    /// assert_eq!(Some(second), saver.latest("t").await?);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As `put`.
    async fn put_step(
        &self,
        parent: &CheckpointConfig,
        step: &StepCheckpoint,
        metadata: &CheckpointMetadata,
    ) -> Result<CheckpointTuple> {
        let checkpoint = step.checkpoint();
        let config = self.put(parent, checkpoint, metadata, &step.new_versions).await?;
        Ok(CheckpointTuple::stored(config, parent, checkpoint, metadata))
    }

    /// Stores one task's writes given as [`PendingWrite`]s, the type
    /// `get_tuple` hands them back as: task id, task path and index travel
    /// with each write, so what a runner read is what it stores (a thread
    /// copied write by write keeps its keys). One `put_writes` call: all or
    /// nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use checkpointer::prelude::*;
    /// let saver = InMemorySaver::new();
    /// let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    /// let config = saver.put(&CheckpointConfig::new("t"), &Checkpoint::new(0), &meta, &ChannelVersions::new()).await?;
    /// let path = TaskPath::pull("agent").to_string();
    /// let writes = [
    ///     PendingWrite::new("task-1", "messages", "hi").with_task_path(&path),
    ///     PendingWrite::new("task-1", "branch:to:tools", Value::Nil).with_task_path(&path).with_idx(1),
    /// ];
    /// saver.put_pending_writes(&config, &writes).await?;
    /// let stored = saver.get_tuple(&config).await?.expect("stored").pending_writes;
    /// assert_eq!(stored, writes);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the writes belong to more than one task
    /// (task id and path), or a write's index is not the one its position
    /// gives it ([`write_idx`](crate::checkpoint::write_idx)); then as
    /// `put_writes`.
    async fn put_pending_writes(&self, config: &CheckpointConfig, writes: &[PendingWrite]) -> Result<()> {
        let Some(first) = writes.first() else {
            return Ok(());
        };
        let mut pairs = Vec::with_capacity(writes.len());
        for (position, w) in writes.iter().enumerate() {
            if w.task_id != first.task_id || w.task_path != first.task_path {
                return Err(Error::invalid(format!(
                    "put_pending_writes: writes of one task expected; write {position} belongs to task {:?} (path {:?}), not {:?}",
                    w.task_id, w.task_path, first.task_id
                )));
            }
            let expected = crate::checkpoint::write_idx(&w.channel, position);
            if w.idx != expected {
                return Err(Error::invalid(format!(
                    "put_pending_writes: write {position} (channel {:?}) has index {}, its position gives {expected}",
                    w.channel, w.idx
                )));
            }
            pairs.push((w.channel.clone(), w.value.clone()));
        }
        self.put_writes(config, &pairs, &first.task_id, &first.task_path).await
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
            assert!(saver.get_next_version(None).unwrap().to_string().starts_with("0000"));
        }
    }
}
