//! Store URLs and the savers behind them.
//!
//! | URL | store |
//! |---|---|
//! | `sqlite://relative/path.sqlite`, `sqlite:///absolute/path.sqlite` | a SQLite file (Python's `SqliteSaver` tables) |
//! | `postgres://…`, `postgresql://…` | a PostgreSQL database (Python's `PostgresSaver` tables) |
//! | `redis://[USER:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME]`, `rediss://…[?ca=PATH][&cert=PATH&key=PATH]` | the keys of a `RedisSaver` under key prefix NAME (default `ckpt`); `rediss://` over TLS |
//! | `memory:` | an empty in-memory store (a dry-run target for `copy`) |
//!
//! Commands that only read open a SQLite file read-only (the file is never
//! touched, not even switched to WAL mode), never create PostgreSQL
//! tables and never write a Redis key (a Redis store must have its layout
//! marker `<prefix>:layout` already); only `copy` creates a store (file,
//! tables, marker) that is missing.
//!
//! The Redis key prefix is the `prefix` query parameter of the URL (each of
//! `copy`'s two stores has its own). A `rediss://` URL connects over TLS
//! (rustls), checking the server's certificate against the webpki roots
//! (Mozilla's list), or against the CA certificates of the PEM file given
//! as `ca=PATH` (a private CA); `cert=PATH&key=PATH` (PEM) present a client
//! certificate to a server that requires one (mutual TLS). Paths are
//! percent-decoded. The other query parameters go to the `redis` crate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkpointer::import::{ImportMode, ThreadImport};
use checkpointer::postgres::PostgresSaver;
use checkpointer::redis::RedisSaver;
use checkpointer::saver::ThreadKeys;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    CheckpointConfig, CheckpointSaver, CheckpointSaverExt, InMemorySaver, ListOptions, ListThreadsOptions,
};
use rusqlite::OpenFlags;

use checkpointer::secret::{redact, Secrets};

use crate::error::{CliError, CliResult, Context};

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL, as given.
    Postgres(String),
    /// A Redis server and a key prefix.
    Redis {
        /// The URL as given (with its `prefix` parameter), for messages.
        text: String,
        /// The URL for the `redis` crate (without `prefix`, `ca`, `cert`, `key`).
        url: String,
        /// The key prefix.
        prefix: String,
        /// The certificate files of a `rediss://` URL.
        tls: RedisTls,
    },
    /// A fresh in-memory store.
    Memory,
}

const URL_FORMS: &str = "use sqlite://PATH (sqlite:///ABSOLUTE/PATH), postgres://USER@HOST:PORT/DB, \
                         redis://HOST:PORT/DB?prefix=NAME (rediss://…&ca=CA.pem for TLS) or memory:";

/// The PEM files of a `rediss://` store URL (`ca=`, `cert=`, `key=`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisTls {
    /// CA certificates to trust instead of the webpki roots.
    pub ca: Option<PathBuf>,
    /// A client certificate (chain) and its private key, for mutual TLS.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl RedisTls {
    /// The files' contents for the `redis` crate, or `None` without files.
    ///
    /// # Errors
    /// Exit 3 for a file that cannot be read.
    fn read(&self) -> CliResult<Option<redis::TlsCertificates>> {
        if self.ca.is_none() && self.client.is_none() {
            return Ok(None);
        }
        let read = |path: &PathBuf, what: &str| {
            std::fs::read(path)
                .map_err(|e| CliError::not_found(format!("cannot read the {what} {}: {e}", path.display())))
        };
        let root_cert = self.ca.as_ref().map(|p| read(p, "CA file")).transpose()?;
        let client_tls = match &self.client {
            Some((cert, key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert, "client certificate")?,
                client_key: read(key, "client key")?,
            }),
            None => None,
        };
        Ok(Some(redis::TlsCertificates { client_tls, root_cert }))
    }
}

impl StoreUrl {
    /// Parses a store URL.
    ///
    /// # Errors
    /// Exit 2 for anything that is not one of the forms of the module docs.
    pub fn parse(text: &str) -> CliResult<StoreUrl> {
        if let Some(path) = text.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(CliError::usage(format!("bad store URL {text:?}: no file path")).with_hint(URL_FORMS));
            }
            return Ok(StoreUrl::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            // parsed here so a malformed URL is a usage error, before any connection
            checkpointer::postgres::parse_connection_string(text)
                .map_err(|e| CliError::usage(format!("bad PostgreSQL URL: {}", reason(e))))?;
            return Ok(StoreUrl::Postgres(text.to_owned()));
        }
        if text.starts_with("redis://") || text.starts_with("rediss://") {
            return parse_redis(text);
        }
        if text == "memory:" || text == "memory://" {
            return Ok(StoreUrl::Memory);
        }
        let hint = if text.starts_with("sqlite:") {
            format!("write sqlite://{}", redact(text.trim_start_matches("sqlite:")))
        } else if Path::new(text).extension().is_some_and(|e| e == "sqlite" || e == "db") {
            format!("for a SQLite file, write sqlite://{}", redact(text))
        } else {
            URL_FORMS.to_owned()
        };
        Err(CliError::usage(format!("bad store URL {:?}", redact(text))).with_hint(hint))
    }

    /// The URL for messages, its secrets masked.
    pub fn display(&self) -> String {
        match self {
            StoreUrl::Sqlite(p) => redact(&format!("sqlite://{}", p.display())),
            StoreUrl::Postgres(url) => redact(url),
            StoreUrl::Redis { text, .. } => redact(text),
            StoreUrl::Memory => "memory:".to_owned(),
        }
    }

    /// The dump's `"source"`, as `read_fixtures.py` names it: the file name,
    /// or `postgres`.
    pub fn source_name(&self) -> String {
        match self {
            StoreUrl::Sqlite(p) => p
                .file_name()
                .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned()),
            StoreUrl::Postgres(_) => "postgres".to_owned(),
            StoreUrl::Redis { .. } => "redis".to_owned(),
            StoreUrl::Memory => "memory".to_owned(),
        }
    }
}

/// The reason of a library error about a URL (its words only, which
/// already mask the URL's secrets).
fn reason(e: checkpointer::Error) -> String {
    match e {
        checkpointer::Error::InvalidInput { reason } => reason,
        other => other.to_string(),
    }
}

/// `redis://…[?prefix=NAME]`, `rediss://…[?ca=PATH&cert=PATH&key=PATH]`:
/// the prefix and the certificate files taken out of the query, the rest
/// checked by the `redis` crate (a usage error, before any connection).
fn parse_redis(text: &str) -> CliResult<StoreUrl> {
    let bad = |why: String| CliError::usage(format!("bad Redis URL {}: {why}", redact(text)));
    let (base, query) = text.split_once('?').unwrap_or((text, ""));
    let mut prefix = None;
    let (mut ca, mut cert, mut key) = (None, None, None);
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let path = |value: &str, name: &str| {
            percent_decode(value)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| bad(format!("bad {name} path")))
        };
        match pair.split_once('=') {
            Some(("prefix", value)) => prefix = Some(percent_decode(value).ok_or_else(|| bad("bad prefix".into()))?),
            Some(("ca", value)) => ca = Some(path(value, "ca")?),
            Some(("cert", value)) => cert = Some(path(value, "cert")?),
            Some(("key", value)) => key = Some(path(value, "key")?),
            _ => rest.push(pair),
        }
    }
    let client = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => {
            return Err(bad(
                "cert= and key= go together (a client certificate and its key)".into()
            ))
        }
    };
    let tls = RedisTls { ca, client };
    let is_tls = text.get(..9).is_some_and(|s| s.eq_ignore_ascii_case("rediss://"));
    if tls != RedisTls::default() && !is_tls {
        return Err(bad("ca=, cert= and key= are for TLS: write rediss://".into()));
    }
    let prefix = prefix.unwrap_or_else(|| checkpointer::redis::DEFAULT_KEY_PREFIX.to_owned());
    if prefix.is_empty() || prefix.contains(['{', '}']) {
        return Err(bad("the prefix must be non-empty, without `{` or `}`".into()));
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    // the library's checks: the form, no credential in the query
    if let Err(e) = checkpointer::redis::check_url(&url) {
        return Err(CliError::usage(reason(e)));
    }
    Ok(StoreUrl::Redis {
        text: text.to_owned(),
        url,
        prefix,
        tls,
    })
}

/// `%XX` escapes decoded; `None` for a malformed escape or non-UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// What a command does with a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only: a SQLite file is opened read-only; it must exist.
    Read,
    /// Changes existing data: the store must exist and have the tables.
    Write,
    /// The target of a copy: created (file, tables) when missing.
    Create,
}

/// How a backend lays out channel values, for `stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every checkpoint holds all its values (SQLite).
    Inline,
    /// A value is stored once per (namespace, channel, version) (PostgreSQL,
    /// memory).
    PerVersion,
}

// One `Backend` per process: the size of its largest variant costs nothing,
// and boxing it would only add an indirection to every call.
#[allow(clippy::large_enum_variant)]
enum Backend {
    Sqlite {
        saver: Arc<SqliteSaver>,
        path: PathBuf,
        /// The journal mode to leave the file in after the saver (which
        /// switches it to WAL) closes it, and whether that must succeed.
        journal_after: Option<(String, bool)>,
    },
    Postgres(PostgresSaver),
    Redis {
        saver: RedisSaver,
        /// A plain connection, for what the saver's API does not tell
        /// (server identity, memory usage).
        conn: redis::aio::MultiplexedConnection,
        /// The database number of the URL.
        db: i64,
    },
    Memory,
}

/// An open store.
pub struct Store {
    pub url: StoreUrl,
    pub saver: Arc<dyn CheckpointSaver>,
    backend: Backend,
}

impl Store {
    /// Opens the store behind `url`.
    ///
    /// # Errors
    /// Exit 3 for a missing SQLite file (or the directory of a copy target),
    /// exit 4 when the store cannot be opened or reached or has no
    /// checkpoint tables (a Redis prefix: no layout marker).
    pub async fn open(url: &StoreUrl, access: Access) -> CliResult<Store> {
        let name = url.display();
        match url {
            StoreUrl::Sqlite(path) => open_sqlite(url, path, access).await,
            StoreUrl::Postgres(text) => {
                let saver = PostgresSaver::builder()
                    .url(text.clone())
                    .max_connections(4)
                    .build()
                    .map_err(|e| CliError::usage(format!("bad PostgreSQL URL {name}: {e}")))?;
                if access == Access::Create {
                    saver
                        .setup()
                        .await
                        .context(format!("cannot set up {name}"))
                        .map_err(tls_hint)?;
                } else {
                    let version = saver
                        .migration_version()
                        .await
                        .context(format!("cannot read {name}"))
                        .map_err(tls_hint)?;
                    if version.is_none() {
                        return Err(CliError::store(format!("{name} has no checkpoint tables"))
                            .with_hint("it was never set up by LangGraph's PostgresSaver or checkpointer"));
                    }
                }
                Ok(Store {
                    url: url.clone(),
                    saver: Arc::new(saver.clone()),
                    backend: Backend::Postgres(saver),
                })
            }
            StoreUrl::Redis {
                text,
                url: plain,
                prefix,
                tls,
            } => open_redis(url, text, plain, prefix, tls, access).await,
            StoreUrl::Memory => Ok(Store {
                url: url.clone(),
                saver: Arc::new(InMemorySaver::new()),
                backend: Backend::Memory,
            }),
        }
    }

    /// The URL for messages.
    pub fn name(&self) -> String {
        self.url.display()
    }

    /// What tells two open stores apart: the file (device and inode), or the
    /// database (its name and oid, and when its server started). `None` for
    /// memory, which is never shared.
    pub async fn identity(&self) -> CliResult<Option<String>> {
        match &self.backend {
            Backend::Sqlite { path, .. } => {
                let meta = std::fs::metadata(path).map_err(|e| CliError::store(format!("{}: {e}", path.display())))?;
                #[cfg(unix)]
                {
                    use std::os::unix::fs::MetadataExt;
                    Ok(Some(format!("file {}:{}", meta.dev(), meta.ino())))
                }
                #[cfg(not(unix))]
                {
                    let _ = meta;
                    let abs = path
                        .canonicalize()
                        .map_err(|e| CliError::store(format!("{}: {e}", path.display())))?;
                    Ok(Some(format!("file {}", abs.display())))
                }
            }
            Backend::Postgres(saver) => {
                let what = |e: String| CliError::store(format!("cannot read {}: {e}", self.name()));
                let client = saver
                    .pool()
                    .get()
                    .await
                    .map_err(|e| what(checkpointer::postgres::error_message(&e)))?;
                let row = client
                    .query_one(
                        "SELECT d.datname || ' ' || d.oid::text || ' ' || pg_postmaster_start_time()::text \
                         FROM pg_database d WHERE d.datname = current_database()",
                        &[],
                    )
                    .await
                    .map_err(|e| what(checkpointer::postgres::error_message(&e)))?;
                Ok(Some(format!(
                    "postgres {}",
                    row.try_get::<_, String>(0)
                        .map_err(|e| what(checkpointer::postgres::error_message(&e)))?
                )))
            }
            Backend::Redis { saver, conn, db } => {
                let mut conn = conn.clone();
                let info: String = redis::cmd("INFO")
                    .arg("server")
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| CliError::store(format!("cannot read {}: {}", self.name(), scrub_store(self, &e))))?;
                let run_id = info
                    .lines()
                    .find_map(|l| l.strip_prefix("run_id:"))
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                Ok(Some(format!("redis {run_id} db {db} prefix {}", saver.key_prefix())))
            }
            Backend::Memory => Ok(None),
        }
    }

    /// How the backend stores values.
    pub fn layout(&self) -> Layout {
        match self.backend {
            Backend::Sqlite { .. } => Layout::Inline,
            _ => Layout::PerVersion,
        }
    }

    /// Waits for queued writes and closes the store (a SQLite file's WAL is
    /// folded back into it).
    ///
    /// # Errors
    /// Exit 4 when the writes cannot be finished.
    pub async fn close(self) -> CliResult<()> {
        let name = self.name();
        drop(self.saver);
        if let Backend::Sqlite {
            saver,
            journal_after,
            path,
        } = self.backend
        {
            saver.close().await.context(format!("cannot close {name}"))?;
            if let Some((mode, required)) = journal_after {
                // the WAL is folded in already; with a rollback journal the
                // file is self-contained again and readers need no -wal/-shm
                let set = rusqlite::Connection::open(&path).and_then(|conn| {
                    conn.query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| r.get::<_, String>(0))
                });
                if let Err(e) = set {
                    if required {
                        return Err(CliError::store(format!("cannot finish {name}: {e}")));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every thread id, in order.
    ///
    /// # Errors
    /// Exit 4 on storage failures.
    pub async fn thread_ids(&self) -> CliResult<Vec<String>> {
        const PAGE: usize = 500;
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .saver
                .list_threads(ListThreadsOptions {
                    filter: Default::default(),
                    after: after.clone(),
                    limit: Some(PAGE),
                })
                .await
                .context(format!("cannot list the threads of {}", self.name()))?;
            let n = page.len();
            after = page.last().map(|t| t.thread_id.clone());
            out.extend(page.into_iter().map(|t| t.thread_id));
            if n < PAGE {
                return Ok(out);
            }
        }
    }

    /// Whether the thread has a checkpoint in any namespace.
    ///
    /// # Errors
    /// Exit 4 on storage failures.
    pub async fn thread_exists(&self, thread_id: &str) -> CliResult<bool> {
        let found = self
            .saver
            .list_vec(
                Some(CheckpointConfig::all_namespaces(thread_id)),
                ListOptions::default().limit(1),
            )
            .await
            .context(format!("cannot read thread {thread_id:?} of {}", self.name()))?;
        Ok(!found.is_empty())
    }

    /// Fails with exit 3 unless every thread exists.
    ///
    /// # Errors
    /// Exit 3 naming the missing threads; exit 4 on storage failures.
    pub async fn require_threads(&self, threads: &[String]) -> CliResult<()> {
        let mut missing = Vec::new();
        for t in threads {
            if !self.thread_exists(t).await? {
                missing.push(format!("{t:?}"));
            }
        }
        match missing.len() {
            0 => Ok(()),
            1 => Err(CliError::not_found(format!(
                "no thread {} in {}",
                missing[0],
                self.name()
            ))),
            _ => Err(CliError::not_found(format!(
                "no threads {} in {}",
                missing.join(", "),
                self.name()
            ))),
        }
    }

    /// The keys of every checkpoint and write of a thread, read without
    /// decoding anything (so an undecodable row is still named).
    ///
    /// # Errors
    /// Exit 4 on storage failures.
    pub async fn thread_keys(&self, thread_id: &str) -> CliResult<ThreadKeys> {
        self.saver
            .thread_keys(thread_id)
            .await
            .context(format!("cannot read thread {thread_id:?} of {}", self.name()))
    }

    /// The namespaces of a thread with their checkpoint counts, by name.
    ///
    /// # Errors
    /// Exit 4 on storage failures.
    pub async fn thread_namespaces(&self, thread_id: &str) -> CliResult<Vec<(String, u64)>> {
        let keys = self.thread_keys(thread_id).await?;
        Ok(keys
            .namespaces()
            .into_iter()
            .map(|(ns, n)| (ns.to_owned(), n as u64))
            .collect())
    }

    /// Every checkpoint of a thread that cannot be read, named with its
    /// namespace and id and the reason: what to say when reading the thread
    /// failed. Empty when every row reads (or the backend cannot tell).
    pub async fn bad_rows(&self, thread_id: &str) -> Vec<String> {
        let Ok(keys) = self.thread_keys(thread_id).await else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for key in keys.checkpoints {
            let (ns, id) = (key.checkpoint_ns, key.checkpoint_id);
            let config = CheckpointConfig::new(thread_id)
                .with_ns(ns.clone())
                .with_checkpoint_id(id.clone());
            if let Err(e) = self.saver.get_tuple(&config).await {
                let place = if ns.is_empty() {
                    format!("thread {thread_id:?}, checkpoint {id}")
                } else {
                    format!("thread {thread_id:?}, namespace {ns:?}, checkpoint {id}")
                };
                out.push(format!("{place}: cannot be read: {e}"));
            }
        }
        out
    }

    /// Writes a whole thread at once (see the savers' `import_thread`: a
    /// transaction on SQLite and PostgreSQL, staged keys swapped in by one
    /// script on Redis), or `None` for a store without them (memory).
    pub async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Option<checkpointer::Result<()>> {
        match &self.backend {
            Backend::Sqlite { saver, .. } => Some(saver.import_thread(thread, mode).await),
            Backend::Postgres(saver) => Some(saver.import_thread(thread, mode).await),
            Backend::Redis { saver, .. } => Some(saver.import_thread(thread, mode).await),
            Backend::Memory => None,
        }
    }

    /// Whether the store keeps its data in memory (Redis, memory): what
    /// [`Store::disk_bytes`] measures then.
    pub fn in_memory(&self) -> bool {
        matches!(self.backend, Backend::Redis { .. } | Backend::Memory)
    }

    /// Bytes the store takes on disk: the SQLite file (and its WAL), the
    /// PostgreSQL tables with their indexes and TOAST; for Redis the
    /// server's `MEMORY USAGE` of every key of the prefix (in memory).
    pub async fn disk_bytes(&self) -> Option<u64> {
        match &self.backend {
            Backend::Sqlite { path, .. } => {
                let main = std::fs::metadata(path).ok()?.len();
                let wal = std::fs::metadata(wal_path(path)).map_or(0, |m| m.len());
                Some(main + wal)
            }
            Backend::Postgres(saver) => saver.disk_bytes().await.ok(),
            Backend::Redis { saver, conn, .. } => redis_memory(conn.clone(), saver.key_prefix()).await.ok(),
            Backend::Memory => None,
        }
    }
}

/// This build connects without TLS: say so when a server or URL asks for it.
fn tls_hint(e: CliError) -> CliError {
    if e.message.contains("TLS") {
        e.with_hint("this build of checkpointer connects without TLS: use sslmode=disable, or a local tunnel")
    } else {
        e
    }
}

/// The query parameters that fix a TLS certificate error of a `rediss://`
/// store, as a hint.
fn tls_certificate_hint(e: CliError) -> CliError {
    if e.message.contains("UnknownIssuer") {
        e.with_hint("the server's certificate is signed by a CA the webpki roots do not hold: give its CA file as rediss://…?ca=/path/ca.pem")
    } else if e.message.contains("CertificateRequired") {
        e.with_hint("the server requires a client certificate: rediss://…?cert=/path/client.pem&key=/path/client.key")
    } else {
        e
    }
}

/// A Redis error of `store` as text, its URL's secrets masked.
fn scrub_store(store: &Store, e: &redis::RedisError) -> String {
    match &store.url {
        StoreUrl::Redis { text, .. } => Secrets::of(text).scrub(&e.to_string()),
        _ => e.to_string(),
    }
}

/// The `SCAN MATCH` pattern of the keys of a Redis key prefix but its
/// marker: `<prefix>:<layout version>:{*`.
fn redis_key_pattern(prefix: &str) -> String {
    format!("{}:{}:{{*", glob_escape(prefix), checkpointer::redis::LAYOUT_VERSION)
}

/// `*`, `?`, `[`, `]` and `\` escaped for `SCAN MATCH`.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// The sum of `MEMORY USAGE` over the keys of `prefix` (its marker and
/// `<prefix>:<layout version>:{*`), found with `SCAN`. Every key of a
/// prefix but its marker has a hash tag right after the layout version,
/// and prefixes hold no `{`: so no key of another prefix (`P:v2:x`'s
/// `P:v2:x:v2:{…}` under `P`, say) matches.
async fn redis_memory(mut conn: redis::aio::MultiplexedConnection, prefix: &str) -> redis::RedisResult<u64> {
    let pattern = redis_key_pattern(prefix);
    let mut total: u64 = 0;
    let mut cursor: u64 = 0;
    let mut first = vec![format!("{prefix}:layout").into_bytes()];
    loop {
        let (next, mut keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        keys.append(&mut first);
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            for k in &keys {
                pipe.cmd("MEMORY").arg("USAGE").arg(k);
            }
            let sizes: Vec<Option<u64>> = pipe.query_async(&mut conn).await?;
            total += sizes.into_iter().flatten().sum::<u64>();
        }
        if next == 0 {
            return Ok(total);
        }
        cursor = next;
    }
}

/// Connects to the server of a Redis store. Read and write access need the
/// layout marker (the store exists) and write no key; `Create` writes the
/// marker when it is missing (as `RedisSaver::open` does).
async fn open_redis(
    url: &StoreUrl,
    text: &str,
    plain: &str,
    prefix: &str,
    tls: &RedisTls,
    access: Access,
) -> CliResult<Store> {
    let name = url.display();
    let secrets = Secrets::of(text);
    let cannot = |what: &str, e: String| {
        tls_certificate_hint(CliError::store(format!("cannot {what} {name}: {}", secrets.scrub(&e))))
    };
    let bad_url =
        |e: redis::RedisError| CliError::usage(format!("bad Redis URL {name}: {}", secrets.scrub(&e.to_string())));
    let certs = tls.read()?;
    let client = match &certs {
        Some(certs) => redis::Client::build_with_tls(plain, certs.clone()),
        None => redis::Client::open(plain),
    }
    .map_err(bad_url)?;
    let db = client.get_connection_info().redis_settings().db();
    let connecting = client.get_multiplexed_async_connection();
    let mut conn = match tokio::time::timeout(std::time::Duration::from_secs(10), connecting).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(cannot("connect to", e.to_string())),
        Err(_) => return Err(cannot("connect to", "timed out after 10 s".to_owned())),
    };
    if access != Access::Create {
        let marker: Option<String> = redis::cmd("GET")
            .arg(format!("{prefix}:layout"))
            .query_async(&mut conn)
            .await
            .map_err(|e| cannot("read", e.to_string()))?;
        if marker.is_none() {
            return Err(
                CliError::store(format!("{name} has no checkpoint store under key prefix {prefix:?}")).with_hint(
                    "no RedisSaver wrote there: check the database number and the ?prefix= of the URL (default ckpt)",
                ),
            );
        }
    }
    // with the marker present, opening writes nothing (SET NX)
    let mut builder = RedisSaver::builder().url(plain).key_prefix(prefix);
    if let Some(certs) = certs {
        if let Some(ca) = certs.root_cert {
            builder = builder.tls_root_ca_pem(ca);
        }
        if let Some(client) = certs.client_tls {
            builder = builder.tls_client_cert_pem(client.client_cert, client.client_key);
        }
    }
    let saver = builder
        .open()
        .await
        .map_err(|e| tls_certificate_hint(CliError::from_lib(&format!("cannot open {name}"), e)))?;
    Ok(Store {
        url: url.clone(),
        saver: Arc::new(saver.clone()),
        backend: Backend::Redis { saver, conn, db },
    })
}

fn wal_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// The URI a read-only `SqliteSaver` opens `path` with (`file:/abs/path?mode=ro`,
/// `&immutable=1` for a WAL-mode file in a directory this process may not
/// write), for the checks made before the saver opens it.
fn read_only_uri(path: &Path, name: &str) -> CliResult<String> {
    path.canonicalize()
        .map_err(|e| CliError::not_found(format!("{}: {e}", path.display())))?;
    SqliteSaver::read_only_uri(path).map_err(|e| CliError::from_lib(&format!("cannot open {name}"), e))
}

async fn open_sqlite(url: &StoreUrl, path: &Path, access: Access) -> CliResult<Store> {
    let name = url.display();
    let exists = path.exists();
    if path.is_dir() {
        return Err(CliError::usage(format!("{name} is a directory, not a SQLite file")));
    }
    if !exists {
        if access != Access::Create {
            return Err(CliError::not_found(format!("no such file: {}", path.display())));
        }
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(CliError::not_found(format!("no such directory: {}", parent.display())));
        }
    }
    // a new file ends as Python's fixtures are (rollback journal); a file that
    // was changed gets its journal mode back when nothing else holds it open
    let mut journal_after = (!exists).then(|| ("DELETE".to_owned(), true));
    if exists {
        let uri = read_only_uri(path, &name)?;
        let conn = rusqlite::Connection::open_with_flags(
            &uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| CliError::store(format!("cannot open {name}: {e}")))?;
        let tables = checkpoint_tables(&conn).map_err(|e| CliError::store(format!("cannot read {name}: {e}")))?;
        if tables == 0 && access != Access::Create {
            return Err(CliError::store(format!("{name} has no checkpoint tables"))
                .with_hint("it is not a checkpoint database of LangGraph's SqliteSaver or checkpointer"));
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .map_err(|e| CliError::store(format!("cannot read {name}: {e}")))?;
        if access != Access::Read && !mode.eq_ignore_ascii_case("wal") {
            journal_after = Some((mode, false));
        }
        drop(conn);
    }
    // a read-only open changes nothing: no WAL switch, no index, no file
    let saver = SqliteSaver::builder(path)
        .readers(2)
        .read_only(access == Access::Read)
        .open()
        .await
        .map_err(|e| CliError::from_lib(&format!("cannot open {name}"), e))?;
    let saver = Arc::new(saver);
    Ok(Store {
        url: url.clone(),
        saver: saver.clone(),
        backend: Backend::Sqlite {
            saver,
            path: path.to_owned(),
            journal_after,
        },
    })
}

/// How many of the tables `checkpoints` and `writes` the file has.
fn checkpoint_tables(conn: &rusqlite::Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('checkpoints', 'writes')",
        [],
        |r| r.get(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        assert_eq!(
            StoreUrl::parse("sqlite://data/x.sqlite").unwrap(),
            StoreUrl::Sqlite(PathBuf::from("data/x.sqlite"))
        );
        assert_eq!(
            StoreUrl::parse("sqlite:///abs/x.sqlite").unwrap(),
            StoreUrl::Sqlite(PathBuf::from("/abs/x.sqlite"))
        );
        assert_eq!(StoreUrl::parse("memory:").unwrap(), StoreUrl::Memory);
        for url in ["postgres://u@h/db", "postgresql://u:p@h:5433/db?sslmode=disable"] {
            assert_eq!(StoreUrl::parse(url).unwrap(), StoreUrl::Postgres(url.to_owned()));
        }
        for bad in [
            "",
            "sqlite://",
            "sqlite:x",
            "x.sqlite",
            "redis://h:port",
            "redis://h?prefix=",
            "redis://h?prefix=a%7Bb",
            "redis://h?ca=/ca.pem",
            "rediss://h?cert=/c.pem",
            "rediss://h?ca=",
            "postgres://h:port/db",
        ] {
            assert_eq!(
                StoreUrl::parse(bad).unwrap_err().exit,
                crate::error::Exit::Usage,
                "{bad}"
            );
        }
        assert_eq!(StoreUrl::Sqlite(PathBuf::from("a/b.sqlite")).source_name(), "b.sqlite");
        assert_eq!(
            StoreUrl::parse("redis://:pw@h:6380/2?prefix=my%20app&protocol=resp3").unwrap(),
            StoreUrl::Redis {
                text: "redis://:pw@h:6380/2?prefix=my%20app&protocol=resp3".to_owned(),
                url: "redis://:pw@h:6380/2?protocol=resp3".to_owned(),
                prefix: "my app".to_owned(),
                tls: RedisTls::default(),
            }
        );
        assert_eq!(
            StoreUrl::parse("rediss://:pw@h:6380/2?prefix=p&ca=/etc/my%20ca.pem&cert=c.pem&key=c.key").unwrap(),
            StoreUrl::Redis {
                text: "rediss://:pw@h:6380/2?prefix=p&ca=/etc/my%20ca.pem&cert=c.pem&key=c.key".to_owned(),
                url: "rediss://:pw@h:6380/2".to_owned(),
                prefix: "p".to_owned(),
                tls: RedisTls {
                    ca: Some(PathBuf::from("/etc/my ca.pem")),
                    client: Some((PathBuf::from("c.pem"), PathBuf::from("c.key"))),
                },
            }
        );
        let StoreUrl::Redis { prefix, .. } = StoreUrl::parse("redis://h").unwrap() else {
            panic!("not Redis")
        };
        assert_eq!(prefix, "ckpt");
    }

    #[test]
    fn redis_passwords_are_masked() {
        let url = StoreUrl::parse("redis://:secret@127.0.0.1:6379/0?prefix=p").unwrap();
        assert_eq!(url.display(), "redis://:***@127.0.0.1:6379/0?prefix=p");
        let url = StoreUrl::parse("redis://user:s%40cret@h/1").unwrap();
        assert_eq!(url.display(), "redis://user:***@h/1");
        let err = StoreUrl::parse("redis://:secret@h:port").unwrap_err();
        assert!(!err.message.contains("secret"), "{}", err.message);
        let url = StoreUrl::parse("rediss://:secret@h?ca=ca.pem").unwrap();
        assert_eq!(url.display(), "rediss://:***@h?ca=ca.pem");
        let err = StoreUrl::parse("redis://:secret@h?ca=ca.pem").unwrap_err();
        assert!(
            !err.message.contains("secret") && err.message.contains("rediss://"),
            "{}",
            err.message
        );
        assert_eq!(
            Secrets::of("redis://u:s%40cret@h").scrub("auth failed for s@cret and s%40cret"),
            "auth failed for *** and ***"
        );
    }

    #[test]
    fn passwords_are_masked() {
        assert_eq!(redact("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(
            redact("postgresql://u@h/db?password=x"),
            "postgresql://u@h/db?password=***"
        );
        assert_eq!(
            redact("host=h user=u password='a b' dbname=db"),
            "host=h user=u password=*** dbname=db"
        );
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        // a PostgreSQL user name is no password
        assert_eq!(redact("postgres://postgres@h/db"), "postgres://postgres@h/db");
        assert_eq!(redact("redis://secret@h/0"), "redis://***@h/0");
    }

    #[test]
    fn read_only_uris_escape_the_path() {
        let dir = std::env::temp_dir().join("checkpointer cli ?#%");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.sqlite");
        std::fs::write(&file, b"").unwrap();
        let uri = read_only_uri(&file, "a.sqlite").unwrap();
        assert!(uri.starts_with("file:/"), "{uri}");
        assert!(
            uri.ends_with("/checkpointer%20cli%20%3F%23%25/a.sqlite?mode=ro"),
            "{uri}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
