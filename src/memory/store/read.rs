//! Reads of the store: lookups, list pages, thread pages, parent chains.

use super::*;

impl Store {
    /// A checkpoint by id, or the latest of (thread, ns).
    pub(in crate::memory) fn get(&self, thread: &str, ns: &str, id: Option<&str>) -> Option<Found> {
        let t = self.threads.get(thread)?;
        let n = t.namespaces.get(ns)?;
        let record = match id {
            Some(id) => n.checkpoints.get(id)?,
            None => n.checkpoints.values().next_back()?,
        };
        Some(Found::at(t, n, record))
    }

    /// The first cursor of a list scope: the exclusive bound `before`, or none.
    pub(in crate::memory) fn first_cursor(scope: &Scope, before: Option<&str>) -> Option<Cursor> {
        let before = CkptId::from(before?);
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
    pub(in crate::memory) fn page(&self, scope: &Scope, cursor: Option<&Cursor>, max_items: usize) -> Page {
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
                            Some(Found::at(t, n, rec))
                        };
                        match ns {
                            Some(ns) => items.extend(t.namespaces.get(ns.as_str()).and_then(|n| found(n))),
                            None => {
                                let mut hits: Vec<&Namespace> = t
                                    .by_id
                                    .range::<ThreadKey, _>((
                                        Bound::Included((CkptId::from(id.as_str()), Arc::from(""))),
                                        Bound::Unbounded,
                                    ))
                                    .take_while(|((i, _), _)| **i == **id)
                                    .filter_map(|((_, ns), _)| t.namespaces.get(ns).map(|n| &**n))
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
                let (items, last) = scan(iter, max_items, |_, rec| Some(Found::at(t, n, rec)));
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
                    Some(Found::at(t, n, rec))
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
                let (items, last) = scan(iter, max_items, |(id, thread, ns), rec| {
                    let t = self.threads.get(thread)?;
                    let n = t.namespaces.get(ns)?;
                    if rec.tag.is_alive() {
                        return Some(Found::at(t, n, rec));
                    }
                    // The entry of a thread replaced since (an import) that
                    // its replacement has not taken yet: the replacement's
                    // record of the key, if it has one.
                    let now = n.checkpoints.get(&**id)?;
                    now.tag.is_alive().then(|| Found::at(t, n, now))
                });
                Page {
                    items,
                    next: last.map(Cursor::Global),
                }
            }
        }
    }

    /// Threads after `after` (exclusive) in id order with their latest
    /// checkpoint, at most [`SCAN_BUDGET`] threads examined.
    /// The caller applies its metadata filter outside the lock.
    pub(in crate::memory) fn threads_page(
        &self,
        after: Option<&str>,
        max_items: usize,
    ) -> (Vec<Located>, Option<Arc<str>>) {
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
    pub(in crate::memory) fn chain(
        &self,
        thread: &str,
        ns: &str,
        id: Option<&str>,
        from: Option<&str>,
    ) -> Option<Vec<Link>> {
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

/// One checkpoint of a parent chain with its writes (see [`Store::chain`]).
pub(in crate::memory) type Link = (Arc<Record>, Option<Arc<WriteSet>>);

/// Walks `iter` (newest first) collecting accepted entries: stops at
/// `max_items` hits or [`SCAN_BUDGET`] entries. Returns the hits and the last
/// key examined when the scan stopped early (`None` = exhausted).
pub(super) fn scan<'a, K: Clone + 'a>(
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

impl Found {
    /// The checkpoint `record` of namespace `n` of thread `t`, with its writes.
    fn at(t: &Thread, n: &Namespace, record: &Arc<Record>) -> Found {
        Found {
            thread: t.name.clone(),
            ns: n.name.clone(),
            record: record.clone(),
            writes: n.writes.get(&*record.id).map(|e| e.set.clone()),
        }
    }
}
