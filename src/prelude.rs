//! The names a runtime built on the crate uses in nearly every file, in one
//! import.
//!
//! ```
//! use checkpointer::prelude::*;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! let saver: std::sync::Arc<dyn CheckpointSaver> = std::sync::Arc::new(InMemorySaver::new());
//! let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
//! let mut step = StepCheckpoint::first(-1);
//! step.write(START, Value::from("hi"), next)?;
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let config = saver
//!     .put(&CheckpointConfig::new("t"), step.checkpoint(), &meta, &step.new_versions)
//!     .await?;
//! let latest = saver.latest("t").await?.expect("just stored");
//! assert_eq!(latest.config, config);
//! # Ok(())
//! # }
//! ```

pub use crate::checkpoint::channels::{ERROR, INTERRUPT, RESUME, SCHEDULED, START, TASKS};
pub use crate::reducer::Reducers;
pub use crate::serde::{from_value, from_value_ref, to_value};
pub use crate::step::{Resume, Step, TaskContext};
pub use crate::task::{TaskPath, NULL_TASK_ID};
pub use crate::thread::{StateSnapshot, TaskState, Thread};
pub use crate::{
    ChannelValues, ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, CheckpointTuple, Error, InMemorySaver, ListOptions, NsScope, PendingWrite,
    Result, SharedMap, StepCheckpoint, Value,
};
