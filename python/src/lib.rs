//! `langgraph_checkpoint_rs._core`: the checkpointer crate's savers behind a
//! handle that Python's `BaseCheckpointSaver` subclasses call.
//!
//! Python's serializer turns Python objects into msgpack (`serde.dumps_typed`,
//! so every type LangGraph encodes arrives with its ext codes); this module
//! decodes that into `Value`s, which the crate stores exactly as Python's
//! savers do, and hands stored tuples back as one msgpack payload per call
//! for `serde.loads_typed`. Every operation exists twice on `Core`: with
//! `aio=False` it runs on the calling thread with the GIL released; with
//! `aio=True` it returns an asyncio future of the running loop, settled on
//! the loop's thread when the crate's tokio runtime finishes the call (see
//! `start`): the event loop never waits on storage, and no thread other
//! than the loop's takes the GIL for it.

use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use checkpointer::postgres::PostgresSaver;
use checkpointer::redis::{RedisSaver, TtlConfig};
use checkpointer::serde::{msgpack, AesEax, JsonPlusSerializer, Serializer, TypedBytes, Value};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointTuple, Error, ListOptions, PendingWrite, PruneStrategy,
};
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::IntoPyObjectExt;

mod cipher;

type Result<T, E = Error> = std::result::Result<T, E>;

static RUNTIME: OnceLock<(u32, tokio::runtime::Runtime)> = OnceLock::new();

/// The error for a process forked after the runtime started: its worker
/// threads (and every saver's connections and threads) stayed in the
/// parent, so a call would hang.
fn forked() -> PyErr {
    to_py(Error::invalid(
        "langgraph_checkpoint_rs was used before this process was forked: its runtime \
         and savers stayed in the parent; open savers after the fork (in each worker)",
    ))
}

/// The process's one tokio runtime (`LANGGRAPH_RS_WORKERS` worker threads,
/// 2 by default).
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    if let Some((pid, rt)) = RUNTIME.get() {
        if *pid != std::process::id() {
            return Err(forked());
        }
        return Ok(rt);
    }
    let workers = std::env::var("LANGGRAPH_RS_WORKERS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(2)
        .max(1);
    let built = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("langgraph-rs")
        .enable_all()
        .build()
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("cannot start the tokio runtime: {e}")))?;
    let _ = RUNTIME.set((std::process::id(), built));
    match RUNTIME.get() {
        Some((pid, rt)) if *pid == std::process::id() => Ok(rt),
        _ => Err(forked()),
    }
}

/// The crate's error as an instance of `langgraph_checkpoint_rs.errors`'s
/// class for its kind, with `retryable` and `kind` set.
fn to_py(err: Error) -> PyErr {
    let (class, kind) = match &err {
        Error::Serde { .. } => ("SerdeError", "serde"),
        Error::InvalidInput { .. } => ("InvalidInputError", "invalid_input"),
        Error::Unsupported { .. } => ("UnsupportedError", "unsupported"),
        Error::ThreadExists { .. } => ("ThreadExistsError", "thread_exists"),
        Error::Encryption(_) => ("EncryptionError", "encryption"),
        Error::Storage { .. } => ("StorageError", "storage"),
        _ => ("CheckpointerError", "other"),
    };
    let retryable = err.is_retryable();
    let message = err.to_string();
    Python::attach(|py| {
        let built = (|| -> PyResult<PyErr> {
            let cls = py.import("langgraph_checkpoint_rs.errors")?.getattr(class)?;
            let instance = cls.call1((message.as_str(),))?;
            instance.setattr("retryable", retryable)?;
            instance.setattr("kind", kind)?;
            Ok(PyErr::from_value(instance))
        })();
        built.unwrap_or_else(|e| e)
    })
}

/// Runs `fut` to completion: on this thread with the GIL released
/// (`aio=False`), or as an asyncio future of the running loop (`aio=True`,
/// see [`start`]).
fn dispatch<T>(py: Python<'_>, aio: bool, fut: impl Future<Output = Result<T>> + Send + 'static) -> PyResult<Py<PyAny>>
where
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    let rt = runtime()?;
    if aio {
        return start(py, rt, fut);
    }
    // a sync caller blocks anyway: its SQLite reads and writes run on its
    // own thread (writes while the writer thread is idle), with no hand-off
    let out = py
        .detach(|| checkpointer::sqlite::may_block(|| rt.block_on(fut)))
        .map_err(to_py)?;
    out.into_py_any(py)
}

/// A result turned into Python on the event loop's thread.
type Convert = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Py<PyAny>> + Send>;

fn convert<T>(out: Result<T>) -> Result<Convert>
where
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    out.map(|v| Box::new(move |py: Python<'_>| v.into_py_any(py)) as Convert)
}

/// Settles `future` (an asyncio future) with `outcome`, unless it was
/// cancelled meanwhile.
fn settle(py: Python<'_>, future: &Bound<'_, PyAny>, outcome: Result<Convert>) -> PyResult<()> {
    if future.call_method0(pyo3::intern!(py, "done"))?.is_truthy()? {
        return Ok(());
    }
    match outcome.map_err(to_py).and_then(|c| c(py)) {
        Ok(value) => future.call_method1(pyo3::intern!(py, "set_result"), (value,))?,
        Err(err) => future.call_method1(pyo3::intern!(py, "set_exception"), (err.into_value(py),))?,
    };
    Ok(())
}

/// Starts `fut` for the running event loop and returns its asyncio future.
///
/// The first poll runs here, with the GIL released and the runtime
/// entered: a call that needs no waiting (a SQLite lookup, which the crate
/// runs inline within a 500 µs budget and never waits on a lock) completes
/// without a thread hop. Otherwise the future moves to a runtime worker,
/// and its result comes back through the loop's [`Bridge`]: no GIL is taken
/// off the loop's thread, and completions that arrive together wake the
/// loop once.
fn start<T>(
    py: Python<'_>,
    rt: &'static tokio::runtime::Runtime,
    fut: impl Future<Output = Result<T>> + Send + 'static,
) -> PyResult<Py<PyAny>>
where
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    let bridge = Bridge::for_running_loop(py)?;
    let event_loop = bridge.get().event_loop.bind(py).clone();
    let future = event_loop.call_method0(pyo3::intern!(py, "create_future"))?;
    let mut fut = Box::pin(fut);
    let first = py.detach(|| {
        let _entered = rt.enter();
        fut.as_mut()
            .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    });
    if let std::task::Poll::Ready(out) = first {
        settle(py, &future, convert(out))?;
        return Ok(future.unbind());
    }
    let inner = bridge.get().inner.clone();
    let target = future.clone().unbind();
    let task = rt.spawn(async move {
        let out = fut.await;
        inner.complete(Completion {
            future: target,
            outcome: convert(out),
        });
    });
    // a cancelled asyncio future stops the work (a no-op once it finished)
    let cancel = Canceller {
        task: task.abort_handle(),
    };
    future.call_method1(pyo3::intern!(py, "add_done_callback"), (cancel,))?;
    Ok(future.unbind())
}

struct Completion {
    future: Py<PyAny>,
    outcome: Result<Convert>,
}

struct BridgeInner {
    queue: parking_lot::Mutex<Vec<Completion>>,
    /// Written (one byte) when the queue stops being empty.
    wake: UnixStream,
    /// Read by the loop (`add_reader`), which then drains the queue.
    woken: UnixStream,
}

impl BridgeInner {
    fn complete(&self, done: Completion) {
        let was_empty = {
            let mut queue = self.queue.lock();
            let was_empty = queue.is_empty();
            queue.push(done);
            was_empty
        };
        if was_empty {
            // WouldBlock: the socket is full of wake-ups the loop has not read
            let _ = (&self.wake).write(&[1]);
        }
    }
}

/// One event loop's way back from the runtime: finished calls queue their
/// results here and wake the loop through a socket it watches
/// (`loop.add_reader`); the loop's thread then settles their futures.
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
struct Bridge {
    inner: Arc<BridgeInner>,
    event_loop: Py<PyAny>,
}

static BRIDGES: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

impl Bridge {
    /// The bridge of the running loop, made and registered on first use
    /// (kept in a `WeakKeyDictionary` by loop, so it goes with its loop).
    fn for_running_loop(py: Python<'_>) -> PyResult<Bound<'_, Bridge>> {
        let bridges = BRIDGES
            .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
                Ok(py.import("weakref")?.call_method0("WeakKeyDictionary")?.unbind())
            })?
            .bind(py);
        let event_loop = py
            .import(pyo3::intern!(py, "asyncio"))?
            .call_method0(pyo3::intern!(py, "get_running_loop"))?;
        let found = bridges.call_method1(pyo3::intern!(py, "get"), (&event_loop,))?;
        if !found.is_none() {
            return Ok(found.cast_into::<Bridge>()?);
        }
        let (wake, woken) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        woken.set_nonblocking(true)?;
        let fd = woken.as_raw_fd();
        let bridge = Bound::new(
            py,
            Bridge {
                inner: Arc::new(BridgeInner {
                    queue: parking_lot::Mutex::new(Vec::new()),
                    wake,
                    woken,
                }),
                event_loop: event_loop.clone().unbind(),
            },
        )?;
        event_loop.call_method1("add_reader", (fd, bridge.getattr("drain")?))?;
        bridges.set_item(&event_loop, &bridge)?;
        Ok(bridge)
    }
}

#[pymethods]
impl Bridge {
    /// Settles the futures of every call finished since the last drain (the
    /// loop calls this when the socket is readable).
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        let mut buf = [0u8; 64];
        while let Ok(n) = (&self.inner.woken).read(&mut buf) {
            if n < buf.len() {
                break;
            }
        }
        let done = std::mem::take(&mut *self.inner.queue.lock());
        let mut first_err = None;
        for item in done {
            if let Err(e) = settle(py, item.future.bind(py), item.outcome) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// The done-callback that aborts a call's task when its future is cancelled.
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
struct Canceller {
    task: tokio::task::AbortHandle,
}

#[pymethods]
impl Canceller {
    fn __call__(&self, _future: &Bound<'_, PyAny>) {
        self.task.abort();
    }
}

/// A msgpack payload for Python (`bytes`).
struct Packed(Vec<u8>);

impl<'py> IntoPyObject<'py> for Packed {
    type Target = PyBytes;
    type Output = Bound<'py, PyBytes>;
    type Error = std::convert::Infallible;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyBytes::new(py, &self.0))
    }
}

fn pack(value: &Value) -> Result<Packed> {
    msgpack::encode(value).map(Packed)
}

fn unpack(payload: &[u8]) -> Result<Value> {
    msgpack::decode_bytes(&Bytes::copy_from_slice(payload))
}

fn array<'a>(value: &'a Value, what: &str, len: Option<usize>) -> Result<&'a [Value]> {
    let items = value
        .as_array()
        .ok_or_else(|| Error::invalid(format!("{what} is not a list")))?;
    match len {
        Some(n) if items.len() != n => Err(Error::invalid(format!("{what} has {} items, not {n}", items.len()))),
        _ => Ok(items),
    }
}

fn versions(value: &Value) -> Result<ChannelVersions> {
    let entries = match value {
        Value::Nil => return Ok(ChannelVersions::default()),
        other => other
            .as_map()
            .ok_or_else(|| Error::invalid("new_versions is not a dict"))?,
    };
    entries
        .iter()
        .map(|(k, v)| {
            let key = k
                .as_str()
                .ok_or_else(|| Error::invalid("new_versions has a key that is not a str"))?;
            let version = ChannelVersion::from_value(v)
                .ok_or_else(|| Error::invalid(format!("new_versions[{key:?}] is not a str or int version")))?;
            Ok((key.to_owned(), version))
        })
        .collect()
}

/// A pending write for Python: `(task_id, channel, msgpack(value))`.
struct PackedWrite(String, String, Packed);

fn packed_write(w: &PendingWrite) -> Result<PackedWrite> {
    Ok(PackedWrite(w.task_id.clone(), w.channel.clone(), pack(&w.value)?))
}

impl<'py> IntoPyObject<'py> for PackedWrite {
    type Target = pyo3::types::PyTuple;
    type Output = Bound<'py, pyo3::types::PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        (self.0, self.1, self.2).into_pyobject(py)
    }
}

/// A checkpoint tuple for Python: `(thread_id, ns, id, msgpack(checkpoint),
/// msgpack(metadata), parent_id | None, [(task, channel, msgpack(value))])`.
/// Each value is a payload of its own, so that crossing into Python adds no
/// level of nesting to what the store holds (a value as deep as the crate
/// stores reads back).
struct PackedTuple {
    thread_id: String,
    checkpoint_ns: String,
    checkpoint_id: Option<String>,
    checkpoint: Packed,
    metadata: Packed,
    parent_id: Option<String>,
    writes: Vec<PackedWrite>,
}

fn packed_tuple(t: &CheckpointTuple) -> Result<PackedTuple> {
    Ok(PackedTuple {
        thread_id: t.config.thread_id.clone(),
        checkpoint_ns: t.config.checkpoint_ns.clone().unwrap_or_default(),
        checkpoint_id: t.config.checkpoint_id.clone(),
        checkpoint: pack(&t.checkpoint.to_value(true))?,
        metadata: pack(&t.metadata.to_value())?,
        parent_id: t.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
        writes: t.pending_writes.iter().map(packed_write).collect::<Result<_>>()?,
    })
}

impl<'py> IntoPyObject<'py> for PackedTuple {
    type Target = pyo3::types::PyTuple;
    type Output = Bound<'py, pyo3::types::PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        (
            self.thread_id,
            self.checkpoint_ns,
            self.checkpoint_id,
            self.checkpoint,
            self.metadata,
            self.parent_id,
            self.writes,
        )
            .into_pyobject(py)
    }
}

/// One channel's delta history for Python: `([(task, channel,
/// msgpack(value))], msgpack(seed) | None)`.
struct PackedHistory(Vec<PackedWrite>, Option<Packed>);

impl<'py> IntoPyObject<'py> for PackedHistory {
    type Target = pyo3::types::PyTuple;
    type Output = Bound<'py, pyo3::types::PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        (self.0, self.1).into_pyobject(py)
    }
}

fn config(thread_id: String, ns: String, checkpoint_id: Option<String>) -> CheckpointConfig {
    let mut config = CheckpointConfig::new(thread_id).with_ns(ns);
    config.checkpoint_id = checkpoint_id;
    config
}

/// The serializer a saver stores with: LangGraph's `JsonPlusSerializer`, or
/// its `EncryptedSerializer` (AES-EAX natively when Python hands over the
/// key, any other cipher through its Python object).
fn serializer(aes_key: Option<&[u8]>, cipher: Option<Py<PyAny>>) -> Result<Arc<dyn Serializer>> {
    Ok(match (aes_key, cipher) {
        (Some(key), _) => Arc::new(checkpointer::serde::EncryptedSerializer::from_key(key)?.allow_plaintext(true)),
        (None, Some(cipher)) => Arc::new(cipher::PyCipherSerializer::new(cipher)),
        (None, None) => Arc::new(JsonPlusSerializer),
    })
}

/// A listing's config and options from `Core.list`'s arguments.
fn list_args(
    thread_id: Option<String>,
    checkpoint_ns: Option<String>,
    checkpoint_id: Option<String>,
    filter: Option<&[u8]>,
    before: Option<String>,
    limit: Option<usize>,
) -> PyResult<(Option<CheckpointConfig>, ListOptions)> {
    let mut options = ListOptions {
        before,
        limit,
        ..ListOptions::default()
    };
    if let Some(filter) = filter {
        let value = unpack(filter).map_err(to_py)?;
        let entries = value
            .as_map()
            .ok_or_else(|| to_py(Error::invalid("the filter is not a dict")))?;
        for (k, v) in entries {
            let key = k
                .as_str()
                .ok_or_else(|| to_py(Error::invalid("the filter has a key that is not a str")))?;
            options.filter.insert(key.to_owned(), v.clone());
        }
    }
    let config = thread_id.map(|thread_id| CheckpointConfig {
        thread_id,
        checkpoint_ns,
        checkpoint_id,
    });
    Ok((config, options))
}

/// What a [`Core`] holds besides the saver: the backend's own handle, for
/// what is not in the trait (setup, close).
enum Native {
    Sqlite(Arc<SqliteSaver>),
    Postgres(PostgresSaver),
    Redis(RedisSaver),
}

/// One open saver. Cheap to share: Python's `with_allowlist` copies hold
/// the same one.
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
struct Core {
    saver: parking_lot::RwLock<Option<Arc<dyn CheckpointSaver>>>,
    native: Native,
    /// The AES-EAX cipher of a saver that encrypts natively: `put_raw`
    /// seals the plaintext msgpack Python hands over with it.
    seal: Option<Arc<AesEax>>,
}

impl Core {
    fn new(native: Native) -> Core {
        let saver: Arc<dyn CheckpointSaver> = match &native {
            Native::Sqlite(s) => s.clone(),
            Native::Postgres(s) => Arc::new(s.clone()),
            Native::Redis(s) => Arc::new(s.clone()),
        };
        Core {
            saver: parking_lot::RwLock::new(Some(saver)),
            native,
            seal: None,
        }
    }

    fn sqlite(&self) -> PyResult<Arc<SqliteSaver>> {
        match &self.native {
            Native::Sqlite(s) => Ok(s.clone()),
            _ => Err(to_py(Error::Unsupported {
                operation: "reading stored rows",
                implementer: "this backend",
            })),
        }
    }

    fn saver(&self) -> PyResult<Arc<dyn CheckpointSaver>> {
        self.saver
            .read()
            .clone()
            .ok_or_else(|| to_py(Error::invalid("the saver is closed")))
    }
}

#[pymethods]
impl Core {
    /// The backend: "sqlite", "postgres" or "redis".
    #[getter]
    fn backend(&self) -> &'static str {
        match self.native {
            Native::Sqlite(_) => "sqlite",
            Native::Postgres(_) => "postgres",
            Native::Redis(_) => "redis",
        }
    }

    /// Creates or migrates the tables (Postgres, as Python's `setup()`);
    /// SQLite and Redis are ready when opened.
    fn setup(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        self.saver()?;
        let pg = match &self.native {
            Native::Postgres(pg) => Some(pg.clone()),
            _ => None,
        };
        dispatch(py, aio, async move {
            match pg {
                Some(pg) => pg.setup().await,
                None => Ok(()),
            }
        })
    }

    /// Finishes queued writes and closes the saver; later calls fail.
    fn close(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        let taken = self.saver.write().take();
        let sqlite = match (&self.native, taken) {
            (Native::Sqlite(s), Some(_)) => Some(s.clone()),
            _ => None,
        };
        dispatch(py, aio, async move {
            match sqlite {
                Some(s) => s.close().await,
                None => Ok(()),
            }
        })
    }

    /// Stores the checkpoint, metadata and new versions (each one msgpack
    /// payload) with parent `parent_id`.
    #[pyo3(signature = (aio, thread_id, checkpoint_ns, parent_id, checkpoint, metadata, new_versions))]
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        py: Python<'_>,
        aio: bool,
        thread_id: String,
        checkpoint_ns: String,
        parent_id: Option<String>,
        checkpoint: &[u8],
        metadata: &[u8],
        new_versions: &[u8],
    ) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        let payloads = [checkpoint, metadata, new_versions].map(Bytes::copy_from_slice);
        dispatch(py, aio, async move {
            let [checkpoint, metadata, new_versions] = payloads;
            let checkpoint = Checkpoint::from_value(&msgpack::decode_bytes(&checkpoint)?)?;
            let metadata = CheckpointMetadata::from_value(&msgpack::decode_bytes(&metadata)?)?;
            let new_versions = versions(&msgpack::decode_bytes(&new_versions)?)?;
            let config = config(thread_id, checkpoint_ns, parent_id);
            saver.put(&config, &checkpoint, &metadata, &new_versions).await?;
            Ok(())
        })
    }

    /// Stores a checkpoint LangGraph's serializer encoded, `(tag, data)`, as
    /// given (sealed here first when the saver encrypts natively and `tag`
    /// is plaintext), with `metadata = msgpack(metadata)`. SQLite only:
    /// the bytes go into the row as Python's `SqliteSaver` writes them,
    /// without being decoded and encoded again.
    #[pyo3(signature = (aio, thread_id, checkpoint_ns, parent_id, checkpoint_id, tag, data, metadata))]
    #[allow(clippy::too_many_arguments)]
    fn put_raw(
        &self,
        py: Python<'_>,
        aio: bool,
        thread_id: String,
        checkpoint_ns: String,
        parent_id: Option<String>,
        checkpoint_id: String,
        tag: String,
        data: &[u8],
        metadata: &[u8],
    ) -> PyResult<Py<PyAny>> {
        self.saver()?;
        let sqlite = self.sqlite()?;
        let seal = self.seal.clone();
        let (data, metadata) = (Bytes::copy_from_slice(data), Bytes::copy_from_slice(metadata));
        dispatch(py, aio, async move {
            let checkpoint = match seal {
                // LangGraph's EncryptedSerializer tags "{inner}+{cipher}";
                // checked as put_raw checks plaintext, before it is sealed
                Some(aes) if !tag.contains('+') => {
                    SqliteSaver::check_raw_checkpoint(&data)?;
                    TypedBytes::new(format!("{tag}+aes"), aes.encrypt(&data)?)
                }
                _ => TypedBytes::new(tag, data),
            };
            let metadata = CheckpointMetadata::from_value(&msgpack::decode_bytes(&metadata)?)?;
            let config = config(thread_id, checkpoint_ns, parent_id);
            sqlite.put_raw(&config, &checkpoint_id, checkpoint, &metadata).await?;
            Ok(())
        })
    }

    /// Stores `payload = msgpack([[channel, value], ...])` as the writes of
    /// `task_id` against the checkpoint.
    #[pyo3(signature = (aio, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, payload))]
    #[allow(clippy::too_many_arguments)]
    fn put_writes(
        &self,
        py: Python<'_>,
        aio: bool,
        thread_id: String,
        checkpoint_ns: String,
        checkpoint_id: Option<String>,
        task_id: String,
        task_path: String,
        payload: &[u8],
    ) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        let payload = Bytes::copy_from_slice(payload);
        dispatch(py, aio, async move {
            let value = msgpack::decode_bytes(&payload)?;
            let writes = array(&value, "the writes", None)?
                .iter()
                .map(|w| {
                    let pair = array(w, "a write", Some(2))?;
                    let channel = pair[0]
                        .as_str()
                        .ok_or_else(|| Error::invalid("a write's channel is not a str"))?;
                    Ok((channel.to_owned(), pair[1].clone()))
                })
                .collect::<Result<Vec<_>>>()?;
            let config = config(thread_id, checkpoint_ns, checkpoint_id);
            saver.put_writes(&config, &writes, &task_id, &task_path).await
        })
    }

    /// The checkpoint (or the latest of thread/ns) as a tuple of payloads
    /// (see `PackedTuple`), or `None`.
    #[pyo3(signature = (aio, thread_id, checkpoint_ns, checkpoint_id))]
    fn get_tuple(
        &self,
        py: Python<'_>,
        aio: bool,
        thread_id: String,
        checkpoint_ns: String,
        checkpoint_id: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        dispatch(py, aio, async move {
            let config = config(thread_id, checkpoint_ns, checkpoint_id);
            match saver.get_tuple(&config).await? {
                Some(t) => packed_tuple(&t).map(Some),
                None => Ok(None),
            }
        })
    }

    /// A listing, newest first, read in batches with [`Lister::next`].
    /// `thread_id = None` lists every thread, `checkpoint_ns = None` every
    /// namespace; `filter` is `msgpack({key: value})` of metadata.
    #[pyo3(signature = (thread_id, checkpoint_ns, checkpoint_id, filter, before, limit))]
    fn list(
        &self,
        thread_id: Option<String>,
        checkpoint_ns: Option<String>,
        checkpoint_id: Option<String>,
        filter: Option<&[u8]>,
        before: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<Lister> {
        let saver = self.saver()?;
        let (config, options) = list_args(thread_id, checkpoint_ns, checkpoint_id, filter, before, limit)?;
        let _guard = runtime()?.enter();
        let stream = saver.list(config, options);
        Ok(Lister {
            stream: Arc::new(tokio::sync::Mutex::new(Some(stream))),
        })
    }

    /// The stored row of the checkpoint (or the latest of thread/ns) for
    /// LangGraph's serializer to decode (see `RawRows`), or `None`. SQLite
    /// only.
    #[pyo3(signature = (aio, thread_id, checkpoint_ns, checkpoint_id))]
    fn get_tuple_raw(
        &self,
        py: Python<'_>,
        aio: bool,
        thread_id: String,
        checkpoint_ns: String,
        checkpoint_id: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        self.saver()?;
        let sqlite = self.sqlite()?;
        dispatch(py, aio, async move {
            let config = config(thread_id, checkpoint_ns, checkpoint_id);
            let row = sqlite.get_raw(&config).await?;
            Ok(row.map(|r| RawRows(vec![r])))
        })
    }

    /// [`Core::list`] as stored rows (see `RawRows`). SQLite only.
    #[pyo3(signature = (thread_id, checkpoint_ns, checkpoint_id, filter, before, limit))]
    fn list_raw(
        &self,
        thread_id: Option<String>,
        checkpoint_ns: Option<String>,
        checkpoint_id: Option<String>,
        filter: Option<&[u8]>,
        before: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<RawLister> {
        self.saver()?;
        let sqlite = self.sqlite()?;
        let (config, options) = list_args(thread_id, checkpoint_ns, checkpoint_id, filter, before, limit)?;
        let _guard = runtime()?.enter();
        Ok(RawLister {
            stream: Arc::new(tokio::sync::Mutex::new(Some(sqlite.list_raw(config, options)))),
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

    /// `[(channel, ([(task, channel, msgpack(value))], msgpack(seed) | None))]`
    /// in the saver's order.
    #[pyo3(signature = (aio, thread_id, checkpoint_ns, checkpoint_id, channels))]
    fn delta_channel_history(
        &self,
        py: Python<'_>,
        aio: bool,
        thread_id: String,
        checkpoint_ns: String,
        checkpoint_id: Option<String>,
        channels: Vec<String>,
    ) -> PyResult<Py<PyAny>> {
        let saver = self.saver()?;
        dispatch(py, aio, async move {
            let config = config(thread_id, checkpoint_ns, checkpoint_id);
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

/// Stored rows for Python (SQLite): tuples `(thread_id, ns, id, parent |
/// None, tag, checkpoint bytes, metadata JSON bytes, [(task_id, channel,
/// tag, value bytes)])`, decoded by LangGraph's serializer on the Python side
/// as Python's `SqliteSaver` decodes its rows.
struct RawRows(Vec<checkpointer::sqlite::RawTuple>);

fn raw_row<'py>(py: Python<'py>, t: checkpointer::sqlite::RawTuple) -> PyResult<Bound<'py, PyAny>> {
    let writes = t
        .writes
        .into_iter()
        .map(|w| (w.task_id, w.channel, w.tag, PyBytes::new(py, &w.value)).into_pyobject(py))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((
        t.thread_id,
        t.checkpoint_ns,
        t.checkpoint_id,
        t.parent_checkpoint_id,
        t.tag,
        PyBytes::new(py, &t.checkpoint),
        PyBytes::new(py, &t.metadata),
        writes,
    )
        .into_pyobject(py)?
        .into_any())
}

impl<'py> IntoPyObject<'py> for RawRows {
    type Target = pyo3::types::PyList;
    type Output = Bound<'py, pyo3::types::PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        let rows = self
            .0
            .into_iter()
            .map(|t| raw_row(py, t))
            .collect::<PyResult<Vec<_>>>()?;
        pyo3::types::PyList::new(py, rows)
    }
}

/// A listing of stored rows in progress (SQLite).
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
struct RawLister {
    stream:
        Arc<tokio::sync::Mutex<Option<futures::stream::BoxStream<'static, Result<checkpointer::sqlite::RawTuple>>>>>,
}

#[pymethods]
impl RawLister {
    /// The next `max` rows (fewer at the end; an empty list when done).
    fn next(&self, py: Python<'_>, aio: bool, max: usize) -> PyResult<Py<PyAny>> {
        let stream = self.stream.clone();
        dispatch(py, aio, async move { next_batch(&stream, max).await.map(RawRows) })
    }
}

/// A listing in progress.
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
struct Lister {
    stream: Listing<CheckpointTuple>,
}

#[pymethods]
impl Lister {
    /// The next `max` tuples (fewer at the end; an empty list when done),
    /// each as `PackedTuple`.
    fn next(&self, py: Python<'_>, aio: bool, max: usize) -> PyResult<Py<PyAny>> {
        let stream = self.stream.clone();
        dispatch(py, aio, async move {
            let batch = next_batch(&stream, max).await?;
            batch.iter().map(packed_tuple).collect::<Result<Vec<_>>>()
        })
    }
}

/// Opens a SQLite file (`":memory:"` for a private in-memory database),
/// creating the tables Python's `SqliteSaver.setup()` creates.
#[pyfunction]
#[pyo3(signature = (aio, path, aes_key=None, cipher=None))]
fn open_sqlite(
    py: Python<'_>,
    aio: bool,
    path: String,
    aes_key: Option<&[u8]>,
    cipher: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let serde = serializer(aes_key, cipher).map_err(to_py)?;
    let seal = aes_key.map(AesEax::new).transpose().map_err(to_py)?.map(Arc::new);
    dispatch(py, aio, async move {
        let saver = SqliteSaver::builder(path)
            .serializer(serde)
            .fill_from_parent(false)
            .open()
            .await?;
        let mut core = Core::new(Native::Sqlite(Arc::new(saver)));
        core.seal = seal;
        Ok(core)
    })
}

/// A PostgreSQL saver on a pool of `max_connections` (connections open
/// lazily; run `setup` to create the tables, as with Python's saver).
#[pyfunction]
#[pyo3(signature = (aio, url, max_connections=None, aes_key=None, cipher=None))]
fn open_postgres(
    py: Python<'_>,
    aio: bool,
    url: String,
    max_connections: Option<usize>,
    aes_key: Option<&[u8]>,
    cipher: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let serde = serializer(aes_key, cipher).map_err(to_py)?;
    dispatch(py, aio, async move {
        let mut builder = PostgresSaver::builder()
            .url(url)
            .serializer(serde)
            .fill_from_parent(false);
        if let Some(n) = max_connections {
            builder = builder.max_connections(n);
        }
        Ok(Core::new(Native::Postgres(builder.build()?)))
    })
}

/// A Redis saver (`redis://` or `rediss://`), with an optional TTL in
/// minutes.
#[pyfunction]
#[pyo3(signature = (aio, url, key_prefix=None, ttl_minutes=None, refresh_on_read=false, aes_key=None, cipher=None))]
#[allow(clippy::too_many_arguments)]
fn open_redis(
    py: Python<'_>,
    aio: bool,
    url: String,
    key_prefix: Option<String>,
    ttl_minutes: Option<f64>,
    refresh_on_read: bool,
    aes_key: Option<&[u8]>,
    cipher: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let serde = serializer(aes_key, cipher).map_err(to_py)?;
    if let Some(m) = ttl_minutes {
        if !(m.is_finite() && m > 0.0) {
            return Err(to_py(Error::invalid(format!(
                "ttl minutes must be a positive number, got {m}"
            ))));
        }
    }
    dispatch(py, aio, async move {
        let mut builder = RedisSaver::builder().url(url).serializer(serde);
        if let Some(prefix) = key_prefix {
            builder = builder.key_prefix(prefix);
        }
        if let Some(m) = ttl_minutes {
            builder = builder.ttl(TtlConfig::minutes(m).refresh_on_read(refresh_on_read));
        }
        Ok(Core::new(Native::Redis(builder.open().await?)))
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Core>()?;
    m.add_class::<Lister>()?;
    m.add_class::<RawLister>()?;
    m.add_class::<Bridge>()?;
    m.add_function(wrap_pyfunction!(open_sqlite, m)?)?;
    m.add_function(wrap_pyfunction!(open_postgres, m)?)?;
    m.add_function(wrap_pyfunction!(open_redis, m)?)?;
    Ok(())
}
