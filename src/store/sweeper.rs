//! [`TtlSweeper`]: the background task that deletes expired items.
//!
//! LangGraph's `TTLConfig.sweep_interval_minutes` asks for one; Python's
//! stores start it only when the caller calls `start_ttl_sweeper()`, which
//! is easy to forget. Ours starts from the store's builder whenever the
//! configuration asks for one, and ends when the store is dropped.
//!
//! Each round deletes the items expired at the round's clock reading in
//! slices of [`SWEEP_SLICE`] items, each slice one short backend call (one
//! write lock of the in-memory store, one transaction of SQLite), checking
//! between slices whether it was stopped. The task holds the store's
//! backend only during a round (a weak reference otherwise), so dropping
//! the store is never delayed by more than the slice at hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::{select, Either};
use tokio::sync::watch;

use super::engine::{Clock, StoreBackend};
use crate::{Error, Result};

/// The items one slice of a sweep deletes (one backend call).
pub(crate) const SWEEP_SLICE: usize = 1000;

/// The interval Python's stores sweep at when `sweep_interval_minutes` is
/// not set or 0 (what `start_ttl_sweeper` falls back to).
pub(crate) const DEFAULT_SWEEP_MINUTES: u64 = 5;

/// The handle of a store's background TTL sweeper, from the store's
/// `sweeper()` (see [`Store::sweeper`](super::Store::sweeper)). Clones share
/// the one task; none of them keeps the store alive, and the task ends when
/// the store is dropped or [`stop`](Self::stop) is called.
///
/// ```
/// use std::time::Duration;
/// use checkpointer::store::{InMemoryStore, Namespace, PutOp, Store, StoreExt, Ttl, TtlConfig};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// let store = InMemoryStore::builder()
///     .ttl(TtlConfig::default())
///     .sweep_interval(Duration::from_millis(20))
///     .build()?;
/// let sweeper = store.sweeper().expect("started by the builder");
/// let ns = Namespace::new(["tmp"])?;
/// store.put_op(PutOp::new(ns, "k", serde_json::json!({})).ttl(Ttl::Minutes(0.0))).await?;
/// while sweeper.swept() == 0 {
///     tokio::time::sleep(Duration::from_millis(5)).await;
/// }
/// drop(store); // the sweeper ends with the store
/// sweeper.stopped().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TtlSweeper {
    shared: Arc<Shared>,
    interval: Duration,
}

struct Shared {
    stop: watch::Sender<bool>,
    /// Closed when the task ends (or its runtime drops it).
    done: watch::Receiver<()>,
    swept: AtomicU64,
    rounds: AtomicU64,
    /// The last round's failure (rounds go on after one).
    last_error: parking_lot::Mutex<Option<String>>,
}

impl std::fmt::Debug for TtlSweeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlSweeper")
            .field("interval", &self.interval)
            .field("running", &self.is_running())
            .field("swept", &self.swept())
            .finish()
    }
}

impl TtlSweeper {
    /// Asks the task to stop: it ends after the slice at hand, if any.
    pub fn stop(&self) {
        self.shared.stop.send_replace(true);
    }

    /// Waits until the task has ended (after [`stop`](Self::stop), or once
    /// the store is dropped).
    ///
    /// # Errors
    /// [`Error::Storage`] with the last round's failure, if the last round
    /// failed.
    pub async fn stopped(&self) -> Result<()> {
        let mut done = self.shared.done.clone();
        // nothing is ever sent: this returns when the task's sender is gone
        while done.changed().await.is_ok() {}
        match self.shared.last_error.lock().clone() {
            Some(message) => Err(Error::storage("store", false, message)),
            None => Ok(()),
        }
    }

    /// Whether the task is still running.
    pub fn is_running(&self) -> bool {
        self.shared.done.has_changed().is_ok()
    }

    /// How long the task waits between rounds.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The items it has deleted so far.
    pub fn swept(&self) -> u64 {
        self.shared.swept.load(Ordering::Relaxed)
    }

    /// The rounds it has finished so far.
    pub fn rounds(&self) -> u64 {
        self.shared.rounds.load(Ordering::Relaxed)
    }
}

/// Stops the sweeper when the store holding it is dropped.
pub(crate) struct SweepGuard(TtlSweeper);

impl SweepGuard {
    pub(crate) fn handle(&self) -> TtlSweeper {
        self.0.clone()
    }
}

impl Drop for SweepGuard {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The interval a store sweeps at: the builder's, else the TTL
/// configuration's `sweep_interval_minutes` (0: Python's 5 minutes); `None`
/// when neither asks for a sweeper.
pub(crate) fn interval_of(builder: Option<Duration>, minutes: Option<u64>) -> Option<Duration> {
    builder.or_else(|| {
        minutes.map(|m| {
            let m = if m == 0 { DEFAULT_SWEEP_MINUTES } else { m };
            Duration::from_secs(m.saturating_mul(60))
        })
    })
}

/// Starts the sweeper of `backend` on the current tokio runtime, or on a
/// thread of its own outside one.
///
/// # Errors
/// [`Error::InvalidInput`] for an interval of zero; [`Error::Storage`] when
/// the thread cannot be started.
pub(crate) fn start<B: StoreBackend>(backend: Weak<B>, clock: Clock, interval: Duration) -> Result<SweepGuard> {
    if interval.is_zero() {
        return Err(Error::invalid("a TTL sweeper's interval must be longer than zero"));
    }
    let (stop, stop_rx) = watch::channel(false);
    let (running, done) = watch::channel(());
    let shared = Arc::new(Shared {
        stop,
        done,
        swept: AtomicU64::new(0),
        rounds: AtomicU64::new(0),
        last_error: parking_lot::Mutex::new(None),
    });
    let task = run(backend, clock, interval, Arc::clone(&shared), stop_rx, running);
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn(task)),
        Err(_) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .map_err(|e| Error::storage("store", false, e))?;
            std::thread::Builder::new()
                .name("checkpointer-store-sweeper".into())
                .spawn(move || rt.block_on(task))
                .map_err(|e| Error::storage("store", false, e))?;
        }
    }
    Ok(SweepGuard(TtlSweeper { shared, interval }))
}

async fn run<B: StoreBackend>(
    backend: Weak<B>,
    clock: Clock,
    interval: Duration,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    running: watch::Sender<()>,
) {
    loop {
        let stopping = Box::pin(stop.wait_for(|s| *s));
        if let Either::Right(_) = select(Box::pin(tokio::time::sleep(interval)), stopping).await {
            break;
        }
        let Some(store) = backend.upgrade() else { break };
        let outcome = round(&*store, clock(), &shared, &stop).await;
        drop(store);
        *shared.last_error.lock() = outcome.err().map(|e| e.to_string());
        shared.rounds.fetch_add(1, Ordering::Relaxed);
    }
    // the handles' `stopped` return
    drop(running);
}

/// One round: slices until one deletes fewer than a slice, or the sweeper
/// is stopped.
async fn round<B: StoreBackend>(
    store: &B,
    now: std::time::SystemTime,
    shared: &Shared,
    stop: &watch::Receiver<bool>,
) -> Result<()> {
    loop {
        let n = store.sweep_expired(now, SWEEP_SLICE).await?;
        shared.swept.fetch_add(n as u64, Ordering::Relaxed);
        if n < SWEEP_SLICE || *stop.borrow() {
            return Ok(());
        }
        tokio::task::yield_now().await;
    }
}
