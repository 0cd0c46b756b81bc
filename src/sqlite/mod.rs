//! `SqliteSaver`: checkpoints in one SQLite file, byte-compatible with
//! Python's `langgraph-checkpoint-sqlite` 3.1.2 (feature `sqlite`).
//!
//! The file has Python's two tables (`checkpoints`, `writes`) with the same
//! columns and the same bytes in them (spec §7): Python's `SqliteSaver` reads
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
//! Outside a tokio runtime reads always run inline.
//!
//! Decoding the stored bytes into a [`CheckpointTuple`](crate::CheckpointTuple) happens on the
//! calling task too, one tuple at a time for `list`, whose stream draws on
//! tokio's cooperative budget so a long listing yields to other tasks.
//!
//! On storage where a page miss can take long (a network file system, a cold
//! disk), turn this off with [`SqliteSaverBuilder::inline_reads`]: every
//! read then runs in `spawn_blocking`.
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

mod backend;
mod error;
mod import;
mod pool;
mod queries;
mod recent;
mod schema;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use self::error::sql_error;
use self::pool::{ReadKind, ReaderPool, ReaderSettings};
use self::schema::SchemaInfo;
use self::writer::Writer;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::serde::{JsonPlusSerializer, Serializer};

/// How many rows one `list` page reads.
const LIST_PAGE: usize = 64;

/// The default of [`SqliteSaverBuilder::reader_mmap_size`].
const DEFAULT_READER_MMAP_SIZE: u64 = 256 << 20;

/// SQLite's `synchronous` setting for the writer connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Synchronous {
    /// No syncs: fastest; a crash of the machine may lose or corrupt recent
    /// commits.
    Off,
    /// WAL is synced at checkpoints only: a committed write survives a process
    /// crash but may be lost on a power failure.
    Normal,
    /// Every commit is synced (the default, as Python's saver runs): an
    /// acknowledged write survives a process crash and a power failure.
    #[default]
    Full,
    /// As `Full`, and the directory is synced too.
    Extra,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Off => "PRAGMA synchronous = OFF",
            Synchronous::Normal => "PRAGMA synchronous = NORMAL",
            Synchronous::Full => "PRAGMA synchronous = FULL",
            Synchronous::Extra => "PRAGMA synchronous = EXTRA",
        }
    }
}

#[derive(Debug, Clone)]
enum Target {
    File(PathBuf),
    Memory,
}

/// Configures and opens a [`SqliteSaver`].
///
/// ```
/// use std::time::Duration;
/// use checkpointer::sqlite::{SqliteSaver, Synchronous};
/// let saver = SqliteSaver::builder(":memory:")
///     .busy_timeout(Duration::from_secs(5))
///     .synchronous(Synchronous::Full)
///     .readers(4)
///     .build()
///     .unwrap();
/// # drop(saver);
/// ```
#[derive(Debug, Clone)]
pub struct SqliteSaverBuilder {
    target: Target,
    busy_timeout: Duration,
    synchronous: Synchronous,
    readers: usize,
    inline_reads: bool,
    reader_mmap_size: u64,
    serializer: Arc<dyn Serializer>,
}

impl SqliteSaverBuilder {
    /// A builder for the database file at `path`; `":memory:"` is a private
    /// in-memory database.
    pub fn new(path: impl AsRef<Path>) -> Self {
        let path = path.as_ref();
        SqliteSaverBuilder {
            target: if path == Path::new(":memory:") {
                Target::Memory
            } else {
                Target::File(path.to_owned())
            },
            busy_timeout: Duration::from_secs(10),
            synchronous: Synchronous::Full,
            readers: 4,
            inline_reads: true,
            reader_mmap_size: DEFAULT_READER_MMAP_SIZE,
            serializer: Arc::new(JsonPlusSerializer),
        }
    }

    /// How long to wait for another connection or process holding the write
    /// lock before failing with a retryable error (default 10 s).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The `synchronous` level of the writer (default [`Synchronous::Full`]).
    pub fn synchronous(mut self, level: Synchronous) -> Self {
        self.synchronous = level;
        self
    }

    /// How many reads may run at once, each on its own connection (default 4,
    /// at least 1). An in-memory database reads on the writer's connection.
    pub fn readers(mut self, count: usize) -> Self {
        self.readers = count.max(1);
        self
    }

    /// Whether reads run on the calling task when they need not wait on a
    /// lock (default `true`); `false` runs every read in
    /// `tokio::task::spawn_blocking`, for storage where reading a page can
    /// take long. See the [module docs](self#where-reads-run).
    pub fn inline_reads(mut self, inline: bool) -> Self {
        self.inline_reads = inline;
        self
    }

    /// How many bytes of the file each reader connection maps into memory
    /// (SQLite's `mmap_size`, default 256 MiB; 0 turns it off). Mapped pages
    /// are read without a system call or a copy into SQLite's page cache,
    /// which matters most where `list` walks many rows (a filter reads every
    /// row's metadata, stored after its checkpoint blob). The mapping is
    /// address space backed by the OS page cache, shared by all
    /// connections; a SQLite built without memory-mapped I/O ignores it.
    /// Pages read through the mapping count in the process's resident set
    /// (as file-backed, reclaimable memory: a scan of a 100 MB file can add
    /// up to 100 MB to RSS figures without any more private memory). As
    /// SQLite's documentation warns, an I/O error on a mapped page is a
    /// signal (SIGBUS) rather than an error result: turn it off where the
    /// file lives on storage that can fail under a running process.
    pub fn reader_mmap_size(mut self, bytes: u64) -> Self {
        self.reader_mmap_size = bytes;
        self
    }

    /// The serializer for checkpoints and writes (default
    /// [`JsonPlusSerializer`], which Python's saver uses).
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// Opens the database, creating the file and the tables if needed and
    /// migrating a file an older Python saver created, then starts the writer
    /// thread. Blocks on file I/O: from async code prefer [`Self::open`].
    ///
    /// # Errors
    /// [`Error::Storage`] when the file cannot be opened or is not a SQLite
    /// database, or the schema cannot be created.
    pub fn build(self) -> Result<SqliteSaver> {
        let conn = self.connect()?;
        let schema = schema::setup(&conn)?;
        let writer = Writer::start(conn)?;
        let readers = match &self.target {
            Target::File(path) => {
                let pool = ReaderPool::new(
                    path.clone(),
                    ReaderSettings {
                        busy_timeout: self.busy_timeout,
                        mmap_size: self.reader_mmap_size,
                        inline: self.inline_reads,
                    },
                    self.readers,
                );
                pool.warm_up();
                Some(Arc::new(pool))
            }
            Target::Memory => None,
        };
        Ok(SqliteSaver {
            engine: Engine::new(Inner {
                writer,
                recent: recent::Recent::new(4096),
                readers,
                serde: self.serializer,
                schema,
                path: match self.target {
                    Target::File(p) => Some(p),
                    Target::Memory => None,
                },
            }),
        })
    }

    /// [`Self::build`] on a blocking thread.
    ///
    /// # Errors
    /// As [`Self::build`].
    pub async fn open(self) -> Result<SqliteSaver> {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle
                .spawn_blocking(move || self.build())
                .await
                .map_err(|e| Error::storage("sqlite", false, e))?,
            Err(_) => self.build(),
        }
    }

    fn connect(&self) -> Result<Connection> {
        let conn = match &self.target {
            Target::Memory => Connection::open_in_memory().map_err(sql_error)?,
            Target::File(path) => Connection::open_with_flags(path, open_flags()).map_err(sql_error)?,
        };
        configure(&conn, self.busy_timeout)?;
        if let Target::File(_) = self.target {
            // WAL lets readers run beside the writer; a read-only file keeps
            // its journal mode.
            let mode: rusqlite::Result<String> = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0));
            if let Err(e) = mode {
                if e.sqlite_error_code() != Some(ErrorCode::ReadOnly) {
                    return Err(sql_error(e));
                }
            }
        }
        conn.execute_batch(self.synchronous.pragma()).map_err(sql_error)?;
        Ok(conn)
    }
}

fn open_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

/// Settings every connection of the saver gets.
fn configure(conn: &Connection, busy_timeout: Duration) -> Result<()> {
    conn.busy_timeout(busy_timeout).map_err(sql_error)?;
    conn.set_prepared_statement_cache_capacity(64);
    queries::register_functions(conn)
}

/// Opens a reader connection to a database file.
pub(crate) fn open_reader(path: &Path, busy_timeout: Duration, mmap_size: u64) -> Result<Connection> {
    let conn = Connection::open_with_flags(path, open_flags()).map_err(sql_error)?;
    configure(&conn, busy_timeout)?;
    conn.execute_batch("PRAGMA query_only = ON").map_err(sql_error)?;
    conn.execute_batch(&format!("PRAGMA mmap_size = {mmap_size}"))
        .map_err(sql_error)?;
    Ok(conn)
}

/// A checkpoint saver on one SQLite file (see the [module docs](self)).
///
/// Cheap to share: hold it in an `Arc` (`Arc<dyn CheckpointSaver>`).
#[derive(Debug)]
pub struct SqliteSaver {
    engine: Engine<Inner>,
}

/// The storage side: the writer thread, the readers and what they share.
#[derive(Debug)]
pub(crate) struct Inner {
    writer: Writer,
    recent: recent::Recent,
    readers: Option<Arc<ReaderPool>>,
    serde: Arc<dyn Serializer>,
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
    fn inner(&self) -> &Inner {
        self.engine.backend()
    }

    /// Opens (creating if needed) the database file at `path` with default
    /// settings; `":memory:"` is a private in-memory database.
    ///
    /// # Errors
    /// As [`SqliteSaverBuilder::build`].
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteSaver> {
        SqliteSaverBuilder::new(path).open().await
    }

    /// A builder for the database at `path` (see [`SqliteSaverBuilder`]).
    pub fn builder(path: impl AsRef<Path>) -> SqliteSaverBuilder {
        SqliteSaverBuilder::new(path)
    }

    /// A saver on a private in-memory database.
    ///
    /// # Errors
    /// [`Error::Storage`] if SQLite cannot allocate the database.
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
