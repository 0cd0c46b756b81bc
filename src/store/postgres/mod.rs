//! [`PostgresStore`]: the store on Python's PostgreSQL tables (features
//! `store` and `postgres`).

mod backend;
mod rows;
mod schema;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Object, Pool};

use self::backend::Pg;

use super::engine::{store_option_setters, store_over_engine, StoreConfig, StoreEngine};
use super::sweeper::SweepGuard;
use crate::postgres::{PostgresSaver, PostgresSaverBuilder, StatementMode};
use crate::Result;

/// A store in PostgreSQL, on the tables of Python's `PostgresStore`
/// (langgraph-checkpoint-postgres 3.2.0: `store`, `store_vectors` and
/// their migration tables, created or migrated as Python does), so that
/// Python's store and this one read each other's items in one database.
///
/// Its connections are a [`PostgresSaver`]'s: a `deadpool-postgres` pool
/// made from the same settings (URL, TLS, timeouts), or the application's
/// pool. A batch runs atomically on one connection: its reads, the TTL
/// refreshes they ask for, then its writes, in statements of at most 500
/// rows; a failure leaves nothing. A lone `get`, a search without a query
/// and a batch of writes take one round trip each. Every time the store compares or
/// writes is its own clock's, so expiry is exact whatever the server's
/// clock says; an expired item is never read, swept or not.
///
/// Vector search needs pgvector on the server: with an [`IndexConfig`](super::IndexConfig),
/// [`setup`](Self::setup) (and so [`PostgresStoreBuilder::open`]) fails with
/// [`StoreError::PgvectorMissing`](super::StoreError::PgvectorMissing)
/// before it creates anything when the server has no `vector` extension.
/// Where the rules of Python's `PostgresStore` differ from the [`Store`](super::Store)
/// contract (its filters compare in SQL, it returns expired items unless
/// `omit_expired`), this store keeps the contract; `docs/store.md` lists
/// the differences.
///
/// ```no_run
/// use checkpointer::store::{Namespace, PostgresStore, StoreExt};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// // connects and runs Python's store migrations (a no-op when they ran)
/// let store = PostgresStore::open("postgresql://postgres@127.0.0.1:5432/app").await?;
/// let user = Namespace::new(["users", "42"])?;
/// store.put(&user, "prefs", serde_json::json!({"theme": "dark"})).await?;
/// assert_eq!(store.get(&user, "prefs").await?.unwrap().value["theme"], "dark");
/// # Ok(())
/// # }
/// ```
pub struct PostgresStore {
    engine: StoreEngine<Arc<Pg>>,
    sweeper: Option<SweepGuard>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = &self.engine.backend;
        f.debug_struct("PostgresStore")
            .field("pool", &backend.pool.status())
            .field("mode", &backend.mode)
            .field("call_timeout", &backend.call_timeout)
            .field("index", &self.engine.index)
            .field("ttl", &self.engine.ttl)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Opens the store for a connection URL (or `key=value` connection
    /// string) with default settings, no index and no TTL configuration:
    /// connects and creates or migrates the tables ([`Self::setup`]).
    ///
    /// # Errors
    /// As [`PostgresStoreBuilder::open`].
    pub async fn open(url: impl Into<String>) -> Result<PostgresStore> {
        PostgresStore::builder().url(url).open().await
    }

    /// A builder: a [`url`](PostgresStoreBuilder::url),
    /// [`pool`](PostgresStoreBuilder::pool) or
    /// [`connection`](PostgresStoreBuilder::connection) settings, an index,
    /// a TTL configuration.
    pub fn builder() -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            connection: PostgresSaver::builder(),
            options: StoreConfig::default(),
            read_only: false,
        }
    }

    /// The connection pool.
    pub fn pool(&self) -> &Pool {
        &self.engine.backend.pool
    }

    /// Creates the tables or brings them to the latest migration as
    /// Python's `PostgresStore.setup()` does (the same tables, indexes and
    /// `store_migrations` / `vector_migrations` rows), outside any
    /// transaction, several of our processes taking turns on an advisory
    /// lock. With an index, first checks that the server has pgvector.
    ///
    /// # Errors
    /// [`StoreError::PgvectorMissing`](super::StoreError::PgvectorMissing)
    /// with an index on a server without pgvector (nothing created);
    /// [`Error::Storage`](crate::Error::Storage) when the server cannot be
    /// reached or a migration fails (the database stays at the last one
    /// that completed).
    pub async fn setup(&self) -> Result<()> {
        if self.engine.is_read_only() {
            return Err(crate::Error::Unsupported {
                operation: "setup",
                implementer: READ_ONLY,
            });
        }
        let client = self.connection("store setup").await?;
        let out = schema::setup(&**client, self.engine.index.as_ref().map(|i| i.dims)).await;
        if out.is_err() {
            // closing the connection releases the session lock for sure
            drop(Object::take(client));
        }
        out
    }

    /// A pooled connection for `doing` (a setup or its check).
    async fn connection(&self, doing: &'static str) -> Result<Object> {
        let pool = &self.engine.backend.pool;
        pool.get()
            .await
            .map_err(|e| crate::postgres::conn::fail(pool, crate::postgres::error::DbError::from(e), doing, false))
    }

    /// A read-only open's check: the tables are there, at the latest
    /// migration, with `store_vectors` when an index is configured.
    async fn inspect(&self) -> Result<()> {
        let client = self.connection("store inspection").await?;
        let has_vectors = schema::inspect(&**client).await?;
        if self.engine.index.is_some() && !has_vectors {
            return Err(super::StoreError::InvalidIndex {
                reason: "the database has no store_vectors table, and a read-only store creates none".into(),
            }
            .into());
        }
        Ok(())
    }
}

/// Configures and opens a [`PostgresStore`].
#[must_use]
pub struct PostgresStoreBuilder {
    connection: PostgresSaverBuilder,
    options: StoreConfig,
    read_only: bool,
}

/// The store that refuses writes when opened read-only.
const READ_ONLY: &str = "a PostgresStore opened read-only";

impl std::fmt::Debug for PostgresStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // the saver builder's Debug masks the URL's password
        f.debug_struct("PostgresStoreBuilder")
            .field("connection", &self.connection)
            .field("options", &self.options)
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl PostgresStoreBuilder {
    store_option_setters!(builder);

    /// Reads only (default `false`): [`open`](Self::open) checks that the
    /// database holds a store at the latest migration and creates or
    /// migrates nothing; puts, sweeps and [`PostgresStore::setup`] fail
    /// with [`Error::Unsupported`](crate::Error::Unsupported), reads
    /// restart no TTL, and no background sweeper starts.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Connect with a `postgresql://` URL (or a `key=value` connection
    /// string); its password never appears in errors or `Debug` output.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.connection = self.connection.url(url);
        self
    }

    /// Use an existing pool (its own size, timeouts and TLS apply).
    pub fn pool(mut self, pool: Pool) -> Self {
        self.connection = self.connection.pool(pool);
        self
    }

    /// The connection settings of a [`PostgresSaverBuilder`]: its URL,
    /// config or pool, pool size, statement mode, TLS, connect, wait, call
    /// and statement timeouts, keepalives (its saver-only settings are
    /// ignored).
    ///
    /// ```
    /// use std::time::Duration;
    /// use checkpointer::postgres::{PostgresSaver, StatementMode};
    /// use checkpointer::store::PostgresStore;
    /// let store = PostgresStore::builder()
    ///     .connection(
    ///         PostgresSaver::builder()
    ///             .url("postgresql://app:secret@db.internal:6432/app")
    ///             .statement_mode(StatementMode::Unnamed)
    ///             .call_timeout(Some(Duration::from_secs(5))),
    ///     )
    ///     .build()?; // no connection is made until the first call
    /// assert!(!format!("{store:?}").contains("secret"));
    /// # Ok::<(), checkpointer::Error>(())
    /// ```
    pub fn connection(mut self, settings: PostgresSaverBuilder) -> Self {
        self.connection = settings;
        self
    }

    /// The most connections the pool opens (default 16).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.connection = self.connection.max_connections(n);
        self
    }

    /// How statements are sent (default [`StatementMode::Prepared`];
    /// [`StatementMode::Unnamed`] behind a transaction pooler).
    pub fn statement_mode(mut self, mode: StatementMode) -> Self {
        self.connection = self.connection.statement_mode(mode);
        self
    }

    /// The longest one batch or sweep may take (default 60 s; `None` waits
    /// indefinitely), as [`PostgresSaverBuilder::call_timeout`].
    pub fn call_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connection = self.connection.call_timeout(timeout);
        self
    }

    /// The sync, lazy variant of [`Self::open`]: no connection is made and
    /// no table created; run [`PostgresStore::setup`] before using it on a
    /// fresh database (or rely on another process having done so).
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a missing or
    /// malformed URL; [`StoreError::InvalidIndex`](super::StoreError::InvalidIndex)
    /// or [`StoreError::InvalidTtl`](super::StoreError::InvalidTtl) for a
    /// configuration the store refuses.
    pub fn build(mut self) -> Result<PostgresStore> {
        self.options.check()?;
        let (pool, mode, call_timeout) = self.connection.connection("PostgresStoreBuilder")?;
        let backend = Pg {
            pool,
            mode,
            call_timeout,
        };
        let interval = self.options.sweep_interval;
        let engine = StoreEngine::new(Arc::new(backend), self.options);
        if self.read_only {
            return Ok(PostgresStore {
                engine: engine.read_only(READ_ONLY),
                sweeper: None,
            });
        }
        let sweeper = engine.start_sweeper(interval)?;
        Ok(PostgresStore { engine, sweeper })
    }

    /// Opens the store, ready to use: builds it, connects and creates or
    /// migrates the tables ([`PostgresStore::setup`]).
    ///
    /// # Errors
    /// As [`Self::build`] and [`PostgresStore::setup`]: with an index on a
    /// server without pgvector,
    /// [`StoreError::PgvectorMissing`](super::StoreError::PgvectorMissing),
    /// nothing created.
    pub async fn open(self) -> Result<PostgresStore> {
        let store = self.build()?;
        if store.engine.is_read_only() {
            store.inspect().await?;
        } else {
            store.setup().await?;
        }
        Ok(store)
    }
}

store_over_engine!(PostgresStore, engine, sweeper);
