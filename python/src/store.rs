//! `StoreCore`, the long-term memory store Python's `BaseStore` subclasses
//! call, and the one conversion between LangGraph's store types and the
//! crate's: ops in (`GetOp`, `PutOp`, `SearchOp`, `ListNamespacesOp`, read
//! by attribute, checked by class), `Item` / `SearchItem` and namespace
//! tuples out, the crate's store errors as LangGraph's exceptions.
//!
//! Values cross as JSON: a put's value (a mapping, made a `dict` as
//! LangGraph does) and a search's filter are encoded by `orjson`, as
//! LangGraph's SQL stores encode them; stored values come back through
//! `orjson.loads`. Times are timezone-aware UTC `datetime`s.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use checkpointer::store::{
    Filter, GetOp, IndexChoice, IndexConfig, ListNamespacesOp, MatchCondition, Namespace, Op, OpResult, PostgresStore,
    PutOp, SearchItem, SearchOp, SqliteStore, Store, StoreError, Ttl, TtlConfig,
};
use checkpointer::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::bridge::dispatch;
use crate::embed::{on_loop, PyEmbeddings};
use crate::runtime::{to_py, Result};

/// The Python callables the conversion uses, looked up once.
struct Api {
    get_op: Py<PyAny>,
    put_op: Py<PyAny>,
    search_op: Py<PyAny>,
    list_op: Py<PyAny>,
    item: Py<PyAny>,
    search_item: Py<PyAny>,
    dumps: Py<PyAny>,
    loads: Py<PyAny>,
    dict: Py<PyAny>,
    from_timestamp: Py<PyAny>,
    utc: Py<PyAny>,
}

static API: PyOnceLock<Api> = PyOnceLock::new();

fn api(py: Python<'_>) -> PyResult<&Api> {
    API.get_or_try_init(py, || {
        let base = py.import("langgraph.store.base")?;
        let orjson = py.import("orjson")?;
        let datetime = py.import("datetime")?;
        let attr = |m: &Bound<'_, PyModule>, name: &str| m.getattr(name).map(Bound::unbind);
        Ok::<_, PyErr>(Api {
            get_op: attr(&base, "GetOp")?,
            put_op: attr(&base, "PutOp")?,
            search_op: attr(&base, "SearchOp")?,
            list_op: attr(&base, "ListNamespacesOp")?,
            item: attr(&base, "Item")?,
            search_item: attr(&base, "SearchItem")?,
            dumps: attr(&orjson, "dumps")?,
            loads: attr(&orjson, "loads")?,
            dict: py.import("builtins")?.getattr("dict")?.unbind(),
            from_timestamp: datetime.getattr("datetime")?.getattr("fromtimestamp")?.unbind(),
            utc: datetime.getattr("timezone")?.getattr("utc")?.unbind(),
        })
    })
}

// --- errors ---------------------------------------------------------------

/// An instance of `langgraph_checkpoint_rs.errors.<class>` with `message`.
fn error_of(py: Python<'_>, class: &str, message: String) -> PyErr {
    let built = (|| -> PyResult<PyErr> {
        let cls = py.import("langgraph_checkpoint_rs.errors")?.getattr(class)?;
        let instance = cls.call1((message,))?;
        instance.setattr("kind", "store")?;
        Ok(PyErr::from_value(instance))
    })();
    built.unwrap_or_else(|e| e)
}

/// A store error as the exception LangGraph raises for it: its
/// `InvalidNamespaceError` with LangGraph's message, `ValueError("Unsupported
/// operator: …")`, the embedding function's own exception; the others as
/// `StoreInputError` (a `ValueError`) with the crate's message.
pub(crate) fn store_error_to_py(err: StoreError) -> PyErr {
    Python::attach(|py| match err {
        StoreError::InvalidNamespace { namespace, .. } => {
            let built = (|| -> PyResult<PyErr> {
                let errors = py.import("langgraph_checkpoint_rs.errors")?;
                let labels = PyTuple::new(py, &namespace)?;
                Ok(PyErr::from_value(errors.call_method1("namespace_error", (labels,))?))
            })();
            built.unwrap_or_else(|e| e)
        }
        StoreError::PgvectorMissing => error_of(py, "UnsupportedError", StoreError::PgvectorMissing.to_string()),
        StoreError::UnknownFilterOperator { operator } => {
            error_of(py, "StoreInputError", format!("Unsupported operator: {operator}"))
        }
        StoreError::Embedding(source) => match source.downcast::<PyErr>() {
            Ok(py_err) => *py_err,
            Err(other) => error_of(py, "StoreInputError", format!("the embedding function failed: {other}")),
        },
        other => error_of(py, "StoreInputError", other.to_string()),
    })
}

// --- ops in -----------------------------------------------------------------

/// A namespace tuple; a label that is not a `str` is LangGraph's
/// `InvalidNamespaceError`, as the others the crate refuses.
fn namespace(obj: &Bound<'_, PyAny>) -> Result<Namespace, PyErr> {
    let mut labels = Vec::new();
    for label in obj.try_iter()? {
        let label = label?;
        match label.extract::<String>() {
            Ok(s) => labels.push(s),
            Err(_) => {
                let errors = obj.py().import("langgraph_checkpoint_rs.errors")?;
                let tuple = obj.py().import("builtins")?.getattr("tuple")?.call1((obj,))?;
                return Err(PyErr::from_value(errors.call_method1("namespace_error", (tuple,))?));
            }
        }
    }
    Namespace::new(labels).map_err(to_py)
}

fn key(op: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(op.getattr("key")?.str()?.to_str()?.to_owned())
}

/// A JSON value through `orjson.dumps` (LangGraph's SQL stores' encoding).
fn json_of(api: &Api, obj: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let py = obj.py();
    let encoded = api.dumps.bind(py).call1((obj,))?;
    let bytes = encoded.cast::<PyBytes>()?;
    serde_json::from_slice(bytes.as_bytes()).map_err(|e| to_py(Error::invalid(format!("a value is not JSON: {e}"))))
}

fn index_choice(obj: &Bound<'_, PyAny>) -> PyResult<IndexChoice> {
    if obj.is_none() {
        return Ok(IndexChoice::Default);
    }
    if let Ok(flag) = obj.extract::<bool>() {
        return Ok(if flag { IndexChoice::Default } else { IndexChoice::Off });
    }
    Ok(IndexChoice::Paths(obj.extract()?))
}

fn ttl_of(obj: &Bound<'_, PyAny>) -> PyResult<Ttl> {
    if obj.is_none() {
        return Ok(Ttl::Never);
    }
    Ok(Ttl::Minutes(obj.extract()?))
}

fn put_op(api: &Api, op: &Bound<'_, PyAny>) -> PyResult<PutOp> {
    let ns = namespace(&op.getattr("namespace")?)?;
    let key = key(op)?;
    let value = op.getattr("value")?;
    if value.is_none() {
        return Ok(PutOp::delete(ns, key));
    }
    // a mapping becomes a dict as LangGraph's stores make it (their
    // TypeError or ValueError for anything else)
    let value = if value.is_instance_of::<PyDict>() {
        value
    } else {
        api.dict.bind(op.py()).call1((value,))?
    };
    Ok(PutOp::new(ns, key, json_of(api, &value)?)
        .index(index_choice(&op.getattr("index")?)?)
        .ttl(ttl_of(&op.getattr("ttl")?)?))
}

fn search_op(api: &Api, op: &Bound<'_, PyAny>) -> PyResult<SearchOp> {
    let mut search = SearchOp::new(namespace(&op.getattr("namespace_prefix")?)?)
        .limit(op.getattr("limit")?.extract()?)
        .offset(op.getattr("offset")?.extract()?);
    let filter = op.getattr("filter")?;
    if !filter.is_none() {
        search = search.filter(Filter::from_json(&json_of(api, &filter)?).map_err(to_py)?);
    }
    if let Some(query) = op.getattr("query")?.extract::<Option<String>>()? {
        search = search.query(query);
    }
    search.refresh_ttl = op.getattr("refresh_ttl")?.extract()?;
    Ok(search)
}

fn list_op(op: &Bound<'_, PyAny>) -> PyResult<ListNamespacesOp> {
    let mut list = ListNamespacesOp::default()
        .limit(op.getattr("limit")?.extract()?)
        .offset(op.getattr("offset")?.extract()?);
    list.max_depth = op.getattr("max_depth")?.extract()?;
    let conditions = op.getattr("match_conditions")?;
    if !conditions.is_none() {
        for condition in conditions.try_iter()? {
            let condition = condition?;
            let path = namespace(&condition.getattr("path")?)?;
            let kind: String = condition.getattr("match_type")?.extract()?;
            list.match_conditions.push(match kind.as_str() {
                "prefix" => MatchCondition::prefix(path),
                "suffix" => MatchCondition::suffix(path),
                other => {
                    return Err(to_py(Error::invalid(format!(
                        "unknown match_type {other:?} (expected \"prefix\" or \"suffix\")"
                    ))))
                }
            });
        }
    }
    Ok(list)
}

/// LangGraph's op objects as the crate's.
fn ops_of(py: Python<'_>, ops: &Bound<'_, PyAny>) -> PyResult<Vec<Op>> {
    let api = api(py)?;
    let mut out = Vec::new();
    for op in ops.try_iter()? {
        let op = op?;
        out.push(if op.is_instance(api.get_op.bind(py))? {
            let mut get = GetOp::new(namespace(&op.getattr("namespace")?)?, key(&op)?);
            get.refresh_ttl = op.getattr("refresh_ttl")?.extract()?;
            Op::Get(get)
        } else if op.is_instance(api.put_op.bind(py))? {
            Op::Put(put_op(api, &op)?)
        } else if op.is_instance(api.search_op.bind(py))? {
            Op::Search(search_op(api, &op)?)
        } else if op.is_instance(api.list_op.bind(py))? {
            Op::ListNamespaces(list_op(&op)?)
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "unknown store operation: {}",
                op.get_type().name()?
            )));
        });
    }
    Ok(out)
}

// --- results out --------------------------------------------------------------

/// A batch's results for Python: `Item | None`, `None`, `[SearchItem]`,
/// `[tuple[str, ...]]` by op.
struct Results(Vec<OpResult>);

fn datetime<'py>(py: Python<'py>, api: &Api, at: SystemTime) -> PyResult<Bound<'py, PyAny>> {
    let seconds = match at.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    };
    api.from_timestamp.bind(py).call1((seconds, api.utc.bind(py)))
}

fn ns_tuple<'py>(py: Python<'py>, ns: &Namespace) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, ns.labels())
}

fn value<'py>(
    py: Python<'py>,
    api: &Api,
    value: &serde_json::Map<String, serde_json::Value>,
) -> PyResult<Bound<'py, PyAny>> {
    let encoded = serde_json::to_vec(value).map_err(|e| to_py(Error::invalid(format!("a stored value: {e}"))))?;
    api.loads.bind(py).call1((PyBytes::new(py, &encoded),))
}

fn item<'py>(py: Python<'py>, api: &Api, item: &checkpointer::store::Item) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("value", value(py, api, &item.value)?)?;
    kwargs.set_item("key", &item.key)?;
    kwargs.set_item("namespace", ns_tuple(py, &item.namespace)?)?;
    kwargs.set_item("created_at", datetime(py, api, item.created_at)?)?;
    kwargs.set_item("updated_at", datetime(py, api, item.updated_at)?)?;
    api.item.bind(py).call((), Some(&kwargs))
}

fn search_item<'py>(py: Python<'py>, api: &Api, found: &SearchItem) -> PyResult<Bound<'py, PyAny>> {
    let i = &found.item;
    api.search_item.bind(py).call1((
        ns_tuple(py, &i.namespace)?,
        &i.key,
        value(py, api, &i.value)?,
        datetime(py, api, i.created_at)?,
        datetime(py, api, i.updated_at)?,
        found.score,
    ))
}

impl<'py> IntoPyObject<'py> for Results {
    type Target = PyList;
    type Output = Bound<'py, PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let api = api(py)?;
        let mut out = Vec::with_capacity(self.0.len());
        for result in &self.0 {
            out.push(match result {
                OpResult::Item(None) | OpResult::Put => py.None().into_bound(py),
                OpResult::Item(Some(found)) => item(py, api, found)?,
                OpResult::Search(found) => {
                    let items = found
                        .iter()
                        .map(|f| search_item(py, api, f))
                        .collect::<PyResult<Vec<_>>>()?;
                    PyList::new(py, items)?.into_any()
                }
                OpResult::Namespaces(list) => {
                    let tuples = list.iter().map(|ns| ns_tuple(py, ns)).collect::<PyResult<Vec<_>>>()?;
                    PyList::new(py, tuples)?.into_any()
                }
            });
        }
        PyList::new(py, out)
    }
}

// --- the store ----------------------------------------------------------------

/// The stores this class opens (what `close` needs beyond [`Store`]).
#[derive(Clone)]
enum Opened {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PostgresStore>),
}

impl Opened {
    fn store(&self) -> Arc<dyn Store> {
        match self {
            Opened::Sqlite(s) => s.clone(),
            Opened::Postgres(s) => s.clone(),
        }
    }

    /// Creates or migrates the tables: PostgreSQL's `setup` (SQLite's are
    /// ready when it opens).
    async fn setup(&self) -> Result<()> {
        match self {
            Opened::Sqlite(_) => Ok(()),
            Opened::Postgres(s) => s.setup().await,
        }
    }

    async fn close(&self) -> Result<()> {
        match self {
            Opened::Sqlite(s) => s.close().await,
            Opened::Postgres(s) => {
                s.pool().close();
                Ok(())
            }
        }
    }
}

/// One open store.
#[pyclass(frozen, module = "langgraph_checkpoint_rs._core")]
pub(crate) struct StoreCore {
    opened: parking_lot::RwLock<Option<Opened>>,
    backend: &'static str,
}

impl StoreCore {
    fn new(opened: Opened, backend: &'static str) -> StoreCore {
        StoreCore {
            opened: parking_lot::RwLock::new(Some(opened)),
            backend,
        }
    }

    fn opened(&self) -> PyResult<Opened> {
        self.opened
            .read()
            .clone()
            .ok_or_else(|| to_py(Error::invalid("the store is closed")))
    }

    fn store(&self) -> PyResult<Arc<dyn Store>> {
        self.opened().map(|o| o.store())
    }
}

/// The event loop an async call's embeddings run on (`None` for a sync call).
fn call_loop(py: Python<'_>, aio: bool) -> PyResult<Option<Py<PyAny>>> {
    if !aio {
        return Ok(None);
    }
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    Ok(Some(event_loop.unbind()))
}

#[pymethods]
impl StoreCore {
    /// The backend: "sqlite" or "postgres".
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    /// Runs LangGraph's ops as one batch: one result per op, in order.
    fn batch(&self, py: Python<'_>, aio: bool, ops: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let store = self.store()?;
        let ops = ops_of(py, ops)?;
        let event_loop = call_loop(py, aio)?;
        dispatch(
            py,
            aio,
            on_loop(event_loop, async move { store.batch(ops).await.map(Results) }),
        )
    }

    /// Creates or migrates the tables, as Python's `setup()` (PostgreSQL;
    /// a SQLite store's are ready when it opens).
    fn setup(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        let opened = self.opened()?;
        dispatch(py, aio, async move { opened.setup().await })
    }

    /// Deletes the expired items; how many.
    fn sweep_ttl(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        let store = self.store()?;
        dispatch(py, aio, async move { store.sweep_ttl().await })
    }

    /// Finishes queued writes and closes the store; later calls fail.
    fn close(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        let taken = self.opened.write().take();
        dispatch(py, aio, async move {
            match taken {
                Some(opened) => opened.close().await,
                None => Ok(()),
            }
        })
    }
}

/// The index of `(dims, embeddings, fields)`: LangChain `Embeddings` called
/// from Rust.
fn index_config(index: Option<(usize, Py<PyAny>, Vec<String>)>) -> Option<IndexConfig> {
    index.map(|(dims, embeddings, fields)| {
        IndexConfig::new(dims, Arc::new(PyEmbeddings::new(embeddings))).fields(fields)
    })
}

/// The TTL configuration of LangGraph's `TTLConfig` keys (`None`: none).
fn ttl_config(ttl: Option<(Option<bool>, Option<f64>, Option<u64>)>) -> Option<TtlConfig> {
    ttl.map(|(refresh_on_read, default_ttl, sweep_interval_minutes)| TtlConfig {
        refresh_on_read,
        default_ttl,
        sweep_interval_minutes,
    })
}

/// Opens (creating or migrating Python's tables) the SQLite store at
/// `path` (`":memory:"`: a private in-memory database). `index` is
/// `(dims, embeddings, fields)`, `ttl` `(refresh_on_read, default_ttl,
/// sweep_interval_minutes)`.
#[pyfunction]
#[pyo3(signature = (aio, path, *, index=None, ttl=None))]
pub(crate) fn open_sqlite_store(
    py: Python<'_>,
    aio: bool,
    path: String,
    index: Option<(usize, Py<PyAny>, Vec<String>)>,
    ttl: Option<(Option<bool>, Option<f64>, Option<u64>)>,
) -> PyResult<Py<PyAny>> {
    let mut builder = SqliteStore::builder(&path);
    if let Some(index) = index_config(index) {
        builder = builder.index(index);
    }
    if let Some(ttl) = ttl_config(ttl) {
        builder = builder.ttl(ttl);
    }
    dispatch(py, aio, async move {
        let store = builder.open().await?;
        Ok(StoreCore::new(Opened::Sqlite(Arc::new(store)), "sqlite"))
    })
}

/// The PostgreSQL store for `url` (a `postgresql://` URL or a `key=value`
/// string), on Python's tables; lazy: nothing is connected or created
/// until `setup` or the first batch. `index` and `ttl` as
/// [`open_sqlite_store`]'s.
#[pyfunction]
#[pyo3(signature = (url, *, index=None, ttl=None, max_connections=None))]
pub(crate) fn open_postgres_store(
    url: String,
    index: Option<(usize, Py<PyAny>, Vec<String>)>,
    ttl: Option<(Option<bool>, Option<f64>, Option<u64>)>,
    max_connections: Option<usize>,
) -> PyResult<StoreCore> {
    let mut builder = PostgresStore::builder().url(url);
    if let Some(index) = index_config(index) {
        builder = builder.index(index);
    }
    if let Some(ttl) = ttl_config(ttl) {
        builder = builder.ttl(ttl);
    }
    if let Some(n) = max_connections {
        builder = builder.max_connections(n);
    }
    let store = builder.build().map_err(to_py)?;
    Ok(StoreCore::new(Opened::Postgres(Arc::new(store)), "postgres"))
}
