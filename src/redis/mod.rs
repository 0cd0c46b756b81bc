//! `RedisSaver`: checkpoints in plain Redis (6.2 or later) or Valkey, core
//! commands only (no RedisJSON, no RediSearch), on one server or a Redis
//! Cluster: every key of a thread shares one hash tag, so each operation on
//! a thread is one Lua script on one slot, atomic (`docs/design.md`, *Redis
//! layout*, key by key).
//!
//! ```no_run
//! use checkpointer::redis::RedisSaver;
//! use checkpointer::prelude::*;
//!
//! # async fn demo() -> checkpointer::Result<()> {
//! // connects and writes (or checks) the layout marker; the password never
//! // appears in errors, logs or `Debug` output
//! let saver = RedisSaver::builder()
//!     .url("redis://:secret@127.0.0.1:6379/0")
//!     .key_prefix("myapp")
//!     .open()
//!     .await?;
//! let latest = saver.latest("thread-1").await?;
//! # let _ = latest;
//! # Ok(())
//! # }
//! ```
//!
//! On a Redis Cluster, give some masters' URLs instead of one URL:
//!
//! ```no_run
//! use checkpointer::redis::RedisSaver;
//! use checkpointer::prelude::*;
//!
//! # async fn demo() -> checkpointer::Result<()> {
//! let saver = RedisSaver::builder()
//!     .cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000", "redis://10.0.0.3:7000"])
//!     .key_prefix("myapp")
//!     .open()
//!     .await?;
//! // the thread's keys live on the master serving its slot
//! let latest = saver.latest("thread-1").await?;
//! # let _ = latest;
//! # Ok(())
//! # }
//! ```
//!
//! # Client
//!
//! The `redis` crate (the most used Rust client; RESP2/RESP3, tokio) through its
//! `aio::ConnectionManager`: one multiplexed connection shared by every
//! call of the saver and its clones, reconnecting by itself after the
//! connection breaks. Scripts go as `EVALSHA` with the `EVAL` fallback on
//! `NOSCRIPT` (`redis::Script`), so each script's text crosses the network
//! once per server (and again after `SCRIPT FLUSH` or a failover).
//!
//! On a cluster ([`RedisSaverBuilder::cluster`]) the `redis` crate's
//! `cluster_async::ClusterConnection` instead: it learns the slot map, sends
//! each script to the master of the thread's slot and each index update to
//! the master of the index slot, and follows `MOVED`/`ASK`. Nothing scans
//! the nodes: whole-store reads use the global index below.
//!
//! # TLS
//!
//! With the `redis-tls` feature, `rediss://` URLs (one server or every
//! cluster node) connect over TLS through rustls with the ring provider
//! (no system library), checking the server's certificate against the
//! webpki roots (Mozilla's list), or against a private CA given with
//! [`RedisSaverBuilder::tls_root_ca_pem`]; a client certificate for mutual
//! TLS goes to [`RedisSaverBuilder::tls_client_cert_pem`]. Without the
//! feature a `rediss://` URL is refused with [`Error::InvalidInput`].
//!
//! ```no_run
//! # #[cfg(feature = "redis-tls")]
//! # async fn demo() -> checkpointer::Result<()> {
//! use checkpointer::redis::RedisSaver;
//! let ca = std::fs::read("ca.pem").expect("the CA certificate");
//! let saver = RedisSaver::builder()
//!     .url("rediss://:secret@redis.internal:6380/0")
//!     .tls_root_ca_pem(ca)
//!     .open()
//!     .await?;
//! # drop(saver);
//! # Ok(())
//! # }
//! ```
//!
//! # Storage and atomicity
//!
//! Values are the serializer's bytes ([`Serializer::dumps_typed`], type tag
//! and payload), so [`EncryptedSerializer`](crate::serde::EncryptedSerializer)
//! encrypts checkpoints, metadata, channel values and writes alike. Channel
//! values are stored once per (namespace, channel, version): a checkpoint
//! that does not change a channel names the stored version instead of
//! copying the value. `put` and `put_writes` each run as one script, so
//! they apply whole or not at all. Work proportional to a thread
//! (`copy_thread`, [`RedisSaver::import_thread`], `prune`,
//! `delete_for_runs`, `thread_keys`, `delete_thread`) runs in bounded
//! steps: the thread read a chunk at a time at one version, new contents
//! written into staged keys readers never see, then made live by one
//! script of fixed cost; so each applies to a thread whole or not at all,
//! and the server answers other clients in between.
//!
//! Thread ids, namespaces and checkpoint ids holding U+0000 are refused
//! with [`Error::InvalidInput`] (they are the
//! separator of the index members); reads with them find nothing.
//!
//! # Time to live
//!
//! With [`RedisSaverBuilder::ttl`] every write gives all of a thread's keys
//! (ten, whatever its size) one deadline in the same script, and reads
//! renew it with [`TtlConfig::refresh_on_read`]: a thread expires whole,
//! never leaving a write or a value behind. Its entries in the global
//! index (another slot) are removed by [`RedisSaver::sweep_expired`],
//! which a background task runs; until then readers skip them.
//!
//! ```no_run
//! use checkpointer::redis::{RedisSaver, TtlConfig};
//!
//! # async fn demo() -> checkpointer::Result<()> {
//! // threads expire a day after their last write or read
//! let saver = RedisSaver::builder()
//!     .url("redis://127.0.0.1:6379")
//!     .ttl(TtlConfig::minutes(24.0 * 60.0).refresh_on_read(true))
//!     .open()
//!     .await?;
//! # drop(saver);
//! # Ok(())
//! # }
//! ```
//!
//! # Listing across threads
//!
//! `list(None, ..)`, `list_threads` and `delete_for_runs` read two global
//! sorted sets (every thread id; every `(id, thread, namespace)`), which on
//! a cluster live in other slots than the thread's keys and so cannot
//! change in the same script. A write adds its entries *before* its
//! thread's script, and a removal drops them *after*: the index may name
//! checkpoints that are not stored (a call that failed in between), which
//! readers skip, but never misses a stored one. The exception: a `put`
//! racing a `delete_thread` of the same thread may leave that thread out of
//! `list_threads` (its checkpoints stay readable by thread id).
//!
//! # Costs
//!
//! | operation | cost (n = checkpoints of the thread, c = channels, w = writes) |
//! |---|---|
//! | `put` | one script (on a cluster: one index transaction, then the script), O(c log n) |
//! | `put_writes` | one script, O(w) |
//! | `get_tuple` | one script, O(log n + c + w) |
//! | `list` page | one script per thread in the page (64 checkpoints at most), O(log n + page) |
//! | `get_delta_channel_history` | one script per 64 links of the parent chain |
//! | `delete_thread` | one script of fixed cost (ten keys unlinked, freed in the background), then the thread's index entries removed 250 per transaction |
//! | `copy_thread`, `import_thread`, `prune`, `delete_for_runs` (per thread touched), `thread_keys` | O(n + values + writes) in bounded steps: 128 fields read, 64 items written, 250 index entries per command; one fixed-cost script makes the result live |
//! | `delete_for_runs` | O(all checkpoints): the global index read 512 entries per step |
//! | `list_threads` | one script per thread of the page |

mod backend;
mod error;
mod keys;
mod scripts;
mod stage;
mod tls;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};

pub use self::backend::SweepReport;
use self::backend::{Conn, Redis};
pub use self::keys::key_slot;
use self::keys::Keys;
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::saver::{op_span, traced};
use crate::secret::{is_secret_name, redact, Secrets};
use crate::serde::{JsonPlusSerializer, Serializer};

/// The layout version in every key name (`<prefix>:v2:{thread}:...`) and
/// in the layout marker `<prefix>:layout` (`docs/design.md`, *Redis
/// layout*).
pub const LAYOUT_VERSION: &str = keys::LAYOUT;

/// The default of [`RedisSaverBuilder::key_prefix`].
pub const DEFAULT_KEY_PREFIX: &str = "ckpt";

/// Checkpoints in Redis or Valkey. Cheap to clone: clones share the
/// connection. See the [module docs](self).
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::redis::RedisSaver;
/// use checkpointer::prelude::*;
/// let saver = RedisSaver::open("redis://127.0.0.1:6379").await?;
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let stored = saver
///     .put(&CheckpointConfig::new("thread-1"), &Checkpoint::new(-1), &meta, &Default::default())
///     .await?;
/// assert_eq!(saver.latest("thread-1").await?.map(|t| t.config), Some(stored));
/// # Ok(())
/// # }
/// ```
///
/// On a Redis Cluster (some masters' URLs; the others are discovered):
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::redis::RedisSaver;
/// use checkpointer::prelude::*;
/// let saver = RedisSaver::open_cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]).await?;
/// let threads = saver.list_threads(Default::default()).await?;
/// # let _ = threads;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisSaver {
    engine: Engine<Redis>,
    /// The URL (or the cluster nodes' URLs), masked: the saver keeps no
    /// other copy of them.
    shown: Arc<str>,
    /// The background sweep, stopped when the last clone is dropped.
    _sweeper: Option<Arc<Sweeper>>,
}

/// Stops the background sweep task when dropped.
struct Sweeper(tokio::task::AbortHandle);

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Time to live of threads (LangGraph's `TTLConfig`): every key of a
/// thread gets one deadline, `default_ttl` after its last write (or read,
/// with `refresh_on_read`), so a thread expires whole.
///
/// ```
/// use std::time::Duration;
/// use checkpointer::redis::TtlConfig;
/// // LangGraph's {"default_ttl": 60, "refresh_on_read": True}
/// let ttl = TtlConfig::minutes(60.0).refresh_on_read(true);
/// assert_eq!(ttl.default_ttl(), Duration::from_secs(3600));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlConfig {
    default_ttl: Duration,
    refresh_on_read: bool,
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

    /// Whether reading a thread's checkpoints (`get_tuple`, `list`,
    /// `get_delta_channel_history`) renews its deadline too.
    pub fn refresh_on_read(mut self, yes: bool) -> Self {
        self.refresh_on_read = yes;
        self
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
    pub(crate) fn millis(&self) -> u64 {
        u64::try_from(self.default_ttl.as_millis()).unwrap_or(u64::MAX).max(1)
    }
}

impl fmt::Debug for RedisSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.engine.backend();
        f.debug_struct("RedisSaver")
            .field("url", &self.shown)
            .field("cluster", &matches!(r.conn, Conn::Cluster(_)))
            .field("key_prefix", &r.keys.prefix)
            .field("serde", &r.serde)
            .finish()
    }
}

impl RedisSaver {
    /// A builder: set a [`url`](RedisSaverBuilder::url), then
    /// [`open`](RedisSaverBuilder::open)`.await`.
    pub fn builder() -> RedisSaverBuilder {
        RedisSaverBuilder::default()
    }

    /// Opens a saver on `url` (`redis://[user:password@]host[:port][/db]`,
    /// `rediss://` for TLS with the `redis-tls` feature) with the default
    /// settings: connects and writes or checks the layout marker.
    ///
    /// # Errors
    /// As [`RedisSaverBuilder::open`].
    pub async fn open(url: impl Into<String>) -> Result<Self> {
        Self::builder().url(url).open().await
    }

    /// Opens a saver on a Redis Cluster, given the URLs of some of its nodes
    /// (`redis://[user:password@]host:port` each; the client learns the
    /// others from them), with the default settings.
    ///
    /// # Errors
    /// As [`RedisSaverBuilder::open`].
    pub async fn open_cluster<S: Into<String>>(nodes: impl IntoIterator<Item = S>) -> Result<Self> {
        Self::builder().cluster(nodes).open().await
    }

    /// The prefix of every key of this saver.
    pub fn key_prefix(&self) -> &str {
        &self.engine.backend().keys.prefix
    }

    /// The TTL of this saver's threads, if one is set.
    pub fn ttl(&self) -> Option<TtlConfig> {
        self.engine.backend().ttl
    }

    /// Removes the global index entries (the thread list and the
    /// checkpoints `list(None, ..)` reads) of threads that have expired, at
    /// most `limit` threads per call. A thread's own keys expire by
    /// themselves, whole; its entries in the global index live in another
    /// slot and are removed here (readers skip them until then). A saver
    /// with a TTL runs this in the background
    /// ([`RedisSaverBuilder::sweep_interval`]); call it to sweep now.
    ///
    /// # Errors
    /// [`Error::Storage`] when Redis fails; what was swept stays swept.
    pub async fn sweep_expired(&self, limit: usize) -> Result<SweepReport> {
        traced(op_span("sweep", "", "", None), self.engine.backend().sweep(limit)).await
    }
}

/// Configures and opens a [`RedisSaver`].
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use std::time::Duration;
/// use checkpointer::redis::RedisSaver;
/// let saver = RedisSaver::builder()
///     .url("redis://127.0.0.1:6379/2")
///     .key_prefix("agents")
///     .response_timeout(Some(Duration::from_secs(10)))
///     .open()
///     .await?;
/// # drop(saver);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisSaverBuilder {
    url: Option<String>,
    cluster: Option<Vec<String>>,
    prefix: String,
    serde: Arc<dyn Serializer>,
    response_timeout: Option<Duration>,
    connection_timeout: Option<Duration>,
    ttl: Option<TtlConfig>,
    sweep_interval: Option<Option<Duration>>,
    #[cfg(feature = "redis-tls")]
    tls: tls::TlsPem,
}

impl Default for RedisSaverBuilder {
    fn default() -> Self {
        RedisSaverBuilder {
            url: None,
            cluster: None,
            prefix: DEFAULT_KEY_PREFIX.to_owned(),
            serde: Arc::new(JsonPlusSerializer),
            response_timeout: Some(Duration::from_secs(60)),
            connection_timeout: Some(Duration::from_secs(10)),
            ttl: None,
            sweep_interval: None,
            #[cfg(feature = "redis-tls")]
            tls: tls::TlsPem::default(),
        }
    }
}

impl fmt::Debug for RedisSaverBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RedisSaverBuilder");
        d.field("url", &self.url.as_deref().map(redact))
            .field(
                "cluster",
                &self
                    .cluster
                    .as_ref()
                    .map(|nodes| nodes.iter().map(|n| redact(n)).collect::<Vec<_>>()),
            )
            .field("key_prefix", &self.prefix)
            .field("serde", &self.serde)
            .field("response_timeout", &self.response_timeout)
            .field("connection_timeout", &self.connection_timeout)
            .field("ttl", &self.ttl)
            .field("sweep_interval", &self.sweep_interval);
        // whether certificates are set, never their bytes (a client key)
        #[cfg(feature = "redis-tls")]
        d.field("tls_root_ca", &self.tls.root_ca.is_some())
            .field("tls_client_cert", &self.tls.client.is_some());
        d.finish()
    }
}

impl RedisSaverBuilder {
    /// The server: `redis://[user:password@]host[:port][/db]`, or
    /// `rediss://…` for TLS (the `redis-tls` feature).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// A Redis Cluster instead of one server: the URLs of some of its
    /// masters (`redis://[user:password@]host:port`, no database number;
    /// the client discovers the other nodes and follows slot moves). Each
    /// operation on a thread is one script on the thread's slot; the two
    /// global indexes share one slot (`docs/design.md`, *Redis layout*).
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use checkpointer::redis::RedisSaver;
    /// let saver = RedisSaver::builder()
    ///     .cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000", "redis://10.0.0.3:7000"])
    ///     .key_prefix("agents")
    ///     .open()
    ///     .await?;
    /// # drop(saver);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cluster<S: Into<String>>(mut self, nodes: impl IntoIterator<Item = S>) -> Self {
        self.cluster = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// The prefix of every key (default [`DEFAULT_KEY_PREFIX`]): savers
    /// with different prefixes on one database do not see each other.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The serializer of every stored value (default [`JsonPlusSerializer`]).
    pub fn serializer(mut self, serde: Arc<dyn Serializer>) -> Self {
        self.serde = serde;
        self
    }

    /// How long one command may wait for its answer (default 60 s; `None`:
    /// forever). A write that times out may or may not have been applied.
    pub fn response_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Threads expire `ttl.default_ttl()` after their last write (or read,
    /// with [`TtlConfig::refresh_on_read`]): each write gives every key of
    /// the thread one deadline, in the same script, so a thread expires
    /// whole (checkpoints, values and pending writes together) and never
    /// leaves a key behind. Without a TTL (the default) threads live until
    /// deleted, and a write keeps whatever deadline the thread has.
    ///
    /// Savers sharing a key prefix should share the TTL setting: a saver
    /// without one writing a thread that has a deadline keeps the deadline,
    /// and the entries it adds to the global index are not swept.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use checkpointer::redis::{RedisSaver, TtlConfig};
    /// let saver = RedisSaver::builder()
    ///     .url("redis://127.0.0.1:6379")
    ///     .ttl(TtlConfig::minutes(60.0).refresh_on_read(true))
    ///     .open()
    ///     .await?;
    /// # drop(saver);
    /// # Ok(())
    /// # }
    /// ```
    pub fn ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// How often a saver with a TTL removes expired threads from the
    /// global index ([`RedisSaver::sweep_expired`]) in a background task
    /// (default: the TTL, at most an hour; `None`: never, the caller
    /// sweeps). The task stops when the last clone of the saver is dropped.
    pub fn sweep_interval(mut self, interval: Option<Duration>) -> Self {
        self.sweep_interval = Some(interval);
        self
    }

    /// How long opening the connection may take (default 10 s).
    pub fn connection_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Trusts the certificate authorities in `pem` (one or more PEM
    /// certificates) instead of the webpki roots: for a server whose
    /// certificate a private CA signed. The URLs must be `rediss://`.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use checkpointer::redis::RedisSaver;
    /// let saver = RedisSaver::builder()
    ///     .url("rediss://10.0.0.5:6380")
    ///     .tls_root_ca_pem(std::fs::read("/etc/redis/ca.pem").expect("the CA"))
    ///     .open()
    ///     .await?;
    /// # drop(saver);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "redis-tls")]
    pub fn tls_root_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_ca = Some(pem.into());
        self
    }

    /// Mutual TLS: presents this client certificate chain and its private
    /// key (both PEM) to servers that ask for one (`tls-auth-clients`).
    /// The URLs must be `rediss://`; the key never appears in `Debug`
    /// output or errors.
    #[cfg(feature = "redis-tls")]
    pub fn tls_client_cert_pem(mut self, cert_chain: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.tls.client = Some((cert_chain.into(), key.into()));
        self
    }

    /// Connects, then writes the layout marker (`<prefix>:layout`) or
    /// checks the one stored.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] without a URL (or cluster nodes), with both,
    /// for a malformed one or an empty key prefix, for a `rediss://` URL
    /// without the `redis-tls` feature, for TLS certificates that are not
    /// PEM or given with a `redis://` URL; [`Error::Storage`] when the
    /// server cannot be reached (a failed TLS handshake, a certificate no
    /// trusted CA signed), or the marker names another layout. The URL's
    /// password never appears in them.
    pub async fn open(self) -> Result<RedisSaver> {
        traced(op_span("open", "", "", None), self.open_inner()).await
    }

    async fn open_inner(self) -> Result<RedisSaver> {
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            return Err(Error::invalid(
                "RedisSaver: the key prefix must be non-empty, without `{` or `}`",
            ));
        }
        let urls: Vec<&str> = self
            .url
            .iter()
            .chain(self.cluster.iter().flatten())
            .map(String::as_str)
            .collect();
        #[cfg(not(feature = "redis-tls"))]
        if let Some(url) = urls.iter().find(|u| tls::is_tls(u)) {
            return Err(Error::invalid(format!(
                "RedisSaver: {} asks for TLS (rediss://): build checkpointer with the `redis-tls` feature",
                redact(url)
            )));
        }
        for url in &urls {
            if let Some(why) = credential_in_query(url) {
                return Err(bad_url(url, &why));
            }
        }
        #[cfg(feature = "redis-tls")]
        let certs = self.tls.certificates(&urls)?;
        let (conn, shown, secrets) = match (self.url, self.cluster) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "RedisSaver: give either a URL or cluster nodes, not both",
                ))
            }
            (None, None) => return Err(Error::invalid("RedisSaver: no URL given")),
            (Some(url), None) => {
                let secrets = Secrets::of(&url);
                let bad = |e: ::redis::RedisError| bad_url(&url, &secrets.scrub(&e.to_string()));
                let client = ::redis::Client::open(url.as_str()).map_err(bad)?;
                #[cfg(feature = "redis-tls")]
                let client = match certs {
                    Some(certs) => ::redis::Client::build_with_tls(url.as_str(), certs).map_err(bad)?,
                    None => client,
                };
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_secs(2))
                    .set_response_timeout(self.response_timeout)
                    .set_connection_timeout(self.connection_timeout);
                let conn = ConnectionManager::new_with_config(client, config)
                    .await
                    .map_err(|e| error::storage(e, "open", true, &secrets))?;
                (Conn::Single(conn), redact(&url), secrets)
            }
            (None, Some(nodes)) => {
                if nodes.is_empty() {
                    return Err(Error::invalid("RedisSaver: no cluster node given"));
                }
                let secrets = Secrets::of_all(&nodes);
                let shown = nodes.iter().map(|n| redact(n)).collect::<Vec<_>>().join(",");
                let mut builder = ::redis::cluster::ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                    .retries(4)
                    .max_retry_wait(2000);
                if let Some(t) = self.response_timeout {
                    builder = builder.response_timeout(t);
                }
                if let Some(t) = self.connection_timeout {
                    builder = builder.connection_timeout(t);
                }
                #[cfg(feature = "redis-tls")]
                if let Some(certs) = certs {
                    builder = builder.certs(certs);
                }
                let client = builder
                    .build()
                    .map_err(|e| Error::invalid(format!("bad Redis URL {shown}: {}", secrets.scrub(&e.to_string()))))?;
                let conn = client
                    .get_async_connection()
                    .await
                    .map_err(|e| error::storage(e, "open", true, &secrets))?;
                (Conn::Cluster(conn), shown, secrets)
            }
        };
        let backend = Redis {
            conn,
            keys: Keys { prefix: self.prefix },
            serde: self.serde,
            secrets,
            ttl: self.ttl,
        };
        check_marker(&backend).await?;
        let engine = Engine::new(backend);
        let interval = match (self.ttl, self.sweep_interval) {
            (None, _) | (_, Some(None)) => None,
            (Some(_), Some(Some(every))) => Some(every),
            (Some(t), None) => Some(t.default_ttl.min(Duration::from_secs(3600))),
        };
        let sweeper = interval.map(|every| Arc::new(spawn_sweeper(&engine, every)));
        Ok(RedisSaver {
            engine,
            shown: shown.into(),
            _sweeper: sweeper,
        })
    }
}

/// Sweeps every `every` while a saver sharing the engine is alive.
fn spawn_sweeper(engine: &Engine<Redis>, every: Duration) -> Sweeper {
    let weak = engine.downgrade();
    let every = every.max(Duration::from_millis(10));
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(backend) = weak.upgrade() else { return };
            // a failed sweep is retried at the next tick; a sweep removes
            // 512 threads at most, the rest wait for the next
            let _ = traced(op_span("sweep", "", "", None), backend.sweep(512)).await;
        }
    });
    Sweeper(task.abort_handle())
}

/// The error for a URL that cannot be used, `why` free of its secrets.
fn bad_url(url: &str, why: &str) -> Error {
    Error::invalid(format!("bad Redis URL {}: {why}", redact(url)))
}

/// Checks a Redis URL as [`RedisSaverBuilder::open`] reads it, without
/// connecting: its form, and no credential in its query, which the `redis`
/// client would ignore (`redis://host/0?password=…`; a password goes in the
/// user info, `redis://[user]:PASSWORD@host`; a `redis+unix://` URL's
/// `pass=` is read).
///
/// ```
/// use checkpointer::redis::check_url;
/// assert!(check_url("redis://:s3cret@127.0.0.1:6379/0").is_ok());
/// let e = check_url("redis://127.0.0.1/0?password=s3cret").unwrap_err();
/// assert!(e.to_string().contains("`password`") && !e.to_string().contains("s3cret"), "{e}");
/// let e = check_url("redis://:s3cret/x@127.0.0.1/0").unwrap_err();
/// assert!(!e.to_string().contains("s3cret"), "{e}");
/// ```
///
/// # Errors
/// [`Error::InvalidInput`], the URL masked ([`crate::secret::redact`]).
pub fn check_url(url: &str) -> Result<()> {
    if let Some(why) = credential_in_query(url) {
        return Err(bad_url(url, &why));
    }
    ::redis::Client::open(url).map_err(|e| bad_url(url, &Secrets::of(url).scrub(&e.to_string())))?;
    Ok(())
}

/// Why the query of `url` is refused: a parameter named like a credential
/// (`password`, `token`, `auth`…), which the `redis` client does not read
/// (but a `pass` on a unix socket URL, which it does).
fn credential_in_query(url: &str) -> Option<String> {
    let (base, query) = url.split_once('?')?;
    let base = base.to_ascii_lowercase();
    let unix = ["unix:", "redis+unix:", "valkey+unix:"]
        .iter()
        .any(|s| base.starts_with(s));
    let query = query.split('#').next().unwrap_or_default();
    for param in query.split('&') {
        let key = param.split_once('=').map_or(param, |(k, _)| k);
        if !is_secret_name(key) || (unix && key == "pass") {
            continue;
        }
        let plain = key.len() <= 32 && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let name = if plain {
            format!("`{key}`")
        } else {
            "a parameter".to_owned()
        };
        return Some(format!(
            "the query holds {name}, named like a credential, which the redis client does not read: \
             give the password in the user info, percent-encoded (redis://[USER]:PASSWORD@HOST)"
        ));
    }
    None
}

/// Writes the layout marker if absent, and refuses a store written in
/// another layout.
async fn check_marker(r: &Redis) -> Result<()> {
    let mut conn = r.conn.clone();
    let key = r.keys.marker();
    let (stored,): (Option<String>,) = ::redis::pipe()
        .cmd("SET")
        .arg(&key)
        .arg(keys::MARKER)
        .arg("NX")
        .ignore()
        .cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .map_err(|e| error::storage(e, "open", true, &r.secrets))?;
    match stored.as_deref() {
        Some(keys::MARKER) => move_untagged_empty_thread(r).await,
        other => Err(Error::storage(
            "redis",
            false,
            format!(
                "the keys under prefix {:?} are in layout {:?}, not {:?}",
                r.keys.prefix,
                other.unwrap_or(""),
                keys::MARKER
            ),
        )),
    }
}

/// Moves the keys of the empty thread id from `P:v2:{}` (no hash tag, as
/// stores written before its tag `%` have them) to `P:v2:{%}`, on one
/// server (on a cluster they could not be written). O(1) renames; keys the
/// new base has already are left.
async fn move_untagged_empty_thread(r: &Redis) -> Result<()> {
    if matches!(r.conn, Conn::Cluster(_)) {
        return Ok(());
    }
    let (old, new) = (r.keys.untagged_empty_thread(), r.keys.thread(""));
    let mut inv = scripts::MOVE_KEYS.prepare_invoke();
    for suffix in scripts::THREAD_KEYS.iter().chain([&":ver"]) {
        inv.key(format!("{old}{suffix}")).key(format!("{new}{suffix}"));
    }
    inv.invoke_async::<()>(&mut r.conn.clone())
        .await
        .map_err(|e| error::storage(e, "open", false, &r.secrets))
}

engine::saver_over_engine!(RedisSaver, engine);
