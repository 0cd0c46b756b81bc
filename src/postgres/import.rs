//! [`PostgresSaver::import_thread`]: a whole thread in one transaction, so
//! it commits whole or not at all.

use std::collections::HashMap;

use tokio_postgres::types::Type;

use super::conn::{query_tx, JsonbParam};
use super::error::DbError;
use super::rows::get;
use super::{jsonb, queries, rows, PostgresSaver};
use crate::error::{Error, Result};
use crate::import::{ImportMode, ThreadImport};
use crate::saver::{op_span, traced};

/// The writes of one (checkpoint, task, task path): one `PUT_WRITES`.
struct WriteBatch {
    task_id: String,
    task_path: String,
    idxs: Vec<i32>,
    channels: Vec<String>,
    tags: Vec<String>,
    blobs: Vec<bytes::Bytes>,
}

impl PostgresSaver {
    /// Writes every checkpoint and write of `thread` in one transaction:
    /// after a crash or a lost connection the database has all of them or
    /// none. With [`ImportMode::Replace`] the thread's old rows are deleted
    /// in the same transaction. Values are stored as given (nothing is
    /// filled in from a parent) and writes keep their task path and index.
    ///
    /// The rows are encoded before the transaction starts; memory grows with
    /// the size of the thread.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty thread or checkpoint id and for
    /// text PostgreSQL cannot hold (U+0000), or a write index beyond
    /// PostgreSQL's `integer`; [`Error::ThreadExists`] with
    /// [`ImportMode::Create`] when the database has a checkpoint of the
    /// thread (rows of the thread left without a checkpoint are replaced);
    /// [`Error::Serde`] when a value cannot be serialized; storage failures
    /// (then nothing was written).
    pub async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()> {
        let span = op_span("import_thread", &thread.thread_id, "", None);
        traced(span, async {
            if thread.thread_id.is_empty() {
                return Err(Error::invalid("import_thread needs a thread id"));
            }
            jsonb::check_text(&thread.thread_id, "thread_id")?;
            let mut encoded = Vec::with_capacity(thread.checkpoints.len());
            for cp in &thread.checkpoints {
                let id = &cp.checkpoint.id;
                if id.is_empty() {
                    return Err(Error::invalid("import_thread: a checkpoint has an empty id"));
                }
                jsonb::check_text(&cp.checkpoint_ns, "checkpoint_ns")?;
                jsonb::check_text(id, "checkpoint id")?;
                if let Some(parent) = &cp.parent_checkpoint_id {
                    jsonb::check_text(parent, "parent checkpoint id")?;
                }
                let put = rows::put_rows(
                    &cp.checkpoint,
                    &cp.metadata,
                    &cp.checkpoint.channel_versions,
                    self.pg().serde(),
                )?;
                // one row per (task_id, idx), as the table keys them: a
                // regular write keeps its first value, a special one its last
                let mut batches: Vec<WriteBatch> = Vec::new();
                let mut batch_of: HashMap<(&str, &str), usize> = HashMap::new();
                let mut row_of: HashMap<(&str, i64), (usize, usize)> = HashMap::new();
                for w in &cp.writes {
                    for (text, what) in [
                        (w.task_id.as_str(), "task_id"),
                        (w.task_path.as_str(), "task_path"),
                        (w.channel.as_str(), "channel name"),
                    ] {
                        jsonb::check_text(text, what)?;
                    }
                    let idx = i32::try_from(w.idx)
                        .map_err(|_| Error::invalid(format!("write index {} is beyond PostgreSQL's integer", w.idx)))?;
                    let typed = self.pg().serde().dumps_typed(&w.value)?;
                    jsonb::check_text(&typed.tag, "serializer tag")?;
                    if let Some(&(b, r)) = row_of.get(&(w.task_id.as_str(), w.idx)) {
                        if w.idx < 0 {
                            let batch = &mut batches[b];
                            batch.channels[r] = w.channel.clone();
                            batch.tags[r] = typed.tag;
                            batch.blobs[r] = typed.data;
                        }
                        continue;
                    }
                    let next = batches.len();
                    let b = *batch_of.entry((&w.task_id, &w.task_path)).or_insert(next);
                    if b == next {
                        batches.push(WriteBatch {
                            task_id: w.task_id.clone(),
                            task_path: w.task_path.clone(),
                            idxs: Vec::new(),
                            channels: Vec::new(),
                            tags: Vec::new(),
                            blobs: Vec::new(),
                        });
                    }
                    let batch = &mut batches[b];
                    row_of.insert((&w.task_id, w.idx), (b, batch.idxs.len()));
                    batch.idxs.push(idx);
                    batch.channels.push(w.channel.clone());
                    batch.tags.push(typed.tag);
                    batch.blobs.push(typed.data);
                }
                encoded.push((cp, put, batches));
            }
            let run = || async {
                let mode_sql = self.pg().inner.mode;
                let mut client = self.pg().client().await?;
                let lz4 = self.pg().has_lz4(&client).await?;
                let tx = client.transaction().await?;
                let thread_id = thread.thread_id.as_str();
                query_tx(&tx, mode_sql, queries::LOCK_THREAD, &[(&thread_id, Type::TEXT)]).await?;
                if mode == ImportMode::Create {
                    let found = query_tx(
                        &tx,
                        mode_sql,
                        "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1)",
                        &[(&thread_id, Type::TEXT)],
                    )
                    .await?;
                    let taken: bool = match found.first() {
                        Some(row) => get(row, 0)?,
                        None => false,
                    };
                    if taken {
                        return Ok(false);
                    }
                }
                // the old thread, or rows left without a checkpoint (blobs
                // must not keep an old value under a version imported anew)
                query_tx(&tx, mode_sql, queries::DELETE_THREAD, &[(&thread_id, Type::TEXT)]).await?;
                let put_sql = if lz4 { queries::PUT_LZ4 } else { queries::PUT };
                for (cp, put, batches) in &encoded {
                    let ns = cp.checkpoint_ns.as_str();
                    let id = cp.checkpoint.id.as_str();
                    let parent = cp.parent_checkpoint_id.as_deref();
                    let checkpoint = JsonbParam(put.checkpoint.clone());
                    let metadata = JsonbParam(put.metadata.clone());
                    let data: Vec<Option<&[u8]>> = put.blob_data.iter().map(|d| d.as_deref()).collect();
                    query_tx(
                        &tx,
                        mode_sql,
                        put_sql,
                        &[
                            (&thread_id, Type::TEXT),
                            (&ns, Type::TEXT),
                            (&id, Type::TEXT),
                            (&parent, Type::TEXT),
                            (&checkpoint, Type::JSONB),
                            (&metadata, Type::JSONB),
                            (&put.blob_channels, Type::TEXT_ARRAY),
                            (&put.blob_versions, Type::TEXT_ARRAY),
                            (&put.blob_types, Type::TEXT_ARRAY),
                            (&data, Type::BYTEA_ARRAY),
                            (&put.unwritten, Type::TEXT_ARRAY),
                        ],
                    )
                    .await?;
                    for b in batches {
                        let data: Vec<&[u8]> = b.blobs.iter().map(|d| &d[..]).collect();
                        query_tx(
                            &tx,
                            mode_sql,
                            queries::PUT_WRITES,
                            &[
                                (&thread_id, Type::TEXT),
                                (&ns, Type::TEXT),
                                (&id, Type::TEXT),
                                (&b.task_id, Type::TEXT),
                                (&b.task_path, Type::TEXT),
                                (&b.idxs, Type::INT4_ARRAY),
                                (&b.channels, Type::TEXT_ARRAY),
                                (&b.tags, Type::TEXT_ARRAY),
                                (&data, Type::BYTEA_ARRAY),
                            ],
                        )
                        .await?;
                    }
                }
                tx.commit().await?;
                Ok::<bool, DbError>(true)
            };
            match run().await {
                Ok(true) => Ok(()),
                Ok(false) => Err(Error::ThreadExists {
                    thread_id: thread.thread_id.clone(),
                }),
                Err(e) => Err(self.pg().fail(e, "import_thread", false)),
            }
        })
        .await
    }
}
