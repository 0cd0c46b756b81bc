//! `InMemorySaver`: the reference backend.
//!
//! With the default [`JsonPlusSerializer`] every value is kept as given:
//! [`Value`]'s lists and maps are shared copy-on-write, so storing one and
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
//! | `get_tuple` (by id or latest) | O(log n) under the lock; copying the skeleton (and decoding, with a non-default serializer) outside it |
//! | `list` page | O(log N + examined entries), at most 64 tuples and 1024 entries per lock hold; metadata filters run outside the lock |
//! | `delete_thread` | O(1) unlink, then its global entries removed 1024 per lock hold; a large thread is freed by a background thread (`reclaim`) |
//! | `delete_for_runs` | O(N) scan in slices of 1024 checkpoints (also inside one thread), O(log N) per deleted checkpoint |
//! | `copy_thread` | O(size of the source thread), values shared, not re-encoded: the source read 1024 checkpoints per lock hold (writes and values one namespace per hold), the target built outside the lock, its global entries inserted 1024 per hold under a pending tag, then published in O(1) (whole or not at all) |
//! | `prune` | O(size of each pruned thread): keep-latest plans from a snapshot read 1024 checkpoints per lock hold (write ids one namespace per hold) and removes 1024 victims per hold, oldest first; the values no kept checkpoint names are then collected one namespace per hold |
//! | `get_delta_channel_history` | O(chain depth × (writes per checkpoint + channels)), the chain read 1024 links per lock hold and assembled outside it |
//! | `list_threads` | O(log T + threads examined); metadata filters run outside the lock |

mod ptree;
mod reclaim;
pub(crate) mod size;
pub(crate) mod store;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;
use parking_lot::{Mutex, RwLock};

use crate::checkpoint::{ChannelValues, Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::engine::{self, Backend, Engine, KeyedWrite, Link, ListQuery, Page, Put, ThreadPage, WriteBatch};
use crate::error::{Error, Result};
use crate::saver::ThreadInfo;
use crate::serde::{JsonPlusSerializer, Serializer, Value};

use store::{Cursor, Found, Garbage, NewCheckpoint, Scope, Slot, Store, Stored, WriteRec, WriteSet};

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

/// The storage side of [`InMemorySaver`]: the indexed store.
pub(crate) struct Memory {
    serde: Arc<dyn Serializer>,
    /// Values are kept as given (shared, not serialized): the serializer
    /// preserves values, so encoding them would buy nothing.
    live: bool,
    store: RwLock<Store>,
    /// Per-target gates serializing `copy_thread` calls onto one target.
    copy_gates: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl InMemorySaver {
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

impl Memory {
    /// (storage bytes, checkpoints), a slice of threads per lock hold.
    fn totals(&self) -> (usize, usize) {
        let (mut bytes, mut count, mut after) = (0, 0, None);
        loop {
            let (b, c, next) = self.store.read().totals_slice(after.as_ref());
            bytes += b;
            count += c;
            match next {
                Some(next) => after = Some(next),
                None => return (bytes, count),
            }
        }
    }

    fn encode(&self, value: &Value) -> Result<Stored> {
        if self.live {
            // What the serializer would refuse (too deep, too long for
            // msgpack) is refused here too; the value itself is shared.
            let size = match value {
                // As JsonPlusSerializer stores them: `null` with no payload,
                // top-level bytes as themselves.
                Value::Nil => 0,
                Value::Bin(b) => b.len(),
                other => size::checked_value_len(other)?,
            };
            return Ok(Stored::Live {
                value: value.clone(),
                size,
            });
        }
        Ok(Stored::from(self.serde.dumps_typed(value)?))
    }

    fn decode(&self, stored: &Stored) -> Result<Value> {
        match stored {
            Stored::Live { value, .. } => Ok(value.clone()),
            Stored::Encoded { tag, data } => self.serde.loads_typed(tag.as_str(), data),
        }
    }

    fn dispose(garbage: Garbage) {
        reclaim::dispose(garbage);
    }

    /// Unlinks the thread in O(1) under the lock, then removes its entries
    /// from the global index a slice per lock hold, so no hold grows with the
    /// thread's size; the thread is freed outside the lock.
    fn delete_thread_sync(&self, thread: &str) {
        let Some(t) = self.store.write().unlink_thread(thread) else {
            return;
        };
        let mut after = None;
        loop {
            let mut garbage = Garbage::default();
            after = self.store.write().drop_global(&t, after.as_ref(), &mut garbage);
            Self::dispose(garbage);
            if after.is_none() {
                break;
            }
        }
        let mut garbage = Garbage::default();
        let weight = Store::weight(&t);
        garbage.items.push(Box::new(t));
        garbage.weight = weight;
        Self::dispose(garbage);
    }

    fn put_sync(&self, put: Put<'_>) -> Result<()> {
        let Put {
            thread_id: thread,
            checkpoint_ns: ns,
            parent_id,
            checkpoint,
            metadata,
            new_versions,
        } = put;
        // Checked first: metadata or sends nested deeper than the encoder's
        // limit are refused before anything is stored.
        let size = size::skeleton_len(checkpoint)? + size::metadata_len(metadata)?;

        // Which channels need storing: those this put writes, and values
        // given for other channels whose version holds no value yet.
        enum Plan<'a> {
            Ready(Slot),
            Store { value: &'a Value, new: bool },
        }
        let values = &checkpoint.channel_values;
        let mut plans: Vec<Plan<'_>> = Vec::with_capacity(checkpoint.channel_versions.len());
        let mut to_check: Vec<usize> = Vec::new();
        let (mut values_seen, mut new_seen) = (0, 0);
        for (i, ch) in checkpoint.channel_versions.keys().enumerate() {
            // Values usually come in the channels' order: try the same
            // position before hashing.
            let value = match values.get_index(i) {
                Some((k, v)) if k == ch => Some(v),
                _ => values.get(ch),
            };
            let new = new_versions.contains_key(ch);
            values_seen += usize::from(value.is_some());
            new_seen += usize::from(new);
            plans.push(match (new, value) {
                (true, Some(value)) => Plan::Store { value, new },
                (true, None) => Plan::Ready(Slot::Empty),
                (false, Some(value)) => {
                    to_check.push(i);
                    Plan::Store { value, new }
                }
                (false, None) => Plan::Ready(Slot::Lookup),
            });
        }
        if !to_check.is_empty() {
            let store = self.store.read();
            for &i in &to_check {
                if let Some((ch, ver)) = checkpoint.channel_versions.get_index(i) {
                    if store.existing_value(thread, ns, ch, &store::version_key(ver)).is_some() {
                        plans[i] = Plan::Ready(Slot::Lookup);
                    }
                }
            }
        }
        let mut resolved = Vec::with_capacity(plans.len());
        for plan in plans {
            resolved.push(match plan {
                Plan::Ready(slot) => slot,
                Plan::Store { value, new: true } => Slot::Write(self.encode(value)?),
                Plan::Store { value, new: false } => Slot::Fill(self.encode(value)?),
            });
        }
        let mut unversioned = Vec::new();
        if values_seen < values.len() {
            for (ch, value) in values {
                if !checkpoint.channel_versions.contains_key(ch) {
                    unversioned.push((ch.clone(), self.encode(value)?));
                }
            }
        }
        let mut extra_blobs = Vec::new();
        if new_seen < new_versions.len() {
            for (ch, ver) in new_versions {
                if checkpoint.channel_versions.contains_key(ch) {
                    continue;
                }
                let stored = match unversioned.iter().find(|(c, _)| c == ch) {
                    Some((_, s)) => s.clone(),
                    None => Stored::empty(),
                };
                extra_blobs.push((ch.clone(), store::version_key(ver).into_owned(), stored));
            }
        }

        let skeleton = Checkpoint {
            v: checkpoint.v,
            id: checkpoint.id.clone(),
            ts: checkpoint.ts.clone(),
            channel_values: ChannelValues::new(),
            channel_versions: checkpoint.channel_versions.clone(),
            versions_seen: checkpoint.versions_seen.clone(),
            updated_channels: checkpoint.updated_channels.clone(),
            pending_sends: checkpoint.pending_sends.clone(),
            extra: checkpoint.extra.clone(),
        };
        let parent = parent_id.map(str::to_owned);
        if resolved.len() + extra_blobs.len() <= store::SCAN_BUDGET {
            let new = NewCheckpoint {
                thread,
                ns,
                parent,
                skeleton,
                metadata: metadata.clone(),
                slots: resolved,
                extra_blobs,
                unversioned,
                size,
            };
            let replaced = self.store.write().put(new);
            drop(replaced);
        } else {
            self.put_wide(
                thread,
                ns,
                parent,
                skeleton,
                metadata,
                resolved,
                extra_blobs,
                unversioned,
                size,
            );
        }
        Ok(())
    }

    /// A put of more channels than one lock hold handles: the values are
    /// resolved and stored a slice of 1024 channels per hold (value collection
    /// held off in the namespace meanwhile), then the checkpoint is published
    /// in O(log n). Started over if the thread is deleted meanwhile.
    #[allow(clippy::too_many_arguments)]
    fn put_wide(
        &self,
        thread: &str,
        ns: &str,
        parent: Option<String>,
        skeleton: Checkpoint,
        metadata: &CheckpointMetadata,
        slots: Vec<Slot>,
        extra_blobs: Vec<(String, String, Stored)>,
        unversioned: Vec<(String, Stored)>,
        size: usize,
    ) {
        'again: loop {
            let tag = self.store.write().put_begin(thread, ns);
            let mut values = Vec::with_capacity(slots.len());
            let mut channels = skeleton.channel_versions.iter().zip(slots.iter().cloned());
            let mut extras = extra_blobs.iter().cloned();
            loop {
                let slice: Vec<_> = channels
                    .by_ref()
                    .take(store::SCAN_BUDGET)
                    .map(|((ch, ver), slot)| (ch.as_str(), store::version_key(ver), slot))
                    .collect();
                let extra: Vec<_> = extras.by_ref().take(store::SCAN_BUDGET - slice.len()).collect();
                if slice.is_empty() && extra.is_empty() {
                    break;
                }
                match self.store.write().put_slice(thread, ns, &tag, slice, extra) {
                    Some(got) => values.extend(got),
                    None => continue 'again,
                }
            }
            let mut store = self.store.write();
            if !store.same_thread(thread, &tag) {
                continue;
            }
            let new = NewCheckpoint {
                thread,
                ns,
                parent,
                skeleton,
                metadata: metadata.clone(),
                slots: values.into_iter().map(Slot::Resolved).collect(),
                extra_blobs: Vec::new(),
                unversioned,
                size,
            };
            let replaced = store.put(new);
            store.put_end(thread, ns, &tag);
            drop(store);
            drop(replaced);
            return;
        }
    }

    fn put_writes_sync(&self, batch: WriteBatch<'_, Stored>) -> Result<()> {
        let task_id: Arc<str> = batch.task_id.into();
        let task_path: Arc<str> = batch.task_path.into();
        // Everything proportional to the writes happens outside the store
        // lock: encoding (by the engine), building the next write set below
        // (holding only the checkpoint's writer mutex). The store lock is
        // taken three times for O(1) work each: find the entry, read its set,
        // swap the new one in.
        let recs: Vec<(WriteRec, bool)> = batch
            .writes
            .into_iter()
            .map(|w| {
                (
                    WriteRec {
                        task_path: task_path.clone(),
                        task_id: task_id.clone(),
                        idx: w.idx,
                        channel: w.channel,
                        value: w.value,
                    },
                    w.special,
                )
            })
            .collect();
        let (thread, ns, checkpoint_id) = (batch.thread_id, batch.checkpoint_ns, batch.checkpoint_id);
        loop {
            let entry = self.store.write().write_entry(thread, ns, checkpoint_id);
            let _writer = entry.writer.lock();
            let Some(base) = self.store.read().write_set(thread, ns, checkpoint_id, &entry) else {
                // Removed or replaced since: start over on the current entry.
                continue;
            };
            let mut next = WriteSet::clone(&base);
            let mut delta = 0isize;
            for (w, special) in &recs {
                delta += next.apply(w.clone(), *special);
            }
            let swapped = self
                .store
                .write()
                .swap_writes(thread, ns, checkpoint_id, &base, Arc::new(next), delta);
            // The replaced version is freed here, outside the store lock.
            if let Ok(old) = swapped {
                drop((old, base));
                return Ok(());
            }
        }
    }

    /// Builds the tuple of a found checkpoint, decoding outside the lock.
    fn build(&self, found: Found) -> Result<CheckpointTuple> {
        let Found {
            thread,
            ns,
            record,
            writes,
        } = found;
        let sk = &record.skeleton;
        let mut channel_values = ChannelValues::with_capacity(sk.channel_versions.len() + record.unversioned.len());
        for ((ch, _), stored) in sk.channel_versions.iter().zip(record.values.iter()) {
            if let Some(stored) = stored {
                channel_values.insert(ch.clone(), self.decode(stored)?);
            }
        }
        for (ch, stored) in &record.unversioned {
            channel_values.insert(ch.clone(), self.decode(stored)?);
        }
        let pending_writes = match &writes {
            Some(set) => {
                let mut out = Vec::with_capacity(set.len());
                for w in set.iter() {
                    out.push(PendingWrite {
                        task_id: w.task_id.to_string(),
                        channel: w.channel.clone(),
                        value: self.decode(&w.value)?,
                    });
                }
                out
            }
            None => Vec::new(),
        };
        let checkpoint = Checkpoint {
            v: sk.v,
            id: sk.id.clone(),
            ts: sk.ts.clone(),
            channel_values,
            channel_versions: sk.channel_versions.clone(),
            versions_seen: sk.versions_seen.clone(),
            updated_channels: sk.updated_channels.clone(),
            pending_sends: sk.pending_sends.clone(),
            extra: sk.extra.clone(),
        };
        let thread_id = thread.to_string();
        let ns = ns.to_string();
        let parent_config = record.parent.as_ref().map(|p| CheckpointConfig {
            thread_id: thread_id.clone(),
            checkpoint_ns: Some(ns.clone()),
            checkpoint_id: Some(p.clone()),
        });
        Ok(CheckpointTuple {
            config: CheckpointConfig {
                thread_id,
                checkpoint_ns: Some(ns),
                checkpoint_id: Some(sk.id.clone()),
            },
            checkpoint,
            metadata: record.metadata.clone(),
            parent_config,
            pending_writes,
        })
    }

    /// Snapshots the source a slice per lock hold, builds the whole target
    /// thread outside the lock, inserts its global entries a slice per hold
    /// (invisible under a pending tag) and publishes it in O(1): the copy
    /// appears whole or not at all, and no hold grows with the thread.
    /// Copies to one target are serialized (a per-target gate, never waited
    /// on under the store lock).
    fn copy_thread_sync(&self, source: &str, target: &str) -> Result<()> {
        let gate = self.copy_gates.lock().entry(target.to_owned()).or_default().clone();
        let result = {
            let _serial = gate.lock();
            self.copy_gated(source, target)
        };
        let mut gates = self.copy_gates.lock();
        // The map's handle and ours: nobody else waits on this gate.
        if Arc::strong_count(&gate) == 2 {
            gates.remove(target);
        }
        result
    }

    fn copy_gated(&self, source: &str, target: &str) -> Result<()> {
        let exists = || Error::ThreadExists {
            thread_id: target.to_owned(),
        };
        let copy = 'snapshot: loop {
            let start = {
                let store = self.store.read();
                if store.has_checkpoints(target) {
                    return Err(exists());
                }
                store.copy_source(source)
            };
            let Some((tag, namespaces)) = start else {
                return Ok(());
            };
            let mut copy = store::BuiltCopy::new(target);
            let mut after = None;
            loop {
                let slice = self.store.read().copy_records(source, &tag, after.as_ref());
                // The source was deleted meanwhile: start over on what is there now.
                let Ok((records, next)) = slice else {
                    continue 'snapshot;
                };
                copy.add_records(records);
                match next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            for ns in &namespaces {
                let Ok(extras) = self.store.read().copy_extras(source, &tag, ns) else {
                    continue 'snapshot;
                };
                copy.add_extras(ns, extras);
            }
            break copy;
        };
        if copy.is_empty() {
            return Ok(());
        }
        let mut after = None;
        let mut refused = false;
        loop {
            let mut garbage = Garbage::default();
            let step = self.store.write().pend_global(&copy, after.as_ref(), &mut garbage);
            Self::dispose(garbage);
            match step {
                Ok(Some(next)) => after = Some(next),
                Ok(None) => break,
                Err(()) => {
                    refused = true;
                    break;
                }
            }
        }
        let copy = if refused {
            copy
        } else {
            let mut garbage = Garbage::default();
            let published = self.store.write().publish_copy(copy, &mut garbage);
            Self::dispose(garbage);
            match published {
                Ok(()) => return Ok(()),
                Err(copy) => copy,
            }
        };
        // Refused: remove the entries inserted so far, a slice per hold.
        let mut after = None;
        loop {
            let mut garbage = Garbage::default();
            after = self
                .store
                .write()
                .drop_global(copy.thread(), after.as_ref(), &mut garbage);
            Self::dispose(garbage);
            if after.is_none() {
                break;
            }
        }
        Self::dispose(copy.into_garbage());
        Err(exists())
    }

    fn delete_for_runs_sync(&self, run_ids: &[String]) {
        if run_ids.is_empty() {
            return;
        }
        let wanted: HashSet<&str> = run_ids.iter().map(String::as_str).collect();
        let mut cursor = None;
        let mut touched = std::collections::BTreeSet::new();
        loop {
            let (victims, next) = self.store.read().find_runs(&wanted, cursor.as_ref());
            if !victims.is_empty() {
                let mut garbage = Garbage::default();
                touched.extend(self.store.write().delete_records(victims, &mut garbage));
                Self::dispose(garbage);
            }
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        // Values are collected once per touched namespace, one per lock hold,
        // not after every slice (which made a large thread quadratic).
        for (thread, ns) in touched {
            let mut garbage = Garbage::default();
            self.store.write().collect_ns(&thread, &ns, &mut garbage);
            Self::dispose(garbage);
        }
    }

    fn threads_page_sync(&self, after: Option<&str>, want: usize, filter: &IndexMap<String, Value>) -> ThreadPage {
        // With a filter, a whole scan slice is fetched and filtered here,
        // outside the lock.
        let fetch = if filter.is_empty() { want } else { store::SCAN_BUDGET };
        let (mut page, next) = self.store.read().threads_page(after, fetch);
        if !filter.is_empty() {
            page.retain(|(_, _, rec)| store::filter_matches(&rec.metadata, filter));
            page.truncate(want);
        }
        let threads = page
            .into_iter()
            .map(|(thread, ns, rec)| ThreadInfo {
                thread_id: thread.to_string(),
                latest: CheckpointConfig {
                    thread_id: thread.to_string(),
                    checkpoint_ns: Some(ns.to_string()),
                    checkpoint_id: Some(rec.id.to_string()),
                },
                metadata: rec.metadata.clone(),
            })
            .collect();
        ThreadPage {
            threads,
            next: next.map(|n| n.to_string()),
            filtered: true,
        }
    }

    /// The chain is read in bounded slices under the lock and decoded outside
    /// it; only the values and writes of channels still open are taken, and
    /// ids seen stop a walk that a cyclic parent link would never end.
    fn ancestors_sync(&self, thread: &str, ns: &str, id: Option<&str>, channels: &[String]) -> Result<Vec<Link>> {
        let mut open: HashSet<&str> = channels.iter().map(String::as_str).collect();
        let mut seen: HashSet<Arc<str>> = HashSet::new();
        let mut out = Vec::new();
        let mut from: Option<String> = None;
        loop {
            let Some(links) = self.store.read().chain(thread, ns, id, from.as_deref()) else {
                return Ok(out);
            };
            let full = links.len() == store::SCAN_BUDGET;
            for (rec, writes) in &links {
                if open.is_empty() || !seen.insert(rec.id.clone()) {
                    return Ok(out);
                }
                let mut link = Link::default();
                if let Some(set) = writes {
                    for w in set.iter().filter(|w| open.contains(w.channel.as_str())) {
                        link.writes.push(KeyedWrite {
                            task_path: w.task_path.to_string(),
                            idx: w.idx,
                            write: PendingWrite {
                                task_id: w.task_id.to_string(),
                                channel: w.channel.clone(),
                                value: self.decode(&w.value)?,
                            },
                        });
                    }
                }
                let stored: Vec<&str> = open
                    .iter()
                    .copied()
                    .filter(|ch| rec.stored_value(ch).is_some())
                    .collect();
                for ch in stored {
                    open.remove(ch);
                    if let Some(value) = rec.stored_value(ch) {
                        link.seeds.push((ch.to_owned(), self.decode(value)?));
                    }
                }
                out.push(link);
            }
            match links.last() {
                Some((last, _)) if full => match &last.parent {
                    Some(parent) => from = Some(parent.to_string()),
                    None => return Ok(out),
                },
                _ => return Ok(out),
            }
        }
    }

    /// Plans from a snapshot read a slice per lock hold, then removes the
    /// victims oldest first, 1024 per hold (each only if still the stored
    /// record): the kept checkpoints, their writes and the values they read
    /// stay readable throughout.
    fn prune_keep_latest(&self, thread: &str) {
        let plan = 'snapshot: loop {
            let Some((tag, namespaces)) = self.store.read().copy_source(thread) else {
                return;
            };
            let mut records = Vec::new();
            let mut after = None;
            loop {
                let Ok((slice, next)) = self.store.read().copy_records(thread, &tag, after.as_ref()) else {
                    continue 'snapshot;
                };
                records.extend(slice);
                match next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            let mut write_ids = HashMap::new();
            for ns in namespaces {
                let Ok(ids) = self.store.read().write_ids(thread, &tag, &ns) else {
                    continue 'snapshot;
                };
                write_ids.insert(ns, ids);
            }
            break store::PrunePlan::new(&Arc::from(thread), records, write_ids);
        };
        let store::PrunePlan {
            mut victims,
            drop_ns,
            orphan_writes,
        } = plan;
        let mut touched = std::collections::BTreeSet::new();
        while !victims.is_empty() {
            let rest = victims.split_off(victims.len().min(store::SCAN_BUDGET));
            let slice = std::mem::replace(&mut victims, rest);
            let mut garbage = Garbage::default();
            touched.extend(self.store.write().delete_records(slice, &mut garbage));
            Self::dispose(garbage);
        }
        for (ns, ids) in orphan_writes {
            for chunk in ids.chunks(store::SCAN_BUDGET) {
                let mut garbage = Garbage::default();
                self.store
                    .write()
                    .remove_orphan_writes(thread, &ns, chunk, &mut garbage);
                Self::dispose(garbage);
            }
        }
        for ns in drop_ns {
            let mut garbage = Garbage::default();
            self.store.write().drop_ns_if_empty(thread, &ns, &mut garbage);
            Self::dispose(garbage);
        }
        for (thread, ns) in touched {
            let mut garbage = Garbage::default();
            self.store.write().collect_ns(&thread, &ns, &mut garbage);
            Self::dispose(garbage);
        }
    }
}

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

/// A listing: the index range it covers and where it starts.
pub(crate) struct MemQuery {
    scope: Scope,
    before: Option<String>,
    filter: IndexMap<String, Value>,
}

impl Backend for Memory {
    type Row = Found;
    type Cursor = Cursor;
    type Query = MemQuery;
    type Encoded = Stored;

    fn encode(&self, value: &Value) -> Result<Stored> {
        Memory::encode(self, value)
    }

    fn decode(&self, row: Found) -> Result<CheckpointTuple> {
        self.build(row)
    }

    async fn get(&self, thread_id: &str, ns: &str, id: Option<&str>) -> Result<Option<Found>> {
        Ok(self.store.read().get(thread_id, ns, id))
    }

    fn prepare(&self, q: ListQuery) -> Result<MemQuery> {
        let scope = match (q.thread_id, q.checkpoint_id, q.checkpoint_ns) {
            (None, _, _) => Scope::All,
            (Some(thread), Some(id), ns) => Scope::Exact { thread, ns, id },
            (Some(thread), None, Some(ns)) => Scope::Ns { thread, ns },
            (Some(thread), None, None) => Scope::Thread { thread },
        };
        Ok(MemQuery {
            scope,
            before: q.before,
            filter: q.filter,
        })
    }

    async fn page(&self, q: &MemQuery, cursor: Option<Cursor>, want: usize) -> Result<Page<Found, Cursor>> {
        let cursor = cursor.or_else(|| Store::first_cursor(&q.scope, q.before.as_deref()));
        // With a filter, a whole scan slice is fetched and filtered here,
        // outside the lock.
        let max = if q.filter.is_empty() {
            want.min(PAGE)
        } else {
            store::SCAN_BUDGET
        };
        let mut page = self.store.read().page(&q.scope, cursor.as_ref(), max);
        if !q.filter.is_empty() {
            page.items
                .retain(|f| store::filter_matches(&f.record.metadata, &q.filter));
            page.items.truncate(want);
        }
        Ok(Page {
            rows: page.items,
            next: page.next,
            filtered: true,
        })
    }

    async fn put(&self, put: Put<'_>) -> Result<()> {
        self.put_sync(put)
    }

    async fn put_writes(&self, batch: WriteBatch<'_, Stored>) -> Result<()> {
        self.put_writes_sync(batch)
    }

    async fn delete_threads(&self, thread_ids: &[String]) -> Result<()> {
        for thread in thread_ids {
            self.delete_thread_sync(thread);
        }
        Ok(())
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.delete_for_runs_sync(run_ids);
        Ok(())
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.copy_thread_sync(source, target)
    }

    async fn prune_keep_latest(&self, thread_ids: &[String]) -> Result<()> {
        for thread in thread_ids {
            self.prune_keep_latest(thread);
        }
        Ok(())
    }

    async fn ancestors(&self, thread_id: &str, ns: &str, id: Option<&str>, channels: &[String]) -> Result<Vec<Link>> {
        self.ancestors_sync(thread_id, ns, id, channels)
    }

    async fn threads_page(
        &self,
        after: Option<&str>,
        want: usize,
        filter: &IndexMap<String, Value>,
    ) -> Result<ThreadPage> {
        Ok(self.threads_page_sync(after, want, filter))
    }
}
