//! The names of the operations, and which of them a saver implements.

use std::fmt;

/// The operations of [`CheckpointSaver`](super::CheckpointSaver), one name for each everywhere:
/// [`Capabilities::supports`], the conformance suite, fault injection
/// (`testing::Op`) and tracing spans ([`Operation::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Operation {
    /// [`CheckpointSaver::get_tuple`](super::CheckpointSaver::get_tuple).
    GetTuple,
    /// [`CheckpointSaver::list`](super::CheckpointSaver::list).
    List,
    /// [`CheckpointSaver::put`](super::CheckpointSaver::put).
    Put,
    /// [`CheckpointSaver::put_writes`](super::CheckpointSaver::put_writes).
    PutWrites,
    /// [`CheckpointSaver::delete_thread`](super::CheckpointSaver::delete_thread).
    DeleteThread,
    /// [`CheckpointSaver::delete_for_runs`](super::CheckpointSaver::delete_for_runs) (extended).
    DeleteForRuns,
    /// [`CheckpointSaver::copy_thread`](super::CheckpointSaver::copy_thread) (extended).
    CopyThread,
    /// [`CheckpointSaver::prune`](super::CheckpointSaver::prune) (extended).
    Prune,
    /// [`CheckpointSaver::get_delta_channel_history`](super::CheckpointSaver::get_delta_channel_history) (extended).
    DeltaChannelHistory,
    /// [`CheckpointSaver::list_threads`](super::CheckpointSaver::list_threads) (extended).
    ListThreads,
    /// [`CheckpointSaver::thread_keys`](super::CheckpointSaver::thread_keys) (extended).
    ThreadKeys,
}

impl Operation {
    /// Every operation, required ones first.
    pub const ALL: [Operation; 11] = [
        Operation::GetTuple,
        Operation::List,
        Operation::Put,
        Operation::PutWrites,
        Operation::DeleteThread,
        Operation::DeleteForRuns,
        Operation::CopyThread,
        Operation::Prune,
        Operation::DeltaChannelHistory,
        Operation::ListThreads,
        Operation::ThreadKeys,
    ];

    /// The position in [`Operation::ALL`].
    #[cfg(feature = "conformance")]
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The method's name, as tracing spans record it in their `op` field.
    ///
    /// ```
    /// use checkpointer::saver::Operation;
    /// assert_eq!(Operation::DeltaChannelHistory.name(), "get_delta_channel_history");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Operation::GetTuple => "get_tuple",
            Operation::List => "list",
            Operation::Put => "put",
            Operation::PutWrites => "put_writes",
            Operation::DeleteThread => "delete_thread",
            Operation::DeleteForRuns => "delete_for_runs",
            Operation::CopyThread => "copy_thread",
            Operation::Prune => "prune",
            Operation::DeltaChannelHistory => "get_delta_channel_history",
            Operation::ListThreads => "list_threads",
            Operation::ThreadKeys => "thread_keys",
        }
    }

    /// Whether the operation is optional (declared in [`Capabilities`]).
    pub fn is_extended(self) -> bool {
        !matches!(
            self,
            Operation::GetTuple | Operation::List | Operation::Put | Operation::PutWrites | Operation::DeleteThread
        )
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which extended operations a backend implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// [`CheckpointSaver::delete_for_runs`](super::CheckpointSaver::delete_for_runs).
    pub delete_for_runs: bool,
    /// [`CheckpointSaver::copy_thread`](super::CheckpointSaver::copy_thread).
    pub copy_thread: bool,
    /// [`CheckpointSaver::prune`](super::CheckpointSaver::prune).
    pub prune: bool,
    /// [`CheckpointSaver::get_delta_channel_history`](super::CheckpointSaver::get_delta_channel_history).
    pub delta_channel_history: bool,
    /// [`CheckpointSaver::list_threads`](super::CheckpointSaver::list_threads).
    pub list_threads: bool,
    /// [`CheckpointSaver::thread_keys`](super::CheckpointSaver::thread_keys).
    pub thread_keys: bool,
    /// [`CheckpointSaver::retain`](super::CheckpointSaver::retain).
    pub retain: bool,
}

impl Capabilities {
    /// No extended operation.
    pub const fn none() -> Self {
        Capabilities {
            delete_for_runs: false,
            copy_thread: false,
            prune: false,
            delta_channel_history: false,
            list_threads: false,
            thread_keys: false,
            retain: false,
        }
    }

    /// Whether the backend implements `op`: always for the required
    /// operations, as declared for the extended ones.
    ///
    /// ```
    /// use checkpointer::saver::{Capabilities, Operation};
    /// assert!(Capabilities::none().supports(Operation::Put));
    /// assert!(!Capabilities::none().supports(Operation::Prune));
    /// assert!(Capabilities::all().supports(Operation::Prune));
    /// ```
    pub fn supports(&self, op: Operation) -> bool {
        match op {
            Operation::DeleteForRuns => self.delete_for_runs,
            Operation::CopyThread => self.copy_thread,
            Operation::Prune => self.prune,
            Operation::DeltaChannelHistory => self.delta_channel_history,
            Operation::ListThreads => self.list_threads,
            Operation::ThreadKeys => self.thread_keys,
            Operation::GetTuple | Operation::List | Operation::Put | Operation::PutWrites | Operation::DeleteThread => {
                true
            }
        }
    }

    /// Every extended operation.
    pub const fn all() -> Self {
        Capabilities {
            delete_for_runs: true,
            copy_thread: true,
            prune: true,
            delta_channel_history: true,
            list_threads: true,
            thread_keys: true,
            retain: true,
        }
    }
}
