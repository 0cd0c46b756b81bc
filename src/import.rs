//! A whole thread, rows as they were stored elsewhere, written into a saver
//! at once: what a copy between stores needs so that a crash leaves the
//! thread in the target whole or absent.
//!
//! Every saver's `import_thread` (for example
//! [`SqliteSaver::import_thread`](crate::sqlite::SqliteSaver::import_thread))
//! takes a [`ThreadImport`]: the engine checks it once, as `put` and
//! `put_writes` check their input, and each backend writes it in one atomic
//! step (a transaction; on Redis staged keys made live by one script).
//! Unlike `put` and `put_writes` it stores every value exactly as given
//! (nothing is filled in from a parent) and every write with the task path
//! and index it had in the source.

use crate::checkpoint::{Checkpoint, CheckpointMetadata};
use crate::serde::Value;

/// Every checkpoint (all namespaces) and write of one thread.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadImport {
    /// The thread.
    pub thread_id: String,
    /// Its checkpoints, in any order.
    pub checkpoints: Vec<ImportedCheckpoint>,
}

/// One checkpoint with its pending writes.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedCheckpoint {
    /// The namespace (`""` for the root graph).
    pub checkpoint_ns: String,
    /// The parent checkpoint's id, if any.
    pub parent_checkpoint_id: Option<String>,
    /// The checkpoint; its `id` is the checkpoint id.
    pub checkpoint: Checkpoint,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// Its pending writes.
    pub writes: Vec<ImportedWrite>,
}

/// One stored write, with its key as the source stored it.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// The task's path.
    pub task_path: String,
    /// The write's index within the task (negative for special channels).
    pub idx: i64,
    /// The channel written.
    pub channel: String,
    /// The value.
    pub value: Value,
}

/// What an import does when the target already has the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImportMode {
    /// Refuse with [`Error::ThreadExists`](crate::Error::ThreadExists);
    /// nothing is written.
    Create,
    /// Delete the thread's rows and write the new ones, in the same
    /// transaction: a reader (or a crash) sees the old thread or the new one.
    Replace,
}
