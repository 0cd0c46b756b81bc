//! The PostgreSQL side of the engine: rows in, rows out, every call under
//! the call timeout, reads retried once on a broken connection.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;

use deadpool_postgres::Object;
use futures::TryStreamExt;
use indexmap::IndexMap;
use tokio_postgres::types::{ToSql, Type};

use super::conn::{query_stream, query_tx, read_retrying, Param, Pg};
use super::error::DbError;
use super::group::Write;
use super::lease::check_lease;
use super::list::{list_page, prefilter, ListPage, PgCursor, PgQuery};
use super::read::{StoredRow, TupleRows};
use super::rows::{get, WalkStep};
use super::{jsonb, queries, rows};
use crate::checkpoint::CheckpointTuple;
use crate::encoded::EncodedTuple;
use crate::engine::import::Import;
use crate::engine::values::Values;
use crate::engine::{
    page_size, prune, put_through_values, Backend, FenceToken, Fences, LeaseOp, Link, ListQuery, Page, Put, ThreadPage,
    ThreadsQuery, WriteBatch,
};
use crate::error::{Error, Result};
use crate::import::ImportMode;
use crate::saver::{metadata_matches, ThreadInfo, ThreadKeys};
use crate::serde::{Serializer, TypedBytes, Value};

/// Rows fetched per page by `list` and `list_threads`.
const PAGE: usize = 100;

pub(crate) fn has_nul(parts: &[&str]) -> bool {
    parts.iter().any(|p| p.contains('\0'))
}

/// Runs a write under the call timeout: `sent` is set just before what may
/// commit goes out, so a timeout after it says the outcome is unknown.
macro_rules! write_call {
    ($pg:expr, $op:literal, |$sent:ident| $body:expr) => {{
        let $sent = AtomicBool::new(false);
        let sent_ref = &$sent;
        $pg.timed($op, Some(sent_ref), async {
            let run = || async { $body };
            run().await.map_err(|e: DbError| $pg.fail(e, $op, false))
        })
        .await
    }};
}
pub(super) use write_call;

impl Backend for Pg {
    type Row = StoredRow;
    type Cursor = PgCursor;
    type Query = PgQuery;
    type Encoded = TypedBytes;

    fn encode(&self, value: &Value) -> Result<TypedBytes> {
        let typed = self.serde().dumps_typed(value)?;
        jsonb::check_text(&typed.tag, "serializer tag")?;
        Ok(typed)
    }

    fn decode(&self, row: StoredRow) -> Result<CheckpointTuple> {
        row.decode(self.serde())
    }

    fn encoded_row(&self, row: StoredRow) -> Result<EncodedTuple> {
        row.encoded(self.serde())
    }

    fn row_matches(&self, row: &StoredRow, filter: &IndexMap<String, Value>) -> Option<bool> {
        Some(metadata_matches(row.metadata(), filter))
    }

    fn serializer(&self) -> &dyn Serializer {
        self.serde()
    }

    fn encoded_value(&self, typed: TypedBytes) -> Result<TypedBytes> {
        let typed = self.serde().seal(typed)?;
        jsonb::check_text(&typed.tag, "serializer tag")?;
        Ok(typed)
    }

    async fn get(&self, thread_id: &str, ns: &str, id: Option<&str>) -> Result<Option<StoredRow>> {
        if has_nul(&[thread_id, ns, id.unwrap_or("")]) {
            return Ok(None); // nothing stored can have such a key
        }
        self.timed("get_tuple", None, async {
            read_retrying!(self, "get_tuple", self.get_tuple_once(thread_id, ns, id))
        })
        .await
    }

    fn prepare(&self, query: ListQuery) -> Result<PgQuery> {
        let impossible = query.thread_id.is_some()
            && has_nul(&[
                query.thread_id.as_deref().unwrap_or(""),
                query.checkpoint_ns.as_deref().unwrap_or(""),
                query.checkpoint_id.as_deref().unwrap_or(""),
            ])
            || query.before.as_deref().is_some_and(|b| b.contains('\0'));
        Ok(PgQuery {
            prefilter: prefilter(&query.filter),
            query,
            impossible,
        })
    }

    async fn page(&self, q: &PgQuery, cursor: Option<PgCursor>, want: usize) -> Result<Page<StoredRow, PgCursor>> {
        if q.impossible {
            return Ok(Page {
                rows: Vec::new(),
                next: None,
                filtered: true,
            });
        }
        let size = page_size(want, PAGE, !q.query.filter.is_empty());
        let page = list_page(q, cursor.as_ref(), size);
        let tuples = self
            .timed("list", None, async {
                read_retrying!(self, "list", self.fetch_page(&page, size))
            })
            .await?;
        let next = match tuples.last() {
            Some(last) if tuples.len() >= size => {
                Some((last.checkpoint_id.clone(), last.thread_id.clone(), last.ns.clone()))
            }
            _ => None,
        };
        // the JSONB pre-filter only narrows: the exact filter is the engine's
        Ok(Page {
            rows: tuples,
            next,
            filtered: q.query.filter.is_empty(),
        })
    }

    put_through_values!();

    async fn put_writes(&self, batch: WriteBatch<'_, TypedBytes>) -> Result<()> {
        let write = Write::writes(batch)?;
        write_call!(self, "put_writes", |sent| self.write(write, &sent).await)
    }

    async fn put_step(&self, put: Put<'_>, writes: Vec<WriteBatch<'_, TypedBytes>>) -> Result<()> {
        // one statement, the writes and the checkpoint (after the lease
        // check of a fenced saver), group committed like a put
        let write = Write::step(self.put_write(&put, put.values())?, writes)?;
        write_call!(self, "put", |sent| self.write(write, &sent).await)
    }

    const FENCES: bool = true;

    async fn lease(&self, thread_id: &str, writer: &str, lease_ms: u64, op: LeaseOp) -> Result<Option<u64>> {
        jsonb::check_text(thread_id, "thread_id")?;
        jsonb::check_text(writer, "writer")?;
        write_call!(self, "lease", |sent| self
            .lease_once(thread_id, writer, lease_ms, op, &sent)
            .await)
    }

    async fn purge_leases(&self, older_than: std::time::Duration) -> Result<u64> {
        self.purge_leases_all(u64::try_from(older_than.as_millis()).unwrap_or(u64::MAX))
            .await
    }

    async fn delete_thread_fenced(&self, thread_id: &str, fence: &FenceToken) -> Result<()> {
        let write = Write::delete_thread(thread_id, fence)?;
        write_call!(self, "delete_thread", |sent| self.write(write, &sent).await)
    }

    async fn import(&self, import: Import<'_, TypedBytes>) -> Result<()> {
        let thread_id = import.thread_id;
        jsonb::check_text(thread_id, "thread_id")?;
        // a put and its `put_writes` batches per checkpoint, in order
        let mut writes = Vec::with_capacity(import.checkpoints.len());
        for cp in import.checkpoints {
            let (put, batches) = cp.into_batches();
            jsonb::check_text(put.checkpoint_ns, "checkpoint_ns")?;
            jsonb::check_text(&put.checkpoint.id, "checkpoint id")?;
            if let Some(parent) = put.parent_id {
                jsonb::check_text(parent, "parent checkpoint id")?;
            }
            let rows = rows::put_rows(
                put.checkpoint,
                put.values(),
                put.metadata,
                put.new_versions,
                self.serde(),
            )?;
            writes.push(Write::put(
                thread_id,
                put.checkpoint_ns,
                &put.checkpoint.id,
                put.parent_id,
                rows,
            ));
            for batch in batches {
                writes.push(Write::writes(batch)?);
            }
        }
        let run = || async {
            let mode_sql = self.inner.mode;
            let mut client = self.client().await?;
            let lz4 = self.has_lz4(&client).await?;
            let tx = client.transaction().await?;
            check_lease(&tx, mode_sql, thread_id, import.fence.as_ref()).await?;
            query_tx(&tx, mode_sql, queries::LOCK_THREAD, &[(&thread_id, Type::TEXT)]).await?;
            if import.mode == ImportMode::Create {
                let found = query_tx(
                    &tx,
                    mode_sql,
                    queries::THREAD_HAS_CHECKPOINTS,
                    &[(&thread_id, Type::TEXT)],
                )
                .await?;
                let taken: bool = match found.first() {
                    Some(row) => get(row, 0)?,
                    None => false,
                };
                if taken {
                    return Ok(false);
                }
            }
            // the old thread, or rows left without a checkpoint (blobs must
            // not keep an old value under a version imported anew)
            query_tx(&tx, mode_sql, queries::DELETE_THREAD, &[(&thread_id, Type::TEXT)]).await?;
            for write in &writes {
                query_tx(&tx, mode_sql, write.sql(lz4), &write.params()).await?;
            }
            tx.commit().await?;
            Ok::<bool, DbError>(true)
        };
        match run().await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::ThreadExists {
                thread_id: thread_id.to_owned(),
            }),
            Err(e) => Err(self.fail(e, "import_thread", false)),
        }
    }

    async fn delete_threads(&self, thread_ids: &[String]) -> Result<()> {
        let threads: Vec<&str> = thread_ids
            .iter()
            .map(String::as_str)
            .filter(|t| !t.contains('\0'))
            .collect();
        match threads.as_slice() {
            [] => Ok(()),
            [thread_id] => write_call!(self, "delete_thread", |sent| {
                let client = self.client().await?;
                sent.store(true, Ordering::SeqCst);
                self.q(&client, queries::DELETE_THREAD, &[(thread_id, Type::TEXT)])
                    .await?;
                Ok(())
            }),
            _ => write_call!(self, "prune", |sent| {
                let client = self.client().await?;
                sent.store(true, Ordering::SeqCst);
                self.q(&client, queries::DELETE_THREADS, &[(&threads, Type::TEXT_ARRAY)])
                    .await?;
                Ok(())
            }),
        }
    }

    async fn delete_for_runs(&self, run_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        let run_ids: Vec<String> = run_ids.iter().filter(|r| !r.contains('\0')).cloned().collect();
        if run_ids.is_empty() {
            return Ok(());
        }
        write_call!(self, "delete_for_runs", |sent| self
            .delete_for_runs_once(&run_ids, &sent, fences)
            .await)
    }

    async fn copy_thread(&self, source: &str, target: &str, fence: Option<&FenceToken>) -> Result<()> {
        jsonb::check_text(target, "target thread_id")?;
        // A source with U+0000 is a thread nobody stored: copied as an
        // unknown one, so the lease and the target are checked as for any.
        let source = (!source.contains('\0')).then_some(source);
        let taken = write_call!(self, "copy_thread", |sent| {
            let copied = self.copy_once(source, target, fence, &sent).await;
            match copied {
                Ok(rows) => match rows.first() {
                    Some(row) => Ok(get::<bool>(row, 0)?),
                    None => Ok(false),
                },
                // A concurrent copy (or put) filled the target first.
                Err(DbError::Pg(e)) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => Ok(true),
                Err(e) => Err(e),
            }
        })?;
        if taken {
            return Err(Error::ThreadExists {
                thread_id: target.to_owned(),
            });
        }
        Ok(())
    }

    async fn prune_keep_latest(&self, thread_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        let threads: Vec<&String> = thread_ids.iter().filter(|t| !t.contains('\0')).collect();
        if threads.is_empty() {
            return Ok(());
        }
        // Set once the first commit is sent: a timeout after it may leave
        // the threads pruned in part (repeating is safe).
        write_call!(self, "prune", |sent| {
            for thread in &threads {
                let fence = fences.map(|f| f.token(thread)).transpose()?;
                self.prune_thread(thread, &sent, fence.as_ref()).await?;
            }
            Ok(())
        })
    }

    async fn ancestors(&self, thread_id: &str, ns: &str, id: Option<&str>, channels: &[String]) -> Result<Vec<Link>> {
        let impossible = has_nul(&[thread_id, ns, id.unwrap_or("")]) || channels.iter().any(|c| c.contains('\0'));
        if impossible {
            return Ok(Vec::new());
        }
        self.timed("get_delta_channel_history", None, async {
            read_retrying!(
                self,
                "get_delta_channel_history",
                self.ancestors_once(thread_id, ns, id, channels)
            )
        })
        .await
    }

    async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        if has_nul(&[thread_id]) {
            return Ok(ThreadKeys::default()); // nothing stored can have such a key
        }
        self.timed("thread_keys", None, async {
            read_retrying!(self, "thread_keys", self.thread_keys_once(thread_id))
        })
        .await
    }

    async fn threads_page(&self, query: ThreadsQuery<'_>) -> Result<ThreadPage> {
        let size = query.page_size(PAGE);
        let threads = self
            .timed("list_threads", None, async {
                read_retrying!(self, "list_threads", self.list_threads_page(query.after, size as i64))
            })
            .await?;
        let next = match threads.last() {
            Some(last) if threads.len() >= size => Some(last.thread_id.clone()),
            _ => None,
        };
        Ok(ThreadPage {
            threads,
            next,
            filtered: query.filter.is_empty(),
        })
    }
}

static GET_BY_ID: LazyLock<String> = LazyLock::new(queries::get_tuple_by_id);
static GET_LATEST: LazyLock<String> = LazyLock::new(queries::get_tuple_latest);

impl Pg {
    /// Runs a [`queries::select_tuples`] query returning at most `limit`
    /// checkpoints, decoding rows as they arrive.
    async fn fetch_tuples(
        &self,
        client: &Object,
        sql: &str,
        params: &[Param<'_>],
        limit: usize,
    ) -> Result<Vec<StoredRow>, DbError> {
        let stream = query_stream(client, self.inner.mode, sql, params).await?;
        futures::pin_mut!(stream);
        let mut tuples = TupleRows::new(limit);
        // A row that does not decode fails the call only once the server has
        // sent every row: an error of the server's comes first.
        let mut undecodable = None;
        while let Some(row) = stream.try_next().await? {
            if undecodable.is_none() {
                undecodable = tuples.push(&row).err();
            }
        }
        if let Some(e) = undecodable {
            return Err(e.into());
        }
        let mut out = tuples.finish();
        self.restore_sends(client, &mut out).await?;
        Ok(out)
    }

    /// Gives checkpoints older than format v4 their sends back (`docs/design.md`, *PostgreSQL backend*),
    /// with one query for all of them.
    async fn restore_sends(&self, client: &Object, tuples: &mut [StoredRow]) -> Result<(), DbError> {
        let legacy: Vec<usize> = (0..tuples.len())
            .filter(|&i| {
                let t = &tuples[i];
                t.checkpoint.v < 4 && t.parent.as_ref().is_some_and(|p| !p.is_empty())
            })
            .collect();
        if legacy.is_empty() {
            return Ok(());
        }
        let (mut threads, mut namespaces, mut parents) = (Vec::new(), Vec::new(), Vec::new());
        for &i in &legacy {
            let t = &tuples[i];
            threads.push(t.thread_id.as_str());
            namespaces.push(t.ns.as_str());
            parents.push(t.parent.as_deref().unwrap_or(""));
        }
        let rows = self
            .q(
                client,
                queries::PARENT_SENDS,
                &[
                    (&threads, Type::TEXT_ARRAY),
                    (&namespaces, Type::TEXT_ARRAY),
                    (&parents, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        let sends = rows::parent_sends(&rows, legacy.len(), self.serde())?;
        for (i, sends) in legacy.into_iter().zip(sends) {
            tuples[i].sends = sends;
        }
        Ok(())
    }

    async fn get_tuple_once(&self, thread_id: &str, ns: &str, id: Option<&str>) -> Result<Option<StoredRow>, DbError> {
        let client = self.client().await?;
        let tuples = match id {
            Some(id) => {
                self.fetch_tuples(
                    &client,
                    &GET_BY_ID,
                    &[(&thread_id, Type::TEXT), (&ns, Type::TEXT), (&id, Type::TEXT)],
                    1,
                )
                .await?
            }
            None => {
                self.fetch_tuples(&client, &GET_LATEST, &[(&thread_id, Type::TEXT), (&ns, Type::TEXT)], 1)
                    .await?
            }
        };
        Ok(tuples.into_iter().next())
    }

    /// Whether the server compresses with LZ4, asked on the first put.
    pub(super) async fn has_lz4(&self, client: &Object) -> Result<bool, DbError> {
        let ask = || async {
            let rows = self.q(client, queries::HAS_LZ4, &[]).await?;
            Ok::<bool, DbError>(match rows.first() {
                Some(row) => get(row, 0)?,
                None => false,
            })
        };
        Ok(*self.inner.lz4.get_or_try_init(ask).await?)
    }

    async fn fetch_page(&self, page: &ListPage<'_>, size: usize) -> Result<Vec<StoredRow>, DbError> {
        let client = self.client().await?;
        let params: Vec<Param<'_>> = page
            .params
            .iter()
            .map(|(v, t)| (&**v as &(dyn ToSql + Sync), t.clone()))
            .collect();
        self.fetch_tuples(&client, &page.sql, &params, size).await
    }

    async fn delta_walk(
        &self,
        client: &Object,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
        channels: &[String],
    ) -> Result<Vec<WalkStep>, DbError> {
        let sql = if checkpoint_id.is_some() {
            queries::DELTA_WALK_BY_ID
        } else {
            queries::DELTA_WALK_LATEST
        };
        let rows = self
            .q(
                client,
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&checkpoint_id, Type::TEXT),
                    (&channels, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        Ok(rows::walk_steps(&rows, self.serde())?)
    }

    async fn ancestors_once(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
        channels: &[String],
    ) -> Result<Vec<Link>, DbError> {
        let client = self.client().await?;
        let steps = self.delta_walk(&client, thread_id, ns, checkpoint_id, channels).await?;
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        let (mut pair_ids, mut pair_channels) = (Vec::new(), Vec::new());
        for step in &steps {
            for ch in &step.open {
                pair_ids.push(step.checkpoint_id.clone());
                pair_channels.push(ch.clone());
            }
        }
        let rows = self
            .q(
                &client,
                queries::DELTA_WRITES,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&pair_ids, Type::TEXT_ARRAY),
                    (&pair_channels, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        Ok(rows::links(steps, &rows, self.serde())?)
    }

    async fn prune_thread(
        &self,
        thread_id: &str,
        sent: &AtomicBool,
        fence: Option<&FenceToken>,
    ) -> Result<(), DbError> {
        let mode = self.inner.mode;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        check_lease(&tx, mode, thread_id, fence).await?;
        query_tx(&tx, mode, queries::LOCK_THREAD, &[(&thread_id, Type::TEXT)]).await?;
        let rows = query_tx(&tx, mode, queries::PRUNE_HEADS, &[(&thread_id, Type::TEXT)]).await?;
        let heads = rows::prune_heads(&rows)?;
        let candidate_roots = prune::roots_to_check(&heads);
        let saved: Vec<String> = if candidate_roots.is_empty() {
            Vec::new()
        } else {
            query_tx(
                &tx,
                mode,
                queries::ROOT_CHECKPOINTS,
                &[(&thread_id, Type::TEXT), (&candidate_roots, Type::TEXT_ARRAY)],
            )
            .await?
            .iter()
            .map(|r| get::<String>(r, 0))
            .collect::<Result<_>>()?
        };
        let saved: HashSet<&str> = saved.iter().map(String::as_str).collect();
        let (mut keep_ns, mut keep_ids, mut removed) = (Vec::new(), Vec::new(), Vec::new());
        for action in prune::plan(&heads, &saved) {
            let keep = match action {
                prune::Action::Drop(ns) => {
                    removed.push(ns.to_owned());
                    continue;
                }
                prune::Action::Keep(keep) => keep,
            };
            keep_ns.push(keep.ns.to_owned());
            keep_ids.push(keep.head.to_owned());
            if keep.walk.is_empty() {
                continue;
            }
            // The ancestors a delta rebuild of the kept checkpoint reads (the
            // walk's stopping rule is the engine's, written in SQL).
            let rows = query_tx(
                &tx,
                mode,
                queries::DELTA_WALK_BY_ID,
                &[
                    (&thread_id, Type::TEXT),
                    (&keep.ns, Type::TEXT),
                    (&keep.head, Type::TEXT),
                    (&keep.walk, Type::TEXT_ARRAY),
                ],
            )
            .await?;
            let mut seen = HashSet::new();
            for row in &rows {
                let id: String = get(row, 1)?;
                if id != keep.head && seen.insert(id.clone()) {
                    keep_ns.push(keep.ns.to_owned());
                    keep_ids.push(id);
                }
            }
        }
        query_tx(
            &tx,
            mode,
            queries::PRUNE_APPLY,
            &[
                (&thread_id, Type::TEXT),
                (&keep_ns, Type::TEXT_ARRAY),
                (&keep_ids, Type::TEXT_ARRAY),
                (&removed, Type::TEXT_ARRAY),
            ],
        )
        .await?;
        sent.store(true, Ordering::SeqCst);
        tx.commit().await?;
        Ok(())
    }

    async fn thread_keys_once(&self, thread_id: &str) -> Result<ThreadKeys, DbError> {
        let client = self.client().await?;
        let rows = self
            .q(&client, queries::THREAD_KEYS, &[(&thread_id, Type::TEXT)])
            .await?;
        Ok(rows::thread_keys(&rows)?)
    }

    async fn list_threads_page(&self, after: Option<&str>, limit: i64) -> Result<Vec<ThreadInfo>, DbError> {
        let client = self.client().await?;
        let sql = if after.is_some() {
            queries::LIST_THREADS_AFTER
        } else {
            queries::LIST_THREADS_FIRST
        };
        let rows = self
            .q(&client, sql, &[(&after, Type::TEXT), (&limit, Type::INT8)])
            .await?;
        Ok(rows::threads(&rows)?)
    }
}

impl Pg {
    /// The statement of a `put` of a checkpoint whose channel values are
    /// `values` (fenced when `put` is).
    fn put_write(&self, put: &Put<'_>, values: Values<'_>) -> Result<Write> {
        jsonb::check_text(put.thread_id, "thread_id")?;
        jsonb::check_text(put.checkpoint_ns, "checkpoint_ns")?;
        jsonb::check_text(&put.checkpoint.id, "checkpoint id")?;
        if let Some(parent) = put.parent_id {
            jsonb::check_text(parent, "parent checkpoint id")?;
        }
        let mut rows = rows::put_rows(put.checkpoint, values, put.metadata, put.new_versions, self.serde())?;
        if !self.inner.fill_from_parent {
            rows.unwritten.clear();
        }
        Write::put(
            put.thread_id,
            put.checkpoint_ns,
            &put.checkpoint.id,
            put.parent_id,
            rows,
        )
        .fenced(put.fence)
    }

    /// `put` of a checkpoint whose channel values are `values`.
    async fn put_with(&self, put: Put<'_>, values: Values<'_>) -> Result<()> {
        let write = self.put_write(&put, values)?;
        write_call!(self, "put", |sent| self.write(write, &sent).await)
    }
}
