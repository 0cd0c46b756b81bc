//! The caller's Python embedding function as the crate's [`Embeddings`]:
//! the store calls it from Rust, in batches, and never fetches a model.
//!
//! The function arrives as LangChain's `Embeddings` (what LangGraph's
//! `ensure_embeddings` makes of a plain or async function, or the object
//! itself). A sync call of the store calls its `embed_documents` /
//! `embed_query` on the calling thread (the store's call runs there with
//! the GIL released, and takes it back for the function). An async call
//! runs its `aembed_documents` / `aembed_query` coroutine on the caller's
//! event loop (`asyncio.run_coroutine_threadsafe`; an async function is
//! awaited there, a sync one runs in the loop's executor, as LangChain
//! does it) and waits for it without holding a runtime thread or the
//! loop: the coroutine's result comes back through a done-callback.

use std::future::Future;

use async_trait::async_trait;
use checkpointer::store::{EmbedError, Embeddings};
use pyo3::prelude::*;
use pyo3::types::PyList;

tokio::task_local! {
    /// The event loop of the async store call being run (`None`: a sync
    /// call, whose embedding runs on its own thread).
    static EVENT_LOOP: Option<Py<PyAny>>;
}

/// Runs `fut` (a store call) with embeddings called on `event_loop` (an
/// async call) or on the calling thread (`None`).
pub(crate) fn on_loop<F: Future>(event_loop: Option<Py<PyAny>>, fut: F) -> impl Future<Output = F::Output> {
    EVENT_LOOP.scope(event_loop, fut)
}

/// The event loop of the call running now, if it is an async one.
fn current_loop(py: Python<'_>) -> Option<Py<PyAny>> {
    EVENT_LOOP
        .try_with(|l| l.as_ref().map(|l| l.clone_ref(py)))
        .ok()
        .flatten()
}

/// A LangChain `Embeddings` object, called by the store.
pub(crate) struct PyEmbeddings {
    embeddings: Py<PyAny>,
}

impl PyEmbeddings {
    pub(crate) fn new(embeddings: Py<PyAny>) -> PyEmbeddings {
        PyEmbeddings { embeddings }
    }

    /// Calls `sync_name(arg)` on this thread, or awaits `async_name(arg)` on
    /// the call's event loop; what it returned.
    async fn call<A>(&self, sync_name: &'static str, async_name: &'static str, arg: A) -> PyResult<Py<PyAny>>
    where
        A: for<'py> IntoPyObject<'py> + Send,
    {
        let pending = Python::attach(|py| -> PyResult<Result<Py<PyAny>, Waiting>> {
            let embeddings = self.embeddings.bind(py);
            let Some(event_loop) = current_loop(py) else {
                return Ok(Ok(embeddings.call_method1(sync_name, (arg,))?.unbind()));
            };
            let coroutine = embeddings.call_method1(async_name, (arg,))?;
            let future = py
                .import(pyo3::intern!(py, "asyncio"))?
                .call_method1(pyo3::intern!(py, "run_coroutine_threadsafe"), (coroutine, event_loop))?;
            let (tx, rx) = tokio::sync::oneshot::channel();
            let deliver = Deliver {
                tx: parking_lot::Mutex::new(Some(tx)),
            };
            future.call_method1(pyo3::intern!(py, "add_done_callback"), (deliver,))?;
            Ok(Err(rx))
        })?;
        match pending {
            Ok(done) => Ok(done),
            Err(rx) => rx
                .await
                .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("the event loop dropped the embedding call"))?,
        }
    }
}

/// An embedding coroutine's outcome, on its way to the store call.
type Waiting = tokio::sync::oneshot::Receiver<PyResult<Py<PyAny>>>;

/// The done-callback of an embedding coroutine: hands its result (or its
/// exception) to the waiting store call.
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
struct Deliver {
    tx: parking_lot::Mutex<Option<tokio::sync::oneshot::Sender<PyResult<Py<PyAny>>>>>,
}

#[pymethods]
impl Deliver {
    fn __call__(&self, future: &Bound<'_, PyAny>) {
        let outcome = future
            .call_method0(pyo3::intern!(future.py(), "result"))
            .map(Bound::unbind);
        if let Some(tx) = self.tx.lock().take() {
            // a dropped receiver: the store call was cancelled meanwhile
            let _ = tx.send(outcome);
        }
    }
}

fn to_f32(vectors: Vec<Vec<f64>>) -> Vec<Vec<f32>> {
    vectors
        .into_iter()
        .map(|v| v.into_iter().map(|x| x as f32).collect())
        .collect()
}

#[async_trait]
impl Embeddings for PyEmbeddings {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let texts = Python::attach(|py| PyList::new(py, texts).map(Bound::unbind))?;
        let out = self.call("embed_documents", "aembed_documents", texts).await?;
        let vectors: Vec<Vec<f64>> = Python::attach(|py| out.bind(py).extract())?;
        Ok(to_f32(vectors))
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let out = self.call("embed_query", "aembed_query", text.to_owned()).await?;
        let vector: Vec<f64> = Python::attach(|py| out.bind(py).extract())?;
        Ok(to_f32(vec![vector]).pop().unwrap_or_default())
    }
}
