//! The SQL of the SQLite store: a prepared batch run on one connection.
//!
//! A batch with writes runs as one job of the writer thread (one
//! transaction: its reads, their TTL refreshes, then its writes; a failure
//! rolls the job back whole). A batch of reads only runs on a reader
//! connection in one read transaction (WAL: a snapshot), and the TTL
//! refreshes it asks for, if any, follow as a writer job.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use rusqlite::types::ToSql;
use rusqlite::Connection;

use super::rows::{self, py_time};
use super::search::{self, namespace_condition, Page};
use crate::sqlite::error::sql_error;
use crate::sqlite::pool::{ReadKind, ReaderPool};
use crate::sqlite::writer::Writer;
use crate::store::engine::{expiry, Prepared, Read, ReadResult, SearchRead, StoreBackend, Write};
use crate::store::{ListNamespacesOp, MatchKind, Namespace};
use crate::Result;

/// The storage side of a [`SqliteStore`](super::SqliteStore).
pub(crate) struct Sqlite {
    pub(super) writer: Writer,
    /// The reader connections of searches and mixed reads: they map the
    /// file (`SqliteStoreBuilder::reader_mmap_size`).
    pub(super) readers: Option<Arc<ReaderPool>>,
    /// The reader connections of batches of gets only, which do not map
    /// the file (the same pool as `readers` when those do not either).
    /// Each commit of the writer makes a reader connection drop its map at
    /// its next read (SQLite unmaps the file when the WAL changed), and a
    /// get touches a few pages of the map once: each of them a page fault,
    /// which costs more than reading the page with a system call.
    pub(super) lookups: Option<Arc<ReaderPool>>,
    /// Whether the file has `store_vectors` (an index is configured, or a
    /// store with one created it): deletes remove an item's vectors too.
    pub(super) has_vectors: bool,
    /// Whether the file has our index by time (`schema::TIME_INDEX`): a
    /// search without a query may walk it. Set at open; a read-only open
    /// never creates it.
    pub(super) time_index: bool,
}

/// An item a read returned whose TTL restarts: prefix, key, `ttl_minutes`.
type Touch = (String, String, f64);

#[async_trait]
impl StoreBackend for Sqlite {
    const NAME: &'static str = "sqlite";

    async fn execute(&self, batch: Prepared) -> Result<Vec<ReadResult>> {
        let batch = Arc::new(batch);
        let vectors = self.has_vectors;
        let time_index = self.time_index;
        if !batch.writes.is_empty() {
            return self
                .writer
                .write("store batch", move |conn| {
                    let (results, touched) = read_all(conn, &batch, time_index)?;
                    refresh(conn, &touched, batch.now)?;
                    for write in &batch.writes {
                        apply(conn, write, batch.now, vectors)?;
                    }
                    Ok(results)
                })
                .await;
        }
        let now = batch.now;
        let kind = if batch
            .reads
            .iter()
            .any(|r| matches!(r, Read::Search(SearchRead { query: Some(_), .. })))
        {
            ReadKind::Scan
        } else {
            ReadKind::Lookup
        };
        let gets_only = batch.reads.iter().all(|r| matches!(r, Read::Get { .. }));
        let pool = if gets_only { &self.lookups } else { &self.readers };
        let (results, touched) = match pool {
            Some(pool) => {
                // one statement reads one snapshot by itself
                let single = matches!(batch.reads.as_slice(), [Read::Get { .. }]);
                pool.run(kind, move |conn| {
                    if single {
                        return read_all(conn, &batch, time_index);
                    }
                    conn.prepare_cached("BEGIN")
                        .and_then(|mut s| s.execute([]))
                        .map_err(sql_error)?;
                    let out = read_all(conn, &batch, time_index);
                    conn.prepare_cached("ROLLBACK")
                        .and_then(|mut s| s.execute([]))
                        .map_err(sql_error)?;
                    out
                })
                .await?
            }
            None => self.writer.read(move |conn| read_all(conn, &batch, time_index)).await?,
        };
        if !touched.is_empty() {
            let touched = Arc::new(touched);
            self.writer
                .write("store ttl refresh", move |conn| refresh(conn, &touched, now))
                .await?;
        }
        Ok(results)
    }

    async fn sweep_expired(&self, now: SystemTime, max: usize) -> Result<usize> {
        let vectors = self.has_vectors;
        self.writer
            .write("store ttl sweep", move |conn| {
                let expired: Vec<(String, String)> = {
                    let mut stmt = conn
                        .prepare_cached(
                            "SELECT prefix, key FROM store
                             WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2",
                        )
                        .map_err(sql_error)?;
                    let rows = stmt
                        .query_map(
                            rusqlite::params![py_time(now), i64::try_from(max).unwrap_or(i64::MAX)],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .map_err(sql_error)?;
                    rows.collect::<rusqlite::Result<_>>().map_err(sql_error)?
                };
                for (prefix, key) in &expired {
                    delete(conn, prefix, key, vectors)?;
                }
                Ok(expired.len())
            })
            .await
    }
}

/// Runs every read of `batch`, in order: the results and the items whose
/// TTL restarts (`time_index`: the file has our index by time).
fn read_all(conn: &Connection, batch: &Prepared, time_index: bool) -> Result<(Vec<ReadResult>, Vec<Touch>)> {
    let now = py_time(batch.now);
    let mut touched = Vec::new();
    let mut results = Vec::with_capacity(batch.reads.len());
    for read in &batch.reads {
        let result = match read {
            Read::Get {
                namespace,
                key,
                refresh_ttl,
            } => {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT prefix, key, value, created_at, updated_at, ttl_minutes FROM store
                         WHERE prefix = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
                    )
                    .map_err(sql_error)?;
                let mut rows = stmt
                    .query(rusqlite::params![namespace.dotted(), key, now])
                    .map_err(sql_error)?;
                let found = match rows.next().map_err(sql_error)? {
                    Some(row) => Some(rows::item(row)?),
                    None => None,
                };
                if let (Some((item, Some(ttl))), true) = (&found, refresh_ttl) {
                    touched.push((item.namespace.dotted(), item.key.clone(), *ttl));
                }
                ReadResult::Item(found.map(|(item, _)| item))
            }
            Read::Search(read) => {
                let page = Page {
                    prefix: &read.prefix,
                    filter: read.filter.as_ref(),
                    limit: read.limit,
                    offset: read.offset,
                    now: &now,
                    time_index,
                };
                let found = match &read.query {
                    Some(q) => search::vector_search(conn, &page, q)?,
                    None => search::search(conn, &page)?,
                };
                if read.refresh_ttl {
                    touched.extend(
                        found
                            .iter()
                            .filter_map(|(s, ttl)| Some((s.item.namespace.dotted(), s.item.key.clone(), (*ttl)?))),
                    );
                }
                ReadResult::Search(found.into_iter().map(|(s, _)| s).collect())
            }
            Read::ListNamespaces(op) => ReadResult::Namespaces(list_namespaces(conn, op, &now)?),
        };
        results.push(result);
    }
    Ok((results, touched))
}

/// The namespaces holding live items, matched, cut to `max_depth`,
/// deduplicated, sorted (label by label), paged. A prefix condition
/// without `*` is also given to SQLite (the prefix index).
fn list_namespaces(conn: &Connection, op: &ListNamespacesOp, now: &str) -> Result<Vec<Namespace>> {
    let pushed = op
        .match_conditions
        .iter()
        .find(|c| c.kind == MatchKind::Prefix && !c.path.is_empty() && !c.path.labels().iter().any(|l| l == "*"));
    let (ns_sql, ns_params) = match pushed {
        Some(c) => namespace_condition(&c.path, "prefix"),
        None => ("1".to_owned(), Vec::new()),
    };
    let sql = format!("SELECT DISTINCT prefix FROM store WHERE {ns_sql} AND (expires_at IS NULL OR expires_at > :now)");
    let mut params: Vec<(&str, &dyn ToSql)> = vec![(":now", &now)];
    params.extend(ns_params.iter().map(|(k, v)| (*k, v as &dyn ToSql)));
    let mut stmt = conn.prepare_cached(&sql).map_err(sql_error)?;
    let mut rows = stmt.query(params.as_slice()).map_err(sql_error)?;
    let mut found = BTreeSet::new();
    while let Some(row) = rows.next().map_err(sql_error)? {
        let prefix: String = row.get(0).map_err(sql_error)?;
        let ns = rows::namespace(&prefix)?;
        if op.match_conditions.iter().all(|c| c.matches(&ns)) {
            found.insert(op.max_depth.map_or_else(|| ns.clone(), |d| ns.truncated(d)));
        }
    }
    Ok(found.into_iter().skip(op.offset).take(op.limit).collect())
}

/// Restarts the TTL of each touched item still live and with the same
/// `ttl_minutes`: `expires_at = now + ttl_minutes`.
fn refresh(conn: &Connection, touched: &[Touch], now: SystemTime) -> Result<()> {
    if touched.is_empty() {
        return Ok(());
    }
    let now_text = py_time(now);
    let mut stmt = conn
        .prepare_cached(
            "UPDATE store SET expires_at = ?1
             WHERE prefix = ?2 AND key = ?3 AND ttl_minutes = ?4 AND expires_at > ?5",
        )
        .map_err(sql_error)?;
    for (prefix, key, ttl) in touched {
        // a TTL this store refuses (a negative one Python wrote) stays as it is
        let Ok(at) = expiry(now, *ttl) else { continue };
        stmt.execute(rusqlite::params![py_time(at), prefix, key, ttl, now_text])
            .map_err(sql_error)?;
    }
    Ok(())
}

fn delete(conn: &Connection, prefix: &str, key: &str, vectors: bool) -> Result<()> {
    conn.prepare_cached("DELETE FROM store WHERE prefix = ?1 AND key = ?2")
        .and_then(|mut s| s.execute([prefix, key]))
        .map_err(sql_error)?;
    if vectors {
        // the schema's ON DELETE CASCADE, which needs foreign keys on
        conn.prepare_cached("DELETE FROM store_vectors WHERE prefix = ?1 AND key = ?2")
            .and_then(|mut s| s.execute([prefix, key]))
            .map_err(sql_error)?;
    }
    Ok(())
}

fn apply(conn: &Connection, write: &Write, now: SystemTime, vectors: bool) -> Result<()> {
    match write {
        Write::Delete { namespace, key } => delete(conn, &namespace.dotted(), key, vectors),
        Write::Put(put) => {
            let (key, ttl_minutes, embedded) = (&put.key, put.ttl_minutes, &put.vectors);
            let prefix = put.namespace.dotted();
            let at = py_time(now);
            let bytes = serde_json::to_vec(&put.value).map_err(|e| crate::Error::storage("sqlite", false, e))?;
            conn.prepare_cached(
                "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
                 VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)
                 ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value,
                   created_at = excluded.created_at, updated_at = excluded.updated_at,
                   expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes",
            )
            .and_then(|mut s| {
                s.execute(rusqlite::params![
                    prefix,
                    key,
                    bytes,
                    at,
                    put.expires_at.map(py_time),
                    ttl_minutes
                ])
            })
            .map_err(sql_error)?;
            if !embedded.is_empty() {
                let mut stmt = conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO store_vectors
                         (prefix, key, field_name, embedding, created_at, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                    )
                    .map_err(sql_error)?;
                for (field, vector) in embedded {
                    stmt.execute(rusqlite::params![prefix, key, field, rows::vector_blob(vector), at])
                        .map_err(sql_error)?;
                }
            }
            Ok(())
        }
    }
}
