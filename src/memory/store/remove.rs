//! Removals from the store: threads, runs, pruned checkpoints, and the
//! values no checkpoint names any more.

use super::*;

impl Store {
    /// Unlinks a thread, O(1): every read stops seeing it now (its global
    /// entries die with its tag). The caller then removes those entries in
    /// slices with [`Store::drop_global`], releasing the lock in between, and
    /// frees the thread.
    pub(in crate::memory) fn unlink_thread(&mut self, thread: &str) -> Option<Thread> {
        let t = self.threads.remove(thread)?;
        self.order.remove(thread);
        t.tag.kill();
        Some(t)
    }

    /// Removes from the global index up to [`SCAN_BUDGET`] entries of the
    /// unlinked thread `t`, from its (id, ns) `after` (exclusive) on, unless a
    /// record of a re-created thread took the key meanwhile. Returns where to
    /// go on, `None` when done.
    pub(in crate::memory) fn drop_global(
        &mut self,
        t: &Thread,
        after: Option<&ThreadKey>,
        garbage: &mut Garbage,
    ) -> Option<ThreadKey> {
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

    /// Removes one checkpoint of (thread, ns) from the three indexes, with its
    /// writes.
    pub(super) fn remove_checkpoint(
        global: &mut GlobalIndex,
        t: &mut Thread,
        ns: &Arc<str>,
        id: &CkptId,
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
    pub(super) fn tidy_thread(&mut self, thread: &str, garbage: &mut Garbage) {
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
    pub(in crate::memory) fn find_runs(
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
                // (Read without keeping it: a scan must not make every record
                // hot. Metadata that does not read back names no run.)
                let metadata = rec.metadata();
                if metadata.is_ok_and(|m| m.run_id().is_some_and(|r| run_ids.contains(r))) {
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
    pub(in crate::memory) fn delete_records(
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
    pub(in crate::memory) fn collect_ns(&mut self, thread: &str, ns: &str, garbage: &mut Garbage) {
        if let Some(t) = self.threads.get_mut(thread) {
            if let Some(n) = t.namespaces.get_mut(ns) {
                t.bytes = t.bytes.saturating_sub(n.collect_blobs());
            }
        }
        self.tidy_thread(thread, garbage);
    }

    /// The write sets of (thread, ns), by checkpoint id (handle clones).
    pub(in crate::memory) fn write_sets(
        &self,
        thread: &str,
        tag: &Arc<ThreadTag>,
        ns: &str,
    ) -> Result<Vec<(String, Arc<WriteSet>)>, ()> {
        let t = self.source_of(thread, tag).ok_or(())?;
        Ok(t.namespaces
            .get(ns)
            .map(|n| n.writes.iter().map(|(id, e)| (id.clone(), e.set.clone())).collect())
            .unwrap_or_default())
    }

    /// Removes the writes of (thread, ns) with these checkpoint ids where no
    /// checkpoint has the id (any more). O(log n) each.
    pub(in crate::memory) fn remove_orphan_writes(
        &mut self,
        thread: &str,
        ns: &str,
        ids: &[String],
        garbage: &mut Garbage,
    ) {
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

    /// Clears the parent of each of these records that is still the stored
    /// one and whose parent is no longer stored in its namespace: the
    /// record is replaced by a copy without parent in the three indexes.
    /// O(log n) each.
    pub(in crate::memory) fn forget_parents(&mut self, records: Vec<Located>, garbage: &mut Garbage) {
        for (thread, ns, rec) in records {
            let Store { threads, global, .. } = self;
            let Some(t) = threads.get_mut(&*thread) else {
                continue;
            };
            let Some(n) = t.namespaces.get_mut(&*ns) else {
                continue;
            };
            let current = n.checkpoints.get(&*rec.id);
            let parent_gone = rec.parent.as_deref().is_some_and(|p| !n.checkpoints.contains_key(p));
            if !parent_gone || !current.is_some_and(|c| Arc::ptr_eq(c, &rec)) {
                continue;
            }
            let new = Arc::new(rec.without_parent());
            let key = (rec.id.clone(), ns.clone());
            n.checkpoints.insert(rec.id.clone(), new.clone());
            t.by_id.insert(key, new.clone());
            let global_key = (rec.id.clone(), t.name.clone(), ns);
            if let Some(g) = global.get_mut(&global_key) {
                if Arc::ptr_eq(g, &rec) {
                    *g = new;
                }
            }
            garbage.push(Box::new(rec), 1);
        }
    }

    /// Removes a namespace of `thread` whole (writes and values) if it has no
    /// checkpoint left; O(1), its contents freed outside the lock.
    pub(in crate::memory) fn drop_ns_if_empty(&mut self, thread: &str, ns: &str, garbage: &mut Garbage) {
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
}

/// Where `find_runs` goes on.
#[derive(Debug, Clone)]
pub(in crate::memory) enum RunCursor {
    /// With the thread after this one.
    AfterThread(Arc<str>),
    /// In this thread, after this (id, ns).
    InThread(Arc<str>, ThreadKey),
}

/// What `prune(KeepLatest)` removes from a thread, planned outside the lock
/// from a snapshot of its records (oldest first) and write ids.
#[derive(Debug, Default)]
pub(in crate::memory) struct PrunePlan {
    /// Checkpoints to remove, (id, ns) ascending.
    pub(in crate::memory) victims: Vec<Located>,
    /// Per-call namespaces of older root checkpoints: removed whole.
    pub(in crate::memory) drop_ns: Vec<Arc<str>>,
    /// Per namespace, write ids with no checkpoint older than its head.
    pub(in crate::memory) orphan_writes: Vec<(Arc<str>, Vec<String>)>,
    /// Kept checkpoints whose parent is not kept: they forget it once the
    /// victims are gone ([`Store::forget_parents`]).
    pub(in crate::memory) orphaned: Vec<Located>,
}

impl PrunePlan {
    /// What [`crate::engine::prune`]'s rule removes from the snapshot.
    pub(in crate::memory) fn new(
        thread: &Arc<str>,
        records: Vec<(Arc<str>, Arc<Record>)>,
        mut write_ids: HashMap<Arc<str>, Vec<String>>,
    ) -> Self {
        let mut by_ns: HashMap<Arc<str>, BTreeMap<CkptId, Arc<Record>>> = HashMap::new();
        for (ns, rec) in records {
            by_ns.entry(ns).or_default().insert(rec.id.clone(), rec);
        }
        let heads: Vec<prune::Head> = by_ns
            .iter()
            .filter_map(|(ns, checkpoints)| {
                let head = checkpoints.values().next_back()?;
                let unstored = head
                    .versions()
                    .enumerate()
                    .filter(|(i, _)| head.values.get(*i).is_none_or(Option::is_none))
                    .map(|(_, (ch, _))| ch);
                let metadata = head.metadata().ok()?;
                Some(prune::Head::new(&**ns, &*head.id, &metadata, unstored))
            })
            .collect();
        let root = by_ns.get("");
        let saved: HashSet<&str> = prune::roots_to_check(&heads)
            .into_iter()
            .filter(|r| root.is_some_and(|c| c.contains_key(*r)))
            .collect();
        let mut plan = PrunePlan::default();
        let mut remove: Vec<(CkptId, Arc<str>, Arc<Record>)> = Vec::new();
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
                let stored = rec.stored_channels();
                if walk.step(&rec.id, |ch| stored.contains(ch)) {
                    next = rec.parent.as_deref();
                }
            }
            let mut kept: HashSet<String> = walk.into_kept().into_iter().collect();
            kept.insert(keep.head.to_owned());
            for (id, rec) in checkpoints {
                if !kept.contains(&**id) {
                    remove.push((id.clone(), name.clone(), rec.clone()));
                } else if rec.parent.as_deref().is_some_and(|p| !kept.contains(p)) {
                    plan.orphaned.push((thread.clone(), name.clone(), rec.clone()));
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
