//! Removals and copies of whole threads, runs and pruned history, each in
//! slices so that no lock hold grows with a thread.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::backend::Memory;
use super::store::{self, Garbage, Store, Stored, ThreadKey};
use crate::engine::import::Import;
use crate::engine::{FenceToken, Fences};
use crate::error::{Error, Result};
use crate::import::ImportMode;
use crate::saver::{CheckpointKey, ThreadKeys, WriteKey};

impl Memory {
    /// Unlinks the thread in O(1) under the lock, then removes its entries
    /// from the global index a slice per lock hold, so no hold grows with the
    /// thread's size; the thread is freed outside the lock.
    pub(super) fn delete_thread_sync(&self, thread: &str) {
        let Some(t) = self.store.write().unlink_thread(thread) else {
            return;
        };
        self.drop_unlinked(t);
    }

    /// Removes the global entries of a thread unlinked from the store, a
    /// slice per lock hold, then frees it outside the lock.
    fn drop_unlinked(&self, t: store::Thread) {
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

    /// Snapshots the source a slice per lock hold, builds the whole target
    /// thread outside the lock, inserts its global entries a slice per hold
    /// (invisible under a pending tag) and publishes it in O(1): the copy
    /// appears whole or not at all, and no hold grows with the thread.
    /// Copies to one target are serialized (a per-target gate, never waited
    /// on under the store lock).
    pub(super) fn copy_thread_sync(&self, source: &str, target: &str) -> Result<()> {
        self.gated(target, || self.copy_gated(self, source, target, false))
    }

    /// Runs `f` holding `target`'s copy gate.
    fn gated<T>(&self, target: &str, f: impl FnOnce() -> T) -> T {
        let gate = self.copy_gates.lock().entry(target.to_owned()).or_default().clone();
        let result = {
            let _serial = gate.lock();
            f()
        };
        let mut gates = self.copy_gates.lock();
        // The map's handle and ours: nobody else waits on this gate.
        if Arc::strong_count(&gate) == 2 {
            gates.remove(target);
        }
        result
    }

    /// Imports a checked thread: built whole in a private store (by `put`
    /// and `put_writes`, so as given), then published into this one as a
    /// copy is, under the target's copy gate. A crash loses the process's
    /// memory anyway; with [`ImportMode::Replace`] the new thread replaces
    /// the old one, whole, as it is published.
    pub(super) fn import_sync(&self, import: Import<'_, Stored>) -> Result<()> {
        let scratch = Memory {
            serde: self.serde.clone(),
            live: self.live,
            store: RwLock::new(Store::default()),
            copy_gates: Mutex::default(),
            leases: Default::default(),
        };
        let thread = import.thread_id;
        for cp in import.checkpoints {
            let (put, batches) = cp.into_batches();
            scratch.put_sync(put)?;
            for batch in batches {
                scratch.put_writes_sync(batch)?;
            }
        }
        self.gated(thread, || {
            if import.mode == ImportMode::Create && self.store.read().has_checkpoints(thread) {
                return Err(Error::ThreadExists {
                    thread_id: thread.to_owned(),
                });
            }
            // The new thread takes the old one's place (or that of writes
            // left without a checkpoint) in one lock hold: a reader sees
            // either, never neither.
            self.copy_gated(&scratch, thread, thread, true)
        })
    }

    /// Copies `source` of `from` (this store or another) to `target` here;
    /// with `replace`, the copy replaces whatever `target` holds when it is
    /// published, else a target with checkpoints refuses it.
    pub(super) fn copy_gated(&self, from: &Memory, source: &str, target: &str, replace: bool) -> Result<()> {
        let exists = || Error::ThreadExists {
            thread_id: target.to_owned(),
        };
        if !replace && self.store.read().has_checkpoints(target) {
            return Err(exists());
        }
        // A target that gains checkpoints meanwhile is refused when the copy
        // is published.
        let Some((records, extras)) = from.read_thread(source, Store::copy_extras) else {
            if replace {
                self.delete_thread_sync(target);
            }
            return Ok(());
        };
        let mut copy = store::BuiltCopy::new(target, replace);
        copy.add_records(records);
        for (ns, x) in extras {
            copy.add_extras(&ns, x);
        }
        if copy.is_empty() {
            if replace {
                self.delete_thread_sync(target);
            }
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
                Ok(None) => return Ok(()),
                Ok(Some((replaced, tag))) => {
                    self.slice_per_hold(|store, after, garbage| store.fill_global(target, &tag, after, garbage));
                    self.drop_unlinked(replaced);
                    return Ok(());
                }
                Err(copy) => copy,
            }
        };
        // Refused: remove the entries inserted so far, a slice per hold.
        self.slice_per_hold(|store, after, garbage| store.drop_global(copy.thread(), after, garbage));
        Self::dispose(copy.into_garbage());
        Err(exists())
    }

    /// Runs `step` once per hold of the write lock, from the start, each
    /// time after the key the last one returned, until one returns `None`;
    /// what a hold removed is disposed of outside the lock.
    fn slice_per_hold(&self, mut step: impl FnMut(&mut Store, Option<&ThreadKey>, &mut Garbage) -> Option<ThreadKey>) {
        let mut after = None;
        loop {
            let mut garbage = Garbage::default();
            after = step(&mut self.store.write(), after.as_ref(), &mut garbage);
            Self::dispose(garbage);
            if after.is_none() {
                break;
            }
        }
    }

    /// Removes the runs' checkpoints a slice per lock hold. Fenced, the
    /// victims are found first (a slice per hold), a thread the writer never
    /// took refuses the call before anything goes, and each slice of a
    /// thread is removed holding its lease row, checked then.
    pub(super) fn delete_for_runs_sync(&self, run_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let wanted: HashSet<&str> = run_ids.iter().map(String::as_str).collect();
        let mut cursor = None;
        let mut touched = std::collections::BTreeSet::new();
        let mut found: BTreeMap<Arc<str>, Vec<store::Located>> = BTreeMap::new();
        loop {
            let (victims, next) = self.store.read().find_runs(&wanted, cursor.as_ref());
            if fences.is_some() {
                for v in victims {
                    found.entry(v.0.clone()).or_default().push(v);
                }
            } else if !victims.is_empty() {
                let mut garbage = Garbage::default();
                touched.extend(self.store.write().delete_records(victims, &mut garbage));
                Self::dispose(garbage);
            }
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        if let Some(fences) = fences {
            fences.check_all(found.keys().map(|t| &**t))?;
            for (thread, mut victims) in found {
                let token = fences.token(&thread)?;
                while !victims.is_empty() {
                    let rest = victims.split_off(victims.len().min(store::SCAN_BUDGET));
                    let slice = std::mem::replace(&mut victims, rest);
                    self.leases.fenced(&thread, Some(&token), || {
                        let mut garbage = Garbage::default();
                        touched.extend(self.store.write().delete_records(slice, &mut garbage));
                        Self::dispose(garbage);
                        Ok(())
                    })?;
                }
            }
        }
        // Values are collected once per touched namespace, one per lock hold,
        // not after every slice (which made a large thread quadratic).
        for (thread, ns) in touched {
            let mut garbage = Garbage::default();
            self.store.write().collect_ns(&thread, &ns, &mut garbage);
            Self::dispose(garbage);
        }
        Ok(())
    }

    /// A thread read in slices, one lock hold each: its records (with
    /// their namespaces), then `per_ns` of each namespace. Started over when
    /// the thread is deleted or re-created meanwhile; `None` for an unknown
    /// thread.
    #[allow(clippy::type_complexity)]
    pub(super) fn read_thread<T>(
        &self,
        thread: &str,
        per_ns: impl Fn(&Store, &str, &Arc<store::ThreadTag>, &str) -> std::result::Result<T, ()>,
    ) -> Option<(Vec<(Arc<str>, Arc<store::Record>)>, Vec<(Arc<str>, T)>)> {
        'snapshot: loop {
            let (tag, namespaces) = self.store.read().copy_source(thread)?;
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
            let mut extras = Vec::with_capacity(namespaces.len());
            for ns in namespaces {
                let Ok(x) = per_ns(&self.store.read(), thread, &tag, &ns) else {
                    continue 'snapshot;
                };
                extras.push((ns, x));
            }
            return Some((records, extras));
        }
    }

    /// The keys of what a thread stores, read as [`Memory::read_thread`] does.
    pub(super) fn thread_keys_sync(&self, thread: &str) -> ThreadKeys {
        let Some((records, writes)) = self.read_thread(thread, Store::write_sets) else {
            return ThreadKeys::default();
        };
        let mut keys = ThreadKeys {
            checkpoints: records
                .iter()
                .map(|(ns, rec)| CheckpointKey {
                    checkpoint_ns: ns.to_string(),
                    checkpoint_id: rec.id.to_string(),
                    parent_checkpoint_id: rec.parent.as_deref().map(str::to_owned),
                })
                .collect(),
            writes: Vec::new(),
        };
        for (ns, sets) in &writes {
            for (id, set) in sets {
                keys.writes.extend(set.iter().map(|w| WriteKey {
                    checkpoint_ns: ns.to_string(),
                    checkpoint_id: id.clone(),
                    task_id: w.task_id.to_string(),
                    task_path: w.task_path.to_string(),
                    idx: w.idx,
                    channel: w.channel.clone(),
                }));
            }
        }
        keys
    }

    /// Plans from a snapshot read a slice per lock hold, then removes the
    /// victims oldest first, 1024 per hold (each only if still the stored
    /// record): the kept checkpoints, their writes and the values they read
    /// stay readable throughout. The kept checkpoints whose parent went
    /// forget it in the hold that removes the last victims (1024 per hold
    /// after that).
    ///
    /// Fenced, each hold that removes anything first checks `fence` on the
    /// thread's lease row and holds the row until the hold ends.
    pub(super) fn prune_keep_latest(&self, thread: &str, fence: Option<&FenceToken>) -> Result<()> {
        let Some((records, write_sets)) = self.read_thread(thread, Store::write_sets) else {
            return Ok(());
        };
        let hold = |f: &mut dyn FnMut(&mut Garbage)| -> Result<()> {
            self.leases.fenced(thread, fence, || {
                let mut garbage = Garbage::default();
                f(&mut garbage);
                Self::dispose(garbage);
                Ok(())
            })
        };
        let write_ids: HashMap<_, _> = write_sets
            .into_iter()
            .map(|(ns, sets)| (ns, sets.into_iter().map(|(id, _)| id).collect()))
            .collect();
        let plan = store::PrunePlan::new(&Arc::from(thread), records, write_ids);
        let store::PrunePlan {
            mut victims,
            drop_ns,
            orphan_writes,
            mut orphaned,
        } = plan;
        let take = |v: &mut Vec<_>| {
            let rest = v.split_off(v.len().min(store::SCAN_BUDGET));
            std::mem::replace(v, rest)
        };
        let mut touched = std::collections::BTreeSet::new();
        while !victims.is_empty() || !orphaned.is_empty() {
            let slice = take(&mut victims);
            let forget = if victims.is_empty() {
                take(&mut orphaned)
            } else {
                Vec::new()
            };
            let (mut slice, mut forget) = (Some(slice), Some(forget));
            hold(&mut |garbage| {
                let mut store = self.store.write();
                touched.extend(store.delete_records(slice.take().unwrap_or_default(), garbage));
                store.forget_parents(forget.take().unwrap_or_default(), garbage);
            })?;
        }
        for (ns, ids) in orphan_writes {
            for chunk in ids.chunks(store::SCAN_BUDGET) {
                hold(&mut |garbage| self.store.write().remove_orphan_writes(thread, &ns, chunk, garbage))?;
            }
        }
        for ns in drop_ns {
            hold(&mut |garbage| self.store.write().drop_ns_if_empty(thread, &ns, garbage))?;
        }
        for (thread, ns) in touched {
            let mut garbage = Garbage::default();
            self.store.write().collect_ns(&thread, &ns, &mut garbage);
            Self::dispose(garbage);
        }
        Ok(())
    }
}
