//! Searches of the SQLite store: newest first with a filter, and vector
//! searches ranked in Rust.
//!
//! A filter's conditions that SQL decides as the crate's [`Filter`] does
//! are also given to SQLite (`json_extract`, as Python's store filters),
//! so rows that cannot match are never read; every row read is still
//! checked with the [`Filter`] itself, so the SQL only ever narrows. When
//! every condition was given to SQL exactly, SQLite also cuts the page.
//!
//! A vector search reads the embeddings under the prefix (row id and blob
//! only), scores them in Rust as sqlite-vec does, and walks them best
//! first ([`Ranked`]): only the items that reach the page are read, by key.

use std::collections::HashSet;

use rusqlite::types::{ToSql, Value as SqlValue, ValueRef};
use rusqlite::Connection;
use serde_json::Value;

use super::rows::{self, Cosine};
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
}

/// The SQL condition on the namespace (column `column`), with its
/// parameters `:ns` and `:glob`: the namespace itself or below it, as
/// Python's store matches it (GLOB, case-sensitive, its metacharacters
/// escaped).
pub(super) fn namespace_condition(prefix: &Namespace, column: &str) -> (String, Vec<(&'static str, String)>) {
    if prefix.is_empty() {
        return ("1".to_owned(), Vec::new());
    }
    let path = prefix.dotted();
    let glob = format!("{}.*", path.replace('[', "[[]").replace('*', "[*]").replace('?', "[?]"));
    (
        format!("({column} = :ns OR {column} GLOB :glob)"),
        vec![(":ns", path), (":glob", glob)],
    )
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
/// paged from `skip`, up to `take`.
fn newest(conn: &Connection, page: &Page<'_>, extra: &str, skip: usize, take: usize) -> Result<Vec<Found>> {
    let (ns_sql, ns_params) = namespace_condition(page.prefix, "s.prefix");
    let pushed = pushdown(page.filter);
    let sql = format!(
        "SELECT {ITEM_COLUMNS} FROM store s
         WHERE {ns_sql} AND (s.expires_at IS NULL OR s.expires_at > :now){}{extra}
         ORDER BY s.updated_at DESC",
        pushed.sql
    );
    let mut params: Vec<(&str, &dyn ToSql)> = vec![(":now", &page.now)];
    params.extend(ns_params.iter().map(|(k, v)| (*k, v as &dyn ToSql)));
    params.extend(pushed.params.iter().map(|(k, v)| (k.as_str(), v as &dyn ToSql)));
    if pushed.exact {
        // SQL decides the whole filter: it cuts the page; the filter is
        // checked again, and a row it refuses sends the search the long way
        let end = to_i64(skip.saturating_add(take));
        let mut cut = params.clone();
        cut.push((":end", &end));
        let (found, refused) = collect(conn, &format!("{sql} LIMIT :end"), &cut, page.filter, skip, take)?;
        if !refused {
            return Ok(found);
        }
    }
    Ok(collect(conn, &sql, &params, page.filter, skip, take)?.0)
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

/// Every vector under the prefix, scored.
fn score_all(conn: &Connection, page: &Page<'_>, query: &[f32]) -> Result<Vec<Scored>> {
    let (ns_sql, ns_params) = namespace_condition(page.prefix, "prefix");
    let sql = format!("SELECT rowid, embedding FROM store_vectors WHERE {ns_sql}");
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
