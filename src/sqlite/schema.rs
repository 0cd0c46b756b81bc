//! The tables of langgraph-checkpoint-sqlite 3.1.2 (`docs/design.md`, *SQLite backend*), the migration
//! Python runs on older files, and the indexes this crate adds.
//!
//! The indexes are plain (non-unique) B-trees over columns Python already
//! writes: Python's `INSERT OR REPLACE`, `DELETE` and `SELECT` statements work
//! unchanged on a file that has them, and Python's own `setup()` leaves them
//! alone (it only runs `CREATE TABLE IF NOT EXISTS`). No query names them:
//! without them (a read-only open of a file Python wrote, or
//! `extra_indexes(false)`) every query returns the same rows, sorting what
//! an index would have given in order.

use rusqlite::{Connection, ErrorCode};

use super::error::sql_error;
use crate::error::{Error, Result};

/// Python's two tables, column for column (`docs/design.md`, *SQLite backend*).
const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint BLOB,
    metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
";

/// Python's migration from 3.1.1 (no `task_path`) to 3.1.2.
const ADD_TASK_PATH: &str = "ALTER TABLE writes ADD COLUMN task_path TEXT NOT NULL DEFAULT ''";

/// This crate's indexes.
///
/// * `(thread_id, checkpoint_id, checkpoint_ns)`: `list` of one thread across
///   all namespaces and `list_threads` walk it in order, a page at a time,
///   instead of sorting the thread's rows for every page.
/// * `(checkpoint_id, thread_id, checkpoint_ns)`: `list` of every thread pages
///   through it newest first.
///
/// Lookups by (thread, namespace[, id]) use the primary key.
const CREATE_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS checkpointer_checkpoints_thread_idx
    ON checkpoints (thread_id, checkpoint_id, checkpoint_ns);
CREATE INDEX IF NOT EXISTS checkpointer_checkpoints_id_idx
    ON checkpoints (checkpoint_id, thread_id, checkpoint_ns);
";

/// What `setup` found out about the file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SchemaInfo {
    /// Whether `writes.task_path` exists (false only for a read-only file
    /// Python 3.1.1 created, which cannot be migrated).
    pub(crate) has_task_path: bool,
}

/// The names of the indexes [`setup`] adds (with `extra_indexes`).
#[cfg(test)]
pub(crate) const INDEX_NAMES: [&str; 2] = ["checkpointer_checkpoints_thread_idx", "checkpointer_checkpoints_id_idx"];

/// Creates the tables (and, with `extra_indexes`, this crate's indexes) if
/// missing and migrates `writes` as Python does. Idempotent. A read-only
/// file is accepted as it is (see [`inspect`]).
pub(crate) fn setup(conn: &Connection, extra_indexes: bool) -> Result<SchemaInfo> {
    if conn.is_readonly(rusqlite::MAIN_DB).map_err(sql_error)? {
        return inspect(conn);
    }
    conn.execute_batch(CREATE_TABLES).map_err(sql_error)?;
    let mut has_task_path = has_column(conn, "writes", "task_path")?;
    if !has_task_path {
        match conn.execute_batch(ADD_TASK_PATH) {
            Ok(()) => has_task_path = true,
            // another process migrated it between our check and the ALTER
            Err(e) if e.to_string().contains("duplicate column name") => has_task_path = true,
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::ReadOnly) => {}
            Err(e) => return Err(sql_error(e)),
        }
    }
    if extra_indexes {
        conn.execute_batch(CREATE_INDEXES).map_err(sql_error)?;
    }
    Ok(SchemaInfo { has_task_path })
}

/// What a read-only open finds, changing nothing: Python's two tables must
/// be there (a file without them is not a checkpoint database, and every
/// read would fail); `task_path` may be missing (Python 3.1.1).
pub(crate) fn inspect(conn: &Connection) -> Result<SchemaInfo> {
    for table in ["checkpoints", "writes"] {
        let mut stmt = conn
            .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")
            .map_err(sql_error)?;
        if !stmt.exists([table]).map_err(sql_error)? {
            return Err(Error::storage(
                "sqlite",
                false,
                format!("the file has no {table} table: not a checkpoint database (a read-only open creates nothing)"),
            ));
        }
    }
    Ok(SchemaInfo {
        has_task_path: has_column(conn, "writes", "task_path")?,
    })
}

fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool> {
    let mut stmt = conn
        .prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")
        .map_err(sql_error)?;
    stmt.exists([table, column]).map_err(sql_error)
}
