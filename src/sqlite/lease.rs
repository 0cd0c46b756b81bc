//! Fencing on SQLite (see [`crate::fence`]): leases in the side table
//! `checkpointer_leases`, read and written by the writer's jobs, so each
//! lease operation and each fenced write's check run inside the write
//! transaction that holds the file's write lock. The clock is the wall
//! clock of the process running that transaction (the one writer of the
//! moment): processes sharing a file on one machine share it.

use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension};

use super::error::sql_error;
use super::queries;
use crate::engine::{FenceToken, LeaseOp};
use crate::error::{Error, Result};

/// Milliseconds since the Unix epoch on this process's clock.
fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

fn ms(lease_ms: u64) -> Result<i64> {
    i64::try_from(lease_ms).map_err(|_| Error::invalid("lease too long"))
}

fn epoch_u64(epoch: i64) -> Result<u64> {
    u64::try_from(epoch).map_err(|_| Error::serde(format!("a stored lease epoch is negative: {epoch}")))
}

/// Runs a lease operation inside the writer's transaction.
pub(crate) fn run(conn: &Connection, thread_id: &str, writer: &str, lease_ms: u64, op: LeaseOp) -> Result<Option<u64>> {
    conn.execute_batch(queries::LEASES_TABLE).map_err(sql_error)?;
    let now = now_ms();
    let lease = ms(lease_ms)?;
    let row: Option<(String, i64, i64)> = conn
        .prepare_cached(queries::LEASE_ROW)
        .and_then(|mut s| {
            s.query_row([thread_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(sql_error)?;
    let ours = |epoch: u64| -> Result<bool> {
        Ok(match &row {
            Some((owner, e, _)) => owner == writer && epoch_u64(*e)? == epoch,
            None => false,
        })
    };
    let (epoch, expires) = match op {
        LeaseOp::Acquire => match &row {
            Some((owner, _, expires)) if *expires > now && owner != writer => return Ok(None),
            Some((_, e, _)) => match epoch_u64(*e)?.checked_add(1) {
                Some(next) => (next, now.saturating_add(lease)),
                None => return Ok(None),
            },
            None => match floor(conn)?.checked_add(1) {
                Some(first) => (first, now.saturating_add(lease)),
                None => return Ok(None),
            },
        },
        LeaseOp::Renew(epoch) if ours(epoch)? => (epoch, now.saturating_add(lease)),
        LeaseOp::Release(epoch) if ours(epoch)? => (epoch, now),
        LeaseOp::Renew(_) | LeaseOp::Release(_) => return Ok(None),
    };
    let stored = i64::try_from(epoch).map_err(|_| Error::invalid("lease epoch overflow"))?;
    conn.prepare_cached(queries::LEASE_SET)
        .and_then(|mut s| s.execute(rusqlite::params![thread_id, writer, stored, expires]))
        .map_err(sql_error)?;
    Ok(Some(epoch))
}

/// The greatest epoch of a purged lease (the row of the empty thread id,
/// which names no thread: every lease operation refuses an empty id), 0
/// when none was purged.
fn floor(conn: &Connection) -> Result<u64> {
    let epoch: Option<i64> = conn
        .prepare_cached(queries::LEASE_FLOOR)
        .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
        .map_err(sql_error)?;
    epoch.map_or(Ok(0), epoch_u64)
}

/// Leases a purge job examines.
pub(crate) const PURGE_BATCH: usize = 256;

/// One batch of `purge_leases`, inside one write job: up to
/// [`PURGE_BATCH`] leases of threads holding nothing whose deadline passed
/// more than `older_than_ms` ago; the floor raised to their epochs, then
/// the rows deleted. How many went.
pub(crate) fn purge_batch(conn: &Connection, older_than_ms: u64) -> Result<usize> {
    let exists = conn
        .prepare_cached(queries::LEASES_TABLE_EXISTS)
        .and_then(|mut s| s.exists([]))
        .map_err(sql_error)?;
    if !exists {
        return Ok(0);
    }
    let cutoff = now_ms().saturating_sub(ms(older_than_ms)?);
    let gone: Vec<(String, i64)> = conn
        .prepare_cached(queries::LEASES_TO_PURGE)
        .and_then(|mut s| {
            s.query_map(rusqlite::params![cutoff, PURGE_BATCH as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?
            .collect()
        })
        .map_err(sql_error)?;
    let Some(top) = gone.iter().map(|(_, e)| *e).max() else {
        return Ok(0);
    };
    conn.prepare_cached(queries::LEASE_RAISE_FLOOR)
        .and_then(|mut s| s.execute([top]))
        .map_err(sql_error)?;
    for (thread, _) in &gone {
        conn.prepare_cached(queries::LEASE_DELETE)
            .and_then(|mut s| s.execute([thread]))
            .map_err(sql_error)?;
    }
    Ok(gone.len())
}

/// The check of a fenced write, first in its job: the lease is extended
/// when `fence` holds it, else the job fails with `Error::Fenced` and its
/// savepoint is rolled back (nothing stored).
pub(crate) fn check(conn: &Connection, thread_id: &str, fence: Option<&FenceToken>) -> Result<()> {
    let Some(token) = fence else {
        return Ok(());
    };
    let epoch = i64::try_from(token.epoch).map_err(|_| token.refused(thread_id))?;
    let changed = conn
        .prepare_cached(queries::LEASE_CHECK)
        .and_then(|mut s| {
            s.execute(rusqlite::params![
                thread_id,
                &*token.writer,
                epoch,
                now_ms(),
                ms(token.lease_ms).unwrap_or(i64::MAX)
            ])
        })
        .map_err(sql_error)?;
    if changed == 1 {
        Ok(())
    } else {
        Err(token.refused(thread_id))
    }
}
