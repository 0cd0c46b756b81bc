//! Opening a saver: one function for every store, a URL and the settings
//! of [`OpenOptions`] (the Python classes pass the ones their backend
//! honours); the core holds what [`OpenOptions::open`] hands back.

use std::sync::Arc;
use std::time::Duration;

use checkpointer::fence::Fence;
use checkpointer::serde::{JsonPlusSerializer, Serializer};
use checkpointer::{Error, OpenOptions, TtlConfig};
use pyo3::prelude::*;

use crate::bridge::dispatch;
use crate::runtime::{to_py, Result};
use crate::saver::Core;

/// The serializer a saver stores with: LangGraph's `JsonPlusSerializer`, or
/// its `EncryptedSerializer` (AES-EAX natively when Python hands over the
/// key, any other cipher through its Python object).
fn serializer(aes_key: Option<&[u8]>, cipher: Option<Py<PyAny>>) -> Result<Arc<dyn Serializer>> {
    Ok(match (aes_key, cipher) {
        (Some(key), _) => Arc::new(checkpointer::serde::EncryptedSerializer::from_key(key)?.allow_plaintext(true)),
        (None, Some(cipher)) => Arc::new(crate::cipher::PyCipherSerializer::new(cipher)),
        (None, None) => Arc::new(JsonPlusSerializer),
    })
}

/// The time to live of `ttl_minutes` (a positive number of minutes).
fn ttl(minutes: f64, refresh_on_read: bool) -> Result<TtlConfig> {
    if !(minutes.is_finite() && minutes > 0.0) {
        return Err(Error::invalid(format!(
            "ttl minutes must be a positive number, got {minutes}"
        )));
    }
    Ok(TtlConfig::minutes(minutes).refresh_on_read(refresh_on_read))
}

/// The fence of `writer` holding each thread for `lease_seconds`; `None`
/// without a writer.
fn fence(writer: Option<String>, lease_seconds: Option<f64>) -> Result<Option<Fence>> {
    let Some(writer) = writer else {
        return match lease_seconds {
            None => Ok(None),
            Some(_) => Err(Error::invalid("a lease time needs a writer identity")),
        };
    };
    let seconds = lease_seconds.unwrap_or(30.0);
    let lease = Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Error::invalid(format!("lease_seconds must be a positive number, got {seconds}")))?;
    Ok(Some(Fence::new(writer, lease)))
}

/// Opens the store behind `url` (`checkpointer::open`'s forms) as a
/// [`Core`]; `backend` is the one the caller's class serves ("sqlite",
/// "postgres" or "redis"), so that a URL of another is refused before
/// anything is opened. The other arguments are [`OpenOptions`]' settings;
/// one the store cannot honour is an `InvalidInputError`. With `writer`
/// the saver is fenced as that writer, each thread held `lease_seconds`
/// (30 by default) after its last write or renewal.
#[pyfunction]
#[pyo3(signature = (
    aio, url, backend, *, aes_key=None, cipher=None, fill_from_parent=true, lazy=false,
    max_connections=None, ttl_minutes=None, refresh_on_read=false, restore_journal=true,
    writer=None, lease_seconds=None,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn open(
    py: Python<'_>,
    aio: bool,
    url: String,
    backend: &str,
    aes_key: Option<&[u8]>,
    cipher: Option<Py<PyAny>>,
    fill_from_parent: bool,
    lazy: bool,
    max_connections: Option<usize>,
    ttl_minutes: Option<f64>,
    refresh_on_read: bool,
    restore_journal: bool,
    writer: Option<String>,
    lease_seconds: Option<f64>,
) -> PyResult<Py<PyAny>> {
    let named = OpenOptions::check(&url).map_err(to_py)?;
    if named != backend {
        return Err(to_py(Error::invalid(format!(
            "{} is a {named} store, not a {backend} one",
            checkpointer::secret::redact(&url)
        ))));
    }
    let mut options = OpenOptions::new()
        .serializer(serializer(aes_key, cipher).map_err(to_py)?)
        .fill_from_parent(fill_from_parent)
        .lazy(lazy)
        .restore_journal(restore_journal);
    if let Some(n) = max_connections {
        options = options.max_connections(n);
    }
    if let Some(minutes) = ttl_minutes {
        options = options.ttl(ttl(minutes, refresh_on_read).map_err(to_py)?);
    }
    let fence = fence(writer, lease_seconds).map_err(to_py)?;
    dispatch(py, aio, async move { Core::new(options.open(&url).await?, fence) })
}
