//! [`SqliteStore`]: the store on Python's SQLite tables (features `store`
//! and `sqlite`).

mod backend;
mod rows;
mod schema;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use self::backend::Sqlite;
pub(crate) use self::rows::register_vector_functions;
use super::engine::{store_option_setters, store_over_engine, StoreEngine, StoreOptions};
use crate::sqlite::builder::connect_writer;
use crate::sqlite::pool::{ReaderPool, ReaderSettings, INLINE_BUDGET};
use crate::sqlite::writer::Writer;
use crate::sqlite::Synchronous;
use crate::{Error, Result};

/// A store in one SQLite file, on the tables of Python's `SqliteStore`
/// (langgraph-checkpoint-sqlite 3.1.2: `store`, `store_vectors` and their
/// migration tables, created or migrated as Python does), so that Python's
/// store and this one read each other's items in one file, even at the
/// same time. Vector search scores with sqlite-vec's `vec_distance_cosine`
/// over the same `f32` blobs, computed as sqlite-vec computes it: scores
/// equal Python's to the last bit given the same embeddings.
///
/// Its connections are the [`SqliteSaver`](crate::sqlite::SqliteSaver)'s:
/// one writer thread with group commit, a batch with writes one
/// transaction; reads on reader connections (WAL). The rules are the
/// [`Store`] contract's; where Python's `SqliteStore` differs (it returns
/// expired items, drops items without vectors from a vector search, cuts a
/// vector search at twice the limit before the offset) this store keeps the
/// contract, as listed in `docs/store.md`.
///
/// ```
/// use std::sync::Arc;
/// use checkpointer::store::{HashedNgramEmbeddings, IndexConfig, Namespace, SearchOp, SqliteStore, StoreExt};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let index = IndexConfig::new(64, Arc::new(HashedNgramEmbeddings::new(64))).fields(["text"]);
/// let store = SqliteStore::builder(dir.path().join("memory.sqlite")).index(index).open().await?;
/// let docs = Namespace::new(["docs"])?;
/// store.put(&docs, "1", serde_json::json!({"text": "rust tutorial"})).await?;
/// store.put(&docs, "2", serde_json::json!({"text": "python guide"})).await?;
/// let found = store.search(SearchOp::new(docs.clone()).query("a rust guide")).await?;
/// assert_eq!(found[0].item.key, "1");
/// assert!(found[0].score > found[1].score);
/// assert_eq!(store.get(&docs, "2").await?.unwrap().value["text"], "python guide");
/// store.close().await?;
/// # Ok(())
/// # }
/// ```
pub struct SqliteStore {
    engine: StoreEngine<Sqlite>,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field(
                "path",
                &self
                    .path
                    .as_deref()
                    .map(|p| crate::secret::redact(&p.to_string_lossy())),
            )
            .field("index", &self.engine.index)
            .field("ttl", &self.engine.ttl)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating or migrating) the store in the file at `path` with
    /// default settings, no index and no TTL configuration.
    ///
    /// # Errors
    /// As [`SqliteStoreBuilder::open`].
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        SqliteStore::builder(path).open().await
    }

    /// A builder for the store in the file at `path` (`":memory:"`: a
    /// private in-memory database).
    pub fn builder(path: impl AsRef<Path>) -> SqliteStoreBuilder {
        let path = path.as_ref();
        SqliteStoreBuilder {
            path: (path != Path::new(":memory:")).then(|| path.to_owned()),
            options: StoreOptions::default(),
            busy_timeout: Duration::from_secs(10),
            synchronous: Synchronous::Full,
            readers: 4,
        }
    }

    /// Finishes the queued writes and closes the writer's connection; later
    /// calls fail.
    ///
    /// # Errors
    /// [`Error::Storage`] when the writer thread cannot be joined.
    pub async fn close(&self) -> Result<()> {
        let backend = &self.engine.backend;
        if let Some(pool) = &backend.readers {
            pool.close_idle();
        }
        if let Some(thread) = backend.writer.close() {
            let joined = match tokio::runtime::Handle::try_current() {
                Ok(rt) => rt
                    .spawn_blocking(move || thread.join())
                    .await
                    .map_err(|e| Error::storage("sqlite", false, e))?,
                Err(_) => thread.join(),
            };
            joined.map_err(|_| Error::storage("sqlite", false, "the SQLite writer thread panicked"))?;
        }
        Ok(())
    }
}

/// Configures and opens a [`SqliteStore`].
pub struct SqliteStoreBuilder {
    path: Option<PathBuf>,
    options: StoreOptions,
    busy_timeout: Duration,
    synchronous: Synchronous,
    readers: usize,
}

impl std::fmt::Debug for SqliteStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStoreBuilder")
            .field(
                "path",
                &self
                    .path
                    .as_deref()
                    .map(|p| crate::secret::redact(&p.to_string_lossy())),
            )
            .field("options", &self.options)
            .field("busy_timeout", &self.busy_timeout)
            .field("synchronous", &self.synchronous)
            .field("readers", &self.readers)
            .finish_non_exhaustive()
    }
}

impl SqliteStoreBuilder {
    store_option_setters!();

    /// How long a connection waits for another process's lock (default 10 s).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The writer's `synchronous` setting (default [`Synchronous::Full`]).
    pub fn synchronous(mut self, level: Synchronous) -> Self {
        self.synchronous = level;
        self
    }

    /// At most this many reader connections (default 4, at least 1).
    pub fn readers(mut self, count: usize) -> Self {
        self.readers = count.max(1);
        self
    }

    /// The sync variant of [`Self::open`]: opens the file, creates or
    /// migrates the tables and starts the writer thread on the calling
    /// thread.
    ///
    /// # Errors
    /// [`StoreError::InvalidIndex`](super::StoreError::InvalidIndex) or
    /// [`StoreError::InvalidTtl`](super::StoreError::InvalidTtl) for a
    /// configuration the store refuses; [`Error::Storage`] when the file
    /// cannot be opened, is not a SQLite database, or the tables cannot be
    /// created.
    pub fn build(self) -> Result<SqliteStore> {
        self.options.check()?;
        let conn = connect_writer(self.path.as_deref(), self.busy_timeout, self.synchronous)?;
        let has_vectors = schema::setup(&conn, self.options.index.is_some())?;
        let writer = Writer::start(conn, false)?;
        let readers = self.path.as_ref().map(|path| {
            let settings = ReaderSettings {
                busy_timeout: self.busy_timeout,
                mmap_size: 0,
                inline: true,
                inline_budget: INLINE_BUDGET,
                read_only: false,
            };
            Arc::new(ReaderPool::new(path.clone(), settings, self.readers))
        });
        let backend = Sqlite {
            writer,
            readers,
            has_vectors,
        };
        Ok(SqliteStore {
            engine: StoreEngine::new(backend, self.options),
            path: self.path,
        })
    }

    /// Opens the store: the file I/O of [`Self::build`] on a blocking
    /// thread (on the calling one outside a tokio runtime).
    ///
    /// # Errors
    /// As [`Self::build`].
    pub async fn open(self) -> Result<SqliteStore> {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => rt
                .spawn_blocking(move || self.build())
                .await
                .map_err(|e| Error::storage("sqlite", false, e))?,
            Err(_) => self.build(),
        }
    }
}

store_over_engine!(SqliteStore, engine);
