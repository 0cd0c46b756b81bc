//! The SQLite side of the engine: rows in, rows out.

use super::error::sql_error;
use super::functions::encode_filter;
use super::pool::ReadKind;
use super::queries::{Cursor, ListQuery as SqlQuery};
use super::rows::{CheckpointRow, StoredTuple, WriteRow};
use super::Inner;
use super::{lease, ops, queries};
use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::encoded::EncodedTuple;
use crate::engine::encoded::EncodedPut;
use crate::engine::import::Import;
use crate::engine::{
    page_size, Backend, FenceToken, Fences, LeaseOp, Link, ListQuery, Page, Put, Removed, RetainRows, SkeletonQuery,
    ThreadPage, ThreadsQuery, WriteBatch,
};
use crate::error::{Error, Result};
use crate::import::ImportMode;
use crate::retention::plan::{Batch, Skeleton};
use crate::saver::{ListThreadsOptions, ThreadKeys};
use crate::serde::{Serializer, TypedBytes, Value};
use crate::version::ChannelVersion;

/// How many rows one `list` page reads.
const LIST_PAGE: usize = 64;

/// A listing: the query and the kind of read its pages are.
pub(crate) struct Prepared {
    query: SqlQuery,
    kind: ReadKind,
}

impl Backend for Inner {
    type Row = Result<StoredTuple>;
    type Cursor = Cursor;
    type Query = Prepared;
    type Encoded = TypedBytes;

    fn check_writable(&self, operation: &'static str) -> Result<()> {
        self.writer.check_writable(operation)
    }

    fn encode(&self, value: &Value) -> Result<TypedBytes> {
        self.serde.dumps_typed(value)
    }

    fn decode(&self, row: Self::Row) -> Result<CheckpointTuple> {
        row.and_then(|stored| stored.decode(self.serde.as_ref()))
    }

    fn serializer(&self) -> &dyn Serializer {
        self.serde.as_ref()
    }

    fn encoded_value(&self, typed: TypedBytes) -> Result<TypedBytes> {
        self.serde.seal(typed)
    }

    fn encoded_row(&self, row: Self::Row) -> Result<EncodedTuple> {
        row.and_then(StoredTuple::into_encoded)
    }

    // the checkpoint is one payload in its row, as Python's saver keeps it
    const STORES_ENCODED_CHECKPOINTS: bool = true;

    async fn put_encoded(&self, put: EncodedPut<'_>) -> Result<()> {
        let row = CheckpointRow {
            thread_id: put.thread_id.to_owned(),
            checkpoint_ns: put.checkpoint_ns.to_owned(),
            checkpoint_id: put.checkpoint_id.to_owned(),
            parent_checkpoint_id: put.parent_id.map(str::to_owned),
            tag: put.checkpoint.tag,
            checkpoint: put.checkpoint.data,
            metadata: put.metadata.to_python_json()?.into_bytes(),
        };
        let fence = put.fence.cloned();
        self.writer
            .write("put", move |conn| {
                lease::check(conn, &row.thread_id, fence.as_ref())?;
                ops::put_checkpoint(conn, &row)
            })
            .await
    }

    async fn get(&self, thread_id: &str, ns: &str, id: Option<&str>) -> Result<Option<Self::Row>> {
        let mut config = CheckpointConfig::new(thread_id).with_ns(ns);
        config.checkpoint_id = id.map(str::to_owned);
        let schema = self.schema;
        let found = self
            .read_point(move |conn| ops::get_tuple(conn, schema, &config))
            .await?;
        Ok(found.map(Ok))
    }

    fn prepare(&self, q: ListQuery) -> Result<Prepared> {
        let filter = if q.filter.is_empty() {
            None
        } else {
            Some(encode_filter(&q.filter)?)
        };
        // a filter across all threads reads every row's metadata
        let kind = if filter.is_some() && q.thread_id.is_none() {
            ReadKind::Scan
        } else {
            ReadKind::Lookup
        };
        Ok(Prepared {
            query: SqlQuery {
                thread_id: q.thread_id,
                checkpoint_ns: q.checkpoint_ns,
                checkpoint_id: q.checkpoint_id,
                before: q.before,
                filter,
            },
            kind,
        })
    }

    async fn page(&self, prepared: &Prepared, cursor: Option<Cursor>, want: usize) -> Result<Page<Self::Row, Cursor>> {
        let query = prepared.query.clone();
        // the filter runs in SQL, exactly
        let size = page_size(want, LIST_PAGE, false);
        let schema = self.schema;
        let (rows, next) = self
            .read_as(prepared.kind, move |conn| {
                ops::list_page(conn, schema, &query, cursor.as_ref(), size)
            })
            .await?;
        // the filter ran in SQL, exactly
        Ok(Page {
            rows,
            next,
            filtered: true,
        })
    }

    async fn put(&self, put: Put<'_>) -> Result<()> {
        self.put_step(put, Vec::new()).await
    }

    async fn put_step(&self, put: Put<'_>, writes: Vec<WriteBatch<'_, TypedBytes>>) -> Result<()> {
        let fence = put.fence.cloned();
        let batches: Vec<(String, Vec<WriteRow>)> = writes
            .into_iter()
            .map(|batch| (batch.checkpoint_id.to_owned(), write_rows(batch)))
            .collect();
        let (thread_id, ns, parent_id, checkpoint, metadata, new_versions) = put.parts();
        // SQLite stores the whole checkpoint, values inline: every value in
        // `channel_values` is kept whatever `new_versions` says. A channel
        // this put did not write and gave no value keeps the value stored
        // at its version by the parent, copied in so that Python reads it
        // too.
        // Off (`fill_from_parent(false)`), the checkpoint is stored as given.
        let mut missing: Vec<(String, ChannelVersion)> = checkpoint
            .channel_versions
            .iter()
            .filter(|(ch, _)| {
                self.fill_from_parent && !checkpoint.channel_values.contains_key(*ch) && !new_versions.contains_key(*ch)
            })
            .map(|(ch, v)| (ch.clone(), v.clone()))
            .collect();
        if let (false, Some(parent)) = (missing.is_empty(), parent_id) {
            // a parent this saver stored recently tells without a read
            // whether it holds any of them
            if let Some(shape) = self.recent.get(thread_id, ns, parent) {
                missing.retain(|(ch, v)| shape.get(ch).is_some_and(|(pv, stored)| *stored && pv == v));
            }
        }
        let mut filled = None;
        if let (false, Some(parent)) = (missing.is_empty(), parent_id) {
            let (serde, thread, ns, parent) = (
                self.serde.clone(),
                thread_id.to_owned(),
                ns.to_owned(),
                parent.to_owned(),
            );
            let found = self
                .read(move |conn| ops::values_at_versions(conn, serde.as_ref(), &thread, &ns, &parent, &missing))
                .await?;
            if !found.is_empty() {
                let mut cp = checkpoint.clone();
                cp.channel_values.extend(found);
                filled = Some(cp);
            }
        }
        let checkpoint = filled.as_ref().unwrap_or(checkpoint);
        let row = CheckpointRow::encode(thread_id, ns, parent_id, checkpoint, metadata, self.serde.as_ref())?;
        // one job: one savepoint of the writer's (group) transaction
        self.writer
            .write("put", move |conn| {
                lease::check(conn, &row.thread_id, fence.as_ref())?;
                for (checkpoint_id, rows) in &batches {
                    ops::put_writes(conn, &row.thread_id, &row.checkpoint_ns, checkpoint_id, rows)?;
                }
                ops::put_checkpoint(conn, &row)
            })
            .await?;
        self.recent.remember(thread_id, ns, checkpoint);
        Ok(())
    }

    async fn put_writes(&self, batch: WriteBatch<'_, TypedBytes>) -> Result<()> {
        let (thread_id, ns, checkpoint_id) = (
            batch.thread_id.to_owned(),
            batch.checkpoint_ns.to_owned(),
            batch.checkpoint_id.to_owned(),
        );
        let fence = batch.fence.cloned();
        let rows = write_rows(batch);
        self.writer
            .write("put_writes", move |conn| {
                lease::check(conn, &thread_id, fence.as_ref())?;
                ops::put_writes(conn, &thread_id, &ns, &checkpoint_id, &rows)
            })
            .await
    }

    async fn import(&self, import: Import<'_, TypedBytes>) -> Result<()> {
        let mut checkpoints = Vec::with_capacity(import.checkpoints.len());
        for cp in import.checkpoints {
            let put = cp.put;
            let row = CheckpointRow::encode(
                put.thread_id,
                put.checkpoint_ns,
                put.parent_id,
                put.checkpoint,
                put.metadata,
                self.serde.as_ref(),
            )?;
            let writes: Vec<WriteRow> = cp
                .writes
                .into_iter()
                .map(|w| WriteRow::new(w.task_id, w.task_path, w.idx, w.channel.to_owned(), w.value))
                .collect();
            checkpoints.push((row, writes));
        }
        let (thread_id, mode, fence) = (import.thread_id.to_owned(), import.mode, import.fence);
        // one write job: one savepoint of the writer's transaction
        self.writer
            .write("import_thread", move |conn| {
                lease::check(conn, &thread_id, fence.as_ref())?;
                if mode == ImportMode::Create {
                    let taken = conn
                        .prepare_cached(queries::THREAD_HAS_CHECKPOINTS_FLAG)
                        .and_then(|mut s| s.query_row([&thread_id], |r| r.get::<_, bool>(0)))
                        .map_err(sql_error)?;
                    if taken {
                        return Err(Error::ThreadExists {
                            thread_id: thread_id.clone(),
                        });
                    }
                }
                // the old thread, or writes left without a checkpoint
                ops::delete_thread(conn, &thread_id)?;
                for (row, writes) in &checkpoints {
                    ops::put_checkpoint(conn, row)?;
                    ops::put_writes(conn, &thread_id, &row.checkpoint_ns, &row.checkpoint_id, writes)?;
                }
                Ok(())
            })
            .await
    }

    async fn delete_threads(&self, thread_ids: &[String]) -> Result<()> {
        let thread_ids = thread_ids.to_vec();
        self.writer
            .write("delete_thread", move |conn| {
                thread_ids.iter().try_for_each(|t| ops::delete_thread(conn, t))
            })
            .await
    }

    const FENCES: bool = true;

    async fn lease(&self, thread_id: &str, writer: &str, lease_ms: u64, op: LeaseOp) -> Result<Option<u64>> {
        let (thread_id, writer) = (thread_id.to_owned(), writer.to_owned());
        self.writer
            .write("lease", move |conn| lease::run(conn, &thread_id, &writer, lease_ms, op))
            .await
    }

    async fn purge_leases(&self, older_than: std::time::Duration) -> Result<u64> {
        let older_than_ms = u64::try_from(older_than.as_millis()).unwrap_or(u64::MAX);
        let mut purged: u64 = 0;
        // one write job per batch: the writer's lock is never held for more
        loop {
            let gone = self
                .writer
                .write("purge_leases", move |conn| lease::purge_batch(conn, older_than_ms))
                .await?;
            purged = purged.saturating_add(u64::try_from(gone).unwrap_or(u64::MAX));
            if gone < lease::PURGE_BATCH {
                return Ok(purged);
            }
        }
    }

    async fn delete_thread_fenced(&self, thread_id: &str, fence: &FenceToken) -> Result<()> {
        let (thread_id, fence) = (thread_id.to_owned(), fence.clone());
        self.writer
            .write("delete_thread", move |conn| {
                lease::check(conn, &thread_id, Some(&fence))?;
                ops::delete_thread(conn, &thread_id)
            })
            .await
    }

    async fn delete_for_runs(&self, run_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        let (run_ids, fences) = (run_ids.to_vec(), fences.cloned());
        self.writer
            .write("delete_for_runs", move |conn| {
                if let Some(fences) = &fences {
                    // the threads the runs touch, each lease checked (and
                    // extended) in this job, before anything is removed
                    for thread in ops::run_threads(conn, &run_ids)? {
                        lease::check(conn, &thread, Some(&fences.token(&thread)?))?;
                    }
                }
                ops::delete_for_runs(conn, &run_ids)
            })
            .await
    }

    async fn copy_thread(&self, source: &str, target: &str, fence: Option<&FenceToken>) -> Result<()> {
        let (source, target, fence) = (source.to_owned(), target.to_owned(), fence.cloned());
        self.writer
            .write("copy_thread", move |conn| {
                lease::check(conn, &target, fence.as_ref())?;
                ops::copy_thread(conn, &source, &target)
            })
            .await
    }

    async fn prune_keep_latest(&self, thread_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        let (thread_ids, fences) = (thread_ids.to_vec(), fences.cloned());
        let serde = self.serde.clone();
        self.writer
            .write("prune", move |conn| {
                if let Some(fences) = &fences {
                    for thread in &thread_ids {
                        lease::check(conn, thread, Some(&fences.token(thread)?))?;
                    }
                }
                ops::prune_keep_latest_all(conn, serde.as_ref(), &thread_ids)
            })
            .await
    }

    async fn ancestors(&self, thread_id: &str, ns: &str, id: Option<&str>, channels: &[String]) -> Result<Vec<Link>> {
        let (thread_id, ns, id) = (thread_id.to_owned(), ns.to_owned(), id.map(str::to_owned));
        let channels = channels.to_vec();
        let serde = self.serde.clone();
        let schema = self.schema;
        self.read(move |conn| {
            ops::ancestors(
                conn,
                serde.as_ref(),
                schema,
                (&thread_id, &ns, id.as_deref()),
                &channels,
            )
        })
        .await
    }

    async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        let (schema, thread) = (self.schema, thread_id.to_owned());
        self.read(move |conn| ops::thread_keys(conn, schema, &thread)).await
    }

    async fn threads_page(&self, query: ThreadsQuery<'_>) -> Result<ThreadPage> {
        let options = ListThreadsOptions {
            filter: query.filter.clone(),
            after: query.after.map(str::to_owned),
            limit: Some(query.want),
        };
        let threads = self.read(move |conn| ops::list_threads(conn, &options)).await?;
        // one statement answers the whole request, filter included
        Ok(ThreadPage {
            threads,
            next: None,
            filtered: true,
        })
    }
}

/// The rows of a write batch.
fn write_rows(batch: WriteBatch<'_, TypedBytes>) -> Vec<WriteRow> {
    batch
        .writes
        .into_iter()
        .map(|w| WriteRow::new(batch.task_id, batch.task_path, w.idx, w.channel, w.value))
        .collect()
}

/// Checkpoints a step of a retention batch removes (a few hundred
/// microseconds of page updates).
const RETAIN_STEP: usize = 8;

impl RetainRows for Inner {
    async fn skeletons(&self, query: SkeletonQuery<'_>) -> Result<Vec<Skeleton>> {
        let (thread, mark_key) = (query.thread_id.to_owned(), query.mark_key.to_owned());
        let after = query.after.map(|(ns, id)| (ns.to_owned(), id.to_owned()));
        let serde = self.serde.clone();
        self.read(move |conn| {
            let query = SkeletonQuery {
                thread_id: &thread,
                after: after.as_ref().map(|(ns, id)| (ns.as_str(), id.as_str())),
                limit: query.limit,
                mark_key: &mark_key,
            };
            ops::skeletons(conn, serde.as_ref(), query)
        })
        .await
    }

    /// A sliced job of the writer (its `write_sliced`): steps of
    /// [`RETAIN_STEP`] checkpoints, newest first, so that a checkpoint still
    /// to go never points at a parent already gone; a slice commits its
    /// steps together once no other write waits. Every step checks the
    /// lease and leaves the store as a smaller batch of the plan would.
    async fn remove_batch(&self, thread_id: &str, batch: &Batch, fence: Option<&FenceToken>) -> Result<Removed> {
        let (thread, batch, fence) = (thread_id.to_owned(), batch.clone(), fence.cloned());
        let mut end = batch.ids.len();
        let mut removed = Removed::default();
        self.writer
            .write_sliced("retain", move |conn| {
                lease::check(conn, &thread, fence.as_ref())?;
                let start = end.saturating_sub(RETAIN_STEP);
                let step =
                    ops::remove_checkpoints(conn, &thread, &batch.ns, &batch.ids[start..end], &batch.clear_parent)?;
                removed.checkpoints += step.checkpoints;
                removed.writes += step.writes;
                end = start;
                Ok((end == 0).then_some(removed))
            })
            .await
    }
}
