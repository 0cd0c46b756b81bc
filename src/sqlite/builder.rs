//! [`SqliteSaverBuilder`]: the settings of a saver, and opening and
//! configuring its connections (the writer's and the readers').

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::error::sql_error;
use super::functions::register_functions;
use super::pool::{ReaderPool, ReaderSettings};
use super::recent::Recent;
use super::writer::Writer;
use super::{schema, Inner, SqliteSaver};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::serde::{JsonPlusSerializer, Serializer};

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

#[derive(Clone)]
enum Target {
    File(PathBuf),
    Memory,
}

/// Configures and opens a [`SqliteSaver`]: [`open`](Self::open)`.await`
/// returns it ready to use; [`build`](Self::build) does the same work on the
/// calling thread, for sync code.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use std::time::Duration;
/// use checkpointer::sqlite::{SqliteSaver, Synchronous};
/// let saver = SqliteSaver::builder(":memory:")
///     .busy_timeout(Duration::from_secs(5))
///     .synchronous(Synchronous::Full)
///     .readers(4)
///     .open()
///     .await?;
/// # drop(saver);
/// # Ok(())
/// # }
/// ```
///
/// In sync code (no runtime, or the [`blocking`](crate::blocking) facade):
///
/// ```
/// use checkpointer::sqlite::SqliteSaver;
/// let saver = SqliteSaver::builder(":memory:").build()?;
/// # drop(saver);
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Clone)]
pub struct SqliteSaverBuilder {
    target: Target,
    busy_timeout: Duration,
    synchronous: Synchronous,
    readers: usize,
    inline_reads: bool,
    reader_mmap_size: u64,
    serializer: Arc<dyn Serializer>,
    fill_from_parent: bool,
}

impl std::fmt::Debug for SqliteSaverBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = match &self.target {
            // a path's query may carry a secret (`file:x.db?key=…`)
            Target::File(path) => crate::secret::redact(&path.to_string_lossy()),
            Target::Memory => ":memory:".to_owned(),
        };
        f.debug_struct("SqliteSaverBuilder")
            .field("path", &target)
            .field("busy_timeout", &self.busy_timeout)
            .field("synchronous", &self.synchronous)
            .field("readers", &self.readers)
            .field("inline_reads", &self.inline_reads)
            .field("reader_mmap_size", &self.reader_mmap_size)
            .field("serializer", &self.serializer)
            .field("fill_from_parent", &self.fill_from_parent)
            .finish()
    }
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
            fill_from_parent: true,
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
    /// take long. See the [module docs](super#where-reads-run).
    pub fn inline_reads(mut self, inline: bool) -> Self {
        self.inline_reads = inline;
        self
    }

    /// How many bytes of the file each reader connection maps into memory
    /// (SQLite's `mmap_size`, default 256 MiB; 0 turns it off). See the
    /// [module docs](super#memory-mapped-reads).
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
    /// Whether `put` copies in, from the parent, the value of a channel
    /// the checkpoint gives a version but no value and `new_versions` does
    /// not name (default `true`: a caller may pass only the values that
    /// changed, as with the savers that store values apart, and the row
    /// still holds every value so that Python reads it whole). With `false`
    /// the checkpoint is stored exactly as given, as Python's `SqliteSaver`
    /// stores it: what a drop-in for Python's saver (the
    /// `langgraph-checkpoint-rs` package) needs for byte-identical rows.
    ///
    /// ```
    /// # use checkpointer::sqlite::SqliteSaver;
    /// let builder = SqliteSaver::builder(":memory:").fill_from_parent(false);
    /// # let _ = builder;
    /// ```
    pub fn fill_from_parent(mut self, fill: bool) -> Self {
        self.fill_from_parent = fill;
        self
    }

    /// The sync variant of [`Self::open`], for code without an async
    /// runtime: opens the database, creating the file and the tables if
    /// needed and migrating a file an older Python saver created, then starts
    /// the writer thread, all on the calling thread. Blocks on file I/O: from
    /// async code use [`Self::open`].
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
                        inline_budget: super::pool::INLINE_BUDGET,
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
                recent: Recent::new(4096),
                readers,
                serde: self.serializer,
                fill_from_parent: self.fill_from_parent,
                schema,
                path: match self.target {
                    Target::File(p) => Some(p),
                    Target::Memory => None,
                },
            }),
        })
    }

    /// Opens the saver, ready to use: creates the file and the tables if
    /// needed, migrates a file an older Python saver created and starts the
    /// writer thread. The file I/O runs on a blocking thread (on the calling
    /// one outside a tokio runtime).
    ///
    /// # Errors
    /// [`Error::Storage`] when the file cannot be opened or is not a SQLite
    /// database, or the schema cannot be created.
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
        // the statement journal of a job's savepoint (see the writer) stays
        // in memory instead of spilling to a temporary file
        conn.execute_batch("PRAGMA temp_store = MEMORY").map_err(sql_error)?;
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
    register_functions(conn)
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
