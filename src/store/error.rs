//! [`StoreError`]: why a [`Store`](super::Store) refused a batch.

/// Why a [`Store`](super::Store) refused a call, by meaning; carried by
/// [`Error::Store`](crate::Error::Store). Never retryable: the same input
/// is refused again. A refused batch stores nothing.
///
/// ```
/// use checkpointer::store::{Namespace, StoreError};
/// let err = Namespace::new(["users", "a.b"]).unwrap_err();
/// assert!(matches!(err, checkpointer::Error::Store(StoreError::InvalidNamespace { .. })));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A namespace LangGraph refuses: empty where an item is stored, a label
    /// that is empty or holds `.` or NUL, or the reserved first label
    /// `langgraph` where an item is stored.
    #[error("invalid namespace {namespace:?}: {reason}")]
    InvalidNamespace {
        /// The labels, as given.
        namespace: Vec<String>,
        /// What is wrong with them.
        reason: &'static str,
    },

    /// An item's value is not a JSON object.
    #[error("an item's value must be a JSON object, got {kind}")]
    NonObjectValue {
        /// The JSON kind that was given (`"array"`, `"string"`, ...).
        kind: &'static str,
    },

    /// A value nests deeper than [`MAX_VALUE_NESTING`](super::MAX_VALUE_NESTING).
    #[error("a value nests deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },

    /// A filter names an operator LangGraph does not have (or mixes
    /// `$`-operators with field names in one object).
    #[error("unsupported filter operator {operator:?}")]
    UnknownFilterOperator {
        /// The key that is not one of `$eq $ne $gt $gte $lt $lte`.
        operator: String,
    },

    /// A filter that is not an object, or a comparison whose operand cannot
    /// be compared (a non-numeric operand of `$gt`, ...), or too deep.
    #[error("invalid filter: {reason}")]
    InvalidFilter {
        /// What is wrong.
        reason: String,
    },

    /// A TTL that is not a finite, non-negative number of minutes, or whose
    /// expiry time cannot be represented.
    #[error("invalid ttl: {minutes} minutes")]
    InvalidTtl {
        /// The minutes given.
        minutes: f64,
    },

    /// An argument outside its range (e.g. `max_depth` of 0).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What is wrong.
        reason: &'static str,
    },

    /// The embedding function returned a vector of another length than the
    /// index's `dims`.
    #[error("the embedding function returned {got} dimensions, the index has {expected}")]
    DimensionMismatch {
        /// The index's `dims`.
        expected: usize,
        /// The length returned.
        got: usize,
    },

    /// The embedding function returned another number of vectors than texts.
    #[error("the embedding function returned {got} vectors for {expected} texts")]
    EmbeddingCount {
        /// The number of texts given.
        expected: usize,
        /// The number of vectors returned.
        got: usize,
    },

    /// The caller's embedding function failed.
    #[error("the embedding function failed: {0}")]
    Embedding(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),

    /// An index configuration the store cannot serve (no dimensions, or a
    /// backend without vector support).
    #[error("index configuration refused: {reason}")]
    InvalidIndex {
        /// What is wrong.
        reason: String,
    },

    /// A store with an index on a PostgreSQL server that has no pgvector
    /// (the `vector` extension, neither installed nor available to
    /// install): vector search needs it, so `setup` refuses before it
    /// creates anything.
    #[error(
        "vector search on PostgreSQL needs the pgvector extension (`vector`), which this server neither has \
         installed nor can install; nothing was created (open the store without an index, or install pgvector)"
    )]
    PgvectorMissing,
}
