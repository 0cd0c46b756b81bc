//! The async bridge: a call runs on the calling thread with the GIL released
//! (`aio=False`), or as an asyncio future of the running loop settled on the
//! loop's thread when the runtime finishes it (`aio=True`).

use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::runtime::{runtime, to_py, Result};

/// Runs `fut` to completion: on this thread with the GIL released
/// (`aio=False`), or as an asyncio future of the running loop (`aio=True`,
/// see [`start`]).
pub(crate) fn dispatch<T>(
    py: Python<'_>,
    aio: bool,
    fut: impl Future<Output = Result<T>> + Send + 'static,
) -> PyResult<Py<PyAny>>
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
pub(crate) struct Bridge {
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
pub(crate) struct Canceller {
    task: tokio::task::AbortHandle,
}

#[pymethods]
impl Canceller {
    fn __call__(&self, _future: &Bound<'_, PyAny>) {
        self.task.abort();
    }
}
