//! `import_thread`: a whole thread stored as given, checked once here and
//! written by the backend's one atomic primitive ([`super::Backend::import`]).

use std::collections::HashMap;

use super::{Backend, BatchWrite, Engine, Put, WriteBatch};
use crate::error::{Error, Result};
use crate::import::{ImportMode, ThreadImport};
use crate::limits;
use crate::saver::{op_span, traced};

/// A checked thread for [`Backend::import`]: every value encoded, every
/// write key (task id, index) once.
pub(crate) struct Import<'a, E> {
    pub(crate) thread_id: &'a str,
    pub(crate) mode: ImportMode,
    /// A fenced saver's token of the thread, checked with the write.
    pub(crate) fence: Option<super::FenceToken>,
    pub(crate) checkpoints: Vec<ImportedRows<'a, E>>,
}

/// One checkpoint of an [`Import`]: `put.new_versions` is the checkpoint's
/// own `channel_versions` (every value is stored, nothing comes from a
/// parent).
pub(crate) struct ImportedRows<'a, E> {
    pub(crate) put: Put<'a>,
    pub(crate) writes: Vec<ImportedRow<'a, E>>,
}

/// One write of an [`ImportedRows`], with the key the source stored it under.
pub(crate) struct ImportedRow<'a, E> {
    pub(crate) task_id: &'a str,
    pub(crate) task_path: &'a str,
    pub(crate) idx: i64,
    pub(crate) channel: &'a str,
    pub(crate) value: E,
}

impl<'a, E> ImportedRows<'a, E> {
    /// The checkpoint's put, and its writes as `put_writes` batches: one per
    /// (task_id, task_path), in the order each first appears, each keeping
    /// the order of its writes.
    pub(crate) fn into_batches(self) -> (Put<'a>, Vec<WriteBatch<'a, E>>) {
        let put = self.put;
        let mut batches: Vec<WriteBatch<'a, E>> = Vec::new();
        let mut at: HashMap<(&str, &str), usize> = HashMap::new();
        for w in self.writes {
            let i = *at.entry((w.task_id, w.task_path)).or_insert_with(|| {
                batches.push(WriteBatch {
                    thread_id: put.thread_id,
                    checkpoint_ns: put.checkpoint_ns,
                    checkpoint_id: put.checkpoint.id.as_str(),
                    task_id: w.task_id,
                    task_path: w.task_path,
                    writes: Vec::new(),
                    fence: None,
                });
                batches.len() - 1
            });
            batches[i].writes.push(BatchWrite {
                idx: w.idx,
                channel: w.channel.to_owned(),
                special: w.idx < 0,
                value: w.value,
            });
        }
        (put, batches)
    }
}

impl<B: Backend> Engine<B> {
    /// Checks `thread` as `put` and `put_writes` check their input, encodes
    /// it, and hands it to the backend, which writes it whole or not at all.
    pub(crate) async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()> {
        traced(op_span("import_thread", &thread.thread_id, "", None), async {
            self.backend.check_writable("import_thread")?;
            if thread.thread_id.is_empty() {
                return Err(Error::invalid("import_thread needs a thread id"));
            }
            let mut checkpoints = Vec::with_capacity(thread.checkpoints.len());
            for cp in &thread.checkpoints {
                if cp.checkpoint.id.is_empty() {
                    return Err(Error::invalid("import_thread: a checkpoint has an empty id"));
                }
                limits::check_put(&cp.checkpoint, &cp.metadata)?;
                // one row per (task_id, idx), as every store keys them: a
                // regular write keeps its first value, a special one its last
                let mut writes: Vec<ImportedRow<'_, B::Encoded>> = Vec::with_capacity(cp.writes.len());
                let mut at: HashMap<(&str, i64), usize> = HashMap::with_capacity(cp.writes.len());
                for w in &cp.writes {
                    limits::check_write(&w.channel, &w.value)?;
                    let row = ImportedRow {
                        task_id: &w.task_id,
                        task_path: &w.task_path,
                        idx: w.idx,
                        channel: &w.channel,
                        value: self.backend.encode(&w.value)?,
                    };
                    match at.get(&(w.task_id.as_str(), w.idx)) {
                        Some(&i) if w.idx < 0 => writes[i] = row,
                        Some(_) => {}
                        None => {
                            at.insert((&w.task_id, w.idx), writes.len());
                            writes.push(row);
                        }
                    }
                }
                checkpoints.push(ImportedRows {
                    put: Put {
                        thread_id: &thread.thread_id,
                        checkpoint_ns: &cp.checkpoint_ns,
                        parent_id: cp.parent_checkpoint_id.as_deref(),
                        checkpoint: &cp.checkpoint,
                        metadata: &cp.metadata,
                        new_versions: &cp.checkpoint.channel_versions,
                        fence: None,
                    },
                    writes,
                });
            }
            let fence = self.token(&thread.thread_id).await?;
            self.backend
                .import(Import {
                    thread_id: &thread.thread_id,
                    mode,
                    fence,
                    checkpoints,
                })
                .await
        })
        .await
    }
}
