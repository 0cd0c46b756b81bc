//! The crate's error type.

use std::fmt;

/// A specialised `Result` for checkpoint operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a checkpoint saver, grouped by meaning.
///
/// Match on the variant to decide what to do; [`Error::is_retryable`] tells
/// whether repeating the same call may succeed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use checkpointer::prelude::*;
/// let saver = InMemorySaver::new();
/// // put_writes needs the checkpoint the writes belong to
/// let err = saver.put_writes(&CheckpointConfig::new("t"), &[], "task", "").await.unwrap_err();
/// assert!(matches!(err, Error::InvalidInput { .. }));
/// assert!(!err.is_retryable());
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes could not be decoded or a value could not be encoded.
    #[error("serialization error: {reason}")]
    Serde {
        /// What was wrong, in words.
        reason: String,
    },

    /// The caller passed something the operation cannot accept.
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// What was wrong, in words.
        reason: String,
    },

    /// An optional operation that this backend does not implement.
    #[error("{operation} is not supported by {implementer}")]
    Unsupported {
        /// The operation that was called, e.g. `"prune"`.
        operation: &'static str,
        /// The backend that does not implement it.
        implementer: &'static str,
    },

    /// The target of a copy already holds checkpoints.
    #[error("thread {thread_id:?} already exists")]
    ThreadExists {
        /// The thread that is not empty.
        thread_id: String,
    },

    /// What a call needs does not exist: the file of a store opened without
    /// creating it ([`crate::OpenOptions::create`]), or its directory.
    #[error("not found: {what}")]
    NotFound {
        /// What is missing, in words (a path, never a password).
        what: String,
    },

    /// A blocking call was made where it would stall an async runtime.
    #[error("blocking call inside an async runtime: {reason}")]
    BlockingInAsync {
        /// How to avoid the situation.
        reason: String,
    },

    /// Encrypted data could not be read or written, or plaintext was refused
    /// (see [`EncryptionError`]). Never carries key material.
    #[error("encryption error: {0}")]
    Encryption(#[from] EncryptionError),

    /// A graph runtime broke the step protocol, or one of its reducers
    /// failed (see [`StepError`](crate::step::StepError)): nothing was stored
    /// for the call that returned it.
    /// Boxed: its messages name tasks and checkpoints, and every `Result`
    /// of the crate stays small. Match it through [`Error::as_step`].
    #[error("step protocol: {0}")]
    Step(Box<crate::step::StepError>),

    /// A fenced saver's write was refused because its writer does not own
    /// the thread's lease (see [`crate::fence`]): another writer took the
    /// thread over, the lease was released, or it expired and was taken.
    /// Checked by the store inside the write's own transaction or script, so
    /// nothing of the refused call was stored. Never retryable: the writer
    /// must [`acquire`](crate::fence::Lease) the thread again, after reading
    /// what the new owner stored.
    #[error(
        "thread {thread_id:?} is fenced: writer {writer:?} (epoch {epoch}) does not own its lease; nothing was stored"
    )]
    Fenced {
        /// The thread whose lease the writer lacks.
        thread_id: String,
        /// The refused writer's identity.
        writer: String,
        /// The epoch the writer held (0: it never acquired the thread).
        epoch: u64,
    },

    /// A long-term memory [`Store`](crate::store::Store) refused a call or
    /// its embedding function failed (see [`StoreError`](crate::store::StoreError));
    /// nothing of the refused batch was stored.
    #[cfg(feature = "store")]
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// A [`RetentionPolicy`](crate::retention::RetentionPolicy) that
    /// contradicts itself or would remove a thread's latest checkpoint
    /// without deleting whole threads: refused before anything is read.
    #[error("invalid retention policy: {0}")]
    InvalidPolicy(crate::retention::PolicyError),

    /// The storage backend failed.
    ///
    /// A failure of the configuration or of permissions is never retryable,
    /// on every backend: no retry mends a missing database (PostgreSQL
    /// 3D000), a refused role, password or access (PostgreSQL class 28 and
    /// 42501; Redis `NOAUTH`, `WRONGPASS`, `NOPERM`), a TLS setup the two
    /// sides cannot agree on (an untrusted certificate, TLS required of a
    /// server without it), invalid connection settings, or a file SQLite
    /// cannot open, write or read as a database. What may pass is
    /// retryable when nothing of the call was applied: a refused or dropped
    /// connection (for a write, only when it was not sent), a timeout before
    /// sending, an exhausted pool, a busy or locked SQLite file, a
    /// serialization failure or deadlock, a server starting or shutting down
    /// (PostgreSQL 57P01–57P03).
    #[error("storage error ({backend}): {source}")]
    Storage {
        /// The backend that failed, e.g. `"sqlite"`.
        backend: &'static str,
        /// Whether repeating the same call may succeed (the failure was transient
        /// and nothing was written). Never for a configuration or permission
        /// failure (see above).
        retryable: bool,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl Error {
    /// Whether repeating the same call may succeed and is safe.
    ///
    /// True only for transient storage failures (a dropped connection, a lock
    /// timeout) after which nothing of the failed call is visible; never for
    /// a configuration or permission failure (a missing database, refused
    /// credentials), which a retry loop would repeat forever (see
    /// [`Error::Storage`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Storage { retryable: true, .. })
    }

    /// The step protocol error, for an [`Error::Step`].
    ///
    /// ```
    /// use checkpointer::step::StepError;
    /// let err = checkpointer::Error::from(StepError::NoPendingInterrupt { thread_id: "t".into() });
    /// assert!(matches!(err.as_step(), Some(StepError::NoPendingInterrupt { .. })));
    /// ```
    pub fn as_step(&self) -> Option<&crate::step::StepError> {
        match self {
            Error::Step(e) => Some(e),
            _ => None,
        }
    }

    /// Builds an [`Error::Serde`].
    pub fn serde(reason: impl fmt::Display) -> Self {
        Error::Serde {
            reason: reason.to_string(),
        }
    }

    /// Builds an [`Error::InvalidInput`].
    pub fn invalid(reason: impl fmt::Display) -> Self {
        Error::InvalidInput {
            reason: reason.to_string(),
        }
    }

    /// Builds an [`Error::Storage`].
    pub fn storage(
        backend: &'static str,
        retryable: bool,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Storage {
            backend,
            retryable,
            source: source.into(),
        }
    }
}

impl From<crate::step::StepError> for Error {
    fn from(e: crate::step::StepError) -> Self {
        Error::Step(Box::new(e))
    }
}

/// Why encryption at rest failed (`serde::EncryptedSerializer`, feature
/// `encryption`).
///
/// Messages name lengths, tags and cipher names, never keys or plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncryptionError {
    /// The key is not 16, 24 or 32 bytes long (AES-128/192/256).
    #[error("an AES key must be 16, 24 or 32 bytes long, got {len} bytes")]
    InvalidKeyLength {
        /// The length that was given.
        len: usize,
    },

    /// The key's environment variable is unset or not valid UTF-8.
    #[error("environment variable {var} is not set or not valid UTF-8")]
    KeyNotSet {
        /// The variable, `LANGGRAPH_AES_KEY`.
        var: &'static str,
    },

    /// A stored payload carries no cipher suffix (its tag has no `+`) and the
    /// serializer was not told to accept plaintext.
    #[error(
        "refusing to read unencrypted data (type tag {tag:?}); \
         opt in with allow_plaintext(true) to read rows written before encryption was enabled"
    )]
    PlaintextRefused {
        /// The stored type tag.
        tag: String,
    },

    /// The tag names a cipher other than `aes`.
    #[error("unsupported cipher {cipher:?} (only \"aes\" is known)")]
    UnknownCipher {
        /// The cipher name after the first `+` of the tag.
        cipher: String,
    },

    /// The payload is shorter than nonce (16 bytes) and tag (16 bytes).
    #[error("encrypted payload of {len} bytes is shorter than its 32-byte nonce and tag")]
    Truncated {
        /// The payload's length.
        len: usize,
    },

    /// The authentication tag does not match: a wrong key, or the nonce, tag or
    /// ciphertext was altered.
    #[error("authentication failed: wrong key or altered data")]
    AuthenticationFailed,

    /// The operating system's random number generator failed to give a nonce.
    #[error("no random nonce available: {reason}")]
    Random {
        /// The generator's error, in words.
        reason: String,
    },
}
