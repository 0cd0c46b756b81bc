//! The data structures behind [`InMemorySaver`](super::InMemorySaver) and the
//! index operations on them. The `Store` methods are synchronous and run under
//! the saver's lock, each for O(log n) or a bounded slice of work; encoding,
//! decoding, metadata filters, building write sets ([`WriteSet::apply`]) and
//! assembling delta histories ([`delta_step`]) happen outside it, in `mod.rs`.
//!
//! # Layout
//!
//! Spec §6's three tables (storage, writes, blobs), partitioned by thread and
//! namespace so that no operation scans another thread:
//!
//! ```text
//! Store
//! ├── threads: HashMap<thread, Thread>          O(1) lookup, delete_thread unlinks one entry
//! ├── order:   BTreeSet<thread>                 list_threads / thread_ids in id order
//! └── global:  BTreeMap<(id, thread, ns), Rec>  list(None): the global order, see below
//! Thread
//! ├── namespaces: HashMap<ns, Namespace>
//! └── by_id: BTreeMap<(id, ns), Rec>            list(thread, every namespace)
//! Namespace
//! ├── checkpoints: BTreeMap<id, Rec>            latest = last entry, by id = lookup
//! ├── writes: HashMap<checkpoint id, WriteEntry>     (writes may precede their checkpoint)
//! └── blobs:  HashMap<channel, HashMap<version, Stored>>
//! ```
//!
//! `Rec` = `Arc<Record>`: the same record is shared by the three ordered
//! indexes. A record also holds a handle (a cheap `Bytes` clone) on the stored
//! value of each of its channels, resolved once at `put`, so reading a
//! checkpoint never looks blobs up and decoding needs no lock.
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
use std::sync::Arc;

use bytes::Bytes;
use indexmap::IndexMap;
use parking_lot::Mutex;

use crate::checkpoint::{Checkpoint, CheckpointMetadata};
use crate::engine::prune;
use crate::saver::json_eq;
use crate::serde::{TypedBytes, Value};
use crate::version::ChannelVersion;

use super::ptree::PTree;

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

/// One stored checkpoint. Immutable once built: a re-put replaces the record.
///
/// The skeleton (the checkpoint without `channel_values`) and the metadata are
/// kept as native values rather than serialized: reading one back is a plain
/// clone (the allocations an owned result needs anyway, without any parsing),
/// filters run on the metadata directly, and both are small next to channel
/// values, which are the part that must go through the serializer.
#[derive(Debug)]
pub(super) struct Record {
    pub(super) id: Arc<str>,
    pub(super) parent: Option<String>,
    pub(super) skeleton: Checkpoint,
    pub(super) metadata: CheckpointMetadata,
    /// The stored value of each channel of `skeleton.channel_versions`, in that
    /// order; `None` = no value (never an `empty` marker).
    pub(super) values: Box<[Option<Stored>]>,
    /// Values of channels in `channel_values` that have no version: kept so no
    /// value given to `put` is lost.
    pub(super) unversioned: Vec<(String, Stored)>,
    tag: Arc<ThreadTag>,
    /// Encoded size of skeleton and metadata (see `storage_bytes`).
    size: usize,
}

impl Record {
    /// Whether the checkpoint stores a value for `channel` (decided rule: any
    /// value, Nil included, counts; an `empty` marker does not).
    pub(super) fn stored_value(&self, channel: &str) -> Option<&Stored> {
        match self.skeleton.channel_versions.get_index_of(channel) {
            Some(i) => self.values.get(i).and_then(Option::as_ref),
            None => self.unversioned.iter().find(|(ch, _)| ch == channel).map(|(_, s)| s),
        }
    }

    fn with_tag(&self, tag: Arc<ThreadTag>) -> Record {
        Record {
            id: self.id.clone(),
            parent: self.parent.clone(),
            skeleton: self.skeleton.clone(),
            metadata: self.metadata.clone(),
            values: self.values.clone(),
            unversioned: self.unversioned.clone(),
            tag,
            size: self.size,
        }
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
    pub(super) checkpoints: BTreeMap<Arc<str>, Arc<Record>>,
    pub(super) writes: HashMap<String, WriteEntry>,
    /// channel → version string → value or `empty` marker (spec §6.1).
    pub(super) blobs: HashMap<String, HashMap<String, Stored>>,
    /// Wide puts writing their values a slice per lock hold before their
    /// checkpoint exists: while any is, values are not collected (they would
    /// look unreferenced).
    inflight: usize,
}

impl Namespace {
    fn new(name: &str) -> Self {
        Namespace {
            name: name.into(),
            checkpoints: BTreeMap::new(),
            writes: HashMap::new(),
            blobs: HashMap::new(),
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
            for (ch, ver) in &rec.skeleton.channel_versions {
                referenced.insert((ch.as_str(), version_key(ver)));
            }
        }
        let mut dead: Vec<(String, String)> = Vec::new();
        for (ch, versions) in &self.blobs {
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
    pub(super) namespaces: HashMap<Arc<str>, Namespace>,
    pub(super) by_id: BTreeMap<(Arc<str>, Arc<str>), Arc<Record>>,
    bytes: usize,
}

impl Thread {
    fn new(name: &str) -> Self {
        Thread {
            name: name.into(),
            tag: ThreadTag::alive(),
            namespaces: HashMap::new(),
            by_id: BTreeMap::new(),
            bytes: 0,
        }
    }

    /// The checkpoint with the greatest id in any namespace (ties: greatest ns).
    pub(super) fn latest(&self) -> Option<(&Arc<str>, &Arc<Record>)> {
        self.by_id.iter().next_back().map(|((_, ns), rec)| (ns, rec))
    }

    fn ns_mut(&mut self, ns: &str) -> &mut Namespace {
        if !self.namespaces.contains_key(ns) {
            let n = Namespace::new(ns);
            self.namespaces.insert(n.name.clone(), n);
        }
        // just inserted when missing
        self.namespaces.get_mut(ns).unwrap_or_else(|| unreachable!())
    }

    fn is_empty(&self) -> bool {
        self.namespaces.values().all(Namespace::is_empty)
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
    Id(Arc<str>),
    IdNs((Arc<str>, Arc<str>)),
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
    /// In `new_versions` without a value: an `empty` marker (spec §6.2),
    /// written only where no value is stored (a value is never dropped).
    Empty,
}

/// A checkpoint to store, everything encoded.
#[derive(Debug)]
pub(super) struct NewCheckpoint<'a> {
    pub(super) thread: &'a str,
    pub(super) ns: &'a str,
    pub(super) parent: Option<String>,
    pub(super) skeleton: Checkpoint,
    pub(super) metadata: CheckpointMetadata,
    /// One per entry of `skeleton.channel_versions`, in order.
    pub(super) slots: Vec<Slot>,
    /// Channels in `new_versions` but not in `channel_versions`: blob key and
    /// value (or `empty`), stored as Python does.
    pub(super) extra_blobs: Vec<(String, String, Stored)>,
    pub(super) unversioned: Vec<(String, Stored)>,
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
type GlobalKey = (Arc<str>, Arc<str>, Arc<str>);
type GlobalIndex = BTreeMap<GlobalKey, Arc<Record>>;
/// A key of a thread's `by_id` index: (checkpoint id, namespace).
pub(super) type ThreadKey = (Arc<str>, Arc<str>);
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

    /// Starts a wide put on (thread, ns): creates them if missing and holds
    /// off value collection there until [`Store::put_end`]. Returns the
    /// thread's tag, which later slices check.
    pub(super) fn put_begin(&mut self, thread: &str, ns: &str) -> Arc<ThreadTag> {
        let t = self.thread_mut(thread);
        t.ns_mut(ns).inflight += 1;
        t.tag.clone()
    }

    /// Ends a wide put begun with [`Store::put_begin`] (if the thread is still
    /// the one it began on).
    pub(super) fn put_end(&mut self, thread: &str, ns: &str, tag: &Arc<ThreadTag>) {
        if let Some(t) = self.threads.get_mut(thread).filter(|t| Arc::ptr_eq(&t.tag, tag)) {
            if let Some(n) = t.namespaces.get_mut(ns) {
                n.inflight = n.inflight.saturating_sub(1);
            }
        }
    }

    /// Whether `thread` is still the thread `tag` names.
    pub(super) fn same_thread(&self, thread: &str, tag: &Arc<ThreadTag>) -> bool {
        self.threads.get(thread).is_some_and(|t| Arc::ptr_eq(&t.tag, tag))
    }

    /// One slice of a wide put: resolves these slots (channel, blob key,
    /// slot) and stores these extra blobs in (thread, ns). `None` when the
    /// thread is no longer the one the put began on (deleted meanwhile).
    pub(super) fn put_slice(
        &mut self,
        thread: &str,
        ns: &str,
        tag: &Arc<ThreadTag>,
        slots: Vec<(&str, Cow<'_, str>, Slot)>,
        extras: Vec<(String, String, Stored)>,
    ) -> Option<Vec<Option<Stored>>> {
        let t = self.threads.get_mut(thread).filter(|t| Arc::ptr_eq(&t.tag, tag))?;
        let mut bytes = t.bytes as isize;
        let n = t.namespaces.get_mut(ns)?;
        let mut out = Vec::with_capacity(slots.len());
        for (ch, key, slot) in slots {
            out.push(apply_slot(n, ch, key, slot, &mut bytes));
        }
        for (ch, ver, s) in extras {
            apply_extra(n, &ch, ver, s, &mut bytes);
        }
        t.bytes = bytes.max(0) as usize;
        Some(out)
    }

    /// Stores a checkpoint. Returns the replaced record, if any.
    pub(super) fn put(&mut self, new: NewCheckpoint<'_>) -> Option<Arc<Record>> {
        let NewCheckpoint {
            thread,
            ns,
            parent,
            skeleton,
            metadata,
            slots,
            extra_blobs,
            unversioned,
            size,
        } = new;
        let Store { threads, order, global } = self;
        if !threads.contains_key(thread) {
            let t = Thread::new(thread);
            order.insert(t.name.clone());
            threads.insert(t.name.clone(), t);
        }
        let t = threads.get_mut(thread).unwrap_or_else(|| unreachable!());
        let tag = t.tag.clone();
        let thread_name = t.name.clone();
        let mut bytes = t.bytes as isize;
        let n = t.ns_mut(ns);

        let mut values = Vec::with_capacity(slots.len());
        for ((ch, ver), slot) in skeleton.channel_versions.iter().zip(slots) {
            values.push(apply_slot(n, ch, version_key(ver), slot, &mut bytes));
        }
        for (ch, ver, s) in extra_blobs {
            apply_extra(n, &ch, ver, s, &mut bytes);
        }

        let id: Arc<str> = skeleton.id.as_str().into();
        let record = Arc::new(Record {
            id: id.clone(),
            parent,
            skeleton,
            metadata,
            values: values.into_boxed_slice(),
            unversioned,
            tag,
            size,
        });
        bytes += size as isize;
        let replaced = n.checkpoints.insert(id.clone(), record.clone());
        let ns_name = n.name.clone();
        if let Some(old) = &replaced {
            bytes -= old.size as isize;
        }
        t.by_id.insert((id.clone(), ns_name.clone()), record.clone());
        t.bytes = bytes.max(0) as usize;
        // An entry left there by a deleted thread is replaced; one of a copy
        // being installed spoils that copy (the target now has a checkpoint).
        if let Some(old) = global.insert((id, thread_name, ns_name), record) {
            if old.tag.is_pending() {
                old.tag.spoil();
            }
        }
        replaced
    }

    /// The write entry of (thread, ns, checkpoint id), created (empty) when
    /// missing: writes may precede their checkpoint. O(1).
    pub(super) fn write_entry(&mut self, thread: &str, ns: &str, checkpoint_id: &str) -> WriteEntry {
        if let Some(e) = self.writes_of(thread, ns, checkpoint_id) {
            return e.clone();
        }
        let n = self.thread_mut(thread).ns_mut(ns);
        n.writes.entry(checkpoint_id.to_owned()).or_default().clone()
    }

    fn writes_of(&self, thread: &str, ns: &str, checkpoint_id: &str) -> Option<&WriteEntry> {
        self.threads.get(thread)?.namespaces.get(ns)?.writes.get(checkpoint_id)
    }

    /// The current set of a write entry obtained from [`Store::write_entry`],
    /// if the entry is still the stored one (not removed or replaced since).
    pub(super) fn write_set(
        &self,
        thread: &str,
        ns: &str,
        checkpoint_id: &str,
        entry: &WriteEntry,
    ) -> Option<Arc<WriteSet>> {
        let e = self.writes_of(thread, ns, checkpoint_id)?;
        Arc::ptr_eq(&e.writer, &entry.writer).then(|| e.set.clone())
    }

    /// Installs `next` (built from `base` by the holder of the entry's writer
    /// mutex) if `base` is still the current set; O(1). Returns the replaced
    /// set, to be dropped after the lock is released, or `next` back when the
    /// entry changed meanwhile (removed or replaced: build again).
    pub(super) fn swap_writes(
        &mut self,
        thread: &str,
        ns: &str,
        checkpoint_id: &str,
        base: &Arc<WriteSet>,
        next: Arc<WriteSet>,
        delta: isize,
    ) -> Result<Arc<WriteSet>, Arc<WriteSet>> {
        let Some(t) = self.threads.get_mut(thread) else {
            return Err(next);
        };
        let Some(e) = t.namespaces.get_mut(ns).and_then(|n| n.writes.get_mut(checkpoint_id)) else {
            return Err(next);
        };
        if !Arc::ptr_eq(&e.set, base) {
            return Err(next);
        }
        let old = std::mem::replace(&mut e.set, next);
        t.bytes = (t.bytes as isize + delta).max(0) as usize;
        Ok(old)
    }

    /// A checkpoint by id, or the latest of (thread, ns).
    pub(super) fn get(&self, thread: &str, ns: &str, id: Option<&str>) -> Option<Found> {
        let t = self.threads.get(thread)?;
        let n = t.namespaces.get(ns)?;
        let record = match id {
            Some(id) => n.checkpoints.get(id)?,
            None => n.checkpoints.values().next_back()?,
        };
        Some(Found {
            thread: t.name.clone(),
            ns: n.name.clone(),
            record: record.clone(),
            writes: n.writes.get(&*record.id).map(|e| e.set.clone()),
        })
    }

    /// The first cursor of a list scope: the exclusive bound `before`, or none.
    pub(super) fn first_cursor(scope: &Scope, before: Option<&str>) -> Option<Cursor> {
        let before: Arc<str> = before?.into();
        let empty: Arc<str> = Arc::from("");
        Some(match scope {
            Scope::Ns { .. } | Scope::Exact { .. } => Cursor::Id(before),
            Scope::Thread { .. } => Cursor::IdNs((before, empty)),
            Scope::All => Cursor::Global((before, empty.clone(), empty)),
        })
    }

    /// Up to `max_items` checkpoints below `cursor`, newest first, examining
    /// at most [`SCAN_BUDGET`] entries. A metadata filter is applied by the
    /// caller, outside the lock: its cost is the caller's (the filter's size
    /// times the metadata's), not the lock's.
    pub(super) fn page(&self, scope: &Scope, cursor: Option<&Cursor>, max_items: usize) -> Page {
        match scope {
            Scope::Exact { thread, ns, id } => {
                let mut items = Vec::new();
                let below = |id: &str| match cursor {
                    Some(Cursor::Id(b)) => id < &**b,
                    _ => true,
                };
                if let Some(t) = self.threads.get(thread.as_str()) {
                    if below(id) {
                        let found = |n: &Namespace| {
                            let rec = n.checkpoints.get(id.as_str())?;
                            Some(Found {
                                thread: t.name.clone(),
                                ns: n.name.clone(),
                                record: rec.clone(),
                                writes: n.writes.get(id.as_str()).map(|e| e.set.clone()),
                            })
                        };
                        match ns {
                            Some(ns) => items.extend(t.namespaces.get(ns.as_str()).and_then(found)),
                            None => {
                                let mut hits: Vec<&Namespace> = t
                                    .by_id
                                    .range::<(Arc<str>, Arc<str>), _>((
                                        Bound::Included((Arc::from(id.as_str()), Arc::from(""))),
                                        Bound::Unbounded,
                                    ))
                                    .take_while(|((i, _), _)| **i == **id)
                                    .filter_map(|((_, ns), _)| t.namespaces.get(ns))
                                    .collect();
                                hits.reverse();
                                items.extend(hits.into_iter().filter_map(found).take(max_items));
                            }
                        }
                    }
                }
                Page { items, next: None }
            }
            Scope::Ns { thread, ns } => {
                let Some(t) = self.threads.get(thread.as_str()) else {
                    return Page::done();
                };
                let Some(n) = t.namespaces.get(ns.as_str()) else {
                    return Page::done();
                };
                let upper = match cursor {
                    Some(Cursor::Id(b)) => Bound::Excluded(&**b),
                    _ => Bound::Unbounded,
                };
                let iter = n.checkpoints.range::<str, _>((Bound::Unbounded, upper)).rev();
                let (items, last) = scan(iter, max_items, |_, rec| {
                    Some(Found {
                        thread: t.name.clone(),
                        ns: n.name.clone(),
                        record: rec.clone(),
                        writes: n.writes.get(&*rec.id).map(|e| e.set.clone()),
                    })
                });
                Page {
                    items,
                    next: last.map(Cursor::Id),
                }
            }
            Scope::Thread { thread } => {
                let Some(t) = self.threads.get(thread.as_str()) else {
                    return Page::done();
                };
                let upper = match cursor {
                    Some(Cursor::IdNs(b)) => Bound::Excluded(b.clone()),
                    _ => Bound::Unbounded,
                };
                let iter = t.by_id.range((Bound::Unbounded, upper)).rev();
                let (items, last) = scan(iter, max_items, |(_, ns), rec| {
                    let n = t.namespaces.get(ns)?;
                    Some(Found {
                        thread: t.name.clone(),
                        ns: n.name.clone(),
                        record: rec.clone(),
                        writes: n.writes.get(&*rec.id).map(|e| e.set.clone()),
                    })
                });
                Page {
                    items,
                    next: last.map(Cursor::IdNs),
                }
            }
            Scope::All => {
                let upper = match cursor {
                    Some(Cursor::Global(b)) => Bound::Excluded(b.clone()),
                    _ => Bound::Unbounded,
                };
                let iter = self.global.range((Bound::Unbounded, upper)).rev();
                let (items, last) = scan(iter, max_items, |(_, thread, ns), rec| {
                    if !rec.tag.is_alive() {
                        return None;
                    }
                    let t = self.threads.get(thread)?;
                    let n = t.namespaces.get(ns)?;
                    Some(Found {
                        thread: t.name.clone(),
                        ns: n.name.clone(),
                        record: rec.clone(),
                        writes: n.writes.get(&*rec.id).map(|e| e.set.clone()),
                    })
                });
                Page {
                    items,
                    next: last.map(Cursor::Global),
                }
            }
        }
    }

    /// Unlinks a thread, O(1): every read stops seeing it now (its global
    /// entries die with its tag). The caller then removes those entries in
    /// slices with [`Store::drop_global`], releasing the lock in between, and
    /// frees the thread.
    pub(super) fn unlink_thread(&mut self, thread: &str) -> Option<Thread> {
        let t = self.threads.remove(thread)?;
        self.order.remove(thread);
        t.tag.kill();
        Some(t)
    }

    /// Removes from the global index up to [`SCAN_BUDGET`] entries of the
    /// unlinked thread `t`, from its (id, ns) `after` (exclusive) on, unless a
    /// record of a re-created thread took the key meanwhile. Returns where to
    /// go on, `None` when done.
    pub(super) fn drop_global(
        &mut self,
        t: &Thread,
        after: Option<&(Arc<str>, Arc<str>)>,
        garbage: &mut Garbage,
    ) -> Option<(Arc<str>, Arc<str>)> {
        let lower = after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.clone()));
        for (i, ((id, ns), rec)) in t.by_id.range((lower, Bound::Unbounded)).enumerate() {
            let key = (id.clone(), t.name.clone(), ns.clone());
            if self.global.get(&key).is_some_and(|g| Arc::ptr_eq(g, rec)) {
                if let Some(old) = self.global.remove(&key) {
                    garbage.push(Box::new(old), 1);
                }
            }
            // The cursor is exclusive: the last key handled.
            if i + 1 == SCAN_BUDGET {
                return Some((id.clone(), ns.clone()));
            }
        }
        None
    }

    /// Thread weight for [`Garbage`]: about its allocations.
    pub(super) fn weight(t: &Thread) -> usize {
        t.by_id.len()
            + t.namespaces
                .values()
                .map(|n| n.writes.len() + n.blobs.len())
                .sum::<usize>()
    }

    /// Removes one checkpoint of (thread, ns) from the three indexes, with its
    /// writes.
    fn remove_checkpoint(
        global: &mut GlobalIndex,
        t: &mut Thread,
        ns: &Arc<str>,
        id: &Arc<str>,
        garbage: &mut Garbage,
    ) {
        let Some(n) = t.namespaces.get_mut(ns) else {
            return;
        };
        let Some(rec) = n.checkpoints.remove(id) else {
            return;
        };
        let mut freed = rec.size;
        if let Some(w) = n.writes.remove(&**id) {
            freed += w.size();
            garbage.push(Box::new(w), 1);
        }
        t.by_id.remove(&(id.clone(), ns.clone()));
        global.remove(&(id.clone(), t.name.clone(), ns.clone()));
        t.bytes = t.bytes.saturating_sub(freed);
        garbage.push(Box::new(rec), 1);
    }

    /// Drops empty namespaces and, when nothing is left, the thread.
    fn tidy_thread(&mut self, thread: &str, garbage: &mut Garbage) {
        let Some(t) = self.threads.get_mut(thread) else {
            return;
        };
        t.namespaces.retain(|_, n| !n.is_empty());
        if t.is_empty() {
            if let Some(t) = self.threads.remove(thread) {
                self.order.remove(thread);
                garbage.push(Box::new(t), 1);
            }
        }
    }

    /// Checkpoints whose metadata `run_id` is in `run_ids`, from `from` on
    /// (threads in id order, each thread's checkpoints in (id, ns) order),
    /// examining at most about [`SCAN_BUDGET`] checkpoints, also inside one
    /// large thread. Returns the victims and where to go on (`None` = done).
    pub(super) fn find_runs(
        &self,
        run_ids: &HashSet<&str>,
        from: Option<&RunCursor>,
    ) -> (Vec<Located>, Option<RunCursor>) {
        let lower = match from {
            None => Bound::Unbounded,
            Some(RunCursor::AfterThread(t)) => Bound::Excluded(t.clone()),
            Some(RunCursor::InThread(t, _)) => Bound::Included(t.clone()),
        };
        let mut victims = Vec::new();
        let mut examined = 0;
        for name in self.order.range((lower, Bound::Unbounded)) {
            let Some(t) = self.threads.get(name) else {
                continue;
            };
            let start = match from {
                Some(RunCursor::InThread(at, key)) if at == name => Bound::Excluded(key.clone()),
                _ => Bound::Unbounded,
            };
            for (key, rec) in t.by_id.range((start, Bound::Unbounded)) {
                if rec.metadata.run_id().is_some_and(|r| run_ids.contains(r)) {
                    victims.push((name.clone(), key.1.clone(), rec.clone()));
                }
                examined += 1;
                if examined >= SCAN_BUDGET {
                    return (victims, Some(RunCursor::InThread(name.clone(), key.clone())));
                }
            }
            examined += 1;
            if examined >= SCAN_BUDGET {
                return (victims, Some(RunCursor::AfterThread(name.clone())));
            }
        }
        (victims, None)
    }

    /// Removes the given checkpoints if they are still the stored ones, with
    /// their writes; O(log n) each. Returns the (thread, ns) touched: the
    /// caller collects their values once at the end ([`Store::collect_ns`]),
    /// not once per slice of victims.
    pub(super) fn delete_records(
        &mut self,
        victims: Vec<Located>,
        garbage: &mut Garbage,
    ) -> BTreeSet<(Arc<str>, Arc<str>)> {
        let mut touched: BTreeSet<(Arc<str>, Arc<str>)> = BTreeSet::new();
        for (thread, ns, rec) in victims {
            let Store { threads, global, .. } = self;
            let Some(t) = threads.get_mut(&*thread) else {
                continue;
            };
            let current = t.namespaces.get(&*ns).and_then(|n| n.checkpoints.get(&*rec.id));
            if !current.is_some_and(|c| Arc::ptr_eq(c, &rec)) {
                continue;
            }
            Self::remove_checkpoint(global, t, &ns, &rec.id, garbage);
            touched.insert((thread, ns));
        }
        touched
    }

    /// Removes the values no remaining checkpoint of (thread, ns) names, then
    /// the namespace and thread if nothing is left. O(size of the namespace).
    pub(super) fn collect_ns(&mut self, thread: &str, ns: &str, garbage: &mut Garbage) {
        if let Some(t) = self.threads.get_mut(thread) {
            if let Some(n) = t.namespaces.get_mut(ns) {
                t.bytes = t.bytes.saturating_sub(n.collect_blobs());
            }
        }
        self.tidy_thread(thread, garbage);
    }

    /// The write ids of one namespace of `thread` (for a prune's plan).
    pub(super) fn write_ids(&self, thread: &str, tag: &Arc<ThreadTag>, ns: &str) -> Result<Vec<String>, ()> {
        let t = self.source_of(thread, tag).ok_or(())?;
        Ok(t.namespaces
            .get(ns)
            .map(|n| n.writes.keys().cloned().collect())
            .unwrap_or_default())
    }

    /// Removes the writes of (thread, ns) with these checkpoint ids where no
    /// checkpoint has the id (any more). O(log n) each.
    pub(super) fn remove_orphan_writes(&mut self, thread: &str, ns: &str, ids: &[String], garbage: &mut Garbage) {
        let Some(t) = self.threads.get_mut(thread) else {
            return;
        };
        let Some(n) = t.namespaces.get_mut(ns) else {
            return;
        };
        for id in ids {
            if n.checkpoints.contains_key(id.as_str()) {
                continue;
            }
            if let Some(w) = n.writes.remove(id) {
                t.bytes = t.bytes.saturating_sub(w.size());
                garbage.push(Box::new(w), 1);
            }
        }
    }

    /// Removes a namespace of `thread` whole (writes and values) if it has no
    /// checkpoint left; O(1), its contents freed outside the lock.
    pub(super) fn drop_ns_if_empty(&mut self, thread: &str, ns: &str, garbage: &mut Garbage) {
        if let Some(t) = self.threads.get_mut(thread) {
            if t.namespaces
                .get(ns)
                .is_some_and(|n| n.checkpoints.is_empty() && n.inflight == 0)
            {
                if let Some(n) = t.namespaces.remove(ns) {
                    let left = n.writes.values().map(|w| w.size()).sum::<usize>()
                        + n.blobs
                            .values()
                            .flat_map(|v| v.values())
                            .map(Stored::size)
                            .sum::<usize>();
                    t.bytes = t.bytes.saturating_sub(left);
                    let weight = n.writes.len() + n.blobs.len();
                    garbage.push(Box::new(n), weight);
                }
            }
        }
        self.tidy_thread(thread, garbage);
    }

    /// The start of a `copy_thread` snapshot of `source`: its tag (which later
    /// slices check, so a source deleted or re-created meanwhile is noticed)
    /// and its namespaces. `None` for an unknown source.
    pub(super) fn copy_source(&self, source: &str) -> Option<(Arc<ThreadTag>, Vec<Arc<str>>)> {
        let t = self.threads.get(source)?;
        Some((t.tag.clone(), t.namespaces.keys().cloned().collect()))
    }

    fn source_of(&self, source: &str, tag: &Arc<ThreadTag>) -> Option<&Thread> {
        self.threads.get(source).filter(|t| Arc::ptr_eq(&t.tag, tag))
    }

    /// Up to [`SCAN_BUDGET`] records of `source` after (id, ns) `after`, with
    /// where to go on (`None` = done); `Err` when the source is no longer the
    /// thread `tag` names (deleted meanwhile).
    pub(super) fn copy_records(
        &self,
        source: &str,
        tag: &Arc<ThreadTag>,
        after: Option<&(Arc<str>, Arc<str>)>,
    ) -> CopySlice {
        let Some(t) = self.source_of(source, tag) else {
            return Err(());
        };
        let lower = after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.clone()));
        let mut out = Vec::new();
        for (key, rec) in t.by_id.range((lower, Bound::Unbounded)) {
            out.push((key.1.clone(), rec.clone()));
            if out.len() == SCAN_BUDGET {
                return Ok((out, Some(key.clone())));
            }
        }
        Ok((out, None))
    }

    /// The writes and values of one namespace of `source` (handle clones).
    pub(super) fn copy_extras(&self, source: &str, tag: &Arc<ThreadTag>, ns: &str) -> Result<NsExtras, ()> {
        let t = self.source_of(source, tag).ok_or(())?;
        Ok(match t.namespaces.get(ns) {
            Some(n) => (
                n.writes.iter().map(|(id, e)| (id.clone(), e.set.clone())).collect(),
                n.blobs.clone(),
            ),
            None => Default::default(),
        })
    }

    /// Whether a thread has any checkpoint.
    pub(super) fn has_checkpoints(&self, thread: &str) -> bool {
        self.threads.get(thread).is_some_and(|t| !t.by_id.is_empty())
    }

    /// Inserts up to [`SCAN_BUDGET`] global entries of a copy being installed,
    /// after (id, ns) `after`; they stay invisible while its tag is pending.
    /// `Err` when a key is held by a live record (the target has checkpoints:
    /// the copy is refused). Returns where to go on, `None` when done.
    pub(super) fn pend_global(
        &mut self,
        copy: &BuiltCopy,
        after: Option<&(Arc<str>, Arc<str>)>,
        garbage: &mut Garbage,
    ) -> Result<Option<ThreadKey>, ()> {
        let t = &copy.thread;
        let lower = after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.clone()));
        for (i, ((id, ns), rec)) in t.by_id.range((lower, Bound::Unbounded)).enumerate() {
            let key = (id.clone(), t.name.clone(), ns.clone());
            if self.global.get(&key).is_some_and(|g| !g.tag.is_dead()) {
                return Err(());
            }
            if let Some(old) = self.global.insert(key, rec.clone()) {
                garbage.push(Box::new(old), 1);
            }
            if i + 1 == SCAN_BUDGET {
                return Ok(Some((id.clone(), ns.clone())));
            }
        }
        Ok(None)
    }

    /// Makes a copy whose global entries are all in place visible, O(1) plus
    /// the writes and values a writes-only target held before (kept where the
    /// copy has no entry of the same key). Hands the copy back when the target
    /// got a checkpoint meanwhile.
    pub(super) fn publish_copy(&mut self, copy: BuiltCopy, garbage: &mut Garbage) -> Result<(), BuiltCopy> {
        let name = copy.thread.name.clone();
        if !copy.thread.tag.is_pending() || self.has_checkpoints(&name) {
            return Err(copy);
        }
        let mut t = copy.thread;
        if let Some(old) = self.threads.remove(&name) {
            let mut bytes = t.bytes;
            for (ns, n) in old.namespaces {
                let into = t.ns_mut(&ns);
                for (id, w) in n.writes {
                    if let std::collections::hash_map::Entry::Vacant(e) = into.writes.entry(id) {
                        bytes += w.size();
                        e.insert(w);
                    }
                }
                for (ch, versions) in n.blobs {
                    let to = into.blobs.entry_ref_or_default(&ch);
                    for (ver, s) in versions {
                        if let std::collections::hash_map::Entry::Vacant(e) = to.entry(ver) {
                            bytes += s.size();
                            e.insert(s);
                        }
                    }
                }
            }
            t.bytes = bytes;
            garbage.push(Box::new(old.tag), 1);
        }
        t.tag.publish();
        self.order.insert(name.clone());
        self.threads.insert(name, t);
        Ok(())
    }

    /// Threads after `after` (exclusive) in id order with their latest
    /// checkpoint, at most [`SCAN_BUDGET`] threads examined.
    /// The caller applies its metadata filter outside the lock.
    pub(super) fn threads_page(&self, after: Option<&str>, max_items: usize) -> (Vec<Located>, Option<Arc<str>>) {
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut out = Vec::new();
        let mut last = None;
        for (examined, name) in self.order.range::<str, _>((lower, Bound::Unbounded)).enumerate() {
            if examined == SCAN_BUDGET || out.len() == max_items {
                return (out, last);
            }
            last = Some(name.clone());
            let Some((ns, rec)) = self.threads.get(name).and_then(Thread::latest) else {
                continue;
            };
            out.push((name.clone(), ns.clone(), rec.clone()));
        }
        (out, None)
    }

    /// Up to [`SCAN_BUDGET`] links of a parent chain in (thread, ns), with
    /// each checkpoint's writes: from the parent of the target (config id, or
    /// the latest) when `from` is `None`, else from the checkpoint `from`.
    /// `None` when there is no target. The delta history is assembled from
    /// these outside the lock (see [`delta_step`]).
    pub(super) fn chain(&self, thread: &str, ns: &str, id: Option<&str>, from: Option<&str>) -> Option<Vec<Link>> {
        let n = self.threads.get(thread)?.namespaces.get(ns)?;
        let mut next = match from {
            Some(from) => Some(from),
            None => {
                let target = match id {
                    Some(id) => n.checkpoints.get(id)?,
                    None => n.checkpoints.values().next_back()?,
                };
                target.parent.as_deref()
            }
        };
        let mut out = Vec::new();
        while let Some(id) = next {
            if out.len() == SCAN_BUDGET {
                break;
            }
            let Some(rec) = n.checkpoints.get(id) else {
                break;
            };
            out.push((rec.clone(), n.writes.get(id).map(|e| e.set.clone())));
            next = rec.parent.as_deref();
        }
        Some(out)
    }
}

/// Resolves one slot of a put in namespace `n`: writes the blob it stores, if
/// any, and returns the value the checkpoint holds for the channel.
fn apply_slot(n: &mut Namespace, ch: &str, key: Cow<'_, str>, slot: Slot, bytes: &mut isize) -> Option<Stored> {
    match slot {
        Slot::Resolved(v) => v,
        Slot::Lookup => n.blob(ch, &key).filter(|s| !s.is_empty_marker()).cloned(),
        Slot::Write(s) => {
            *bytes += s.size() as isize;
            if let Some(old) = n.blobs.entry_ref_or_default(ch).insert(key.into_owned(), s.clone()) {
                *bytes -= old.size() as isize;
            }
            Some(s).filter(|s| !s.is_empty_marker())
        }
        Slot::Fill(s) => match n.blob(ch, &key) {
            Some(existing) if !existing.is_empty_marker() => Some(existing.clone()),
            _ => {
                *bytes += s.size() as isize;
                if let Some(old) = n.blobs.entry_ref_or_default(ch).insert(key.into_owned(), s.clone()) {
                    *bytes -= old.size() as isize;
                }
                Some(s)
            }
        },
        Slot::Empty => {
            let versions = n.blobs.entry_ref_or_default(ch);
            if !versions.contains_key(key.as_ref()) {
                versions.insert(key.into_owned(), Stored::empty());
            }
            None
        }
    }
}

/// Stores a blob of a channel in `new_versions` but not in `channel_versions`.
fn apply_extra(n: &mut Namespace, ch: &str, ver: String, s: Stored, bytes: &mut isize) {
    let versions = n.blobs.entry_ref_or_default(ch);
    match versions.get(&ver) {
        Some(existing) if !existing.is_empty_marker() && s.is_empty_marker() => {}
        _ => {
            *bytes += s.size() as isize;
            if let Some(old) = versions.insert(ver, s) {
                *bytes -= old.size() as isize;
            }
        }
    }
}

/// One checkpoint of a parent chain with its writes (see [`Store::chain`]).
pub(super) type Link = (Arc<Record>, Option<Arc<WriteSet>>);

/// Where `find_runs` goes on.
#[derive(Debug, Clone)]
pub(super) enum RunCursor {
    /// With the thread after this one.
    AfterThread(Arc<str>),
    /// In this thread, after this (id, ns).
    InThread(Arc<str>, (Arc<str>, Arc<str>)),
}

/// One slice of a copy's source records, (ns, record); `Err` = the source
/// went away.
pub(super) type CopySlice = Result<(Vec<(Arc<str>, Arc<Record>)>, Option<(Arc<str>, Arc<str>)>), ()>;

/// The writes and values of one namespace, for a copy.
pub(super) type NsExtras = (HashMap<String, Arc<WriteSet>>, HashMap<String, HashMap<String, Stored>>);

/// A thread copy built outside the lock: a whole [`Thread`] under a pending
/// tag, so that its global entries can be inserted a slice per lock hold
/// before it is published in O(1).
#[derive(Debug)]
pub(super) struct BuiltCopy {
    thread: Thread,
}

impl BuiltCopy {
    /// An empty copy named `target`.
    pub(super) fn new(target: &str) -> Self {
        let mut thread = Thread::new(target);
        thread.tag = ThreadTag::pending();
        BuiltCopy { thread }
    }

    /// Adds copies of source records (re-tagged, so they live and die with
    /// the target).
    pub(super) fn add_records(&mut self, records: Vec<(Arc<str>, Arc<Record>)>) {
        let t = &mut self.thread;
        for (ns, rec) in records {
            let rec = Arc::new(rec.with_tag(t.tag.clone()));
            t.bytes += rec.size;
            let n = t.ns_mut(&ns);
            let ns = n.name.clone();
            n.checkpoints.insert(rec.id.clone(), rec.clone());
            t.by_id.insert((rec.id.clone(), ns), rec);
        }
    }

    /// Adds the writes and values of a namespace (shared, copy-on-write).
    pub(super) fn add_extras(&mut self, ns: &str, (writes, blobs): NsExtras) {
        let t = &mut self.thread;
        let mut bytes = t.bytes;
        let n = t.ns_mut(ns);
        for (id, w) in writes {
            bytes += w.size();
            n.writes.insert(id, WriteEntry::shared(w));
        }
        for versions in blobs.values() {
            bytes += versions.values().map(Stored::size).sum::<usize>();
        }
        n.blobs = blobs;
        t.bytes = bytes;
    }

    /// Whether the copy holds anything.
    pub(super) fn is_empty(&self) -> bool {
        self.thread.is_empty()
    }

    /// The thread built (to remove its pending global entries with
    /// [`Store::drop_global`] when the copy is refused).
    pub(super) fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Thread weight for [`Garbage`].
    pub(super) fn into_garbage(self) -> Garbage {
        let weight = Store::weight(&self.thread);
        Garbage {
            items: vec![Box::new(self.thread)],
            weight,
        }
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

/// Walks `iter` (newest first) collecting accepted entries: stops at
/// `max_items` hits or [`SCAN_BUDGET`] entries. Returns the hits and the last
/// key examined when the scan stopped early (`None` = exhausted).
fn scan<'a, K: Clone + 'a>(
    iter: impl Iterator<Item = (&'a K, &'a Arc<Record>)>,
    max_items: usize,
    mut accept: impl FnMut(&K, &Arc<Record>) -> Option<Found>,
) -> (Vec<Found>, Option<K>) {
    let mut items = Vec::new();
    for (examined, (k, rec)) in iter.enumerate() {
        if let Some(found) = accept(k, rec) {
            items.push(found);
        }
        if items.len() >= max_items || examined + 1 >= SCAN_BUDGET {
            return (items, Some(k.clone()));
        }
    }
    (items, None)
}

/// What `prune(KeepLatest)` removes from a thread, planned outside the lock
/// from a snapshot of its records (oldest first) and write ids.
#[derive(Debug, Default)]
pub(super) struct PrunePlan {
    /// Checkpoints to remove, (id, ns) ascending.
    pub(super) victims: Vec<Located>,
    /// Per-call namespaces of older root checkpoints: removed whole.
    pub(super) drop_ns: Vec<Arc<str>>,
    /// Per namespace, write ids with no checkpoint older than its head.
    pub(super) orphan_writes: Vec<(Arc<str>, Vec<String>)>,
}

impl PrunePlan {
    /// What [`crate::engine::prune`]'s rule removes from the snapshot.
    pub(super) fn new(
        thread: &Arc<str>,
        records: Vec<(Arc<str>, Arc<Record>)>,
        mut write_ids: HashMap<Arc<str>, Vec<String>>,
    ) -> Self {
        let mut by_ns: HashMap<Arc<str>, BTreeMap<Arc<str>, Arc<Record>>> = HashMap::new();
        for (ns, rec) in records {
            by_ns.entry(ns).or_default().insert(rec.id.clone(), rec);
        }
        let heads: Vec<prune::Head> = by_ns
            .iter()
            .filter_map(|(ns, checkpoints)| {
                let head = checkpoints.values().next_back()?;
                let unstored = head
                    .skeleton
                    .channel_versions
                    .keys()
                    .enumerate()
                    .filter(|(i, _)| head.values.get(*i).is_none_or(Option::is_none))
                    .map(|(_, ch)| ch.as_str());
                Some(prune::Head::new(&**ns, &*head.id, &head.metadata, unstored))
            })
            .collect();
        let root = by_ns.get("");
        let saved: HashSet<&str> = prune::roots_to_check(&heads)
            .into_iter()
            .filter(|r| root.is_some_and(|c| c.contains_key(*r)))
            .collect();
        let mut plan = PrunePlan::default();
        let mut remove: Vec<(Arc<str>, Arc<str>, Arc<Record>)> = Vec::new();
        for action in prune::plan(&heads, &saved) {
            let keep = match action {
                prune::Action::Drop(name) => {
                    let Some((name, checkpoints)) = by_ns.get_key_value(name) else {
                        continue;
                    };
                    plan.drop_ns.push(name.clone());
                    for rec in checkpoints.values() {
                        remove.push((rec.id.clone(), name.clone(), rec.clone()));
                    }
                    write_ids.remove(name);
                    continue;
                }
                prune::Action::Keep(keep) => keep,
            };
            let Some((name, checkpoints)) = by_ns.get_key_value(keep.ns) else {
                continue;
            };
            let mut walk = prune::KeptAncestry::new(keep.walk);
            let mut next = checkpoints.get(keep.head).and_then(|h| h.parent.as_deref());
            while let (true, Some(id)) = (walk.wants_more(), next.take()) {
                let Some(rec) = checkpoints.get(id) else {
                    break;
                };
                if walk.step(&rec.id, |ch| rec.stored_value(ch).is_some()) {
                    next = rec.parent.as_deref();
                }
            }
            let mut kept: HashSet<String> = walk.into_kept().into_iter().collect();
            kept.insert(keep.head.to_owned());
            for (id, rec) in checkpoints {
                if !kept.contains(&**id) {
                    remove.push((id.clone(), name.clone(), rec.clone()));
                }
            }
            // Writes with no checkpoint older than the head can no longer get
            // one; newer ones may belong to a put in flight.
            if let Some(ids) = write_ids.remove(name) {
                let orphans: Vec<String> = ids
                    .into_iter()
                    .filter(|id| id.as_str() < keep.head && !checkpoints.contains_key(id.as_str()))
                    .collect();
                if !orphans.is_empty() {
                    plan.orphan_writes.push((name.clone(), orphans));
                }
            }
        }
        remove.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        plan.victims = remove
            .into_iter()
            .map(|(_, ns, rec)| (thread.clone(), ns, rec))
            .collect();
        plan
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

/// `HashMap<String, V>::entry` without allocating the key when it exists.
trait EntryRefOrDefault<V> {
    fn entry_ref_or_default(&mut self, key: &str) -> &mut V;
}

impl<V: Default> EntryRefOrDefault<V> for HashMap<String, V> {
    fn entry_ref_or_default(&mut self, key: &str) -> &mut V {
        if !self.contains_key(key) {
            self.insert(key.to_owned(), V::default());
        }
        self.get_mut(key).unwrap_or_else(|| unreachable!())
    }
}
