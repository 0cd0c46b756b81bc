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

/// The index of ours on `store`: items newest first, ties in row order
/// (the row id ends every index), the order of a search without a query. Walking it, a search stops
/// at its page instead of reading and sorting every item under its prefix
/// (`super::search`). Not one of Python's migrations and not recorded in
/// `store_migrations`: Python's `SqliteStore` opens, migrates, reads and
/// writes a file that has it, and a file without it is searched the way
/// Python's store searches. Its order is the one Python's statements give
/// without it (a scan of the table sorted by `updated_at`: ties in row
/// order), so Python's results, ties included, are the same with it; an
/// index with more columns (the namespace) would change the order of ties
/// in Python's search over every namespace, which SQLite answers from it.
pub(crate) const TIME_INDEX: &str = "store_updated_at_idx";

/// Our second index: each namespace's items newest first (ties in row
/// order). A search of a namespace without namespaces below it reads its
/// page from it and stops. Python's statement may use it for its prefix
/// condition (it does on SQLite 3.40): its rows of one namespace then come
/// newest first instead of in row order, and its sort by `updated_at`
/// leaves ties in row order, namespace by namespace, as before.
pub(crate) const NAMESPACE_TIME_INDEX: &str = "store_prefix_updated_at_idx";

const CREATE_TIME_INDEXES: &str = "CREATE INDEX IF NOT EXISTS store_updated_at_idx ON store (updated_at DESC);
     CREATE INDEX IF NOT EXISTS store_prefix_updated_at_idx ON store (prefix, updated_at DESC);";

/// What a file holds beside Python's `store` table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    /// `store_vectors`.
    pub vectors: bool,
    /// [`TIME_INDEX`] and [`NAMESPACE_TIME_INDEX`].
    pub time_index: bool,
}

/// Creates or migrates the tables in one transaction (`vectors`: the
/// vector table too), and adds [`TIME_INDEX`] and [`NAMESPACE_TIME_INDEX`];
/// what the file has afterwards.
pub(crate) fn setup(conn: &Connection, vectors: bool) -> Result<Layout> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql_error)?;
    let out = migrate(conn, vectors);
    let end = if out.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = conn.execute_batch(end).map_err(sql_error);
    let has_vectors = out?;
    ended?;
    Ok(has_vectors)
}

fn migrate(conn: &Connection, vectors: bool) -> Result<Layout> {
    apply(conn, "store_migrations", &MIGRATIONS)?;
    if vectors {
        apply(conn, "vector_migrations", &VECTOR_MIGRATIONS)?;
    }
    conn.execute_batch(CREATE_TIME_INDEXES).map_err(sql_error)?;
    layout(conn)
}

/// Whether the file has a schema object of `kind` (`"table"`, `"index"`)
/// named `name`.
pub(crate) fn has(conn: &Connection, kind: &str, name: &str) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sqlite_master WHERE type = ?1 AND name = ?2")
        .and_then(|mut stmt| stmt.exists([kind, name]))
        .map_err(sql_error)
}

fn layout(conn: &Connection) -> Result<Layout> {
    let has = |kind: &str, name: &str| has(conn, kind, name);
    Ok(Layout {
        vectors: has("table", "store_vectors")?,
        time_index: has("index", TIME_INDEX)? && has("index", NAMESPACE_TIME_INDEX)?,
    })
}

/// What a read-only open checks, creating nothing: the `store` table,
/// migrated at least as far as ours (its TTL columns); what the file has.
pub(crate) fn inspect(conn: &Connection) -> Result<Layout> {
    let has = |table: &str| has(conn, "table", table);
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
    layout(conn)
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
