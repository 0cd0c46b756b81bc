//! [`InMemoryStore`]: the reference store, LangGraph's `InMemoryStore`
//! plus TTL.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use indexmap::IndexMap;
use parking_lot::RwLock;

use super::embed::cosine_similarity;
use super::engine::{
    expiry, store_option_setters, store_over_engine, Prepared, PutWrite, Read, ReadResult, SearchRead, StoreBackend,
    StoreConfig, StoreEngine, Write,
};
use super::rank::{score_order, Ranked};
use super::sweeper::SweepGuard;
use super::{Item, ListNamespacesOp, Namespace, SearchItem};
use crate::Result;

/// A store in memory: LangGraph's `InMemoryStore`, with its orders (items in
/// the order they were first put, namespaces in the order they were first
/// filled), its vector search over the caller's embeddings (cosine
/// similarity as Python computes it), plus TTL (`refresh_on_read`,
/// `default_ttl`, expired items never read). Differences from Python's are
/// listed in `docs/store.md`.
///
/// ```
/// use std::sync::Arc;
/// use checkpointer::store::{HashedNgramEmbeddings, IndexConfig, InMemoryStore, Namespace, SearchOp, StoreExt};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// let index = IndexConfig::new(64, Arc::new(HashedNgramEmbeddings::new(64))).fields(["text"]);
/// let store = InMemoryStore::builder().index(index).build()?;
/// let docs = Namespace::new(["docs"])?;
/// store.put(&docs, "1", serde_json::json!({"text": "rust tutorial"})).await?;
/// store.put(&docs, "2", serde_json::json!({"text": "python guide"})).await?;
/// let found = store.search(SearchOp::new(docs.clone()).query("a rust guide")).await?;
/// assert_eq!(found[0].item.key, "1");
/// assert!(found[0].score > found[1].score);
/// assert_eq!(store.get(&docs, "2").await?.unwrap().value["text"], "python guide");
/// # Ok(())
/// # }
/// ```
pub struct InMemoryStore {
    engine: StoreEngine<Arc<Memory>>,
    sweeper: Option<SweepGuard>,
}

impl std::fmt::Debug for InMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryStore")
            .field("index", &self.engine.index)
            .field("ttl", &self.engine.ttl)
            .finish_non_exhaustive()
    }
}

impl Default for InMemoryStore {
    fn default() -> Self {
        InMemoryStore::new()
    }
}

impl InMemoryStore {
    /// An empty store without index or TTL configuration.
    pub fn new() -> InMemoryStore {
        InMemoryStore {
            engine: StoreEngine::new(Arc::default(), StoreConfig::default()),
            sweeper: None,
        }
    }

    /// A builder for a store with an index, a TTL configuration or a clock.
    pub fn builder() -> InMemoryStoreBuilder {
        InMemoryStoreBuilder::default()
    }
}

/// Builds an [`InMemoryStore`].
#[derive(Default, Debug)]
pub struct InMemoryStoreBuilder {
    options: StoreConfig,
}

impl InMemoryStoreBuilder {
    store_option_setters!(builder);

    /// The store, its [`TtlSweeper`](super::TtlSweeper) started if asked for (on the current
    /// tokio runtime, or a thread of its own outside one).
    ///
    /// # Errors
    /// [`StoreError::InvalidIndex`](super::StoreError::InvalidIndex) for an
    /// index of 0 dimensions; [`StoreError::InvalidTtl`](super::StoreError::InvalidTtl)
    /// for a default TTL that is not a finite, non-negative number;
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a sweep
    /// interval of zero.
    pub fn build(self) -> Result<InMemoryStore> {
        self.options.check()?;
        let interval = self.options.sweep_interval;
        let engine = StoreEngine::new(Arc::default(), self.options);
        let sweeper = engine.start_sweeper(interval)?;
        Ok(InMemoryStore { engine, sweeper })
    }
}

store_over_engine!(InMemoryStore, engine, sweeper);

struct Entry {
    item: Item,
    expires_at: Option<SystemTime>,
    ttl_minutes: Option<f64>,
    /// By field path name; kept across puts that do not replace them, as
    /// LangGraph keeps them.
    vectors: IndexMap<String, Vec<f32>>,
}

impl Entry {
    fn live(&self, now: SystemTime) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// Namespaces in the order they were first filled; items in the order
/// they were first put. An emptied namespace is removed.
#[derive(Default)]
struct Data {
    spaces: IndexMap<Namespace, IndexMap<String, Entry>>,
}

#[derive(Default)]
pub(crate) struct Memory {
    data: RwLock<Data>,
}

#[async_trait]
impl StoreBackend for Memory {
    const NAME: &'static str = "memory";

    async fn execute(&self, batch: Prepared) -> Result<Vec<ReadResult>> {
        let Prepared { now, reads, writes } = batch;
        let refreshes = reads.iter().any(|r| {
            matches!(
                r,
                Read::Get { refresh_ttl: true, .. } | Read::Search(SearchRead { refresh_ttl: true, .. })
            )
        });
        if writes.is_empty() && !refreshes {
            let data = self.data.read();
            return Ok(reads.iter().map(|r| data.read(r, now).0).collect());
        }
        let mut data = self.data.write();
        let mut results = Vec::with_capacity(reads.len());
        for read in &reads {
            let (result, touched) = data.read(read, now);
            data.refresh(touched, now);
            results.push(result);
        }
        for write in writes {
            data.write(write, now);
        }
        Ok(results)
    }

    async fn sweep_expired(&self, now: SystemTime, max: usize) -> Result<usize> {
        let expired: Vec<(Namespace, String)> = {
            let data = self.data.read();
            data.spaces
                .iter()
                .flat_map(|(ns, items)| {
                    items
                        .iter()
                        .filter(|(_, e)| !e.live(now))
                        .map(move |(k, _)| (ns.clone(), k.clone()))
                })
                .take(max)
                .collect()
        };
        // one pass over each namespace touched (not a shifting remove per
        // item): the write lock is held for a slice's namespaces only
        let mut by_space: IndexMap<Namespace, HashSet<String>> = IndexMap::new();
        for (ns, key) in expired {
            by_space.entry(ns).or_default().insert(key);
        }
        let mut data = self.data.write();
        let mut removed = 0usize;
        for (ns, keys) in by_space {
            let Some(items) = data.spaces.get_mut(&ns) else {
                continue;
            };
            let before = items.len();
            items.retain(|k, e| e.live(now) || !keys.contains(k));
            removed += before - items.len();
            if items.is_empty() {
                data.spaces.shift_remove(&ns);
            }
        }
        Ok(removed)
    }
}

type Touched = Vec<(Namespace, String)>;

impl Data {
    fn entry(&self, ns: &Namespace, key: &str, now: SystemTime) -> Option<&Entry> {
        self.spaces.get(ns)?.get(key).filter(|e| e.live(now))
    }

    fn read(&self, read: &Read, now: SystemTime) -> (ReadResult, Touched) {
        match read {
            Read::Get {
                namespace,
                key,
                refresh_ttl,
            } => {
                let entry = self.entry(namespace, key, now);
                let touched = match (entry, refresh_ttl) {
                    (Some(_), true) => vec![(namespace.clone(), key.clone())],
                    _ => Vec::new(),
                };
                (ReadResult::Item(entry.map(|e| e.item.clone())), touched)
            }
            Read::Search(search) => {
                let found = self.search(search, now);
                let touched = if search.refresh_ttl {
                    found
                        .iter()
                        .map(|s| (s.item.namespace.clone(), s.item.key.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                (ReadResult::Search(found), touched)
            }
            Read::ListNamespaces(op) => (ReadResult::Namespaces(self.list_namespaces(op, now)), Vec::new()),
        }
    }

    fn search(&self, search: &SearchRead, now: SystemTime) -> Vec<SearchItem> {
        let (prefix, filter, limit, offset) = (&search.prefix, search.filter.as_ref(), search.limit, search.offset);
        let query = search.query.as_deref().map(Vec::as_slice);
        let candidates = self
            .spaces
            .iter()
            .filter(|(ns, _)| ns.starts_with(prefix))
            .flat_map(|(_, items)| items.values())
            .filter(|e| e.live(now) && filter.is_none_or(|f| f.matches(&e.item.value)));
        let end = offset.saturating_add(limit);
        let Some(query) = query else {
            return candidates
                .skip(offset)
                .take(limit)
                .map(|e| SearchItem {
                    item: e.item.clone(),
                    score: None,
                })
                .collect();
        };
        let candidates: Vec<&Entry> = candidates.collect();
        // every vector scored; an item ranks by its best one; equal scores
        // keep the candidates' order (as Python's stable sorted()): the
        // position breaks ties, so only the first `end` items get sorted
        let mut scored: Vec<(f64, usize, usize)> = Vec::new();
        let mut scoreless = Vec::new();
        for (i, e) in candidates.iter().enumerate() {
            for v in e.vectors.values() {
                let position = scored.len();
                scored.push((cosine_similarity(query, v), i, position));
            }
            if e.vectors.is_empty() {
                scoreless.push(i);
            }
        }
        let order = |a: &(f64, usize, usize), b: &(f64, usize, usize)| {
            score_order(Some(a.0).filter(|s| !s.is_nan()), Some(b.0).filter(|s| !s.is_nan())).then(a.2.cmp(&b.2))
        };
        let mut seen = HashSet::new();
        let mut kept: Vec<(Option<f64>, usize)> = Vec::new();
        for (score, i, _) in Ranked::new(scored, end.saturating_mul(2), order) {
            if seen.contains(&i) {
                continue;
            }
            let rank = seen.len();
            seen.insert(i);
            if rank >= end {
                break;
            }
            if rank >= offset {
                kept.push((Some(score), i));
            }
        }
        // items without vectors follow, from the first one (LangGraph does
        // not apply the offset to them)
        let room = limit.saturating_sub(kept.len());
        kept.extend(scoreless.into_iter().take(room).map(|i| (None, i)));
        kept.into_iter()
            .map(|(score, i)| SearchItem {
                item: candidates[i].item.clone(),
                score,
            })
            .collect()
    }

    fn list_namespaces(&self, op: &ListNamespacesOp, now: SystemTime) -> Vec<Namespace> {
        let mut found: Vec<Namespace> = self
            .spaces
            .iter()
            .filter(|(ns, items)| {
                items.values().any(|e| e.live(now)) && op.match_conditions.iter().all(|c| c.matches(ns))
            })
            .map(|(ns, _)| op.max_depth.map_or_else(|| ns.clone(), |d| ns.truncated(d)))
            .collect();
        found.sort();
        found.dedup();
        found.into_iter().skip(op.offset).take(op.limit).collect()
    }

    fn refresh(&mut self, touched: Touched, now: SystemTime) {
        for (ns, key) in touched {
            if let Some(e) = self.spaces.get_mut(&ns).and_then(|items| items.get_mut(&key)) {
                if let Some(minutes) = e.ttl_minutes {
                    e.expires_at = expiry(now, minutes).ok().or(e.expires_at);
                }
            }
        }
    }

    fn write(&mut self, write: Write, now: SystemTime) {
        match write {
            Write::Delete { namespace, key } => self.remove(&namespace, &key),
            Write::Put(put) => {
                let PutWrite {
                    namespace,
                    key,
                    value,
                    expires_at,
                    ttl_minutes,
                    vectors,
                } = put;
                let item = Item {
                    namespace: namespace.clone(),
                    key: key.clone(),
                    value,
                    created_at: now,
                    updated_at: now,
                };
                let items = self.spaces.entry(namespace).or_default();
                match items.get_mut(&key) {
                    Some(e) => {
                        e.item = item;
                        e.expires_at = expires_at;
                        e.ttl_minutes = ttl_minutes;
                        e.vectors.extend(vectors);
                    }
                    None => {
                        items.insert(
                            key,
                            Entry {
                                item,
                                expires_at,
                                ttl_minutes,
                                vectors: vectors.into_iter().collect(),
                            },
                        );
                    }
                }
            }
        }
    }

    fn remove(&mut self, ns: &Namespace, key: &str) {
        if let Some(items) = self.spaces.get_mut(ns) {
            items.shift_remove(key);
            if items.is_empty() {
                self.spaces.shift_remove(ns);
            }
        }
    }
}
