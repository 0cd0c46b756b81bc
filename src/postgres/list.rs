//! The statement of one `list` page: the query's conditions, the keyset
//! cursor and the JSONB pre-filter of the metadata filter, with owned
//! parameters.

use std::collections::HashSet;

use indexmap::IndexMap;
use tokio_postgres::types::{ToSql, Type};

use super::conn::JsonbParam;
use super::{jsonb, queries};
use crate::engine::ListQuery;
use crate::serde::Value;

/// A listing: the query, its JSONB pre-filter, and whether it can match at
/// all (PostgreSQL text cannot hold U+0000, so a key with one names nothing).
pub(crate) struct PgQuery {
    pub(super) query: ListQuery,
    pub(super) prefilter: Option<String>,
    pub(super) impossible: bool,
}

/// The keyset position after a page: (checkpoint id, thread, namespace).
pub(crate) type PgCursor = (String, String, String);

/// One page query of `list`, with owned parameters.
pub(crate) struct ListPage<'a> {
    pub(crate) sql: String,
    pub(crate) params: Vec<(Box<dyn ToSql + Sync + Send + 'a>, Type)>,
}

/// The part of a metadata filter JSONB containment (`@>`) can check without
/// ever excluding a row the exact filter accepts, as JSON text; `None` when no
/// entry qualifies.
///
/// Left out: `null` entries (they also match a missing key), numbers beyond
/// ±2^53 (the exact filter compares them as `f64`, JSONB exactly), and
/// anything JSONB cannot hold (bytes, extension values, non-string keys,
/// duplicate keys, U+0000, NaN). Everything else is equal only if contained.
pub(crate) fn prefilter(filter: &IndexMap<String, Value>) -> Option<String> {
    fn safe(v: &Value) -> bool {
        const LIMIT: f64 = 9_007_199_254_740_992.0;
        match v {
            Value::Nil | Value::Bool(_) => true,
            Value::Int(i) => i.unsigned_abs() <= 1 << 53,
            Value::UInt(_) => false,
            Value::Float(f) => f.is_finite() && f.abs() <= LIMIT,
            Value::F32(f) => f.is_finite() && f64::from(*f).abs() <= LIMIT,
            Value::Str(s) => !s.contains('\0'),
            Value::Array(items) => items.iter().all(safe),
            Value::Map(entries) => {
                let mut keys = HashSet::new();
                entries
                    .iter()
                    .all(|(k, v)| k.as_str().is_some_and(|k| !k.contains('\0') && keys.insert(k)) && safe(v))
            }
            Value::Bin(_) | Value::Ext(_) => false,
        }
    }
    let entries: Vec<(Value, Value)> = filter
        .iter()
        .filter(|(k, v)| !v.is_nil() && !k.contains('\0') && safe(v))
        .map(|(k, v)| (Value::Str(k.as_str().into()), v.clone()))
        .collect();
    if entries.is_empty() {
        return None;
    }
    jsonb::to_json(&Value::Map(entries.into()), "filter").ok()
}

/// The statement of one `list` page after `cursor`, at most `size` rows.
pub(super) fn list_page(q: &PgQuery, cursor: Option<&PgCursor>, size: usize) -> ListPage<'static> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefilter_keeps_only_safe_entries() {
        let mut f = IndexMap::new();
        f.insert("source".to_owned(), Value::from("loop"));
        f.insert("missing".to_owned(), Value::Nil);
        f.insert("big".to_owned(), Value::Int(1 << 60));
        f.insert(
            "nested".to_owned(),
            Value::map([("a", Value::Nil), ("b", Value::Float(1.5))]),
        );
        f.insert("bytes".to_owned(), Value::Bin(bytes::Bytes::from_static(b"x")));
        f.insert(
            "dup".to_owned(),
            Value::Map((vec![(Value::from("k"), Value::Int(1)), (Value::from("k"), Value::Int(2))]).into()),
        );
        assert_eq!(
            prefilter(&f).as_deref(),
            Some(r#"{"source":"loop","nested":{"a":null,"b":1.5}}"#)
        );
        let mut only_null = IndexMap::new();
        only_null.insert("x".to_owned(), Value::Nil);
        assert_eq!(prefilter(&only_null), None);
    }
}
