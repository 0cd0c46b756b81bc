//! Fencing: one writer per thread.
//!
//! LangGraph's savers accept any number of writers on one thread: two
//! workers continuing the same thread both succeed and the history forks.
//! A *fenced* saver refuses that. Every saver of this crate can be turned
//! into one with `fenced(Fence)`, which gives it a writer identity and a
//! lease time; the saver it came from (and every saver of another process
//! that does not fence) keeps LangGraph's behaviour.
//!
//! - A writer takes a thread with `acquire` (or implicitly, with its first
//!   write of that thread): it gets a *lease* with an *epoch*, a number the
//!   store increments at every acquisition of the thread, never reused.
//! - Every write of a fenced saver (`put`, `put_writes`, their encoded
//!   forms, `delete_thread`) carries (writer, epoch) and is checked by the
//!   store inside the write's own transaction or script: the thread's lease
//!   must name this writer and epoch and must not have expired, else the
//!   write fails with [`Error::Fenced`] and stores
//!   nothing. A write that passes extends the lease by the lease time.
//! - A lease expires `lease` after its last renewal or write, on the
//!   store's clock; then any writer may `acquire` the thread (a new epoch),
//!   and the old owner's writes are refused from then on, even if it comes
//!   back. A writer that lost or released a thread gets it back only by
//!   `acquire` (never by its next write: a write delayed past the end of
//!   its run must not take the thread again).
//! - Within its lease the owner writes as it likes: forks, updates of older
//!   checkpoints, any namespace of the thread.
//!
//! `prune`, `import_thread`, `copy_thread` (its target) and
//! `delete_for_runs` of a fenced saver are fenced too: each thread they
//! change is checked against the writer's lease in the transaction or
//! script that changes it. Leases of deleted threads stay until
//! `purge_leases` removes them. `docs/design.md` ("Fencing") says what is
//! guaranteed and under which clock on each backend.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! use std::time::Duration;
//! use checkpointer::fence::Fence;
//! use checkpointer::prelude::*;
//! async fn put(saver: &dyn CheckpointSaver) -> checkpointer::Result<CheckpointConfig> {
//!     let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
//!     saver.put(&CheckpointConfig::new("t"), &Checkpoint::new(0), &meta, &ChannelVersions::new()).await
//! }
//! let store = InMemorySaver::new();
//! let a = store.fenced(Fence::new("worker-a", Duration::from_secs(30)))?;
//! let b = store.fenced(Fence::new("worker-b", Duration::from_secs(30)))?;
//! let lease = a.acquire("t").await?;
//! put(&a).await?;
//! // b does not own "t": refused, nothing stored
//! assert!(matches!(put(&b).await, Err(Error::Fenced { .. })));
//! assert!(a.release("t").await?);
//! b.acquire("t").await?; // a new epoch
//! put(&b).await?;
//! // a's epoch is stale now
//! assert!(matches!(put(&a).await, Err(Error::Fenced { epoch, .. }) if epoch == lease.epoch));
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::atomic::AtomicSteps;
use crate::error::{Error, Result};

/// A saver that can be fenced, behind `dyn` (every saver of this crate,
/// which stores atomic steps too: [`AtomicSteps`]):
/// what code that does not name a backend (tests, the conformance checks,
/// an application holding `Arc<dyn Fenceable>`) uses. Each method is the
/// saver's inherent method of the same name.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use checkpointer::fence::{Fence, Fenceable};
/// let store: Arc<dyn Fenceable> = Arc::new(checkpointer::InMemorySaver::new());
/// let a = store.fenced_saver(Fence::new("a", Duration::from_secs(5)))?;
/// assert_eq!(a.acquire("t").await?.writer, "a");
/// # Ok(())
/// # }
/// ```
#[async_trait::async_trait]
pub trait Fenceable: AtomicSteps {
    /// The saver's `fenced`, shared.
    ///
    /// # Errors
    /// As the saver's `fenced`.
    fn fenced_saver(&self, fence: Fence) -> Result<Arc<dyn Fenceable>>;

    /// The saver's `acquire`.
    ///
    /// # Errors
    /// As the saver's `acquire`.
    async fn acquire(&self, thread_id: &str) -> Result<Lease>;

    /// The saver's `renew`.
    ///
    /// # Errors
    /// As the saver's `renew`.
    async fn renew(&self, thread_id: &str) -> Result<Lease>;

    /// The saver's `release`.
    ///
    /// # Errors
    /// As the saver's `release`.
    async fn release(&self, thread_id: &str) -> Result<bool>;

    /// The saver's `purge_leases`.
    ///
    /// # Errors
    /// As the saver's `purge_leases`; [`Error::Unsupported`] by default.
    async fn purge_leases(&self, older_than: Duration) -> Result<u64> {
        let _ = older_than;
        Err(Error::Unsupported {
            operation: "purge_leases",
            implementer: "this saver",
        })
    }
}

/// A writer's identity and lease time, given to a saver's `fenced`.
///
/// The identity names the writer in the lease and in
/// [`Error::Fenced`]; give each process (each worker)
/// its own. Two savers with one identity are one writer to the store, but
/// each `acquire` starts a new epoch, so the saver that acquired last is
/// the one whose writes pass.
///
/// ```
/// use std::time::Duration;
/// use checkpointer::fence::Fence;
/// let fence = Fence::new("worker-1", Duration::from_secs(30));
/// assert_eq!(fence.writer(), "worker-1");
/// assert_eq!(fence.lease(), Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    writer: String,
    lease: Duration,
}

/// The longest lease: a day. A writer that needs longer renews.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

impl Fence {
    /// A writer named `writer` holding each thread it acquires for `lease`
    /// after its last write or renewal (checked by `fenced`: 1 ms to
    /// [`MAX_LEASE`]).
    pub fn new(writer: impl Into<String>, lease: Duration) -> Self {
        Fence {
            writer: writer.into(),
            lease,
        }
    }

    /// The writer's identity.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// The lease time.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The lease in whole milliseconds, checked.
    pub(crate) fn lease_ms(&self) -> Result<u64> {
        if self.writer.is_empty() || self.writer.contains('\0') {
            return Err(Error::invalid(
                "a fence's writer identity must be non-empty and hold no U+0000",
            ));
        }
        let ms = u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 || self.lease > MAX_LEASE {
            return Err(Error::invalid(format!(
                "a fence's lease must be between 1 ms and {} s, got {:?}",
                MAX_LEASE.as_secs(),
                self.lease
            )));
        }
        Ok(ms)
    }
}

/// A lease a writer holds on a thread, as `acquire` and `renew` return it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use std::time::Duration;
/// use checkpointer::fence::Fence;
/// use checkpointer::InMemorySaver;
/// let a = InMemorySaver::new().fenced(Fence::new("a", Duration::from_secs(5)))?;
/// let first = a.acquire("t").await?;
/// let again = a.acquire("t").await?;
/// assert!(again.epoch > first.epoch);
/// assert_eq!(a.renew("t").await?.epoch, again.epoch);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// The thread.
    pub thread_id: String,
    /// The owner.
    pub writer: String,
    /// The fencing token: greater than every earlier epoch of the thread.
    pub epoch: u64,
    /// How long the lease lasts from when the store granted it (the lease
    /// time).
    pub lease: Duration,
}
