//! Fencing on the in-memory store: the lease of each thread a fenced writer
//! took, on the process's monotonic clock (the store is the process).
//!
//! A fenced write holds its thread's lease row from the check until the
//! write is stored, so no acquisition slips in between; an acquisition
//! holds it too. Unfenced writes never look here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::engine::{FenceToken, LeaseOp};
use crate::error::Result;

/// A thread's lease. The row stays when the thread is deleted or the lease
/// released, so epochs only grow.
struct Row {
    owner: Arc<str>,
    epoch: u64,
    expires: Instant,
}

/// The leases of every fenced thread.
#[derive(Default)]
pub(crate) struct Leases {
    rows: Mutex<HashMap<String, Arc<Mutex<Option<Row>>>>>,
    /// The greatest epoch of a purged lease: a thread without a lease row
    /// starts above it (written and read under `rows`' lock).
    floor: AtomicU64,
}

/// Leases examined per hold of the map's lock by a purge.
const PURGE_BATCH: usize = 256;

impl Leases {
    fn row(&self, thread_id: &str) -> Arc<Mutex<Option<Row>>> {
        self.rows.lock().entry(thread_id.to_owned()).or_default().clone()
    }

    /// Runs `op` of `writer` on `thread_id` (see [`LeaseOp`]).
    pub(crate) fn run(&self, thread_id: &str, writer: &str, lease_ms: u64, op: LeaseOp) -> Option<u64> {
        let row = self.row(thread_id);
        let mut row = row.lock();
        let now = Instant::now();
        let lease = Duration::from_millis(lease_ms);
        let ours = |r: &Row, epoch: u64| &*r.owner == writer && r.epoch == epoch;
        match op {
            LeaseOp::Acquire => {
                let epoch = match row.as_ref() {
                    Some(r) if r.expires > now && &*r.owner != writer => return None,
                    Some(r) => r.epoch.checked_add(1)?,
                    None => self.floor.load(Ordering::SeqCst).checked_add(1)?,
                };
                *row = Some(Row {
                    owner: writer.into(),
                    epoch,
                    expires: now + lease,
                });
                Some(epoch)
            }
            LeaseOp::Renew(epoch) => {
                let r = row.as_mut().filter(|r| ours(r, epoch))?;
                r.expires = now + lease;
                Some(epoch)
            }
            LeaseOp::Release(epoch) => {
                let r = row.as_mut().filter(|r| ours(r, epoch))?;
                r.expires = now;
                Some(epoch)
            }
        }
    }

    /// Removes the leases whose deadline passed more than `older_than` ago
    /// and whose thread `has_data` says is gone, a batch per hold of the
    /// map's lock; returns how many went. A row another call holds (a
    /// write, an acquisition) stays. The floor rises to every removed
    /// epoch first, so the thread's next lease starts above them.
    pub(crate) fn purge(&self, older_than: Duration, has_data: impl Fn(&str) -> bool) -> u64 {
        let keys: Vec<String> = self.rows.lock().keys().cloned().collect();
        let now = Instant::now();
        let mut purged = 0;
        for batch in keys.chunks(PURGE_BATCH) {
            let mut rows = self.rows.lock();
            for thread in batch {
                let Some(row) = rows.get(thread) else { continue };
                // only this map holds it: no call is using it, and none can
                // start while the map is locked
                if Arc::strong_count(row) != 1 {
                    continue;
                }
                let epoch = match &*row.lock() {
                    Some(r) if r.expires + older_than < now && !has_data(thread) => r.epoch,
                    Some(_) => continue,
                    None => 0,
                };
                self.floor.fetch_max(epoch, Ordering::SeqCst);
                rows.remove(thread);
                purged += 1;
            }
        }
        purged
    }

    /// Runs `write` when `fence` (if any) holds `thread_id`'s lease, holding
    /// the lease from the check until the write is stored; a write that
    /// passes extends the lease.
    pub(crate) fn fenced<T>(
        &self,
        thread_id: &str,
        fence: Option<&FenceToken>,
        write: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let Some(token) = fence else {
            return write();
        };
        // A token comes from an acquisition, which made the row: a thread
        // without one (never acquired, or its lease purged) is refused, and
        // looking it up allocates nothing.
        let Some(row) = self.rows.lock().get(thread_id).cloned() else {
            return Err(token.refused(thread_id));
        };
        let mut row = row.lock();
        let now = Instant::now();
        let held = row
            .as_mut()
            .filter(|r| *r.owner == *token.writer && r.epoch == token.epoch && r.expires > now);
        let Some(held) = held else {
            return Err(token.refused(thread_id));
        };
        let out = write()?;
        held.expires = now + Duration::from_millis(token.lease_ms);
        Ok(out)
    }
}
