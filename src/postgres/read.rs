//! Rows read back: the rows of [`super::queries::select_tuples`] gathered
//! into [`StoredRow`]s, each value as stored, then decoded into a tuple or
//! handed out as bytes (`docs/design.md`, *PostgreSQL backend*).

use bytes::Bytes;
use indexmap::IndexMap;
use tokio_postgres::Row;

use super::conn::JsonbText;
use super::error::describe;
use super::jsonb;
use super::rows::{inline_refused, migrate_sends};
use crate::checkpoint::{Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::encoded::{EncodedTuple, EncodedWrite};
use crate::engine::sort_writes_by;
use crate::engine::values::{self, Stored};
use crate::error::{Error, Result};
use crate::serde::{msgpack, JsonPlusSerializer, Serializer, TypedBytes};

fn col<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, idx: usize, what: &str) -> Result<T> {
    row.try_get(idx)
        .map_err(|e| Error::serde(format!("unexpected {what} column from PostgreSQL: {}", describe(&e))))
}

fn no_write_tag() -> Error {
    Error::serde("a pending write has no type tag")
}

/// A checkpoint as read: its JSONB decoded (the checkpoint with its inline
/// values, the metadata), its blobs and writes as stored.
pub(crate) struct StoredRow {
    pub(crate) thread_id: String,
    pub(crate) ns: String,
    pub(crate) checkpoint_id: String,
    pub(crate) parent: Option<String>,
    /// The checkpoint with its inline values only.
    pub(crate) checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    /// (channel, tag, bytes) in the order the checkpoint names the versions.
    blobs: Vec<(String, String, Bytes)>,
    writes: Vec<StoredWrite>,
    /// The sends of a checkpoint older than format v4, given back by
    /// [`migrate_sends`].
    pub(crate) sends: Vec<crate::serde::Value>,
}

struct StoredWrite {
    task_id: String,
    channel: String,
    tag: Option<String>,
    data: Option<Bytes>,
    task_path: String,
    idx: i64,
}

/// Gathers the rows of [`super::queries::select_tuples`], one row at a time
/// and in any order, into [`StoredRow`]s.
pub(crate) struct TupleRows {
    /// The most checkpoints the query can return.
    limit: usize,
    parts: Vec<Parts>,
}

#[derive(Default)]
struct Parts {
    head: Option<StoredRow>,
    blobs: Vec<(i64, String, String, Bytes)>,
    writes: Vec<StoredWrite>,
}

impl TupleRows {
    /// For a query returning at most `limit` checkpoints.
    pub(crate) fn new(limit: usize) -> Self {
        TupleRows {
            limit,
            parts: Vec::new(),
        }
    }

    /// Reads one row (its values are not decoded).
    ///
    /// # Errors
    /// [`Error::Serde`] for rows that do not read.
    pub(crate) fn push(&mut self, row: &Row) -> Result<()> {
        let n: i64 = col(row, 0, "position")?;
        let at = n
            .checked_sub(1)
            .and_then(|at| usize::try_from(at).ok())
            .filter(|at| *at < self.limit)
            .ok_or_else(|| Error::serde(format!("unexpected row position {n} from PostgreSQL")))?;
        if self.parts.len() <= at {
            self.parts.resize_with(at + 1, Parts::default);
        }
        let part = &mut self.parts[at];
        let kind: i32 = col(row, 1, "kind")?;
        match kind {
            0 => {
                let checkpoint: JsonbText = col(row, 6, "checkpoint")?;
                let metadata: JsonbText = col(row, 7, "metadata")?;
                part.head = Some(StoredRow {
                    thread_id: col(row, 2, "thread_id")?,
                    ns: col(row, 3, "checkpoint_ns")?,
                    checkpoint_id: col(row, 4, "checkpoint_id")?,
                    parent: col(row, 5, "parent_checkpoint_id")?,
                    checkpoint: Checkpoint::from_value(&jsonb::from_json(&checkpoint.0)?)?,
                    metadata: CheckpointMetadata::from_value(&jsonb::from_json(&metadata.0)?)?,
                    blobs: Vec::new(),
                    writes: Vec::new(),
                    sends: Vec::new(),
                });
            }
            1 => {
                let data: Option<&[u8]> = col(row, 8, "blob")?;
                part.blobs.push((
                    col(row, 9, "blob position")?,
                    col(row, 2, "blob channel")?,
                    col(row, 3, "blob type")?,
                    Bytes::copy_from_slice(data.unwrap_or_default()),
                ));
            }
            _ => {
                let data: Option<&[u8]> = col(row, 8, "write blob")?;
                part.writes.push(StoredWrite {
                    task_id: col(row, 2, "write task_id")?,
                    channel: col(row, 3, "write channel")?,
                    tag: col(row, 4, "write type")?,
                    data: data.map(Bytes::copy_from_slice),
                    task_path: col(row, 5, "write task_path")?,
                    idx: col(row, 9, "write idx")?,
                });
            }
        }
        Ok(())
    }

    /// The checkpoints, in the order of the query.
    pub(crate) fn finish(self) -> Vec<StoredRow> {
        let mut out = Vec::with_capacity(self.parts.len());
        for part in self.parts {
            let Some(mut head) = part.head else {
                continue;
            };
            let mut blobs = part.blobs;
            blobs.sort_by_key(|(i, ..)| *i);
            head.blobs = blobs.into_iter().map(|(_, ch, tag, data)| (ch, tag, data)).collect();
            head.writes = part.writes;
            out.push(head);
        }
        out
    }
}

impl StoredRow {
    /// The metadata, decoded with the row.
    pub(crate) fn metadata(&self) -> &CheckpointMetadata {
        &self.metadata
    }

    /// When the serializer refuses plaintext ([`Serializer::reads_plaintext`]
    /// is false), [`crate::EncryptionError::PlaintextRefused`] for an inline
    /// value no blob replaces: inline JSONB never went through the cipher.
    fn check_inline(&self, serde: &dyn Serializer) -> Result<()> {
        if serde.reads_plaintext() {
            return Ok(());
        }
        let inline = self.checkpoint.channel_values.keys();
        if let Some(channel) = inline.into_iter().find(|ch| !self.blobs.iter().any(|(b, ..)| b == *ch)) {
            tracing::debug!(
                channel = %channel,
                checkpoint_id = %self.checkpoint_id,
                "postgres: refusing an inline (unencrypted) channel value"
            );
            return Err(inline_refused());
        }
        Ok(())
    }

    /// `channel_values` = the inline JSONB values, then the blobs at the
    /// versions the checkpoint names in the order it names them (a blob
    /// replaces an inline entry, such as the `true` marker of a delta
    /// snapshot), as Python reconstitutes them; then the sends of an old
    /// checkpoint.
    fn decode_values(&mut self, serde: &dyn Serializer) -> Result<()> {
        for (channel, tag, data) in std::mem::take(&mut self.blobs) {
            let value = serde.loads_typed_bytes(&tag, &data).map_err(|e| match e {
                // A refused or undecryptable payload keeps its type, as on
                // every other backend.
                Error::Encryption(_) => e,
                e => Error::serde(format!("channel {channel:?} of checkpoint {}: {e}", self.checkpoint_id)),
            })?;
            self.checkpoint.channel_values.insert(channel, value);
        }
        migrate_sends(&mut self.checkpoint, std::mem::take(&mut self.sends));
        Ok(())
    }

    fn configs(&self) -> (CheckpointConfig, Option<CheckpointConfig>) {
        let parent = self
            .parent
            .as_ref()
            .filter(|p| !p.is_empty())
            .map(|p| CheckpointConfig {
                thread_id: self.thread_id.clone(),
                checkpoint_ns: Some(self.ns.clone()),
                checkpoint_id: Some(p.clone()),
            });
        let config = CheckpointConfig {
            thread_id: self.thread_id.clone(),
            checkpoint_ns: Some(self.ns.clone()),
            checkpoint_id: Some(self.checkpoint_id.clone()),
        };
        (config, parent)
    }

    /// The tuple, its writes in any order.
    ///
    /// # Errors
    /// [`Error::Serde`] for a value that does not decode;
    /// [`crate::Error::Encryption`] for one the serializer refuses or cannot open.
    pub(crate) fn decode(mut self, serde: &dyn Serializer) -> Result<CheckpointTuple> {
        self.check_inline(serde)?;
        self.decode_values(serde)?;
        let pending_writes = std::mem::take(&mut self.writes)
            .into_iter()
            .map(|w| {
                let tag = w.tag.ok_or_else(no_write_tag)?;
                Ok(PendingWrite {
                    value: serde.loads_typed_bytes(&tag, &w.data.unwrap_or_default())?,
                    task_id: w.task_id,
                    channel: w.channel,
                    task_path: w.task_path,
                    idx: w.idx,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (config, parent_config) = self.configs();
        Ok(CheckpointTuple {
            config,
            checkpoint: self.checkpoint,
            metadata: self.metadata,
            parent_config,
            pending_writes,
        })
    }

    /// The tuple as bytes: the checkpoint's blobs spliced into its msgpack
    /// as stored when they can be ([`values::checkpoint_msgpack`]; decoded
    /// otherwise), the writes as stored.
    ///
    /// # Errors
    /// As [`decode`](Self::decode), for what must be decoded.
    pub(crate) fn encoded(mut self, serde: &dyn Serializer) -> Result<EncodedTuple> {
        self.check_inline(serde)?;
        let mut writes = std::mem::take(&mut self.writes);
        sort_writes_by(&mut writes, |w| (&w.task_path, &w.task_id, w.idx));
        let writes = writes
            .into_iter()
            .map(|w| {
                let tag = w.tag.ok_or_else(no_write_tag)?;
                Ok(EncodedWrite {
                    value: values::stored_payload(serde, tag, w.data.unwrap_or_default())?,
                    task_id: w.task_id,
                    channel: w.channel,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let spliced = if self.sends.is_empty() {
            let mut stored: IndexMap<&str, Stored<'_>> = self
                .checkpoint
                .channel_values
                .iter()
                .map(|(k, v)| (k.as_str(), Stored::Value(v)))
                .collect();
            for (channel, tag, data) in &self.blobs {
                stored.insert(channel, Stored::Typed { tag, data });
            }
            let stored: Vec<(&str, Stored<'_>)> = stored.into_iter().collect();
            values::checkpoint_msgpack(serde, &self.checkpoint, &stored)?
        } else {
            None
        };
        let checkpoint = match spliced {
            Some(bytes) => bytes,
            None => {
                self.decode_values(serde)?;
                JsonPlusSerializer.dumps_typed(&self.checkpoint.to_value(true))?
            }
        };
        Ok(EncodedTuple {
            parent_checkpoint_id: self.parent.filter(|p| !p.is_empty()),
            metadata: TypedBytes::new("msgpack", msgpack::encode(&self.metadata.to_value())?),
            thread_id: self.thread_id,
            checkpoint_ns: self.ns,
            checkpoint_id: self.checkpoint_id,
            checkpoint,
            writes,
        })
    }
}
