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
//! Decoding the stored bytes into a [`CheckpointTuple`] happens on the
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

mod import;
mod pool;
mod queries;
mod recent;
mod schema;
mod writer;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use indexmap::IndexMap;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use self::pool::{ReadKind, ReaderPool, ReaderSettings};
use self::queries::{CheckpointRow, Cursor, ListQuery, StoredTuple, WriteRow};
use self::schema::SchemaInfo;
use self::writer::Writer;
use crate::checkpoint::{write_idx, ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple};
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::limits;
use crate::saver::{
    op_span, traced, Capabilities, CheckpointSaver, CheckpointStream, DeltaChannelHistory, ListOptions,
    ListThreadsOptions, PruneStrategy, ThreadInfo,
};
use crate::serde::{JsonPlusSerializer, Serializer, Value};
use crate::version::ChannelVersion;

/// How many rows one `list` page reads.
const LIST_PAGE: usize = 64;

/// The default of [`SqliteSaverBuilder::reader_mmap_size`].
const DEFAULT_READER_MMAP_SIZE: u64 = 256 << 20;

/// Turns a rusqlite error into the crate's storage error; busy and locked
/// databases are retryable.
pub(crate) fn sql_error(e: rusqlite::Error) -> Error {
    let retryable = matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    );
    Error::storage("sqlite", retryable, e)
}

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
            inner: Arc::new(Inner {
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
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
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
        self.inner.path.as_deref()
    }

    /// Counters of the writer thread.
    pub fn writer_stats(&self) -> WriterStats {
        let c = &self.inner.writer.counters;
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
        if let Some(pool) = &self.inner.readers {
            pool.close_idle();
        }
        let Some(handle) = self.inner.writer.close() else {
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

struct ListState {
    inner: Arc<Inner>,
    /// The query, or why it could not be built (reported as the only item).
    query: std::result::Result<ListQuery, Option<Error>>,
    cursor: Option<Cursor>,
    /// Rows read and not yet decoded.
    buffer: VecDeque<Result<StoredTuple>>,
    remaining: Option<usize>,
    exhausted: bool,
}

impl ListState {
    async fn next(mut self) -> Option<(Result<CheckpointTuple>, ListState)> {
        loop {
            if self.remaining == Some(0) {
                return None;
            }
            if let Some(item) = self.buffer.pop_front() {
                // one decode is one unit of work: a long listing yields
                tokio::task::coop::consume_budget().await;
                let item = item.and_then(|stored| stored.decode(self.inner.serde.as_ref()));
                if item.is_ok() {
                    self.remaining = self.remaining.map(|r| r - 1);
                }
                return Some((item, self));
            }
            if self.exhausted {
                return None;
            }
            let query = match &mut self.query {
                Ok(q) => q.clone(),
                Err(e) => {
                    self.exhausted = true;
                    let e = e.take()?;
                    return Some((Err(e), self));
                }
            };
            let page = self.remaining.map_or(LIST_PAGE, |r| r.min(LIST_PAGE));
            let cursor = self.cursor.take();
            let schema = self.inner.schema;
            // a filter across all threads reads every row's metadata
            let kind = if query.filter.is_some() && query.thread_id.is_none() {
                ReadKind::Scan
            } else {
                ReadKind::Lookup
            };
            let span = op_span(
                "list",
                query.thread_id.as_deref().unwrap_or(""),
                query.checkpoint_ns.as_deref().unwrap_or(""),
                query.checkpoint_id.as_deref(),
            );
            let fetched = traced(
                span,
                self.inner.read_as(kind, move |conn| {
                    queries::list_page(conn, schema, &query, cursor.as_ref(), page)
                }),
            )
            .await;
            match fetched {
                Ok((items, next)) => {
                    self.exhausted = next.is_none();
                    self.cursor = next;
                    self.buffer.extend(items);
                }
                Err(e) => {
                    self.exhausted = true;
                    return Some((Err(e), self));
                }
            }
        }
    }
}

#[async_trait]
impl CheckpointSaver for SqliteSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let span = op_span("get_tuple", &config.thread_id, config.ns(), config.checkpoint_id());
        let config = config.clone();
        let schema = self.inner.schema;
        traced(span, async {
            let stored = self
                .inner
                .read(move |conn| queries::get_tuple(conn, schema, &config))
                .await?;
            stored.map(|s| s.decode(self.inner.serde.as_ref())).transpose()
        })
        .await
    }

    /// Lists newest first, one page of rows at a time (keyset pagination on
    /// (checkpoint id, thread, namespace), so a page costs the same at any
    /// depth). A row that cannot be decoded is yielded as an error and the
    /// stream goes on with the next one.
    fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> CheckpointStream<'_> {
        let filter = if options.filter.is_empty() {
            Ok(None)
        } else {
            limits::check_filter(&options.filter).and_then(|()| queries::encode_filter(&options.filter).map(Some))
        };
        let query = filter.map_err(Some).map(|filter| ListQuery {
            thread_id: config.as_ref().map(|c| c.thread_id.clone()),
            checkpoint_ns: config.as_ref().and_then(|c| c.checkpoint_ns.clone()),
            checkpoint_id: config.as_ref().and_then(|c| c.checkpoint_id().map(str::to_owned)),
            before: options.before.clone(),
            filter,
        });
        let state = ListState {
            inner: self.inner.clone(),
            query,
            cursor: None,
            buffer: VecDeque::new(),
            remaining: options.limit,
            exhausted: false,
        };
        futures::stream::unfold(state, ListState::next).boxed()
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let span = op_span("put", &config.thread_id, config.ns(), Some(&checkpoint.id));
        traced(span, async {
            limits::check_put(checkpoint, metadata)?;
            // SQLite stores the whole checkpoint, values inline: every value in
            // `channel_values` is kept whatever `new_versions` says. A channel
            // this put did not write and gave no value keeps the value stored
            // at its version by the parent, copied in so that Python reads it
            // too.
            let mut missing: Vec<(String, ChannelVersion)> = checkpoint
                .channel_versions
                .iter()
                .filter(|(ch, _)| !checkpoint.channel_values.contains_key(*ch) && !new_versions.contains_key(*ch))
                .map(|(ch, v)| (ch.clone(), v.clone()))
                .collect();
            if let (false, Some(parent)) = (missing.is_empty(), config.checkpoint_id()) {
                // a parent this saver stored recently tells without a read
                // whether it holds any of them
                if let Some(shape) = self.inner.recent.get(&config.thread_id, config.ns(), parent) {
                    missing.retain(|(ch, v)| shape.get(ch).is_some_and(|(pv, stored)| *stored && pv == v));
                }
            }
            let mut filled = None;
            if let (false, Some(parent)) = (missing.is_empty(), config.checkpoint_id()) {
                let (serde, thread, ns, parent) = (
                    self.inner.serde.clone(),
                    config.thread_id.clone(),
                    config.ns().to_owned(),
                    parent.to_owned(),
                );
                let found = self
                    .inner
                    .read(move |conn| {
                        queries::values_at_versions(conn, serde.as_ref(), &thread, &ns, &parent, &missing)
                    })
                    .await?;
                if !found.is_empty() {
                    let mut cp = checkpoint.clone();
                    cp.channel_values.extend(found);
                    filled = Some(cp);
                }
            }
            let checkpoint = filled.as_ref().unwrap_or(checkpoint);
            let typed = self.inner.serde.dumps_typed(&checkpoint.to_value(true))?;
            let row = CheckpointRow {
                thread_id: config.thread_id.clone(),
                checkpoint_ns: config.ns().to_owned(),
                checkpoint_id: checkpoint.id.clone(),
                parent_checkpoint_id: config.checkpoint_id().map(str::to_owned),
                tag: typed.tag,
                checkpoint: typed.data.to_vec(),
                metadata: metadata.to_python_json()?.into_bytes(),
            };
            self.inner
                .writer
                .write(move |conn| queries::put_checkpoint(conn, &row))
                .await?;
            self.inner.recent.remember(&config.thread_id, config.ns(), checkpoint);
            Ok(CheckpointConfig::new(config.thread_id.clone())
                .with_ns(config.ns())
                .with_checkpoint_id(checkpoint.id.clone()))
        })
        .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let span = op_span("put_writes", &config.thread_id, config.ns(), config.checkpoint_id());
        traced(span, async {
            let checkpoint_id = limits::check_put_writes(config, writes)?.to_owned();
            let rows = writes
                .iter()
                .enumerate()
                .map(|(i, (channel, value))| {
                    let typed = self.inner.serde.dumps_typed(value)?;
                    Ok(WriteRow {
                        task_id: task_id.to_owned(),
                        task_path: task_path.to_owned(),
                        idx: write_idx(channel, i),
                        channel: channel.clone(),
                        tag: typed.tag,
                        value: typed.data.to_vec(),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            if rows.is_empty() {
                return Ok(());
            }
            let thread_id = config.thread_id.clone();
            let ns = config.ns().to_owned();
            self.inner
                .writer
                .write(move |conn| queries::put_writes(conn, &thread_id, &ns, &checkpoint_id, &rows))
                .await
        })
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let span = op_span("delete_thread", thread_id, "", None);
        let thread_id = thread_id.to_owned();
        traced(
            span,
            self.inner
                .writer
                .write(move |conn| queries::delete_thread(conn, &thread_id)),
        )
        .await
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::all()
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        let span = op_span("delete_for_runs", "", "", None);
        if run_ids.is_empty() {
            return Ok(());
        }
        let run_ids = run_ids.to_vec();
        traced(
            span,
            self.inner
                .writer
                .write(move |conn| queries::delete_for_runs(conn, &run_ids)),
        )
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let span = op_span("copy_thread", source, "", None);
        let (source, target) = (source.to_owned(), target.to_owned());
        traced(
            span,
            self.inner
                .writer
                .write(move |conn| queries::copy_thread(conn, &source, &target)),
        )
        .await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let span = op_span("prune", thread_ids.first().map_or("", String::as_str), "", None);
        if thread_ids.is_empty() {
            return Ok(());
        }
        let thread_ids = thread_ids.to_vec();
        let serde = self.inner.serde.clone();
        traced(
            span,
            self.inner
                .writer
                .write(move |conn| queries::prune(conn, serde.as_ref(), &thread_ids, strategy)),
        )
        .await
    }

    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<IndexMap<String, DeltaChannelHistory>> {
        let span = op_span(
            "get_delta_channel_history",
            &config.thread_id,
            config.ns(),
            config.checkpoint_id(),
        );
        if channels.is_empty() {
            return Ok(IndexMap::new());
        }
        let config = config.clone();
        let channels = channels.to_vec();
        let serde = self.inner.serde.clone();
        let schema = self.inner.schema;
        traced(
            span,
            self.inner
                .read(move |conn| queries::delta_channel_history(conn, serde.as_ref(), schema, &config, &channels)),
        )
        .await
    }

    async fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
        let span = op_span("list_threads", options.after.as_deref().unwrap_or(""), "", None);
        traced(span, async move {
            limits::check_filter(&options.filter)?;
            self.inner.read(move |conn| queries::list_threads(conn, &options)).await
        })
        .await
    }
}
