//! The items a store hands back and the operations of a batch.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value};

use super::{Embeddings, Filter, MatchCondition, Namespace};

/// A stored item: a JSON object under a namespace and a key.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Where it lives.
    pub namespace: Namespace,
    /// Its key within the namespace.
    pub key: String,
    /// The document.
    pub value: Map<String, Value>,
    /// When it was stored (by the in-memory store and LangGraph's SQLite
    /// store: its last put; by the PostgreSQL store: its first).
    pub created_at: SystemTime,
    /// When it was last put.
    pub updated_at: SystemTime,
}

/// An item found by a search, with its similarity to the query when the
/// search was a vector search and the item has vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchItem {
    /// The item.
    pub item: Item,
    /// Cosine similarity to the query (`None` without a query, or for an
    /// item with no vectors).
    pub score: Option<f64>,
}

/// Which texts of a put item are embedded for vector search.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum IndexChoice {
    /// The index's configured fields (LangGraph's `index=None`).
    #[default]
    Default,
    /// Nothing: the item is not (re-)embedded (`index=False`); vectors of an
    /// earlier put stay, as in LangGraph.
    Off,
    /// These JSON paths instead of the configured fields.
    Paths(Vec<String>),
}

/// Reads one item.
#[derive(Debug, Clone, PartialEq)]
pub struct GetOp {
    /// The item's namespace.
    pub namespace: Namespace,
    /// The item's key.
    pub key: String,
    /// Whether reading restarts the item's TTL; `None`: as the store's
    /// [`TtlConfig::refresh_on_read`] says.
    pub refresh_ttl: Option<bool>,
}

impl GetOp {
    /// A get of `key` in `namespace`, refreshing as the store is configured.
    pub fn new(namespace: Namespace, key: impl Into<String>) -> GetOp {
        GetOp {
            namespace,
            key: key.into(),
            refresh_ttl: None,
        }
    }
}

/// Stores (`value: Some`) or deletes (`value: None`) one item.
#[derive(Debug, Clone, PartialEq)]
pub struct PutOp {
    /// The item's namespace (not empty, not under `langgraph`, to store).
    pub namespace: Namespace,
    /// The item's key.
    pub key: String,
    /// The document, a JSON object; `None` deletes the item.
    pub value: Option<Value>,
    /// Which texts are embedded.
    pub index: IndexChoice,
    /// When the item expires.
    pub ttl: Ttl,
}

impl PutOp {
    /// A put of `value` (a JSON object) at `namespace`/`key`, indexed and
    /// expiring as the store is configured.
    pub fn new(namespace: Namespace, key: impl Into<String>, value: Value) -> PutOp {
        PutOp {
            namespace,
            key: key.into(),
            value: Some(value),
            index: IndexChoice::Default,
            ttl: Ttl::Default,
        }
    }

    /// A delete of `namespace`/`key`.
    pub fn delete(namespace: Namespace, key: impl Into<String>) -> PutOp {
        PutOp {
            namespace,
            key: key.into(),
            value: None,
            index: IndexChoice::Default,
            ttl: Ttl::Never,
        }
    }

    /// With these texts embedded.
    pub fn index(mut self, index: IndexChoice) -> PutOp {
        self.index = index;
        self
    }

    /// Expiring so.
    pub fn ttl(mut self, ttl: Ttl) -> PutOp {
        self.ttl = ttl;
        self
    }
}

/// When a put item expires.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Ttl {
    /// The store's [`TtlConfig::default_ttl`] (never without one).
    #[default]
    Default,
    /// Never.
    Never,
    /// After this many minutes (finite, not negative) without a refreshing
    /// read; 0 is expired at once.
    Minutes(f64),
}

/// Finds items under a namespace prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOp {
    /// Items whose namespace starts with these labels.
    pub namespace_prefix: Namespace,
    /// Conditions on the items' values.
    pub filter: Option<Filter>,
    /// At most this many items.
    pub limit: usize,
    /// After skipping this many.
    pub offset: usize,
    /// A natural-language query: ranks by similarity when the store has an
    /// index (ignored otherwise; an empty query is no query).
    pub query: Option<String>,
    /// Whether the returned items' TTLs restart; `None`: as the store's
    /// [`TtlConfig::refresh_on_read`] says.
    pub refresh_ttl: Option<bool>,
}

impl SearchOp {
    /// A search of everything under `namespace_prefix`, LangGraph's defaults
    /// (limit 10, offset 0, no filter, no query, TTL refreshed).
    pub fn new(namespace_prefix: Namespace) -> SearchOp {
        SearchOp {
            namespace_prefix,
            filter: None,
            limit: 10,
            offset: 0,
            query: None,
            refresh_ttl: None,
        }
    }

    /// With this filter.
    pub fn filter(mut self, filter: Filter) -> SearchOp {
        self.filter = Some(filter);
        self
    }

    /// Ranked by similarity to `query` (with an index).
    pub fn query(mut self, query: impl Into<String>) -> SearchOp {
        self.query = Some(query.into());
        self
    }

    /// At most `limit` items.
    pub fn limit(mut self, limit: usize) -> SearchOp {
        self.limit = limit;
        self
    }

    /// After skipping `offset`.
    pub fn offset(mut self, offset: usize) -> SearchOp {
        self.offset = offset;
        self
    }

    /// Restarting TTLs or not.
    pub fn refresh_ttl(mut self, refresh: bool) -> SearchOp {
        self.refresh_ttl = Some(refresh);
        self
    }
}

/// Lists the namespaces that hold items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListNamespacesOp {
    /// Conditions every listed namespace meets.
    pub match_conditions: Vec<MatchCondition>,
    /// Namespaces cut to this many labels (then deduplicated); at least 1.
    pub max_depth: Option<usize>,
    /// At most this many.
    pub limit: usize,
    /// After skipping this many (sorted).
    pub offset: usize,
}

impl Default for ListNamespacesOp {
    /// Every namespace, LangGraph's defaults (limit 100).
    fn default() -> Self {
        ListNamespacesOp {
            match_conditions: Vec::new(),
            max_depth: None,
            limit: 100,
            offset: 0,
        }
    }
}

impl ListNamespacesOp {
    /// And the namespace starts with `path` (`*` matches any label).
    pub fn prefix(mut self, path: Namespace) -> Self {
        self.match_conditions.push(MatchCondition::prefix(path));
        self
    }

    /// And the namespace ends with `path` (`*` matches any label).
    pub fn suffix(mut self, path: Namespace) -> Self {
        self.match_conditions.push(MatchCondition::suffix(path));
        self
    }

    /// Namespaces cut to `depth` labels.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// At most `limit`.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// After skipping `offset`.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }
}

/// One operation of a [`Store::batch`](super::Store::batch).
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Read an item.
    Get(GetOp),
    /// Store or delete an item.
    Put(PutOp),
    /// Search items.
    Search(SearchOp),
    /// List namespaces.
    ListNamespaces(ListNamespacesOp),
}

/// The result of one [`Op`], at its position in the batch.
#[derive(Debug, Clone, PartialEq)]
pub enum OpResult {
    /// Of a get: the item, if stored and not expired.
    Item(Option<Item>),
    /// Of a put.
    Put,
    /// Of a search.
    Search(Vec<SearchItem>),
    /// Of a list of namespaces.
    Namespaces(Vec<Namespace>),
}

impl OpResult {
    /// The item of a get's result (`None` for other results too).
    pub fn into_item(self) -> Option<Item> {
        match self {
            OpResult::Item(item) => item,
            _ => None,
        }
    }

    /// The items of a search's result (empty for other results).
    pub fn into_search(self) -> Vec<SearchItem> {
        match self {
            OpResult::Search(items) => items,
            _ => Vec::new(),
        }
    }

    /// The namespaces of a list's result (empty for other results).
    pub fn into_namespaces(self) -> Vec<Namespace> {
        match self {
            OpResult::Namespaces(ns) => ns,
            _ => Vec::new(),
        }
    }
}

/// How items expire (LangGraph's `TTLConfig`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TtlConfig {
    /// Whether reads restart a TTL when the call does not say (default
    /// `true`, as LangGraph).
    pub refresh_on_read: Option<bool>,
    /// The TTL in minutes of a put that does not give one.
    pub default_ttl: Option<f64>,
    /// Minutes between sweeps by a background sweeper, when one is started.
    pub sweep_interval_minutes: Option<u64>,
}

impl TtlConfig {
    /// Whether reads restart TTLs by default.
    pub fn refreshes_on_read(&self) -> bool {
        self.refresh_on_read.unwrap_or(true)
    }
}

/// How item texts are embedded for vector search (LangGraph's
/// `IndexConfig`). The caller gives the embedding function: the store never
/// fetches a model.
#[derive(Clone)]
pub struct IndexConfig {
    /// The length of every vector.
    pub dims: usize,
    /// The embedding function.
    pub embed: Arc<dyn Embeddings>,
    /// The JSON paths whose texts are embedded; `$` (the default) is the
    /// whole document as JSON.
    pub fields: Vec<String>,
}

impl IndexConfig {
    /// An index of `dims` dimensions over the whole document (`$`).
    pub fn new(dims: usize, embed: Arc<dyn Embeddings>) -> IndexConfig {
        IndexConfig {
            dims,
            embed,
            fields: vec!["$".to_owned()],
        }
    }

    /// The same, over these fields.
    pub fn fields<I: IntoIterator<Item = S>, S: Into<String>>(mut self, fields: I) -> IndexConfig {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }
}

impl std::fmt::Debug for IndexConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexConfig")
            .field("dims", &self.dims)
            .field("fields", &self.fields)
            .finish_non_exhaustive()
    }
}
