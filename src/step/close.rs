//! Closing a step: the next checkpoint made from the finished tasks'
//! writes and stored, with the writes not stored yet in one atomic step.

use std::collections::BTreeSet;

use super::{schedule, StepError};
use crate::checkpoint::channels::INTERRUPT;
use crate::checkpoint::{CheckpointMetadata, CheckpointSource, CheckpointTuple, PendingWrite};
use crate::error::Result;
use crate::reducer::Reducers;
use crate::saver::CheckpointSaverExt;
use crate::serde::Value;
use crate::thread::{step_after, TaskWrites, Thread};

/// What [`Thread::close_step`] makes the next checkpoint of.
#[derive(Clone, Copy)]
pub struct StepClose<'a> {
    /// The checkpoint the step ran from.
    pub parent: &'a CheckpointTuple,
    /// The step's number: must be the parent's step + 1.
    pub step: i64,
    /// The finished tasks' writes; each must be a task the parent schedules
    /// (same node and triggers; `["__pregel_push"]` for a `Send` task).
    /// They are applied in Python's order: pull tasks sorted by node, then
    /// `Send` tasks in the order given (give them in packet order).
    pub tasks: &'a [TaskWrites<'a>],
    /// The state's reducers.
    pub reducers: &'a Reducers,
    /// Whether the step is the first of a resumed run (see
    /// [`Step::resuming`](super::Step::resuming)).
    pub resumed: bool,
}

impl Thread {
    /// Makes and stores the checkpoint that closes a step, in one call:
    /// checks the step number and the tasks against the parent, takes the
    /// saver's next version after the parent's greatest, applies the writes
    /// ([`apply_writes`](crate::thread::apply_writes)), writes the metadata (source `loop`, the step, the
    /// parent's `parents` or `{}`) and stores it as the parent's child.
    /// [`Step::close`](super::Step::close) calls it; a runtime with a loop of its own can too.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    /// use checkpointer::reducer::Reducers;
    /// use checkpointer::step::{StepClose, StepError};
    ///
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
    /// let input = thread.put_input(None, Value::map([("n", Value::from(1))]), None).await?;
    /// let close = StepClose { parent: &input, step: 5, tasks: &[], reducers: &Reducers::new(), resumed: false };
    /// let err = thread.close_step(close).await.unwrap_err();
    /// assert!(matches!(err.as_step(), Some(StepError::NotAfterParent { expected: 0, .. })));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`StepError::NotAfterParent`] when `step` is not the parent's step +
    /// 1; [`StepError::Unscheduled`] for writes of a task the parent does
    /// not schedule; [`StepError::UnknownNode`] for a `Send` to an
    /// undeclared node; [`StepError::Reducer`] (also for a join write that
    /// is not one of the join's sources); the saver's.
    pub async fn close_step(&self, close: StepClose<'_>) -> Result<CheckpointTuple> {
        self.close_step_with_writes(close, &[]).await
    }

    /// [`Thread::close_step`], storing `writes` (pending writes against the
    /// parent not stored yet, each task's in its order: a write's index is
    /// the one its position gives it) with the checkpoint in one atomic
    /// step of the store: after a crash both are there or neither is. A
    /// saver of this crate does it with
    /// [`AtomicSteps::put_step_with_writes`](crate::atomic::AtomicSteps::put_step_with_writes)
    /// (fenced too when the saver is); another saver (a wrapper) stores the
    /// writes, then the checkpoint, in two calls. Without writes it is
    /// `close_step`.
    ///
    /// # Errors
    /// As [`Thread::close_step`] and `put_step_with_writes`.
    pub async fn close_step_with_writes(
        &self,
        close: StepClose<'_>,
        writes: &[PendingWrite],
    ) -> Result<CheckpointTuple> {
        let parent = close.parent;
        let expected = step_after(&parent.metadata)?;
        if close.step != expected {
            return Err(StepError::NotAfterParent {
                step: close.step,
                parent_step: expected - 1,
                parent_id: parent.checkpoint.id.clone(),
                expected,
            }
            .into());
        }
        let topology = self.topology();
        let scheduled = parent.next_tasks_in(topology)?;
        let mut known: Vec<(&str, &[String])> = scheduled.iter().map(|t| (t.name.as_str(), &t.triggers[..])).collect();
        known.sort_unstable();
        for task in close.tasks {
            let mut triggers = task.triggers.to_vec();
            triggers.sort_unstable();
            if known.binary_search(&(task.node, &triggers[..])).is_err() {
                return Err(StepError::Unscheduled {
                    node: task.node.to_owned(),
                    task: format!("triggers {:?}", task.triggers),
                    checkpoint_id: parent.checkpoint.id.clone(),
                    scheduled: scheduled.iter().map(|t| t.name.clone()).collect(),
                }
                .into());
            }
            schedule::check_sends(task.writes, topology)?;
        }
        // Python's order: pull tasks by node, then `Send` tasks as given
        let mut tasks = close.tasks.to_vec();
        tasks.sort_by_key(|t| {
            let push = schedule::is_push(t.triggers);
            (push, if push { "" } else { t.node })
        });
        let saver = self.saver();
        let version = saver.get_next_version(parent.checkpoint.max_version())?;
        let reduce = |channel: &str, old: Option<&Value>, new: Value| close.reducers.reduce(channel, old, new);
        let (cp, step) = (&parent.checkpoint, close.step);
        let mut next = schedule::apply_writes_in(cp, step, &tasks, &version, Some(&reduce), topology)?;
        if close.resumed {
            let seen = parent.checkpoint.channel_versions.clone();
            next.checkpoint_mut().versions_seen.insert(INTERRUPT.to_owned(), seen);
        }
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Loop, close.step);
        let parents = parent.metadata.get("parents").cloned();
        metadata.insert("parents", parents.unwrap_or_else(|| Value::map::<&str>([])));
        match saver.as_fenceable() {
            _ if writes.is_empty() => saver.put_step(&parent.config, &next, &metadata).await,
            Some(atomic) => {
                atomic
                    .put_step_with_writes(&parent.config, &next, &metadata, writes)
                    .await
            }
            None => {
                for (task, path) in writes
                    .iter()
                    .map(|w| (&w.task_id, &w.task_path))
                    .collect::<BTreeSet<_>>()
                {
                    let of_task: Vec<(String, Value)> = writes
                        .iter()
                        .filter(|w| &w.task_id == task && &w.task_path == path)
                        .map(|w| (w.channel.clone(), w.value.clone()))
                        .collect();
                    saver.put_writes(&parent.config, &of_task, task, path).await?;
                }
                saver.put_step(&parent.config, &next, &metadata).await
            }
        }
    }
}
