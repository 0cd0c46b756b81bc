//! Writes into the store: puts (whole or in slices) and write sets.

use super::*;

impl Store {
    /// Starts a wide put on (thread, ns): creates them if missing and holds
    /// off value collection there until [`Store::put_end`]. Returns the
    /// thread's tag, which later slices check.
    pub(in crate::memory) fn put_begin(&mut self, thread: &str, ns: &str) -> Arc<ThreadTag> {
        let t = self.thread_mut(thread);
        t.ns_mut(ns).inflight += 1;
        t.tag.clone()
    }

    /// Ends a wide put begun with [`Store::put_begin`] (if the thread is still
    /// the one it began on).
    pub(in crate::memory) fn put_end(&mut self, thread: &str, ns: &str, tag: &Arc<ThreadTag>) {
        if let Some(t) = self.threads.get_mut(thread).filter(|t| Arc::ptr_eq(&t.tag, tag)) {
            if let Some(n) = t.namespaces.get_mut(ns) {
                n.inflight = n.inflight.saturating_sub(1);
            }
        }
    }

    /// Whether `thread` is still the thread `tag` names.
    pub(in crate::memory) fn same_thread(&self, thread: &str, tag: &Arc<ThreadTag>) -> bool {
        self.threads.get(thread).is_some_and(|t| Arc::ptr_eq(&t.tag, tag))
    }

    /// One slice of a wide put: resolves these slots (channel, blob key,
    /// slot) and stores these extra blobs in (thread, ns). `None` when the
    /// thread is no longer the one the put began on (deleted meanwhile).
    pub(in crate::memory) fn put_slice(
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
    pub(in crate::memory) fn put(&mut self, new: NewCheckpoint<'_>) -> Option<Arc<Record>> {
        let NewCheckpoint {
            thread,
            ns,
            id,
            parent,
            cold,
            slots,
            extra_blobs,
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
        for ((ch, ver), slot) in cold.versions().zip(slots) {
            values.push(apply_slot(n, ch, ver.key(), slot, &mut bytes));
        }
        for (ch, ver, s) in extra_blobs {
            apply_extra(n, &ch, ver, s, &mut bytes);
        }

        let record = Arc::new(Record::new(
            id.clone(),
            parent,
            cold,
            values.into_boxed_slice(),
            tag,
            size,
        ));
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
    pub(in crate::memory) fn write_entry(&mut self, thread: &str, ns: &str, checkpoint_id: &str) -> WriteEntry {
        if let Some(e) = self.writes_of(thread, ns, checkpoint_id) {
            return e.clone();
        }
        let n = self.thread_mut(thread).ns_mut(ns);
        n.writes.entry(checkpoint_id.to_owned()).or_default().clone()
    }

    pub(super) fn writes_of(&self, thread: &str, ns: &str, checkpoint_id: &str) -> Option<&WriteEntry> {
        self.threads.get(thread)?.namespaces.get(ns)?.writes.get(checkpoint_id)
    }

    /// The current set of a write entry obtained from [`Store::write_entry`],
    /// if the entry is still the stored one (not removed or replaced since).
    pub(in crate::memory) fn write_set(
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
    pub(in crate::memory) fn swap_writes(
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
}

/// Resolves one slot of a put in namespace `n`: writes the blob it stores, if
/// any, and returns the value the checkpoint holds for the channel.
pub(super) fn apply_slot(
    n: &mut Namespace,
    ch: &str,
    key: Cow<'_, str>,
    slot: Slot,
    bytes: &mut isize,
) -> Option<Stored> {
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
pub(super) fn apply_extra(n: &mut Namespace, ch: &str, ver: String, s: Stored, bytes: &mut isize) {
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
