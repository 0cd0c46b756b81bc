//! `PostgresSaver`: checkpoints in PostgreSQL, in the tables of Python's
//! `langgraph-checkpoint-postgres` 3.2.0 (spec §8), so a Rust service and a
//! Python LangGraph app can share one database.
//!
//! ```no_run
//! use checkpointer::postgres::PostgresSaver;
//! use checkpointer::{CheckpointSaver, CheckpointSaverExt};
//!
//! # async fn demo() -> checkpointer::Result<()> {
//! let saver = PostgresSaver::builder()
//!     .url("postgresql://postgres@127.0.0.1:5432/app")
//!     .max_connections(16)
//!     .build()?;
//! saver.setup().await?; // create or migrate the tables, as Python's setup() does
//! let latest = saver.latest("thread-1").await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Storage
//!
//! Checkpoints go to `checkpoints` as JSONB with primitive channel values
//! inline and every other value in `checkpoint_blobs`, keyed by channel and
//! version; writes go to `checkpoint_writes` (spec §8.2). Values Python's
//! saver cannot store inline (NaN, strings holding U+0000) go to blobs, where
//! Python reads them back; metadata that JSONB cannot hold is refused with
//! [`Error::InvalidInput`] before anything is
//! written. Unlike Python's saver, metadata keeps a `writes` key, so the
//! metadata filter behaves as on every other backend.
//!
//! Where the server supports it (PostgreSQL 14 or later built with LZ4), the
//! saver's `put` has PostgreSQL compress the large values it writes (blobs,
//! checkpoint JSONB over ~2 kB) with LZ4 rather than the server's
//! `default_toast_compression`, for that statement only: the stored values
//! are the same bytes and any reader decompresses them transparently, but
//! writing costs the server far less time than pglz.
//!
//! # Connections
//!
//! The saver holds a `deadpool-postgres` pool and takes one connection per
//! call, so calls on one saver run in parallel up to the pool size; no lock
//! is shared between calls. Broken connections are dropped from the pool
//! when it hands them out again; a read that fails because its connection
//! broke is repeated once on a new connection. A write that fails that way
//! returns an [`Error::Storage`] which
//! [`is_retryable`](crate::Error::is_retryable) when the server refused it
//! (nothing was committed). Every write is idempotent, so repeating one is
//! safe in any case.
//!
//! Behind a transaction pooler (PgBouncer `pool_mode = transaction`) use
//! [`StatementMode::Unnamed`].
//!
//! # Timeouts
//!
//! A silent network (a partition, a dead peer, a firewall dropping packets)
//! would otherwise hold a call until TCP gives up, which takes minutes to
//! hours. The builder sets:
//!
//! | setting | default | bounds |
//! |---|---|---|
//! | [`call_timeout`](PostgresSaverBuilder::call_timeout) | 60 s ([`DEFAULT_CALL_TIMEOUT`]) | a whole call, from asking the pool for a connection to the last row; each page of `list` / `list_threads` |
//! | [`connect_timeout`](PostgresSaverBuilder::connect_timeout) | 10 s | opening one connection |
//! | [`wait_timeout`](PostgresSaverBuilder::wait_timeout) | 30 s | waiting for a free pooled connection |
//! | [`statement_timeout`](PostgresSaverBuilder::statement_timeout) | the server's | one statement, on the server |
//! | [`keepalives_idle`](PostgresSaverBuilder::keepalives_idle), [`keepalives_interval`](PostgresSaverBuilder::keepalives_interval), [`keepalives_retries`](PostgresSaverBuilder::keepalives_retries) | the connection string's, else the system's | finding an idle connection whose peer is gone |
//! | [`tcp_user_timeout`](PostgresSaverBuilder::tcp_user_timeout) | the system's | unacknowledged data on a connection |
//!
//! When the call timeout fires, the call returns an [`Error::Storage`]:
//!
//! * **retryable** when nothing that could commit had been sent (waiting for
//!   a connection, reading, or before the writing statement left): repeating
//!   the call is safe and may succeed;
//! * **not retryable** when the writing statement (or `COMMIT`) had been sent
//!   and no answer came: the change may or may not have been applied, and the
//!   message says so. Every write is idempotent, so repeating it is still
//!   safe once the server is reachable; read the state to learn the outcome.
//!
//! The idle pooled connections are dropped after a timeout (the network
//! that failed them may be the one they use), and the next call opens a new
//! one. `setup` and `setup_in_transaction` have no call timeout: a migration
//! may run long on a large table.
//!
//! # Ordering
//!
//! Checkpoint ids, thread ids and namespaces are compared by the database's
//! collation, as Python's saver does. Under a `C` collation (including
//! `C.UTF-8`) that is the code-point order the other backends use; LangGraph's
//! uuid6 checkpoint ids sort the same under any collation.

mod backend;
mod conn;
mod import;
mod jsonb;
mod queries;
mod redact;
mod rows;
mod schema;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, QueueMode, RecyclingMethod, Runtime};
use futures::TryStreamExt;
use indexmap::IndexMap;
use tokio_postgres::types::{ToSql, Type};

pub use conn::{error_message, StatementMode};
pub use deadpool_postgres;
pub use redact::redact_connection_string;
pub use tokio_postgres;

use self::conn::{query, query_stream, query_tx, DbError, JsonbParam, JsonbText, Param};
use self::rows::{load, TupleRows};
use crate::checkpoint::{CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::engine::{self, prune, Engine, KeyedWrite, Link, Put};
use crate::error::{Error, Result};
use crate::saver::{op_span, traced, ThreadInfo};
use crate::serde::{JsonPlusSerializer, Serializer, Value};

/// Rows fetched per page by `list` and `list_threads`.
const PAGE: usize = 100;

/// Checkpoints in PostgreSQL, shared with Python LangGraph.
///
/// Cheap to clone: clones share the pool. See the [module docs](self).
#[derive(Clone)]
pub struct PostgresSaver {
    engine: Engine<Pg>,
}

/// The storage side of [`PostgresSaver`]: the pool and its settings.
#[derive(Clone)]
pub(crate) struct Pg {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    mode: StatementMode,
    serde: Arc<dyn Serializer>,
    /// Whether the server compresses with LZ4 (see [`queries::PUT_LZ4`]),
    /// asked once.
    lz4: tokio::sync::OnceCell<bool>,
    /// The longest one call (or one page of a listing) may take.
    call_timeout: Option<Duration>,
}

/// The default of [`PostgresSaverBuilder::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl fmt::Debug for PostgresSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.pg().inner;
        f.debug_struct("PostgresSaver")
            .field("pool", &inner.pool.status())
            .field("mode", &inner.mode)
            .field("serde", &inner.serde)
            .field("call_timeout", &inner.call_timeout)
            .finish()
    }
}

enum Source {
    Url(String),
    Config(Box<tokio_postgres::Config>),
    Pool(Pool),
}

/// Builds a [`PostgresSaver`] from a URL, a `tokio_postgres::Config` or an
/// existing pool.
///
/// ```
/// use checkpointer::postgres::{PostgresSaver, StatementMode};
/// let saver = PostgresSaver::builder()
///     .url("postgresql://app@db.internal:6432/app")
///     .statement_mode(StatementMode::Unnamed) // behind PgBouncer
///     .max_connections(8)
///     .build()
///     .unwrap(); // no connection is made until the first call
/// ```
#[must_use]
pub struct PostgresSaverBuilder {
    source: Option<Source>,
    max_connections: usize,
    mode: StatementMode,
    serde: Arc<dyn Serializer>,
    connect_timeout: Duration,
    wait_timeout: Option<Duration>,
    call_timeout: Option<Duration>,
    statement_timeout: Option<Duration>,
    keepalives_idle: Option<Duration>,
    keepalives_interval: Option<Duration>,
    keepalives_retries: Option<u32>,
    tcp_user_timeout: Option<Duration>,
    #[cfg(feature = "postgres-tls")]
    tls: Option<rustls::ClientConfig>,
}

impl fmt::Debug for PostgresSaverBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Some(Source::Url(url)) => Some(redact_connection_string(url)),
            // tokio_postgres's Config Debug masks its password itself
            Some(Source::Config(config)) => Some(format!("{config:?}")),
            Some(Source::Pool(_)) => Some("pool".to_owned()),
            None => None,
        };
        f.debug_struct("PostgresSaverBuilder")
            .field("source", &source)
            .field("max_connections", &self.max_connections)
            .field("mode", &self.mode)
            .field("connect_timeout", &self.connect_timeout)
            .field("wait_timeout", &self.wait_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("keepalives_idle", &self.keepalives_idle)
            .field("keepalives_interval", &self.keepalives_interval)
            .field("keepalives_retries", &self.keepalives_retries)
            .field("tcp_user_timeout", &self.tcp_user_timeout)
            .finish_non_exhaustive()
    }
}

impl Default for PostgresSaverBuilder {
    fn default() -> Self {
        PostgresSaverBuilder {
            source: None,
            max_connections: 16,
            mode: StatementMode::default(),
            serde: Arc::new(JsonPlusSerializer),
            connect_timeout: Duration::from_secs(10),
            wait_timeout: Some(Duration::from_secs(30)),
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            statement_timeout: None,
            keepalives_idle: None,
            keepalives_interval: None,
            keepalives_retries: None,
            tcp_user_timeout: None,
            #[cfg(feature = "postgres-tls")]
            tls: None,
        }
    }
}

impl PostgresSaverBuilder {
    /// Connect with a `postgresql://` URL (or a `key=value` connection
    /// string). Its password never appears in errors or `Debug` output (see
    /// [`redact_connection_string`]).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.source = Some(Source::Url(url.into()));
        self
    }

    /// Connect with a `tokio_postgres::Config`.
    pub fn config(mut self, config: tokio_postgres::Config) -> Self {
        self.source = Some(Source::Config(Box::new(config)));
        self
    }

    /// Use an existing pool (shared with the rest of the application). The
    /// pool's own size, timeouts and TLS settings apply; `max_connections`,
    /// the timeouts and `tls` of this builder are ignored.
    pub fn pool(mut self, pool: Pool) -> Self {
        self.source = Some(Source::Pool(pool));
        self
    }

    /// The most connections the saver's pool opens (default 16).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// How statements are sent (default [`StatementMode::Prepared`]).
    pub fn statement_mode(mut self, mode: StatementMode) -> Self {
        self.mode = mode;
        self
    }

    /// The serializer of channel values and writes (default
    /// [`JsonPlusSerializer`]).
    pub fn serializer(mut self, serde: Arc<dyn Serializer>) -> Self {
        self.serde = serde;
        self
    }

    /// How long opening a connection may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a call waits for a free connection when all are busy
    /// (default 30 s; `None` waits indefinitely).
    pub fn wait_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// The longest one call may take, from asking the pool for a connection
    /// to the last row (default [`DEFAULT_CALL_TIMEOUT`], 60 s; `None` waits
    /// indefinitely). Each page of `list` and `list_threads` has the whole
    /// timeout; `setup` and `setup_in_transaction` have none (a migration
    /// may take long on a large table). It also applies to a saver on an
    /// existing [`pool`](Self::pool). See [Timeouts](self#timeouts) for the
    /// errors it gives.
    pub fn call_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The server-side `statement_timeout` of the saver's connections, sent
    /// as a startup option (default `None`: the server's setting). A
    /// statement it cancels fails with a retryable [`Error::Storage`]
    /// (SQLSTATE 57014); nothing of it was committed. Poolers that refuse
    /// startup options (PgBouncer without `ignore_startup_parameters =
    /// options`) need it set on the role or database instead (`ALTER ROLE
    /// … SET statement_timeout = …`).
    pub fn statement_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.statement_timeout = timeout;
        self
    }

    /// Idle time before the first TCP keepalive probe (the connection string's
    /// `keepalives_idle`, else the system's two hours). Keepalives are always
    /// on: they find a connection whose peer vanished while it was idle.
    pub fn keepalives_idle(mut self, idle: Duration) -> Self {
        self.keepalives_idle = Some(idle);
        self
    }

    /// Time between unanswered TCP keepalive probes (`keepalives_interval`).
    pub fn keepalives_interval(mut self, interval: Duration) -> Self {
        self.keepalives_interval = Some(interval);
        self
    }

    /// Unanswered TCP keepalive probes before the connection is dropped
    /// (`keepalives_retries`).
    pub fn keepalives_retries(mut self, retries: u32) -> Self {
        self.keepalives_retries = Some(retries);
        self
    }

    /// How long sent data may stay unacknowledged before the system drops
    /// the connection (`tcp_user_timeout`, Linux only; default the system's,
    /// about 15 minutes). A connection abandoned by a [`call_timeout`](Self::call_timeout)
    /// while its request was in flight is closed in the background once
    /// this expires.
    pub fn tcp_user_timeout(mut self, timeout: Duration) -> Self {
        self.tcp_user_timeout = Some(timeout);
        self
    }

    /// Connect over TLS (rustls) with this client configuration, as the
    /// URL's `sslmode` asks (`prefer` by default, `require`, `disable`).
    #[cfg(feature = "postgres-tls")]
    pub fn tls(mut self, config: rustls::ClientConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// Connect over TLS trusting the Mozilla root certificates
    /// (`webpki-roots`), with the `ring` crypto provider.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if rustls cannot build the configuration.
    #[cfg(feature = "postgres-tls")]
    pub fn tls_with_webpki_roots(self) -> Result<Self> {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::invalid(format!("TLS configuration: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(self.tls(config))
    }

    /// Builds the saver. No connection is opened here; the first call opens
    /// one.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a missing or malformed URL.
    pub fn build(mut self) -> Result<PostgresSaver> {
        let pool = match self.source.take() {
            Some(Source::Pool(pool)) => pool,
            Some(Source::Url(url)) => {
                let config: tokio_postgres::Config = url.parse().map_err(|e| parse_error(&url, &e))?;
                self.make_pool(config, self.max_connections)?
            }
            Some(Source::Config(config)) => self.make_pool(*config, self.max_connections)?,
            None => return Err(Error::invalid("PostgresSaverBuilder needs a url, a config or a pool")),
        };
        Ok(PostgresSaver::over(Inner {
            pool,
            mode: self.mode,
            serde: self.serde,
            lz4: tokio::sync::OnceCell::new(),
            call_timeout: self.call_timeout,
        }))
    }

    fn make_pool(&self, mut config: tokio_postgres::Config, size: usize) -> Result<Pool> {
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(self.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("checkpointer");
        }
        config.keepalives(true);
        if let Some(idle) = self.keepalives_idle {
            config.keepalives_idle(idle);
        }
        if let Some(interval) = self.keepalives_interval {
            config.keepalives_interval(interval);
        }
        if let Some(retries) = self.keepalives_retries {
            config.keepalives_retries(retries);
        }
        if let Some(timeout) = self.tcp_user_timeout {
            config.tcp_user_timeout(timeout);
        }
        if let Some(timeout) = self.statement_timeout {
            let setting = format!("-c statement_timeout={}", timeout.as_millis());
            let options = match config.get_options() {
                Some(options) if !options.is_empty() => format!("{options} {setting}"),
                _ => setting,
            };
            config.options(options);
        }
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        #[cfg(feature = "postgres-tls")]
        let manager = match &self.tls {
            Some(tls) => Manager::from_config(
                config,
                tokio_postgres_rustls::MakeRustlsConnect::new(tls.clone()),
                manager_config,
            ),
            None => Manager::from_config(config, tokio_postgres::NoTls, manager_config),
        };
        #[cfg(not(feature = "postgres-tls"))]
        let manager = Manager::from_config(config, tokio_postgres::NoTls, manager_config);
        Pool::builder(manager)
            .max_size(size)
            // The most recently used connection first: its prepared
            // statements have their plans and its caches are warm, and
            // connections a burst opened stay idle until recycled.
            .queue_mode(QueueMode::Lifo)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(self.connect_timeout + Duration::from_secs(1)))
            .wait_timeout(self.wait_timeout)
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| Error::invalid(format!("cannot build the connection pool: {e}")))
    }
}

/// The error of a call that timed out; `sent` says whether what may commit
/// had been sent.
fn timeout_error(op: &'static str, limit: Duration, sent: bool) -> Error {
    let message = if sent {
        format!(
            "{op}: no answer from PostgreSQL within {limit:?} after the change was sent; it may or may not have \
             been applied (repeating it is safe: the operation is idempotent)"
        )
    } else {
        format!("{op}: no answer from PostgreSQL within {limit:?}; nothing was committed")
    };
    Error::storage("postgres", !sent, conn::Failure::new(message, None))
}

/// The error for a connection string `tokio_postgres` cannot parse: the
/// string with its passwords masked, and the parser's reason where that
/// cannot quote a password (an unknown option's name is shown only when the
/// masked string shows it too).
fn parse_error(text: &str, e: &tokio_postgres::Error) -> Error {
    let shown = redact_connection_string(text);
    let cause = std::error::Error::source(e)
        .map(ToString::to_string)
        .unwrap_or_default();
    let reason = if let Some(name) = cause.strip_prefix("unknown option `").and_then(|n| n.strip_suffix('`')) {
        if !name.is_empty() && shown.contains(name) {
            cause.clone()
        } else {
            "unknown option".to_owned()
        }
    } else if cause.starts_with("unexpected character at byte") {
        // "...: expected `=` but got `c`": the character may be a password's
        cause.split(':').next().unwrap_or_default().to_owned()
    } else if cause.starts_with("invalid value for option")
        || cause == "unexpected EOF"
        || cause == "unterminated parameter"
        || cause == "unterminated quoted connection parameter value"
    {
        cause.clone()
    } else {
        "malformed".to_owned()
    };
    Error::invalid(format!("invalid PostgreSQL connection string {shown:?}: {reason}"))
}

/// Runs an idempotent read, once more on a fresh connection if its
/// connection broke.
macro_rules! read_retrying {
    ($saver:expr, $op:literal, $call:expr) => {{
        match $call.await {
            Ok(v) => Ok(v),
            Err(e) if e.worth_retrying_read() => {
                tracing::debug!(error = ?e, concat!("postgres ", $op, ": connection failed, retrying once"));
                $saver.discard_idle(&e);
                $call.await.map_err(|e| $saver.fail(e, $op, true))
            }
            Err(e) => Err($saver.fail(e, $op, true)),
        }
    }};
}
pub(crate) use read_retrying;

static GET_BY_ID: LazyLock<String> = LazyLock::new(queries::get_tuple_by_id);
static GET_LATEST: LazyLock<String> = LazyLock::new(queries::get_tuple_latest);

impl PostgresSaver {
    /// A builder.
    pub fn builder() -> PostgresSaverBuilder {
        PostgresSaverBuilder::default()
    }

    /// A saver for a connection URL with the default settings.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a malformed URL.
    pub fn from_url(url: &str) -> Result<Self> {
        Self::builder().url(url).build()
    }

    /// A saver on an existing pool.
    pub fn from_pool(pool: Pool) -> Self {
        PostgresSaver::over(Inner {
            pool,
            mode: StatementMode::default(),
            serde: Arc::new(JsonPlusSerializer),
            lz4: tokio::sync::OnceCell::new(),
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
        })
    }

    fn over(inner: Inner) -> Self {
        PostgresSaver {
            engine: Engine::new(Pg { inner: Arc::new(inner) }),
        }
    }

    fn pg(&self) -> &Pg {
        self.engine.backend()
    }

    /// The connection pool (for sharing with the rest of the application).
    pub fn pool(&self) -> &Pool {
        &self.pg().inner.pool
    }

    /// How statements are sent.
    pub fn statement_mode(&self) -> StatementMode {
        self.pg().inner.mode
    }

    /// Creates the tables or brings them to the latest migration, exactly as
    /// Python's `PostgresSaver.setup()` does: same statements, same
    /// `checkpoint_migrations` rows, nothing re-run that either already ran.
    ///
    /// Safe to call from several processes at once (they take turns on a
    /// session advisory lock). Runs outside any transaction, since
    /// `CREATE INDEX CONCURRENTLY` cannot run in one; see
    /// [`setup_in_transaction`](Self::setup_in_transaction) otherwise. Behind
    /// a transaction pooler, run it over a direct connection.
    ///
    /// # Errors
    /// Storage failures; an error leaves the database at the last migration
    /// that completed, and a later call continues from there.
    pub async fn setup(&self) -> Result<()> {
        traced(op_span("setup", "", "", None), async {
            let pg = self.pg();
            let client = pg.client().await.map_err(|e| pg.fail(e, "setup", false))?;
            let out = schema::setup_on(&**client, false).await;
            if out.is_err() {
                // Closing the connection releases the session lock for sure.
                drop(Object::take(client));
            }
            out
        })
        .await
    }

    /// Runs the migrations inside the caller's transaction (for migration
    /// tools that wrap schema changes in one; LangGraph issue #7630).
    /// Migrations 6–8 then create their indexes without `CONCURRENTLY`; the
    /// resulting schema and `checkpoint_migrations` rows are the same.
    /// Concurrent callers take turns on a transaction advisory lock.
    ///
    /// # Errors
    /// Storage failures; the caller's transaction is then aborted and should
    /// be rolled back.
    pub async fn setup_in_transaction(&self, transaction: &tokio_postgres::Transaction<'_>) -> Result<()> {
        traced(
            op_span("setup_in_transaction", "", "", None),
            schema::setup_on(transaction, true),
        )
        .await
    }

    /// The migration version of the database (`None` before `setup`).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn migration_version(&self) -> Result<Option<i32>> {
        let pg = self.pg();
        pg.timed("migration_version", None, async {
            let client = pg.client().await.map_err(|e| e.into_error("migration_version", true))?;
            schema::current_version(&**client)
                .await
                .map_err(|e| DbError::from(e).into_error("migration_version", true))
        })
        .await
    }
}

impl Pg {
    /// Runs one call under the [call timeout](PostgresSaverBuilder::call_timeout).
    /// `sent` is set by the call just before it sends what may commit; a
    /// timeout after that cannot tell whether the change was applied.
    async fn timed<T>(
        &self,
        op: &'static str,
        sent: Option<&AtomicBool>,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let Some(limit) = self.inner.call_timeout else {
            return call.await;
        };
        let outcome = tokio::time::timeout(limit, call).await;
        match outcome {
            Ok(out) => out,
            Err(_) => {
                // The call's connection went back to the pool when the call
                // was dropped, possibly with a request in flight on a silent
                // network: no idle connection is trusted any more.
                self.inner.pool.retain(|_, _| false);
                let committed = sent.is_some_and(|s| s.load(Ordering::SeqCst));
                tracing::debug!(op, ?limit, committed, "postgres: call timed out");
                Err(timeout_error(op, limit, committed))
            }
        }
    }

    /// The caller's error for a failure; when the connection broke, the idle
    /// connections are dropped too (a server restart or an idle-connection
    /// reaper takes them all), so the next call opens a fresh one.
    fn fail(&self, e: DbError, op: &'static str, read: bool) -> Error {
        self.discard_idle(&e);
        e.into_error(op, read)
    }

    fn discard_idle(&self, e: &DbError) {
        if e.connection_broke() {
            self.inner.pool.retain(|_, _| false);
        }
    }

    async fn client(&self) -> Result<Object, DbError> {
        Ok(self.inner.pool.get().await?)
    }

    fn serde(&self) -> &dyn Serializer {
        &*self.inner.serde
    }

    async fn q(&self, client: &Object, sql: &str, params: &[Param<'_>]) -> Result<Vec<tokio_postgres::Row>, DbError> {
        Ok(query(client, self.inner.mode, sql, params).await?)
    }

    /// Runs a [`queries::select_tuples`] query returning at most `limit`
    /// checkpoints, decoding rows as they arrive.
    async fn fetch_tuples(
        &self,
        client: &Object,
        sql: &str,
        params: &[Param<'_>],
        limit: usize,
    ) -> Result<Vec<CheckpointTuple>, DbError> {
        let stream = query_stream(client, self.inner.mode, sql, params).await?;
        futures::pin_mut!(stream);
        let mut tuples = TupleRows::new(self.serde(), limit);
        // A row that does not decode fails the call only once the server has
        // sent every row: an error of the server's comes first.
        let mut undecodable = None;
        while let Some(row) = stream.try_next().await? {
            if undecodable.is_none() {
                undecodable = tuples.push(&row).err();
            }
        }
        if let Some(e) = undecodable {
            return Err(e.into());
        }
        let mut out = tuples.finish()?;
        self.restore_sends(client, &mut out).await?;
        Ok(out)
    }

    /// Gives checkpoints older than format v4 their sends back (spec §8.3),
    /// with one query for all of them.
    async fn restore_sends(&self, client: &Object, tuples: &mut [CheckpointTuple]) -> Result<(), DbError> {
        let legacy: Vec<usize> = (0..tuples.len())
            .filter(|&i| {
                let t = &tuples[i];
                t.checkpoint.v < 4 && t.parent_config.as_ref().is_some_and(|p| p.checkpoint_id.is_some())
            })
            .collect();
        if legacy.is_empty() {
            return Ok(());
        }
        let (mut threads, mut namespaces, mut parents) = (Vec::new(), Vec::new(), Vec::new());
        for &i in &legacy {
            let t = &tuples[i];
            threads.push(t.config.thread_id.as_str());
            namespaces.push(t.config.ns());
            parents.push(
                t.parent_config
                    .as_ref()
                    .and_then(|p| p.checkpoint_id.as_deref())
                    .unwrap_or(""),
            );
        }
        let rows = self
            .q(
                client,
                queries::PARENT_SENDS,
                &[
                    (&threads, Type::TEXT_ARRAY),
                    (&namespaces, Type::TEXT_ARRAY),
                    (&parents, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        let mut sends: Vec<Vec<Value>> = vec![Vec::new(); legacy.len()];
        for row in &rows {
            let at: i64 = get(row, 0)?;
            let tag: Option<&str> = get(row, 1)?;
            let blob: Option<&[u8]> = get(row, 2)?;
            let list = usize::try_from(at - 1)
                .ok()
                .and_then(|at| sends.get_mut(at))
                .ok_or_else(|| Error::serde(format!("unexpected send position {at} from PostgreSQL")))?;
            list.push(load(self.serde(), tag, blob, "a send")?);
        }
        for (i, sends) in legacy.into_iter().zip(sends) {
            rows::migrate_sends(&mut tuples[i].checkpoint, sends);
        }
        Ok(())
    }

    async fn get_tuple_once(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, DbError> {
        let client = self.client().await?;
        let ns = config.ns();
        let tuples = match config.checkpoint_id() {
            Some(id) => {
                self.fetch_tuples(
                    &client,
                    &GET_BY_ID,
                    &[(&config.thread_id, Type::TEXT), (&ns, Type::TEXT), (&id, Type::TEXT)],
                    1,
                )
                .await?
            }
            None => {
                self.fetch_tuples(
                    &client,
                    &GET_LATEST,
                    &[(&config.thread_id, Type::TEXT), (&ns, Type::TEXT)],
                    1,
                )
                .await?
            }
        };
        Ok(tuples.into_iter().next())
    }

    async fn put_once(&self, put: &Put<'_>, rows: &rows::PutRows, sent: &AtomicBool) -> Result<(), DbError> {
        let client = self.client().await?;
        let (thread_id, ns, parent) = (put.thread_id, put.checkpoint_ns, put.parent_id);
        let checkpoint_id = put.checkpoint.id.as_str();
        let checkpoint = JsonbParam(rows.checkpoint.clone());
        let metadata = JsonbParam(rows.metadata.clone());
        let data: Vec<Option<&[u8]>> = rows.blob_data.iter().map(|d| d.as_deref()).collect();
        let sql = if self.has_lz4(&client).await? {
            queries::PUT_LZ4
        } else {
            queries::PUT
        };
        sent.store(true, Ordering::SeqCst);
        self.q(
            &client,
            sql,
            &[
                (&thread_id, Type::TEXT),
                (&ns, Type::TEXT),
                (&checkpoint_id, Type::TEXT),
                (&parent, Type::TEXT),
                (&checkpoint, Type::JSONB),
                (&metadata, Type::JSONB),
                (&rows.blob_channels, Type::TEXT_ARRAY),
                (&rows.blob_versions, Type::TEXT_ARRAY),
                (&rows.blob_types, Type::TEXT_ARRAY),
                (&data, Type::BYTEA_ARRAY),
                (&rows.unwritten, Type::TEXT_ARRAY),
            ],
        )
        .await?;
        Ok(())
    }

    /// Whether the server compresses with LZ4, asked on the first put.
    async fn has_lz4(&self, client: &Object) -> Result<bool, DbError> {
        let ask = || async {
            let rows = self.q(client, queries::HAS_LZ4, &[]).await?;
            Ok::<bool, DbError>(match rows.first() {
                Some(row) => get(row, 0)?,
                None => false,
            })
        };
        Ok(*self.inner.lz4.get_or_try_init(ask).await?)
    }

    async fn fetch_page(&self, page: &ListPage<'_>, size: usize) -> Result<Vec<CheckpointTuple>, DbError> {
        let client = self.client().await?;
        let params: Vec<Param<'_>> = page
            .params
            .iter()
            .map(|(v, t)| (&**v as &(dyn ToSql + Sync), t.clone()))
            .collect();
        self.fetch_tuples(&client, &page.sql, &params, size).await
    }

    async fn delta_walk(
        &self,
        client: &Object,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
        channels: &[String],
    ) -> Result<Vec<WalkStep>, DbError> {
        let sql = if checkpoint_id.is_some() {
            queries::DELTA_WALK_BY_ID
        } else {
            queries::DELTA_WALK_LATEST
        };
        let rows = self
            .q(
                client,
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&checkpoint_id, Type::TEXT),
                    (&channels, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        let mut steps: Vec<WalkStep> = Vec::new();
        let mut seen = HashSet::new();
        for row in &rows {
            let depth: i32 = get(row, 0)?;
            let id: String = get(row, 1)?;
            if steps.last().is_none_or(|s| s.depth != depth) {
                if !seen.insert(id.clone()) {
                    break; // a parent cycle
                }
                steps.push(WalkStep {
                    depth,
                    checkpoint_id: id,
                    open: get(row, 2)?,
                    seeds: Vec::new(),
                });
            }
            let channel: Option<String> = get(row, 4)?;
            if let (Some(channel), Some(step)) = (channel, steps.last_mut()) {
                let inline: Option<JsonbText> = get(row, 5)?;
                let tag: Option<String> = get(row, 6)?;
                let blob: Option<Vec<u8>> = get(row, 7)?;
                let value = match (tag, inline) {
                    (Some(tag), _) => self.serde().loads_typed(&tag, blob.as_deref().unwrap_or_default())?,
                    // Inline JSONB never went through the cipher.
                    (None, Some(_)) if !self.serde().reads_plaintext() => return Err(rows::inline_refused().into()),
                    (None, Some(json)) => jsonb::from_json(&json.0)?,
                    (None, None) => Value::Nil,
                };
                step.seeds.push((channel, value));
            }
        }
        Ok(steps)
    }

    async fn ancestors_once(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
        channels: &[String],
    ) -> Result<Vec<Link>, DbError> {
        let client = self.client().await?;
        let steps = self.delta_walk(&client, thread_id, ns, checkpoint_id, channels).await?;
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        let (mut pair_ids, mut pair_channels) = (Vec::new(), Vec::new());
        for step in &steps {
            for ch in &step.open {
                pair_ids.push(step.checkpoint_id.clone());
                pair_channels.push(ch.clone());
            }
        }
        let rows = self
            .q(
                &client,
                queries::DELTA_WRITES,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&pair_ids, Type::TEXT_ARRAY),
                    (&pair_channels, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        let position: HashMap<&str, usize> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.checkpoint_id.as_str(), i))
            .collect();
        let mut links: Vec<Link> = steps.iter().map(|_| Link::default()).collect();
        for row in &rows {
            let checkpoint_id: &str = get(row, 0)?;
            let tag: Option<&str> = get(row, 5)?;
            let blob: Option<&[u8]> = get(row, 6)?;
            let write = KeyedWrite {
                task_path: get(row, 3)?,
                idx: i64::from(get::<i32>(row, 4)?),
                write: PendingWrite {
                    task_id: get(row, 2)?,
                    channel: get(row, 1)?,
                    value: load(self.serde(), tag, blob, "a pending write")?,
                },
            };
            if let Some(&at) = position.get(checkpoint_id) {
                links[at].writes.push(write);
            }
        }
        for (link, step) in links.iter_mut().zip(steps) {
            link.seeds = step.seeds;
        }
        Ok(links)
    }

    async fn prune_thread(&self, thread_id: &str, sent: &AtomicBool) -> Result<(), DbError> {
        let mode = self.inner.mode;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        query_tx(&tx, mode, queries::LOCK_THREAD, &[(&thread_id, Type::TEXT)]).await?;
        let rows = query_tx(&tx, mode, queries::PRUNE_HEADS, &[(&thread_id, Type::TEXT)]).await?;
        let mut heads = Vec::with_capacity(rows.len());
        for row in &rows {
            let metadata: JsonbText = get(row, 4)?;
            let metadata = CheckpointMetadata::from_value(&jsonb::from_json(&metadata.0)?)?;
            let unstored: Vec<String> = get(row, 3)?;
            let ns: String = get(row, 0)?;
            let id: String = get(row, 1)?;
            heads.push(prune::Head::new(ns, id, &metadata, unstored.iter().map(String::as_str)));
        }
        let candidate_roots = prune::roots_to_check(&heads);
        let saved: Vec<String> = if candidate_roots.is_empty() {
            Vec::new()
        } else {
            query_tx(
                &tx,
                mode,
                queries::ROOT_CHECKPOINTS,
                &[(&thread_id, Type::TEXT), (&candidate_roots, Type::TEXT_ARRAY)],
            )
            .await?
            .iter()
            .map(|r| get::<String>(r, 0))
            .collect::<Result<_>>()?
        };
        let saved: HashSet<&str> = saved.iter().map(String::as_str).collect();
        let (mut keep_ns, mut keep_ids, mut removed) = (Vec::new(), Vec::new(), Vec::new());
        for action in prune::plan(&heads, &saved) {
            let keep = match action {
                prune::Action::Drop(ns) => {
                    removed.push(ns.to_owned());
                    continue;
                }
                prune::Action::Keep(keep) => keep,
            };
            keep_ns.push(keep.ns.to_owned());
            keep_ids.push(keep.head.to_owned());
            if keep.walk.is_empty() {
                continue;
            }
            // The ancestors a delta rebuild of the kept checkpoint reads (the
            // walk's stopping rule is the engine's, written in SQL).
            let rows = query_tx(
                &tx,
                mode,
                queries::DELTA_WALK_BY_ID,
                &[
                    (&thread_id, Type::TEXT),
                    (&keep.ns, Type::TEXT),
                    (&keep.head, Type::TEXT),
                    (&keep.walk, Type::TEXT_ARRAY),
                ],
            )
            .await?;
            let mut seen = HashSet::new();
            for row in &rows {
                let id: String = get(row, 1)?;
                if id != keep.head && seen.insert(id.clone()) {
                    keep_ns.push(keep.ns.to_owned());
                    keep_ids.push(id);
                }
            }
        }
        query_tx(
            &tx,
            mode,
            queries::PRUNE_APPLY,
            &[
                (&thread_id, Type::TEXT),
                (&keep_ns, Type::TEXT_ARRAY),
                (&keep_ids, Type::TEXT_ARRAY),
                (&removed, Type::TEXT_ARRAY),
            ],
        )
        .await?;
        sent.store(true, Ordering::SeqCst);
        tx.commit().await?;
        Ok(())
    }

    async fn delete_for_runs_once(&self, run_ids: &[String], sent: &AtomicBool) -> Result<(), DbError> {
        let mode = self.inner.mode;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let keys: Vec<i32> = query_tx(&tx, mode, queries::LOCK_RUN_THREADS, &[(&run_ids, Type::TEXT_ARRAY)])
            .await?
            .iter()
            .map(|r| get::<i32>(r, 0))
            .collect::<Result<_>>()?;
        if !keys.is_empty() {
            query_tx(
                &tx,
                mode,
                queries::DELETE_FOR_RUNS,
                &[(&run_ids, Type::TEXT_ARRAY), (&keys, Type::INT4_ARRAY)],
            )
            .await?;
        }
        sent.store(true, Ordering::SeqCst);
        tx.commit().await?;
        Ok(())
    }

    async fn list_threads_page(&self, after: Option<&str>, limit: i64) -> Result<Vec<ThreadInfo>, DbError> {
        let client = self.client().await?;
        let sql = if after.is_some() {
            queries::LIST_THREADS_AFTER
        } else {
            queries::LIST_THREADS_FIRST
        };
        let rows = self
            .q(&client, sql, &[(&after, Type::TEXT), (&limit, Type::INT8)])
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let thread_id: String = get(row, 0)?;
            let ns: String = get(row, 1)?;
            let id: String = get(row, 2)?;
            let metadata: JsonbText = get(row, 3)?;
            out.push(ThreadInfo {
                latest: CheckpointConfig {
                    thread_id: thread_id.clone(),
                    checkpoint_ns: Some(ns),
                    checkpoint_id: Some(id),
                },
                thread_id,
                metadata: CheckpointMetadata::from_value(&jsonb::from_json(&metadata.0)?)?,
            });
        }
        Ok(out)
    }
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a tokio_postgres::Row, idx: usize) -> Result<T> {
    row.try_get(idx)
        .map_err(|e| Error::serde(format!("unexpected column from PostgreSQL: {}", conn::describe(&e))))
}

/// One ancestor visited by the delta walk.
struct WalkStep {
    depth: i32,
    checkpoint_id: String,
    /// Channels still open on arrival: their writes here belong to the history.
    open: Vec<String>,
    /// Channels whose walk ends here, with the stored value.
    seeds: Vec<(String, Value)>,
}

/// One page query of `list`, with owned parameters.
pub(crate) struct ListPage<'a> {
    pub(crate) sql: String,
    pub(crate) params: Vec<(Box<dyn ToSql + Sync + Send + 'a>, Type)>,
}

/// The part of a metadata filter JSONB containment (`@>`) can check without
/// ever excluding a row the exact filter accepts, as JSON text; `None` when no
/// entry qualifies.
///
/// Left out: `null` entries (they also match a missing key), numbers beyond
/// ±2^53 (the exact filter compares them as `f64`, JSONB exactly), and
/// anything JSONB cannot hold (bytes, extension values, non-string keys,
/// duplicate keys, U+0000, NaN). Everything else is equal only if contained.
pub(crate) fn prefilter(filter: &IndexMap<String, Value>) -> Option<String> {
    fn safe(v: &Value) -> bool {
        const LIMIT: f64 = 9_007_199_254_740_992.0;
        match v {
            Value::Nil | Value::Bool(_) => true,
            Value::Int(i) => i.unsigned_abs() <= 1 << 53,
            Value::UInt(_) => false,
            Value::Float(f) => f.is_finite() && f.abs() <= LIMIT,
            Value::F32(f) => f.is_finite() && f64::from(*f).abs() <= LIMIT,
            Value::Str(s) => !s.contains('\0'),
            Value::Array(items) => items.iter().all(safe),
            Value::Map(entries) => {
                let mut keys = HashSet::new();
                entries
                    .iter()
                    .all(|(k, v)| k.as_str().is_some_and(|k| !k.contains('\0') && keys.insert(k)) && safe(v))
            }
            Value::Bin(_) | Value::Ext(_) => false,
        }
    }
    let entries: Vec<(Value, Value)> = filter
        .iter()
        .filter(|(k, v)| !v.is_nil() && !k.contains('\0') && safe(v))
        .map(|(k, v)| (Value::Str(k.as_str().into()), v.clone()))
        .collect();
    if entries.is_empty() {
        return None;
    }
    jsonb::to_json(&Value::Map(entries.into()), "filter").ok()
}

pub(crate) fn has_nul(parts: &[&str]) -> bool {
    parts.iter().any(|p| p.contains('\0'))
}

engine::saver_over_engine!(PostgresSaver, engine);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefilter_keeps_only_safe_entries() {
        let mut f = IndexMap::new();
        f.insert("source".to_owned(), Value::from("loop"));
        f.insert("missing".to_owned(), Value::Nil);
        f.insert("big".to_owned(), Value::Int(1 << 60));
        f.insert(
            "nested".to_owned(),
            Value::map([("a", Value::Nil), ("b", Value::Float(1.5))]),
        );
        f.insert("bytes".to_owned(), Value::Bin(bytes::Bytes::from_static(b"x")));
        f.insert(
            "dup".to_owned(),
            Value::Map((vec![(Value::from("k"), Value::Int(1)), (Value::from("k"), Value::Int(2))]).into()),
        );
        assert_eq!(
            prefilter(&f).as_deref(),
            Some(r#"{"source":"loop","nested":{"a":null,"b":1.5}}"#)
        );
        let mut only_null = IndexMap::new();
        only_null.insert("x".to_owned(), Value::Nil);
        assert_eq!(prefilter(&only_null), None);
    }

    #[test]
    fn builder_refuses_bad_urls() {
        assert!(matches!(
            PostgresSaver::from_url("postgresql://[::1"),
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            PostgresSaver::builder().build(),
            Err(Error::InvalidInput { .. })
        ));
    }
}
