//! The store's rules, once: the generic [`StoreEngine`] over a small
//! crate-private [`StoreBackend`] that only moves items.
//!
//! The engine validates a whole batch before anything runs (namespaces,
//! values, TTLs, `max_depth`), merges puts to the same item (the last wins,
//! at the first one's position), extracts and embeds the texts of puts and
//! the queries of searches through the caller's [`Embeddings`](super::Embeddings),
//! checks the vectors' count and length, computes expiry times, and hands
//! the backend one [`Prepared`] batch: reads in op order, then writes, run
//! atomically, reads seeing the state before the writes.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::embed::{texts_at_tokens, tokenize_path};
use super::sweeper::{self, SweepGuard, SWEEP_SLICE};
use super::{
    Filter, IndexChoice, IndexConfig, Item, ListNamespacesOp, Namespace, Op, OpResult, PutOp, SearchItem, StoreError,
    Ttl, TtlConfig, MAX_VALUE_NESTING,
};
use crate::{Error, Result};

/// A read of a prepared batch.
#[derive(Debug)]
pub(crate) enum Read {
    Get {
        namespace: Namespace,
        key: String,
        refresh_ttl: bool,
    },
    Search(SearchRead),
    ListNamespaces(ListNamespacesOp),
}

/// A search of a prepared batch.
#[derive(Debug)]
pub(crate) struct SearchRead {
    pub prefix: Namespace,
    pub filter: Option<Filter>,
    pub limit: usize,
    pub offset: usize,
    /// The query's vector: a vector search (the store has an index and
    /// the query is not empty).
    pub query: Option<Arc<Vec<f32>>>,
    pub refresh_ttl: bool,
}

/// A write of a prepared batch; at most one per item.
#[derive(Debug)]
pub(crate) enum Write {
    Put(PutWrite),
    Delete { namespace: Namespace, key: String },
}

/// A put of a prepared batch.
#[derive(Debug)]
pub(crate) struct PutWrite {
    pub namespace: Namespace,
    pub key: String,
    pub value: Map<String, Value>,
    pub expires_at: Option<SystemTime>,
    pub ttl_minutes: Option<f64>,
    /// `(field path name, vector)`, merged into the item's vectors.
    pub vectors: Vec<(String, Vec<f32>)>,
}

/// What a read returns.
#[derive(Debug)]
pub(crate) enum ReadResult {
    Item(Option<Item>),
    Search(Vec<SearchItem>),
    Namespaces(Vec<Namespace>),
}

/// One batch, validated and embedded.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The batch's clock reading: items expired at `now` are never read.
    pub now: SystemTime,
    pub reads: Vec<Read>,
    pub writes: Vec<Write>,
}

/// What a store backend does: run a prepared batch atomically, sweep.
#[async_trait]
pub(crate) trait StoreBackend: Send + Sync + 'static {
    /// The backend's name in errors.
    const NAME: &'static str;

    /// Runs `batch.reads` in order, against the state before the batch,
    /// never returning an item expired at `batch.now` and restarting the
    /// TTL of the items read where asked; then applies `batch.writes`. All
    /// or nothing. One result per read, in order.
    async fn execute(&self, batch: Prepared) -> Result<Vec<ReadResult>>;

    /// Deletes up to `max` items expired at `now`; returns how many.
    async fn sweep_expired(&self, now: SystemTime, max: usize) -> Result<usize>;
}

/// A backend shared with its background sweeper.
#[async_trait]
impl<B: StoreBackend> StoreBackend for Arc<B> {
    const NAME: &'static str = B::NAME;

    async fn execute(&self, batch: Prepared) -> Result<Vec<ReadResult>> {
        (**self).execute(batch).await
    }

    async fn sweep_expired(&self, now: SystemTime, max: usize) -> Result<usize> {
        (**self).sweep_expired(now, max).await
    }
}

/// A clock, injectable for tests.
pub(crate) type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// What every store builder takes: the index, the TTL configuration, the
/// clock, the background sweeper's interval.
#[derive(Default, Clone)]
pub(crate) struct StoreConfig {
    pub index: Option<IndexConfig>,
    pub ttl: Option<TtlConfig>,
    pub clock: Option<Clock>,
    pub sweep_interval: Option<Duration>,
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .field("clock", &self.clock.as_ref().map(|_| "custom"))
            .field("sweep_interval", &self.sweep_interval)
            .finish()
    }
}

impl StoreConfig {
    /// Refuses an index of 0 dimensions and a default TTL that is not a
    /// finite, non-negative number of minutes.
    pub fn check(&self) -> Result<()> {
        check_config(self.index.as_ref(), self.ttl.as_ref())
    }
}

/// The builder methods of [`StoreConfig`] (a field `options`), written once
/// for every store builder.
macro_rules! store_option_setters {
    () => {
        /// Vector search with this index (the caller's embedding function).
        pub fn index(mut self, index: $crate::store::IndexConfig) -> Self {
            self.options.index = Some(index);
            self
        }

        /// Expiry with this configuration.
        pub fn ttl(mut self, ttl: $crate::store::TtlConfig) -> Self {
            self.options.ttl = Some(ttl);
            self
        }

        /// Reads time from `clock` instead of the system clock (tests of TTL).
        pub fn clock(mut self, clock: impl Fn() -> std::time::SystemTime + Send + Sync + 'static) -> Self {
            self.options.clock = Some(std::sync::Arc::new(clock));
            self
        }

        /// Runs a background [`TtlSweeper`](crate::store::TtlSweeper) every
        /// `interval` (see [`Store::sweeper`](crate::store::Store::sweeper)),
        /// whatever `sweep_interval_minutes` says.
        pub fn sweep_interval(mut self, interval: std::time::Duration) -> Self {
            self.options.sweep_interval = Some(interval);
            self
        }
    };
    // a store builder: the setters and the whole configuration at once
    (builder) => {
        $crate::store::engine::store_option_setters!();

        /// This configuration, replacing the builder's (the front door's
        /// [`StoreOptions`](crate::store::StoreOptions) hands over its own).
        pub(crate) fn with_config(mut self, options: $crate::store::engine::StoreConfig) -> Self {
            self.options = options;
            self
        }
    };
}
pub(crate) use store_option_setters;

/// `impl Store for $store` over its `StoreEngine` field `$field` and its
/// `Option<SweepGuard>` field `$sweeper`.
macro_rules! store_over_engine {
    ($store:ty, $field:ident, $sweeper:ident) => {
        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            async fn batch(&self, ops: Vec<$crate::store::Op>) -> $crate::Result<Vec<$crate::store::OpResult>> {
                self.$field.batch(ops).await
            }

            fn index_config(&self) -> Option<&$crate::store::IndexConfig> {
                self.$field.index.as_ref()
            }

            fn ttl_config(&self) -> Option<&$crate::store::TtlConfig> {
                self.$field.ttl.as_ref()
            }

            async fn sweep_ttl(&self) -> $crate::Result<usize> {
                self.$field.sweep().await
            }

            fn sweeper(&self) -> Option<$crate::store::TtlSweeper> {
                self.$sweeper
                    .as_ref()
                    .map($crate::store::sweeper::SweepGuard::handle)
            }
        }
    };
}
pub(crate) use store_over_engine;

/// The rules of every store, over a backend.
pub(crate) struct StoreEngine<B> {
    pub backend: B,
    pub index: Option<IndexConfig>,
    index_fields: Vec<(String, Option<Vec<String>>)>,
    pub ttl: Option<TtlConfig>,
    clock: Clock,
    /// `Some(implementer)`: a read-only store (puts and sweeps refused as
    /// [`Error::Unsupported`] by `implementer`, reads restart no TTL).
    read_only: Option<&'static str>,
}

enum Slot {
    Read(usize),
    Put,
}

impl<B: StoreBackend> StoreEngine<B> {
    /// An engine; the configuration is checked by [`StoreConfig::check`]
    /// (its sweep interval is [`StoreEngine::start_sweeper`]'s).
    pub fn new(backend: B, options: StoreConfig) -> Self {
        let StoreConfig { index, ttl, clock, .. } = options;
        let index_fields = index
            .as_ref()
            .map(|i| {
                i.fields
                    .iter()
                    .map(|f| (f.clone(), (f != "$").then(|| tokenize_path(f))))
                    .collect()
            })
            .unwrap_or_default();
        StoreEngine {
            backend,
            index,
            index_fields,
            ttl,
            clock: clock.unwrap_or_else(|| Arc::new(SystemTime::now)),
            read_only: None,
        }
    }

    /// This engine reading only: `implementer` names the store in the
    /// [`Error::Unsupported`] of a put or a sweep.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub fn read_only(mut self, implementer: &'static str) -> Self {
        self.read_only = Some(implementer);
        self
    }

    /// Whether this engine only reads.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub fn is_read_only(&self) -> bool {
        self.read_only.is_some()
    }

    /// A read-only engine's refusal of `operation`.
    fn refuse_write(&self, operation: &'static str) -> Result<()> {
        match self.read_only {
            Some(implementer) => Err(Error::Unsupported { operation, implementer }),
            None => Ok(()),
        }
    }

    pub fn now(&self) -> SystemTime {
        (self.clock)()
    }

    pub async fn batch(&self, mut ops: Vec<Op>) -> Result<Vec<OpResult>> {
        if self.read_only.is_some() {
            for op in &mut ops {
                match op {
                    Op::Put(_) => self.refuse_write("put")?,
                    // a read-only store is never written: no TTL restarts
                    Op::Get(get) => get.refresh_ttl = Some(false),
                    Op::Search(search) => search.refresh_ttl = Some(false),
                    Op::ListNamespaces(_) => {}
                }
            }
        }
        for op in &ops {
            validate(op)?;
        }
        let mut slots = Vec::with_capacity(ops.len());
        let mut reads = Vec::new();
        let mut puts: IndexMap<(Namespace, String), PutOp> = IndexMap::new();
        let mut queries: Vec<(usize, String)> = Vec::new();
        for op in ops {
            match op {
                Op::Put(put) => {
                    // the last put of an item wins, at the first one's place
                    puts.insert((put.namespace.clone(), put.key.clone()), put);
                    slots.push(Slot::Put);
                }
                Op::Get(get) => {
                    slots.push(Slot::Read(reads.len()));
                    reads.push(Read::Get {
                        namespace: get.namespace,
                        key: get.key,
                        refresh_ttl: self.refresh(get.refresh_ttl),
                    });
                }
                Op::Search(search) => {
                    if let Some(q) = search.query.filter(|q| !q.is_empty() && self.index.is_some()) {
                        queries.push((reads.len(), q));
                    }
                    slots.push(Slot::Read(reads.len()));
                    reads.push(Read::Search(SearchRead {
                        prefix: search.namespace_prefix,
                        filter: search.filter,
                        limit: search.limit,
                        offset: search.offset,
                        query: None,
                        refresh_ttl: self.refresh(search.refresh_ttl),
                    }));
                }
                Op::ListNamespaces(list) => {
                    slots.push(Slot::Read(reads.len()));
                    reads.push(Read::ListNamespaces(list));
                }
            }
        }
        self.embed_queries(&mut reads, queries).await?;
        let now = self.now();
        let writes = self.prepare_writes(puts, now).await?;
        let results = self.backend.execute(Prepared { now, reads, writes }).await?;
        let mut results: Vec<Option<ReadResult>> = results.into_iter().map(Some).collect();
        slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Put => Ok(OpResult::Put),
                Slot::Read(i) => match results.get_mut(i).and_then(Option::take) {
                    Some(ReadResult::Item(item)) => Ok(OpResult::Item(item)),
                    Some(ReadResult::Search(items)) => Ok(OpResult::Search(items)),
                    Some(ReadResult::Namespaces(ns)) => Ok(OpResult::Namespaces(ns)),
                    None => Err(crate::Error::storage(
                        B::NAME,
                        false,
                        "the backend returned fewer results than reads",
                    )),
                },
            })
            .collect()
    }

    /// Embeds each distinct query once (LangGraph embeds queries before the
    /// texts of puts).
    async fn embed_queries(&self, reads: &mut [Read], queries: Vec<(usize, String)>) -> Result<()> {
        let Some(index) = &self.index else { return Ok(()) };
        let mut vectors: IndexMap<String, Option<Arc<Vec<f32>>>> = IndexMap::new();
        for (_, q) in &queries {
            vectors.entry(q.clone()).or_insert(None);
        }
        for (text, slot) in vectors.iter_mut() {
            let vector = index.embed.embed_query(text).await.map_err(StoreError::Embedding)?;
            check_dims(index, &vector)?;
            *slot = Some(Arc::new(vector));
        }
        for (i, q) in queries {
            if let Some(Read::Search(search)) = reads.get_mut(i) {
                search.query = vectors.get(&q).cloned().flatten();
            }
        }
        Ok(())
    }

    /// The writes of the merged puts, with their vectors: each distinct text
    /// embedded once, in one call, as LangGraph does.
    async fn prepare_writes(&self, puts: IndexMap<(Namespace, String), PutOp>, now: SystemTime) -> Result<Vec<Write>> {
        let mut writes = Vec::with_capacity(puts.len());
        // text -> the (write, path name) pairs it is the vector of
        let mut texts: IndexMap<String, Vec<(usize, String)>> = IndexMap::new();
        for ((namespace, key), put) in puts {
            let Some(Value::Object(value)) = put.value else {
                writes.push(Write::Delete { namespace, key });
                continue;
            };
            if self.index.is_some() {
                let paths: Vec<(String, Option<Vec<String>>)> = match put.index {
                    IndexChoice::Off => Vec::new(),
                    IndexChoice::Default => self.index_fields.clone(),
                    IndexChoice::Paths(paths) => paths
                        .into_iter()
                        .map(|p| {
                            let tokens = tokenize_path(&p);
                            (p, Some(tokens))
                        })
                        .collect(),
                };
                let doc = Value::Object(value);
                for (path, tokens) in paths {
                    let found = match &tokens {
                        None => vec![super::embed::py_json(&doc)],
                        Some(tokens) if tokens.is_empty() => vec![super::embed::py_json(&doc)],
                        Some(tokens) => texts_at_tokens(&doc, tokens),
                    };
                    let many = found.len() > 1;
                    for (i, text) in found.into_iter().enumerate() {
                        let name = if many { format!("{path}.{i}") } else { path.clone() };
                        texts.entry(text).or_default().push((writes.len(), name));
                    }
                }
                let value = match doc {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                writes.push(self.put_write(namespace, key, value, self.minutes(put.ttl), now)?);
            } else {
                writes.push(self.put_write(namespace, key, value, self.minutes(put.ttl), now)?);
            }
        }
        if let (Some(index), false) = (&self.index, texts.is_empty()) {
            let inputs: Vec<String> = texts.keys().cloned().collect();
            let vectors = index
                .embed
                .embed_documents(&inputs)
                .await
                .map_err(StoreError::Embedding)?;
            if vectors.len() != inputs.len() {
                return Err(StoreError::EmbeddingCount {
                    expected: inputs.len(),
                    got: vectors.len(),
                }
                .into());
            }
            for (vector, targets) in vectors.into_iter().zip(texts.into_values()) {
                check_dims(index, &vector)?;
                for (w, name) in targets {
                    if let Some(Write::Put(put)) = writes.get_mut(w) {
                        put.vectors.push((name, vector.clone()));
                    }
                }
            }
        }
        Ok(writes)
    }

    fn refresh(&self, asked: Option<bool>) -> bool {
        asked.unwrap_or_else(|| self.ttl.as_ref().is_none_or(TtlConfig::refreshes_on_read))
    }

    fn minutes(&self, ttl: Ttl) -> Option<f64> {
        match ttl {
            Ttl::Default => self.ttl.as_ref().and_then(|t| t.default_ttl),
            Ttl::Never => None,
            Ttl::Minutes(m) => Some(m),
        }
    }

    fn put_write(
        &self,
        namespace: Namespace,
        key: String,
        value: Map<String, Value>,
        ttl: Option<f64>,
        now: SystemTime,
    ) -> Result<Write> {
        let expires_at = ttl.map(|m| expiry(now, m)).transpose()?;
        Ok(Write::Put(PutWrite {
            namespace,
            key,
            value,
            expires_at,
            ttl_minutes: ttl,
            vectors: Vec::new(),
        }))
    }

    pub async fn sweep(&self) -> Result<usize> {
        self.refuse_write("sweep_ttl")?;
        let now = self.now();
        let mut total = 0usize;
        loop {
            let n = self.backend.sweep_expired(now, SWEEP_SLICE).await?;
            total = total.saturating_add(n);
            if n < SWEEP_SLICE {
                return Ok(total);
            }
        }
    }
}

impl<B: StoreBackend> StoreEngine<Arc<B>> {
    /// Starts the background sweeper when `interval` (the builder's) or the
    /// TTL configuration's `sweep_interval_minutes` asks for one.
    pub fn start_sweeper(&self, interval: Option<Duration>) -> Result<Option<SweepGuard>> {
        let minutes = self.ttl.as_ref().and_then(|t| t.sweep_interval_minutes);
        let Some(every) = sweeper::interval_of(interval, minutes) else {
            return Ok(None);
        };
        sweeper::start(Arc::downgrade(&self.backend), Arc::clone(&self.clock), every).map(Some)
    }
}

/// Refuses an index of 0 dimensions and a default TTL that is not a
/// finite, non-negative number of minutes.
fn check_config(index: Option<&IndexConfig>, ttl: Option<&TtlConfig>) -> Result<()> {
    if index.is_some_and(|i| i.dims == 0) {
        return Err(StoreError::InvalidIndex {
            reason: "dims must be at least 1".into(),
        }
        .into());
    }
    if let Some(minutes) = ttl.and_then(|t| t.default_ttl) {
        expiry(SystemTime::UNIX_EPOCH, minutes)?;
    }
    Ok(())
}

fn validate(op: &Op) -> Result<()> {
    match op {
        Op::Put(put) => {
            if let Some(value) = &put.value {
                put.namespace.check_writable()?;
                if !value.is_object() {
                    return Err(StoreError::NonObjectValue { kind: kind(value) }.into());
                }
                check_nesting(value)?;
            }
            if let Ttl::Minutes(minutes) = put.ttl {
                expiry(SystemTime::UNIX_EPOCH, minutes)?;
            }
            Ok(())
        }
        Op::ListNamespaces(list) if list.max_depth == Some(0) => Err(StoreError::InvalidArgument {
            reason: "max_depth must be at least 1",
        }
        .into()),
        _ => Ok(()),
    }
}

fn check_dims(index: &IndexConfig, vector: &[f32]) -> Result<()> {
    if vector.len() == index.dims {
        Ok(())
    } else {
        Err(StoreError::DimensionMismatch {
            expected: index.dims,
            got: vector.len(),
        }
        .into())
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check_nesting(value: &Value) -> Result<()> {
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        if depth > MAX_VALUE_NESTING {
            return Err(StoreError::TooDeep {
                limit: MAX_VALUE_NESTING,
            }
            .into());
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    Ok(())
}

/// `now` plus `minutes`, refused when not finite, negative or beyond what
/// the clock represents (checked).
pub(crate) fn expiry(now: SystemTime, minutes: f64) -> Result<SystemTime> {
    let refuse = || crate::Error::from(StoreError::InvalidTtl { minutes });
    if !minutes.is_finite() || minutes < 0.0 {
        return Err(refuse());
    }
    let secs = minutes * 60.0;
    let span = Duration::try_from_secs_f64(secs).map_err(|_| refuse())?;
    // 10 000 years: far beyond any TTL, well inside every clock's range
    if span > Duration::from_secs(315_576_000_000) {
        return Err(refuse());
    }
    now.checked_add(span).ok_or_else(refuse)
}
