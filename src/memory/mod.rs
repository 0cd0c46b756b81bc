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
mod store;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use indexmap::IndexMap;
use parking_lot::{Mutex, RwLock};

use crate::checkpoint::{
    special_write_idx, ChannelValues, ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite,
};
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::limits;
use crate::saver::{
    op_span, traced, Capabilities, CheckpointSaver, CheckpointStream, DeltaChannelHistory, ListOptions,
    ListThreadsOptions, PruneStrategy, ThreadInfo,
};
use crate::serde::{JsonPlusSerializer, Serializer, Value};

use store::{Cursor, Found, Garbage, NewCheckpoint, RawHistory, Scope, Slot, Store, Stored, WriteRec, WriteSet};

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
            live: serializer.preserves_values(),
            serde: serializer,
            store: RwLock::new(Store::default()),
            copy_gates: Mutex::default(),
        }
    }

    /// The serializer values are stored with.
    pub fn serializer(&self) -> &Arc<dyn Serializer> {
        &self.serde
    }

    /// Ids of the threads holding anything (checkpoints, writes or values),
    /// ascending.
    pub fn thread_ids(&self) -> Vec<String> {
        self.store.read().thread_ids()
    }

    /// The number of checkpoints stored, all threads and namespaces.
    pub fn checkpoint_count(&self) -> usize {
        self.totals().1
    }

    /// The bytes of serialized payload held: every stored value and write as
    /// the serializer produced it, plus the msgpack size of each checkpoint
    /// (without channel values) and its metadata, as Python's `InMemorySaver`
    /// would hold them. Keys and index overhead are not counted. O(threads),
    /// summed 1024 threads per lock hold (a gauge: writes made meanwhile may
    /// or may not be counted).
    pub fn storage_bytes(&self) -> usize {
        self.totals().0
    }

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

    fn put_sync(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let thread = config.thread_id.as_str();
        let ns = config.ns();
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
        let parent = config.checkpoint_id().map(str::to_owned);
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
        Ok(CheckpointConfig {
            thread_id: config.thread_id.clone(),
            checkpoint_ns: Some(ns.to_owned()),
            checkpoint_id: Some(checkpoint.id.clone()),
        })
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

    /// `checkpoint_id` is the one [`limits::check_put_writes`] found in `config`.
    fn put_writes_sync(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let task_id: Arc<str> = task_id.into();
        let task_path: Arc<str> = task_path.into();
        // Everything proportional to the writes happens outside the store
        // lock: encoding here, building the next write set below (holding only
        // the checkpoint's writer mutex). The store lock is taken three times
        // for O(1) work each: find the entry, read its set, swap the new one in.
        let mut recs = Vec::with_capacity(writes.len());
        for (position, (channel, value)) in writes.iter().enumerate() {
            let special = special_write_idx(channel);
            recs.push((
                WriteRec {
                    task_path: task_path.clone(),
                    task_id: task_id.clone(),
                    idx: special.unwrap_or(position as i64),
                    channel: channel.clone(),
                    value: self.encode(value)?,
                },
                special.is_some(),
            ));
        }
        let (thread, ns) = (config.thread_id.as_str(), config.ns());
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

    fn list_threads_sync(&self, options: &ListThreadsOptions) -> Vec<ThreadInfo> {
        let mut out = Vec::new();
        let mut after = options.after.clone();
        loop {
            let want = options.limit.map_or(usize::MAX, |l| l - out.len());
            if want == 0 {
                return out;
            }
            // With a filter, a whole scan slice is fetched and filtered here,
            // outside the lock.
            let fetch = if options.filter.is_empty() {
                want
            } else {
                store::SCAN_BUDGET
            };
            let (mut page, next) = self.store.read().threads_page(after.as_deref(), fetch);
            if !options.filter.is_empty() {
                page.retain(|(_, _, rec)| store::filter_matches(&rec.metadata, &options.filter));
                page.truncate(want);
            }
            let full = page.len() == want;
            out.extend(page.into_iter().map(|(thread, ns, rec)| ThreadInfo {
                thread_id: thread.to_string(),
                latest: CheckpointConfig {
                    thread_id: thread.to_string(),
                    checkpoint_ns: Some(ns.to_string()),
                    checkpoint_id: Some(rec.id.to_string()),
                },
                metadata: rec.metadata.clone(),
            }));
            match next {
                Some(next) if !full => after = Some(next.to_string()),
                _ => return out,
            }
        }
    }

    fn delta_history_sync(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<IndexMap<String, DeltaChannelHistory>> {
        let mut out = IndexMap::with_capacity(channels.len());
        if channels.is_empty() {
            return Ok(out);
        }
        // Distinct channels in first-seen order: the map keeps one entry per name.
        let mut names: Vec<&str> = Vec::with_capacity(channels.len());
        let mut open: HashMap<&str, usize> = HashMap::with_capacity(channels.len());
        for ch in channels {
            if !open.contains_key(ch.as_str()) {
                open.insert(ch, names.len());
                names.push(ch);
            }
        }
        let mut raw: Vec<RawHistory> = names.iter().map(|_| RawHistory::default()).collect();
        // The chain is read in bounded slices under the lock and assembled
        // outside it; ids seen stop a walk that a cyclic parent link would
        // never end.
        let mut seen: HashSet<Arc<str>> = HashSet::new();
        let mut from: Option<String> = None;
        let (thread, ns) = (config.thread_id.as_str(), config.ns());
        while !open.is_empty() {
            let links = self
                .store
                .read()
                .chain(thread, ns, config.checkpoint_id(), from.as_deref());
            let Some(links) = links else {
                break;
            };
            let full = links.len() == store::SCAN_BUDGET;
            let mut cycle = false;
            for (rec, writes) in &links {
                if open.is_empty() || !seen.insert(rec.id.clone()) {
                    cycle = true;
                    break;
                }
                store::delta_step(rec, writes.as_deref(), &mut open, &mut raw);
            }
            match links.last() {
                Some((last, _)) if full && !cycle => from = last.parent.clone(),
                _ => break,
            }
            if from.is_none() {
                break;
            }
        }
        for (ch, history) in names.iter().zip(raw) {
            let mut writes = Vec::with_capacity(history.groups.iter().map(Vec::len).sum());
            for group in history.groups.iter().rev() {
                for w in group {
                    writes.push(PendingWrite {
                        task_id: w.task_id.to_string(),
                        channel: w.channel.clone(),
                        value: self.decode(&w.value)?,
                    });
                }
            }
            let seed = history.seed.as_ref().map(|s| self.decode(s)).transpose()?;
            out.insert((*ch).to_owned(), DeltaChannelHistory { writes, seed });
        }
        Ok(out)
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

    fn prune_sync(&self, thread_ids: &[String], strategy: PruneStrategy) {
        for thread in thread_ids {
            match strategy {
                PruneStrategy::Delete => self.delete_thread_sync(thread),
                PruneStrategy::KeepLatest => self.prune_keep_latest(thread),
            }
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
        let threads = self.store.read().thread_count();
        f.debug_struct("InMemorySaver")
            .field("serializer", &self.serde)
            .field("threads", &threads)
            .field("checkpoints", &self.totals().1)
            .finish()
    }
}

/// The state of one `list` stream.
struct ListState<'a> {
    saver: &'a InMemorySaver,
    scope: Scope,
    cursor: Option<Cursor>,
    filter: IndexMap<String, Value>,
    remaining: usize,
    buf: VecDeque<Found>,
    done: bool,
}

impl ListState<'_> {
    fn fetch(&mut self) {
        // With a filter, a whole scan slice is fetched and filtered here,
        // outside the lock.
        let max = if self.filter.is_empty() {
            self.remaining.min(PAGE)
        } else {
            store::SCAN_BUDGET
        };
        let mut page = self.saver.store.read().page(&self.scope, self.cursor.as_ref(), max);
        if !self.filter.is_empty() {
            page.items
                .retain(|f| store::filter_matches(&f.record.metadata, &self.filter));
            page.items.truncate(self.remaining);
        }
        self.remaining -= page.items.len();
        self.buf.extend(page.items);
        self.cursor = page.next;
        self.done = self.cursor.is_none() || self.remaining == 0;
    }

    fn span(&self) -> tracing::Span {
        match &self.scope {
            Scope::Exact { thread, ns, id } => op_span("list", thread, ns.as_deref().unwrap_or(""), Some(id)),
            Scope::Ns { thread, ns } => op_span("list", thread, ns, None),
            Scope::Thread { thread } => op_span("list", thread, "", None),
            Scope::All => op_span("list", "", "", None),
        }
    }
}

#[async_trait]
impl CheckpointSaver for InMemorySaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let ns = config.ns();
        let id = config.checkpoint_id();
        traced(op_span("get_tuple", &config.thread_id, ns, id), async {
            let found = self.store.read().get(&config.thread_id, ns, id);
            found.map(|f| self.build(f)).transpose()
        })
        .await
    }

    fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> CheckpointStream<'_> {
        if let Err(e) = limits::check_filter(&options.filter) {
            return futures::stream::once(async move { Err(e) }).boxed();
        }
        let scope = match config {
            None => Scope::All,
            Some(c) => {
                let id = c.checkpoint_id().map(str::to_owned);
                match (id, c.checkpoint_ns) {
                    (Some(id), ns) => Scope::Exact {
                        thread: c.thread_id,
                        ns,
                        id,
                    },
                    (None, Some(ns)) => Scope::Ns {
                        thread: c.thread_id,
                        ns,
                    },
                    (None, None) => Scope::Thread { thread: c.thread_id },
                }
            }
        };
        let remaining = options.limit.unwrap_or(usize::MAX);
        let state = ListState {
            saver: self,
            cursor: Store::first_cursor(&scope, options.before.as_deref()),
            scope,
            filter: options.filter,
            remaining,
            buf: VecDeque::new(),
            done: remaining == 0,
        };
        futures::stream::unfold(state, |mut st| async move {
            loop {
                if let Some(found) = st.buf.pop_front() {
                    let item = st.saver.build(found);
                    return Some((item, st));
                }
                if st.done {
                    return None;
                }
                let span = st.span();
                let _ = traced(span, async {
                    st.fetch();
                    Ok(())
                })
                .await;
            }
        })
        .boxed()
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        traced(
            op_span("put", &config.thread_id, config.ns(), Some(&checkpoint.id)),
            async {
                limits::check_put(checkpoint, metadata)?;
                self.put_sync(config, checkpoint, metadata, new_versions)
            },
        )
        .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        traced(
            op_span("put_writes", &config.thread_id, config.ns(), config.checkpoint_id()),
            async {
                let checkpoint_id = limits::check_put_writes(config, writes)?;
                self.put_writes_sync(config, checkpoint_id, writes, task_id, task_path)
            },
        )
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        traced(op_span("delete_thread", thread_id, "", None), async {
            self.delete_thread_sync(thread_id);
            Ok(())
        })
        .await
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::all()
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        traced(op_span("delete_for_runs", "", "", None), async {
            self.delete_for_runs_sync(run_ids);
            Ok(())
        })
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        traced(op_span("copy_thread", source, "", None), async {
            self.copy_thread_sync(source, target)
        })
        .await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        traced(op_span("prune", "", "", None), async {
            self.prune_sync(thread_ids, strategy);
            Ok(())
        })
        .await
    }

    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<IndexMap<String, DeltaChannelHistory>> {
        traced(
            op_span(
                "get_delta_channel_history",
                &config.thread_id,
                config.ns(),
                config.checkpoint_id(),
            ),
            async { self.delta_history_sync(config, channels) },
        )
        .await
    }

    async fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
        traced(op_span("list_threads", "", "", None), async {
            limits::check_filter(&options.filter)?;
            Ok(self.list_threads_sync(&options))
        })
        .await
    }
}
