//! The store's tables: exactly the migrations of Python's `SqliteStore`
//! (langgraph-checkpoint-sqlite 3.1.2), numbered as it numbers them in
//! `store_migrations` and `vector_migrations`, so either side migrates a
//! file the other created.

use rusqlite::Connection;

use crate::sqlite::error::sql_error;
use crate::Result;

/// `store_migrations` 0–4.
const MIGRATIONS: [&str; 5] = [
    "CREATE TABLE IF NOT EXISTS store (
        prefix text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
        updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
        PRIMARY KEY (prefix, key)
    )",
    "CREATE INDEX IF NOT EXISTS store_prefix_idx ON store (prefix)",
    "ALTER TABLE store ADD COLUMN expires_at TIMESTAMP",
    "ALTER TABLE store ADD COLUMN ttl_minutes REAL",
    "CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at) WHERE expires_at IS NOT NULL",
];

/// `vector_migrations` 0.
const VECTOR_MIGRATIONS: [&str; 1] = ["CREATE TABLE IF NOT EXISTS store_vectors (
        prefix text NOT NULL,
        key text NOT NULL,
        field_name text NOT NULL,
        embedding BLOB,
        created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
        updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
        PRIMARY KEY (prefix, key, field_name),
        FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
    )"];

/// Creates or migrates the tables in one transaction (`vectors`: the
/// vector table too); whether the file has `store_vectors` afterwards.
pub(crate) fn setup(conn: &Connection, vectors: bool) -> Result<bool> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql_error)?;
    let out = migrate(conn, vectors);
    let end = if out.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = conn.execute_batch(end).map_err(sql_error);
    let has_vectors = out?;
    ended?;
    Ok(has_vectors)
}

fn migrate(conn: &Connection, vectors: bool) -> Result<bool> {
    apply(conn, "store_migrations", &MIGRATIONS)?;
    if vectors {
        apply(conn, "vector_migrations", &VECTOR_MIGRATIONS)?;
    }
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'store_vectors'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .map_err(sql_error)
}

/// What a read-only open checks, creating nothing: the `store` table,
/// migrated at least as far as ours (its TTL columns); whether the file has
/// `store_vectors`.
pub(crate) fn inspect(conn: &Connection) -> Result<bool> {
    let has = |table: &str| -> Result<bool> {
        conn.prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")
            .and_then(|mut stmt| stmt.exists([table]))
            .map_err(sql_error)
    };
    let refuse = |why: String| Err(crate::Error::storage("sqlite", false, why));
    if !has("store")? {
        return refuse(
            "the file has no store table: not a store of LangGraph's SqliteStore or checkpointer \
             (a read-only open creates nothing)"
                .into(),
        );
    }
    let done: Option<i64> = if has("store_migrations")? {
        conn.query_row("SELECT max(v) FROM store_migrations", [], |r| r.get(0))
            .map_err(sql_error)?
    } else {
        None
    };
    let last = MIGRATIONS.len() - 1;
    if done.is_none_or(|v| v < last as i64) {
        return refuse(format!(
            "the store table is at migration {} of {last}: open it writable once to migrate it",
            done.map_or_else(|| "none".to_owned(), |v| v.to_string())
        ));
    }
    has("store_vectors")
}

/// Runs the migrations after the highest version `table` records (as
/// Python does: a file migrated further by a newer Python is left alone).
fn apply(conn: &Connection, table: &str, migrations: &[&str]) -> Result<()> {
    conn.execute_batch(&format!("CREATE TABLE IF NOT EXISTS {table} (v INTEGER PRIMARY KEY)"))
        .map_err(sql_error)?;
    let done: Option<i64> = conn
        .query_row(&format!("SELECT max(v) FROM {table}"), [], |r| r.get(0))
        .map_err(sql_error)?;
    let next = done.map_or(0, |v| usize::try_from(v.saturating_add(1)).unwrap_or(usize::MAX));
    for (v, sql) in migrations.iter().enumerate().skip(next) {
        conn.execute_batch(sql).map_err(sql_error)?;
        conn.execute(&format!("INSERT INTO {table} (v) VALUES (?1)"), [v as i64])
            .map_err(sql_error)?;
    }
    Ok(())
}
