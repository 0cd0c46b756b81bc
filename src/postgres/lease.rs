//! Fencing on PostgreSQL (see [`crate::fence`]): leases in the side table
//! `checkpointer_leases`, each operation one statement on the lease's row,
//! times on the server's `clock_timestamp()`. A fenced write is one
//! statement whose first part checks the lease (an `UPDATE` of the lease's
//! row, which holds the row's lock until commit, so no acquisition can pass
//! in between) and whose other parts read from that check, so a refused
//! one stores nothing ([`super::queries::PUT_FENCED`]); it is group
//! committed like any write ([`super::group`]).

use std::sync::atomic::{AtomicBool, Ordering};

use tokio_postgres::types::Type;

use super::conn::{query_tx, Param, Pg};
use super::error::DbError;
use super::queries;
use super::rows::get;
use crate::engine::{FenceToken, Fences, LeaseOp};
use crate::error::{Error, Result};

fn int8(n: u64, what: &str) -> Result<i64, DbError> {
    i64::try_from(n).map_err(|_| DbError::Crate(Error::invalid(format!("{what} {n} is beyond PostgreSQL's bigint"))))
}

fn epoch_of(rows: &[tokio_postgres::Row]) -> Result<Option<u64>, DbError> {
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let epoch: i64 = get(row, 0)?;
    u64::try_from(epoch)
        .map(Some)
        .map_err(|_| DbError::Crate(Error::serde(format!("a stored lease epoch is negative: {epoch}"))))
}

/// The check of a fenced change, first in its transaction `tx`: the lease
/// of `thread_id` extended when `fence` (if any) holds it, its row locked
/// until `tx` ends; else `Error::Fenced`, and the caller drops `tx`
/// (rolled back) before sending anything else.
pub(super) async fn check_lease(
    tx: &deadpool_postgres::Transaction<'_>,
    mode: super::conn::StatementMode,
    thread_id: &str,
    fence: Option<&FenceToken>,
) -> Result<(), DbError> {
    let Some(fence) = fence else {
        return Ok(());
    };
    let (epoch, lease) = (int8(fence.epoch, "epoch")?, int8(fence.lease_ms, "lease")?);
    let (thread, writer) = (thread_id.to_owned(), fence.writer.to_string());
    let params: [Param<'_>; 4] = [
        (&thread, Type::TEXT),
        (&writer, Type::TEXT),
        (&epoch, Type::INT8),
        (&lease, Type::INT8),
    ];
    let held = query_tx(tx, mode, queries::LEASE_CHECK, &params).await?;
    if held.is_empty() {
        return Err(DbError::Crate(fence.refused(thread_id)));
    }
    Ok(())
}

impl Pg {
    /// Runs a lease operation (see [`LeaseOp`]).
    pub(super) async fn lease_once(
        &self,
        thread_id: &str,
        writer: &str,
        lease_ms: u64,
        op: LeaseOp,
        sent: &AtomicBool,
    ) -> Result<Option<u64>, DbError> {
        let mode = self.inner.mode;
        let mut client = self.client().await?;
        let lease = int8(lease_ms, "lease")?;
        let (thread, writer) = (thread_id.to_owned(), writer.to_owned());
        // the table is made by the first lease of a database; two sessions
        // making it at once may collide on the catalog: the loser tries again
        for attempt in 0..2 {
            let tx = client.transaction().await?;
            match query_tx(&tx, mode, queries::LEASES_TABLE, &[]).await {
                Ok(_) => {}
                Err(e)
                    if attempt == 0
                        && e.code()
                            .is_some_and(|c| matches!(c.code(), "23505" | "42P07" | "42710")) =>
                {
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            sent.store(true, Ordering::SeqCst);
            let rows = match op {
                LeaseOp::Acquire => {
                    let params: [Param<'_>; 3] = [(&thread, Type::TEXT), (&writer, Type::TEXT), (&lease, Type::INT8)];
                    query_tx(&tx, mode, queries::LEASE_ACQUIRE, &params).await?
                }
                LeaseOp::Renew(epoch) => {
                    let epoch = int8(epoch, "epoch")?;
                    let params: [Param<'_>; 4] = [
                        (&thread, Type::TEXT),
                        (&writer, Type::TEXT),
                        (&epoch, Type::INT8),
                        (&lease, Type::INT8),
                    ];
                    query_tx(&tx, mode, queries::LEASE_RENEW, &params).await?
                }
                LeaseOp::Release(epoch) => {
                    let epoch = int8(epoch, "epoch")?;
                    let params: [Param<'_>; 3] = [(&thread, Type::TEXT), (&writer, Type::TEXT), (&epoch, Type::INT8)];
                    query_tx(&tx, mode, queries::LEASE_RELEASE, &params).await?
                }
            };
            tx.commit().await?;
            return epoch_of(&rows);
        }
        Err(DbError::Crate(Error::storage(
            "postgres",
            true,
            "the lease table could not be created",
        )))
    }
}

impl Pg {
    /// Removes the runs' checkpoints in one transaction. Fenced: the
    /// threads holding them are read, each one's lease checked (and locked,
    /// in thread order) before anything is removed, and the removal is
    /// limited to those threads (one that gains a checkpoint of the runs
    /// meanwhile is left alone).
    pub(super) async fn delete_for_runs_once(
        &self,
        run_ids: &[String],
        sent: &AtomicBool,
        fences: Option<&Fences>,
    ) -> Result<(), DbError> {
        let mode = self.inner.mode;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let mut threads: Vec<String> = Vec::new();
        if let Some(fences) = fences {
            threads = query_tx(&tx, mode, queries::RUN_THREADS, &[(&run_ids, Type::TEXT_ARRAY)])
                .await?
                .iter()
                .map(|r| get::<String>(r, 0))
                .collect::<Result<_>>()?;
            fences.check_all(threads.iter().map(String::as_str))?;
            for thread in &threads {
                check_lease(&tx, mode, thread, Some(&fences.token(thread)?)).await?;
            }
        }
        let keys: Vec<i32> = query_tx(&tx, mode, queries::LOCK_RUN_THREADS, &[(&run_ids, Type::TEXT_ARRAY)])
            .await?
            .iter()
            .map(|r| get::<i32>(r, 0))
            .collect::<Result<_>>()?;
        if !keys.is_empty() {
            let (runs, keys): (Param<'_>, Param<'_>) = ((&run_ids, Type::TEXT_ARRAY), (&keys, Type::INT4_ARRAY));
            match fences {
                None => query_tx(&tx, mode, queries::DELETE_FOR_RUNS, &[runs, keys]).await?,
                Some(_) => {
                    let only: Param<'_> = (&threads, Type::TEXT_ARRAY);
                    query_tx(&tx, mode, queries::DELETE_FOR_RUNS_OF_THREADS, &[runs, keys, only]).await?
                }
            };
        }
        sent.store(true, Ordering::SeqCst);
        tx.commit().await?;
        Ok(())
    }

    /// `COPY_THREAD`'s rows; fenced, in a transaction after the target's
    /// lease check. A `source` of `None` (an id no text column holds) is
    /// bound as NULL: it matches no row, so the copy is of an unknown
    /// thread, the target still checked.
    pub(super) async fn copy_once(
        &self,
        source: Option<&str>,
        target: &str,
        fence: Option<&FenceToken>,
        sent: &AtomicBool,
    ) -> Result<Vec<tokio_postgres::Row>, DbError> {
        let params: [Param<'_>; 2] = [(&source, Type::TEXT), (&target, Type::TEXT)];
        let mut client = self.client().await?;
        if fence.is_none() {
            sent.store(true, Ordering::SeqCst);
            return self.q(&client, queries::COPY_THREAD, &params).await;
        }
        let mode = self.inner.mode;
        let tx = client.transaction().await?;
        check_lease(&tx, mode, target, fence).await?;
        sent.store(true, Ordering::SeqCst);
        let rows = query_tx(&tx, mode, queries::COPY_THREAD, &params).await?;
        tx.commit().await?;
        Ok(rows)
    }
}

/// Leases a purge transaction examines.
const PURGE_BATCH: i64 = 256;

impl Pg {
    /// One batch of `purge_leases`, a transaction of its own holding the
    /// lease table's lock (every fenced write and lease operation waits for
    /// it: one bounded statement). How many went.
    pub(super) async fn purge_batch(&self, older_than_ms: u64, sent: &AtomicBool) -> Result<i64, DbError> {
        let mode = self.inner.mode;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let exists = query_tx(&tx, mode, queries::LEASES_TABLE_EXISTS, &[]).await?;
        if !exists.first().map(|r| get::<bool>(r, 0)).transpose()?.unwrap_or(false) {
            return Ok(0);
        }
        query_tx(&tx, mode, queries::LEASES_LOCK, &[]).await?;
        let older = int8(older_than_ms, "older_than")?;
        let params: [Param<'_>; 2] = [(&older, Type::INT8), (&PURGE_BATCH, Type::INT8)];
        sent.store(true, Ordering::SeqCst);
        let rows = query_tx(&tx, mode, queries::LEASES_PURGE, &params).await?;
        tx.commit().await?;
        Ok(rows.first().map(|r| get::<i64>(r, 0)).transpose()?.unwrap_or(0))
    }

    /// Every batch of `purge_leases`, until one comes back short.
    pub(super) async fn purge_leases_all(&self, older_than_ms: u64) -> Result<u64> {
        let mut purged: u64 = 0;
        loop {
            let sent = AtomicBool::new(false);
            let gone = self
                .purge_batch(older_than_ms, &sent)
                .await
                .map_err(|e| self.fail(e, "purge_leases", false))?;
            purged = purged.saturating_add(u64::try_from(gone).unwrap_or(0));
            if gone < PURGE_BATCH {
                return Ok(purged);
            }
        }
    }
}
