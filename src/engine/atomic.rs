//! Atomic steps: a super-step's remaining pending writes (saved against the
//! checkpoint the step ran from) and the checkpoint that follows them,
//! stored by the backend in one atomic step (see
//! [`Backend::put_step`](super::Backend::put_step)): after a crash both are
//! there or neither is.

use std::collections::HashMap;

use super::{saved_config, Backend, Engine, Put, WriteBatch, WritesCall};
use crate::checkpoint::{write_idx, CheckpointMetadata, CheckpointTuple, PendingWrite, StepCheckpoint};
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::limits;
use crate::saver::{op_span, traced, Operation};
use crate::serde::Value;

/// One task's writes, as one `put_writes` call would take them.
struct TaskWrites<'a> {
    task_id: &'a str,
    task_path: &'a str,
    writes: Vec<(String, Value)>,
}

/// The writes grouped by task (task id and path) in the order each task
/// first appears, each checked as `put_pending_writes` checks one call:
/// a write's index is the one its position in its task gives it.
fn by_task(writes: &[PendingWrite]) -> Result<Vec<TaskWrites<'_>>> {
    let mut tasks: Vec<TaskWrites<'_>> = Vec::new();
    let mut at: HashMap<(&str, &str), usize> = HashMap::new();
    for w in writes {
        let i = *at.entry((&w.task_id, &w.task_path)).or_insert_with(|| {
            tasks.push(TaskWrites {
                task_id: &w.task_id,
                task_path: &w.task_path,
                writes: Vec::new(),
            });
            tasks.len() - 1
        });
        let task = &mut tasks[i];
        let position = task.writes.len();
        let expected = write_idx(&w.channel, position);
        if w.idx != expected {
            return Err(Error::invalid(format!(
                "put_step_with_writes: write {position} of task {:?} (channel {:?}) has index {}, its position gives {expected}",
                w.task_id, w.channel, w.idx
            )));
        }
        task.writes.push((w.channel.clone(), w.value.clone()));
    }
    Ok(tasks)
}

impl<B: Backend> Engine<B> {
    pub(crate) async fn put_step_with_writes(
        &self,
        parent: &CheckpointConfig,
        step: &StepCheckpoint,
        metadata: &CheckpointMetadata,
        writes: &[PendingWrite],
    ) -> Result<CheckpointTuple> {
        let checkpoint = step.checkpoint();
        let span = op_span("put_step", &parent.thread_id, parent.ns(), Some(&checkpoint.id));
        traced(span, async {
            self.backend.check_writable(Operation::Put.name())?;
            limits::check_put(checkpoint, metadata)?;
            let tasks = by_task(writes)?;
            let mut encoded = Vec::with_capacity(tasks.len());
            for task in &tasks {
                let parent_id = limits::check_put_writes(parent, &task.writes)?;
                let values = task
                    .writes
                    .iter()
                    .map(|(channel, value)| Ok((channel.clone(), self.backend.encode(value)?)))
                    .collect::<Result<Vec<_>>>()?;
                encoded.push((task, parent_id, values));
            }
            let token = self.token(&parent.thread_id).await?;
            let batches: Vec<WriteBatch<'_, B::Encoded>> = encoded
                .into_iter()
                .map(|(task, parent_id, values)| {
                    let call = WritesCall {
                        config: parent,
                        writes: (),
                        task_id: task.task_id,
                        task_path: task.task_path,
                    };
                    let mut batch = call.batch(parent_id, values);
                    batch.fence = token.as_ref();
                    batch
                })
                .collect();
            let put = Put {
                fence: token.as_ref(),
                ..Put::new(parent, checkpoint, metadata, &step.new_versions)
            };
            self.backend.put_step(put, batches).await?;
            let config = saved_config(&parent.thread_id, parent.ns(), &checkpoint.id);
            Ok(CheckpointTuple::stored(config, parent, checkpoint, metadata))
        })
        .await
    }
}
