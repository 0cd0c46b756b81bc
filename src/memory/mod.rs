//! `InMemorySaver`: the reference backend.
//!
//! With the default [`JsonPlusSerializer`] every value is kept as given:
//! [`Value`](crate::Value)'s lists and maps are shared copy-on-write, so storing one and
//! handing it back are reference-count increments, and a caller changing its
//! copy afterwards copies first, never reaching the stored one. Values are
//! still checked as the serializer would check them (too deep, too long for
//! msgpack: refused) and counted at their msgpack length in `storage_bytes`.
//! With any other serializer ([`Serializer::preserves_values`] false, an
//! encrypting one for example) values are kept as the bytes it produces, so
//! they are encrypted at rest. Everything is indexed so that no operation
//! scans other threads or whole histories. The layout and its indexes are
//! described in the `store` module.
//!
//! | operation | cost (n = checkpoints of the (thread, ns), N = all, c = channels, w = writes of a checkpoint) |
//! |---|---|
//! | `put` | O(log N + c) index work + checking the written channels (memoised per shared list or map; encoding them with a non-default serializer); beyond 1024 channels the values are stored 1024 per lock hold before the checkpoint is published in O(log N) |
//! | `put_writes` | O(log w) per write + encoding, outside the store lock (the new write set is built holding only the checkpoint's writer mutex, then swapped in O(1)) |
//! | `get_tuple` (by id or latest) | O(log n) under the lock; outside it, cloning the checkpoint's native form (built from its compact form by the first read, then kept) and decoding values with a non-default serializer |
//! | `list` page | O(log N + examined entries), at most 64 tuples and 1024 entries per lock hold; metadata filters run outside the lock |
//! | `delete_thread` | O(1) unlink, then its global entries removed 1024 per lock hold; a large thread is freed by a background thread (`reclaim`) |
//! | `delete_for_runs` | O(N) scan in slices of 1024 checkpoints (also inside one thread), O(log N) per deleted checkpoint |
//! | `copy_thread` | O(size of the source thread), values shared, not re-encoded: the source read 1024 checkpoints per lock hold (writes and values one namespace per hold), the target built outside the lock, its global entries inserted 1024 per hold under a pending tag, then published in O(1) (whole or not at all) |
//! | `prune` | O(size of each pruned thread): keep-latest plans from a snapshot read 1024 checkpoints per lock hold (write ids one namespace per hold) and removes 1024 victims per hold, oldest first (the kept checkpoints whose parent went forget it in the last of those holds); the values no kept checkpoint names are then collected one namespace per hold |
//! | `get_delta_channel_history` | O(chain depth × (writes per checkpoint + channels)), the chain read 1024 links per lock hold and assembled outside it |
//! | `list_threads` | O(log T + threads examined); metadata filters run outside the lock |

pub(crate) mod admin;
mod backend;
mod encoded;
mod lease;
mod maintain;
mod ordmap;
mod ptree;
mod reclaim;
pub(crate) mod size;
pub(crate) mod store;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::engine::{self, Engine};
use crate::serde::{JsonPlusSerializer, Serializer};

pub(crate) use backend::Memory;
use store::Store;

/// Tuples fetched per lock hold by `list`.
const PAGE: usize = 64;

/// The in-memory saver: LangGraph's `InMemorySaver` semantics with indexed
/// storage. Cheap to share (`Arc<InMemorySaver>` or `Arc<dyn CheckpointSaver>`)
/// across tasks and threads; no lock is held across an `.await`.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use checkpointer::{
///     Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
///     CheckpointSource, InMemorySaver,
/// };
/// let saver = InMemorySaver::new();
/// let checkpoint = Checkpoint::new(0);
/// let metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
/// let stored = saver
///     .put(&CheckpointConfig::new("t1"), &checkpoint, &metadata, &Default::default())
///     .await?;
/// let latest = saver.latest("t1").await?.expect("stored");
/// assert_eq!(latest.config, stored);
/// assert_eq!(saver.thread_ids(), ["t1"]);
/// # Ok::<(), checkpointer::Error>(())
/// # }).unwrap();
/// ```
pub struct InMemorySaver {
    engine: Engine<Memory>,
}

impl InMemorySaver {
    /// This saver's store with another engine (a fenced writer).
    fn with_engine(&self, engine: Engine<Memory>) -> Self {
        InMemorySaver { engine }
    }

    /// An empty saver using [`JsonPlusSerializer`].
    pub fn new() -> Self {
        Self::with_serializer(Arc::new(JsonPlusSerializer))
    }

    /// An empty saver storing values through `serializer` (for example an
    /// encrypting one).
    pub fn with_serializer(serializer: Arc<dyn Serializer>) -> Self {
        InMemorySaver {
            engine: Engine::new(Memory {
                live: serializer.preserves_values(),
                serde: serializer,
                store: RwLock::new(Store::default()),
                copy_gates: Mutex::default(),
                leases: lease::Leases::default(),
            }),
        }
    }

    fn mem(&self) -> &Memory {
        self.engine.backend()
    }

    /// The serializer values are stored with.
    pub fn serializer(&self) -> &Arc<dyn Serializer> {
        &self.mem().serde
    }

    /// Ids of the threads holding anything (checkpoints, writes or values),
    /// ascending.
    pub fn thread_ids(&self) -> Vec<String> {
        self.mem().store.read().thread_ids()
    }

    /// The number of checkpoints stored, all threads and namespaces.
    pub fn checkpoint_count(&self) -> usize {
        self.mem().totals().1
    }

    /// The bytes of serialized payload held: every stored value and write as
    /// the serializer produced it, plus the msgpack size of each checkpoint
    /// (without channel values) and its metadata, as Python's `InMemorySaver`
    /// would hold them. Keys and index overhead are not counted. O(threads),
    /// summed 1024 threads per lock hold (a gauge: writes made meanwhile may
    /// or may not be counted).
    pub fn storage_bytes(&self) -> usize {
        self.mem().totals().0
    }
}

engine::saver_over_engine!(InMemorySaver, engine);

impl Default for InMemorySaver {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for InMemorySaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mem = self.mem();
        let threads = mem.store.read().thread_count();
        f.debug_struct("InMemorySaver")
            .field("serializer", &mem.serde)
            .field("threads", &threads)
            .field("checkpoints", &mem.totals().1)
            .finish()
    }
}
