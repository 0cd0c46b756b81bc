//! The SQL of the PostgreSQL store: a prepared batch run atomically on one
//! pooled connection (its reads, their TTL refreshes, then its writes, in
//! bounded statements; a failure rolls it back whole), the common batches
//! in one round trip (see [`Pg::run`]). Every time compared or written is
//! the batch's clock reading, bound as a parameter.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use deadpool_postgres::{ClientWrapper, Pool, Transaction};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use super::rows::{self, On, Search};
use crate::postgres::conn::{self, query_tx, Param};
use crate::postgres::error::DbError;
use crate::postgres::StatementMode;
use crate::store::engine::{Prepared, Read, ReadResult, SearchRead, StoreBackend, Write};
use crate::store::{ListNamespacesOp, MatchKind, Namespace, StoreError};
use crate::{Error, Result};

/// The storage side of a [`PostgresStore`](super::PostgresStore).
pub(crate) struct Pg {
    pub(super) pool: Pool,
    pub(super) mode: StatementMode,
    pub(super) call_timeout: Option<Duration>,
}

/// Rows per statement of a batch's writes, and per fetch of a scan.
pub(super) const CHUNK: usize = 500;

/// The writes of a batch as column arrays, checked before anything is sent.
#[derive(Default)]
struct Columns {
    deletes: (Vec<String>, Vec<String>),
    puts: Vec<PutRow>,
    /// prefix, key, field name, vector as pgvector's text.
    vectors: Vec<[String; 4]>,
}

struct PutRow {
    prefix: String,
    key: String,
    value: String,
    expires_at: Option<SystemTime>,
    ttl_minutes: Option<i32>,
}

/// `ttl_minutes` as Python's INT column holds it: whole minutes, rounded
/// (half to even, as PostgreSQL casts Python's float), but at least 1 for
/// a TTL above 0, so that a refreshing read never expires a live item.
/// A TTL of more than `i32::MAX` minutes (about 4 083 years) does not fit
/// the column and is refused.
fn column_minutes(minutes: f64) -> Result<i32> {
    let whole = minutes.round_ties_even();
    let whole = if minutes > 0.0 { whole.max(1.0) } else { whole };
    if !(0.0..=f64::from(i32::MAX)).contains(&whole) {
        return Err(StoreError::InvalidTtl { minutes }.into());
    }
    #[allow(clippy::cast_possible_truncation)] // a whole number within i32's range
    Ok(whole as i32)
}

/// PostgreSQL's text and jsonb cannot hold U+0000.
fn check_text(what: &str, text: &str) -> Result<()> {
    if text.contains('\0') {
        return Err(Error::invalid(format!(
            "PostgreSQL cannot store U+0000 (NUL) in {what}: {text:?}"
        )));
    }
    Ok(())
}

fn columns(writes: &[Write]) -> Result<Columns> {
    let mut out = Columns::default();
    for write in writes {
        match write {
            Write::Delete { namespace, key } => {
                if !key.contains('\0') {
                    out.deletes.0.push(namespace.dotted());
                    out.deletes.1.push(key.clone());
                }
            }
            Write::Put(put) => {
                let key = &put.key;
                check_text("a key", key)?;
                let value = serde_json::to_string(&put.value).map_err(|e| Error::invalid(e.to_string()))?;
                // JSON escapes U+0000 as \u0000, which jsonb refuses
                if value.contains("\\u0000") {
                    return Err(Error::invalid("PostgreSQL's jsonb cannot hold U+0000 (NUL) in a value"));
                }
                let prefix = put.namespace.dotted();
                for (field, vector) in &put.vectors {
                    out.vectors
                        .push([prefix.clone(), key.clone(), field.clone(), rows::vector_text(vector)]);
                }
                out.puts.push(PutRow {
                    prefix,
                    key: key.clone(),
                    value,
                    expires_at: put.expires_at,
                    ttl_minutes: put.ttl_minutes.map(column_minutes).transpose()?,
                });
            }
        }
    }
    Ok(out)
}

#[async_trait]
impl StoreBackend for Pg {
    const NAME: &'static str = "postgres";

    async fn execute(&self, batch: Prepared) -> Result<Vec<ReadResult>> {
        let columns = columns(&batch.writes)?;
        let refreshes = batch.reads.iter().any(|r| {
            matches!(
                r,
                Read::Get { refresh_ttl: true, .. } | Read::Search(SearchRead { refresh_ttl: true, .. })
            )
        });
        let read_only = batch.writes.is_empty() && !refreshes;
        let sent = AtomicBool::new(false);
        let op = "store batch";
        let call = async {
            self.run(&batch, &columns, read_only, &sent)
                .await
                .map_err(|e| conn::fail(&self.pool, e, op, read_only))
        };
        conn::timed(&self.pool, self.call_timeout, op, Some(&sent), call).await
    }

    async fn sweep_expired(&self, now: SystemTime, max: usize) -> Result<usize> {
        let op = "store ttl sweep";
        let sent = AtomicBool::new(false);
        let call = async {
            let limit = i64::try_from(max).unwrap_or(i64::MAX);
            let run = async {
                let client = self.pool.get().await?;
                sent.store(true, Ordering::SeqCst);
                let rows = conn::query(
                    &client,
                    self.mode,
                    "WITH gone AS (
                        DELETE FROM store WHERE (prefix, key) IN (
                            SELECT prefix, key FROM store
                            WHERE expires_at IS NOT NULL AND expires_at <= $1
                            LIMIT $2 FOR UPDATE SKIP LOCKED)
                        RETURNING 1)
                     SELECT count(*) FROM gone",
                    &[(&now, Type::TIMESTAMPTZ), (&limit, Type::INT8)],
                )
                .await?;
                let n: i64 = rows.first().map_or(Ok(0), |r| r.try_get(0))?;
                Ok::<_, DbError>(usize::try_from(n).unwrap_or(0))
            };
            run.await.map_err(|e| conn::fail(&self.pool, e, op, false))
        };
        conn::timed(&self.pool, self.call_timeout, op, Some(&sent), call).await
    }
}

impl Pg {
    /// A batch of writes alone is pipelined, a batch of one read (a get, a
    /// search without a query) is one statement: one round trip each.
    /// Any other batch runs in a transaction, statement by statement.
    async fn run(
        &self,
        batch: &Prepared,
        columns: &Columns,
        read_only: bool,
        sent: &AtomicBool,
    ) -> Result<Vec<ReadResult>, DbError> {
        let statements = statements(columns);
        if batch.reads.is_empty() && statements.is_empty() {
            return Ok(Vec::new());
        }
        let mut client = self.pool.get().await?;
        if batch.reads.is_empty() {
            self.write_alone(&client, &statements, batch.now, sent).await?;
            return Ok(Vec::new());
        }
        if let ([read], true) = (batch.reads.as_slice(), statements.is_empty()) {
            if let Some(result) = self.read_alone(&client, read, batch.now, sent).await? {
                return Ok(vec![result]);
            }
        }
        let tx = client.build_transaction().read_only(read_only).start().await?;
        let on = On::Tx(&tx);
        let mut touched = Vec::new();
        let mut results = Vec::with_capacity(batch.reads.len());
        for read in &batch.reads {
            results.push(self.read(&tx, read, batch.now, &mut touched).await?);
        }
        self.refresh(&on, &touched, batch.now).await?;
        for statement in &statements {
            on.query(self.mode, statement.sql(), &statement.params(&batch.now))
                .await?;
        }
        if !read_only {
            sent.store(true, Ordering::SeqCst);
        }
        tx.commit().await?;
        Ok(results)
    }

    /// One read as one statement in a transaction of its own: a get (its
    /// TTL restarted by the same statement), a search without a query (its
    /// TTL restarts by a second statement, only for items that have a TTL).
    /// `None`: the read needs the transaction of [`Self::run`].
    async fn read_alone(
        &self,
        client: &ClientWrapper,
        read: &Read,
        now: SystemTime,
        sent: &AtomicBool,
    ) -> Result<Option<ReadResult>, DbError> {
        let on = On::Alone(client);
        match read {
            Read::Get {
                namespace,
                key,
                refresh_ttl,
            } => {
                if key.contains('\0') {
                    return Ok(Some(ReadResult::Item(None)));
                }
                let prefix = namespace.dotted();
                let sql = if *refresh_ttl {
                    sent.store(true, Ordering::SeqCst);
                    GET_REFRESHING.as_str()
                } else {
                    GET.as_str()
                };
                let rows = on
                    .query(
                        self.mode,
                        sql,
                        &[(&prefix, Type::TEXT), (key, Type::TEXT), (&now, Type::TIMESTAMPTZ)],
                    )
                    .await?;
                let found = rows.first().map(rows::item).transpose()?;
                Ok(Some(ReadResult::Item(found.map(|(item, _)| item))))
            }
            Read::Search(read) => {
                let search = Search {
                    read,
                    now,
                    mode: self.mode,
                };
                let Some(found) = search.run(&on).await? else {
                    return Ok(None);
                };
                if read.refresh_ttl {
                    let touched: Vec<(String, String)> = found
                        .iter()
                        .filter(|(_, ttl)| ttl.is_some())
                        .map(|(s, _)| (s.item.namespace.dotted(), s.item.key.clone()))
                        .collect();
                    if !touched.is_empty() {
                        sent.store(true, Ordering::SeqCst);
                        self.refresh(&on, &touched, now).await?;
                    }
                }
                Ok(Some(ReadResult::Search(found.into_iter().map(|(s, _)| s).collect())))
            }
            Read::ListNamespaces(_) => Ok(None),
        }
    }

    /// A batch's writes with no reads: one statement alone, or several
    /// pipelined between `BEGIN` and `COMMIT`, all in one round trip.
    async fn write_alone(
        &self,
        client: &ClientWrapper,
        statements: &[WriteStatement<'_>],
        now: SystemTime,
        sent: &AtomicBool,
    ) -> Result<(), DbError> {
        if let [statement] = statements {
            sent.store(true, Ordering::SeqCst);
            conn::query(client, self.mode, statement.sql(), &statement.params(&now)).await?;
            return Ok(());
        }
        let params: Vec<Vec<Param<'_>>> = statements.iter().map(|s| s.params(&now)).collect();
        let mut prepared = Vec::with_capacity(statements.len());
        for (statement, params) in statements.iter().zip(&params) {
            prepared.push(match self.mode {
                StatementMode::Prepared => {
                    let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
                    Some(client.prepare_typed_cached(statement.sql(), &types).await?)
                }
                StatementMode::Unnamed => None,
            });
        }
        sent.store(true, Ordering::SeqCst);
        // each request leaves when its future is first polled, and `join!`
        // and `join_all` poll in order: BEGIN, the statements, COMMIT (a
        // failed statement turns the COMMIT into a rollback)
        let runs = statements
            .iter()
            .zip(&params)
            .zip(&prepared)
            .map(|((statement, params), prepared)| conn::run(client, prepared.as_ref(), statement.sql(), params));
        let (begin, outs, commit) = futures::join!(
            client.batch_execute("BEGIN"),
            futures::future::join_all(runs),
            client.batch_execute("COMMIT"),
        );
        begin?;
        for out in outs {
            out?;
        }
        commit?;
        Ok(())
    }

    async fn q(&self, tx: &Transaction<'_>, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        Ok(query_tx(tx, self.mode, sql, params).await?)
    }

    async fn read(
        &self,
        tx: &Transaction<'_>,
        read: &Read,
        now: SystemTime,
        touched: &mut Vec<(String, String)>,
    ) -> Result<ReadResult, DbError> {
        Ok(match read {
            Read::Get {
                namespace,
                key,
                refresh_ttl,
            } => {
                if key.contains('\0') {
                    // text cannot hold it: no such item
                    return Ok(ReadResult::Item(None));
                }
                let prefix = namespace.dotted();
                let rows = self
                    .q(
                        tx,
                        &GET,
                        &[(&prefix, Type::TEXT), (key, Type::TEXT), (&now, Type::TIMESTAMPTZ)],
                    )
                    .await?;
                let found = rows.first().map(rows::item).transpose()?;
                if let (Some((item, Some(_))), true) = (&found, refresh_ttl) {
                    touched.push((prefix, item.key.clone()));
                }
                ReadResult::Item(found.map(|(item, _)| item))
            }
            Read::Search(read) => {
                let found = Search {
                    read,
                    now,
                    mode: self.mode,
                }
                .run(&On::Tx(tx))
                .await?
                .unwrap_or_default();
                if read.refresh_ttl {
                    touched.extend(
                        found
                            .iter()
                            .filter(|(_, ttl)| ttl.is_some())
                            .map(|(s, _)| (s.item.namespace.dotted(), s.item.key.clone())),
                    );
                }
                ReadResult::Search(found.into_iter().map(|(s, _)| s).collect())
            }
            Read::ListNamespaces(op) => ReadResult::Namespaces(self.list_namespaces(tx, op, now).await?),
        })
    }

    /// The namespaces holding live items, matched, cut to `max_depth`,
    /// deduplicated, sorted label by label, paged. A prefix condition
    /// without `*` is given to the server too (the prefix index).
    async fn list_namespaces(
        &self,
        tx: &Transaction<'_>,
        op: &ListNamespacesOp,
        now: SystemTime,
    ) -> Result<Vec<Namespace>, DbError> {
        let pushed = op
            .match_conditions
            .iter()
            .find(|c| c.kind == MatchKind::Prefix && !c.path.is_empty() && !c.path.labels().iter().any(|l| l == "*"));
        let (ns_sql, ns_params) = match pushed {
            Some(c) => rows::namespace_condition(&c.path, "s.prefix", 2),
            None => ("TRUE".to_owned(), Vec::new()),
        };
        let sql = format!(
            "SELECT DISTINCT s.prefix FROM store s WHERE {ns_sql} AND {}",
            rows::live(1)
        );
        let mut params: Vec<Param<'_>> = vec![(&now, Type::TIMESTAMPTZ)];
        params.extend(ns_params.iter().map(|p| (p as &(dyn ToSql + Sync), Type::TEXT)));
        let mut found = BTreeSet::new();
        rows::scan(tx, self.mode, &sql, &params, |row| {
            let prefix: String = row.try_get(0)?;
            let ns = rows::namespace(&prefix)?;
            if op.match_conditions.iter().all(|c| c.matches(&ns)) {
                found.insert(op.max_depth.map_or_else(|| ns.clone(), |d| ns.truncated(d)));
            }
            Ok(true)
        })
        .await?;
        Ok(found.into_iter().skip(op.offset).take(op.limit).collect())
    }

    /// Restarts the TTL of each touched item still live:
    /// `expires_at = now + ttl_minutes`.
    async fn refresh(&self, on: &On<'_, '_>, touched: &[(String, String)], now: SystemTime) -> Result<(), DbError> {
        for chunk in touched.chunks(CHUNK) {
            let (prefixes, keys): (Vec<&str>, Vec<&str>) = chunk.iter().map(|(p, k)| (p.as_str(), k.as_str())).unzip();
            on.query(
                self.mode,
                REFRESH,
                &[
                    (&now, Type::TIMESTAMPTZ),
                    (&prefixes, Type::TEXT_ARRAY),
                    (&keys, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        }
        Ok(())
    }
}

/// An item by key, live at `$3`.
static GET: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM store s WHERE s.prefix = $1 AND s.key = $2 AND {}",
        rows::ITEM_COLUMNS,
        rows::live(3)
    )
});

/// [`GET`] restarting the item's TTL in the same statement ([`REFRESH`]'s
/// rule); the answer is the row as read, before the restart.
static GET_REFRESHING: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH s AS ({}),
         refreshed AS (
            UPDATE store t SET expires_at = $3 + make_interval(mins => t.ttl_minutes)
            FROM s WHERE t.prefix = s.prefix AND t.key = s.key
            AND t.ttl_minutes IS NOT NULL AND t.ttl_minutes >= 0 AND t.expires_at > $3)
         SELECT {} FROM s",
        GET.as_str(),
        rows::ITEM_COLUMNS
    )
});

/// Restarts the TTL of the items `($2[i], $3[i])` still live at `$1`.
const REFRESH: &str = "UPDATE store s SET expires_at = $1 + make_interval(mins => s.ttl_minutes)
     FROM unnest($2::text[], $3::text[]) AS t(prefix, key)
     WHERE s.prefix = t.prefix AND s.key = t.key
     AND s.ttl_minutes IS NOT NULL AND s.ttl_minutes >= 0 AND s.expires_at > $1";

/// One statement of a batch's writes, at most [`CHUNK`] rows.
enum WriteStatement<'a> {
    Delete(&'a [String], &'a [String]),
    Put {
        prefixes: Vec<&'a str>,
        keys: Vec<&'a str>,
        values: Vec<&'a str>,
        expires: Vec<Option<SystemTime>>,
        minutes: Vec<Option<i32>>,
    },
    /// Prefixes, keys, field names, vectors.
    Vectors([Vec<&'a str>; 4]),
}

/// The statements of a batch's writes: deletes, then puts (an item's row
/// before its vectors). A put keeps the row's `created_at`, as Python's
/// store does.
fn statements(columns: &Columns) -> Vec<WriteStatement<'_>> {
    let mut out = Vec::new();
    let (prefixes, keys) = &columns.deletes;
    for (prefixes, keys) in prefixes.chunks(CHUNK).zip(keys.chunks(CHUNK)) {
        out.push(WriteStatement::Delete(prefixes, keys));
    }
    for chunk in columns.puts.chunks(CHUNK) {
        out.push(WriteStatement::Put {
            prefixes: chunk.iter().map(|p| p.prefix.as_str()).collect(),
            keys: chunk.iter().map(|p| p.key.as_str()).collect(),
            values: chunk.iter().map(|p| p.value.as_str()).collect(),
            expires: chunk.iter().map(|p| p.expires_at).collect(),
            minutes: chunk.iter().map(|p| p.ttl_minutes).collect(),
        });
    }
    for chunk in columns.vectors.chunks(CHUNK) {
        let column = |i: usize| -> Vec<&str> { chunk.iter().map(|v| v[i].as_str()).collect() };
        out.push(WriteStatement::Vectors([column(0), column(1), column(2), column(3)]));
    }
    out
}

impl WriteStatement<'_> {
    fn sql(&self) -> &'static str {
        match self {
            WriteStatement::Delete(..) => {
                "DELETE FROM store s USING unnest($1::text[], $2::text[]) AS d(prefix, key)
                 WHERE s.prefix = d.prefix AND s.key = d.key"
            }
            WriteStatement::Put { .. } => {
                "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
                 SELECT u.prefix, u.key, u.value::jsonb, $1, $1, u.expires_at, u.ttl_minutes
                 FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::int4[])
                   AS u(prefix, key, value, expires_at, ttl_minutes)
                 ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value,
                   updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at,
                   ttl_minutes = EXCLUDED.ttl_minutes"
            }
            WriteStatement::Vectors(_) => {
                "INSERT INTO store_vectors (prefix, key, field_name, embedding, created_at, updated_at)
                 SELECT u.prefix, u.key, u.field_name, u.embedding::vector, $1, $1
                 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS u(prefix, key, field_name, embedding)
                 ON CONFLICT (prefix, key, field_name) DO UPDATE SET embedding = EXCLUDED.embedding,
                   updated_at = EXCLUDED.updated_at"
            }
        }
    }

    /// The parameters of [`Self::sql`]; `now` is the batch's clock reading.
    fn params<'a>(&'a self, now: &'a SystemTime) -> Vec<Param<'a>> {
        match self {
            WriteStatement::Delete(prefixes, keys) => vec![(prefixes, Type::TEXT_ARRAY), (keys, Type::TEXT_ARRAY)],
            WriteStatement::Put {
                prefixes,
                keys,
                values,
                expires,
                minutes,
            } => vec![
                (now, Type::TIMESTAMPTZ),
                (prefixes, Type::TEXT_ARRAY),
                (keys, Type::TEXT_ARRAY),
                (values, Type::TEXT_ARRAY),
                (expires, Type::TIMESTAMPTZ_ARRAY),
                (minutes, Type::INT4_ARRAY),
            ],
            WriteStatement::Vectors([prefixes, keys, fields, vectors]) => vec![
                (now, Type::TIMESTAMPTZ),
                (prefixes, Type::TEXT_ARRAY),
                (keys, Type::TEXT_ARRAY),
                (fields, Type::TEXT_ARRAY),
                (vectors, Type::TEXT_ARRAY),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_minutes_fit_the_int_column() {
        assert_eq!(column_minutes(0.0).unwrap(), 0);
        assert_eq!(column_minutes(0.2).unwrap(), 1, "a positive TTL keeps a minute");
        assert_eq!(column_minutes(2.5).unwrap(), 2, "half to even, as PostgreSQL");
        assert_eq!(column_minutes(3.5).unwrap(), 4);
        assert_eq!(column_minutes(f64::from(i32::MAX)).unwrap(), i32::MAX);
        assert!(matches!(
            column_minutes(f64::from(i32::MAX) + 1.0),
            Err(Error::Store(StoreError::InvalidTtl { .. }))
        ));
    }
}
