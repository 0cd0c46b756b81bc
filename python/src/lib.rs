//! `langgraph_checkpoint_rs._core`: the checkpointer crate's savers behind a
//! handle that Python's `BaseCheckpointSaver` subclasses call.
//!
//! Python's serializer turns Python objects into `(tag, bytes)` pairs
//! (`serde.dumps_typed`, so every type LangGraph encodes arrives with its
//! ext codes); the crate's encoded I/O stores them as given on every
//! backend, after the checks `put` applies (sealed first when the saver
//! encrypts), and hands stored rows back the same way, for
//! `serde.loads_typed`. Every operation exists twice on `Core`: with
//! `aio=False` it runs on the calling thread with the GIL released; with
//! `aio=True` it returns an asyncio future of the running loop, settled on
//! the loop's thread when the crate's tokio runtime finishes the call (see
//! `bridge`): the event loop never waits on storage, and no thread other
//! than the loop's takes the GIL for it.
//!
//! By concern: `runtime` (the tokio runtime, errors), `bridge` (sync and
//! asyncio calls), `convert` (payloads both ways), `saver` (the saver
//! class), `open` (every store opened by `checkpointer::OpenOptions` from
//! its URL, so no backend type is named here), `cipher` (a Python cipher as
//! a serializer), `store` (LangGraph's `BaseStore` ops on the crate's
//! stores), `embed` (a Python embedding function as the crate's
//! `Embeddings`).

use pyo3::prelude::*;

mod bridge;
mod cipher;
mod convert;
mod embed;
mod open;
mod retention;
mod runtime;
mod saver;
mod store;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<saver::Core>()?;
    m.add_class::<saver::Lister>()?;
    m.add_class::<bridge::Bridge>()?;
    m.add_class::<store::StoreCore>()?;
    m.add_function(wrap_pyfunction!(open::open, m)?)?;
    m.add_function(wrap_pyfunction!(store::open_sqlite_store, m)?)?;
    m.add_function(wrap_pyfunction!(store::open_postgres_store, m)?)?;
    Ok(())
}
