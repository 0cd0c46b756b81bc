//! Searches of the SQLite store: newest first with a filter, and vector
//! searches ranked in Rust.
//!
//! A filter's conditions that SQL decides as the crate's [`Filter`] does
//! are also given to SQLite (`json_extract`, as Python's store filters),
//! so rows that cannot match are never read; every row read is still
//! checked with the [`Filter`] itself, so the SQL only ever narrows. When
//! every condition was given to SQL exactly, SQLite also cuts the page.
//!
//! A search without a query wants the newest items first. When the file
//! has our indexes by time, a namespace without namespaces below it is read
//! newest first from `store_prefix_updated_at_idx` up to its page; otherwise the
//! search walks [`TIME_INDEX`] and stops at its page, or, when the prefix
//! holds few items, reads them through the prefix index and sorts them, as
//! Python's store does (see [`newest`] for the choice). Both give Python's order: `updated_at DESC`, ties as
//! Python's statement returns them (its plans: every item in row order, a
//! prefix through the prefix index, namespace by namespace in row order).
//!
//! A vector search reads the embeddings under the prefix (row id and blob
//! only), scores them in Rust as sqlite-vec does, and walks them best
//! first ([`Ranked`]): only the items that reach the page are read, by key.

use std::cell::Cell;
use std::collections::HashSet;

use rusqlite::types::{ToSql, Value as SqlValue, ValueRef};
use rusqlite::Connection;
use serde_json::Value;

use super::rows::{self, Cosine};
use super::schema::TIME_INDEX;
use crate::sqlite::error::sql_error;
use crate::store::rank::{score_order, Ranked};
use crate::store::{Condition, Filter, FilterOp, Namespace, SearchItem};
use crate::Result;

/// An item found and its `ttl_minutes`.
pub(super) type Found = (SearchItem, Option<f64>);

/// What a search reads.
pub(super) struct Page<'a> {
    pub prefix: &'a Namespace,
    pub filter: Option<&'a Filter>,
    pub limit: usize,
    pub offset: usize,
    pub now: &'a str,
    /// The file has [`TIME_INDEX`].
    pub time_index: bool,
}

/// The SQL condition on the namespace (column `column`), with its
/// parameters `:ns`, `:below` and `:after`: the namespace itself or below
/// it, the rows Python's store matches with `GLOB 'ns.*'` (case-sensitive,
/// its metacharacters escaped). Below it is the range of texts starting
/// with `ns.`, from `ns.` to `ns/` (`/` follows `.`), which is what SQLite
/// makes of that GLOB on the prefix index; a GLOB with a bound pattern
/// makes SQLite prepare the statement again each time a pattern is bound.
pub(super) fn namespace_condition(prefix: &Namespace, column: &str) -> (String, Vec<(&'static str, String)>) {
    if prefix.is_empty() {
        return ("1".to_owned(), Vec::new());
    }
    let path = prefix.dotted();
    let (below, after) = below_range(&path);
    (
        format!("({column} = :ns OR ({column} >= :below AND {column} < :after))"),
        vec![(":ns", path), (":below", below), (":after", after)],
    )
}

/// The bounds of the prefixes below the dotted `path`: from `path.`
/// (included) to `path/` (excluded).
fn below_range(path: &str) -> (String, String) {
    (format!("{path}."), format!("{path}/"))
}

/// The conditions of a filter given to SQL, over column `s.value`.
struct Pushed {
    sql: String,
    params: Vec<(String, SqlValue)>,
    /// Every condition of the filter is in `sql`, decided as [`Filter`]
    /// decides it: SQL may cut the page.
    exact: bool,
}

/// A field name SQL can address (`$."name"`) without quoting rules.
fn plain_field(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn pushdown(filter: Option<&Filter>) -> Pushed {
    let mut out = Pushed {
        sql: String::new(),
        params: Vec::new(),
        exact: true,
    };
    let Some(filter) = filter else { return out };
    for (field, cond) in filter.fields() {
        let equals: Vec<&Value> = match cond {
            Condition::Equals(v) => vec![v],
            Condition::Compare(ops) => {
                let eqs: Vec<&Value> = ops
                    .iter()
                    .filter(|(op, _)| *op == FilterOp::Eq)
                    .map(|(_, v)| v)
                    .collect();
                if eqs.len() < ops.len() {
                    out.exact = false;
                }
                eqs
            }
            _ => {
                out.exact = false;
                continue;
            }
        };
        if !plain_field(field) {
            out.exact = false;
            continue;
        }
        for value in equals {
            let n = out.params.len();
            let (p, v) = (format!(":fp{n}"), format!(":fv{n}"));
            let extract = format!("json_extract(s.value, {p})");
            let bound = match value {
                // a string field equal to the text (or a list or object
                // whose JSON is that text: exact unless it can be one)
                Value::String(s) => {
                    if s.starts_with(['[', '{']) {
                        out.exact = false;
                    }
                    out.sql += &format!(" AND {extract} = {v}");
                    SqlValue::Text(s.clone())
                }
                // a JSON null or a missing field
                Value::Null => {
                    out.sql += &format!(" AND {extract} IS NULL");
                    out.params.push((p, SqlValue::Text(format!("$.\"{field}\""))));
                    continue;
                }
                // numbers and booleans (SQL's 1 and 0) numerically equal:
                // a superset (SQL reads integers beyond 64 bits as REAL)
                Value::Bool(b) => {
                    out.exact = false;
                    out.sql += &format!(" AND {extract} = {v}");
                    SqlValue::Integer(i64::from(*b))
                }
                Value::Number(num) => match (num.as_i64(), num.as_f64()) {
                    (Some(i), _) => {
                        out.exact = false;
                        out.sql += &format!(" AND {extract} = {v}");
                        SqlValue::Integer(i)
                    }
                    (None, Some(f)) if num.as_u64().is_none() && f.is_finite() => {
                        out.exact = false;
                        out.sql += &format!(" AND {extract} = {v}");
                        SqlValue::Real(f)
                    }
                    _ => {
                        out.exact = false;
                        continue;
                    }
                },
                _ => {
                    out.exact = false;
                    continue;
                }
            };
            out.params.push((p, SqlValue::Text(format!("$.\"{field}\""))));
            out.params.push((v, bound));
        }
    }
    out
}

/// Runs `sql` (items at columns 0–5) and keeps the rows the filter
/// matches, after skipping `skip` of them, up to `take`; whether the
/// filter refused a row. A value is decoded only to check the filter,
/// the rest of an item only when it is returned.
fn collect(
    conn: &Connection,
    sql: &str,
    params: &[(&str, &dyn ToSql)],
    filter: Option<&Filter>,
    skip: usize,
    take: usize,
) -> Result<(Vec<Found>, bool)> {
    let mut out = Vec::new();
    let mut refused = false;
    if take == 0 {
        return Ok((out, refused));
    }
    let mut stmt = conn.prepare_cached(sql).map_err(sql_error)?;
    let mut rows = stmt.query(params).map_err(sql_error)?;
    let mut skipped = 0usize;
    while let Some(row) = rows.next().map_err(sql_error)? {
        let value = match filter {
            Some(f) => {
                let value = rows::value(row.get_ref(2).map_err(sql_error)?)?;
                if !f.matches(&value) {
                    refused = true;
                    continue;
                }
                Some(value)
            }
            None => None,
        };
        if skipped < skip {
            skipped += 1;
            continue;
        }
        let (item, ttl) = rows::item_with(row, value)?;
        out.push((SearchItem { item, score: None }, ttl));
        if out.len() >= take {
            break;
        }
    }
    Ok((out, refused))
}

const ITEM_COLUMNS: &str = "s.prefix, s.key, s.value, s.created_at, s.updated_at, s.ttl_minutes";

/// The live items under the page's prefix that satisfy `extra` and the
/// filter, newest first (`updated_at DESC`, as Python's store orders),
/// paged from `skip`, up to `take`. Ties (items of one batch, or of one
/// second in rows Python wrote) come as Python's statement returns them:
/// in row order, by namespace first when there is a prefix ([`tie_order`]).
///
/// A prefix with no namespace below it (probed on the prefix index) is one
/// namespace: its items come newest first from `store_prefix_updated_at_idx`,
/// the page cut in SQL. Otherwise two plans give the same rows. The walk follows [`TIME_INDEX`] and tests
/// each entry (the namespace from the index entry itself, the rest on the
/// row), stopping at the page's end: its cost is the entries it passes,
/// about `(skip + take) × n / p` when the `p` items under the prefix are
/// spread over the `n` of the file. The prefix plan reads the `p` items
/// through the prefix index and sorts them (Python's plan): about `p` rows,
/// each [`ROW_COST`] times an entry of the walk. So a prefix holding fewer
/// than `√((skip + take) × n / ROW_COST)` items is read by prefix (counted,
/// up to that bound, on the prefix index); otherwise the walk runs, bounded
/// at [`WALK_SLACK`] times its estimate (the prefix's items may be old, not
/// spread). A walk that reaches its bound counts the prefix up to
/// `n / ROW_COST`, and either the prefix plan or the whole walk finishes
/// the search: at most a bounded walk and a count more than the cheaper
/// plan. Without a prefix (every item) the walk runs unbounded: the prefix
/// plan would read every item too.
fn newest(conn: &Connection, page: &Page<'_>, extra: &str, skip: usize, take: usize) -> Result<Vec<Found>> {
    if take == 0 {
        return Ok(Vec::new());
    }
    if !page.time_index {
        return by_prefix(conn, page, extra, skip, take);
    }
    if page.prefix.is_empty() {
        if let Some(found) = walk(conn, page, extra, skip, take, None)? {
            return Ok(found);
        }
        return by_prefix(conn, page, extra, skip, take);
    }
    if !has_below(conn, page.prefix)? {
        return one_namespace(conn, page, extra, skip, take);
    }
    let end = u64::try_from(skip.saturating_add(take)).unwrap_or(u64::MAX);
    let rows = row_span(conn, "store")?;
    let few = end.saturating_mul(rows) / ROW_COST;
    let few = few.isqrt();
    let under = count_under(conn, "store", page.prefix, few.saturating_add(1))?;
    if under <= few {
        return by_prefix(conn, page, extra, skip, take);
    }
    let bound = (end.saturating_mul(rows) / under.max(1))
        .saturating_mul(WALK_SLACK)
        .max(MIN_WALK);
    if let Some(found) = walk(conn, page, extra, skip, take, Some(bound))? {
        return Ok(found);
    }
    let cap = rows / ROW_COST;
    if count_under(conn, "store", page.prefix, cap)? < cap {
        return by_prefix(conn, page, extra, skip, take);
    }
    match walk(conn, page, extra, skip, take, None)? {
        Some(found) => Ok(found),
        None => by_prefix(conn, page, extra, skip, take),
    }
}

/// What a row of the prefix plan costs next to an entry of the walk (an
/// index step, the row's lookup and the namespace test): the prefix
/// index's step, the row, its conditions and its place in the sort.
/// Measured on the bench file (10 k items): about 1 µs against 0.5 µs.
const ROW_COST: u64 = 2;

/// How far past its estimate a walk goes before the plans are weighed
/// again.
const WALK_SLACK: u64 = 4;

/// The least bound of a walk: so many entries cost less than a count.
const MIN_WALK: u64 = 1024;

/// `max(rowid) - min(rowid) + 1`: about the rows of `table` (at least as
/// many), read from the ends of the table.
fn row_span(conn: &Connection, table: &str) -> Result<u64> {
    let (lo, hi): (Option<i64>, Option<i64>) = conn
        // two subqueries: `min` and `max` in one select scan the table
        .prepare_cached(&format!(
            "SELECT (SELECT min(rowid) FROM {table}), (SELECT max(rowid) FROM {table})"
        ))
        .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(sql_error)?;
    Ok(match (lo, hi) {
        (Some(lo), Some(hi)) => u64::try_from(hi.saturating_sub(lo)).unwrap_or(0).saturating_add(1),
        _ => 0,
    })
}

/// Whether a namespace below `prefix` holds a row (live or not).
fn has_below(conn: &Connection, prefix: &Namespace) -> Result<bool> {
    let (below, after) = below_range(&prefix.dotted());
    conn.prepare_cached("SELECT 1 FROM store WHERE prefix >= ?1 AND prefix < ?2")
        .and_then(|mut stmt| stmt.exists([below, after]))
        .map_err(sql_error)
}

/// A search of a namespace without namespaces below it: its items newest
/// first (`store_prefix_updated_at_idx`, ties in row order), the page cut in
/// SQL when SQL decides the whole filter.
fn one_namespace(conn: &Connection, page: &Page<'_>, extra: &str, skip: usize, take: usize) -> Result<Vec<Found>> {
    let pushed = pushdown(page.filter);
    let sql = format!(
        "SELECT {ITEM_COLUMNS} FROM store s
         WHERE s.prefix = :ns AND (s.expires_at IS NULL OR s.expires_at > :now){}{extra}
         ORDER BY s.updated_at DESC, s.rowid",
        pushed.sql
    );
    let ns = page.prefix.dotted();
    let mut params: Vec<(&str, &dyn ToSql)> = vec![(":now", &page.now), (":ns", &ns)];
    params.extend(pushed.params.iter().map(|(k, v)| (k.as_str(), v as &dyn ToSql)));
    cut_in_sql(conn, &sql, params, page.filter, pushed.exact, skip, take)
}

/// Runs `sql` for a page: with `LIMIT` when SQL decides the whole filter
/// (`exact`; the filter is checked again, and a row it refuses sends the
/// search the long way), else reading until the page is full.
///
/// The limit is bound as `+:end`: SQLite (3.53) reads a limit bound as a
/// plain parameter while planning, so that binding one makes it prepare
/// the statement again at its next step (a parse and a plan, several
/// times the cost of a short search); an expression it does not read.
fn cut_in_sql(
    conn: &Connection,
    sql: &str,
    params: Vec<(&str, &dyn ToSql)>,
    filter: Option<&Filter>,
    exact: bool,
    skip: usize,
    take: usize,
) -> Result<Vec<Found>> {
    if exact {
        let end = to_i64(skip.saturating_add(take));
        let mut cut = params.clone();
        cut.push((":end", &end));
        let (found, refused) = collect(conn, &format!("{sql} LIMIT +:end"), &cut, filter, skip, take)?;
        if !refused {
            return Ok(found);
        }
    }
    Ok(collect(conn, sql, &params, filter, skip, take)?.0)
}

/// The rows of `table` (live or not) under `prefix`, counted up to `cap`
/// (`+:cap`: as in [`cut_in_sql`]).
fn count_under(conn: &Connection, table: &str, prefix: &Namespace, cap: u64) -> Result<u64> {
    let (ns_sql, ns_params) = namespace_condition(prefix, "prefix");
    let cap = i64::try_from(cap).unwrap_or(i64::MAX);
    let sql = format!("SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {ns_sql} LIMIT +:cap)");
    let mut params: Vec<(&str, &dyn ToSql)> = vec![(":cap", &cap)];
    params.extend(ns_params.iter().map(|(k, v)| (*k, v as &dyn ToSql)));
    let n: i64 = conn
        .prepare_cached(&sql)
        .and_then(|mut s| s.query_row(params.as_slice(), |r| r.get(0)))
        .map_err(sql_error)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

const FN_WALK_GUARD: &str = "checkpointer_store_walk";

thread_local! {
    /// The entries the walk on this thread may still pass (`None`: no
    /// bound). A connection runs on one thread at a time, and its
    /// statement calls [`FN_WALK_GUARD`] on the thread stepping it.
    static WALK_LEFT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Registers [`FN_WALK_GUARD`]: 1 for each index entry the walk passes,
/// an error (which ends the statement) when its bound is spent.
pub(crate) fn register_walk_guard(conn: &Connection) -> Result<()> {
    conn.create_scalar_function(
        FN_WALK_GUARD,
        1,
        rusqlite::functions::FunctionFlags::SQLITE_UTF8,
        |_| {
            WALK_LEFT.with(|left| match left.get() {
                None => Ok(1),
                Some(0) => Err(rusqlite::Error::UserFunctionError("the walk reached its bound".into())),
                Some(n) => {
                    left.set(Some(n - 1));
                    Ok(1)
                }
            })
        },
    )
    .map_err(sql_error)
}

/// Sets this thread's walk bound, and clears it when dropped.
struct WalkBound;

impl WalkBound {
    fn set(bound: Option<u64>) -> WalkBound {
        WALK_LEFT.with(|left| left.set(bound));
        WalkBound
    }

    fn spent() -> bool {
        WALK_LEFT.with(|left| left.get() == Some(0))
    }
}

impl Drop for WalkBound {
    fn drop(&mut self) {
        WALK_LEFT.with(|left| left.set(None));
    }
}

/// The walk along [`TIME_INDEX`], passing at most `bound` entries: `None`
/// when it reached the bound first, or when the index is gone (dropped
/// since the store opened).
fn walk(
    conn: &Connection,
    page: &Page<'_>,
    extra: &str,
    skip: usize,
    take: usize,
    bound: Option<u64>,
) -> Result<Option<Vec<Found>>> {
    let (ns_sql, ns_params) = namespace_condition(page.prefix, "s.prefix");
    let pushed = pushdown(page.filter);
    // the guard reads only the index entry: SQLite calls it before it
    // seeks the row
    let sql = format!(
        "SELECT {ITEM_COLUMNS} FROM store s INDEXED BY {TIME_INDEX}
         WHERE {FN_WALK_GUARD}(s.prefix) AND {ns_sql} AND (s.expires_at IS NULL OR s.expires_at > :now){}{extra}
         ORDER BY s.updated_at DESC, {}",
        pushed.sql,
        tie_order(page.prefix)
    );
    let mut params: Vec<(&str, &dyn ToSql)> = vec![(":now", &page.now)];
    params.extend(ns_params.iter().map(|(k, v)| (*k, v as &dyn ToSql)));
    params.extend(pushed.params.iter().map(|(k, v)| (k.as_str(), v as &dyn ToSql)));
    let _bound = WalkBound::set(bound);
    match collect(conn, &sql, &params, page.filter, skip, take) {
        Ok((found, _)) => Ok(Some(found)),
        Err(_) if WalkBound::spent() => Ok(None),
        Err(e) => {
            if !super::schema::has(conn, "index", TIME_INDEX)? {
                Ok(None)
            } else {
                Err(e)
            }
        }
    }
}

/// How Python's statement orders items of equal `updated_at`: a scan of
/// every item in row order; under a prefix the prefix index's order
/// (`prefix = ?` then the range below it: by namespace, then row).
fn tie_order(prefix: &Namespace) -> &'static str {
    if prefix.is_empty() {
        "s.rowid"
    } else {
        "s.prefix, s.rowid"
    }
}

/// The prefix plan: the items under the prefix read through the prefix
/// index and sorted (the `+` keeps SQLite from ordering by
/// [`TIME_INDEX`]), with the page cut in SQL when SQL decides the whole
/// filter.
fn by_prefix(conn: &Connection, page: &Page<'_>, extra: &str, skip: usize, take: usize) -> Result<Vec<Found>> {
    let (ns_sql, ns_params) = namespace_condition(page.prefix, "s.prefix");
    let pushed = pushdown(page.filter);
    let sql = format!(
        "SELECT {ITEM_COLUMNS} FROM store s
         WHERE {ns_sql} AND (s.expires_at IS NULL OR s.expires_at > :now){}{extra}
         ORDER BY +s.updated_at DESC, {}",
        pushed.sql,
        tie_order(page.prefix)
    );
    let mut params: Vec<(&str, &dyn ToSql)> = vec![(":now", &page.now)];
    params.extend(ns_params.iter().map(|(k, v)| (*k, v as &dyn ToSql)));
    params.extend(pushed.params.iter().map(|(k, v)| (k.as_str(), v as &dyn ToSql)));
    cut_in_sql(conn, &sql, params, page.filter, pushed.exact, skip, take)
}

/// A search without a query.
pub(super) fn search(conn: &Connection, page: &Page<'_>) -> Result<Vec<Found>> {
    newest(conn, page, "", page.offset, page.limit)
}

/// A search with a query, as the in-memory reference ranks: every vector of
/// every live item under the prefix scored with `1 - vec_distance_cosine`
/// (Python's `SqliteStore` expression), an item at its best score, highest
/// first (equal scores by namespace, then key), filtered, paged; then the
/// items without vectors, newest first, from the first one, up to the limit.
pub(super) fn vector_search(conn: &Connection, page: &Page<'_>, query: &[f32]) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    if page.limit > 0 {
        ranked(conn, page, query, &mut found)?;
    }
    let room = page.limit.saturating_sub(found.len());
    if room > 0 {
        found.extend(newest(
            conn,
            page,
            " AND NOT EXISTS (SELECT 1 FROM store_vectors sv WHERE sv.prefix = s.prefix AND sv.key = s.key)",
            0,
            room,
        )?);
    }
    Ok(found)
}

/// One scored vector: its score (`None`: a zero vector) and row id.
type Scored = (Option<f64>, i64);

/// A prefix holding at least this share (one in so many) of the vectors
/// is read by a scan of `store_vectors` in row order rather than through
/// its primary key's index: an index entry and a table seek per vector cost
/// about three steps of the scan (measured on the bench file, 10 k items).
const VECTOR_SCAN_SHARE: u64 = 3;

/// Every vector under the prefix, scored. A prefix holding a large share
/// of the vectors (counted on the index up to that share) is read by a
/// scan of the table, the namespace tested per row.
fn score_all(conn: &Connection, page: &Page<'_>, query: &[f32]) -> Result<Vec<Scored>> {
    let (ns_sql, ns_params) = namespace_condition(page.prefix, "prefix");
    let scan = page.prefix.is_empty() || {
        let cap = row_span(conn, "store_vectors")? / VECTOR_SCAN_SHARE;
        cap > 0 && count_under(conn, "store_vectors", page.prefix, cap)? >= cap
    };
    let how = if scan { " NOT INDEXED" } else { "" };
    let sql = format!("SELECT rowid, embedding FROM store_vectors{how} WHERE {ns_sql}");
    let params: Vec<(&str, &dyn ToSql)> = ns_params.iter().map(|(k, v)| (*k, v as &dyn ToSql)).collect();
    let mut stmt = conn.prepare_cached(&sql).map_err(sql_error)?;
    let mut rows = stmt.query(params.as_slice()).map_err(sql_error)?;
    let cosine = Cosine::new(query);
    let mut scored = Vec::new();
    let refuse = |e: String| sql_error(rusqlite::Error::UserFunctionError(e.into()));
    while let Some(row) = rows.next().map_err(sql_error)? {
        let id: i64 = row.get(0).map_err(sql_error)?;
        let distance = match row.get_ref(1).map_err(sql_error)? {
            ValueRef::Blob(b) => cosine.distance(b).map_err(refuse)?,
            other => return Err(refuse(rows::not_a_vector(other))),
        };
        // SQL's `1.0 - distance`; NaN is SQL's NULL
        let score = 1.0 - distance;
        scored.push(((!score.is_nan()).then_some(score), id));
    }
    Ok(scored)
}

/// The ranked part of a vector search, into `found`.
fn ranked(conn: &Connection, page: &Page<'_>, query: &[f32], found: &mut Vec<Found>) -> Result<()> {
    let scored = score_all(conn, page, query)?;
    let end = page.offset.saturating_add(page.limit);
    let mut ranked = Ranked::new(scored, end.saturating_mul(2), |a: &Scored, b: &Scored| {
        score_order(a.0, b.0).then(a.1.cmp(&b.1))
    })
    .peekable();
    let mut key_of = conn
        .prepare_cached("SELECT prefix, key FROM store_vectors WHERE rowid = ?1")
        .map_err(sql_error)?;
    let mut get = conn
        .prepare_cached(&format!(
            "SELECT {ITEM_COLUMNS} FROM store s
             WHERE s.prefix = ?1 AND s.key = ?2 AND (s.expires_at IS NULL OR s.expires_at > ?3)"
        ))
        .map_err(sql_error)?;
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut skipped = 0usize;
    while let Some((score, id)) = ranked.next() {
        // the vectors of equal score, ordered by namespace and key
        let mut tied = vec![id];
        while let Some((_, next)) = ranked.next_if(|(s, _)| score_order(*s, score).is_eq()) {
            tied.push(next);
        }
        let mut keys = Vec::with_capacity(tied.len());
        for id in tied {
            let key: (String, String) = key_of
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(sql_error)?;
            keys.push(key);
        }
        keys.sort_unstable();
        for key in keys {
            if seen.contains(&key) {
                continue;
            }
            let mut items = get
                .query(rusqlite::params![key.0, key.1, page.now])
                .map_err(sql_error)?;
            let row = items.next().map_err(sql_error)?;
            let item = match row {
                Some(row) => {
                    let value = rows::value(row.get_ref(2).map_err(sql_error)?)?;
                    if page.filter.is_some_and(|f| !f.matches(&value)) {
                        None
                    } else if skipped < page.offset {
                        skipped += 1;
                        None
                    } else {
                        Some(rows::item_with(row, Some(value))?)
                    }
                }
                None => None,
            };
            drop(items);
            seen.insert(key);
            if let Some((item, ttl)) = item {
                found.push((SearchItem { item, score }, ttl));
                if found.len() >= page.limit {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

pub(super) fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use rusqlite::StatementStatus;

    use super::*;

    fn table(prefixes: &[&str]) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE store (prefix TEXT NOT NULL); CREATE INDEX store_prefix_idx ON store (prefix);",
        )
        .unwrap();
        for p in prefixes {
            conn.execute("INSERT INTO store VALUES (?1)", [p]).unwrap();
        }
        conn
    }

    fn matched(conn: &Connection, sql: &str, params: &[(&str, &dyn ToSql)]) -> Vec<String> {
        let mut stmt = conn.prepare_cached(sql).unwrap();
        let rows = stmt.query_map(params, |r| r.get(0)).unwrap();
        let mut out: Vec<String> = rows.collect::<rusqlite::Result<_>>().unwrap();
        out.sort();
        out
    }

    /// The range below a namespace holds the rows Python's `GLOB 'ns.*'`
    /// (metacharacters escaped) matches, and no others: neighbours that
    /// sort between `ns` and `ns.`, or just after `ns/`, labels with GLOB's
    /// metacharacters.
    #[test]
    fn namespace_condition_matches_python_glob() {
        let stored = [
            "a", "a.b", "a.b.c", "a.b.c.d", "a.b-x", "a.b/x", "a.bc", "a.b0", "a.c", "b", "a.b*", "a.b*.c", "a.bx.c",
            "a.[b].c", "a.b.c", "a.b?.c", "a.b?x.c", "a.b]",
        ];
        let conn = table(&stored);
        for labels in [
            vec!["a"],
            vec!["a", "b"],
            vec!["a", "b*"],
            vec!["a", "[b]"],
            vec!["a", "b?"],
            vec!["z"],
        ] {
            let ns = Namespace::new(labels.iter().copied()).unwrap();
            let (sql, params) = namespace_condition(&ns, "prefix");
            let params: Vec<(&str, &dyn ToSql)> = params.iter().map(|(k, v)| (*k, v as &dyn ToSql)).collect();
            let ours = matched(&conn, &format!("SELECT prefix FROM store WHERE {sql}"), &params);
            let path = ns.dotted();
            let glob = format!("{}.*", path.replace('[', "[[]").replace('*', "[*]").replace('?', "[?]"));
            let python = matched(
                &conn,
                "SELECT prefix FROM store WHERE prefix = ?1 OR prefix GLOB ?2",
                &[("?1", &path), ("?2", &glob)],
            );
            assert_eq!(ours, python, "{labels:?}");
        }
    }

    /// The namespace condition and a limit bound as `+:end` keep a cached
    /// statement prepared once, whatever is bound next (a GLOB pattern or a
    /// plain `LIMIT :end` make SQLite prepare it again at each binding).
    #[test]
    fn searches_keep_their_statements_prepared() {
        let conn = table(&["a.b", "a.b.c", "a.c", "d"]);
        let (cond, _) = namespace_condition(&Namespace::new(["a"]).unwrap(), "prefix");
        let sql = format!("SELECT prefix FROM store WHERE {cond} ORDER BY prefix LIMIT +:end");
        for (ns, end) in [("a", 1i64), ("a.b", 2), ("d", 3), ("a", 2)] {
            let (below, after) = below_range(ns);
            let mut stmt = conn.prepare_cached(&sql).unwrap();
            let params: &[(&str, &dyn ToSql)] = &[(":ns", &ns), (":below", &below), (":after", &after), (":end", &end)];
            let found = stmt.query_map(params, |r| r.get::<_, String>(0)).unwrap().count();
            assert!(found >= 1);
            assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0, "{ns} {end}");
        }
    }
}
