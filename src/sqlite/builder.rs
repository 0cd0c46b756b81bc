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
use crate::setters::setters;

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
    read_only: bool,
    extra_indexes: bool,
    retention: crate::engine::retain::RetentionSchedule,
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
            read_only: false,
            extra_indexes: true,
            retention: crate::engine::retain::RetentionSchedule::default(),
        }
    }

    setters! {
        /// How long to wait for another connection or process holding the write
        /// lock before failing with a retryable error (default 10 s).
        pub fn busy_timeout(timeout: Duration) => busy_timeout = timeout;
    }

    /// The busy timeout this builder sets.
    pub(crate) fn busy_timeout_value(&self) -> Duration {
        self.busy_timeout
    }

    setters! {
        /// The `synchronous` level of the writer (default [`Synchronous::Full`]).
        pub fn synchronous(level: Synchronous) => synchronous = level;

        /// How many reads may run at once, each on its own connection (default 4,
        /// at least 1). An in-memory database reads on the writer's connection.
        pub fn readers(count: usize) => readers = count.max(1);

        /// Whether reads run on the calling task when they need not wait on a
        /// lock (default `true`); `false` runs every read in
        /// `tokio::task::spawn_blocking`, for storage where reading a page can
        /// take long. See the [module docs](super#where-reads-run).
        pub fn inline_reads(inline: bool) => inline_reads = inline;

        /// How many bytes of the file each reader connection maps into memory
        /// (SQLite's `mmap_size`, default 256 MiB; 0 turns it off). See the
        /// [module docs](super#memory-mapped-reads).
        pub fn reader_mmap_size(bytes: u64) => reader_mmap_size = bytes;

        /// The serializer for checkpoints and writes (default
        /// [`JsonPlusSerializer`], which Python's saver uses).
        pub fn serializer(serializer: Arc<dyn Serializer>) => serializer = serializer;

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
        pub fn fill_from_parent(fill: bool) => fill_from_parent = fill;

        /// Whether to open the file read-only (default `false`). A read-only open
        /// changes nothing in the file or its schema: no table, index or
        /// migration, no switch to WAL mode; the file must exist and hold
        /// Python's two tables. Every read works (on a file without this crate's
        /// indexes too, as fast as the primary key allows), and every write
        /// (`put`, `put_writes`, `delete_thread`, `delete_for_runs`,
        /// `copy_thread`, `prune`, `import_thread`) is refused with
        /// [`Error::Unsupported`], whatever its arguments.
        ///
        /// The file is opened with `SQLITE_OPEN_READONLY` (URI `mode=ro`). A
        /// WAL-mode file whose `-wal` and `-shm` are absent needs them created
        /// to be read; where the directory is not writable (a read-only mount, a
        /// `chmod 555` directory) SQLite refuses, and the file is then opened
        /// `immutable=1` instead, which is exact as long as no other process
        /// writes it meanwhile (none can without creating the `-wal` there). A
        /// `-wal` that exists and is not empty is never skipped: if its `-shm`
        /// cannot be created either, the open fails. In a writable directory
        /// SQLite may leave an empty `-wal` and a `-shm` next to a WAL-mode file
        /// (the file itself is not written).
        ///
        /// ```
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() -> checkpointer::Result<()> {
        /// use checkpointer::prelude::*;
        /// use checkpointer::sqlite::SqliteSaver;
        /// let dir = tempfile::tempdir().unwrap();
        /// let path = dir.path().join("checkpoints.sqlite");
        /// SqliteSaver::open(&path).await?.close().await?;
        /// let reader = SqliteSaver::builder(&path).read_only(true).open().await?;
        /// assert!(reader.latest("t").await?.is_none());
        /// let err = reader.delete_thread("t").await.unwrap_err();
        /// assert!(matches!(err, Error::Unsupported { .. }));
        /// # Ok(())
        /// # }
        /// ```
        pub fn read_only(read_only: bool) => read_only = read_only;

        /// Whether a writable open adds this crate's two indexes on
        /// `checkpoints` when missing (default `true`):
        /// `checkpointer_checkpoints_thread_idx (thread_id, checkpoint_id,
        /// checkpoint_ns)` and `checkpointer_checkpoints_id_idx (checkpoint_id,
        /// thread_id, checkpoint_ns)`. They let `list` across a thread's
        /// namespaces, `list` across threads and `list_threads` page without
        /// sorting; without them (`false`) every operation returns the same
        /// rows, and those listings sort the matching rows for each page
        /// instead. Indexes already in the file are left in place.
        pub fn extra_indexes(add: bool) => extra_indexes = add;
    }

    /// The sync variant of [`Self::open`], for code without an async
    /// runtime: opens the database, creating the file and the tables if
    /// needed and migrating a file an older Python saver created, then starts
    /// the writer thread, all on the calling thread. Blocks on file I/O: from
    /// async code use [`Self::open`].
    ///
    /// # Errors
    /// [`Error::Storage`] when the file cannot be opened or is not a SQLite
    /// database, or the schema cannot be created (with
    /// [`read_only`](Self::read_only): when the file is missing or lacks
    /// Python's tables); [`Error::InvalidInput`] for a read-only
    /// `":memory:"` database.
    pub fn build(self) -> Result<SqliteSaver> {
        let (conn, reader_path) = match (&self.target, self.read_only) {
            (Target::Memory, true) => {
                return Err(Error::invalid(
                    "a read-only SqliteSaver needs a file: \":memory:\" would always be empty",
                ))
            }
            (Target::File(path), true) => {
                let uri = read_only_uri(path, self.busy_timeout)?;
                (self.connect_read_only(&uri)?, Some(PathBuf::from(uri)))
            }
            (Target::File(path), false) => (self.connect()?, Some(path.clone())),
            (Target::Memory, false) => (self.connect()?, None),
        };
        let schema = if self.read_only {
            schema::inspect(&conn)?
        } else {
            schema::setup(&conn, self.extra_indexes)?
        };
        // a file the process may not write (opened read-write, SQLite falls
        // back to read-only) refuses writes as a read-only open does
        let read_only = self.read_only || conn.is_readonly(rusqlite::MAIN_DB).map_err(sql_error)?;
        let writer = Writer::start(conn, read_only)?;
        let readers = match reader_path {
            Some(path) => {
                let pool = ReaderPool::new(
                    path,
                    ReaderSettings {
                        busy_timeout: self.busy_timeout,
                        mmap_size: self.reader_mmap_size,
                        inline: self.inline_reads,
                        inline_budget: super::pool::INLINE_BUDGET,
                        read_only: self.read_only,
                    },
                    self.readers,
                );
                pool.warm_up();
                Some(Arc::new(pool))
            }
            None => None,
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
    pub async fn open(mut self) -> Result<SqliteSaver> {
        let retention = std::mem::take(&mut self.retention);
        retention.check()?;
        let saver = match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle
                .spawn_blocking(move || self.build())
                .await
                .map_err(|e| Error::storage("sqlite", false, e))??,
            Err(_) => self.build()?,
        };
        retention.start(&saver.engine)?;
        Ok(saver)
    }

    crate::engine::retain::retention_option!();

    /// The connection of a read-only open: no pragma that writes.
    fn connect_read_only(&self, uri: &str) -> Result<Connection> {
        connect_read_only(uri, self.busy_timeout)
    }

    fn connect(&self) -> Result<Connection> {
        let path = match &self.target {
            Target::Memory => None,
            Target::File(path) => Some(path.as_path()),
        };
        connect_writer(path, self.busy_timeout, self.synchronous)
    }
}

/// Opens the writing connection of a database file (`None`: a private
/// in-memory database): WAL mode (a read-only file keeps its journal mode),
/// `synchronous`, the crate's SQL functions. Shared by the saver and the
/// store (feature `store`).
pub(crate) fn connect_writer(
    path: Option<&Path>,
    busy_timeout: Duration,
    synchronous: Synchronous,
) -> Result<Connection> {
    let conn = match path {
        None => Connection::open_in_memory().map_err(sql_error)?,
        Some(path) => Connection::open_with_flags(path, open_flags()).map_err(sql_error)?,
    };
    configure(&conn, busy_timeout)?;
    // a new database (no page yet: no table) gets incremental auto-vacuum,
    // which only an empty one can take without a `VACUUM`, and before WAL
    // mode writes its first page: deletes' free pages can then be given
    // back in steps (`crate::space`)
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .map_err(sql_error)?;
    if pages == 0 && !conn.is_readonly(rusqlite::MAIN_DB).map_err(sql_error)? {
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL")
            .map_err(sql_error)?;
    }
    if path.is_some() {
        // WAL lets readers run beside the writer; a read-only file keeps
        // its journal mode.
        let mode: rusqlite::Result<String> = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0));
        if let Err(e) = mode {
            if e.sqlite_error_code() != Some(ErrorCode::ReadOnly) {
                return Err(sql_error(e));
            }
        }
    }
    conn.execute_batch(synchronous.pragma()).map_err(sql_error)?;
    // the statement journal of a job's savepoint (see the writer) stays
    // in memory instead of spilling to a temporary file
    conn.execute_batch("PRAGMA temp_store = MEMORY").map_err(sql_error)?;
    Ok(conn)
}

/// The connection of a read-only open of the URI of [`read_only_uri`]: no
/// pragma that writes, `query_only` on. Shared by the saver and the store.
pub(crate) fn connect_read_only(uri: &str, busy_timeout: Duration) -> Result<Connection> {
    let conn = Connection::open_with_flags(uri, read_only_flags()).map_err(sql_error)?;
    configure(&conn, busy_timeout)?;
    conn.execute_batch("PRAGMA query_only = ON").map_err(sql_error)?;
    Ok(conn)
}

fn open_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

fn read_only_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

/// The URI a read-only open uses for `path` (see
/// [`SqliteSaverBuilder::read_only`]): `file:/ABS/PATH?mode=ro`, with
/// `&immutable=1` when SQLite cannot read the file otherwise because it is
/// in WAL mode, its `-wal` is absent or empty and the `-shm` cannot be
/// created (a directory the process may not write). Checked by opening it,
/// waiting up to `busy_timeout` for a writer's lock.
pub(crate) fn read_only_uri(path: &Path, busy_timeout: Duration) -> Result<String> {
    let abs = path
        .canonicalize()
        .map_err(|e| Error::storage("sqlite", false, format!("cannot open {}: {e}", path.display())))?;
    if abs.is_dir() {
        return Err(Error::storage(
            "sqlite",
            false,
            format!("{} is a directory, not a SQLite file", path.display()),
        ));
    }
    let mut uri = String::from("file:");
    for &b in abs.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~') {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?mode=ro");
    let probe = |uri: &str| -> rusqlite::Result<()> {
        let conn = Connection::open_with_flags(uri, read_only_flags())?;
        conn.busy_timeout(busy_timeout)?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))
            .map(drop)
    };
    let Err(e) = probe(&uri) else {
        return Ok(uri);
    };
    let mut wal = abs.as_os_str().to_owned();
    wal.push("-wal");
    let wal_empty = match std::fs::metadata(&wal) {
        Ok(meta) => meta.len() == 0,
        Err(err) => err.kind() == std::io::ErrorKind::NotFound,
    };
    let cannot_init_wal = matches!(e.sqlite_error_code(), Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen));
    if cannot_init_wal && wal_empty && is_wal_mode(&abs) {
        let immutable = format!("{uri}&immutable=1");
        probe(&immutable).map_err(sql_error)?;
        return Ok(immutable);
    }
    Err(sql_error(e))
}

/// Whether the header of the file at `path` says WAL mode (bytes 18 and 19,
/// the read and write format versions, are 2).
fn is_wal_mode(path: &Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| header[18] == 2 && header[19] == 2)
}

/// Settings every connection of the saver gets.
fn configure(conn: &Connection, busy_timeout: Duration) -> Result<()> {
    conn.busy_timeout(busy_timeout).map_err(sql_error)?;
    conn.set_prepared_statement_cache_capacity(64);
    register_functions(conn)
}

/// Opens a reader connection to a database file (`path` is the URI
/// [`read_only_uri`] made when `read_only`).
pub(crate) fn open_reader(path: &Path, busy_timeout: Duration, mmap_size: u64, read_only: bool) -> Result<Connection> {
    let flags = if read_only { read_only_flags() } else { open_flags() };
    let conn = Connection::open_with_flags(path, flags).map_err(sql_error)?;
    configure(&conn, busy_timeout)?;
    conn.execute_batch("PRAGMA query_only = ON").map_err(sql_error)?;
    conn.execute_batch(&format!("PRAGMA mmap_size = {mmap_size}"))
        .map_err(sql_error)?;
    Ok(conn)
}
