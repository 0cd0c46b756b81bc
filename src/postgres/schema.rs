//! The tables of langgraph-checkpoint-postgres 3.2.0 and their migrations
//! (`docs/design.md`, *PostgreSQL backend*).
//!
//! Migration `v` is the statement at index `v`; a database is at version `v`
//! when `checkpoint_migrations` holds `0..=v`. Python's `setup` and ours run
//! the same statements and record the same rows, so either may set up a
//! database the other then uses, and neither re-runs what the other did.

/// The migrations, in order; index = version.
pub(crate) const MIGRATIONS: [&str; 10] = [
    "CREATE TABLE IF NOT EXISTS checkpoint_migrations (v INTEGER PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS checkpoints (\
        thread_id TEXT NOT NULL, \
        checkpoint_ns TEXT NOT NULL DEFAULT '', \
        checkpoint_id TEXT NOT NULL, \
        parent_checkpoint_id TEXT, \
        type TEXT, \
        checkpoint JSONB NOT NULL, \
        metadata JSONB NOT NULL DEFAULT '{}', \
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))",
    "CREATE TABLE IF NOT EXISTS checkpoint_blobs (\
        thread_id TEXT NOT NULL, \
        checkpoint_ns TEXT NOT NULL DEFAULT '', \
        channel TEXT NOT NULL, \
        version TEXT NOT NULL, \
        type TEXT NOT NULL, \
        blob BYTEA, \
        PRIMARY KEY (thread_id, checkpoint_ns, channel, version))",
    "CREATE TABLE IF NOT EXISTS checkpoint_writes (\
        thread_id TEXT NOT NULL, \
        checkpoint_ns TEXT NOT NULL DEFAULT '', \
        checkpoint_id TEXT NOT NULL, \
        task_id TEXT NOT NULL, \
        idx INTEGER NOT NULL, \
        channel TEXT NOT NULL, \
        type TEXT, \
        blob BYTEA NOT NULL, \
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))",
    "ALTER TABLE checkpoint_blobs ALTER COLUMN blob DROP NOT NULL",
    "SELECT 1",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_blobs_thread_id_idx ON checkpoint_blobs(thread_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_writes_thread_id_idx ON checkpoint_writes(thread_id)",
    "ALTER TABLE checkpoint_writes ADD COLUMN IF NOT EXISTS task_path TEXT NOT NULL DEFAULT ''",
];

/// The version of a fully migrated database.
pub(crate) const LATEST_VERSION: i32 = (MIGRATIONS.len() - 1) as i32;

/// Migration `v` as it runs inside a transaction: `CREATE INDEX
/// CONCURRENTLY` cannot (LangGraph issue #7630), so migrations 6–8 build the
/// same indexes without `CONCURRENTLY` (holding a lock on the table while they
/// build, which on a new or small table is brief).
pub(crate) fn transactional(v: usize) -> Option<String> {
    MIGRATIONS.get(v).map(|sql| sql.replace("INDEX CONCURRENTLY", "INDEX"))
}

/// Key of the session advisory lock that serialises concurrent `setup` calls
/// (`pg_advisory_lock(bigint)`): the bytes of `"ckptsetu"`.
pub(crate) const SETUP_LOCK_KEY: i64 = 0x636b_7074_7365_7475;

/// Runs the pending migrations on `client` under the setup advisory lock: a
/// session lock around the whole run, or, `in_transaction`, a transaction
/// lock and the transactional form of each migration.
pub(crate) async fn setup_on<C>(client: &C, in_transaction: bool) -> crate::Result<()>
where
    C: tokio_postgres::GenericClient + Sync,
{
    let fail = |e: tokio_postgres::Error| super::error::DbError::from(e).into_error("setup", false);
    if in_transaction {
        client
            .batch_execute(&format!("SELECT pg_advisory_xact_lock({SETUP_LOCK_KEY})"))
            .await
            .map_err(fail)?;
        return migrate(client, true).await.map_err(fail);
    }
    under_session_lock(client, SETUP_LOCK_KEY, migrate(client, false))
        .await
        .map_err(fail)
}

/// Runs `work` holding the session advisory lock `key`, taken in turns
/// with other sessions and released after `work`, whatever its outcome.
pub(crate) async fn under_session_lock<C, T>(
    client: &C,
    key: i64,
    work: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, tokio_postgres::Error>
where
    C: tokio_postgres::GenericClient + Sync,
{
    // Wait for the lock between statements, not inside one: a session blocked
    // in `pg_advisory_lock` holds a snapshot, and `CREATE INDEX CONCURRENTLY`
    // in the session that has the lock would wait for it (a deadlock).
    let mut pause = std::time::Duration::from_millis(20);
    loop {
        let got = first_cell(
            client
                .simple_query(&format!("SELECT pg_try_advisory_lock({key})"))
                .await?,
        );
        if got.as_deref() == Some("t") {
            break;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(500));
    }
    let out = work.await;
    let unlocked = client.batch_execute(&format!("SELECT pg_advisory_unlock({key})")).await;
    let value = out?;
    unlocked?;
    Ok(value)
}

async fn migrate<C>(client: &C, in_transaction: bool) -> Result<(), tokio_postgres::Error>
where
    C: tokio_postgres::GenericClient + Sync,
{
    client.batch_execute(MIGRATIONS[0]).await?;
    let current = current_version(client).await?.unwrap_or(-1);
    // a stored version is data: i32::MAX runs nothing (no wrap), a
    // negative one starts at 0 (no negative index)
    for v in current.saturating_add(1).max(0)..=LATEST_VERSION {
        let Ok(index) = usize::try_from(v) else { break };
        let sql = if in_transaction {
            transactional(index).unwrap_or_default()
        } else {
            MIGRATIONS[index].to_owned()
        };
        client.batch_execute(&sql).await?;
        client
            .batch_execute(&format!(
                "INSERT INTO checkpoint_migrations (v) VALUES ({v}) ON CONFLICT (v) DO NOTHING"
            ))
            .await?;
    }
    Ok(())
}

/// The greatest recorded migration, `None` before any (or without the
/// table).
pub(crate) async fn current_version<C>(client: &C) -> Result<Option<i32>, tokio_postgres::Error>
where
    C: tokio_postgres::GenericClient + Sync,
{
    let exists = first_cell(
        client
            .simple_query("SELECT to_regclass('checkpoint_migrations') IS NOT NULL")
            .await?,
    );
    if exists.as_deref() != Some("t") {
        return Ok(None);
    }
    let v = first_cell(
        client
            .simple_query("SELECT v FROM checkpoint_migrations ORDER BY v DESC LIMIT 1")
            .await?,
    );
    Ok(v.and_then(|v| v.parse().ok()))
}

pub(crate) fn first_cell(messages: Vec<tokio_postgres::SimpleQueryMessage>) -> Option<String> {
    messages.into_iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactional_drops_only_concurrently() {
        assert_eq!(
            transactional(6).as_deref(),
            Some("CREATE INDEX IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id)")
        );
        assert_eq!(transactional(9).as_deref(), Some(MIGRATIONS[9]));
        assert_eq!(transactional(10), None);
        assert_eq!(LATEST_VERSION, 9);
    }
}
