//! What the store's rows hold, as Python's `PostgresStore` writes them
//! (the prefix: labels joined by `.`; the value: jsonb; the times:
//! timestamptz; the vectors: pgvector's `vector`), the conditions on them,
//! and the searches, read in bounded fetches from a portal.

use std::time::{SystemTime, UNIX_EPOCH};

use deadpool_postgres::{ClientWrapper, Transaction};
use serde_json::{Map, Value};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use super::backend::CHUNK;
use crate::postgres::conn::{self, JsonbText, Param};
use crate::postgres::error::DbError;
use crate::postgres::StatementMode;
use crate::store::engine::SearchRead;
use crate::store::{Condition, Filter, FilterOp, Item, Namespace, SearchItem};
use crate::Error;

/// The columns of an item, in the order [`item`] reads them.
pub(super) const ITEM_COLUMNS: &str = "s.prefix, s.key, s.value, s.created_at, s.updated_at, s.ttl_minutes";

/// The item is live at the time bound as `$n`.
pub(super) fn live(n: usize) -> String {
    format!("(s.expires_at IS NULL OR s.expires_at > ${n})")
}

fn corrupt(what: impl std::fmt::Display) -> DbError {
    DbError::Crate(Error::storage(
        "postgres",
        false,
        format!("unreadable store row: {what}"),
    ))
}

/// The namespace of a stored `prefix`.
pub(super) fn namespace(prefix: &str) -> Result<Namespace, DbError> {
    Namespace::new(prefix.split('.')).map_err(|e| corrupt(format!("prefix {prefix:?}: {e}")))
}

/// An item read from [`ITEM_COLUMNS`], and its `ttl_minutes`.
pub(super) fn item(row: &Row) -> Result<(Item, Option<i32>), DbError> {
    let prefix: String = row.try_get(0)?;
    let key: String = row.try_get(1)?;
    let JsonbText(bytes) = row.try_get(2)?;
    let value: Map<String, Value> = match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err(corrupt(format!("the value of {prefix:?}/{key:?} is not a JSON object"))),
        Err(e) => return Err(corrupt(format!("the value of {prefix:?}/{key:?}: {e}"))),
    };
    // a row inserted without the times (their defaults apply otherwise)
    let created_at: Option<SystemTime> = row.try_get(3)?;
    let updated_at: Option<SystemTime> = row.try_get(4)?;
    let item = Item {
        namespace: namespace(&prefix)?,
        key,
        value,
        created_at: created_at.unwrap_or(UNIX_EPOCH),
        updated_at: updated_at.unwrap_or(UNIX_EPOCH),
    };
    Ok((item, row.try_get(5)?))
}

/// A vector as pgvector's text input reads it: `[1,0.5,-2]` (each `f32`
/// written so that it reads back to the same `f32`).
pub(super) fn vector_text(vector: &[f32]) -> String {
    let parts: Vec<String> = vector.iter().map(f32::to_string).collect();
    format!("[{}]", parts.join(","))
}

/// The condition on the namespace column `column`: the namespace itself or
/// below it, as Python's store matches it (equality, or `LIKE` on the
/// dotted path and a `.`, its metacharacters escaped), with its two text
/// parameters, bound from `$first`.
pub(super) fn namespace_condition(prefix: &Namespace, column: &str, first: usize) -> (String, Vec<String>) {
    let path = prefix.dotted();
    let like = format!(
        "{}.%",
        path.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
    );
    let second = first + 1;
    (
        format!("({column} = ${first} OR {column} LIKE ${second} ESCAPE '\\')"),
        vec![path, like],
    )
}

/// The conditions of a filter given to the server, over `s.value`.
pub(super) struct Pushed {
    /// ` AND ...` for each condition given.
    pub sql: String,
    /// Their text parameters, in order: a field name, then the JSON it
    /// equals where there is one.
    pub params: Vec<String>,
    /// Every condition of the filter is in `sql`, decided as [`Filter`]
    /// decides it: the server may cut the page.
    pub exact: bool,
}

/// The conditions of `filter` the server decides as [`Filter`] does, with
/// their parameters bound from `$first`: equality of a top-level field
/// with a string (jsonb equality of strings is byte equality, as Python's
/// `==`) or with `null` (a JSON null or a missing field). Not given:
/// numbers and booleans (Python's `1 == 1.0 == True`, which jsonb does not
/// share), `$ne` and the orderings (Python's `float()` reads numeric
/// strings), nested objects and lists. The server only narrows: every row
/// it returns is still checked with the [`Filter`].
pub(super) fn pushdown(filter: &Filter, first: usize) -> Pushed {
    let mut out = Pushed {
        sql: String::new(),
        params: Vec::new(),
        exact: true,
    };
    for (field, cond) in filter.fields() {
        let equals: Vec<&Value> = match cond {
            Condition::Equals(v) => vec![v],
            Condition::Compare(ops) => {
                if ops.iter().any(|(op, _)| *op != FilterOp::Eq) {
                    out.exact = false;
                }
                ops.iter()
                    .filter(|(op, _)| *op == FilterOp::Eq)
                    .map(|(_, v)| v)
                    .collect()
            }
            Condition::Fields(_) | Condition::Items(_) => {
                out.exact = false;
                continue;
            }
        };
        for value in equals {
            let f = first + out.params.len();
            match value {
                // text cannot hold U+0000, which no stored value holds
                _ if field.contains('\0') => out.exact = false,
                Value::String(text) if text.contains('\0') => out.exact = false,
                Value::String(_) => {
                    out.sql += &format!(" AND s.value -> ${f} = ${}::jsonb", f + 1);
                    out.params.push(field.clone());
                    out.params.push(value.to_string());
                }
                Value::Null => {
                    out.sql += &format!(" AND coalesce(s.value -> ${f}, 'null'::jsonb) = 'null'::jsonb");
                    out.params.push(field.clone());
                }
                _ => out.exact = false,
            }
        }
    }
    out
}

/// Runs `sql` in a portal of `tx`, handing each row to `each` until it
/// returns `false` or the rows end; rows are fetched [`CHUNK`] at a time.
pub(super) async fn scan(
    tx: &Transaction<'_>,
    mode: StatementMode,
    sql: &str,
    params: &[Param<'_>],
    mut each: impl FnMut(&Row) -> Result<bool, DbError>,
) -> Result<(), DbError> {
    let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
    let statement = match mode {
        StatementMode::Prepared => tx.prepare_typed_cached(sql, &types).await?,
        // named, but used and closed within this transaction, which a
        // transaction pooler keeps on one server connection
        StatementMode::Unnamed => tx.prepare_typed(sql, &types).await?,
    };
    let portal = tx.bind_raw(&statement, params.iter().map(|(v, _)| *v)).await?;
    let fetch = i32::try_from(CHUNK).unwrap_or(i32::MAX);
    loop {
        let rows = tx.query_portal(&portal, fetch).await?;
        for row in &rows {
            if !each(row)? {
                return Ok(());
            }
        }
        if rows.len() < CHUNK {
            return Ok(());
        }
    }
}

/// A filtered search first reads at most this many rows per item of its
/// page (`offset + limit`), plus [`FILTER_READ_AHEAD_MIN`].
const FILTER_READ_AHEAD: usize = 8;
const FILTER_READ_AHEAD_MIN: usize = 64;

/// An item found, with its `ttl_minutes`.
pub(super) type Found = (SearchItem, Option<i32>);

/// Where a read runs: alone on a connection, as one statement in a
/// transaction of its own (one round trip, no `BEGIN` or `COMMIT`), or in
/// a batch's transaction.
pub(super) enum On<'a, 'b> {
    Alone(&'a ClientWrapper),
    Tx(&'a Transaction<'b>),
}

impl On<'_, '_> {
    /// The rows of one statement, in one round trip.
    pub async fn query(&self, mode: StatementMode, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        Ok(match self {
            On::Alone(client) => conn::query(client, mode, sql, params).await?,
            On::Tx(tx) => conn::query_tx(tx, mode, sql, params).await?,
        })
    }
}

/// One search of a batch.
pub(super) struct Search<'a> {
    pub read: &'a SearchRead,
    pub now: SystemTime,
    pub mode: StatementMode,
}

impl Search<'_> {
    /// The items found; `None` when the search needs a transaction but
    /// runs [`On::Alone`] (a vector search, or a filter that refused so
    /// many rows that its bounded read did not fill the page).
    pub async fn run(&self, on: &On<'_, '_>) -> Result<Option<Vec<Found>>, DbError> {
        let read = self.read;
        if read.limit == 0 {
            return Ok(Some(Vec::new()));
        }
        let Some(query) = &read.query else {
            return self.plain(on, "", read.offset, read.limit).await;
        };
        let On::Tx(_) = on else { return Ok(None) };
        let Some(mut found) = self.ranked(on, &vector_text(query)).await? else {
            return Ok(None);
        };
        let room = read.limit.saturating_sub(found.len());
        if room > 0 {
            // items without vectors follow, from the first one (the offset
            // is not applied to them, as in LangGraph's in-memory store)
            let unranked =
                "AND NOT EXISTS (SELECT 1 FROM store_vectors sv WHERE sv.prefix = s.prefix AND sv.key = s.key)";
            let Some(more) = self.plain(on, unranked, 0, room).await? else {
                return Ok(None);
            };
            found.extend(more);
        }
        Ok(Some(found))
    }

    /// The namespace condition and its parameters, bound from `$first`.
    fn scope(&self, first: usize) -> (String, Vec<String>) {
        if self.read.prefix.is_empty() {
            ("TRUE".to_owned(), Vec::new())
        } else {
            namespace_condition(&self.read.prefix, "s.prefix", first)
        }
    }

    /// Rows of `sql` (items, then a score at column 6 if `scored`), the
    /// filter applied in Rust; `skip` matching rows skipped, at most
    /// `take` kept. Without a filter, or when `sql` decides the whole
    /// filter (`exact`, see [`pushdown`]), the page is cut by the server;
    /// a row the filter then refuses sends the search the long way. That
    /// way, the server is first asked for a bounded number of rows
    /// ([`FILTER_READ_AHEAD`] times the page): a `LIMIT` lets the planner
    /// choose a plan that stops early (our index by time) where an open
    /// portal is planned for every row; when the filter refuses so many
    /// that the page is not full, the search runs again without the bound.
    #[allow(clippy::too_many_arguments)]
    async fn page(
        &self,
        on: &On<'_, '_>,
        sql: String,
        params: Vec<Param<'_>>,
        scored: bool,
        exact: bool,
        skip: usize,
        take: usize,
    ) -> Result<Option<Vec<Found>>, DbError> {
        let filter = match self.read.filter.as_ref() {
            Some(filter) if !exact => filter,
            filter => {
                let (limit, offset) = (to_i64(take), to_i64(skip));
                let n = params.len();
                let cut_sql = format!("{sql} LIMIT ${} OFFSET ${}", n + 1, n + 2);
                let mut cut = params.clone();
                cut.push((&limit, Type::INT8));
                cut.push((&offset, Type::INT8));
                let mut collect = Collect::new(filter, scored, 0, take);
                if !self.rows(on, &cut_sql, &cut, Some(take), &mut collect).await? {
                    return Ok(None);
                }
                match filter {
                    Some(filter) if collect.refused => filter,
                    _ => return Ok(Some(collect.out)),
                }
            }
        };
        let ahead = skip
            .saturating_add(take)
            .saturating_mul(FILTER_READ_AHEAD)
            .saturating_add(FILTER_READ_AHEAD_MIN);
        let bound = to_i64(ahead);
        let mut bounded = params.clone();
        bounded.push((&bound, Type::INT8));
        let bounded_sql = format!("{sql} LIMIT ${}", bounded.len());
        let mut collect = Collect::new(Some(filter), scored, skip, take);
        if !self.rows(on, &bounded_sql, &bounded, Some(ahead), &mut collect).await? {
            return Ok(None);
        }
        if collect.out.len() >= take || collect.rows < ahead {
            return Ok(Some(collect.out));
        }
        let mut collect = Collect::new(Some(filter), scored, skip, take);
        Ok(self
            .rows(on, &sql, &params, None, &mut collect)
            .await?
            .then_some(collect.out))
    }

    /// Hands the rows of `sql`, which returns at most `at_most` rows, to
    /// `collect`: a small bounded answer in one round trip, any other in a
    /// portal fetched [`CHUNK`] rows at a time, which needs the batch's
    /// transaction (`false` when the search runs [`On::Alone`]).
    async fn rows(
        &self,
        on: &On<'_, '_>,
        sql: &str,
        params: &[Param<'_>],
        at_most: Option<usize>,
        collect: &mut Collect<'_>,
    ) -> Result<bool, DbError> {
        if at_most.is_some_and(|n| n <= CHUNK) {
            for row in &on.query(self.mode, sql, params).await? {
                if !collect.row(row)? {
                    break;
                }
            }
            return Ok(true);
        }
        let On::Tx(tx) = on else { return Ok(false) };
        scan(tx, self.mode, sql, params, |row| collect.row(row)).await?;
        Ok(true)
    }

    /// Live items under the prefix (and `extra`), newest first, as
    /// Python's store orders a search without a query.
    async fn plain(
        &self,
        on: &On<'_, '_>,
        extra: &str,
        skip: usize,
        take: usize,
    ) -> Result<Option<Vec<Found>>, DbError> {
        let (scope, scope_params) = self.scope(2);
        let pushed = self.read.filter.as_ref().map(|f| pushdown(f, 2 + scope_params.len()));
        let (filtered, exact) = pushed.as_ref().map_or(("", true), |p| (p.sql.as_str(), p.exact));
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM store s WHERE {scope} AND {}{filtered} {extra}
             ORDER BY s.updated_at DESC, s.prefix, s.key",
            live(1)
        );
        let mut params: Vec<Param<'_>> = vec![(&self.now, Type::TIMESTAMPTZ)];
        params.extend(
            scope_params
                .iter()
                .chain(pushed.iter().flat_map(|p| &p.params))
                .map(|p| (p as &(dyn ToSql + Sync), Type::TEXT)),
        );
        self.page(on, sql, params, false, exact, skip, take).await
    }

    /// Live items under the prefix that have vectors, each at the best
    /// cosine similarity of its vectors to the query (`1 - <=>`, the score
    /// of Python's store), highest first.
    async fn ranked(&self, on: &On<'_, '_>, query: &str) -> Result<Option<Vec<Found>>, DbError> {
        let (scope, scope_params) = self.scope(3);
        let sql = format!(
            "WITH r AS (
                SELECT sv.prefix, sv.key, max(1 - (sv.embedding <=> $2::text::vector)) AS score
                FROM store_vectors sv JOIN store s ON s.prefix = sv.prefix AND s.key = sv.key
                WHERE {scope} AND {}
                GROUP BY sv.prefix, sv.key)
             SELECT {ITEM_COLUMNS}, r.score::float8 FROM r JOIN store s ON s.prefix = r.prefix AND s.key = r.key
             ORDER BY r.score DESC, s.prefix, s.key",
            live(1)
        );
        let mut params: Vec<Param<'_>> = vec![(&self.now, Type::TIMESTAMPTZ), (&query, Type::TEXT)];
        params.extend(scope_params.iter().map(|p| (p as &(dyn ToSql + Sync), Type::TEXT)));
        self.page(on, sql, params, true, false, self.read.offset, self.read.limit)
            .await
    }
}

/// The rows a filter matches: `skip` of them skipped, at most `take`
/// kept; how many rows the server sent, and whether the filter refused one.
struct Collect<'a> {
    filter: Option<&'a Filter>,
    scored: bool,
    skip: usize,
    take: usize,
    out: Vec<Found>,
    rows: usize,
    refused: bool,
}

impl<'a> Collect<'a> {
    fn new(filter: Option<&'a Filter>, scored: bool, skip: usize, take: usize) -> Self {
        Collect {
            filter,
            scored,
            skip,
            take,
            out: Vec::new(),
            rows: 0,
            refused: false,
        }
    }

    /// Takes one row; `false` once the page is full.
    fn row(&mut self, row: &Row) -> Result<bool, DbError> {
        self.rows += 1;
        let (item, ttl) = item(row)?;
        if self.filter.is_some_and(|f| !f.matches(&item.value)) {
            self.refused = true;
            return Ok(true);
        }
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(true);
        }
        let score: Option<f64> = if self.scored { row.try_get(6)? } else { None };
        self.out.push((SearchItem { item, score }, ttl));
        Ok(self.out.len() < self.take)
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_as_pgvector_text() {
        assert_eq!(vector_text(&[1.0, 0.5, -2.0, 0.1]), "[1,0.5,-2,0.1]");
        assert_eq!("0.1".parse::<f32>().unwrap(), 0.1f32);
    }

    #[test]
    fn filters_of_strings_and_null_are_decided_by_the_server() {
        let filter = Filter::from_json(&serde_json::json!({"kind": "k3", "gone": null})).unwrap();
        let pushed = pushdown(&filter, 4);
        assert!(pushed.exact);
        assert_eq!(
            pushed.sql,
            " AND s.value -> $4 = $5::jsonb AND coalesce(s.value -> $6, 'null'::jsonb) = 'null'::jsonb"
        );
        assert_eq!(pushed.params, ["kind", "\"k3\"", "gone"]);

        let filter = Filter::new()
            .compare("kind", FilterOp::Eq, "a")
            .compare("kind", FilterOp::Ne, "b");
        let pushed = pushdown(&filter, 2);
        assert!(!pushed.exact, "$ne stays in Rust");
        assert_eq!(pushed.sql, " AND s.value -> $2 = $3::jsonb");
    }

    #[test]
    fn filters_the_server_decides_otherwise_stay_in_rust() {
        for json in [
            serde_json::json!({"n": 1}),
            serde_json::json!({"b": true}),
            serde_json::json!({"n": {"$gt": 1}}),
            serde_json::json!({"o": {"a": "x"}}),
            serde_json::json!({"l": ["x"]}),
            serde_json::json!({"s": "a\0b"}),
        ] {
            let pushed = pushdown(&Filter::from_json(&json).unwrap(), 1);
            assert!(!pushed.exact, "{json}");
            assert!(pushed.sql.is_empty(), "{json}");
        }
    }

    #[test]
    fn namespace_like_escapes_metacharacters() {
        let ns = Namespace::new(["user_1", "50%", "a\\b"]).unwrap();
        let (sql, params) = namespace_condition(&ns, "s.prefix", 2);
        assert_eq!(sql, "(s.prefix = $2 OR s.prefix LIKE $3 ESCAPE '\\')");
        assert_eq!(params, ["user_1.50%.a\\b", "user\\_1.50\\%.a\\\\b.%"]);
    }
}
