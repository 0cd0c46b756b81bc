//! The PostgreSQL side of the engine: rows in, rows out, every call under
//! the call timeout, reads retried once on a broken connection.

use std::sync::atomic::{AtomicBool, Ordering};

use indexmap::IndexMap;
use tokio_postgres::types::{ToSql, Type};

use super::{get, has_nul, jsonb, prefilter, queries, read_retrying, rows, DbError, JsonbParam, ListPage, Pg, PAGE};
use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::engine::{Backend, Link, ListQuery, Page, Put, ThreadPage, WriteBatch};
use crate::error::{Error, Result};
use crate::serde::{TypedBytes, Value};

/// A listing: the query, its JSONB pre-filter, and whether it can match at
/// all (PostgreSQL text cannot hold U+0000, so a key with one names nothing).
pub(crate) struct PgQuery {
    query: ListQuery,
    prefilter: Option<String>,
    impossible: bool,
}

/// The keyset position after a page: (checkpoint id, thread, namespace).
pub(crate) type PgCursor = (String, String, String);

/// The statement of one `list` page after `cursor`, at most `size` rows.
fn list_page(q: &PgQuery, cursor: Option<&PgCursor>, size: usize) -> ListPage<'static> {
    let mut sql = format!("SELECT {} FROM checkpoints WHERE TRUE", queries::ROW_COLUMNS);
    let mut params: Vec<(Box<dyn ToSql + Sync + Send>, Type)> = Vec::new();
    let mut bind = |sql: &mut String, cond: &str, value: Box<dyn ToSql + Sync + Send>, ty: Type| {
        params.push((value, ty));
        sql.push_str(&cond.replace('?', &format!("${}", params.len())));
    };
    let query = &q.query;
    let mut exact_namespace = false;
    if let Some(thread) = &query.thread_id {
        bind(&mut sql, " AND thread_id = ?", Box::new(thread.clone()), Type::TEXT);
        if let Some(ns) = &query.checkpoint_ns {
            bind(&mut sql, " AND checkpoint_ns = ?", Box::new(ns.clone()), Type::TEXT);
            exact_namespace = true;
        }
        if let Some(id) = &query.checkpoint_id {
            bind(&mut sql, " AND checkpoint_id = ?", Box::new(id.clone()), Type::TEXT);
        }
    }
    if let Some(before) = &query.before {
        bind(&mut sql, " AND checkpoint_id < ?", Box::new(before.clone()), Type::TEXT);
    }
    if let Some(pre) = &q.prefilter {
        bind(
            &mut sql,
            " AND metadata @> ?",
            Box::new(JsonbParam(pre.clone())),
            Type::JSONB,
        );
    }
    if let Some((id, thread, ns)) = cursor {
        if exact_namespace {
            bind(&mut sql, " AND checkpoint_id < ?", Box::new(id.clone()), Type::TEXT);
        } else {
            bind(
                &mut sql,
                " AND (checkpoint_id, thread_id, checkpoint_ns) < (?",
                Box::new(id.clone()),
                Type::TEXT,
            );
            bind(&mut sql, ", ?", Box::new(thread.clone()), Type::TEXT);
            bind(&mut sql, ", ?)", Box::new(ns.clone()), Type::TEXT);
        }
    }
    sql.push(' ');
    sql.push_str(queries::LIST_ORDER);
    // The limit is written into the statement, not bound: a generic plan
    // of a bound `LIMIT $n` assumes 100 rows, costs far more than the
    // custom plans of the first five calls, so PostgreSQL would re-plan
    // every call (0.3–0.5 ms) once the table has statistics. `size` is
    // at most PAGE, so there are at most PAGE statements.
    sql.push_str(&format!(" LIMIT {size}"));
    ListPage {
        sql: queries::select_tuples(&sql),
        params,
    }
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

impl Backend for Pg {
    type Row = CheckpointTuple;
    type Cursor = PgCursor;
    type Query = PgQuery;
    type Encoded = TypedBytes;

    fn encode(&self, value: &Value) -> Result<TypedBytes> {
        let typed = self.serde().dumps_typed(value)?;
        jsonb::check_text(&typed.tag, "serializer tag")?;
        Ok(typed)
    }

    fn decode(&self, row: CheckpointTuple) -> Result<CheckpointTuple> {
        Ok(row)
    }

    async fn get(&self, thread_id: &str, ns: &str, id: Option<&str>) -> Result<Option<CheckpointTuple>> {
        if has_nul(&[thread_id, ns, id.unwrap_or("")]) {
            return Ok(None); // nothing stored can have such a key
        }
        let mut config = CheckpointConfig::new(thread_id).with_ns(ns);
        config.checkpoint_id = id.map(str::to_owned);
        self.timed("get_tuple", None, async {
            read_retrying!(self, "get_tuple", self.get_tuple_once(&config))
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

    async fn page(
        &self,
        q: &PgQuery,
        cursor: Option<PgCursor>,
        want: usize,
    ) -> Result<Page<CheckpointTuple, PgCursor>> {
        if q.impossible {
            return Ok(Page {
                rows: Vec::new(),
                next: None,
                filtered: true,
            });
        }
        let size = if q.query.filter.is_empty() {
            want.clamp(1, PAGE)
        } else {
            PAGE
        };
        let page = list_page(q, cursor.as_ref(), size);
        let tuples = self
            .timed("list", None, async {
                read_retrying!(self, "list", self.fetch_page(&page, size))
            })
            .await?;
        let next = match tuples.last() {
            Some(last) if tuples.len() >= size => Some((
                last.checkpoint.id.clone(),
                last.config.thread_id.clone(),
                last.config.ns().to_owned(),
            )),
            _ => None,
        };
        // the JSONB pre-filter only narrows: the exact filter is the engine's
        Ok(Page {
            rows: tuples,
            next,
            filtered: q.query.filter.is_empty(),
        })
    }

    async fn put(&self, put: Put<'_>) -> Result<()> {
        jsonb::check_text(put.thread_id, "thread_id")?;
        jsonb::check_text(put.checkpoint_ns, "checkpoint_ns")?;
        jsonb::check_text(&put.checkpoint.id, "checkpoint id")?;
        if let Some(parent) = put.parent_id {
            jsonb::check_text(parent, "parent checkpoint id")?;
        }
        let rows = rows::put_rows(put.checkpoint, put.metadata, put.new_versions, self.serde())?;
        let sent = AtomicBool::new(false);
        self.timed("put", Some(&sent), async {
            self.put_once(&put, &rows, &sent)
                .await
                .map_err(|e| self.fail(e, "put", false))
        })
        .await
    }

    async fn put_writes(&self, batch: WriteBatch<'_, TypedBytes>) -> Result<()> {
        for (text, what) in [
            (batch.thread_id, "thread_id"),
            (batch.checkpoint_ns, "checkpoint_ns"),
            (batch.checkpoint_id, "checkpoint id"),
            (batch.task_id, "task_id"),
            (batch.task_path, "task_path"),
        ] {
            jsonb::check_text(text, what)?;
        }
        let n = batch.writes.len();
        let (mut idxs, mut channels, mut tags, mut blobs) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for w in batch.writes {
            jsonb::check_text(&w.channel, "channel name")?;
            let idx = i32::try_from(w.idx)
                .map_err(|_| Error::invalid("put_writes: more writes than PostgreSQL's integer idx holds"))?;
            idxs.push(idx);
            channels.push(w.channel);
            tags.push(w.value.tag);
            blobs.push(w.value.data);
        }
        let data: Vec<&[u8]> = blobs.iter().map(|b| &b[..]).collect();
        write_call!(self, "put_writes", |sent| {
            let client = self.client().await?;
            sent.store(true, Ordering::SeqCst);
            self.q(
                &client,
                queries::PUT_WRITES,
                &[
                    (&batch.thread_id, Type::TEXT),
                    (&batch.checkpoint_ns, Type::TEXT),
                    (&batch.checkpoint_id, Type::TEXT),
                    (&batch.task_id, Type::TEXT),
                    (&batch.task_path, Type::TEXT),
                    (&idxs, Type::INT4_ARRAY),
                    (&channels, Type::TEXT_ARRAY),
                    (&tags, Type::TEXT_ARRAY),
                    (&data, Type::BYTEA_ARRAY),
                ],
            )
            .await?;
            Ok(())
        })
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

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        let run_ids: Vec<String> = run_ids.iter().filter(|r| !r.contains('\0')).cloned().collect();
        if run_ids.is_empty() {
            return Ok(());
        }
        let sent = AtomicBool::new(false);
        self.timed("delete_for_runs", Some(&sent), async {
            self.delete_for_runs_once(&run_ids, &sent)
                .await
                .map_err(|e| self.fail(e, "delete_for_runs", false))
        })
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        jsonb::check_text(target, "target thread_id")?;
        if source.contains('\0') {
            return Ok(());
        }
        let sent = AtomicBool::new(false);
        let run = || async {
            let client = self.client().await?;
            sent.store(true, Ordering::SeqCst);
            let rows = self
                .q(
                    &client,
                    queries::COPY_THREAD,
                    &[(&source, Type::TEXT), (&target, Type::TEXT)],
                )
                .await?;
            let taken: bool = match rows.first() {
                Some(row) => get(row, 0)?,
                None => false,
            };
            Ok::<bool, DbError>(taken)
        };
        let thread_exists = || Error::ThreadExists {
            thread_id: target.to_owned(),
        };
        self.timed("copy_thread", Some(&sent), async {
            match run().await {
                Ok(true) => Err(thread_exists()),
                Ok(false) => Ok(()),
                Err(DbError::Pg(e)) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                    // A concurrent copy (or put) filled the target first.
                    Err(thread_exists())
                }
                Err(e) => Err(self.fail(e, "copy_thread", false)),
            }
        })
        .await
    }

    async fn prune_keep_latest(&self, thread_ids: &[String]) -> Result<()> {
        let threads: Vec<&String> = thread_ids.iter().filter(|t| !t.contains('\0')).collect();
        if threads.is_empty() {
            return Ok(());
        }
        // Set once the first commit is sent: a timeout after it may leave
        // the threads pruned in part (repeating is safe).
        let sent = AtomicBool::new(false);
        self.timed("prune", Some(&sent), async {
            for thread in threads {
                self.prune_thread(thread, &sent)
                    .await
                    .map_err(|e| self.fail(e, "prune", false))?;
            }
            Ok(())
        })
        .await
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

    async fn threads_page(
        &self,
        after: Option<&str>,
        want: usize,
        filter: &IndexMap<String, Value>,
    ) -> Result<ThreadPage> {
        let size = if filter.is_empty() { want.clamp(1, PAGE) } else { PAGE };
        let threads = self
            .timed("list_threads", None, async {
                read_retrying!(self, "list_threads", self.list_threads_page(after, size as i64))
            })
            .await?;
        let next = match threads.last() {
            Some(last) if threads.len() >= size => Some(last.thread_id.clone()),
            _ => None,
        };
        Ok(ThreadPage {
            threads,
            next,
            filtered: filter.is_empty(),
        })
    }
}
