//! Fencing on Redis (see [`crate::fence`]): the lease is the key `B:lease`
//! of the thread's slot, read and written only by scripts (`LEASE`, and the
//! `FENCED_*` writes, which check it first), on the server's clock
//! (`TIME`). A cluster runs each on the thread's master, atomically.

use redis::ScriptInvocation;

use super::backend::Redis;
use super::keys::refuse_nul;
use super::queries;
use crate::engine::{FenceToken, LeaseOp};
use crate::error::{Error, Result};

/// The fence's arguments, first after the TTL (`FENCE_HEAD` takes them).
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
