//! The step protocol's typed errors.

/// How a runtime broke the step protocol ([`Error::Step`](crate::Error::Step)).
/// Each names what is wrong; nothing was stored by the call that returned it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// A step closed with a number other than its parent's step + 1.
    #[error(
        "step {step} does not follow its parent checkpoint {parent_id} (step {parent_step}): it must be {expected}"
    )]
    NotAfterParent {
        /// The step given.
        step: i64,
        /// The step stored in the parent's metadata (−1 when it has none).
        parent_step: i64,
        /// The parent checkpoint's id.
        parent_id: String,
        /// The only step that follows the parent.
        expected: i64,
    },

    /// Writes for a task the parent checkpoint does not schedule.
    #[error("task {node:?} ({task}) is not scheduled by checkpoint {checkpoint_id}: scheduled are {scheduled:?}")]
    Unscheduled {
        /// The node the writes name.
        node: String,
        /// The task id (or the triggers, when no id was given) the writes name.
        task: String,
        /// The checkpoint the step runs from.
        checkpoint_id: String,
        /// The nodes it schedules.
        scheduled: Vec<String>,
    },

    /// A step closed while some of its tasks have neither finished nor been
    /// reused from pending writes.
    #[error("step {step} cannot close: tasks {nodes:?} have not finished")]
    Unfinished {
        /// The step.
        step: i64,
        /// The nodes of the unfinished tasks.
        nodes: Vec<String>,
    },

    /// A resume on a thread (namespace) whose latest checkpoint has no
    /// interrupt waiting for an answer.
    #[error("thread {thread_id:?} has no pending interrupt to resume")]
    NoPendingInterrupt {
        /// The thread.
        thread_id: String,
    },

    /// A resume naming interrupt ids that are not waiting for an answer.
    #[error("unknown or already answered interrupt ids {ids:?}; pending are {pending:?}")]
    UnknownInterrupt {
        /// The ids that are not pending.
        ids: Vec<String>,
        /// The ids that are.
        pending: Vec<String>,
    },

    /// A resume value given without an interrupt id while several interrupts
    /// are pending (LangGraph refuses it too).
    #[error("several interrupts are pending ({pending:?}): resume them by id")]
    AmbiguousResume {
        /// The pending interrupt ids.
        pending: Vec<String>,
    },

    /// A `Send` to a node the runtime did not declare
    /// ([`Thread::with_topology`](crate::thread::Thread::with_topology));
    /// with no declared graph, every `Send` is refused so.
    #[error("a Send to node {node:?}, which the runtime did not declare: declared are {declared:?}")]
    UnknownNode {
        /// The node the `Send` names.
        node: String,
        /// The declared nodes.
        declared: Vec<String>,
    },

    /// A reducer failed, or a stored or written value does not convert to
    /// its field's type.
    #[error("the reducer of channel {channel:?} failed: {reason}")]
    Reducer {
        /// The channel (state field).
        channel: String,
        /// Why, in words.
        reason: String,
    },
}
