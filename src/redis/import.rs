//! [`RedisSaver::import_thread`]: a whole thread written into staged keys a
//! chunk at a time and made live by one O(1) script (`stage`), so the
//! thread is whole or absent after a crash and no step stalls the server.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::keys::{pack, refuse_nul, write_field};
use super::rows::EMPTY;
use super::stage::{Mode, RawThread, Swapped};
use super::RedisSaver;
use crate::error::{Error, Result};
use crate::import::{ImportMode, ThreadImport};
use crate::saver::{op_span, traced};

fn key(parts: &[&[u8]]) -> Vec<u8> {
    parts.join(&0u8)
}

impl RedisSaver {
    /// Writes every checkpoint and write of `thread` at once: readers (and
    /// a crash, of the client or of the server) see the thread as it was or
    /// whole, never part of it. The keys are written into staged keys of the
    /// thread's slot, a bounded command at a time, then one script of fixed
    /// cost swaps them in (and, with [`ImportMode::Create`], first checks
    /// that the thread holds no checkpoint); staged keys of a client that
    /// died expire by themselves and no reader looks at them. With
    /// [`ImportMode::Replace`] the old thread goes in the same script.
    /// Values are stored as given (nothing is filled in from a parent) and
    /// writes keep their task path and index.
    ///
    /// The keys are encoded before anything is written; memory grows with
    /// the size of the thread.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty thread or checkpoint id, and for
    /// a thread id, namespace or checkpoint id holding U+0000;
    /// [`Error::ThreadExists`] with [`ImportMode::Create`] when the thread
    /// has a checkpoint (writes of the thread left without a checkpoint are
    /// replaced); [`Error::Serde`] when a value cannot be serialized;
    /// [`Error::Storage`] when Redis fails (then the thread is as it was).
    pub async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()> {
        let span = op_span("import_thread", &thread.thread_id, "", None);
        traced(span, async {
            if thread.thread_id.is_empty() {
                return Err(Error::invalid("import_thread needs a thread id"));
            }
            refuse_nul(&thread.thread_id, "thread_id")?;
            let r = self.engine.backend();
            let mut raw = RawThread::default();
            for cp in &thread.checkpoints {
                if cp.checkpoint.id.is_empty() {
                    return Err(Error::invalid("import_thread: a checkpoint has an empty id"));
                }
                refuse_nul(&cp.checkpoint_ns, "checkpoint_ns")?;
                refuse_nul(&cp.checkpoint.id, "checkpoint id")?;
                let (ns, id) = (cp.checkpoint_ns.as_bytes(), cp.checkpoint.id.as_bytes());
                let parent = cp.parent_checkpoint_id.as_deref();
                let (record, fields, blobs) = r.encode_checkpoint(parent, &cp.checkpoint, &cp.metadata, |_| true)?;
                let at = key(&[ns, id]);
                raw.ck.insert(at.clone(), record);
                raw.cf.insert(at.clone(), fields.join("\n").into_bytes());
                if let Some(p) = parent {
                    raw.par.insert(at.clone(), p.as_bytes().to_vec());
                }
                for (field, value) in blobs {
                    // one value per (namespace, channel, version): a value
                    // wins over `empty`, the first value over a later one
                    let slot = key(&[ns, field.as_bytes()]);
                    if let Some(old) = raw.bl.get_mut(&slot) {
                        if old.get(4..4 + EMPTY.len()) == Some(EMPTY) && value.get(4..4 + EMPTY.len()) != Some(EMPTY) {
                            *old = value;
                        }
                    } else {
                        raw.bl.insert(slot, value);
                    }
                }
                let mut seen: HashMap<Vec<u8>, ()> = HashMap::new();
                for w in &cp.writes {
                    let field = key(&[ns, id, write_field(&w.task_id, w.idx).as_bytes()]);
                    let typed = r.serde.dumps_typed(&w.value)?;
                    let value = pack(&[
                        w.task_id.as_bytes(),
                        w.task_path.as_bytes(),
                        w.channel.as_bytes(),
                        typed.tag.as_bytes(),
                        &typed.data,
                    ]);
                    // the first of two writes with one key is kept, as a
                    // regular `put_writes` keeps it
                    if let Entry::Vacant(slot) = seen.entry(field.clone()) {
                        slot.insert(());
                        raw.w.insert(field, value);
                    }
                }
            }
            let id = thread.thread_id.as_str();
            let exists = || Error::ThreadExists {
                thread_id: id.to_owned(),
            };
            if raw.is_empty() {
                if mode == ImportMode::Create && r.has_checkpoints(id, "import_thread").await? {
                    return Err(exists());
                }
                // writes left without a checkpoint (or, replacing, the thread) go
                return r.delete_thread_keys(id, "import_thread").await;
            }
            let how = match mode {
                ImportMode::Create => Mode::Create,
                _ => Mode::Replace,
            };
            match r.write_thread(id, &raw, how, "import_thread").await? {
                Swapped::Applied => Ok(()),
                Swapped::Exists => Err(exists()),
                Swapped::Changed => Err(super::stage::kept_changing("import_thread", id)),
            }
        })
        .await
    }
}
