//! Long-term memory: LangGraph's `BaseStore` in Rust (feature `store`).
//!
//! A checkpointer remembers one thread; a [`Store`] remembers across
//! threads: JSON documents ([`Item`]s) under hierarchical [`Namespace`]s
//! and keys, found again by key, by namespace prefix and [`Filter`], or by
//! similarity to a natural-language query when the store has an
//! [`IndexConfig`] (the caller's [`Embeddings`]; the store never fetches a
//! model). Items may expire ([`TtlConfig`], [`Ttl`]); an expired item is
//! never read, swept or not.
//!
//! [`Store::batch`] is the one primitive, as in LangGraph: a list of
//! [`Op`]s run as one, every read seeing the store as it was before the
//! batch's puts, several puts of one item merged (the last wins), nothing
//! stored when any op is refused. [`StoreExt`] has the single-op calls.
//! The rules, and the formats of Python's stores, are in `docs/store.md`.
//!
//! ```
//! use checkpointer::store::{Filter, InMemoryStore, ListNamespacesOp, Namespace, SearchOp, StoreExt};
//! use serde_json::json;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! let store = InMemoryStore::new();
//! let user = Namespace::new(["users", "42"])?;
//! store.put(&user, "prefs", json!({"theme": "dark", "size": 14})).await?;
//! store.put(&user, "notes", json!({"theme": "light", "size": 9})).await?;
//!
//! let item = store.get(&user, "prefs").await?.expect("stored");
//! assert_eq!(item.value["theme"], "dark");
//!
//! let filter = Filter::from_json(&json!({"size": {"$gt": 10}}))?;
//! let found = store.search(SearchOp::new(Namespace::new(["users"])?).filter(filter)).await?;
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].item.key, "prefs");
//!
//! let namespaces = store.list_namespaces(ListNamespacesOp::default().max_depth(1)).await?;
//! assert_eq!(namespaces, [Namespace::new(["users"])?]);
//! store.delete(&user, "prefs").await?;
//! assert!(store.get(&user, "prefs").await?.is_none());
//! # Ok(())
//! # }
//! ```

use async_trait::async_trait;
use serde_json::Value;

use crate::Result;

#[cfg(feature = "conformance")]
pub mod conformance;
mod embed;
mod engine;
mod error;
mod filter;
mod memory;
mod namespace;
mod ops;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

pub use embed::{cosine_similarity, texts_at_path, tokenize_path, EmbedError, Embeddings, HashedNgramEmbeddings};
pub use error::StoreError;
pub use filter::{Condition, Filter, FilterOp, MAX_FILTER_NESTING};
pub use memory::{InMemoryStore, InMemoryStoreBuilder};
pub use namespace::{MatchCondition, MatchKind, Namespace, RESERVED_ROOT};
pub use ops::{
    GetOp, IndexChoice, IndexConfig, Item, ListNamespacesOp, Op, OpResult, PutOp, SearchItem, SearchOp, Ttl, TtlConfig,
};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, PostgresStoreBuilder};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteStore, SqliteStoreBuilder};

/// How deep a stored value may nest (objects and lists count one level
/// each; the value itself is level 1).
pub const MAX_VALUE_NESTING: usize = 100;

/// LangGraph's `BaseStore`: a long-term memory of JSON items in namespaces.
///
/// # Contract
///
/// Each rule names the check of [`conformance`] (feature `conformance`)
/// that enforces it.
///
/// - One result per op, at its position (`batch_results_in_op_order`).
/// - Every read of a batch sees the store as it was before the batch's puts
///   (`batch_reads_see_state_before_puts`); several puts of one item in a
///   batch are one put of the last (`batch_last_put_wins`).
/// - A refused op refuses the whole batch and nothing is stored
///   (`batch_refused_stores_nothing`): a namespace that is empty or starts
///   with `langgraph` for an item, a value that is not a JSON object, a TTL
///   that is not a finite non-negative number of minutes, `max_depth` 0.
/// - A put replaces the item (`put_overwrites`); a delete of a missing item
///   does nothing (`delete_missing_is_noop`).
/// - A search matches whole leading labels (`search_prefix_matches_whole_labels`),
///   applies [`Filter`] as LangGraph's in-memory store (`search_filter_*`),
///   and pages with limit and offset (`search_pages_partition_results`).
/// - A vector search ranks items by the best cosine similarity of their
///   vectors, highest first, with that score (`vector_search_*`).
/// - `list_namespaces` lists the namespaces holding items, sorted, matched
///   by prefix and suffix with `*` wildcards, cut to `max_depth` and
///   deduplicated, then paged (`list_namespaces_*`).
/// - An item put with a TTL of 0 is expired at once and never read, listed
///   or found (`ttl_expired_never_read`); a sweep deletes it (`ttl_sweep_removes_expired`).
#[async_trait]
pub trait Store: Send + Sync {
    /// Runs `ops` as one batch: one [`OpResult`] per op, in order.
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store) when an op is refused or the
    /// embedding function fails (nothing stored);
    /// [`Error::Storage`](crate::Error::Storage) when the backend fails.
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>>;

    /// The index, when the store embeds items for vector search.
    fn index_config(&self) -> Option<&IndexConfig>;

    /// The TTL configuration, if any.
    fn ttl_config(&self) -> Option<&TtlConfig>;

    /// Deletes the items that have expired; returns how many.
    ///
    /// # Errors
    /// [`Error::Storage`](crate::Error::Storage) when the backend fails.
    async fn sweep_ttl(&self) -> Result<usize>;
}

/// The single-op calls over [`Store::batch`], as LangGraph's `BaseStore`
/// has them.
#[async_trait]
pub trait StoreExt: Store {
    /// The item at `namespace`/`key`, unless missing or expired; its TTL
    /// restarts if the store's [`TtlConfig`] says so (the default).
    ///
    /// # Errors
    /// As [`Store::batch`].
    async fn get(&self, namespace: &Namespace, key: &str) -> Result<Option<Item>> {
        let op = Op::Get(GetOp::new(namespace.clone(), key));
        Ok(first(self.batch(vec![op]).await?).into_item())
    }

    /// Stores `value` (a JSON object) at `namespace`/`key`, indexed and
    /// expiring as the store is configured.
    ///
    /// # Errors
    /// As [`Store::batch`].
    async fn put(&self, namespace: &Namespace, key: &str, value: Value) -> Result<()> {
        self.put_op(PutOp::new(namespace.clone(), key, value)).await
    }

    /// Runs one put (with its own index choice and TTL).
    ///
    /// # Errors
    /// As [`Store::batch`].
    async fn put_op(&self, op: PutOp) -> Result<()> {
        self.batch(vec![Op::Put(op)]).await.map(drop)
    }

    /// Deletes the item at `namespace`/`key`, if any.
    ///
    /// # Errors
    /// As [`Store::batch`].
    async fn delete(&self, namespace: &Namespace, key: &str) -> Result<()> {
        self.put_op(PutOp::delete(namespace.clone(), key)).await
    }

    /// Runs one search.
    ///
    /// # Errors
    /// As [`Store::batch`].
    async fn search(&self, op: SearchOp) -> Result<Vec<SearchItem>> {
        Ok(first(self.batch(vec![Op::Search(op)]).await?).into_search())
    }

    /// Lists namespaces.
    ///
    /// # Errors
    /// As [`Store::batch`].
    async fn list_namespaces(&self, op: ListNamespacesOp) -> Result<Vec<Namespace>> {
        Ok(first(self.batch(vec![Op::ListNamespaces(op)]).await?).into_namespaces())
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

fn first(results: Vec<OpResult>) -> OpResult {
    results.into_iter().next().unwrap_or(OpResult::Put)
}
