//! Atomic steps: a super-step's remaining pending writes and the checkpoint
//! that follows them, stored together.
//!
//! A runner saves each task's writes against the checkpoint the step ran
//! from (`put_writes`), then the step's checkpoint (`put`). Two calls: a
//! crash between them leaves writes without the checkpoint they led to, and
//! whether a resume replays them or runs the node again (with its side
//! effects) depends on the host's timing. [`AtomicSteps::put_step_with_writes`]
//! makes it one atomic step of the store: one SQLite transaction (inside
//! the writer's group commit), one PostgreSQL transaction, one Redis script;
//! after a crash both are there or neither is. On a fenced saver
//! ([`crate::fence`]) the lease is checked in that same step.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! use checkpointer::atomic::AtomicSteps;
//! use checkpointer::prelude::*;
//! let saver = InMemorySaver::new();
//! let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
//! let mut step = StepCheckpoint::first(-1);
//! step.write(START, "hi", next)?;
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let first = saver.put_step(&CheckpointConfig::new("t"), &step, &meta).await?;
//! // the step's task wrote "greeting"; its write and the next checkpoint go together
//! let writes = [PendingWrite::new("task-1", "greeting", "hi")];
//! let mut step = first.checkpoint.successor(0);
//! step.bump(START, next)?.write("greeting", "hi", next)?;
//! let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
//! let second = saver.put_step_with_writes(&first.config, &step, &meta, &writes).await?;
//! assert_eq!(saver.get_tuple(&first.config).await?.unwrap().pending_writes, writes);
//! assert_eq!(saver.latest("t").await?.unwrap().config, second.config);
//! # Ok(())
//! # }
//! ```

use crate::checkpoint::{CheckpointMetadata, CheckpointTuple, PendingWrite, StepCheckpoint};
use crate::config::CheckpointConfig;
use crate::error::Result;
use crate::saver::CheckpointSaver;

/// A saver that stores a step's writes and its next checkpoint as one
/// (every saver of this crate).
#[async_trait::async_trait]
pub trait AtomicSteps: CheckpointSaver {
    /// Stores `writes` (the step's pending writes not stored yet, each
    /// task's in its `put_writes` order: a write's index is the one its
    /// position among its task's writes gives it) against the checkpoint
    /// `parent` names, and `step`'s checkpoint as its child, all in one
    /// atomic step of the store; returns the tuple
    /// [`put_step`](crate::CheckpointSaverExt::put_step) returns.
    ///
    /// # Errors
    /// As `put` and `put_writes` (then nothing was stored);
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) when there are
    /// writes and `parent` names no checkpoint, or a write's index is not
    /// its position's; [`Error::Fenced`](crate::Error::Fenced) on a fenced
    /// saver that does not own the thread.
    async fn put_step_with_writes(
        &self,
        parent: &CheckpointConfig,
        step: &StepCheckpoint,
        metadata: &CheckpointMetadata,
        writes: &[PendingWrite],
    ) -> Result<CheckpointTuple>;
}
