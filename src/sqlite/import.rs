//! [`SqliteSaver::import_thread`]: a whole thread in one write job (one
//! savepoint of the writer's transaction), so it commits whole or not at all.

use super::error::sql_error;
use super::rows::{CheckpointRow, WriteRow};
use super::SqliteSaver;
use super::{ops, queries};
use crate::error::{Error, Result};
use crate::import::{ImportMode, ThreadImport};
use crate::saver::{op_span, traced};

impl SqliteSaver {
    /// Writes every checkpoint and write of `thread` in one transaction:
    /// after a crash the file has all of them or none. With
    /// [`ImportMode::Replace`] the thread's old rows are deleted in the same
    /// transaction. Values are stored as given (nothing is filled in from a
    /// parent) and writes keep their task path and index.
    ///
    /// The rows are encoded before the transaction starts; memory grows with
    /// the size of the thread.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty thread or checkpoint id;
    /// [`Error::ThreadExists`] with [`ImportMode::Create`] when the file has
    /// a checkpoint of the thread (writes of the thread left without a
    /// checkpoint are replaced); [`Error::Serde`] when a value
    /// cannot be serialized; storage failures (then nothing was written).
    pub async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()> {
        let span = op_span("import_thread", &thread.thread_id, "", None);
        traced(span, async {
            self.inner().writer.check_writable("import_thread")?;
            if thread.thread_id.is_empty() {
                return Err(Error::invalid("import_thread needs a thread id"));
            }
            let mut checkpoints = Vec::with_capacity(thread.checkpoints.len());
            for cp in &thread.checkpoints {
                if cp.checkpoint.id.is_empty() {
                    return Err(Error::invalid("import_thread: a checkpoint has an empty id"));
                }
                let typed = self.inner().serde.dumps_typed(&cp.checkpoint.to_value(true))?;
                let row = CheckpointRow {
                    thread_id: thread.thread_id.clone(),
                    checkpoint_ns: cp.checkpoint_ns.clone(),
                    checkpoint_id: cp.checkpoint.id.clone(),
                    parent_checkpoint_id: cp.parent_checkpoint_id.clone(),
                    tag: typed.tag,
                    checkpoint: typed.data,
                    metadata: cp.metadata.to_python_json()?.into_bytes(),
                };
                let writes = cp
                    .writes
                    .iter()
                    .map(|w| {
                        let typed = self.inner().serde.dumps_typed(&w.value)?;
                        Ok(WriteRow {
                            task_id: w.task_id.clone(),
                            task_path: w.task_path.clone(),
                            idx: w.idx,
                            channel: w.channel.clone(),
                            tag: typed.tag,
                            value: typed.data.to_vec(),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                checkpoints.push((row, writes));
            }
            let thread_id = thread.thread_id.clone();
            self.inner()
                .writer
                .write("import_thread", move |conn| {
                    if mode == ImportMode::Create {
                        let taken = conn
                            .prepare_cached(queries::THREAD_HAS_CHECKPOINTS_FLAG)
                            .and_then(|mut s| s.query_row([&thread_id], |r| r.get::<_, bool>(0)))
                            .map_err(sql_error)?;
                        if taken {
                            return Err(Error::ThreadExists {
                                thread_id: thread_id.clone(),
                            });
                        }
                    }
                    // the old thread, or writes left without a checkpoint
                    ops::delete_thread(conn, &thread_id)?;
                    for (row, writes) in &checkpoints {
                        ops::put_checkpoint(conn, row)?;
                        ops::put_writes(conn, &thread_id, &row.checkpoint_ns, &row.checkpoint_id, writes)?;
                    }
                    Ok(())
                })
                .await
        })
        .await
    }
}
