//! Fencing on Redis (see [`crate::fence`]): the lease is the key `B:lease`
//! of the thread's slot, read and written only by scripts (`LEASE`, and the
//! `FENCED_*` writes, which check it first), on the server's clock
//! (`TIME`). A cluster runs each on the thread's master, atomically.

use redis::ScriptInvocation;

use super::admin::{glob_escape, primary_slots, route};
use super::backend::{Conn, Redis};
use super::keys::refuse_nul;
use super::keys::LAYOUT;
use super::queries;
use crate::engine::{FenceToken, LeaseOp};
use crate::error::{Error, Result};

/// The fence's arguments, after every other argument (`FENCE_ARGS` takes
/// them off the end).
pub(super) fn fence_args(inv: &mut ScriptInvocation<'_>, fence: &FenceToken) {
    inv.arg(&*fence.writer).arg(fence.epoch.to_string()).arg(fence.lease_ms);
}

/// A fenced script's answer: -1 when the lease was not held.
pub(super) fn fenced_status(status: i64, thread_id: &str, fence: &FenceToken) -> Result<()> {
    if status == -1 {
        Err(fence.refused(thread_id))
    } else {
        Ok(())
    }
}

impl Redis {
    pub(super) async fn lease_op(
        &self,
        thread_id: &str,
        writer: &str,
        lease_ms: u64,
        op: LeaseOp,
    ) -> Result<Option<u64>> {
        refuse_nul(thread_id, "thread_id")?;
        let mut inv = self.on_thread(&queries::LEASE, thread_id, 0);
        let (name, epoch) = match op {
            LeaseOp::Acquire => ("acquire", 0),
            LeaseOp::Renew(e) => ("renew", e),
            LeaseOp::Release(e) => ("release", e),
        };
        inv.arg(name).arg(writer).arg(lease_ms).arg(epoch.to_string());
        let answer: Option<String> = self.invoke(&inv, "lease", false).await?;
        answer
            .map(|e| {
                e.parse::<u64>()
                    .map_err(|_| Error::serde(format!("a stored lease epoch is not a number: {e:?}")))
            })
            .transpose()
    }
}

/// Lease keys asked of one `SCAN` step of a purge.
const PURGE_SCAN: usize = 256;

impl Redis {
    /// `purge_leases`: the prefix's lease keys found with `SCAN` (on the
    /// server, or on each primary of a cluster), a bounded step at a time,
    /// each removed by [`queries::PURGE_LEASE`] on its thread's slot when it
    /// qualifies. How many went.
    pub(super) async fn purge_leases_all(&self, older_than_ms: u64) -> Result<u64> {
        let op = "purge_leases";
        let failed = |e| super::error::storage(e, op, false, &self.secrets);
        let pattern = format!("{}:{}:{{*}}:lease", glob_escape(&self.keys.prefix), LAYOUT);
        let mut conn = self.conn();
        let nodes: Vec<Option<u16>> = match &conn {
            Conn::Single(_) => vec![None],
            Conn::Cluster(_) => primary_slots(&mut conn)
                .await
                .map_err(failed)?
                .into_iter()
                .map(Some)
                .collect(),
        };
        let mut purged: u64 = 0;
        for node in nodes {
            let mut cursor: u64 = 0;
            loop {
                let mut scan = redis::pipe();
                scan.cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(PURGE_SCAN);
                let reply = route(&mut conn, node, scan, 1).await.map_err(failed)?;
                let reply = reply.into_iter().next().unwrap_or(redis::Value::Nil);
                let (next, found): (u64, Vec<String>) = redis::from_redis_value(reply).map_err(|e| failed(e.into()))?;
                for key in found {
                    let Some(base) = key.strip_suffix(":lease") else {
                        continue;
                    };
                    let mut inv = queries::PURGE_LEASE.prepare_invoke();
                    inv.key(base).arg(0).arg(older_than_ms);
                    let gone: i64 = self.invoke(&inv, op, false).await?;
                    purged = purged.saturating_add(u64::from(gone == 1));
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(purged)
    }
}
