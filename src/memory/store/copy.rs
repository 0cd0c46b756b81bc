//! Thread copies: the source read in slices, the target built outside the
//! lock and published whole.

use super::*;

impl Store {
    /// The start of a `copy_thread` snapshot of `source`: its tag (which later
    /// slices check, so a source deleted or re-created meanwhile is noticed)
    /// and its namespaces. `None` for an unknown source.
    pub(in crate::memory) fn copy_source(&self, source: &str) -> Option<(Arc<ThreadTag>, Vec<Arc<str>>)> {
        let t = self.threads.get(source)?;
        Some((t.tag.clone(), t.namespaces.keys().cloned().collect()))
    }

    pub(super) fn source_of(&self, source: &str, tag: &Arc<ThreadTag>) -> Option<&Thread> {
        self.threads.get(source).filter(|t| Arc::ptr_eq(&t.tag, tag))
    }

    /// Up to [`SCAN_BUDGET`] records of `source` after (id, ns) `after`, with
    /// where to go on (`None` = done); `Err` when the source is no longer the
    /// thread `tag` names (deleted meanwhile).
    pub(in crate::memory) fn copy_records(
        &self,
        source: &str,
        tag: &Arc<ThreadTag>,
        after: Option<&ThreadKey>,
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
    pub(in crate::memory) fn copy_extras(&self, source: &str, tag: &Arc<ThreadTag>, ns: &str) -> Result<NsExtras, ()> {
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
    /// Whether the store holds anything of the thread (checkpoints or writes).
    pub(in crate::memory) fn has_thread(&self, thread: &str) -> bool {
        self.threads.contains_key(thread)
    }

    pub(in crate::memory) fn has_checkpoints(&self, thread: &str) -> bool {
        self.threads.get(thread).is_some_and(|t| !t.by_id.is_empty())
    }

    /// Inserts up to [`SCAN_BUDGET`] global entries of a copy being installed,
    /// after (id, ns) `after`; they stay invisible while its tag is pending.
    /// `Err` when a key is held by a live record (the target has checkpoints:
    /// the copy is refused), unless the copy replaces the target: such keys
    /// are left to [`Store::fill_global`]. Returns where to go on, `None`
    /// when done.
    pub(in crate::memory) fn pend_global(
        &mut self,
        copy: &BuiltCopy,
        after: Option<&ThreadKey>,
        garbage: &mut Garbage,
    ) -> Result<Option<ThreadKey>, ()> {
        let t = &copy.thread;
        let lower = after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.clone()));
        for (i, ((id, ns), rec)) in t.by_id.range((lower, Bound::Unbounded)).enumerate() {
            let key = (id.clone(), t.name.clone(), ns.clone());
            if self.global.get(&key).is_some_and(|g| !g.tag.is_dead()) {
                if !copy.replace {
                    return Err(());
                }
                // The target's record stays listed until the copy replaces
                // it (see `fill_global`).
            } else if let Some(old) = self.global.insert(key, rec.clone()) {
                garbage.push(Box::new(old), 1);
            }
            if i + 1 == SCAN_BUDGET {
                return Ok(Some((id.clone(), ns.clone())));
            }
        }
        Ok(None)
    }

    /// After a replacing copy of `thread` (its tag `tag`) is published: its
    /// records take the global entries that the replaced thread's records
    /// held, up to [`SCAN_BUDGET`] per call from (id, ns) `after` on.
    /// Returns where to go on, `None` when done (or the thread is gone).
    pub(in crate::memory) fn fill_global(
        &mut self,
        thread: &str,
        tag: &Arc<ThreadTag>,
        after: Option<&ThreadKey>,
        garbage: &mut Garbage,
    ) -> Option<ThreadKey> {
        let Store { threads, global, .. } = self;
        let t = threads.get(thread).filter(|t| Arc::ptr_eq(&t.tag, tag))?;
        let lower = after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.clone()));
        for (i, ((id, ns), rec)) in t.by_id.range((lower, Bound::Unbounded)).enumerate() {
            let key = (id.clone(), t.name.clone(), ns.clone());
            match global.get_mut(&key) {
                // the replaced thread's (a newer put's stays)
                Some(g) if g.tag.is_dead() => garbage.push(Box::new(std::mem::replace(g, rec.clone())), 1),
                Some(_) => {}
                None => {
                    global.insert(key, rec.clone());
                }
            }
            if i + 1 == SCAN_BUDGET {
                return Some((id.clone(), ns.clone()));
            }
        }
        None
    }

    /// Makes a copy whose global entries are all in place visible, O(1) plus
    /// the writes and values a writes-only target held before (kept where the
    /// copy has no entry of the same key). Hands the copy back when the target
    /// got a checkpoint meanwhile (or, for a copy that replaces the target,
    /// when a `put` took one of its keys). A replacing copy unlinks the
    /// target instead, and returns it with the copy's tag: the caller gives
    /// the copy the target's global entries ([`Store::fill_global`]) and
    /// removes the rest ([`Store::drop_global`]).
    pub(in crate::memory) fn publish_copy(
        &mut self,
        copy: BuiltCopy,
        garbage: &mut Garbage,
    ) -> Result<Option<(Thread, Arc<ThreadTag>)>, BuiltCopy> {
        let name = copy.thread.name.clone();
        if !copy.thread.tag.is_pending() || (!copy.replace && self.has_checkpoints(&name)) {
            return Err(copy);
        }
        let mut t = copy.thread;
        if copy.replace {
            let old = self.threads.remove(&name);
            if let Some(old) = &old {
                old.tag.kill();
            }
            t.tag.publish();
            let tag = t.tag.clone();
            self.order.insert(name.clone());
            self.threads.insert(name, t);
            return Ok(old.map(|old| (old, tag)));
        }
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
                        if !to.contains_key(&ver) {
                            bytes += s.size();
                            to.insert(ver, s);
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
        Ok(None)
    }
}

/// One slice of a copy's source records, (ns, record); `Err` = the source
/// went away.
pub(in crate::memory) type CopySlice = Result<(Vec<(Arc<str>, Arc<Record>)>, Option<ThreadKey>), ()>;

/// The writes and values of one namespace, for a copy.
pub(in crate::memory) type NsExtras = (HashMap<String, Arc<WriteSet>>, OrdMap<String, OrdMap<String, Stored>>);

/// A thread copy built outside the lock: a whole [`Thread`] under a pending
/// tag, so that its global entries can be inserted a slice per lock hold
/// before it is published in O(1).
#[derive(Debug)]
pub(in crate::memory) struct BuiltCopy {
    thread: Thread,
    /// Whether the copy replaces the target rather than being refused by one
    /// with checkpoints.
    replace: bool,
}

impl BuiltCopy {
    /// An empty copy named `target`.
    pub(in crate::memory) fn new(target: &str, replace: bool) -> Self {
        let mut thread = Thread::new(target);
        thread.tag = ThreadTag::pending();
        BuiltCopy { thread, replace }
    }

    /// Adds copies of source records (re-tagged, so they live and die with
    /// the target).
    pub(in crate::memory) fn add_records(&mut self, records: Vec<(Arc<str>, Arc<Record>)>) {
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
    pub(in crate::memory) fn add_extras(&mut self, ns: &str, (writes, blobs): NsExtras) {
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
    pub(in crate::memory) fn is_empty(&self) -> bool {
        self.thread.is_empty()
    }

    /// The thread built (to remove its pending global entries with
    /// [`Store::drop_global`] when the copy is refused).
    pub(in crate::memory) fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Thread weight for [`Garbage`].
    pub(in crate::memory) fn into_garbage(self) -> Garbage {
        let weight = Store::weight(&self.thread);
        Garbage {
            items: vec![Box::new(self.thread)],
            weight,
        }
    }
}
