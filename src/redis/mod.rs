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
//! feature a `rediss://` URL is refused with [`Error::InvalidInput`](crate::Error::InvalidInput).
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
//! Values are the serializer's bytes ([`Serializer::dumps_typed`](crate::serde::Serializer::dumps_typed), type tag
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
//! with [`Error::InvalidInput`](crate::Error::InvalidInput) (they are the
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

pub(crate) mod admin;
mod backend;
mod builder;
mod error;
mod fence;
mod index;
mod keys;
mod put;
mod queries;
mod retain;
mod rows;
mod schema;
mod stage;
mod tls;

use std::fmt;
use std::sync::Arc;

use self::backend::{Conn, Redis};
pub use self::builder::{check_url, RedisSaverBuilder};
pub use self::index::SweepReport;
pub use self::keys::key_slot;
use crate::engine::{self, Engine};
use crate::error::Result;
/// Also at the crate root: [`OpenOptions::ttl`](crate::OpenOptions::ttl) takes it.
pub use crate::open::TtlConfig;
use crate::saver::{op_span, traced};

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
    /// This saver's store with another engine (a fenced writer).
    fn with_engine(&self, engine: Engine<Redis>) -> Self {
        RedisSaver {
            engine,
            shown: self.shown.clone(),
            _sweeper: self._sweeper.clone(),
        }
    }

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
    /// [`Error::Storage`](crate::Error::Storage) when Redis fails; what was swept stays swept.
    pub async fn sweep_expired(&self, limit: usize) -> Result<SweepReport> {
        traced(op_span("sweep", "", "", None), self.engine.backend().sweep(limit)).await
    }
}

engine::saver_over_engine!(RedisSaver, engine);
