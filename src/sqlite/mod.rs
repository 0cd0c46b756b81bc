//! `SqliteSaver`: checkpoints in one SQLite file, byte-compatible with
//! Python's `langgraph-checkpoint-sqlite` 3.1.2 (feature `sqlite`).
//!
//! The file has Python's two tables (`checkpoints`, `writes`) with the same
//! columns and the same bytes in them (`docs/design.md`, *SQLite backend*): Python's `SqliteSaver` reads
//! what this saver writes and the other way round, and both can work on one
//! file at the same time.
//!
//! # Concurrency
//!
//! * One dedicated writer thread owns the only writing connection. Puts and
//!   every other mutation are queued to it; concurrent requests share one
//!   `BEGIN IMMEDIATE` transaction and one commit (group commit), each in its
//!   own savepoint so one failing request does not fail the others. A caller
//!   is answered only after the commit that made its request durable.
//! * Sync code that blocks on the saver anyway (`Runtime::block_on`) can
//!   run its writes on its own thread while the writer thread is idle, by
//!   making them inside [`may_block`]: the hand-off to the writer
//!   thread and back costs more than a small write.
//! * Reads run on a small pool of reader connections (see "Where reads
//!   run" below). WAL mode lets them read while the writer writes.
//! * Other processes (another `SqliteSaver`, Python's saver) writing the same
//!   file are waited for up to the busy timeout instead of failing with
//!   "database is locked".
//!
//! # Where reads run
//!
//! A read is a few indexed lookups on pages that are almost always in
//! memory, and a WAL reader never waits for the writer, so a read is run
//! inline on the calling task, on a reader connection with no busy timeout:
//! handing it to `spawn_blocking` and back costs more than the read (two
//! thread wake-ups, and the decoded values freed on another thread than the
//! one that allocated them). SQLite is stopped after 0.5 ms on the calling
//! task; only when it answers "busy" (a reader can have to wait while
//! another connection recovers or resets the WAL) or runs out of that time
//! (a filter scanning thousands of rows) does the read go to
//! `spawn_blocking`, where it waits up to the busy timeout or scans for as
//! long as it needs without holding a runtime thread. A filtered `list`
//! across all threads, which reads every row's metadata, starts there.
//! Outside a tokio runtime, and inside [`may_block`], reads always run on
//! the calling thread, to the end.
//!
//! Decoding the stored bytes into a [`CheckpointTuple`](crate::CheckpointTuple) happens on the
//! calling task too, one tuple at a time for `list`, whose stream draws on
//! tokio's cooperative budget so a long listing yields to other tasks.
//!
//! On storage where a page miss can take long (a network file system, a cold
//! disk), turn this off with [`SqliteSaverBuilder::inline_reads`]: every
//! read then runs in `spawn_blocking`.
//!
//! # Memory-mapped reads
//!
//! Reader connections map up to
//! [`reader_mmap_size`](SqliteSaverBuilder::reader_mmap_size) bytes of the
//! file: mapped pages are read without a system call or a copy into SQLite's
//! page cache, which matters most where `list` walks many rows (a filter reads
//! every row's metadata, stored after its checkpoint blob). The mapping is
//! address space backed by the OS page cache and shared by all connections; a
//! SQLite built without memory-mapped I/O ignores it. Pages read through it
//! count in the process's resident set as file-backed, reclaimable memory (a
//! scan of a 100 MB file can add up to 100 MB to RSS figures without more
//! private memory). An I/O error on a mapped page is a signal (SIGBUS) rather
//! than an error result: turn mapping off where the file lives on storage that
//! can fail under a running process.
//!
//! # Listing and filters
//!
//! `list` pages through the rows newest first with a keyset cursor
//! (checkpoint id, thread, namespace of the last row), each page walking an
//! index, so the stream costs the same per page at any depth and never holds
//! the history. The metadata filter is the crate's
//! [`metadata_matches`](crate::saver::metadata_matches), evaluated inside
//! SQLite by a Rust SQL function registered on this saver's connections
//! (nothing in the file refers to it): the filter is bound as one parameter,
//! keys of any characters are data, and `LIMIT` counts exact matches.
//!
//! # Durability
//!
//! The default is `synchronous=FULL` in WAL mode, as Python's saver runs: an
//! acknowledged `put` survives a process crash and a power loss.
//! [`Synchronous::Normal`] keeps it across a process crash only, for speed.
//!
//! ```
//! use checkpointer::sqlite::SqliteSaver;
//! use checkpointer::{ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata};
//! use checkpointer::{CheckpointSaver, CheckpointSaverExt, CheckpointSource, Value};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! let dir = std::env::temp_dir().join(format!("checkpointer-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let saver = SqliteSaver::open(dir.join("state.sqlite")).await?;
//!
//! let mut checkpoint = Checkpoint::new(0);
//! checkpoint.channel_values.insert("name".into(), Value::from("Ada"));
//! let thread = CheckpointConfig::new("thread-1");
//! let metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
//! saver.put(&thread, &checkpoint, &metadata, &ChannelVersions::new()).await?;
//!
//! let latest = saver.latest("thread-1").await?.expect("stored above");
//! assert_eq!(latest.checkpoint.channel_values["name"], Value::from("Ada"));
//! saver.close().await?;
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(())
//! # }
//! ```

pub(crate) mod admin;
mod backend;
pub(crate) mod builder;
mod checkpoints;
pub(crate) mod error;
mod functions;
mod lease;
mod ops;
pub(crate) mod pool;
mod queries;
mod recent;
mod rows;
mod schema;
mod space;
pub(crate) mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rusqlite::Connection;

pub use self::builder::{SqliteSaverBuilder, Synchronous};
use self::pool::{ReadKind, ReaderPool};
use self::schema::SchemaInfo;
use self::writer::Writer;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::serde::Serializer;

/// A checkpoint saver on one SQLite file (see the [module docs](self)).
///
/// Cheap to share: hold it in an `Arc` (`Arc<dyn CheckpointSaver>`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::prelude::*;
/// use checkpointer::sqlite::SqliteSaver;
/// let dir = tempfile::tempdir().unwrap();
/// // Python's tables, created when missing; Python's SqliteSaver reads the file too.
/// let saver: std::sync::Arc<dyn CheckpointSaver> =
///     std::sync::Arc::new(SqliteSaver::open(dir.path().join("checkpoints.sqlite")).await?);
/// let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
/// let mut step = StepCheckpoint::first(-1);
/// step.write(START, "hello", next)?;
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let stored = saver.put_step(&CheckpointConfig::new("t"), &step, &meta).await?;
/// assert_eq!(saver.latest("t").await?, Some(stored));
/// # Ok(())
/// # }
/// ```
pub struct SqliteSaver {
    engine: Engine<Inner>,
}

impl std::fmt::Debug for SqliteSaver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner();
        // the path masked as every connection string is (a query may carry
        // a secret); the connections' own `Debug` would print it whole
        f.debug_struct("SqliteSaver")
            .field(
                "path",
                &inner
                    .path
                    .as_deref()
                    .map(|p| crate::secret::redact(&p.to_string_lossy())),
            )
            .field("serde", &inner.serde)
            .field("fill_from_parent", &inner.fill_from_parent)
            .finish_non_exhaustive()
    }
}

/// The storage side: the writer thread, the readers and what they share.
#[derive(Debug)]
pub(crate) struct Inner {
    writer: Writer,
    recent: recent::Recent,
    readers: Option<Arc<ReaderPool>>,
    serde: Arc<dyn Serializer>,
    /// See [`SqliteSaverBuilder::fill_from_parent`].
    fill_from_parent: bool,
    schema: SchemaInfo,
    path: Option<PathBuf>,
}

impl Inner {
    /// Runs a read: on a reader connection (see the module docs, "Where
    /// reads run"), or on the writer's connection for an in-memory database.
    /// `work` may run twice (again after a "busy" answer or a stop).
    async fn read<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> Result<T> + Send + 'static,
    {
        self.read_as(ReadKind::Lookup, work).await
    }

    /// [`Self::read`] of a point lookup: inside [`may_block`], on the
    /// writer's connection when it is free, whose page cache holds what it
    /// just wrote (a reader's cache starts cold after every write, and its
    /// memory map faults on pages no read touched yet).
    async fn read_point<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> Result<T> + Send + 'static,
    {
        if self.readers.is_some() {
            if let Some(out) = self.writer.try_read_here(&work) {
                return out;
            }
        }
        self.read(work).await
    }

    /// [`Self::read`] of the given kind.
    async fn read_as<T, F>(&self, kind: ReadKind, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> Result<T> + Send + 'static,
    {
        match &self.readers {
            Some(pool) => pool.run(kind, work).await,
            None => self.writer.read(work).await,
        }
    }
}

thread_local! {
    /// Whether this thread is inside [`may_block`].
    static MAY_BLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is inside [`may_block`].
pub(crate) fn blocking_allowed() -> bool {
    MAY_BLOCK.with(std::cell::Cell::get)
}

/// Runs `f` with this thread marked as one that may block on SQLite, for
/// sync code that drives a [`SqliteSaver`] with `Runtime::block_on` (the
/// future passed to `block_on` is polled on the calling thread). Inside `f`,
/// the saver's work made on this thread stays on it:
///
/// * a write runs here, in a transaction of its own, whenever the writer
///   thread is idle, instead of being handed to that thread and waited for
///   (two thread wake-ups, more than a small insert costs); when the writer
///   is busy it is queued as usual and joins the next group commit;
/// * a read runs here to the end, with the busy timeout, instead of being
///   stopped after the inline budget and run again on a blocking thread (see
///   the [module docs](self), "Where reads run"); a `get_tuple` uses the
///   writer's connection when it is free, whose page cache holds what it
///   just wrote (a reader's is emptied by every write). On an in-memory
///   database, whose reads run on the writer's connection, a read runs here
///   when that connection is free.
///
/// Never wrap code that runs on an async runtime's worker threads: a write
/// there would hold the worker for the whole commit, `fsync` included.
///
/// ```
/// use checkpointer::sqlite::{may_block, SqliteSaver};
/// use checkpointer::{ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata};
/// use checkpointer::{CheckpointSaver, CheckpointSaverExt, CheckpointSource};
///
/// let rt = tokio::runtime::Runtime::new().unwrap();
/// let saver = SqliteSaver::builder(":memory:").build()?;
/// let (config, checkpoint) = (CheckpointConfig::new("t"), Checkpoint::new(0));
/// let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
/// let versions = ChannelVersions::new();
/// let put = saver.put(&config, &checkpoint, &meta, &versions);
/// // the insert and its commit run on this thread, and so does the read
/// may_block(|| rt.block_on(put))?;
/// assert!(may_block(|| rt.block_on(saver.latest("t")))?.is_some());
/// assert_eq!(saver.writer_stats().requests, 1);
/// # Ok::<(), checkpointer::Error>(())
/// ```
pub fn may_block<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            MAY_BLOCK.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(MAY_BLOCK.with(|c| c.replace(true)));
    f()
}

/// What the writer thread has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WriterStats {
    /// Transactions committed or attempted.
    pub transactions: u64,
    /// Write requests (puts, put_writes, deletes, …) they carried. With
    /// concurrent writers this exceeds `transactions`: that is group commit.
    pub requests: u64,
}

impl SqliteSaver {
    /// This saver's store with another engine (a fenced writer).
    fn with_engine(&self, engine: Engine<Inner>) -> Self {
        SqliteSaver { engine }
    }

    fn inner(&self) -> &Inner {
        self.engine.backend()
    }

    /// Opens (creating if needed) the database file at `path` with default
    /// settings, ready to use: the tables are created or migrated.
    /// `":memory:"` is a private in-memory database. The file I/O runs on a
    /// blocking thread. For other settings use [`Self::builder`]; from sync
    /// code, [`SqliteSaverBuilder::build`].
    ///
    /// # Errors
    /// As [`SqliteSaverBuilder::open`].
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteSaver> {
        SqliteSaverBuilder::new(path).open().await
    }

    /// Opens the existing database file at `path` read-only, with default
    /// settings: nothing in the file changes, reads work and writes are
    /// refused with [`Error::Unsupported`]. Works on a file Python wrote, on
    /// a read-only file and in a read-only directory; see
    /// [`SqliteSaverBuilder::read_only`].
    ///
    /// # Errors
    /// As [`SqliteSaverBuilder::open`].
    pub async fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteSaver> {
        SqliteSaverBuilder::new(path).read_only(true).open().await
    }

    /// The URI a read-only open gives SQLite for `path` (`mode=ro`, and
    /// `immutable=1` when it needs it: see [`SqliteSaverBuilder::read_only`]),
    /// for a caller that opens its own read-only connection beside the
    /// saver (the CLI). Not a stable API.
    ///
    /// # Errors
    /// [`Error::Storage`] when the file cannot be found or read.
    #[doc(hidden)]
    pub fn read_only_uri(path: &Path) -> Result<String> {
        builder::read_only_uri(path, SqliteSaverBuilder::new(path).busy_timeout_value())
    }

    /// Opens a saver on a private in-memory database (gone when the saver
    /// is dropped), ready to use. From sync code:
    /// `SqliteSaver::builder(":memory:").build()`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use checkpointer::sqlite::SqliteSaver;
    /// use checkpointer::CheckpointSaverExt;
    /// let saver = SqliteSaver::open_in_memory().await?;
    /// assert!(saver.latest("thread-1").await?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::Storage`] if SQLite cannot allocate the database.
    pub async fn open_in_memory() -> Result<SqliteSaver> {
        SqliteSaverBuilder::new(":memory:").open().await
    }

    /// A builder for the database at `path` (see [`SqliteSaverBuilder`]):
    /// finish it with [`open`](SqliteSaverBuilder::open)`.await`, or
    /// [`build`](SqliteSaverBuilder::build) from sync code.
    pub fn builder(path: impl AsRef<Path>) -> SqliteSaverBuilder {
        SqliteSaverBuilder::new(path)
    }

    /// A saver on a private in-memory database.
    ///
    /// # Errors
    /// [`Error::Storage`] if SQLite cannot allocate the database.
    #[deprecated(
        since = "0.2.0",
        note = "use `SqliteSaver::open_in_memory().await`, or `SqliteSaver::builder(\":memory:\").build()` in sync code"
    )]
    pub fn in_memory() -> Result<SqliteSaver> {
        SqliteSaverBuilder::new(":memory:").build()
    }

    /// The database file, `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.inner().path.as_deref()
    }

    /// Counters of the writer thread.
    pub fn writer_stats(&self) -> WriterStats {
        let c = &self.inner().writer.counters;
        WriterStats {
            transactions: c.transactions.load(Ordering::Relaxed),
            requests: c.jobs.load(Ordering::Relaxed),
        }
    }

    /// Finishes the queued writes, stops the writer thread and closes its
    /// connection (which folds the WAL back into the file when no other
    /// connection has it open). Later writes fail; reads of a file still work.
    ///
    /// # Errors
    /// [`Error::Storage`] if the writer thread panicked.
    pub async fn close(&self) -> Result<()> {
        if let Some(pool) = &self.inner().readers {
            pool.close_idle();
        }
        let Some(handle) = self.inner().writer.close() else {
            return Ok(());
        };
        let join = move || {
            handle
                .join()
                .map_err(|_| Error::storage("sqlite", false, "the SQLite writer thread panicked"))
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => rt
                .spawn_blocking(join)
                .await
                .map_err(|e| Error::storage("sqlite", false, e))?,
            Err(_) => join(),
        }
    }
}

engine::saver_over_engine!(SqliteSaver, engine);
