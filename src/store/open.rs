//! The store's front door: [`open()`] and [`StoreOptions`], reading URLs as
//! the saver's [`crate::open()`] reads them.

use std::sync::Arc;

use super::engine::{store_option_setters, StoreConfig};
use super::{InMemoryStore, Store};
use crate::open::Scheme;
use crate::secret::redact;
use crate::setters::setters;
use crate::{Error, Result};

/// Opens the store behind `url` with the default [`StoreOptions`] (a
/// SQLite file and its tables created when missing), as a [`Store`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::store::{Namespace, StoreExt};
/// use checkpointer::Error;
/// let store = checkpointer::store::open("memory:").await?;
/// let ns = Namespace::new(["users", "42"])?;
/// store.put(&ns, "prefs", serde_json::json!({"theme": "dark"})).await?;
/// assert_eq!(store.get(&ns, "prefs").await?.unwrap().value["theme"], "dark");
/// // an unknown scheme is refused as the saver's `open` refuses it
/// assert!(matches!(checkpointer::store::open("mysql://db/x").await, Err(Error::InvalidInput { .. })));
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As [`StoreOptions::open`].
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    StoreOptions::new().open(url).await
}

/// How a URL becomes a [`Store`]: the URL forms of the saver's
/// [`OpenOptions`](crate::OpenOptions), each to the store of its backend.
///
/// | URL | store | feature |
/// |---|---|---|
/// | `memory:` (or `memory://`) | a fresh [`InMemoryStore`] | `store` |
/// | `sqlite://relative/path.sqlite`, `sqlite:///absolute/path.sqlite`, `sqlite://:memory:` | a [`SqliteStore`](super::SqliteStore) in the tables of Python's `SqliteStore` | `store`, `sqlite` |
/// | `postgres://…`, `postgresql://…`, `key=value` | a [`PostgresStore`](super::PostgresStore) in the tables of Python's `PostgresStore` | `store`, `postgres` |
/// | `redis://…` and the other Redis forms | no Redis store: [`Error::Unsupported`] | `redis` |
///
/// The options: an [`index`](Self::index) for vector search, a
/// [`ttl`](Self::ttl) configuration, a [`sweep_interval`](Self::sweep_interval)
/// (a background [`TtlSweeper`](super::TtlSweeper) starts when it or the
/// TTL configuration's `sweep_interval_minutes` asks for one, and ends
/// when the store is dropped), [`read_only`](Self::read_only) and
/// [`create`](Self::create) as the saver's. Every error and `Debug` shows
/// the URL masked by [`crate::secret`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::store::{StoreOptions, TtlConfig};
/// let dir = tempfile::tempdir().unwrap();
/// let url = format!("sqlite://{}", dir.path().join("memory.sqlite").display());
/// let ttl = TtlConfig { default_ttl: Some(60.0), sweep_interval_minutes: Some(5), ..TtlConfig::default() };
/// let store = StoreOptions::new().ttl(ttl).open(&url).await?;
/// let sweeper = store.sweeper().expect("sweep_interval_minutes starts one");
/// assert_eq!(sweeper.interval().as_secs(), 300);
/// drop(store);
/// sweeper.stopped().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct StoreOptions {
    read_only: bool,
    create: bool,
    /// What the store's builder takes (index, TTL, clock, sweep interval),
    /// handed to it whole.
    options: StoreConfig,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            read_only: false,
            create: true,
            options: StoreConfig::default(),
        }
    }
}

impl StoreOptions {
    /// Read-write, creating a missing store, without index or TTL.
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// Reads only (default `false`): the store must exist, at the latest
        /// migration, and is never written (a SQLite file is not even
        /// switched to WAL mode, a PostgreSQL database gets no table); puts
        /// and sweeps fail with [`Error::Unsupported`], reads restart no TTL,
        /// no background sweeper starts. A `memory:` store, always empty,
        /// cannot be read-only.
        pub fn read_only(read_only: bool) => read_only = read_only;

        /// Whether a missing store (a SQLite file) is created (default `true`;
        /// never when [`read_only`](Self::read_only)).
        pub fn create(create: bool) => create = create;
    }

    // index, ttl, clock and sweep_interval, as every store builder has them
    store_option_setters!();

    /// Checks `url` as [`open`](Self::open) reads it, opening nothing; gives
    /// the backend it names (`"memory"`, `"sqlite"`, `"postgres"`).
    ///
    /// ```
    /// use checkpointer::store::StoreOptions;
    /// assert_eq!(StoreOptions::check("memory:")?, "memory");
    /// // no Redis store (or, without the feature, no Redis): an error, no secret in it
    /// let e = StoreOptions::check("redis://:s3cret@cache:6379").unwrap_err();
    /// assert!(!format!("{e} {e:?}").contains("s3cret"));
    /// # Ok::<(), checkpointer::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`open`](Self::open) gives them for the URL alone.
    pub fn check(url: &str) -> Result<&'static str> {
        match crate::open::scheme(url)? {
            Scheme::Memory => Ok("memory"),
            #[cfg(feature = "sqlite")]
            Scheme::Sqlite => crate::sqlite::admin::parse(url).map(|_| "sqlite"),
            #[cfg(feature = "postgres")]
            Scheme::Postgres => crate::postgres::admin::parse(url).map(|_| "postgres"),
            #[cfg(feature = "redis")]
            Scheme::Redis => Err(not_built("a Redis store")),
        }
    }

    /// Opens the store behind `url` (the forms: [`StoreOptions`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a URL of no known form, a malformed one, a
    /// scheme whose feature this build lacks (the message names it), a
    /// read-only `memory:` store, a sweep interval of zero;
    /// [`Error::Unsupported`] for a backend without a store (Redis);
    /// [`Error::NotFound`] for a missing SQLite file (or, to create one, its
    /// directory); [`Error::Store`] for a configuration the store refuses;
    /// [`Error::Storage`] when the file or server cannot be opened or reached
    /// or (read-only) holds no store at the latest migration. The URL's secrets never appear in them.
    pub async fn open(&self, url: &str) -> Result<Arc<dyn Store>> {
        let backend = Self::check(url)?;
        if backend == "memory" {
            return self.memory(url).map(|s| Arc::new(s) as Arc<dyn Store>);
        }
        #[cfg(feature = "sqlite")]
        if backend == "sqlite" {
            return self.sqlite(url).await;
        }
        #[cfg(feature = "postgres")]
        if backend == "postgres" {
            return self.postgres(url).await;
        }
        Err(not_built("this backend's store"))
    }

    /// A [`PostgresStore`](super::PostgresStore): read-only, its tables
    /// checked and nothing created; else its tables created or migrated
    /// when [`create`](Self::create) (the default), or only connected.
    #[cfg(feature = "postgres")]
    async fn postgres(&self, url: &str) -> Result<Arc<dyn Store>> {
        let builder = super::PostgresStore::builder()
            .url(url)
            .read_only(self.read_only)
            .with_config(self.options.clone());
        let store = if self.create || self.read_only {
            builder.open().await?
        } else {
            builder.build()?
        };
        Ok(Arc::new(store))
    }

    fn memory(&self, url: &str) -> Result<InMemoryStore> {
        if self.read_only {
            return Err(Error::invalid(format!(
                "{} is always empty: a memory store cannot be opened read-only",
                redact(url)
            )));
        }
        InMemoryStore::builder().with_config(self.options.clone()).build()
    }

    #[cfg(feature = "sqlite")]
    async fn sqlite(&self, url: &str) -> Result<Arc<dyn Store>> {
        let path = crate::sqlite::admin::parse(url)?;
        let creates = self.create && !self.read_only;
        if path != std::path::Path::new(":memory:") {
            crate::sqlite::admin::check_path(&path, &redact(url), creates)?;
        }
        let builder = super::SqliteStore::builder(&path).read_only(self.read_only);
        Ok(Arc::new(builder.with_config(self.options.clone()).open().await?))
    }
}

/// A backend this build has no store for.
#[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))]
fn not_built(what: &'static str) -> Error {
    Error::Unsupported {
        operation: what,
        implementer: "checkpointer::store::open in this build",
    }
}
