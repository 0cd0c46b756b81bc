//! Retention on the store: skeletons read a page per read-lock hold, and a
//! batch removed in one write-lock hold (bounded by the batch).

use super::*;
use crate::checkpoint::channels::INTERRUPT;
use crate::engine::{Removed, SkeletonQuery};
use crate::retention::parse_ts_micros;
use crate::retention::plan::{blob_ref, Batch, Facts, Skeleton};

impl Store {
    /// Up to `limit` skeletons of `thread` after (ns, id) `after`, in (ns, id)
    /// order.
    pub(in crate::memory) fn skeletons(&self, query: SkeletonQuery<'_>) -> Vec<Skeleton> {
        let (thread, after, limit, mark_key) = (query.thread_id, query.after, query.limit, query.mark_key);
        let mut out = Vec::new();
        let Some(t) = self.threads.get(thread) else {
            return out;
        };
        let from = after.map_or(Bound::Unbounded, |(ns, _)| Bound::Included(ns));
        for (ns, n) in t.namespaces.range::<str, _>((from, Bound::Unbounded)) {
            let ids = match after {
                Some((a_ns, a_id)) if a_ns == &**ns => {
                    n.checkpoints.range::<str, _>((Bound::Excluded(a_id), Bound::Unbounded))
                }
                _ => n.checkpoints.range::<str, _>(..),
            };
            for (id, rec) in ids {
                if out.len() == limit {
                    return out;
                }
                // metadata that does not read back marks nothing and names
                // no delta channel
                let metadata = rec.metadata().map(Cow::into_owned).unwrap_or_default();
                let stored: Vec<bool> = rec.values.iter().map(Option::is_some).collect();
                let channels = rec
                    .versions()
                    .map(|(ch, _)| ch)
                    .zip(stored)
                    .chain(rec.unversioned().iter().map(|(ch, _)| (ch.as_str(), true)));
                let facts = Facts::new(&metadata, mark_key, channels);
                let writes = n.writes.get(&**id).map(|w| &w.set);
                out.push(Skeleton {
                    ns: ns.to_string(),
                    id: id.to_string(),
                    parent: rec.parent.as_deref().map(str::to_owned),
                    ts: parse_ts_micros(rec.ts()),
                    marked: facts.marked,
                    writes: writes.map_or(0, |w| w.len() as u64),
                    interrupt: writes.is_some_and(|w| w.iter().any(|w| w.channel == INTERRUPT)),
                    needs: facts.needs,
                    stores: facts.stores,
                    refs: rec.versions().map(|(ch, v)| blob_ref(ch, &v.key())).collect(),
                });
            }
        }
        out
    }

    /// Removes a retention batch of `thread` (see `Backend::remove_batch`).
    pub(in crate::memory) fn remove_batch(&mut self, thread: &str, batch: &Batch, garbage: &mut Garbage) -> Removed {
        let mut removed = Removed::default();
        let Store { threads, global, .. } = self;
        let Some(t) = threads.get_mut(thread) else {
            return removed;
        };
        let Some(ns) = t.namespaces.get(batch.ns.as_str()).map(|n| n.name.clone()) else {
            return removed;
        };
        let orphans: HashSet<u64> = batch.orphan_refs.iter().copied().collect();
        let mut dead_blobs: Vec<(String, String)> = Vec::new();
        for id in &batch.ids {
            let Some(n) = t.namespaces.get(&ns) else { break };
            let Some(rec) = n.checkpoints.get(id.as_str()).cloned() else {
                continue;
            };
            removed.writes += n.writes.get(id.as_str()).map_or(0, |w| w.set.len() as u64);
            for (ch, v) in rec.versions() {
                let key = v.key();
                if orphans.contains(&blob_ref(ch, &key)) {
                    dead_blobs.push((ch.to_owned(), key.into_owned()));
                }
            }
            Self::remove_checkpoint(global, t, &ns, &rec.id, garbage);
            removed.checkpoints += 1;
        }
        if let Some(n) = t.namespaces.get_mut(&ns) {
            // values named by checkpoints put since the scan stay
            for rec in n
                .checkpoints
                .range::<str, _>((Bound::Excluded(batch.newest.as_str()), Bound::Unbounded))
                .map(|(_, r)| r)
            {
                dead_blobs.retain(|(ch, ver)| !rec.versions().any(|(c, v)| c == ch && v.key() == ver.as_str()));
            }
            if n.inflight == 0 {
                let mut freed = 0;
                for (ch, ver) in dead_blobs {
                    if let Some(versions) = n.blobs.get_mut(&ch) {
                        if let Some(s) = versions.remove(&ver) {
                            freed += s.size();
                            garbage.push(Box::new(s), 1);
                        }
                        if versions.is_empty() {
                            n.blobs.remove(&ch);
                        }
                    }
                }
                t.bytes = t.bytes.saturating_sub(freed);
            }
        }
        let gone: HashSet<&str> = batch.ids.iter().map(String::as_str).collect();
        let orphaned: Vec<Located> = t
            .namespaces
            .get(&ns)
            .map(|n| {
                batch
                    .clear_parent
                    .iter()
                    .filter_map(|id| n.checkpoints.get(id.as_str()))
                    .filter(|rec| rec.parent.as_deref().is_some_and(|p| gone.contains(p)))
                    .map(|rec| (t.name.clone(), ns.clone(), rec.clone()))
                    .collect()
            })
            .unwrap_or_default();
        self.forget_parents(orphaned, garbage);
        self.drop_ns_if_empty(thread, &ns, garbage);
        removed
    }
}
