//! The data structures behind [`InMemorySaver`](super::InMemorySaver) and the
//! index operations on them. The `Store` methods are synchronous and run under
//! the saver's lock, each for O(log n) or a bounded slice of work; encoding,
//! decoding, metadata filters, building write sets ([`WriteSet::apply`]) and
//! assembling delta histories ([`delta_step`]) happen outside it, in `mod.rs`.
//!
//! # Layout
//!
//! The three tables of Python's in-memory saver (checkpoints, writes, values;
//! see `docs/design.md`, *In-memory backend*), partitioned by thread and
//! namespace so that no operation scans another thread:
//!
//! ```text
//! Store
//! ├── threads: HashMap<thread, Thread>          O(1) lookup, delete_thread unlinks one entry
//! ├── order:   BTreeSet<thread>                 list_threads / thread_ids in id order
//! └── global:  BTreeMap<(id, thread, ns), Rec>  list(None): the global order, see below
//! Thread
//! ├── namespaces: OrdMap<ns, Box<Namespace>>  (boxed: see the field)
//! └── by_id: OrdMap<(id, ns), Rec>              list(thread, every namespace)
//! Namespace
//! ├── checkpoints: OrdMap<id, Rec>              latest = last entry, by id = lookup
//! ├── writes: FastMap<checkpoint id, WriteEntry>     (writes may precede their checkpoint)
//! └── blobs:  OrdMap<channel, OrdMap<version, Stored>>
//! ```
//!
//! `Rec` = `Arc<Record>`: the same record is shared by the three ordered
//! indexes. A record also holds a handle (a cheap `Bytes` clone) on the stored
//! value of each of its channels, resolved once at `put`, so reading a
//! checkpoint never looks blobs up and decoding needs no lock. A record is
//! compact until a read needs its native form (see `record`).
//!
//! # Why a global index
//!
//! `list(None)` must yield checkpoint id DESC, then thread DESC, then namespace
//! DESC, one page at a time. Merging the per-thread orders on every page would
//! cost O(threads) per page (a heap over every thread, rebuilt after each lock
//! release); the global map makes a page O(log n + page) and the tie rule is
//! just the key's tuple order. Its upkeep is one extra O(log n) insert per
//! `put`. `delete_thread` unlinks the thread in O(1) and flips its shared
//! [`ThreadTag`] so scans skip its global entries at once; it then removes
//! them a slice of [`SCAN_BUDGET`] per lock hold, so no hold grows with the
//! thread. Removals of single checkpoints (`prune`, `delete_for_runs`) remove
//! their entries eagerly.
//!
//! The per-thread `by_id` map exists for the same reason at thread level:
//! `list(thread)` with every namespace, and the thread's latest checkpoint for
//! `list_threads`, without merging the namespaces of subgraph-heavy threads.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use indexmap::IndexMap;
use parking_lot::Mutex;

use crate::checkpoint::CheckpointMetadata;
use crate::engine::prune;
use crate::saver::json_eq;
use crate::serde::{TypedBytes, Value};
use crate::version::ChannelVersion;

use super::ordmap::OrdMap;
use super::ptree::PTree;

mod ckpt_id;
mod copy;
mod read;
mod record;
mod remove;
mod retain;
mod write;

pub(crate) use ckpt_id::CkptId;
pub(super) use copy::BuiltCopy;
pub(super) use record::{Cold, Record};
pub(super) use remove::PrunePlan;

/// The hash map of keys a graph chooses (namespaces, channels, versions,
/// checkpoint ids within one thread): foldhash, seeded at random per map,
/// several times faster than SipHash on these short keys. Thread ids, the
/// one key a service takes from its users and that every tenant shares, stay
/// in a SipHash map (`Store::threads`): a crafted set of colliding thread
/// ids could otherwise slow every thread's lookups; colliding keys within a
/// thread slow only that thread.
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Entries examined per lock hold by a scan (list pages, list_threads,
/// delete_for_runs), so a selective filter never holds the lock for long.
pub(super) const SCAN_BUDGET: usize = 1024;

/// A serializer tag, without an allocation for the common ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tag {
    Msgpack,
    Null,
    Bytes,
    Empty,
    Other(Arc<str>),
}

impl Tag {
    fn parse(tag: &str) -> Tag {
        match tag {
            "msgpack" => Tag::Msgpack,
            "null" => Tag::Null,
            "bytes" => Tag::Bytes,
            "empty" => Tag::Empty,
            other => Tag::Other(other.into()),
        }
    }

    pub(super) fn as_str(&self) -> &str {
        match self {
            Tag::Msgpack => "msgpack",
            Tag::Null => "null",
            Tag::Bytes => "bytes",
            Tag::Empty => "empty",
            Tag::Other(s) => s,
        }
    }
}

/// A stored value: the value itself when the saver's serializer preserves
/// values ([`Serializer::preserves_values`](crate::serde::Serializer::preserves_values):
/// shared, never re-encoded, read back by a reference-count increment), or the
/// bytes the serializer produced (an encrypting one, say).
#[derive(Debug, Clone)]
pub(crate) enum Stored {
    /// Serialized bytes and their tag.
    Encoded { tag: Tag, data: Bytes },
    /// A value kept as given; `size` is its msgpack length.
    Live { value: Value, size: usize },
}

impl Stored {
    pub(super) fn empty() -> Self {
        Stored::Encoded {
            tag: Tag::Empty,
            data: Bytes::new(),
        }
    }

    pub(super) fn is_empty_marker(&self) -> bool {
        matches!(self, Stored::Encoded { tag: Tag::Empty, .. })
    }

    /// Bytes accounted to `storage_bytes`: the serialized length (for a live
    /// value, the length its msgpack encoding has).
    pub(super) fn size(&self) -> usize {
        match self {
            Stored::Encoded { data, .. } => data.len(),
            Stored::Live { size, .. } => *size,
        }
    }
}

impl From<TypedBytes> for Stored {
    fn from(tb: TypedBytes) -> Self {
        Stored::Encoded {
            tag: Tag::parse(&tb.tag),
            data: tb.data,
        }
    }
}

/// Whether a thread is in the store; shared by all its records so that
/// `delete_thread` retires every global entry of the thread with one store,
/// and a `copy_thread` publishes every global entry of its copy with one.
///
/// States: dead (deleted), alive, pending (a copy whose global entries are
/// being inserted, invisible to scans), spoiled (a pending copy one of whose
/// entries a `put` replaced: it must not be published).
#[derive(Debug, Default)]
pub(super) struct ThreadTag(AtomicU8);

const DEAD: u8 = 0;
const ALIVE: u8 = 1;
const PENDING: u8 = 2;
const SPOILED: u8 = 3;

impl ThreadTag {
    fn alive() -> Arc<Self> {
        Arc::new(ThreadTag(AtomicU8::new(ALIVE)))
    }

    fn pending() -> Arc<Self> {
        Arc::new(ThreadTag(AtomicU8::new(PENDING)))
    }

    // Relaxed is enough: the state only changes under the write lock and is
    // only read under a lock.
    fn is_alive(&self) -> bool {
        self.0.load(Ordering::Relaxed) == ALIVE
    }

    fn is_pending(&self) -> bool {
        self.0.load(Ordering::Relaxed) == PENDING
    }

    fn is_dead(&self) -> bool {
        self.0.load(Ordering::Relaxed) == DEAD
    }

    fn kill(&self) {
        self.0.store(DEAD, Ordering::Relaxed);
    }

    /// A pending copy lost one of its entries: it will not be published.
    fn spoil(&self) {
        let _ = self
            .0
            .compare_exchange(PENDING, SPOILED, Ordering::Relaxed, Ordering::Relaxed);
    }

    fn publish(&self) {
        self.0.store(ALIVE, Ordering::Relaxed);
    }
}

/// One pending write.
#[derive(Debug, Clone)]
pub(super) struct WriteRec {
    pub(super) task_path: Arc<str>,
    pub(super) task_id: Arc<str>,
    pub(super) idx: i64,
    pub(super) channel: String,
    pub(super) value: Stored,
}

/// The key of a stored write: its order, (task_path, task_id, idx).
type WriteKey = (Arc<str>, Arc<str>, i64);

/// The writes of one checkpoint in (task_path, task_id, idx) order, so they
/// are returned without sorting. Persistent: a clone is O(1) and shares the
/// entries, so readers keep the version they were handed while `put_writes`
/// builds the next one outside the store lock, O(log n) per write.
#[derive(Debug, Clone, Default)]
pub(super) struct WriteSet {
    /// `None`: a write that moved to another task path (a tombstone).
    entries: PTree<WriteKey, Option<WriteRec>>,
    /// (task_id, idx) → the task path the write is stored under: the identity
    /// of a write is (task_id, idx) whatever the path.
    ids: PTree<(Arc<str>, i64), Arc<str>>,
    len: usize,
    bytes: usize,
}

impl WriteSet {
    /// Applies one write under the per-write rule: a regular write keeps the
    /// first value for (task_id, idx), a special channel's write replaces it.
    /// Returns the change in stored bytes. O(log n).
    pub(super) fn apply(&mut self, w: WriteRec, special: bool) -> isize {
        let before = self.bytes as isize;
        let id = (w.task_id.clone(), w.idx);
        if let Some(path) = self.ids.get(&id) {
            if !special {
                return 0;
            }
            if **path != *w.task_path {
                let old_key = (path.clone(), w.task_id.clone(), w.idx);
                let old = self.entries.insert(old_key, None).flatten();
                self.forget(old);
                self.ids.insert(id, w.task_path.clone());
            }
        } else {
            self.ids.insert(id, w.task_path.clone());
        }
        self.bytes += w.value.size();
        self.len += 1;
        let key = (w.task_path.clone(), w.task_id.clone(), w.idx);
        let old = self.entries.insert(key, Some(w)).flatten();
        self.forget(old);
        self.bytes as isize - before
    }

    fn forget(&mut self, old: Option<WriteRec>) {
        if let Some(old) = old {
            self.bytes = self.bytes.saturating_sub(old.value.size());
            self.len = self.len.saturating_sub(1);
        }
    }

    /// The writes in (task_path, task_id, idx) order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &WriteRec> {
        self.entries.iter().filter_map(|(_, w)| w.as_ref())
    }

    /// The number of writes.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn size(&self) -> usize {
        self.bytes
    }
}

/// The writes of one checkpoint as the store holds them: the current set and
/// the mutex that orders the `put_writes` calls building its next version
/// (only those wait on it: nothing holding the store lock ever waits for it).
#[derive(Debug, Clone, Default)]
pub(super) struct WriteEntry {
    pub(super) set: Arc<WriteSet>,
    pub(super) writer: Arc<Mutex<()>>,
}

impl WriteEntry {
    fn shared(set: Arc<WriteSet>) -> Self {
        WriteEntry {
            set,
            writer: Arc::default(),
        }
    }

    fn size(&self) -> usize {
        self.set.size()
    }
}

/// One (thread, namespace).
#[derive(Debug)]
pub(super) struct Namespace {
    pub(super) name: Arc<str>,
    pub(super) checkpoints: OrdMap<CkptId, Arc<Record>>,
    pub(super) writes: FastMap<String, WriteEntry>,
    /// channel → version string → value or `empty` marker ([`OrdMap`]s:
    /// most namespaces hold a few channels and most channels one or a few
    /// versions, and a hash table of one has room for four).
    pub(super) blobs: OrdMap<String, OrdMap<String, Stored>>,
    /// Wide puts writing their values a slice per lock hold before their
    /// checkpoint exists: while any is, values are not collected (they would
    /// look unreferenced).
    inflight: usize,
}

impl Namespace {
    fn new(name: &str) -> Self {
        Namespace {
            name: ns_name(name),
            checkpoints: OrdMap::new(),
            writes: FastMap::default(),
            blobs: OrdMap::new(),
            inflight: 0,
        }
    }

    fn blob(&self, channel: &str, version: &str) -> Option<&Stored> {
        self.blobs.get(channel)?.get(version)
    }

    fn is_empty(&self) -> bool {
        self.checkpoints.is_empty() && self.writes.is_empty() && self.blobs.is_empty() && self.inflight == 0
    }

    /// Removes blobs that no remaining checkpoint names. Returns freed bytes.
    fn collect_blobs(&mut self) -> usize {
        if self.inflight > 0 {
            return 0;
        }
        let mut referenced: HashSet<(&str, Cow<'_, str>)> = HashSet::new();
        for rec in self.checkpoints.values() {
            for (ch, ver) in rec.versions() {
                referenced.insert((ch, ver.key()));
            }
        }
        let mut dead: Vec<(String, String)> = Vec::new();
        for (ch, versions) in self.blobs.iter() {
            for ver in versions.keys() {
                if !referenced.contains(&(ch.as_str(), Cow::Borrowed(ver.as_str()))) {
                    dead.push((ch.clone(), ver.clone()));
                }
            }
        }
        drop(referenced);
        let mut freed = 0;
        for (ch, ver) in dead {
            if let Some(versions) = self.blobs.get_mut(&ch) {
                if let Some(s) = versions.remove(&ver) {
                    freed += s.size();
                }
                if versions.is_empty() {
                    self.blobs.remove(&ch);
                }
            }
        }
        freed
    }
}

/// A namespace name: the root namespace's is one string shared by every
/// thread.
fn ns_name(name: &str) -> Arc<str> {
    static ROOT: OnceLock<Arc<str>> = OnceLock::new();
    if name.is_empty() {
        ROOT.get_or_init(|| Arc::from("")).clone()
    } else {
        name.into()
    }
}

/// The blob key of a version: Python's `str(version)`, borrowed when it is
/// already a string.
pub(super) fn version_key(v: &ChannelVersion) -> Cow<'_, str> {
    match v {
        ChannelVersion::Str(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

/// One thread.
#[derive(Debug)]
pub(super) struct Thread {
    pub(super) name: Arc<str>,
    tag: Arc<ThreadTag>,
    /// An [`OrdMap`] (most threads have one namespace, and a hash table of
    /// one has room for four), boxed: a `Namespace` inline is some 100 bytes.
    pub(super) namespaces: OrdMap<Arc<str>, Box<Namespace>>,
    pub(super) by_id: OrdMap<ThreadKey, Arc<Record>>,
    bytes: usize,
}

impl Thread {
    fn new(name: &str) -> Self {
        Thread {
            name: name.into(),
            tag: ThreadTag::alive(),
            namespaces: OrdMap::new(),
            by_id: OrdMap::new(),
            bytes: 0,
        }
    }

    /// The checkpoint with the greatest id in any namespace (ties: greatest ns).
    pub(super) fn latest(&self) -> Option<(&Arc<str>, &Arc<Record>)> {
        self.by_id.iter().next_back().map(|((_, ns), rec)| (ns, rec))
    }

    fn ns_mut(&mut self, ns: &str) -> &mut Namespace {
        if !self.namespaces.contains_key(ns) {
            let n = Box::new(Namespace::new(ns));
            self.namespaces.insert(n.name.clone(), n);
        }
        // just inserted when missing
        self.namespaces.get_mut(ns).unwrap_or_else(|| unreachable!())
    }

    fn is_empty(&self) -> bool {
        self.namespaces.values().all(|n| n.is_empty())
    }
}

/// A checkpoint found by a read, with what is needed to build the tuple
/// outside the lock.
#[derive(Debug)]
pub(crate) struct Found {
    pub(super) thread: Arc<str>,
    pub(super) ns: Arc<str>,
    pub(super) record: Arc<Record>,
    pub(super) writes: Option<Arc<WriteSet>>,
}

/// Which checkpoints a `list` covers.
#[derive(Debug, Clone)]
pub(super) enum Scope {
    /// One checkpoint id (in one namespace, or every namespace of the thread).
    Exact {
        thread: String,
        ns: Option<String>,
        id: String,
    },
    /// One (thread, namespace).
    Ns { thread: String, ns: String },
    /// Every namespace of a thread.
    Thread { thread: String },
    /// Everything.
    All,
}

/// Where the next page starts: an exclusive upper bound in the scope's index.
#[derive(Debug, Clone)]
pub(crate) enum Cursor {
    Id(CkptId),
    IdNs(ThreadKey),
    Global(GlobalKey),
}

/// One page of a list.
#[derive(Debug)]
pub(super) struct Page {
    pub(super) items: Vec<Found>,
    /// `None` when the scope is exhausted.
    pub(super) next: Option<Cursor>,
}

/// What a put resolves under the lock for one channel of `channel_versions`.
#[derive(Debug, Clone)]
pub(super) enum Slot {
    /// Already resolved by a wide put's earlier slices.
    Resolved(Option<Stored>),
    /// The channel's value, encoded; it replaces the blob at its version.
    Write(Stored),
    /// A value the caller gave for a channel outside `new_versions`, encoded
    /// because no blob held it; stored unless a value appeared meanwhile.
    Fill(Stored),
    /// Not written by this put: the value is the blob at the version, if any.
    Lookup,
    /// In `new_versions` without a value: an `empty` marker (as Python's saver),
    /// written only where no value is stored (a value is never dropped).
    Empty,
}

/// A checkpoint to store, everything encoded.
#[derive(Debug)]
pub(super) struct NewCheckpoint<'a> {
    pub(super) thread: &'a str,
    pub(super) ns: &'a str,
    pub(super) id: CkptId,
    pub(super) parent: Option<Box<str>>,
    pub(super) cold: Cold,
    /// One per channel version of `cold`, in order.
    pub(super) slots: Vec<Slot>,
    /// Channels in `new_versions` but not in `channel_versions`: blob key and
    /// value (or `empty`), stored as Python does.
    pub(super) extra_blobs: Vec<(String, String, Stored)>,
    /// Encoded size of skeleton and metadata, computed (and their depth
    /// checked) before the lock is taken.
    pub(super) size: usize,
}

/// The whole store. Dead records are returned from mutating operations so the
/// caller drops them after releasing the lock.
#[derive(Debug, Default)]
pub(super) struct Store {
    threads: HashMap<Arc<str>, Thread>,
    order: BTreeSet<Arc<str>>,
    global: GlobalIndex,
}

/// (checkpoint id, thread, namespace): the global order is this tuple's,
/// reversed.
type GlobalKey = (CkptId, Arc<str>, Arc<str>);
type GlobalIndex = BTreeMap<GlobalKey, Arc<Record>>;
/// A key of a thread's `by_id` index: (checkpoint id, namespace).
pub(super) type ThreadKey = (CkptId, Arc<str>);
/// A record with its (thread, namespace).
pub(super) type Located = (Arc<str>, Arc<str>, Arc<Record>);

/// Things removed from the store, dropped after the lock is released, with a
/// rough count of the allocations they hold (see `reclaim`).
#[derive(Default)]
pub(super) struct Garbage {
    pub(super) items: Vec<Box<dyn Send>>,
    pub(super) weight: usize,
}

impl Garbage {
    fn push(&mut self, item: Box<dyn Send>, weight: usize) {
        self.items.push(item);
        self.weight += weight;
    }
}

impl Store {
    fn thread_mut(&mut self, name: &str) -> &mut Thread {
        if !self.threads.contains_key(name) {
            let t = Thread::new(name);
            self.order.insert(t.name.clone());
            self.threads.insert(t.name.clone(), t);
        }
        self.threads.get_mut(name).unwrap_or_else(|| unreachable!())
    }

    pub(super) fn thread_count(&self) -> usize {
        self.threads.len()
    }

    pub(super) fn thread_ids(&self) -> Vec<String> {
        self.order.iter().map(|t| t.to_string()).collect()
    }

    /// Sums (stored bytes, checkpoints) of up to [`SCAN_BUDGET`] threads after
    /// `after` (exclusive); returns the last thread summed when more remain.
    /// `storage_bytes` and `checkpoint_count` add these up a slice per lock
    /// hold, so a store of many threads is not summed under one.
    pub(super) fn totals_slice(&self, after: Option<&Arc<str>>) -> (usize, usize, Option<Arc<str>>) {
        let lower = after.map_or(Bound::Unbounded, |a| Bound::Excluded(a.clone()));
        let (mut bytes, mut count) = (0, 0);
        let mut last = None;
        for (i, name) in self.order.range((lower, Bound::Unbounded)).enumerate() {
            if i == SCAN_BUDGET {
                return (bytes, count, last);
            }
            if let Some(t) = self.threads.get(name) {
                bytes += t.bytes;
                count += t.by_id.len();
            }
            last = Some(name.clone());
        }
        (bytes, count, None)
    }

    /// The blob stored at (thread, ns, channel, version), if it is a value.
    pub(super) fn existing_value(&self, thread: &str, ns: &str, channel: &str, version: &str) -> Option<Stored> {
        self.threads
            .get(thread)?
            .namespaces
            .get(ns)?
            .blob(channel, version)
            .filter(|s| !s.is_empty_marker())
            .cloned()
    }

    #[cfg(test)]
    pub(super) fn global_len(&self) -> usize {
        self.global.len()
    }

    #[cfg(test)]
    pub(super) fn blob_tag(&self, thread: &str, ns: &str, channel: &str, version: &str) -> Option<Stored> {
        self.threads
            .get(thread)?
            .namespaces
            .get(ns)?
            .blob(channel, version)
            .cloned()
    }

    /// Thread weight for [`Garbage`]: about its allocations.
    pub(super) fn weight(t: &Thread) -> usize {
        t.by_id.len()
            + t.namespaces
                .values()
                .map(|n| n.writes.len() + n.blobs.len())
                .sum::<usize>()
    }
}

impl Page {
    fn done() -> Self {
        Page {
            items: Vec::new(),
            next: None,
        }
    }
}

/// [`crate::saver::metadata_matches`], finding keys by a linear scan in the
/// small maps metadata usually is (no hashing; string lengths reject most
/// keys before any byte is compared). Filters run on every scanned checkpoint.
pub(super) fn filter_matches(metadata: &CheckpointMetadata, filter: &IndexMap<String, Value>) -> bool {
    filter.iter().all(|(key, want)| {
        let have = if metadata.0.len() <= 8 {
            metadata
                .0
                .iter()
                .find(|(k, _)| k.as_str() == key.as_str())
                .map(|(_, v)| v)
        } else {
            metadata.0.get(key.as_str())
        };
        match have {
            Some(have) => json_eq(have, want),
            None => want.is_nil(),
        }
    })
}

/// `entry(key).or_default()` without allocating the key when it exists.
trait EntryRefOrDefault<V> {
    fn entry_ref_or_default(&mut self, key: &str) -> &mut V;
}

impl<V: Default> EntryRefOrDefault<V> for OrdMap<String, V> {
    fn entry_ref_or_default(&mut self, key: &str) -> &mut V {
        if !self.contains_key(key) {
            self.insert(key.to_owned(), V::default());
        }
        self.get_mut(key).unwrap_or_else(|| unreachable!())
    }
}
