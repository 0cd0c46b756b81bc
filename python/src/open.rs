//! Opening a saver: one function per backend, and [`Native`], the one place
//! that names the backends' types (what is not in the saver traits: setup,
//! close and the backend's name).

use std::sync::Arc;

use checkpointer::encoded::EncodedSaver;
use checkpointer::postgres::PostgresSaver;
use checkpointer::redis::{RedisSaver, TtlConfig};
use checkpointer::serde::{JsonPlusSerializer, Serializer};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::Error;
use pyo3::prelude::*;

use crate::bridge::dispatch;
use crate::runtime::{to_py, Result};
use crate::saver::Core;

/// The backend's own handle behind a [`Core`].
#[derive(Clone)]
pub(crate) enum Native {
    Sqlite(Arc<SqliteSaver>),
    Postgres(PostgresSaver),
    Redis(RedisSaver),
}

impl Native {
    /// The saver, as every backend serves it.
    pub(crate) fn saver(&self) -> Arc<dyn EncodedSaver> {
        match self {
            Native::Sqlite(s) => s.clone(),
            Native::Postgres(s) => Arc::new(s.clone()),
            Native::Redis(s) => Arc::new(s.clone()),
        }
    }

    /// "sqlite", "postgres" or "redis".
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Native::Sqlite(_) => "sqlite",
            Native::Postgres(_) => "postgres",
            Native::Redis(_) => "redis",
        }
    }

    /// Creates or migrates the tables (Postgres, as Python's `setup()`);
    /// SQLite and Redis are ready when opened.
    pub(crate) async fn setup(self) -> Result<()> {
        match self {
            Native::Postgres(pg) => pg.setup().await,
            _ => Ok(()),
        }
    }

    /// Finishes queued writes and closes what the saver holds open.
    pub(crate) async fn close(self) -> Result<()> {
        match self {
            Native::Sqlite(s) => s.close().await,
            _ => Ok(()),
        }
    }
}

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

/// Opens a SQLite file (`":memory:"` for a private in-memory database),
/// creating the tables Python's `SqliteSaver.setup()` creates.
#[pyfunction]
#[pyo3(signature = (aio, path, aes_key=None, cipher=None))]
pub(crate) fn open_sqlite(
    py: Python<'_>,
    aio: bool,
    path: String,
    aes_key: Option<&[u8]>,
    cipher: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let serde = serializer(aes_key, cipher).map_err(to_py)?;
    dispatch(py, aio, async move {
        let saver = SqliteSaver::builder(path)
            .serializer(serde)
            .fill_from_parent(false)
            .open()
            .await?;
        Ok(Core::new(Native::Sqlite(Arc::new(saver))))
    })
}

/// A PostgreSQL saver on a pool of `max_connections` (connections open
/// lazily; run `setup` to create the tables, as with Python's saver).
#[pyfunction]
#[pyo3(signature = (aio, url, max_connections=None, aes_key=None, cipher=None))]
pub(crate) fn open_postgres(
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
pub(crate) fn open_redis(
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
