//! The store's tables: the migrations of Python's `PostgresStore`
//! (langgraph-checkpoint-postgres 3.2.0), numbered as it numbers them in
//! `store_migrations` and `vector_migrations`, so either side sets up a
//! database the other then uses and neither re-runs what the other ran.

use tokio_postgres::GenericClient;

use crate::postgres::schema::{first_cell, under_session_lock};
use crate::store::StoreError;
use crate::Result;

/// `store_migrations` 0–3.
const MIGRATIONS: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS store (
        prefix text NOT NULL,
        key text NOT NULL,
        value jsonb NOT NULL,
        created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
        updated_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
        PRIMARY KEY (prefix, key)
    )",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS store_prefix_idx ON store USING btree (prefix text_pattern_ops)",
    "ALTER TABLE store
        ADD COLUMN IF NOT EXISTS expires_at TIMESTAMP WITH TIME ZONE,
        ADD COLUMN IF NOT EXISTS ttl_minutes INT",
    "CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at) WHERE expires_at IS NOT NULL",
];

/// Our index on `store`: items newest first, ties by namespace and key,
/// the order of a search without a query, so that the server can walk it
/// and stop at the page instead of sorting every item under the prefix
/// (the planner chooses, by its statistics). Not one of Python's
/// migrations, not recorded in `store_migrations`: Python's
/// `PostgresStore` sets up, reads and writes a database that has it.
const CREATE_TIME_INDEX: &str =
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS store_updated_at_idx ON store (updated_at DESC, prefix, key)";

/// `vector_migrations` 0–2 for an index of `dims` dimensions, as Python's
/// default `PostgresIndexConfig` makes them: `vector` columns, cosine
/// distance, an HNSW index.
fn vector_migrations(dims: usize) -> [String; 3] {
    [
        "DO $$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
                CREATE EXTENSION vector;
            END IF;
        END $$"
            .to_owned(),
        format!(
            "CREATE TABLE IF NOT EXISTS store_vectors (
                prefix text NOT NULL,
                key text NOT NULL,
                field_name text NOT NULL,
                embedding vector({dims}),
                created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
                updated_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
                PRIMARY KEY (prefix, key, field_name),
                FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
            )"
        ),
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS store_vectors_embedding_idx ON store_vectors
            USING hnsw (embedding vector_cosine_ops)"
            .to_owned(),
    ]
}

/// Key of the session advisory lock that serialises our store `setup`
/// calls: the bytes of `"ckptstor"`.
const STORE_SETUP_LOCK_KEY: i64 = 0x636b_7074_7374_6f72;

/// Whether the server has pgvector installed in this database, or
/// available for `CREATE EXTENSION`.
pub(super) async fn has_pgvector<C: GenericClient + Sync>(client: &C) -> Result<bool, tokio_postgres::Error> {
    let found = first_cell(
        client
            .simple_query(
                "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') \
                 OR EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
            )
            .await?,
    );
    Ok(found.as_deref() == Some("t"))
}

/// Creates or migrates the tables (`dims`: an index is configured, so the
/// vector tables too) and adds our index by time, outside any transaction (`CREATE INDEX
/// CONCURRENTLY` cannot run in one), under a session advisory lock. With
/// an index and no pgvector on the server, refuses before anything is
/// created.
pub(super) async fn setup<C: GenericClient + Sync>(client: &C, dims: Option<usize>) -> Result<()> {
    let fail = |e: tokio_postgres::Error| crate::postgres::error::DbError::from(e).into_error("store setup", false);
    if dims.is_some() && !has_pgvector(client).await.map_err(fail)? {
        return Err(StoreError::PgvectorMissing.into());
    }
    under_session_lock(client, STORE_SETUP_LOCK_KEY, async {
        apply(client, "store_migrations", &MIGRATIONS.map(str::to_owned)).await?;
        if let Some(dims) = dims {
            apply(client, "vector_migrations", &vector_migrations(dims)).await?;
        }
        client.batch_execute(CREATE_TIME_INDEX).await
    })
    .await
    .map_err(fail)
}

/// Checks that the database holds a store at the latest migration without
/// creating or migrating anything (a read-only open); gives whether it has
/// `store_vectors`.
pub(super) async fn inspect<C: GenericClient + Sync>(client: &C) -> Result<bool> {
    let fail =
        |e: tokio_postgres::Error| crate::postgres::error::DbError::from(e).into_error("store inspection", false);
    let refuse = |why: String| Err(crate::Error::storage("postgres", false, why));
    let row = client
        .query_one(
            "SELECT to_regclass('store') IS NOT NULL, to_regclass('store_migrations') IS NOT NULL, \
                    to_regclass('store_vectors') IS NOT NULL",
            &[],
        )
        .await
        .map_err(fail)?;
    let (store, migrations, vectors): (bool, bool, bool) = (row.get(0), row.get(1), row.get(2));
    if !store {
        return refuse(
            "the database has no store table: not a store of LangGraph's PostgresStore or checkpointer \
             (a read-only open creates nothing)"
                .into(),
        );
    }
    let done: Option<i32> = if migrations {
        client
            .query_one("SELECT max(v) FROM store_migrations", &[])
            .await
            .map_err(fail)?
            .get(0)
    } else {
        None
    };
    let last = MIGRATIONS.len() - 1;
    if done.and_then(|v| usize::try_from(v).ok()).is_none_or(|v| v < last) {
        return refuse(format!(
            "the store table is at migration {} of {last}: open it writable once to migrate it",
            done.map_or_else(|| "none".to_owned(), |v| v.to_string())
        ));
    }
    Ok(vectors)
}

/// Runs the migrations after the highest version `table` records (as
/// Python does: a database migrated further by a newer Python is left
/// alone).
async fn apply<C: GenericClient + Sync>(
    client: &C,
    table: &str,
    migrations: &[String],
) -> Result<(), tokio_postgres::Error> {
    client
        .batch_execute(&format!("CREATE TABLE IF NOT EXISTS {table} (v INTEGER PRIMARY KEY)"))
        .await?;
    let done = first_cell(
        client
            .simple_query(&format!("SELECT v FROM {table} ORDER BY v DESC LIMIT 1"))
            .await?,
    );
    // a stored version is data: a huge one runs nothing, a negative one
    // starts at 0
    let next = done
        .and_then(|v| v.parse::<i64>().ok())
        .map_or(0, |v| usize::try_from(v.saturating_add(1)).unwrap_or(0));
    for (v, sql) in migrations.iter().enumerate().skip(next) {
        client.batch_execute(sql).await?;
        client
            .batch_execute(&format!(
                "INSERT INTO {table} (v) VALUES ({v}) ON CONFLICT (v) DO NOTHING"
            ))
            .await?;
    }
    Ok(())
}
