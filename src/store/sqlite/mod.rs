//! [`SqliteStore`]: the store on Python's SQLite tables (features `store`
//! and `sqlite`).

mod backend;
mod rows;
mod schema;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use self::backend::Sqlite;
pub(crate) use self::rows::register_vector_functions;
use super::engine::{store_option_setters, store_over_engine, StoreConfig, StoreEngine};
use super::sweeper::SweepGuard;
use crate::sqlite::builder::{connect_read_only, connect_writer, read_only_uri};
use crate::sqlite::pool::{ReaderPool, ReaderSettings, INLINE_BUDGET};
use crate::sqlite::writer::Writer;
use crate::sqlite::Synchronous;
use crate::{Error, Result};

/// The default of [`SqliteStoreBuilder::reader_mmap_size`]: 2 GiB, which
/// SQLite lowers to its build's ceiling (just under 2 GiB for the bundled
/// one on Linux).
const DEFAULT_READER_MMAP_SIZE: u64 = 2 << 30;

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
/// [`Store`](super::Store) contract's; where Python's `SqliteStore` differs (it returns
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
    engine: StoreEngine<Arc<Sqlite>>,
    path: Option<PathBuf>,
    sweeper: Option<SweepGuard>,
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
            .field("read_only", &self.engine.is_read_only())
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
            options: StoreConfig::default(),
            busy_timeout: Duration::from_secs(10),
            synchronous: Synchronous::Full,
            readers: 4,
            reader_mmap_size: DEFAULT_READER_MMAP_SIZE,
            read_only: false,
        }
    }

    /// Finishes the queued writes and closes the writer's connection; later
    /// calls fail.
    ///
    /// # Errors
    /// [`Error::Storage`] when the writer thread cannot be joined.
    pub async fn close(&self) -> Result<()> {
        let backend = &self.engine.backend;
        for pool in backend.readers.iter().chain(&backend.lookups) {
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
    options: StoreConfig,
    busy_timeout: Duration,
    synchronous: Synchronous,
    readers: usize,
    reader_mmap_size: u64,
    read_only: bool,
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
            .field("reader_mmap_size", &self.reader_mmap_size)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl SqliteStoreBuilder {
    store_option_setters!(builder);

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

    /// At most this many reader connections (default 4, at least 1), and
    /// as many again for batches of gets only when the readers map the file
    /// ([`Self::reader_mmap_size`]).
    pub fn readers(mut self, count: usize) -> Self {
        self.readers = count.max(1);
        self
    }

    crate::setters::setters! {
        /// Reads only (default `false`): the file must hold a store (its
        /// `store` table migrated as far as ours) and is never written, not
        /// even switched to WAL mode; puts, deletes and sweeps fail with
        /// [`Error::Unsupported`], and reads never restart TTLs.
        pub fn read_only(read_only: bool) => read_only = read_only;

        /// How many bytes of the file each reader connection maps into
        /// memory (SQLite's `mmap_size`; default 2 GiB, lowered by SQLite to
        /// its build's ceiling; 0 turns it off). A search reads its rows in
        /// the prefix index's order, which visits table pages out of order
        /// and most of them more than once: a mapped page is read from the
        /// operating system's cache without a system call and a copy each
        /// time, and the mapping is shared by the reader connections where
        /// each page cache is their own. The mapping is address space, not
        /// memory: the pages are the operating system's file cache. Batches
        /// of gets only read on connections of their own that do not map
        /// the file: SQLite drops a connection's map at its first read after
        /// a write, and a get touches too few pages to win it back.
        pub fn reader_mmap_size(bytes: u64) => reader_mmap_size = bytes;
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
    /// created (read-only: the file is missing or holds no store);
    /// [`Error::InvalidInput`] for a read-only `":memory:"` database or
    /// sweeper, or a sweep interval of zero.
    pub fn build(self) -> Result<SqliteStore> {
        self.options.check()?;
        let (conn, reader_path, layout) = if self.read_only {
            self.open_read_only()?
        } else {
            let conn = connect_writer(self.path.as_deref(), self.busy_timeout, self.synchronous)?;
            let layout = schema::setup(&conn, self.options.index.is_some())?;
            (conn, self.path.clone(), layout)
        };
        let writer = Writer::start(conn, self.read_only)?;
        let settings = ReaderSettings {
            busy_timeout: self.busy_timeout,
            mmap_size: self.reader_mmap_size,
            inline: true,
            inline_budget: INLINE_BUDGET,
            read_only: self.read_only,
        };
        let pool = |path: &PathBuf, mmap_size| {
            let settings = ReaderSettings { mmap_size, ..settings };
            Arc::new(ReaderPool::new(path.clone(), settings, self.readers))
        };
        let readers = reader_path.as_ref().map(|path| pool(path, self.reader_mmap_size));
        let lookups = match &reader_path {
            Some(path) if self.reader_mmap_size > 0 => Some(pool(path, 0)),
            _ => readers.clone(),
        };
        let backend = Sqlite {
            writer,
            readers,
            lookups,
            has_vectors: layout.vectors,
            time_index: layout.time_index,
        };
        let interval = self.options.sweep_interval;
        let mut engine = StoreEngine::new(Arc::new(backend), self.options);
        let sweeper = if self.read_only {
            engine = engine.read_only("a SqliteStore opened read-only");
            None
        } else {
            engine.start_sweeper(interval)?
        };
        Ok(SqliteStore {
            engine,
            path: self.path,
            sweeper,
        })
    }

    /// The read-only connection, the readers' URI, what the file has.
    fn open_read_only(&self) -> Result<(rusqlite::Connection, Option<PathBuf>, schema::Layout)> {
        let refuse = |why: &str| Err(Error::invalid(format!("a read-only SqliteStore {why}")));
        let Some(path) = &self.path else {
            return refuse("needs a file: \":memory:\" would always be empty");
        };
        let asks_sweeper = self.options.sweep_interval.is_some()
            || self
                .options
                .ttl
                .as_ref()
                .is_some_and(|t| t.sweep_interval_minutes.is_some());
        if asks_sweeper {
            return refuse("cannot run a TTL sweeper");
        }
        let uri = read_only_uri(path, self.busy_timeout)?;
        let conn = connect_read_only(&uri, self.busy_timeout)?;
        let layout = schema::inspect(&conn)?;
        if self.options.index.is_some() && !layout.vectors {
            return Err(super::StoreError::InvalidIndex {
                reason: "the file has no store_vectors table, and a read-only store creates none".into(),
            }
            .into());
        }
        Ok((conn, Some(PathBuf::from(uri)), layout))
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

store_over_engine!(SqliteStore, engine, sweeper);
