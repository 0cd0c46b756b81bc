//! The in-memory side of the engine: the store, and the reads and writes
//! that move records in and out of it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use indexmap::IndexMap;
use parking_lot::{Mutex, RwLock};

use super::store::{self, Cold, Cursor, Found, Garbage, NewCheckpoint, Scope, Slot, Store, Stored, WriteRec, WriteSet};
use super::{reclaim, size, PAGE};
use crate::checkpoint::{ChannelValues, Checkpoint, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::encoded::EncodedTuple;
use crate::engine::{
    page_size, Backend, FenceToken, Fences, LeaseOp, Link, ListQuery, Page, Put, Removed, RetainRows, SkeletonQuery,
    ThreadPage, ThreadsQuery, WriteBatch,
};
use crate::error::Result;
use crate::retention::plan::{Batch, Skeleton};
use crate::saver::{ThreadInfo, ThreadKeys};
use crate::serde::{Serializer, Value};

/// The storage side of [`InMemorySaver`](super::InMemorySaver): the indexed store.
pub(crate) struct Memory {
    pub(super) serde: Arc<dyn Serializer>,
    /// Values are kept as given (shared, not serialized): the serializer
    /// preserves values, so encoding them would buy nothing.
    pub(super) live: bool,
    pub(super) store: RwLock<Store>,
    /// Per-target gates serializing `copy_thread` calls onto one target.
    pub(super) copy_gates: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// The leases of fenced writers.
    pub(super) leases: super::lease::Leases,
}

impl Memory {
    /// (storage bytes, checkpoints), a slice of threads per lock hold.
    pub(super) fn totals(&self) -> (usize, usize) {
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

    pub(super) fn encode(&self, value: &Value) -> Result<Stored> {
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

    pub(super) fn decode(&self, stored: &Stored) -> Result<Value> {
        match stored {
            Stored::Live { value, .. } => Ok(value.clone()),
            Stored::Encoded { tag, data } => self.serde.loads_typed_bytes(tag.as_str(), data),
        }
    }

    pub(super) fn dispose(garbage: Garbage) {
        reclaim::dispose(garbage);
    }

    pub(super) fn put_sync(&self, put: Put<'_>) -> Result<()> {
        let (thread, ns, parent_id, checkpoint, metadata, new_versions) = put.parts();
        // Checked first: metadata or sends nested deeper than the encoder's
        // limit are refused before anything is stored.
        let metadata_len = size::metadata_len(metadata)?;
        let size = size::skeleton_len(checkpoint)? + metadata_len;

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
        // With an encoding serializer, a value whose version already holds
        // one is not encoded only to be dropped: look first. Live values cost
        // nothing to "encode", and `Slot::Fill` keeps the stored one anyway.
        if !to_check.is_empty() && !self.live {
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

        let id = store::CkptId::from(checkpoint.id.as_str());
        let parent = parent_id.map(Box::<str>::from);
        let cold = Cold::new(checkpoint, metadata, metadata_len, unversioned)?;
        let new = NewCheckpoint {
            thread,
            ns,
            id,
            parent,
            cold,
            slots: resolved,
            extra_blobs,
            size,
        };
        if new.slots.len() + new.extra_blobs.len() <= store::SCAN_BUDGET {
            let replaced = self.store.write().put(new);
            drop(replaced);
        } else {
            self.put_wide(new);
        }
        Ok(())
    }

    /// A put of more channels than one lock hold handles: the values are
    /// resolved and stored a slice of 1024 channels per hold (value collection
    /// held off in the namespace meanwhile), then the checkpoint is published
    /// in O(log n). Started over if the thread is deleted meanwhile.
    pub(super) fn put_wide(&self, new: NewCheckpoint<'_>) {
        let (thread, ns) = (new.thread, new.ns);
        'again: loop {
            let tag = self.store.write().put_begin(thread, ns);
            let mut values = Vec::with_capacity(new.slots.len());
            let mut channels = new.cold.versions().zip(new.slots.iter().cloned());
            let mut extras = new.extra_blobs.iter().cloned();
            loop {
                let slice: Vec<_> = channels
                    .by_ref()
                    .take(store::SCAN_BUDGET)
                    .map(|((ch, ver), slot)| (ch, ver.key(), slot))
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
            let resolved = NewCheckpoint {
                slots: values.into_iter().map(Slot::Resolved).collect(),
                extra_blobs: Vec::new(),
                ..new
            };
            let replaced = store.put(resolved);
            store.put_end(thread, ns, &tag);
            drop(store);
            drop(replaced);
            return;
        }
    }

    pub(super) fn put_writes_sync(&self, batch: WriteBatch<'_, Stored>) -> Result<()> {
        let task_id: Arc<str> = batch.task_id.into();
        let task_path: Arc<str> = batch.task_path.into();
        // Everything proportional to the writes happens outside the store
        // lock: encoding (by the engine), building the next write set below
        // (holding only the checkpoint's writer mutex). The store lock is
        // taken three times for O(1) work each: find the entry, read its set,
        // swap the new one in.
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
            for w in &batch.writes {
                let rec = WriteRec {
                    task_path: task_path.clone(),
                    task_id: task_id.clone(),
                    idx: w.idx,
                    channel: w.channel.clone(),
                    value: w.value.clone(),
                };
                delta += next.apply(rec, w.special);
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
    pub(super) fn build(&self, found: Found) -> Result<CheckpointTuple> {
        let Found {
            thread,
            ns,
            record,
            writes,
        } = found;
        let hot = record.hot()?;
        // Live values are shared: the map is built once and kept by the
        // record. Encoded ones are decoded on every read.
        let channel_values = match &hot.channel_values {
            Some(values) => values.clone(),
            None => {
                let mut out = ChannelValues::with_capacity(record.values.len() + record.unversioned().len());
                for (ch, s) in record.stored_values() {
                    out.insert(ch.to_owned(), self.decode(s)?);
                }
                out
            }
        };
        let pending_writes = match &writes {
            Some(set) => {
                let mut out = Vec::with_capacity(set.len());
                for w in set.iter() {
                    out.push(PendingWrite {
                        task_id: w.task_id.to_string(),
                        channel: w.channel.clone(),
                        value: self.decode(&w.value)?,
                        task_path: w.task_path.to_string(),
                        idx: w.idx,
                    });
                }
                out
            }
            None => Vec::new(),
        };
        let checkpoint = Checkpoint {
            channel_values,
            ..hot.skeleton.clone()
        };
        let thread_id = thread.to_string();
        let ns = ns.to_string();
        let parent_config = record.parent.as_ref().map(|p| CheckpointConfig {
            thread_id: thread_id.clone(),
            checkpoint_ns: Some(ns.clone()),
            checkpoint_id: Some(p.to_string()),
        });
        Ok(CheckpointTuple {
            config: CheckpointConfig {
                thread_id,
                checkpoint_ns: Some(ns),
                checkpoint_id: Some(record.id.to_string()),
            },
            checkpoint,
            metadata: hot.metadata.clone(),
            parent_config,
            pending_writes,
        })
    }

    pub(super) fn threads_page_sync(&self, query: ThreadsQuery<'_>) -> Result<ThreadPage> {
        let ThreadsQuery { after, want, filter } = query;
        // With a filter, a whole scan slice is fetched and filtered here,
        // outside the lock.
        let fetch = query.page_size(PAGE);
        let (mut page, next) = self.store.read().threads_page(after, fetch);
        if !filter.is_empty() {
            // A record whose metadata does not read back is kept: the error
            // is returned below.
            page.retain(|(_, _, rec)| rec.hot().map_or(true, |h| store::filter_matches(&h.metadata, filter)));
            page.truncate(want);
        }
        let mut threads = Vec::with_capacity(page.len());
        for (thread, ns, rec) in page {
            threads.push(ThreadInfo {
                thread_id: thread.to_string(),
                latest: CheckpointConfig {
                    thread_id: thread.to_string(),
                    checkpoint_ns: Some(ns.to_string()),
                    checkpoint_id: Some(rec.id.to_string()),
                },
                metadata: rec.hot()?.metadata.clone(),
            });
        }
        Ok(ThreadPage {
            threads,
            next: next.map(|n| n.to_string()),
            filtered: true,
        })
    }

    /// The chain is read in bounded slices under the lock and decoded outside
    /// it; only the values and writes of channels still open are taken, and
    /// ids seen stop a walk that a cyclic parent link would never end.
    pub(super) fn ancestors_sync(
        &self,
        thread: &str,
        ns: &str,
        id: Option<&str>,
        channels: &[String],
    ) -> Result<Vec<Link>> {
        let mut open: HashSet<&str> = channels.iter().map(String::as_str).collect();
        let mut seen: HashSet<store::CkptId> = HashSet::new();
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
                        link.writes.push(PendingWrite {
                            task_id: w.task_id.to_string(),
                            channel: w.channel.clone(),
                            value: self.decode(&w.value)?,
                            task_path: w.task_path.to_string(),
                            idx: w.idx,
                        });
                    }
                }
                for (ch, value) in rec.stored_values() {
                    if open.remove(ch) {
                        link.seeds.push((ch.to_owned(), self.decode(value)?));
                    }
                }
                out.push(link);
            }
            match links.last() {
                Some((last, _)) if full => match last.parent.as_deref() {
                    Some(parent) => from = Some(parent.to_string()),
                    None => return Ok(out),
                },
                _ => return Ok(out),
            }
        }
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

    fn serializer(&self) -> &dyn Serializer {
        self.serde.as_ref()
    }

    fn decode(&self, row: Found) -> Result<CheckpointTuple> {
        self.build(row)
    }

    fn encoded_row(&self, row: Found) -> Result<EncodedTuple> {
        self.encoded(row)
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
        let max = page_size(want, PAGE, !q.filter.is_empty());
        let mut page = self.store.read().page(&q.scope, cursor.as_ref(), max);
        if !q.filter.is_empty() {
            // A record whose metadata does not read back is kept: building
            // its tuple returns the error.
            page.items.retain(|f| {
                f.record
                    .hot()
                    .map_or(true, |h| store::filter_matches(&h.metadata, &q.filter))
            });
            page.items.truncate(want);
        }
        Ok(Page {
            rows: page.items,
            next: page.next,
            filtered: true,
        })
    }

    async fn put(&self, put: Put<'_>) -> Result<()> {
        let (thread_id, fence) = (put.thread_id, put.fence);
        self.leases.fenced(thread_id, fence, || self.put_sync(put))
    }

    async fn put_writes(&self, batch: WriteBatch<'_, Stored>) -> Result<()> {
        let (thread_id, fence) = (batch.thread_id, batch.fence);
        self.leases.fenced(thread_id, fence, || self.put_writes_sync(batch))
    }

    async fn put_step(&self, put: Put<'_>, writes: Vec<WriteBatch<'_, Stored>>) -> Result<()> {
        // The process is the store: no crash leaves half of it. The writes
        // go first, as a runner's separate calls store them; neither can
        // fail once the engine's checks passed.
        let (thread_id, fence) = (put.thread_id, put.fence);
        self.leases.fenced(thread_id, fence, || {
            for batch in writes {
                self.put_writes_sync(batch)?;
            }
            self.put_sync(put)
        })
    }

    const FENCES: bool = true;

    async fn lease(&self, thread_id: &str, writer: &str, lease_ms: u64, op: LeaseOp) -> Result<Option<u64>> {
        Ok(self.leases.run(thread_id, writer, lease_ms, op))
    }

    async fn purge_leases(&self, older_than: std::time::Duration) -> Result<u64> {
        Ok(self.leases.purge(older_than, |t| self.store.read().has_thread(t)))
    }

    async fn delete_thread_fenced(&self, thread_id: &str, fence: &FenceToken) -> Result<()> {
        self.leases.fenced(thread_id, Some(fence), || {
            self.delete_thread_sync(thread_id);
            Ok(())
        })
    }

    async fn import(&self, import: crate::engine::import::Import<'_, Stored>) -> Result<()> {
        let (thread_id, fence) = (import.thread_id, import.fence.clone());
        self.leases
            .fenced(thread_id, fence.as_ref(), || self.import_sync(import))
    }

    async fn delete_threads(&self, thread_ids: &[String]) -> Result<()> {
        for thread in thread_ids {
            self.delete_thread_sync(thread);
        }
        Ok(())
    }

    async fn delete_for_runs(&self, run_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        self.delete_for_runs_sync(run_ids, fences)
    }

    async fn copy_thread(&self, source: &str, target: &str, fence: Option<&FenceToken>) -> Result<()> {
        self.leases
            .fenced(target, fence, || self.copy_thread_sync(source, target))
    }

    async fn prune_keep_latest(&self, thread_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        for thread in thread_ids {
            let token = fences.map(|f| f.token(thread)).transpose()?;
            self.prune_keep_latest(thread, token.as_ref())?;
        }
        Ok(())
    }

    async fn ancestors(&self, thread_id: &str, ns: &str, id: Option<&str>, channels: &[String]) -> Result<Vec<Link>> {
        self.ancestors_sync(thread_id, ns, id, channels)
    }

    async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        Ok(self.thread_keys_sync(thread_id))
    }

    async fn threads_page(&self, query: ThreadsQuery<'_>) -> Result<ThreadPage> {
        self.threads_page_sync(query)
    }
}

impl RetainRows for Memory {
    async fn skeletons(&self, query: SkeletonQuery<'_>) -> Result<Vec<Skeleton>> {
        Ok(self.store.read().skeletons(query))
    }

    async fn remove_batch(&self, thread_id: &str, batch: &Batch, fence: Option<&FenceToken>) -> Result<Removed> {
        let mut garbage = store::Garbage::default();
        let removed = self.leases.fenced(thread_id, fence, || {
            Ok(self.store.write().remove_batch(thread_id, batch, &mut garbage))
        })?;
        Self::dispose(garbage);
        Ok(removed)
    }
}
