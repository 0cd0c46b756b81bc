//! The process's tokio runtime (one per process, refused after a fork) and
//! the crate's errors as Python exceptions.

use std::sync::OnceLock;

use checkpointer::Error;
use pyo3::prelude::*;

/// The crate's result.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

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
pub(crate) fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
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
/// class for its kind, with `retryable` and `kind` set (a store's refusal as
/// LangGraph's exception for it, see `store`).
pub(crate) fn to_py(err: Error) -> PyErr {
    let err = match err {
        Error::Store(store) => return crate::store::store_error_to_py(store),
        other => other,
    };
    let (class, kind) = match &err {
        Error::Serde { .. } => ("SerdeError", "serde"),
        Error::InvalidInput { .. } => ("InvalidInputError", "invalid_input"),
        Error::InvalidPolicy(_) => ("InvalidPolicyError", "invalid_policy"),
        Error::Unsupported { .. } => ("UnsupportedError", "unsupported"),
        Error::ThreadExists { .. } => ("ThreadExistsError", "thread_exists"),
        Error::Encryption(_) => ("EncryptionError", "encryption"),
        Error::Storage { .. } => ("StorageError", "storage"),
        Error::Fenced { .. } => ("FencedError", "fenced"),
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
            if let Error::Fenced {
                thread_id,
                writer,
                epoch,
            } = &err
            {
                instance.setattr("thread_id", thread_id)?;
                instance.setattr("writer", writer)?;
                instance.setattr("epoch", *epoch)?;
            }
            Ok(PyErr::from_value(instance))
        })();
        built.unwrap_or_else(|e| e)
    })
}
