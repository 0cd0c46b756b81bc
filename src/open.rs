//! `open(url)`, [`OpenOptions`] and the administrative face [`SaverAdmin`]
//! (the URL forms: [`OpenOptions`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::encoded::EncodedSaver;
use crate::fence::{Fence, Fenceable};
use crate::import::{ImportMode, ThreadImport};
use crate::secret::redact;
use crate::serde::Serializer;
use crate::setters::setters;
use crate::space::{ReclaimOptions, ReclaimReport, SpaceUsage};
use crate::{CheckpointSaver, Error, ListThreadsOptions, Result};

/// Opens the store behind `url` with the default [`OpenOptions`] (created
/// when missing), as a saver.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::prelude::*;
/// let saver = checkpointer::open("memory:").await?;
/// let stored = saver
///     .put(&CheckpointConfig::new("t"), &Checkpoint::new(0), &CheckpointMetadata::default(), &ChannelVersions::new())
///     .await?;
/// assert_eq!(saver.latest("t").await?.map(|t| t.config), Some(stored));
/// // a scheme whose feature is off, or unknown, is a typed error
/// assert!(matches!(checkpointer::open("mysql://db/x").await, Err(Error::InvalidInput { .. })));
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As [`OpenOptions::open`].
pub async fn open(url: &str) -> Result<Arc<dyn CheckpointSaver>> {
    Ok(OpenOptions::new().open(url).await?.saver())
}

/// How a URL becomes a store: [`open()`] gives its saver,
/// [`OpenOptions::open`] its [`SaverAdmin`] (what a tool does with a whole
/// store: set it up, close it, measure it, tell it apart from another,
/// import threads into it; the same calls on every backend).
///
/// | URL | store | feature |
/// |---|---|---|
/// | `memory:` (or `memory://`) | a fresh [`InMemorySaver`](crate::InMemorySaver) | always |
/// | `sqlite://relative/path.sqlite`, `sqlite:///absolute/path.sqlite` | a SQLite file in the tables of Python's `SqliteSaver` | `sqlite` |
/// | `postgres://…`, `postgresql://…`, or a `key=value` string (`host=… dbname=…`) | a PostgreSQL database in the tables of Python's `PostgresSaver` | `postgres` |
/// | `redis://[USER:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME]` | the keys of a `RedisSaver` under key prefix NAME (default `ckpt`) | `redis` |
/// | `rediss://…[?ca=PATH][&cert=PATH&key=PATH]` | the same over TLS: `ca` a PEM file of CA certificates to trust instead of the webpki roots, `cert` and `key` a client certificate and its key (mutual TLS) | `redis-tls` |
/// | `redis://HOST:7000,redis://HOST:7001,…[?prefix=NAME]` | a Redis Cluster, from the URLs of some of its nodes (each may carry the query; they must agree) | `redis` |
/// | `unix:///PATH/redis.sock[?db=N][&user=U][&pass=P][&prefix=NAME]` (or `redis+unix://…`) | a Redis server on a unix socket, as `redis://` | `redis` |
///
/// A SQLite path is the rest of the URL, as written: nothing in it is
/// decoded and there is no query, so `sqlite://` followed by any path (with
/// spaces, `?`, `#`, `%`, non-ASCII) names that file; `sqlite://:memory:` is
/// a private in-memory database. Redis query values are percent-decoded
/// (the key prefix is given only this way); `protocol` (and a unix socket's
/// `db`, `user` and `pass`) go on to the `redis` client, any other
/// parameter is refused. Every error and `Debug` shows the URL masked by
/// [`crate::secret`].
///
/// The options: [`read_only`](OpenOptions::read_only)
/// (a SQLite file is opened read-only and never touched, not even switched
/// to WAL mode; no PostgreSQL table and no Redis key is written),
/// [`create`](OpenOptions::create) (whether a missing store, file or tables
/// or Redis layout marker, is created; without it, and always when read-only,
/// a missing store is an error), and the settings of the saver:
///
/// | option | honoured by |
/// |---|---|
/// | [`serializer`](OpenOptions::serializer) | every store |
/// | [`fill_from_parent(false)`](OpenOptions::fill_from_parent) | SQLite, PostgreSQL |
/// | [`max_connections`](OpenOptions::max_connections) | PostgreSQL |
/// | [`lazy`](OpenOptions::lazy) | PostgreSQL, memory |
/// | [`ttl`](OpenOptions::ttl) | Redis |
/// | [`restore_journal(false)`](OpenOptions::restore_journal) | SQLite |
///
/// An option left as it is by default suits every store; one a store cannot
/// honour makes [`open`](OpenOptions::open) fail with
/// [`Error::InvalidInput`] instead of being ignored.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::{Error, OpenOptions, TtlConfig};
/// let ttl = OpenOptions::new().ttl(TtlConfig::minutes(60.0));
/// // memory keeps threads for ever
/// assert!(matches!(ttl.open("memory:").await, Err(Error::InvalidInput { .. })));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct OpenOptions {
    read_only: bool,
    create: bool,
    pub(crate) lazy: bool,
    pub(crate) serializer: Option<Arc<dyn Serializer>>,
    pub(crate) fill_from_parent: bool,
    pub(crate) max_connections: Option<usize>,
    pub(crate) ttl: Option<TtlConfig>,
    pub(crate) restore_journal: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            read_only: false,
            create: true,
            lazy: false,
            serializer: None,
            fill_from_parent: true,
            max_connections: None,
            ttl: None,
            restore_journal: true,
        }
    }
}

impl OpenOptions {
    /// Read-write, creating a missing store.
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// Reads only (default `false`): the store must exist; a SQLite file is
        /// opened read-only (never written, not even switched to WAL mode), no
        /// PostgreSQL table and no Redis key is created. Writes through the saver
        /// of a read-only SQLite file fail with [`Error::Unsupported`].
        pub fn read_only(read_only: bool) => read_only = read_only;

        /// Whether a missing store is created (default `true`; never when
        /// [`read_only`](Self::read_only)): a SQLite file and its tables (not
        /// its directory), PostgreSQL's tables, a Redis prefix's layout marker.
        pub fn create(create: bool) => create = create;

        /// Whether opening leaves the store unreached (default `false`): no
        /// connection is made and nothing is checked or created (whatever
        /// [`create`](Self::create) says); the first call connects, and
        /// [`SaverAdmin::setup`] creates or migrates the tables, as Python's
        /// `PostgresSaver` is used. Honoured by PostgreSQL (its pool connects
        /// when needed) and memory (nothing to reach); SQLite opens its file and
        /// Redis connects when opened.
        pub fn lazy(lazy: bool) => lazy = lazy;

        /// The serializer the saver stores values with (default LangGraph's
        /// `JsonPlusSerializer`; an [`EncryptedSerializer`](crate::serde) seals
        /// them). Honoured by every store.
        pub fn serializer(serializer: Arc<dyn Serializer>) => serializer = Some(serializer);

        /// Whether `put` fills in, from the parent, a value the checkpoint
        /// versions but does not carry (default `true`; `false` stores the
        /// checkpoint exactly as given, as Python's savers do: what a drop-in
        /// for them needs). `false` is honoured by the stores that keep values
        /// with each checkpoint, SQLite and PostgreSQL; memory and Redis keep
        /// each value once per version and read it from there.
        pub fn fill_from_parent(fill: bool) => fill_from_parent = fill;

        /// The most connections the saver opens at once (default: the
        /// backend's, 16 for PostgreSQL; opened when needed). Honoured by
        /// PostgreSQL, the store behind a connection pool.
        pub fn max_connections(n: usize) => max_connections = Some(n);

        /// How long threads live (default: for ever). Honoured by Redis, whose
        /// keys expire.
        pub fn ttl(ttl: TtlConfig) => ttl = Some(ttl);

        /// Whether [`SaverAdmin::close`] puts a SQLite file back in the journal
        /// mode it was found in (default `true`): the saver runs the file in WAL
        /// mode, and a file found, or created, in rollback-journal mode goes
        /// back to it, self-contained without its `-wal`. Switching out of WAL
        /// needs no other connection on the file (a new file's close fails
        /// otherwise), so a file other processes share wants `false`, which
        /// leaves it in WAL mode, as Python's `SqliteSaver` does. `false` is
        /// honoured by SQLite.
        pub fn restore_journal(restore: bool) => restore_journal = restore;
    }

    /// Whether a missing store is created.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres", feature = "redis")),
        allow(dead_code)
    )]
    pub(crate) fn creates(&self) -> bool {
        self.create && !self.read_only
    }

    /// Whether the store is opened read-only.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres", feature = "redis")),
        allow(dead_code)
    )]
    pub(crate) fn reads_only(&self) -> bool {
        self.read_only
    }

    /// Checks `url` as [`open`](Self::open) reads it, without opening
    /// anything: its scheme, form and parameters. Gives the backend it
    /// names, as [`SaverAdmin::backend`] will.
    ///
    /// ```
    /// use checkpointer::{Error, OpenOptions};
    /// let e = OpenOptions::check("data.sqlite").unwrap_err();
    /// assert!(e.to_string().contains("sqlite://data.sqlite"), "{e}");
    /// assert_eq!(OpenOptions::check("memory:")?, "memory");
    /// # Ok::<(), Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] as [`open`](Self::open) gives it for the URL.
    pub fn check(url: &str) -> Result<&'static str> {
        let scheme = scheme(url)?;
        match scheme {
            Scheme::Memory => {}
            #[cfg(feature = "sqlite")]
            Scheme::Sqlite => drop(crate::sqlite::admin::parse(url)?),
            #[cfg(feature = "postgres")]
            Scheme::Postgres => crate::postgres::admin::parse(url)?,
            #[cfg(feature = "redis")]
            Scheme::Redis => drop(crate::redis::admin::parse(url)?),
        }
        Ok(scheme.backend())
    }

    /// The first option set that the store of `backend` cannot honour, as
    /// an error.
    fn refuse_unhonoured(&self, url: &str, backend: &str) -> Result<()> {
        let asked: [(&str, bool, &[&str]); 5] = [
            (
                "fill_from_parent(false)",
                !self.fill_from_parent,
                &["sqlite", "postgres"],
            ),
            ("max_connections", self.max_connections.is_some(), &["postgres"]),
            ("lazy", self.lazy, &["postgres", "memory"]),
            ("ttl", self.ttl.is_some(), &["redis"]),
            ("restore_journal(false)", !self.restore_journal, &["sqlite"]),
        ];
        match asked.iter().find(|(_, set, by)| *set && !by.contains(&backend)) {
            Some((option, _, by)) => Err(Error::invalid(format!(
                "{} is a {backend} store, which cannot honour the open option {option} (only {} can)",
                redact(url),
                by.join(" and ")
            ))),
            None => Ok(()),
        }
    }

    /// Opens the store behind `url` (see [`OpenOptions`] for the
    /// forms) and hands back its administrative face; its
    /// [`saver`](SaverAdmin::saver) reads and writes checkpoints.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use checkpointer::{OpenOptions, SaverAdmin};
    /// let store = OpenOptions::new().open("memory:").await?;
    /// assert_eq!(store.backend(), "memory");
    /// assert!(store.is_empty().await?);
    /// store.close().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a URL of no known form, a malformed one,
    /// an unknown query parameter, a scheme whose feature this build lacks
    /// (the message names the feature), or an option its store cannot
    /// honour (see [`OpenOptions`]); [`Error::NotFound`] for a
    /// missing SQLite file (or, to create one, its directory) or an
    /// unreadable certificate file; [`Error::Storage`] when the store cannot
    /// be reached or opened, or, not creating it, has no checkpoint tables
    /// (Redis: no layout marker under the prefix). The URL's secrets never
    /// appear in them.
    pub async fn open(&self, url: &str) -> Result<Arc<dyn SaverAdmin>> {
        let scheme = scheme(url)?;
        self.refuse_unhonoured(url, scheme.backend())?;
        match scheme {
            Scheme::Memory => Ok(crate::memory::admin::open(self)),
            #[cfg(feature = "sqlite")]
            Scheme::Sqlite => crate::sqlite::admin::open(url, self).await,
            #[cfg(feature = "postgres")]
            Scheme::Postgres => crate::postgres::admin::open(url, self).await,
            #[cfg(feature = "redis")]
            Scheme::Redis => crate::redis::admin::open(url, self).await,
        }
    }
}

/// The backends this build has, by URL scheme.
pub(crate) enum Scheme {
    Memory,
    #[cfg(feature = "sqlite")]
    Sqlite,
    #[cfg(feature = "postgres")]
    Postgres,
    #[cfg(feature = "redis")]
    Redis,
}

impl Scheme {
    /// The backend, as [`SaverAdmin::backend`] names it.
    fn backend(&self) -> &'static str {
        match self {
            Scheme::Memory => "memory",
            #[cfg(feature = "sqlite")]
            Scheme::Sqlite => "sqlite",
            #[cfg(feature = "postgres")]
            Scheme::Postgres => "postgres",
            #[cfg(feature = "redis")]
            Scheme::Redis => "redis",
        }
    }
}

/// The URL forms, for messages.
const URL_FORMS: &str = "use sqlite://PATH (sqlite:///ABSOLUTE/PATH), postgres://USER@HOST:PORT/DB, \
                         redis://HOST:PORT/DB?prefix=NAME (rediss://…&ca=CA.pem for TLS) or memory:";

/// The backend of `url`, by its scheme; a scheme whose feature is off is
/// refused naming the feature.
pub(crate) fn scheme(url: &str) -> Result<Scheme> {
    // a scheme is letters, digits, `+`, `-` and `.` before the first `:`;
    // a libpq `key=value` string has none (`host=::1 password=a:b`)
    let lower = url
        .find(':')
        .and_then(|i| url.get(..=i))
        .filter(|s| {
            s.strip_suffix(':')
                .is_some_and(|name| name.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)))
        })
        .unwrap_or_default()
        .to_ascii_lowercase();
    match lower.as_str() {
        "memory:" if url == "memory:" || url == "memory://" => Ok(Scheme::Memory),
        "sqlite:" if url.starts_with("sqlite://") => {
            #[cfg(feature = "sqlite")]
            return Ok(Scheme::Sqlite);
            #[cfg(not(feature = "sqlite"))]
            return Err(feature_off(url, "sqlite", "SQLite"));
        }
        "postgres:" | "postgresql:" => postgres(url),
        // a libpq key=value string
        "" if url.contains('=') => postgres(url),
        // a unix socket: the `redis` client's two spellings
        "redis:" | "rediss:" | "unix:" | "redis+unix:" => {
            #[cfg(feature = "redis")]
            return Ok(Scheme::Redis);
            #[cfg(not(feature = "redis"))]
            return Err(feature_off(url, "redis", "Redis"));
        }
        _ => {
            let hint = if let Some(rest) = url.strip_prefix("sqlite:") {
                format!("write sqlite://{}", redact(rest))
            } else if std::path::Path::new(url)
                .extension()
                .is_some_and(|e| e == "sqlite" || e == "db")
            {
                format!("for a SQLite file, write sqlite://{}", redact(url))
            } else {
                URL_FORMS.to_owned()
            };
            Err(Error::invalid(format!("bad store URL {:?}: {hint}", redact(url))))
        }
    }
}

#[cfg_attr(feature = "postgres", allow(unused_variables))]
fn postgres(url: &str) -> Result<Scheme> {
    #[cfg(feature = "postgres")]
    return Ok(Scheme::Postgres);
    #[cfg(not(feature = "postgres"))]
    return Err(feature_off(url, "postgres", "PostgreSQL"));
}

/// A URL of a backend this build lacks.
#[cfg_attr(all(feature = "sqlite", feature = "postgres", feature = "redis"), allow(dead_code))]
fn feature_off(url: &str, feature: &str, what: &str) -> Error {
    Error::invalid(format!(
        "{} is a {what} URL: build checkpointer with the `{feature}` feature",
        redact(url)
    ))
}

/// `%XX` escapes decoded; `None` for a malformed escape or non-UTF-8.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = text.get(i.checked_add(1)?..i.checked_add(3)?)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i = i.checked_add(3)?;
        } else {
            out.push(b);
            i = i.checked_add(1)?;
        }
    }
    String::from_utf8(out).ok()
}

/// Time to live of threads (LangGraph's `TTLConfig`), for
/// [`OpenOptions::ttl`] and the Redis saver's builder: every key of a
/// thread gets one deadline, `default_ttl` after its last write (or read,
/// with `refresh_on_read`), so a thread expires whole.
///
/// ```
/// use std::time::Duration;
/// use checkpointer::TtlConfig;
/// // LangGraph's {"default_ttl": 60, "refresh_on_read": True}
/// let ttl = TtlConfig::minutes(60.0).refresh_on_read(true);
/// assert_eq!(ttl.default_ttl(), Duration::from_secs(3600));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlConfig {
    pub(crate) default_ttl: Duration,
    pub(crate) refresh_on_read: bool,
}

impl TtlConfig {
    /// Threads live `default_ttl` after their last write (at least 1 ms;
    /// Redis keeps deadlines in milliseconds). Reads do not renew it
    /// unless [`refresh_on_read`](Self::refresh_on_read).
    pub fn new(default_ttl: Duration) -> Self {
        TtlConfig {
            default_ttl: default_ttl.max(Duration::from_millis(1)),
            refresh_on_read: false,
        }
    }

    /// `default_ttl` in minutes, as LangGraph's `TTLConfig` gives it
    /// (fractions allowed; negative, NaN or infinite values are clamped to
    /// the nearest valid duration).
    pub fn minutes(default_ttl: f64) -> Self {
        let secs = (default_ttl * 60.0).clamp(0.0, 1e12);
        Self::new(Duration::from_secs_f64(if secs.is_nan() { 0.0 } else { secs }))
    }

    setters! {
        /// Whether reading a thread's checkpoints (`get_tuple`, `list`,
        /// `get_delta_channel_history`) renews its deadline too.
        pub fn refresh_on_read(yes: bool) => refresh_on_read = yes;
    }

    /// The time a thread lives after its last write.
    pub fn default_ttl(&self) -> Duration {
        self.default_ttl
    }

    /// Whether reads renew the deadline.
    pub fn refreshes_on_read(&self) -> bool {
        self.refresh_on_read
    }

    /// The TTL in milliseconds, as the scripts take it (at least 1).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn millis(&self) -> u64 {
        u64::try_from(self.default_ttl.as_millis()).unwrap_or(u64::MAX).max(1)
    }
}

/// How a backend lays out channel values: what a stored value costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueLayout {
    /// Every checkpoint holds all its values (SQLite, as Python's saver).
    Inline,
    /// A value is stored once per (namespace, channel, version)
    /// (PostgreSQL, Redis, memory).
    PerVersion,
}

/// What a store takes, from [`SaverAdmin::storage_size`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageSize {
    /// Bytes: on disk (a SQLite file and its WAL; PostgreSQL's tables with
    /// their indexes and TOAST) or in the server's memory (Redis).
    pub bytes: u64,
    /// Whether `bytes` are memory, not disk.
    pub in_memory: bool,
}

/// The administrative face of an open store: the same calls on every
/// backend, so a tool (the CLI, the Python package) names no backend type.
/// Object-safe: [`OpenOptions::open`] hands back an `Arc<dyn SaverAdmin>`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::prelude::*;
/// use checkpointer::{OpenOptions, SaverAdmin, ValueLayout};
/// let store = OpenOptions::new().open("memory:").await?;
/// store.setup().await?;
/// assert_eq!(store.layout(), ValueLayout::PerVersion);
/// assert_eq!(store.identity().await?, None); // memory is never shared
/// assert!(store.is_empty().await?);
/// let saver = store.saver(); // Arc<dyn CheckpointSaver>
/// saver
///     .put(&CheckpointConfig::new("t"), &Checkpoint::new(0), &CheckpointMetadata::default(), &ChannelVersions::new())
///     .await?;
/// assert!(!store.is_empty().await?);
/// store.close().await?;
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait SaverAdmin: Send + Sync + fmt::Debug {
    /// The saver that reads and writes the store's checkpoints.
    fn saver(&self) -> Arc<dyn CheckpointSaver>;

    /// The same saver's encoded face: checkpoints and writes as their
    /// serializer's bytes (see [`crate::encoded`]).
    fn encoded(&self) -> Arc<dyn EncodedSaver>;

    /// The backend: `"memory"`, `"sqlite"`, `"postgres"` or `"redis"`.
    fn backend(&self) -> &'static str;

    /// The store for messages: its URL, secrets masked.
    fn name(&self) -> String;

    /// A short name of the store: a SQLite file's name, else the backend
    /// (what `read_fixtures.py` calls a dump's source).
    fn source_name(&self) -> String {
        self.backend().to_owned()
    }

    /// How the backend lays out channel values.
    fn layout(&self) -> ValueLayout {
        ValueLayout::PerVersion
    }

    /// How [`import_thread`](Self::import_thread) replaces a thread, in
    /// words for messages (e.g. `"in one transaction"`).
    fn import_note(&self) -> &'static str;

    /// Creates or migrates what the store needs (PostgreSQL's tables, as
    /// Python's `setup()`); the others are ready when opened.
    ///
    /// # Errors
    /// [`Error::Storage`] when the store refuses.
    async fn setup(&self) -> Result<()> {
        Ok(())
    }

    /// What tells two open stores apart: the file (device and inode), the
    /// database (its name and oid, and when its server started), the Redis
    /// server (its run id, the database, the key prefix). `None` for a store
    /// that is never shared (memory). Equal identities: the same store.
    ///
    /// # Errors
    /// [`Error::Storage`] when the store cannot be asked.
    async fn identity(&self) -> Result<Option<String>>;

    /// What the store takes, `None` where it cannot tell (memory).
    ///
    /// # Errors
    /// [`Error::Storage`] when the store cannot be asked.
    async fn storage_size(&self) -> Result<Option<StorageSize>>;

    /// What the store takes, part by part (files, tables with their TOAST
    /// and indexes, key groups), and how much of it is free or dead: what
    /// [`reclaim_space`](Self::reclaim_space) could give back (see
    /// [`crate::space`]). `None` where the store cannot tell (memory).
    ///
    /// # Errors
    /// [`Error::Storage`] when the store cannot be asked.
    async fn space_usage(&self) -> Result<Option<SpaceUsage>> {
        Ok(self.storage_size().await?.map(|size| SpaceUsage::whole("store", size)))
    }

    /// Gives back the space deletes freed, in bounded steps beside live
    /// traffic, and reports the store's [`space_usage`](Self::space_usage)
    /// before and after (what each backend does: [`crate::space`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an option the store cannot honour
    /// ([`ReclaimOptions::rewrite`] outside SQLite); [`Error::Unsupported`]
    /// on a store opened read-only; [`Error::Storage`] when the store
    /// refuses.
    async fn reclaim_space(&self, options: ReclaimOptions) -> Result<ReclaimReport> {
        crate::space::refuse_rewrite(self.backend(), &options)?;
        Ok(ReclaimReport::nothing_done(self.backend(), self.space_usage().await?))
    }

    /// Whether the store holds no thread.
    ///
    /// # Errors
    /// [`Error::Storage`] when the store cannot be read.
    async fn is_empty(&self) -> Result<bool> {
        let page = self
            .saver()
            .list_threads(ListThreadsOptions {
                limit: Some(1),
                ..Default::default()
            })
            .await?;
        Ok(page.is_empty())
    }

    /// Writes a whole thread at once: the saver's own `import_thread` (see
    /// [`crate::import`]).
    ///
    /// # Errors
    /// As the saver's `import_thread`; [`Error::Unsupported`] for a store
    /// without it.
    async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()>;

    /// The store's saver fenced as `fence`'s writer (see [`crate::fence`]),
    /// in both faces: its encoded I/O and its lease operations. The store's
    /// own saver stays unfenced; the two share its connections, and
    /// [`close`](Self::close) closes both.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::time::Duration;
    /// use checkpointer::fence::Fence;
    /// use checkpointer::OpenOptions;
    /// let store = OpenOptions::new().open("memory:").await?;
    /// let (_encoded, lease) = store.fenced(Fence::new("worker-1", Duration::from_secs(30)))?;
    /// assert_eq!(lease.acquire("t").await?.writer, "worker-1");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As the saver's `fenced` ([`Error::InvalidInput`] for a bad fence);
    /// [`Error::Unsupported`] for a store that cannot fence.
    fn fenced(&self, fence: Fence) -> Result<(Arc<dyn EncodedSaver>, Arc<dyn Fenceable>)> {
        let _ = fence;
        Err(Error::Unsupported {
            operation: "fencing",
            implementer: self.backend(),
        })
    }

    /// Finishes queued writes and releases the store (a SQLite file's WAL is
    /// folded back into it). Later calls on the saver may fail.
    ///
    /// # Errors
    /// [`Error::Storage`] when queued writes cannot be finished.
    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// The [`SaverAdmin`] methods that name things, for an admin holding its
/// saver as `saver: Arc<_>` and its store's name as `name`: both faces of
/// the one saver, the backend `$backend`, the name, and `$import_note`.
macro_rules! admin_names {
    ($backend:literal, $import_note:literal) => {
        fn saver(&self) -> std::sync::Arc<dyn $crate::CheckpointSaver> {
            self.saver.clone()
        }

        fn encoded(&self) -> std::sync::Arc<dyn $crate::encoded::EncodedSaver> {
            self.saver.clone()
        }

        fn backend(&self) -> &'static str {
            $backend
        }

        fn name(&self) -> String {
            self.name.clone()
        }

        fn import_note(&self) -> &'static str {
            $import_note
        }

        fn fenced(
            &self,
            fence: $crate::fence::Fence,
        ) -> $crate::Result<(
            std::sync::Arc<dyn $crate::encoded::EncodedSaver>,
            std::sync::Arc<dyn $crate::fence::Fenceable>,
        )> {
            let saver = std::sync::Arc::new(self.saver.fenced(fence)?);
            Ok((saver.clone(), saver))
        }
    };
}
pub(crate) use admin_names;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_forms_are_refused_with_a_hint() {
        for (url, hint) in [
            ("", "memory:"),
            ("nope", "memory:"),
            ("mysql://u:SECRET@h/x", "memory:"),
            ("sqlite:x.db", "sqlite://x.db"),
            ("data.sqlite", "sqlite://data.sqlite"),
            ("memory:x", "memory:"),
        ] {
            let e = OpenOptions::check(url).unwrap_err();
            assert!(matches!(e, Error::InvalidInput { .. }), "{url}: {e:?}");
            assert!(e.to_string().contains(hint), "{url}: {e}");
            assert!(!e.to_string().contains("SECRET"), "{e}");
        }
    }

    #[test]
    fn a_scheme_whose_feature_is_off_names_the_feature() {
        for (url, feature, on) in [
            ("sqlite://x.sqlite", "sqlite", cfg!(feature = "sqlite")),
            ("postgres://u:SECRET@h/db", "postgres", cfg!(feature = "postgres")),
            ("host=h password=SECRET", "postgres", cfg!(feature = "postgres")),
            ("redis://:SECRET@h", "redis", cfg!(feature = "redis")),
            ("rediss://:SECRET@h", "redis", cfg!(feature = "redis")),
            ("unix:///run/redis.sock?pass=SECRET", "redis", cfg!(feature = "redis")),
            (
                "redis+unix:///run/redis.sock?pass=SECRET",
                "redis",
                cfg!(feature = "redis"),
            ),
        ] {
            if on {
                continue;
            }
            let e = OpenOptions::check(url).unwrap_err();
            assert!(matches!(e, Error::InvalidInput { .. }), "{url}: {e:?}");
            assert!(e.to_string().contains(&format!("`{feature}` feature")), "{e}");
            assert!(!format!("{e} {e:?}").contains("SECRET"), "{e}");
        }
        let e = feature_off("redis://:SECRET@h", "redis", "Redis").to_string();
        assert!(e.contains("`redis` feature") && !e.contains("SECRET"), "{e}");
    }

    #[test]
    fn a_unix_socket_url_is_redis() {
        for url in [
            "unix:///run/redis.sock",
            "UNIX:///run/redis.sock?db=1",
            "redis+unix:///run/redis.sock",
        ] {
            let found = scheme(url).map(|s| s.backend());
            if cfg!(feature = "redis") {
                assert_eq!(found.ok(), Some("redis"), "{url}");
            } else {
                assert!(found.unwrap_err().to_string().contains("`redis` feature"), "{url}");
            }
        }
    }

    #[test]
    fn a_key_value_string_with_colons_is_postgres() {
        for url in ["host=::1 dbname=x", "host=h password=a:b", "dbname=x options=-c:y"] {
            let found = scheme(url).map(|s| s.backend());
            if cfg!(feature = "postgres") {
                assert_eq!(found.ok(), Some("postgres"), "{url}");
            } else {
                assert!(found.unwrap_err().to_string().contains("`postgres` feature"), "{url}");
            }
        }
        assert!(scheme("a=b://x").is_ok() == cfg!(feature = "postgres"));
        assert!(scheme("c:\\x.sqlite").is_err());
    }

    #[tokio::test]
    async fn options_a_store_cannot_honour_are_refused() {
        let refused = |options: OpenOptions, needle: &'static str| async move {
            let e = options.open("memory:").await.unwrap_err();
            assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
            assert!(e.to_string().contains(needle), "{e}");
        };
        refused(OpenOptions::new().ttl(TtlConfig::minutes(1.0)), "ttl (only redis can)").await;
        refused(OpenOptions::new().max_connections(2), "max_connections").await;
        refused(OpenOptions::new().fill_from_parent(false), "sqlite and postgres").await;
        refused(OpenOptions::new().restore_journal(false), "restore_journal(false)").await;
        // the defaults, and what memory honours, open
        let options = OpenOptions::new()
            .fill_from_parent(true)
            .restore_journal(true)
            .lazy(true)
            .serializer(Arc::new(crate::serde::JsonPlusSerializer));
        assert_eq!(options.open("memory:").await.unwrap().backend(), "memory");
    }

    #[test]
    fn percent_escapes_decode_strictly() {
        assert_eq!(percent_decode("my%20app").as_deref(), Some("my app"));
        assert_eq!(percent_decode("a%2"), None);
        assert_eq!(percent_decode("a%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
    }
}
