//! Fencing through the engine (see [`crate::fence`]): the writer's epochs
//! per thread on the client, the lease operations and the token every
//! write of a fenced saver hands its backend, which checks it on the
//! store's side of the write.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::{Backend, Engine};
use crate::error::{Error, Result};
use crate::fence::{Fence, Lease};
use crate::saver::{op_span, traced};

/// What a fenced write carries: checked by the backend in the write's own
/// transaction or script (the lease must name `writer` and `epoch` and be
/// unexpired on the store's clock; then it is extended by `lease_ms`).
#[derive(Debug, Clone)]
pub(crate) struct FenceToken {
    pub(crate) writer: Arc<str>,
    pub(crate) epoch: u64,
    pub(crate) lease_ms: u64,
}

impl FenceToken {
    /// The error of this token's write refused on `thread_id`.
    pub(crate) fn refused(&self, thread_id: &str) -> Error {
        Error::Fenced {
            thread_id: thread_id.to_owned(),
            writer: self.writer.to_string(),
            epoch: self.epoch,
        }
    }
}

/// The tokens of a fenced operation on many threads (`prune`,
/// `delete_for_runs`): the epoch the writer holds on each thread it took.
/// A backend checks each thread's token in the transaction or script that
/// changes that thread; a thread the writer never took has no token and is
/// refused before anything is removed.
#[derive(Debug, Clone)]
pub(crate) struct Fences {
    writer: Arc<str>,
    lease_ms: u64,
    epochs: HashMap<String, u64>,
}

impl Fences {
    /// The token of `thread_id`, or `Error::Fenced` (epoch 0) when the
    /// writer never took it.
    pub(crate) fn token(&self, thread_id: &str) -> Result<FenceToken> {
        let epoch = self.epochs.get(thread_id).copied();
        let token = FenceToken {
            writer: self.writer.clone(),
            epoch: epoch.unwrap_or(0),
            lease_ms: self.lease_ms,
        };
        match epoch {
            Some(_) => Ok(token),
            None => Err(token.refused(thread_id)),
        }
    }

    /// Checks up front that the writer took every thread of `threads`
    /// (refused before anything is removed otherwise); the store checks
    /// each token again with the change.
    pub(crate) fn check_all<'a>(&self, threads: impl IntoIterator<Item = &'a str>) -> Result<()> {
        threads.into_iter().try_for_each(|t| self.token(t).map(drop))
    }

    /// The threads the writer took, sorted.
    pub(crate) fn threads(&self) -> Vec<String> {
        let mut out: Vec<String> = self.epochs.keys().cloned().collect();
        out.sort();
        out
    }
}

/// A lease operation a backend runs atomically on the store, on its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseOp {
    /// Take the thread when it has no lease, its lease expired, or the
    /// writer holds it: a new epoch, greater than every earlier one.
    Acquire,
    /// Extend the lease of this epoch when the writer still holds it (even
    /// expired, as long as no one took it since).
    Renew(u64),
    /// Give the lease of this epoch up (it expires now, the epoch stays).
    Release(u64),
}

/// The epoch a writer took on a thread, and whether it released it since.
#[derive(Clone, Copy)]
struct Held {
    epoch: u64,
    released: bool,
}

/// A fenced engine's writer: its identity, lease time, and the epoch it
/// took per thread. An entry stays after a release or a takeover, so the
/// writer's later writes carry the old epoch and are refused (a write
/// delayed past its run's end must not re-acquire the thread): only
/// `acquire` takes a thread again.
pub(crate) struct Fencing {
    writer: Arc<str>,
    lease_ms: u64,
    held: Mutex<HashMap<String, Held>>,
    /// Serializes implicit acquisitions, so two writes of one saver on a
    /// new thread do not take two epochs (the first one's writes would be
    /// refused).
    gate: tokio::sync::Mutex<()>,
}

impl Fencing {
    fn token(&self, epoch: u64) -> FenceToken {
        FenceToken {
            writer: self.writer.clone(),
            epoch,
            lease_ms: self.lease_ms,
        }
    }

    fn refused(&self, thread_id: &str, epoch: u64) -> Error {
        self.token(epoch).refused(thread_id)
    }

    fn lease(&self, thread_id: &str, epoch: u64) -> Lease {
        Lease {
            thread_id: thread_id.to_owned(),
            writer: self.writer.to_string(),
            epoch,
            lease: Duration::from_millis(self.lease_ms),
        }
    }
}

fn check_thread(thread_id: &str) -> Result<()> {
    if thread_id.is_empty() {
        return Err(Error::invalid("a lease needs a thread id: the thread id is empty"));
    }
    Ok(())
}

impl<B: Backend> Engine<B> {
    /// This engine's backend with a writer of its own.
    pub(crate) fn fenced(&self, fence: &Fence) -> Result<Self> {
        let lease_ms = fence.lease_ms()?;
        if !B::FENCES {
            return Err(Error::Unsupported {
                operation: "fencing",
                implementer: std::any::type_name::<B>(),
            });
        }
        Ok(Engine {
            backend: self.backend.clone(),
            fence: Some(Arc::new(Fencing {
                writer: fence.writer().into(),
                lease_ms,
                held: Mutex::default(),
                gate: tokio::sync::Mutex::new(()),
            })),
        })
    }

    fn fencing(&self) -> Result<&Fencing> {
        self.fence
            .as_deref()
            .ok_or_else(|| Error::invalid("this saver is not fenced: make one with `fenced(Fence)`"))
    }

    /// Refuses an operation that is not fenced, on a fenced saver.
    pub(crate) fn refuse_fenced(&self, operation: &'static str) -> Result<()> {
        match self.fence {
            Some(_) => Err(Error::Unsupported {
                operation,
                implementer: "a fenced saver",
            }),
            None => Ok(()),
        }
    }

    /// The tokens of an operation on `threads` (`None` unfenced): each
    /// thread taken first (implicitly, as a write's first write of a thread
    /// takes it), so a thread another writer holds refuses the operation
    /// before anything of it is removed.
    pub(crate) async fn fences_taking(&self, threads: &[String]) -> Result<Option<Fences>> {
        if self.fence.is_none() {
            return Ok(None);
        }
        for thread in threads {
            self.token(thread).await?;
        }
        Ok(self.fences())
    }

    /// The tokens of every thread this writer took (`None` unfenced).
    pub(crate) fn fences(&self) -> Option<Fences> {
        let fencing = self.fence.as_deref()?;
        let epochs = fencing.held.lock().iter().map(|(t, h)| (t.clone(), h.epoch)).collect();
        Some(Fences {
            writer: fencing.writer.clone(),
            lease_ms: fencing.lease_ms,
            epochs,
        })
    }

    /// The token of a write on `thread_id`: `None` unfenced; the epoch held,
    /// or a new one acquired on the first write of a thread.
    pub(crate) async fn token(&self, thread_id: &str) -> Result<Option<FenceToken>> {
        let Some(fencing) = self.fence.as_deref() else {
            return Ok(None);
        };
        if let Some(held) = fencing.held.lock().get(thread_id) {
            return Ok(Some(fencing.token(held.epoch)));
        }
        let _gate = fencing.gate.lock().await;
        if let Some(held) = fencing.held.lock().get(thread_id) {
            return Ok(Some(fencing.token(held.epoch)));
        }
        let epoch = self.acquire_epoch(fencing, thread_id).await?;
        Ok(Some(fencing.token(epoch)))
    }

    async fn acquire_epoch(&self, fencing: &Fencing, thread_id: &str) -> Result<u64> {
        check_thread(thread_id)?;
        self.backend.check_writable("acquire")?;
        let granted = self
            .backend
            .lease(thread_id, &fencing.writer, fencing.lease_ms, LeaseOp::Acquire)
            .await?;
        match granted {
            Some(epoch) => {
                let held = Held { epoch, released: false };
                fencing.held.lock().insert(thread_id.to_owned(), held);
                Ok(epoch)
            }
            None => {
                let epoch = fencing.held.lock().get(thread_id).map_or(0, |h| h.epoch);
                Err(fencing.refused(thread_id, epoch))
            }
        }
    }

    pub(crate) async fn acquire(&self, thread_id: &str) -> Result<Lease> {
        traced(op_span("acquire", thread_id, "", None), async {
            let fencing = self.fencing()?;
            let _gate = fencing.gate.lock().await;
            let epoch = self.acquire_epoch(fencing, thread_id).await?;
            Ok(fencing.lease(thread_id, epoch))
        })
        .await
    }

    pub(crate) async fn renew(&self, thread_id: &str) -> Result<Lease> {
        traced(op_span("renew", thread_id, "", None), self.renew_inner(thread_id)).await
    }

    async fn renew_inner(&self, thread_id: &str) -> Result<Lease> {
        let fencing = self.fencing()?;
        check_thread(thread_id)?;
        self.backend.check_writable("renew")?;
        let epoch = match fencing.held.lock().get(thread_id) {
            Some(held) if !held.released => held.epoch,
            Some(held) => return Err(fencing.refused(thread_id, held.epoch)),
            None => return Err(fencing.refused(thread_id, 0)),
        };
        let renewed = self
            .backend
            .lease(thread_id, &fencing.writer, fencing.lease_ms, LeaseOp::Renew(epoch))
            .await?;
        match renewed {
            Some(_) => Ok(fencing.lease(thread_id, epoch)),
            None => Err(fencing.refused(thread_id, epoch)),
        }
    }

    pub(crate) async fn purge_leases(&self, older_than: Duration) -> Result<u64> {
        traced(op_span("purge_leases", "", "", None), async {
            self.backend.check_writable("purge_leases")?;
            if older_than > crate::fence::MAX_LEASE.saturating_mul(365) {
                return Err(Error::invalid("purge_leases: older_than is beyond a year of leases"));
            }
            self.backend.purge_leases(older_than).await
        })
        .await
    }

    pub(crate) async fn release(&self, thread_id: &str) -> Result<bool> {
        traced(op_span("release", thread_id, "", None), self.release_inner(thread_id)).await
    }

    async fn release_inner(&self, thread_id: &str) -> Result<bool> {
        let fencing = self.fencing()?;
        check_thread(thread_id)?;
        self.backend.check_writable("release")?;
        let epoch = match fencing.held.lock().get_mut(thread_id) {
            Some(held) if !held.released => {
                held.released = true;
                held.epoch
            }
            _ => return Ok(false),
        };
        let released = self
            .backend
            .lease(thread_id, &fencing.writer, fencing.lease_ms, LeaseOp::Release(epoch))
            .await?;
        Ok(released.is_some())
    }
}

/// The fencing and atomic-step face of a public saver over an engine:
/// [`Fenceable`](crate::fence::Fenceable),
/// [`AtomicSteps`](crate::atomic::AtomicSteps) and the inherent `fenced`,
/// `acquire`, `renew`, `release` (part of `saver_over_engine!`; the saver
/// has a private `with_engine`).
macro_rules! fencing_over_engine {
    ($saver:ty, $field:ident) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl $crate::atomic::AtomicSteps for $saver {
            async fn put_step_with_writes(
                &self,
                parent: &$crate::config::CheckpointConfig,
                step: &$crate::checkpoint::StepCheckpoint,
                metadata: &$crate::checkpoint::CheckpointMetadata,
                writes: &[$crate::checkpoint::PendingWrite],
            ) -> $crate::error::Result<$crate::checkpoint::CheckpointTuple> {
                self.$field
                    .put_step_with_writes(parent, step, metadata, writes)
                    .await
            }
        }

        impl $saver {
            /// A saver on the same store whose writes are fenced as
            /// `fence`'s writer (see [`checkpointer::fence`]($crate::fence)):
            /// each thread it writes is taken with a lease (implicitly at its
            /// first write, or by [`Self::acquire`]), and a write of a
            /// thread it does not own is refused with
            /// [`Error::Fenced`]($crate::Error::Fenced), nothing stored. This
            /// saver is unchanged; the two share the store's connections.
            ///
            /// # Errors
            /// [`Error::InvalidInput`]($crate::Error::InvalidInput) for an
            /// empty writer or a lease outside 1 ms ..= a day.
            pub fn fenced(&self, fence: $crate::fence::Fence) -> $crate::error::Result<Self> {
                Ok(self.with_engine(self.$field.fenced(&fence)?))
            }

            /// Takes the lease of `thread_id` for this saver's writer, with a
            /// new epoch: when the thread has no lease, its lease expired on
            /// the store's clock, or this writer holds it.
            ///
            /// # Errors
            /// [`Error::Fenced`]($crate::Error::Fenced) when another writer
            /// holds an unexpired lease; [`Error::InvalidInput`]($crate::Error::InvalidInput)
            /// on a saver that is not fenced or for an empty thread id;
            /// storage failures.
            pub async fn acquire(&self, thread_id: &str) -> $crate::error::Result<$crate::fence::Lease> {
                self.$field.acquire(thread_id).await
            }

            /// Extends the lease this writer holds on `thread_id` by the
            /// lease time, from now on the store's clock (a lease that
            /// expired is renewed while no other writer took it).
            ///
            /// # Errors
            /// [`Error::Fenced`]($crate::Error::Fenced) when the writer does
            /// not hold it (never acquired, released, or taken over); as
            /// [`Self::acquire`] otherwise.
            pub async fn renew(&self, thread_id: &str) -> $crate::error::Result<$crate::fence::Lease> {
                self.$field.renew(thread_id).await
            }

            /// Gives up the lease this writer holds on `thread_id`, so
            /// another writer can acquire it at once: `true` when it held it,
            /// `false` when it had lost it or never held it.
            ///
            /// # Errors
            /// As [`Self::acquire`], never `Fenced`.
            pub async fn release(&self, thread_id: &str) -> $crate::error::Result<bool> {
                self.$field.release(thread_id).await
            }

            /// Removes the leases of deleted threads (threads holding no
            /// checkpoint and no write) whose deadline passed more than
            /// `older_than` ago on the store's clock, in bounded batches,
            /// and returns how many went. Fenced or not, any saver of the
            /// store can run it. A thread whose lease was removed and
            /// that is fenced again gets an epoch above every one it had
            /// (`docs/design.md`, *Fencing*).
            ///
            /// # Errors
            /// [`Error::InvalidInput`]($crate::Error::InvalidInput) for an
            /// `older_than` over a year; storage failures (the batches
            /// before stay done).
            pub async fn purge_leases(&self, older_than: std::time::Duration) -> $crate::error::Result<u64> {
                self.$field.purge_leases(older_than).await
            }
        }
    };
}
pub(crate) use fencing_over_engine;
