//! The SQL text of the SQLite saver: each statement as a constant, and the
//! few whose text depends on the request (a `list` page, `list_threads`, the
//! `task_path` column a read-only file of Python 3.1.1 lacks) assembled by
//! functions that only build text and number its parameters. The functions
//! of `ops.rs` run them.
//!
//! SQL text is fixed; caller data (thread ids, namespaces, filter keys and
//! values, run ids) is always bound as parameters. Where a set of values is
//! needed (`IN`), it is bound as one JSON array and expanded by `json_each`,
//! so each statement keeps one text and stays in the prepared-statement cache.

use rusqlite::types::Value as SqlValue;

use super::schema::SchemaInfo;

// ---------------------------------------------------------------------------
// Administration (`admin.rs`)
// ---------------------------------------------------------------------------

/// How many of the tables `checkpoints` and `writes` the file has.
pub(crate) const CHECKPOINT_TABLES: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('checkpoints', 'writes')";

/// The file's journal mode, as one row.
pub(crate) const JOURNAL_MODE: &str = "PRAGMA journal_mode";

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

/// `INSERT OR REPLACE`: a re-put replaces checkpoint, metadata and parent.
pub(crate) const PUT_CHECKPOINT: &str = "INSERT OR REPLACE INTO checkpoints \
     (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// One row of `writes` after the verb.
macro_rules! put_write {
    ($verb:literal) => {
        concat!(
            $verb,
            "(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        )
    };
}

/// A write on a special channel: replaces the one stored at (task_id, idx).
pub(crate) const PUT_WRITE_REPLACE: &str = put_write!("INSERT OR REPLACE INTO writes ");

/// A write on a regular channel: keeps the first value stored at (task_id, idx).
pub(crate) const PUT_WRITE_KEEP: &str = put_write!("INSERT OR IGNORE INTO writes ");

/// Every checkpoint and write of thread `?1`.
pub(crate) const DELETE_THREAD: [&str; 2] = [
    "DELETE FROM checkpoints WHERE thread_id = ?1",
    "DELETE FROM writes WHERE thread_id = ?1",
];

/// The writes of the checkpoints whose metadata `run_id` is in the JSON
/// array `?1`.
pub(crate) const DELETE_RUN_WRITES: &str = "DELETE FROM writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN \
     (SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints \
      WHERE checkpointer_metadata_run_id(metadata) IN (SELECT value FROM json_each(?1)))";

/// The threads holding a checkpoint whose metadata `run_id` is in the JSON
/// array `?1`.
pub(crate) const RUN_THREADS: &str = "SELECT DISTINCT thread_id FROM checkpoints \
     WHERE checkpointer_metadata_run_id(metadata) IN (SELECT value FROM json_each(?1))";

/// The checkpoints whose metadata `run_id` is in the JSON array `?1`.
pub(crate) const DELETE_RUN_CHECKPOINTS: &str = "DELETE FROM checkpoints \
     WHERE checkpointer_metadata_run_id(metadata) IN (SELECT value FROM json_each(?1))";

/// A row when thread `?1` has a checkpoint.
pub(crate) const THREAD_HAS_CHECKPOINTS: &str = "SELECT 1 FROM checkpoints WHERE thread_id = ?1 LIMIT 1";

/// Whether thread `?1` has a checkpoint, as one boolean row (the text
/// `import_thread` has always used for the question of
/// [`THREAD_HAS_CHECKPOINTS`]).
pub(crate) const THREAD_HAS_CHECKPOINTS_FLAG: &str = "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ?1)";

/// The checkpoints of thread `?1` copied under thread id `?2`.
pub(crate) const COPY_CHECKPOINTS: &str = "INSERT INTO checkpoints \
     (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) \
     SELECT ?2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata \
     FROM checkpoints WHERE thread_id = ?1";

/// The writes of thread `?1` copied under thread id `?2`.
pub(crate) const COPY_WRITES: &str = "INSERT OR REPLACE INTO writes \
     (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) \
     SELECT ?2, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value \
     FROM writes WHERE thread_id = ?1";

/// The namespaces of thread `?1`.
pub(crate) const THREAD_NAMESPACES: &str = "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?1";

/// A row when the root namespace of thread `?1` holds checkpoint `?2`.
pub(crate) const ROOT_HAS_CHECKPOINT: &str =
    "SELECT 1 FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = '' AND checkpoint_id = ?2";

/// Every checkpoint and write of namespace `?2` of thread `?1`.
pub(crate) const DELETE_NAMESPACE: [&str; 2] = [
    "DELETE FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2",
    "DELETE FROM writes WHERE thread_id = ?1 AND checkpoint_ns = ?2",
];

/// The checkpoints and writes of namespace `?2` of thread `?1` older than
/// checkpoint `?3` and not in the JSON array `?4`.
pub(crate) const DELETE_OLDER_UNKEPT: [&str; 2] = [
    "DELETE FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id < ?3 \
     AND checkpoint_id NOT IN (SELECT value FROM json_each(?4))",
    "DELETE FROM writes WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id < ?3 \
     AND checkpoint_id NOT IN (SELECT value FROM json_each(?4))",
];

/// Clears the parent of the checkpoints of namespace `?2` of thread `?1`
/// in the JSON array `?3` whose parent is not stored (any more): run after
/// [`DELETE_OLDER_UNKEPT`], as Python's `PostgresSaver.prune` does.
pub(crate) const FORGET_PRUNED_PARENTS: &str =
    "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
     AND checkpoint_id IN (SELECT value FROM json_each(?3)) AND parent_checkpoint_id NOT IN \
     (SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2)";

/// Retention skeletons of thread `?1`: the columns `rows::record_from_row`
/// reads, then the namespace, the count of pending writes and whether one
/// is on `__interrupt__`, in (ns, id) order, `?4` rows after (ns `?2`, id
/// `?3`) ([`SKELETONS_FIRST`]: from the start, `?2`/`?3` unused).
macro_rules! skeletons {
    ($after:literal) => {
        concat!(
            "SELECT c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, c.metadata, c.checkpoint_ns, ",
            "(SELECT count(*) FROM writes w WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns ",
            "AND w.checkpoint_id = c.checkpoint_id), ",
            "EXISTS (SELECT 1 FROM writes w WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns ",
            "AND w.checkpoint_id = c.checkpoint_id AND w.channel = '__interrupt__') ",
            "FROM checkpoints c WHERE c.thread_id = ?1 ",
            $after,
            "ORDER BY c.checkpoint_ns, c.checkpoint_id LIMIT ?4"
        )
    };
}

/// See [`skeletons!`].
pub(crate) const SKELETONS_FIRST: &str = skeletons!("AND ?2 IS NULL AND ?3 IS NULL ");

/// See [`skeletons!`].
pub(crate) const SKELETONS_AFTER: &str =
    skeletons!("AND (c.checkpoint_ns > ?2 OR (c.checkpoint_ns = ?2 AND c.checkpoint_id > ?3)) ");

/// A retention batch of (thread `?1`, namespace `?2`), ids in the JSON
/// array `?3`: the writes, then the checkpoints (each returns its count).
pub(crate) const RETAIN_DELETE: [&str; 2] = [
    "DELETE FROM writes WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
     AND checkpoint_id IN (SELECT value FROM json_each(?3))",
    "DELETE FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
     AND checkpoint_id IN (SELECT value FROM json_each(?3))",
];

/// Clears the parent of the checkpoints of (thread `?1`, namespace `?2`) in
/// the JSON array `?3` whose parent is in the JSON array `?4` (removed).
pub(crate) const RETAIN_CLEAR_PARENTS: &str =
    "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
     AND checkpoint_id IN (SELECT value FROM json_each(?3)) \
     AND parent_checkpoint_id IN (SELECT value FROM json_each(?4))";

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/// Checkpoint `?3` of (thread `?1`, namespace `?2`), in the columns
/// `rows::record_from_row` reads.
pub(crate) const CHECKPOINT_BY_ID: &str =
    "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints \
     WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3";

/// The latest checkpoint of (thread `?1`, namespace `?2`), as
/// [`CHECKPOINT_BY_ID`].
pub(crate) const LATEST_CHECKPOINT: &str =
    "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints \
     WHERE thread_id = ?1 AND checkpoint_ns = ?2 ORDER BY checkpoint_id DESC LIMIT 1";

/// The writes of checkpoint `?3` of (thread `?1`, namespace `?2`), in the
/// columns `rows::write_from_row` reads (`task_path` empty where the file
/// lacks the column).
pub(crate) fn checkpoint_writes_sql(schema: SchemaInfo) -> &'static str {
    if schema.has_task_path {
        "SELECT checkpoint_id, task_id, channel, type, value, task_path, idx FROM writes \
         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
    } else {
        "SELECT checkpoint_id, task_id, channel, type, value, '', idx FROM writes \
         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
    }
}

/// The parent chain of checkpoint `?3` (or of the latest, when `?3` is
/// NULL) of (thread `?1`, namespace `?2`), nearest first, the checkpoint
/// itself at depth 0.
pub(crate) const ANCESTRY: &str =
    "WITH RECURSIVE chain(depth, checkpoint_id, parent_checkpoint_id, type, checkpoint) AS ( \
       SELECT 0, checkpoint_id, parent_checkpoint_id, type, checkpoint FROM checkpoints \
       WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = coalesce(?3, \
         (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2)) \
       UNION ALL \
       SELECT chain.depth + 1, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint \
       FROM chain CROSS JOIN checkpoints AS c \
       WHERE c.thread_id = ?1 AND c.checkpoint_ns = ?2 AND c.checkpoint_id = chain.parent_checkpoint_id \
     ) SELECT depth, checkpoint_id, type, checkpoint FROM chain";

/// The writes of (thread `?1`, namespace `?2`) on the checkpoints of the JSON
/// array `?3` and the channels of the JSON array `?4`, as
/// [`checkpoint_writes_sql`].
pub(crate) fn chain_writes_sql(schema: SchemaInfo) -> &'static str {
    if schema.has_task_path {
        "SELECT checkpoint_id, task_id, channel, type, value, task_path, idx FROM writes \
         WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
         AND checkpoint_id IN (SELECT value FROM json_each(?3)) AND channel IN (SELECT value FROM json_each(?4))"
    } else {
        "SELECT checkpoint_id, task_id, channel, type, value, '', idx FROM writes \
         WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
         AND checkpoint_id IN (SELECT value FROM json_each(?3)) AND channel IN (SELECT value FROM json_each(?4))"
    }
}

/// The keys of every checkpoint (kind 0) and write (kind 1) of thread `?1`,
/// in one statement so both come from one snapshot: (kind, checkpoint_ns,
/// checkpoint_id, parent_checkpoint_id, task_id, task_path, idx, channel).
pub(crate) fn thread_keys_sql(schema: SchemaInfo) -> &'static str {
    if schema.has_task_path {
        "SELECT 0, checkpoint_ns, checkpoint_id, parent_checkpoint_id, NULL, NULL, NULL, NULL          FROM checkpoints WHERE thread_id = ?1          UNION ALL SELECT 1, checkpoint_ns, checkpoint_id, NULL, task_id, task_path, idx, channel          FROM writes WHERE thread_id = ?1"
    } else {
        "SELECT 0, checkpoint_ns, checkpoint_id, parent_checkpoint_id, NULL, NULL, NULL, NULL          FROM checkpoints WHERE thread_id = ?1          UNION ALL SELECT 1, checkpoint_ns, checkpoint_id, NULL, task_id, '', idx, channel          FROM writes WHERE thread_id = ?1"
    }
}

/// What `list` asks for; fixed for the whole stream.
#[derive(Debug, Clone)]
pub(crate) struct ListQuery {
    pub(crate) thread_id: Option<String>,
    pub(crate) checkpoint_ns: Option<String>,
    pub(crate) checkpoint_id: Option<String>,
    pub(crate) before: Option<String>,
    /// The filter as a msgpack map, `None` when empty.
    pub(crate) filter: Option<Vec<u8>>,
}

/// The position after the last row returned: `list`'s keyset cursor.
#[derive(Debug, Clone)]
pub(crate) struct Cursor {
    pub(crate) checkpoint_id: String,
    pub(crate) thread_id: String,
    pub(crate) checkpoint_ns: String,
}

/// The statement of one `list` page and its parameters.
pub(crate) fn list_sql(query: &ListQuery, cursor: Option<&Cursor>, page: usize) -> (String, Vec<SqlValue>) {
    let mut sql = String::from(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata \
         FROM checkpoints WHERE 1",
    );
    let mut args: Vec<SqlValue> = Vec::new();
    let mut bind = |sql: &mut String, fragment: &str, value: SqlValue| {
        args.push(value);
        sql.push_str(&fragment.replace('?', &format!("?{}", args.len())));
    };
    if let Some(t) = &query.thread_id {
        bind(&mut sql, " AND thread_id = ?", SqlValue::Text(t.clone()));
    }
    if let Some(ns) = &query.checkpoint_ns {
        bind(&mut sql, " AND checkpoint_ns = ?", SqlValue::Text(ns.clone()));
    }
    if let Some(id) = &query.checkpoint_id {
        bind(&mut sql, " AND checkpoint_id = ?", SqlValue::Text(id.clone()));
    }
    if let Some(before) = &query.before {
        bind(&mut sql, " AND checkpoint_id < ?", SqlValue::Text(before.clone()));
    }
    if let Some(c) = cursor {
        // The order is (checkpoint_id, thread_id, checkpoint_ns) descending;
        // columns fixed by the query drop out so the row value matches an
        // index: the primary key, or one of the two indexes of `schema.rs`.
        match (&query.thread_id, &query.checkpoint_ns) {
            (Some(_), Some(_)) => bind(
                &mut sql,
                " AND checkpoint_id < ?",
                SqlValue::Text(c.checkpoint_id.clone()),
            ),
            (Some(_), None) => {
                bind(
                    &mut sql,
                    " AND (checkpoint_id, checkpoint_ns) < (?",
                    SqlValue::Text(c.checkpoint_id.clone()),
                );
                bind(&mut sql, ", ?)", SqlValue::Text(c.checkpoint_ns.clone()));
            }
            (None, _) => {
                bind(
                    &mut sql,
                    " AND (checkpoint_id, thread_id, checkpoint_ns) < (?",
                    SqlValue::Text(c.checkpoint_id.clone()),
                );
                bind(&mut sql, ", ?", SqlValue::Text(c.thread_id.clone()));
                bind(&mut sql, ", ?)", SqlValue::Text(c.checkpoint_ns.clone()));
            }
        }
    }
    if let Some(filter) = &query.filter {
        bind(
            &mut sql,
            " AND checkpointer_metadata_matches(metadata, ?)",
            SqlValue::Blob(filter.clone()),
        );
    }
    let limit = i64::try_from(page).unwrap_or(i64::MAX);
    bind(
        &mut sql,
        " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT ?",
        SqlValue::Integer(limit),
    );

    (sql, args)
}

/// The writes of every checkpoint of a `list` page: the page's (thread,
/// namespace, id) keys are the JSON array `?1`, each probed on the primary
/// key of `writes`; the last column, `json_each`'s `key` (the position in
/// the array), says which checkpoint a write belongs to.
pub(crate) fn page_writes_sql(schema: SchemaInfo) -> &'static str {
    macro_rules! page_writes {
        ($task_path:literal) => {
            concat!(
                "SELECT w.checkpoint_id, w.task_id, w.channel, w.type, w.value, ",
                $task_path,
                ", w.idx, k.key FROM json_each(?1) AS k JOIN writes AS w \
                 ON w.thread_id = json_extract(k.value, '$[0]') AND w.checkpoint_ns = json_extract(k.value, '$[1]') \
                 AND w.checkpoint_id = json_extract(k.value, '$[2]')"
            )
        };
    }
    if schema.has_task_path {
        page_writes!("w.task_path")
    } else {
        page_writes!("''")
    }
}

/// The statement of `list_threads` and its parameters: threads in id order
/// after `after`, each with its latest checkpoint in any namespace, where
/// that checkpoint's metadata matches `filter` (encoded as for
/// `checkpointer_metadata_matches`), at most `limit`.
pub(crate) fn list_threads_sql(
    after: Option<&str>,
    filter: Option<Vec<u8>>,
    limit: Option<usize>,
) -> (String, Vec<SqlValue>) {
    let mut sql = String::from("SELECT t.thread_id, c.checkpoint_ns, c.checkpoint_id, c.metadata FROM (SELECT DISTINCT thread_id FROM checkpoints");
    let mut args: Vec<SqlValue> = Vec::new();
    if let Some(after) = after {
        args.push(SqlValue::Text(after.to_owned()));
        sql.push_str(" WHERE thread_id > ?1");
    }
    sql.push_str(
        " ORDER BY thread_id) AS t JOIN checkpoints AS c ON c.rowid = \
         (SELECT rowid FROM checkpoints WHERE thread_id = t.thread_id \
          ORDER BY checkpoint_id DESC, checkpoint_ns DESC LIMIT 1)",
    );
    if let Some(filter) = filter {
        args.push(SqlValue::Blob(filter));
        sql.push_str(&format!(
            " WHERE checkpointer_metadata_matches(c.metadata, ?{})",
            args.len()
        ));
    }
    sql.push_str(" ORDER BY t.thread_id");
    if let Some(limit) = limit {
        args.push(SqlValue::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" LIMIT ?{}", args.len()));
    }
    (sql, args)
}

// Fencing (`crate::fence`): a side table Python's savers never read. Times
// are milliseconds since the Unix epoch on the writing process's clock.
pub(crate) const LEASES_TABLE: &str = "CREATE TABLE IF NOT EXISTS checkpointer_leases (\
     thread_id TEXT PRIMARY KEY NOT NULL, owner TEXT NOT NULL, epoch INTEGER NOT NULL, \
     expires_ms INTEGER NOT NULL)";
pub(crate) const LEASE_ROW: &str = "SELECT owner, epoch, expires_ms FROM checkpointer_leases WHERE thread_id = ?1";
pub(crate) const LEASE_SET: &str = "INSERT INTO checkpointer_leases (thread_id, owner, epoch, expires_ms) \
     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (thread_id) DO UPDATE SET \
     owner = excluded.owner, epoch = excluded.epoch, expires_ms = excluded.expires_ms";
/// The floor of new epochs: the row of the empty thread id (see
/// `lease::floor`).
pub(crate) const LEASE_FLOOR: &str = "SELECT epoch FROM checkpointer_leases WHERE thread_id = ''";
pub(crate) const LEASE_RAISE_FLOOR: &str = "INSERT INTO checkpointer_leases (thread_id, owner, epoch, expires_ms) \
     VALUES ('', '', ?1, 0) ON CONFLICT (thread_id) DO UPDATE SET epoch = max(epoch, excluded.epoch)";
pub(crate) const LEASE_DELETE: &str = "DELETE FROM checkpointer_leases WHERE thread_id = ?1";
pub(crate) const LEASES_TABLE_EXISTS: &str =
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpointer_leases'";
/// Leases whose deadline is before `?1`, of threads holding nothing, `?2`
/// at most.
pub(crate) const LEASES_TO_PURGE: &str = "SELECT l.thread_id, l.epoch FROM checkpointer_leases l \
     WHERE l.thread_id <> '' AND l.expires_ms < ?1 \
     AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = l.thread_id) \
     AND NOT EXISTS (SELECT 1 FROM writes w WHERE w.thread_id = l.thread_id) LIMIT ?2";
/// The check of a fenced write: one row changed when the lease is held.
pub(crate) const LEASE_CHECK: &str = "UPDATE checkpointer_leases SET expires_ms = ?4 + ?5 \
     WHERE thread_id = ?1 AND owner = ?2 AND epoch = ?3 AND expires_ms > ?4";

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;
    use rusqlite::{params, params_from_iter, Connection};

    use super::*;
    use crate::checkpoint::Checkpoint;
    use crate::serde::{msgpack, Value};
    use crate::sqlite::functions::{encode_filter, register_functions};
    use crate::sqlite::ops::list_page;

    fn conn() -> Connection {
        conn_with(true)
    }

    /// Python's tables, with this crate's indexes or without them.
    fn conn_with(extra_indexes: bool) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        register_functions(&conn).unwrap();
        super::super::schema::setup(&conn, extra_indexes).unwrap();
        conn
    }

    fn plan(conn: &Connection, sql: &str, args: &[SqlValue]) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows: Vec<String> = stmt
            .query_map(params_from_iter(args.iter()), |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        rows.join(" / ")
    }

    /// Every `list` page is read in index order: no sort of the matching rows
    /// (which would make each page cost the whole history).
    #[test]
    fn list_pages_walk_an_index() {
        let conn = conn();
        let cursor = Cursor {
            checkpoint_id: "1ef".into(),
            thread_id: "t".into(),
            checkpoint_ns: String::new(),
        };
        let filter = Some(encode_filter(&IndexMap::from([("step".to_owned(), Value::Int(1))])).unwrap());
        for (thread, ns, expected_index) in [
            (Some("t"), Some(""), "sqlite_autoindex_checkpoints_1"),
            (Some("t"), None, "checkpointer_checkpoints_thread_idx"),
            (None, None, "checkpointer_checkpoints_id_idx"),
        ] {
            for cursor in [None, Some(&cursor)] {
                for filter in [None, filter.clone()] {
                    let query = ListQuery {
                        thread_id: thread.map(str::to_owned),
                        checkpoint_ns: ns.map(str::to_owned),
                        checkpoint_id: None,
                        before: Some("1ff".into()),
                        filter,
                    };
                    let (sql, args) = list_sql(&query, cursor, 10);
                    let plan = plan(&conn, &sql, &args);
                    assert!(!plan.contains("TEMP B-TREE"), "{thread:?} {ns:?}: {plan}");
                    assert!(plan.contains(expected_index), "{thread:?} {ns:?}: {plan}");
                }
            }
        }
    }

    /// The writes of a `list` page are found by primary-key lookups, one per
    /// checkpoint of the page.
    #[test]
    fn page_writes_probe_the_primary_key() {
        let conn = conn();
        let keys = SqlValue::Text(r#"[["t", "", "1"], ["u", "ns", "2"]]"#.into());
        let plan = plan(&conn, page_writes_sql(SchemaInfo { has_task_path: true }), &[keys]);
        assert!(
            plan.contains("SEARCH w USING INDEX sqlite_autoindex_writes_1"),
            "{plan}"
        );
        assert!(!plan.contains("SCAN w"), "{plan}");
    }

    /// Without this crate's indexes (a file Python wrote, opened read-only,
    /// or `extra_indexes(false)`) the listings return the same rows in the
    /// same order, sorting instead of walking an index: no query names one.
    #[test]
    fn listings_need_no_extra_index() {
        let conn = conn_with(false);
        let names: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        for name in super::super::schema::INDEX_NAMES {
            assert!(!names.iter().any(|n| n == name), "{names:?}");
        }
        for (thread, ns) in [(Some("t"), Some("")), (Some("t"), None), (None, None)] {
            let query = ListQuery {
                thread_id: thread.map(str::to_owned),
                checkpoint_ns: ns.map(str::to_owned),
                checkpoint_id: None,
                before: Some("1ff".into()),
                filter: None,
            };
            let (sql, args) = list_sql(&query, None, 10);
            let plan = plan(&conn, &sql, &args);
            assert!(!plan.contains("checkpointer_checkpoints"), "{plan}");
        }
        keyset_cursor_pages_every_row_once(&conn);
    }

    #[test]
    fn keyset_cursor_survives_equal_ids_in_two_threads() {
        keyset_cursor_pages_every_row_once(&conn());
    }

    fn keyset_cursor_pages_every_row_once(conn: &Connection) {
        for thread in ["a", "b"] {
            for id in ["1", "2", "3"] {
                conn.execute(
                    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata) \
                     VALUES (?1, '', ?2, 'msgpack', ?3, '{}')",
                    params![thread, id, msgpack::encode(&Checkpoint::new(0).to_value(true)).unwrap()],
                )
                .unwrap();
            }
        }
        let schema = SchemaInfo { has_task_path: true };
        let query = ListQuery {
            thread_id: None,
            checkpoint_ns: None,
            checkpoint_id: None,
            before: None,
            filter: None,
        };
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) = list_page(conn, schema, &query, cursor.as_ref(), 1).unwrap();
            for t in page {
                let t = t.unwrap().decode(&crate::serde::JsonPlusSerializer).unwrap();
                seen.push(format!("{}/{}", t.config.thread_id, t.config.checkpoint_id.unwrap()));
            }
            match next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, ["b/3", "a/3", "b/2", "a/2", "b/1", "a/1"]);
    }
}
