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
use crate::engine::LeaseOp;
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
