//! `PostgresSaver`: checkpoints in PostgreSQL, in the tables of Python's
//! `langgraph-checkpoint-postgres` 3.2.0 (`docs/design.md`, *PostgreSQL backend*), so a Rust service and a
//! Python LangGraph app can share one database.
//!
//! ```no_run
//! use checkpointer::postgres::PostgresSaver;
//! use checkpointer::{CheckpointSaver, CheckpointSaverExt};
//!
//! # async fn demo() -> checkpointer::Result<()> {
//! // connects and creates or migrates the tables, as Python's setup() does
//! let saver = PostgresSaver::builder()
//!     .url("postgresql://postgres@127.0.0.1:5432/app")
//!     .max_connections(16)
//!     .open()
//!     .await?;
//! let latest = saver.latest("thread-1").await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Opening
//!
//! [`PostgresSaver::open`]`(url).await` and
//! [`PostgresSaverBuilder::open`]`.await` (also for an existing pool,
//! [`PostgresSaverBuilder::pool`]) return a saver that is ready to use: they
//! connect and run [`setup`](PostgresSaver::setup). The builder's sync
//! [`build`](PostgresSaverBuilder::build) opens no connection: it is for sync
//! code, or for a role that may not run migrations (behind a transaction
//! pooler, say); the caller then runs `setup()` (or
//! [`setup_in_transaction`](PostgresSaver::setup_in_transaction)) itself,
//! or relies on another process having done so.
//!
//! # Storage
//!
//! Checkpoints go to `checkpoints` as JSONB with primitive channel values
//! inline and every other value in `checkpoint_blobs`, keyed by channel and
//! version; writes go to `checkpoint_writes` (`docs/design.md`, *PostgreSQL backend*). Values Python's
//! saver cannot store inline (NaN, strings holding U+0000) go to blobs, where
//! Python reads them back; metadata that JSONB cannot hold is refused with
//! [`Error::InvalidInput`](crate::Error::InvalidInput) before anything is
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
//! returns an [`Error::Storage`](crate::Error::Storage) which
//! [`is_retryable`](crate::Error::is_retryable) when the server refused it
//! (nothing was committed). Every write is idempotent, so repeating one is
//! safe in any case.
//!
//! Concurrent `put` and `put_writes` calls share transactions (group
//! commit, [`group_commit`](PostgresSaverBuilder::group_commit), on by
//! default): a write with none in flight is sent at once, alone; writes that
//! arrive meanwhile go together in one pipelined transaction, so they share
//! one WAL flush. Each still succeeds or fails on its own, and is
//! acknowledged only after its transaction committed.
//!
//! Behind a transaction pooler (PgBouncer `pool_mode = transaction`) use
//! [`StatementMode::Unnamed`]; behind a statement pooler (`pool_mode =
//! statement`, which refuses transactions) also turn group commit off.
//!
//! # Timeouts
//!
//! A silent network (a partition, a dead peer, a firewall dropping packets)
//! would otherwise hold a call until TCP gives up, which takes minutes to
//! hours. The builder sets:
//!
//! | setting | default | bounds |
//! |---|---|---|
//! | [`call_timeout`](PostgresSaverBuilder::call_timeout) | 60 s ([`DEFAULT_CALL_TIMEOUT`]) | a whole call, from asking the pool for a connection to the last row; each page of `list` / `list_threads`; none for `setup` (a migration may take long), also with an existing pool |
//! | [`connect_timeout`](PostgresSaverBuilder::connect_timeout) | 10 s | opening one connection |
//! | [`wait_timeout`](PostgresSaverBuilder::wait_timeout) | 30 s | waiting for a free pooled connection |
//! | [`statement_timeout`](PostgresSaverBuilder::statement_timeout) | the server's | one statement, on the server |
//! | [`keepalives_idle`](PostgresSaverBuilder::keepalives_idle), [`keepalives_interval`](PostgresSaverBuilder::keepalives_interval), [`keepalives_retries`](PostgresSaverBuilder::keepalives_retries) | the connection string's, else the system's | finding an idle connection whose peer is gone |
//! | [`tcp_user_timeout`](PostgresSaverBuilder::tcp_user_timeout) | the system's | unacknowledged data on a connection |
//!
//! When the call timeout fires, the call returns an [`Error::Storage`](crate::Error::Storage):
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

pub(crate) mod admin;
mod backend;
mod builder;
pub(crate) mod conn;
pub(crate) mod error;
mod group;
mod jsonb;
mod lease;
mod list;
mod queries;
mod read;
mod retain;
mod rows;
pub(crate) mod schema;
mod space;

use std::fmt;
use std::sync::Arc;

use deadpool_postgres::{Object, Pool};

pub use builder::{PostgresSaverBuilder, DEFAULT_CALL_TIMEOUT};
pub use conn::StatementMode;
pub use deadpool_postgres;
pub use error::error_message;
pub use tokio_postgres;

use self::conn::{Inner, Pg};
use self::error::DbError;
use crate::engine::{self, Engine};
use crate::error::Result;
use crate::saver::{op_span, traced};
use crate::serde::JsonPlusSerializer;

/// Checkpoints in PostgreSQL, shared with Python LangGraph.
///
/// Cheap to clone: clones share the pool. See the [module docs](self).
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::postgres::PostgresSaver;
/// use checkpointer::prelude::*;
/// // Connects and runs Python's migrations (a no-op when they ran). The URL's
/// // password never appears in errors, logs or `Debug` output.
/// let saver = PostgresSaver::open("postgresql://postgres@127.0.0.1:5432/postgres").await?;
/// let history = saver.list_vec(Some(CheckpointConfig::new("thread-1")), ListOptions::default().limit(10)).await?;
/// # let _ = history;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresSaver {
    engine: Engine<Pg>,
}

impl fmt::Debug for PostgresSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.pg().inner;
        f.debug_struct("PostgresSaver")
            .field("pool", &inner.pool.status())
            .field("mode", &inner.mode)
            .field("serde", &inner.serde)
            .field("call_timeout", &inner.call_timeout)
            .field("group_commit", &inner.group.is_some())
            .finish()
    }
}

/// Reads a `postgresql://` URL or a `key=value` connection string as
/// [`PostgresSaverBuilder::url`] does, without connecting.
///
/// ```
/// use checkpointer::postgres::parse_connection_string;
/// assert_eq!(parse_connection_string("postgresql://app@db/app").unwrap().get_dbname(), Some("app"));
/// let e = parse_connection_string("postgresql://app:s3cret@db:port/app").unwrap_err();
/// assert!(!e.to_string().contains("s3cret"), "{e}");
/// ```
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) for a malformed
/// string, which it shows with every password masked
/// ([`crate::secret::redact`]).
pub fn parse_connection_string(text: &str) -> Result<tokio_postgres::Config> {
    text.parse().map_err(|e| error::parse_error(text, &e))
}

impl PostgresSaver {
    /// This saver's store with another engine (a fenced writer).
    fn with_engine(&self, engine: Engine<Pg>) -> Self {
        PostgresSaver { engine }
    }

    /// A builder: set a [`url`](PostgresSaverBuilder::url),
    /// [`config`](PostgresSaverBuilder::config) or
    /// [`pool`](PostgresSaverBuilder::pool), then
    /// [`open`](PostgresSaverBuilder::open)`.await` (or the lazy, sync
    /// [`build`](PostgresSaverBuilder::build)).
    pub fn builder() -> PostgresSaverBuilder {
        PostgresSaverBuilder::default()
    }

    /// Opens a saver for a connection URL (or `key=value` connection string)
    /// with the default settings, ready to use: connects and creates or
    /// migrates the tables ([`setup`](Self::setup)). For other settings or an
    /// existing pool use [`Self::builder`].
    ///
    /// # Errors
    /// As [`PostgresSaverBuilder::open`]:
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a malformed
    /// URL, [`Error::Storage`](crate::Error::Storage) when the server cannot
    /// be reached or the migrations fail. The URL's password never appears
    /// in them.
    pub async fn open(url: impl Into<String>) -> Result<Self> {
        Self::builder().url(url).open().await
    }

    /// A saver for a connection URL with the default settings.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a malformed URL.
    #[deprecated(
        since = "0.2.0",
        note = "use `PostgresSaver::open(url).await` (connects and runs setup), or \
                `PostgresSaver::builder().url(url).build()` for a lazy saver in sync code"
    )]
    pub fn from_url(url: &str) -> Result<Self> {
        Self::builder().url(url).build()
    }

    /// A saver on an existing pool.
    #[deprecated(
        since = "0.2.0",
        note = "use `PostgresSaver::builder().pool(pool).open().await` (runs setup), or \
                `PostgresSaver::builder().pool(pool).build()` for a lazy saver in sync code"
    )]
    pub fn from_pool(pool: Pool) -> Self {
        PostgresSaver::over(Inner {
            pool,
            mode: StatementMode::default(),
            serde: Arc::new(JsonPlusSerializer),
            lz4: tokio::sync::OnceCell::new(),
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            group: Some(group::Group::new(group::DEFAULT_UNITS)),
            fill_from_parent: true,
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

    /// The bytes the checkpoint tables take on the server, with their
    /// indexes and TOAST (0 for a table that does not exist).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn disk_bytes(&self) -> Result<u64> {
        let pg = self.pg();
        pg.timed("disk_bytes", None, async {
            let what = |e: DbError| e.into_error("disk_bytes", true);
            let client = pg.client().await.map_err(what)?;
            let row = client
                .query_one(queries::TABLE_BYTES, &[])
                .await
                .map_err(|e| what(DbError::from(e)))?;
            let n: i64 = row.try_get(0).map_err(|e| what(DbError::from(e)))?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }
}

engine::saver_over_engine!(PostgresSaver, engine);
