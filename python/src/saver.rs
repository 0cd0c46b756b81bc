//! `Core`, the saver class Python's `BaseCheckpointSaver` subclasses call:
//! every operation with `aio` (see [`crate::bridge::dispatch`]), values as
//! the saver's serializer's `(tag, bytes)` both ways (the crate's encoded
//! I/O, the same on every backend).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use checkpointer::encoded::{EncodedSaver, EncodedTuple};
use checkpointer::fence::{Fence, Fenceable, Lease};
use checkpointer::serde::{msgpack, TypedBytes};
use checkpointer::{CheckpointConfig, CheckpointMetadata, Error, PruneStrategy, SaverAdmin};
use futures::StreamExt;
use pyo3::prelude::*;

use crate::bridge::dispatch;
use crate::convert::{encoded_writes, pack, packed_write, versions, At, ListQuery, PackedHistory, Rows};
use crate::retention;
use crate::runtime::{runtime, to_py, Result};

/// One open saver. Cheap to share: Python's `with_allowlist` copies hold
/// the same one.
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
pub(crate) struct Core {
    saver: parking_lot::RwLock<Option<Arc<dyn EncodedSaver>>>,
    admin: Arc<dyn SaverAdmin>,
    /// The lease operations of a fenced saver (`saver` is then the fenced
    /// one); `None` unfenced.
    fence: Option<Arc<dyn Fenceable>>,
    /// The task of the `retention=` option, stopped by `close`.
    retention: parking_lot::Mutex<Option<tokio::task::AbortHandle>>,
}

/// A lease as Python's `Lease` fields: `(thread_id, writer, epoch,
/// lease_seconds)`.
type LeaseRow = (String, String, u64, f64);

fn lease_row(lease: Lease) -> LeaseRow {
    (lease.thread_id, lease.writer, lease.epoch, lease.lease.as_secs_f64())
}

impl Core {
    /// The store's saver, fenced as `fence`'s writer when one is given.
    pub(crate) fn new(admin: Arc<dyn SaverAdmin>, fence: Option<Fence>) -> Result<Core> {
        let (saver, fence) = match fence {
            Some(fence) => {
                let (encoded, lease) = admin.fenced(fence)?;
                (encoded, Some(lease))
            }
            None => (admin.encoded(), None),
        };
        Ok(Core {
            saver: parking_lot::RwLock::new(Some(saver)),
            admin,
            fence,
            retention: parking_lot::Mutex::new(None),
        })
    }

    /// The lease operations, when the saver is open and fenced.
    fn fenceable(&self) -> PyResult<Arc<dyn Fenceable>> {
        self.saver()?;
        self.fence.clone().ok_or_else(|| {
            to_py(Error::invalid(
                "this saver is not fenced: open it with fence=Fence(writer=..., lease_seconds=...)",
            ))
        })
    }

    fn saver(&self) -> PyResult<Arc<dyn EncodedSaver>> {
        self.saver
            .read()
            .clone()
            .ok_or_else(|| to_py(Error::invalid("the saver is closed")))
    }

    /// Runs `op` on the saver and the config of the checkpoint `at` names
    /// (see [`dispatch`]).
    fn at<T, F>(
        &self,
        py: Python<'_>,
        aio: bool,
        at: At,
        op: impl FnOnce(Arc<dyn EncodedSaver>, CheckpointConfig) -> F,
    ) -> PyResult<Py<PyAny>>
    where
        F: Future<Output = Result<T>> + Send + 'static,
        T: for<'py> IntoPyObject<'py> + Send + 'static,
    {
        let saver = self.saver()?;
        dispatch(py, aio, op(saver, at.config()))
    }
}

#[pymethods]
impl Core {
    /// The backend: "sqlite", "postgres" or "redis".
    #[getter]
    fn backend(&self) -> &'static str {
        self.admin.backend()
    }

    /// Whether the saver is fenced.
    #[getter]
    fn fenced(&self) -> bool {
        self.fence.is_some()
    }

    /// Takes the lease of the thread for this saver's writer (a new epoch).
    fn acquire(&self, py: Python<'_>, aio: bool, thread_id: String) -> PyResult<Py<PyAny>> {
        let fence = self.fenceable()?;
        dispatch(py, aio, async move { fence.acquire(&thread_id).await.map(lease_row) })
    }

    /// Extends the lease this writer holds on the thread.
    fn renew(&self, py: Python<'_>, aio: bool, thread_id: String) -> PyResult<Py<PyAny>> {
        let fence = self.fenceable()?;
        dispatch(py, aio, async move { fence.renew(&thread_id).await.map(lease_row) })
    }

    /// Gives up the lease this writer holds on the thread: whether it held it.
    fn release(&self, py: Python<'_>, aio: bool, thread_id: String) -> PyResult<Py<PyAny>> {
        let fence = self.fenceable()?;
        dispatch(py, aio, async move { fence.release(&thread_id).await })
    }

    /// Creates or migrates the tables (Postgres, as Python's `setup()`);
    /// SQLite and Redis are ready when opened.
    fn setup(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        self.saver()?;
        let admin = self.admin.clone();
        dispatch(py, aio, async move { admin.setup().await })
    }

    /// Finishes queued writes and closes the saver; later calls fail.
    fn close(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        if let Some(task) = self.retention.lock().take() {
            task.abort();
        }
        let taken = self.saver.write().take();
        let admin = taken.map(|_| self.admin.clone());
        dispatch(py, aio, async move {
            match admin {
                Some(admin) => admin.close().await,
                None => Ok(()),
            }
        })
    }

    /// Stores a checkpoint the saver's serializer encoded, `(tag, data)`
    /// (plaintext: the crate seals it when the saver encrypts), as
    /// `checkpoint_id` under `parent` (`at`'s id), with `metadata =
    /// msgpack(metadata)` and `new_versions = msgpack(new_versions)`.
    #[pyo3(signature = (aio, parent, checkpoint_id, tag, data, metadata, new_versions))]
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        py: Python<'_>,
        aio: bool,
        parent: At,
        checkpoint_id: String,
        tag: String,
        data: &[u8],
        metadata: &[u8],
        new_versions: &[u8],
    ) -> PyResult<Py<PyAny>> {
        let checkpoint = TypedBytes::new(tag, Bytes::copy_from_slice(data));
        let payloads = [metadata, new_versions].map(Bytes::copy_from_slice);
        self.at(py, aio, parent, |saver, config| async move {
            let [metadata, new_versions] = payloads;
            let metadata = CheckpointMetadata::from_value(&msgpack::decode_bytes(&metadata)?)?;
            let new_versions = versions(&msgpack::decode_bytes(&new_versions)?)?;
            saver
                .put_encoded(&config, &checkpoint_id, checkpoint, &metadata, &new_versions)
                .await?;
            Ok(())
        })
    }

    /// Stores `writes = [(channel, tag, data)]` (each value as the saver's
    /// serializer encoded it) as the writes of `task_id` against the
    /// checkpoint.
    fn put_writes(
        &self,
        py: Python<'_>,
        aio: bool,
        at: At,
        task_id: String,
        task_path: String,
        writes: Vec<(String, String, Vec<u8>)>,
    ) -> PyResult<Py<PyAny>> {
        let writes = encoded_writes(writes);
        self.at(py, aio, at, |saver, config| async move {
            saver.put_writes_encoded(&config, writes, &task_id, &task_path).await
        })
    }

    /// The checkpoint (or the latest of thread/ns) as a list of one row
    /// (see `Rows`), or `None`.
    fn get_tuple(&self, py: Python<'_>, aio: bool, at: At) -> PyResult<Py<PyAny>> {
        self.at(py, aio, at, |saver, config| async move {
            Ok(saver.get_tuple_encoded(&config).await?.map(|t| Rows(vec![t])))
        })
    }

    /// A listing, newest first, read in batches with [`Lister::next`].
    fn list(&self, query: ListQuery<'_>) -> PyResult<Lister> {
        let saver = self.saver()?;
        let (config, options) = query.into_parts().map_err(to_py)?;
        let _guard = runtime()?.enter();
        let stream = saver.list_encoded(config, options);
        Ok(Lister {
            stream: Arc::new(tokio::sync::Mutex::new(Some(stream))),
        })
    }

    /// Deletes every checkpoint and write of the thread.
    fn delete_thread(&self, py: Python<'_>, aio: bool, thread_id: String) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        dispatch(py, aio, async move { saver.delete_thread(&thread_id).await })
    }

    /// Deletes the checkpoints (and writes) of the runs, in every thread.
    fn delete_for_runs(&self, py: Python<'_>, aio: bool, run_ids: Vec<String>) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        dispatch(py, aio, async move {
            if run_ids.is_empty() {
                return Ok(());
            }
            saver.delete_for_runs(&run_ids).await
        })
    }

    /// Copies a thread whole under another id.
    fn copy_thread(&self, py: Python<'_>, aio: bool, source: String, target: String) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        dispatch(py, aio, async move { saver.copy_thread(&source, &target).await })
    }

    /// Prunes threads: `strategy` is "keep_latest" or "delete".
    fn prune(&self, py: Python<'_>, aio: bool, thread_ids: Vec<String>, strategy: &str) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        let strategy = match strategy {
            "keep_latest" => PruneStrategy::KeepLatest,
            "delete" => PruneStrategy::Delete,
            other => {
                return Err(to_py(Error::invalid(format!(
                    "unknown prune strategy {other:?} (expected \"keep_latest\" or \"delete\")"
                ))))
            }
        };
        dispatch(py, aio, async move {
            if thread_ids.is_empty() {
                return Ok(());
            }
            saver.prune(&thread_ids, strategy).await
        })
    }

    /// Applies a retention policy (ages in seconds) to `threads` (every
    /// thread when `None`) in batches of `batch`, or with `dry_run` only
    /// counts what would go; the report as [`retention::ReportRow`].
    #[pyo3(signature = (
        aio, *, keep_last=None, keep_newer_than=None, delete_idle_threads=None, mark_key=None,
        threads=None, batch=None, dry_run=false,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn retain(
        &self,
        py: Python<'_>,
        aio: bool,
        keep_last: Option<usize>,
        keep_newer_than: Option<f64>,
        delete_idle_threads: Option<f64>,
        mark_key: Option<String>,
        threads: Option<Vec<String>>,
        batch: Option<usize>,
        dry_run: bool,
    ) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        let policy = retention::policy(keep_last, keep_newer_than, delete_idle_threads, mark_key).map_err(to_py)?;
        let options = retention::options(threads, batch, dry_run);
        dispatch(py, aio, async move {
            saver.retain(&policy, options).await.map(|r| retention::row(&r))
        })
    }

    /// Starts the `retention=` option's task: the policy over every thread
    /// every `every_seconds`, until the saver closes. A policy that
    /// contradicts itself is refused here, before anything runs.
    #[pyo3(signature = (*, every_seconds, keep_last=None, keep_newer_than=None, delete_idle_threads=None, mark_key=None))]
    fn start_retention(
        &self,
        every_seconds: f64,
        keep_last: Option<usize>,
        keep_newer_than: Option<f64>,
        delete_idle_threads: Option<f64>,
        mark_key: Option<String>,
    ) -> PyResult<()> {
        let saver = self.saver()?;
        let policy = retention::policy(keep_last, keep_newer_than, delete_idle_threads, mark_key).map_err(to_py)?;
        let every = retention::seconds("every", every_seconds).map_err(to_py)?;
        let task = retention::spawn(runtime()?, Arc::downgrade(&saver), policy, every);
        if let Some(old) = self.retention.lock().replace(task) {
            old.abort();
        }
        Ok(())
    }

    /// `[(channel, ([(task, channel, msgpack(value))], msgpack(seed) | None))]`
    /// in the saver's order.
    fn delta_channel_history(&self, py: Python<'_>, aio: bool, at: At, channels: Vec<String>) -> PyResult<Py<PyAny>> {
        self.at(py, aio, at, |saver, config| async move {
            let history = saver.get_delta_channel_history(&config, &channels).await?;
            history
                .iter()
                .map(|(channel, h)| {
                    let writes = h.writes.iter().map(packed_write).collect::<Result<_>>()?;
                    let seed = h.seed.as_ref().map(pack).transpose()?;
                    Ok((channel.clone(), PackedHistory(writes, seed)))
                })
                .collect::<Result<Vec<_>>>()
        })
    }
}

/// A listing in progress, shared by the calls that page through it (`None`
/// once it ended).
type Listing<T> = Arc<tokio::sync::Mutex<Option<futures::stream::BoxStream<'static, Result<T>>>>>;

/// The next `max` items of a listing (at least one asked for; fewer at the
/// end, none once it ended).
async fn next_batch<T>(listing: &Listing<T>, max: usize) -> Result<Vec<T>> {
    let mut guard = listing.lock().await;
    let mut out = Vec::new();
    if let Some(s) = guard.as_mut() {
        while out.len() < max.max(1) {
            match s.next().await {
                Some(item) => out.push(item?),
                None => {
                    *guard = None;
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// A listing in progress.
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
pub(crate) struct Lister {
    stream: Listing<EncodedTuple>,
}

#[pymethods]
impl Lister {
    /// The next `max` rows (fewer at the end; an empty list when done), as
    /// `Rows`.
    fn next(&self, py: Python<'_>, aio: bool, max: usize) -> PyResult<Py<PyAny>> {
        let stream = self.stream.clone();
        dispatch(py, aio, async move { next_batch(&stream, max).await.map(Rows) })
    }
}
