//! The saver engine: [`CheckpointSaver`] implemented once, over a small
//! crate-private [`Backend`] trait that only moves rows.
//!
//! Everything the `# Contract` of [`CheckpointSaver`] decides lives here:
//! tracing, the input checks of [`crate::limits`], write indexing and the
//! special-channel rule, paging with the limit and the metadata-filter
//! fallback, delta-history assembly and the keep-latest prune rule
//! ([`prune`]). A backend answers batch questions (a page of checkpoint rows
//! after a cursor, the ancestors of a checkpoint, a write batch to store) in
//! whatever way its storage does best, and decodes its own rows.
//!
//! The public savers (`InMemorySaver`, `SqliteSaver`, `PostgresSaver`) are
//! thin types holding an [`Engine`] over their backend.

pub(crate) mod atomic;
mod calls;
pub(crate) mod delta;
pub(crate) mod encoded;
pub(crate) mod fence;
pub(crate) mod import;
mod list;
pub(crate) mod prune;
pub(crate) mod retain;
#[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))]
pub(crate) mod values;

use std::future::Future;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::checkpoint::{CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::encoded::EncodedTuple;
use crate::error::Result;
use crate::limits;
use crate::saver::{
    metadata_matches, op_span, traced, Capabilities, CheckpointStream, DeltaChannelHistory, ListOptions,
    ListThreadsOptions, Operation, PruneStrategy, ThreadInfo, ThreadKeys,
};
use crate::serde::{Serializer, TypedBytes, Value};

pub(crate) use calls::{BatchWrite, ListQuery, Page, Put, ThreadPage, ThreadsQuery, WriteBatch, WritesCall};
pub(crate) use delta::Link;
pub(crate) use fence::{FenceToken, Fences, LeaseOp};
pub(crate) use list::page_size;
pub(crate) use retain::{Removed, RetainRows, SkeletonQuery};

/// The config `put` returns: the caller's thread and namespace, the
/// checkpoint stored.
fn saved_config(thread_id: &str, ns: &str, checkpoint_id: &str) -> CheckpointConfig {
    CheckpointConfig {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: Some(ns.to_owned()),
        checkpoint_id: Some(checkpoint_id.to_owned()),
    }
}

/// Pending writes in the contract's order, (task_path, task_id, idx).
pub(crate) fn sort_writes(writes: &mut [PendingWrite]) {
    sort_writes_by(writes, |w| (&w.task_path, &w.task_id, w.idx));
}

/// Writes in any form in the contract's order, `key` giving each one's
/// (task_path, task_id, idx).
pub(crate) fn sort_writes_by<T>(writes: &mut [T], key: impl Fn(&T) -> (&str, &str, i64)) {
    writes.sort_by(|a, b| key(a).cmp(&key(b)));
}

/// The tracing span of one operation of the engine, named by its
/// [`Operation`].
fn span(op: Operation, thread_id: &str, ns: &str, checkpoint_id: Option<&str>) -> tracing::Span {
    op_span(op.name(), thread_id, ns, checkpoint_id)
}

/// A row decoded by its backend, then its pending writes put in the
/// contract's order: the one place that orders them.
pub(crate) fn decode<B: Backend + ?Sized>(backend: &B, row: B::Row) -> Result<CheckpointTuple> {
    let mut tuple = backend.decode(row)?;
    sort_writes(&mut tuple.pending_writes);
    Ok(tuple)
}

/// The storage side of a saver: batch operations on rows, nothing of the
/// contract's rules. Implemented by each backend (`memory`, `sqlite`,
/// `postgres`); [`Engine`] turns one into a [`CheckpointSaver`].
pub(crate) trait Backend: retain::RetainRows + Send + Sync + 'static {
    /// A checkpoint as read, decoded by [`Backend::decode`] when the caller
    /// takes it (so a listing decodes one row at a time, outside any lock).
    type Row: Send + 'static;
    /// A position in a listing.
    type Cursor: Send + 'static;
    /// A [`ListQuery`] in the backend's own terms (SQL text, an index scope).
    type Query: Send + Sync + 'static;
    /// A value as the backend stores it.
    type Encoded: Send + Sync;

    /// Which extended operations are implemented.
    fn capabilities(&self) -> Capabilities {
        Capabilities::all()
    }

    /// `Ok` when the store takes writes; otherwise the error every write
    /// operation answers before it looks at its arguments (a SQLite file
    /// opened read-only), so that each answers the same.
    fn check_writable(&self, _operation: &'static str) -> Result<()> {
        Ok(())
    }

    /// Encodes a write's value (or refuses it as the serializer would).
    fn encode(&self, value: &Value) -> Result<Self::Encoded>;

    /// Decodes a row into a tuple, pending writes in any order (the engine
    /// sorts them).
    fn decode(&self, row: Self::Row) -> Result<CheckpointTuple>;

    /// The serializer values are stored with.
    fn serializer(&self) -> &dyn Serializer;

    /// A write's value its caller encoded (checked, not sealed), as the
    /// backend stores it. Default: decoded, then [`Backend::encode`]d; a
    /// backend that stores the serializer's bytes seals them instead.
    fn encoded_value(&self, typed: TypedBytes) -> Result<Self::Encoded> {
        self.encode(&encoded::open(self.serializer(), &typed)?)
    }

    /// A row with every value as bytes. Default: decoded, then encoded by
    /// `JsonPlusSerializer`; a backend that stores a checkpoint as one
    /// payload hands its bytes out as stored.
    fn encoded_row(&self, row: Self::Row) -> Result<EncodedTuple> {
        EncodedTuple::from_tuple(&decode(self, row)?)
    }

    /// Whether `row`'s metadata satisfies `filter` (a filter its page did
    /// not apply), read from the metadata alone, so that an encoded listing
    /// does not decode the rows it drops. `None`: the backend cannot tell
    /// without decoding the row (or its metadata does not read back; the
    /// row is then decoded, which reports it).
    fn row_matches(&self, _row: &Self::Row, _filter: &IndexMap<String, Value>) -> Option<bool> {
        None
    }

    /// Whether [`Backend::put_encoded`] stores a checkpoint's bytes; when
    /// not, the engine decodes them and calls [`Backend::put`].
    const STORES_ENCODED_CHECKPOINTS: bool = false;

    /// Stores a checkpoint as the bytes given (sealed), when
    /// [`Backend::STORES_ENCODED_CHECKPOINTS`].
    fn put_encoded(&self, _put: encoded::EncodedPut<'_>) -> impl Future<Output = Result<()>> + Send {
        std::future::ready(Err(crate::Error::Unsupported {
            operation: "storing an encoded checkpoint as given",
            implementer: std::any::type_name::<Self>(),
        }))
    }

    /// Whether [`Backend::put_split`] stores a checkpoint with channel
    /// values split from a caller's bytes; when not, the engine decodes
    /// them and calls [`Backend::put`].
    const STORES_SPLIT_VALUES: bool = false;

    /// [`Backend::put`] of a checkpoint whose channel values are `values`
    /// (its own are empty), when [`Backend::STORES_SPLIT_VALUES`]: stored
    /// as `put` stores them (see [`values::Slot::typed`]).
    fn put_split(&self, _put: Put<'_>, _values: &values::SplitValues) -> impl Future<Output = Result<()>> + Send {
        std::future::ready(Err(crate::Error::Unsupported {
            operation: "storing split channel values",
            implementer: std::any::type_name::<Self>(),
        }))
    }

    /// Stores a step's write batches (against the put's parent) and the
    /// put's checkpoint in one atomic step: all of them or none, after a
    /// crash too. Each is stored as [`Backend::put_writes`] and
    /// [`Backend::put`] would store it, fence included.
    fn put_step(
        &self,
        _put: Put<'_>,
        _writes: Vec<WriteBatch<'_, Self::Encoded>>,
    ) -> impl Future<Output = Result<()>> + Send {
        std::future::ready(Err(crate::Error::Unsupported {
            operation: "put_step_with_writes",
            implementer: std::any::type_name::<Self>(),
        }))
    }

    /// Whether the backend checks the [`FenceToken`] of `put`, `put_writes`,
    /// `put_encoded`, `put_split` and [`Backend::delete_thread_fenced`] on
    /// the store's side of the write, and implements [`Backend::lease`]. A
    /// backend that does not is never fenced (the engine refuses it).
    const FENCES: bool = false;

    /// Runs a lease operation of `writer` on `thread_id` atomically on the
    /// store, on the store's clock: `Some(epoch)` when granted (acquired,
    /// renewed, released), `None` when another writer or epoch holds it.
    fn lease(
        &self,
        _thread_id: &str,
        _writer: &str,
        _lease_ms: u64,
        _op: LeaseOp,
    ) -> impl Future<Output = Result<Option<u64>>> + Send {
        std::future::ready(Err(crate::Error::Unsupported {
            operation: "fencing",
            implementer: std::any::type_name::<Self>(),
        }))
    }

    /// Removes the leases whose deadline passed more than `older_than` ago
    /// (on the store's clock) of threads that hold nothing (no checkpoint,
    /// no write), in bounded batches; how many went. A later lease of such
    /// a thread starts above every epoch it had (see `docs/design.md`,
    /// *Fencing*, *Cleaning up leases*).
    fn purge_leases(&self, _older_than: std::time::Duration) -> impl Future<Output = Result<u64>> + Send {
        std::future::ready(Err(crate::Error::Unsupported {
            operation: "purge_leases",
            implementer: std::any::type_name::<Self>(),
        }))
    }

    /// Removes a thread as [`Backend::delete_threads`] does, when `fence`
    /// holds its lease (checked in the same transaction or script; the
    /// lease itself stays), else [`crate::Error::Fenced`] and nothing removed.
    fn delete_thread_fenced(&self, _thread_id: &str, _fence: &FenceToken) -> impl Future<Output = Result<()>> + Send {
        std::future::ready(Err(crate::Error::Unsupported {
            operation: "fencing",
            implementer: std::any::type_name::<Self>(),
        }))
    }

    /// The checkpoint `id` of (thread, ns), or the latest there.
    fn get(
        &self,
        thread_id: &str,
        ns: &str,
        id: Option<&str>,
    ) -> impl Future<Output = Result<Option<Self::Row>>> + Send;

    /// Prepares a listing.
    fn prepare(&self, query: ListQuery) -> Result<Self::Query>;

    /// The next page of `query` after `cursor` (`None`: from the start),
    /// at most `want` rows that satisfy the filter (a backend may return fewer).
    fn page(
        &self,
        query: &Self::Query,
        cursor: Option<Self::Cursor>,
        want: usize,
    ) -> impl Future<Output = Result<Page<Self::Row, Self::Cursor>>> + Send;

    /// Stores a checkpoint.
    fn put(&self, put: Put<'_>) -> impl Future<Output = Result<()>> + Send;

    /// Stores a write batch, all of it or none.
    fn put_writes(&self, batch: WriteBatch<'_, Self::Encoded>) -> impl Future<Output = Result<()>> + Send;

    /// Removes every checkpoint, write and value of the threads.
    fn delete_threads(&self, thread_ids: &[String]) -> impl Future<Output = Result<()>> + Send;

    /// Writes a checked thread (see [`import::Import`]) whole or not at all:
    /// with [`ImportMode::Create`](crate::import::ImportMode::Create) fails
    /// with [`crate::Error::ThreadExists`] when the thread has a checkpoint;
    /// otherwise the thread's old rows (or writes left without a checkpoint)
    /// go in the same atomic step.
    fn import(&self, import: import::Import<'_, Self::Encoded>) -> impl Future<Output = Result<()>> + Send;

    /// Removes the checkpoints whose metadata `run_id` is one of `run_ids`
    /// (never empty), with their writes. Fenced (`fences`): only from
    /// threads the writer took, each thread's removal checked against its
    /// token in the transaction or script that removes it; a thread with
    /// checkpoints of the runs that the writer never took refuses the call
    /// ([`crate::Error::Fenced`]) before anything is removed.
    fn delete_for_runs(&self, run_ids: &[String], fences: Option<&Fences>) -> impl Future<Output = Result<()>> + Send;

    /// Copies a thread whole under another id, or fails with
    /// [`crate::Error::ThreadExists`] when the target holds checkpoints;
    /// fenced, only when `fence` holds the target's lease (checked with the
    /// step that makes the copy visible).
    fn copy_thread(
        &self,
        source: &str,
        target: &str,
        fence: Option<&FenceToken>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Keeps, per namespace of each thread, what [`prune::plan`] keeps;
    /// fenced, each thread's change checked against its token (in each of
    /// its batches) in the transaction or script that applies it.
    fn prune_keep_latest(
        &self,
        thread_ids: &[String],
        fences: Option<&Fences>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The ancestors of the checkpoint `id` of (thread, ns) (or of the
    /// latest), nearest first, each with the values it stores and the writes
    /// saved against it on `channels` (distinct, never empty). The walk may
    /// stop once every channel has a stored value, and stops at a repeated id.
    fn ancestors(
        &self,
        thread_id: &str,
        ns: &str,
        id: Option<&str>,
        channels: &[String],
    ) -> impl Future<Output = Result<Vec<Link>>> + Send;

    /// The keys of what a thread stores, in any order.
    fn thread_keys(&self, thread_id: &str) -> impl Future<Output = Result<ThreadKeys>> + Send;

    /// The threads `query` asks for, each with its latest checkpoint.
    fn threads_page(&self, query: ThreadsQuery<'_>) -> impl Future<Output = Result<ThreadPage>> + Send;
}

/// The one [`CheckpointSaver`] implementation, over a [`Backend`].
pub(crate) struct Engine<B> {
    backend: Arc<B>,
    /// The writer of a fenced saver (`None`: LangGraph's behaviour).
    fence: Option<Arc<fence::Fencing>>,
}

impl<B> Engine<B> {
    pub(crate) fn new(backend: B) -> Self {
        Engine {
            backend: Arc::new(backend),
            fence: None,
        }
    }

    pub(crate) fn backend(&self) -> &B {
        &self.backend
    }
}

impl<B> Clone for Engine<B> {
    fn clone(&self) -> Self {
        Engine {
            backend: self.backend.clone(),
            fence: self.fence.clone(),
        }
    }
}

impl<B> std::fmt::Debug for Engine<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Engine")
    }
}

/// The operations of [`CheckpointSaver`], as plain (unboxed) futures: the
/// public savers' trait impls (`saver_over_engine!`) await them directly, so
/// a call allocates one boxed future, as a hand-written impl would.
impl<B: Backend> Engine<B> {
    pub(crate) async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.get_as(config, decode).await
    }

    /// The checkpoint a `get_tuple` config names, read by `read` (decoded,
    /// or as bytes).
    async fn get_as<T>(
        &self,
        config: &CheckpointConfig,
        read: impl FnOnce(&B, B::Row) -> Result<T>,
    ) -> Result<Option<T>> {
        let (ns, id) = (config.ns(), config.checkpoint_id());
        traced(span(Operation::GetTuple, &config.thread_id, ns, id), async {
            let row = self.backend.get(&config.thread_id, ns, id).await?;
            row.map(|r| read(&self.backend, r)).transpose()
        })
        .await
    }

    pub(crate) fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> CheckpointStream {
        list::stream(self.backend.clone(), config, options)
    }

    pub(crate) async fn put(&self, put: Put<'_>) -> Result<CheckpointConfig> {
        let (thread_id, ns, checkpoint) = (put.thread_id, put.checkpoint_ns, put.checkpoint);
        traced(span(Operation::Put, thread_id, ns, Some(&checkpoint.id)), async {
            self.backend.check_writable(Operation::Put.name())?;
            limits::check_put(checkpoint, put.metadata)?;
            let token = self.token(thread_id).await?;
            let put = Put {
                fence: token.as_ref(),
                ..put
            };
            self.backend.put(put).await?;
            Ok(saved_config(thread_id, ns, &checkpoint.id))
        })
        .await
    }

    pub(crate) async fn put_writes(&self, call: WritesCall<'_, &[(String, Value)]>) -> Result<()> {
        let config = call.config;
        let span = span(
            Operation::PutWrites,
            &config.thread_id,
            config.ns(),
            config.checkpoint_id(),
        );
        traced(span, async {
            self.backend.check_writable(Operation::PutWrites.name())?;
            let checkpoint_id = limits::check_put_writes(config, call.writes)?;
            if call.writes.is_empty() {
                return Ok(());
            }
            let encoded = call
                .writes
                .iter()
                .map(|(channel, value)| Ok((channel.clone(), self.backend.encode(value)?)))
                .collect::<Result<Vec<_>>>()?;
            let token = self.token(&config.thread_id).await?;
            let mut batch = call.batch(checkpoint_id, encoded);
            batch.fence = token.as_ref();
            self.backend.put_writes(batch).await
        })
        .await
    }

    pub(crate) async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        traced(span(Operation::DeleteThread, thread_id, "", None), async {
            self.backend.check_writable(Operation::DeleteThread.name())?;
            if let Some(token) = self.token(thread_id).await? {
                return self.backend.delete_thread_fenced(thread_id, &token).await;
            }
            self.backend
                .delete_threads(std::slice::from_ref(&thread_id.to_owned()))
                .await
        })
        .await
    }

    pub(crate) fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    pub(crate) async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        traced(span(Operation::DeleteForRuns, "", "", None), async {
            self.backend.check_writable(Operation::DeleteForRuns.name())?;
            if run_ids.is_empty() {
                return Ok(());
            }
            self.backend.delete_for_runs(run_ids, self.fences().as_ref()).await
        })
        .await
    }

    pub(crate) async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        traced(span(Operation::CopyThread, source, "", None), async {
            self.backend.check_writable(Operation::CopyThread.name())?;
            let token = self.token(target).await?;
            self.backend.copy_thread(source, target, token.as_ref()).await
        })
        .await
    }

    pub(crate) async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let first = thread_ids.first().map_or("", String::as_str);
        traced(span(Operation::Prune, first, "", None), async {
            self.backend.check_writable(Operation::Prune.name())?;
            if thread_ids.is_empty() {
                return Ok(());
            }
            let fences = self.fences_taking(thread_ids).await?;
            match (strategy, &fences) {
                (PruneStrategy::Delete, None) => self.backend.delete_threads(thread_ids).await,
                (PruneStrategy::Delete, Some(fences)) => {
                    for thread in thread_ids {
                        self.backend
                            .delete_thread_fenced(thread, &fences.token(thread)?)
                            .await?;
                    }
                    Ok(())
                }
                (PruneStrategy::KeepLatest, _) => self.backend.prune_keep_latest(thread_ids, fences.as_ref()).await,
            }
        })
        .await
    }

    pub(crate) async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<IndexMap<String, DeltaChannelHistory>> {
        let (ns, id) = (config.ns(), config.checkpoint_id());
        let span = span(Operation::DeltaChannelHistory, &config.thread_id, ns, id);
        traced(span, async {
            let mut out: IndexMap<String, DeltaChannelHistory> = channels
                .iter()
                .map(|c| (c.clone(), DeltaChannelHistory::default()))
                .collect();
            if out.is_empty() {
                return Ok(out);
            }
            let names: Vec<String> = out.keys().cloned().collect();
            let links = self.backend.ancestors(&config.thread_id, ns, id, &names).await?;
            delta::assemble(&mut out, links);
            Ok(out)
        })
        .await
    }

    pub(crate) async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        traced(span(Operation::ThreadKeys, thread_id, "", None), async {
            let mut keys = self.backend.thread_keys(thread_id).await?;
            keys.sort();
            Ok(keys)
        })
        .await
    }

    pub(crate) async fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
        traced(span(Operation::ListThreads, "", "", None), async move {
            limits::check_filter(&options.filter)?;
            let limit = options.limit.unwrap_or(usize::MAX);
            let mut out = Vec::new();
            let mut after = options.after.clone();
            while out.len() < limit {
                let page = self
                    .backend
                    .threads_page(ThreadsQuery {
                        after: after.as_deref(),
                        want: limit - out.len(),
                        filter: &options.filter,
                    })
                    .await?;
                for info in page.threads {
                    if page.filtered || metadata_matches(&info.metadata, &options.filter) {
                        out.push(info);
                        if out.len() == limit {
                            break;
                        }
                    }
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            Ok(out)
        })
        .await
    }
}

/// The [`Backend::put`] and [`Backend::put_split`] of a backend that
/// stores both through its inherent `put_with(put, values)`: the
/// checkpoint's own values, or the ones split from its bytes.
#[cfg(any(feature = "postgres", feature = "redis"))]
macro_rules! put_through_values {
    () => {
        async fn put(&self, put: $crate::engine::Put<'_>) -> $crate::error::Result<()> {
            let values = put.values();
            self.put_with(put, values).await
        }

        const STORES_SPLIT_VALUES: bool = true;

        async fn put_split(
            &self,
            put: $crate::engine::Put<'_>,
            values: &$crate::engine::values::SplitValues,
        ) -> $crate::error::Result<()> {
            self.put_with(put, $crate::engine::values::Values::Split(values))
                .await
        }
    };
}
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) use put_through_values;

/// Implements [`CheckpointSaver`] for a public saver type by forwarding every
/// method to its engine field (the lint makes forgetting one an error);
/// versions are the default scheme.
macro_rules! saver_over_engine {
    ($saver:ty, $field:ident) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl $crate::saver::CheckpointSaver for $saver {
            async fn get_tuple(
                &self,
                config: &$crate::config::CheckpointConfig,
            ) -> $crate::error::Result<Option<$crate::checkpoint::CheckpointTuple>> {
                self.$field.get_tuple(config).await
            }

            fn list(
                &self,
                config: Option<$crate::config::CheckpointConfig>,
                options: $crate::saver::ListOptions,
            ) -> $crate::saver::CheckpointStream {
                self.$field.list(config, options)
            }

            async fn put(
                &self,
                config: &$crate::config::CheckpointConfig,
                checkpoint: &$crate::checkpoint::Checkpoint,
                metadata: &$crate::checkpoint::CheckpointMetadata,
                new_versions: &$crate::checkpoint::ChannelVersions,
            ) -> $crate::error::Result<$crate::config::CheckpointConfig> {
                let put = $crate::engine::Put::new(config, checkpoint, metadata, new_versions);
                self.$field.put(put).await
            }

            async fn put_writes(
                &self,
                config: &$crate::config::CheckpointConfig,
                writes: &[(String, $crate::serde::Value)],
                task_id: &str,
                task_path: &str,
            ) -> $crate::error::Result<()> {
                let call = $crate::engine::WritesCall {
                    config,
                    writes,
                    task_id,
                    task_path,
                };
                self.$field.put_writes(call).await
            }

            async fn delete_thread(&self, thread_id: &str) -> $crate::error::Result<()> {
                self.$field.delete_thread(thread_id).await
            }

            fn capabilities(&self) -> $crate::saver::Capabilities {
                self.$field.capabilities()
            }

            async fn delete_for_runs(&self, run_ids: &[String]) -> $crate::error::Result<()> {
                self.$field.delete_for_runs(run_ids).await
            }

            async fn copy_thread(&self, source: &str, target: &str) -> $crate::error::Result<()> {
                self.$field.copy_thread(source, target).await
            }

            async fn prune(
                &self,
                thread_ids: &[String],
                strategy: $crate::saver::PruneStrategy,
            ) -> $crate::error::Result<()> {
                self.$field.prune(thread_ids, strategy).await
            }

            async fn retain(
                &self,
                policy: &$crate::retention::RetentionPolicy,
                options: $crate::retention::RetainOptions,
            ) -> $crate::error::Result<$crate::retention::RetentionReport> {
                self.$field.retain(policy, options).await
            }

            async fn get_delta_channel_history(
                &self,
                config: &$crate::config::CheckpointConfig,
                channels: &[String],
            ) -> $crate::error::Result<indexmap::IndexMap<String, $crate::saver::DeltaChannelHistory>> {
                self.$field.get_delta_channel_history(config, channels).await
            }

            async fn thread_keys(&self, thread_id: &str) -> $crate::error::Result<$crate::saver::ThreadKeys> {
                self.$field.thread_keys(thread_id).await
            }

            async fn list_threads(
                &self,
                options: $crate::saver::ListThreadsOptions,
            ) -> $crate::error::Result<Vec<$crate::saver::ThreadInfo>> {
                self.$field.list_threads(options).await
            }

            fn as_encoded(&self) -> Option<&dyn $crate::encoded::EncodedSaver> {
                Some(self)
            }

            fn as_fenceable(&self) -> Option<&dyn $crate::fence::Fenceable> {
                Some(self)
            }

            fn get_next_version(
                &self,
                current: Option<&$crate::version::ChannelVersion>,
            ) -> $crate::error::Result<$crate::version::ChannelVersion> {
                $crate::version::next_version(current)
            }
        }

        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl $crate::encoded::EncodedSaver for $saver {
            async fn put_encoded(
                &self,
                config: &$crate::config::CheckpointConfig,
                checkpoint_id: &str,
                checkpoint: $crate::serde::TypedBytes,
                metadata: &$crate::checkpoint::CheckpointMetadata,
                new_versions: &$crate::checkpoint::ChannelVersions,
            ) -> $crate::error::Result<$crate::config::CheckpointConfig> {
                self.$field
                    .put_encoded(config, checkpoint_id, checkpoint, metadata, new_versions)
                    .await
            }

            async fn put_writes_encoded(
                &self,
                config: &$crate::config::CheckpointConfig,
                writes: Vec<(String, $crate::serde::TypedBytes)>,
                task_id: &str,
                task_path: &str,
            ) -> $crate::error::Result<()> {
                let call = $crate::engine::WritesCall {
                    config,
                    writes,
                    task_id,
                    task_path,
                };
                self.$field.put_writes_encoded(call).await
            }

            async fn get_tuple_encoded(
                &self,
                config: &$crate::config::CheckpointConfig,
            ) -> $crate::error::Result<Option<$crate::encoded::EncodedTuple>> {
                self.$field.get_tuple_encoded(config).await
            }

            fn list_encoded(
                &self,
                config: Option<$crate::config::CheckpointConfig>,
                options: $crate::saver::ListOptions,
            ) -> $crate::encoded::EncodedStream {
                self.$field.list_encoded(config, options)
            }
        }

        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl $crate::fence::Fenceable for $saver {
            fn fenced_saver(
                &self,
                fence: $crate::fence::Fence,
            ) -> $crate::error::Result<std::sync::Arc<dyn $crate::fence::Fenceable>> {
                Ok(std::sync::Arc::new(self.fenced(fence)?))
            }

            async fn acquire(&self, thread_id: &str) -> $crate::error::Result<$crate::fence::Lease> {
                self.$field.acquire(thread_id).await
            }

            async fn renew(&self, thread_id: &str) -> $crate::error::Result<$crate::fence::Lease> {
                self.$field.renew(thread_id).await
            }

            async fn release(&self, thread_id: &str) -> $crate::error::Result<bool> {
                self.$field.release(thread_id).await
            }

            async fn purge_leases(&self, older_than: std::time::Duration) -> $crate::error::Result<u64> {
                self.$field.purge_leases(older_than).await
            }
        }

        $crate::engine::fence::fencing_over_engine!($saver, $field);
        $crate::engine::retain::retention_over_engine!($saver, $field);

        impl $saver {
            /// Writes every checkpoint and write of `thread` at once: after a
            /// crash (or a lost connection) the store has all of them or none,
            /// and a reader sees the thread as it was or whole. With
            /// [`ImportMode::Replace`]($crate::import::ImportMode::Replace)
            /// the thread's old rows go in the same atomic step. Values are
            /// stored as given (nothing is filled in from a parent), writes
            /// keep their task path and index, and a write key (task id,
            /// index) given twice keeps the first value, or the last for a
            /// special channel, as `put_writes` does. Every value is checked
            /// as `put` and `put_writes` check theirs.
            ///
            /// The rows are encoded before anything is written; memory grows
            /// with the size of the thread.
            ///
            /// # Errors
            /// [`Error::InvalidInput`]($crate::Error::InvalidInput) for an
            /// empty thread or checkpoint id, and for what the store cannot
            /// key (as `put` refuses it); [`Error::ThreadExists`]($crate::Error::ThreadExists)
            /// with [`ImportMode::Create`]($crate::import::ImportMode::Create)
            /// when the thread has a checkpoint (writes left without a
            /// checkpoint are replaced); [`Error::Serde`]($crate::Error::Serde)
            /// when a value is too deep or cannot be serialized; storage
            /// failures (then nothing was written).
            pub async fn import_thread(
                &self,
                thread: &$crate::import::ThreadImport,
                mode: $crate::import::ImportMode,
            ) -> $crate::error::Result<()> {
                self.$field.import_thread(thread, mode).await
            }
        }
    };
}
pub(crate) use saver_over_engine;
