//! Rows as the tables hold them: the rows a write stores, encoded before
//! they reach the writer, and the rows a read returns, taken off the
//! connection as bytes and decoded into checkpoints and writes afterwards,
//! on the caller's side (see the module docs of `sqlite`).

use bytes::Bytes;
use rusqlite::types::ValueRef;

use super::error::sql_error;
use crate::checkpoint::{Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::encoded::{EncodedTuple, EncodedWrite};
use crate::engine::sort_writes_by;
use crate::error::{Error, Result};
use crate::serde::{Serializer, TypedBytes, Value};

/// A checkpoint row, encoded by the caller before it reaches the writer.
#[derive(Debug)]
pub(crate) struct CheckpointRow {
    pub(crate) thread_id: String,
    pub(crate) checkpoint_ns: String,
    pub(crate) checkpoint_id: String,
    pub(crate) parent_checkpoint_id: Option<String>,
    pub(crate) tag: String,
    pub(crate) checkpoint: bytes::Bytes,
    pub(crate) metadata: Vec<u8>,
}

impl CheckpointRow {
    /// The row of `checkpoint`, its values inline, under (thread, ns).
    ///
    /// # Errors
    /// What the serializer and the metadata's JSON refuse.
    pub(crate) fn encode(
        thread_id: &str,
        checkpoint_ns: &str,
        parent_id: Option<&str>,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        serde: &dyn Serializer,
    ) -> Result<Self> {
        let typed = serde.dumps_typed(&checkpoint.to_value(true))?;
        Ok(CheckpointRow {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: checkpoint_ns.to_owned(),
            checkpoint_id: checkpoint.id.clone(),
            parent_checkpoint_id: parent_id.map(str::to_owned),
            tag: typed.tag,
            checkpoint: typed.data,
            metadata: metadata.to_python_json()?.into_bytes(),
        })
    }
}

/// One row of `writes`, encoded by the caller.
#[derive(Debug)]
pub(crate) struct WriteRow {
    pub(crate) task_id: String,
    pub(crate) task_path: String,
    pub(crate) idx: i64,
    pub(crate) channel: String,
    pub(crate) tag: String,
    pub(crate) value: Vec<u8>,
}

impl WriteRow {
    /// The row of a write, its value encoded.
    pub(crate) fn new(task_id: &str, task_path: &str, idx: i64, channel: String, value: TypedBytes) -> Self {
        WriteRow {
            task_id: task_id.to_owned(),
            task_path: task_path.to_owned(),
            idx,
            channel,
            tag: value.tag,
            value: value.data.to_vec(),
        }
    }
}

/// A checkpoint row and its writes as stored, read by
/// [`get_tuple`](super::ops::get_tuple) or
/// [`list_page`](super::ops::list_page) and decoded by [`StoredTuple::decode`] afterwards, on the
/// caller's side (see the module docs of `sqlite`).
#[derive(Debug)]
pub(crate) struct StoredTuple {
    pub(crate) thread_id: String,
    pub(crate) checkpoint_ns: String,
    pub(crate) record: Record,
    pub(crate) writes: Vec<Result<WriteRecord>>,
}

impl StoredTuple {
    /// Decodes the checkpoint, the metadata and the writes (in the order
    /// read; the engine sorts them).
    ///
    /// # Errors
    /// [`Error::Serde`] when a stored value cannot be decoded.
    pub(crate) fn decode(self, serde: &dyn Serializer) -> Result<CheckpointTuple> {
        let StoredTuple {
            thread_id,
            checkpoint_ns: ns,
            record,
            writes,
        } = self;
        let checkpoint = record.checkpoint(serde)?;
        let metadata = metadata_from_ref(ValueRef::Blob(&record.metadata))?;
        let pending_writes = writes
            .into_iter()
            .map(|w| w.and_then(|w| w.into_write(serde)))
            .collect::<Result<Vec<_>>>()?;
        let parent_config = record.parent.map(|p| {
            CheckpointConfig::new(thread_id.as_str())
                .with_ns(ns.as_str())
                .with_checkpoint_id(p)
        });
        let config = CheckpointConfig::new(thread_id)
            .with_ns(ns)
            .with_checkpoint_id(record.id);
        Ok(CheckpointTuple {
            config,
            checkpoint,
            metadata,
            parent_config,
            pending_writes,
        })
    }
}

impl StoredTuple {
    /// The row as stored, writes in (task_path, task_id, idx) order, for a
    /// caller that decodes it itself.
    ///
    /// # Errors
    /// [`Error::Serde`] for a row without a type tag or a write that could
    /// not be read.
    pub(crate) fn into_encoded(self) -> Result<EncodedTuple> {
        let StoredTuple {
            thread_id,
            checkpoint_ns,
            record,
            writes,
        } = self;
        let tag = record
            .tag
            .ok_or_else(|| Error::serde("checkpoint row has no type tag"))?;
        let mut writes = writes.into_iter().collect::<Result<Vec<_>>>()?;
        sort_writes_by(&mut writes, |w| (&w.task_path, &w.task_id, w.idx));
        let writes = writes
            .into_iter()
            .map(|w| {
                let tag = w
                    .tag
                    .ok_or_else(|| Error::serde(format!("write {}/{} has no type tag", w.task_id, w.idx)))?;
                Ok(EncodedWrite {
                    task_id: w.task_id,
                    channel: w.channel,
                    value: TypedBytes::new(tag, w.value),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(EncodedTuple {
            thread_id,
            checkpoint_ns,
            checkpoint_id: record.id,
            parent_checkpoint_id: record.parent,
            checkpoint: TypedBytes::new(tag, record.blob),
            metadata: TypedBytes::new("json", record.metadata),
            writes,
        })
    }
}

/// A stored checkpoint row, not yet decoded.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) id: String,
    pub(crate) parent: Option<String>,
    pub(crate) tag: Option<String>,
    /// The checkpoint blob as read: decoding slices its long strings out of
    /// it instead of copying them.
    pub(crate) blob: Bytes,
    pub(crate) metadata: Vec<u8>,
}

impl Record {
    pub(crate) fn checkpoint(&self, serde: &dyn Serializer) -> Result<Checkpoint> {
        let tag = self
            .tag
            .as_deref()
            .ok_or_else(|| Error::serde("checkpoint row has no type tag"))?;
        Checkpoint::from_value(&serde.loads_typed_bytes(tag, &self.blob)?)
    }
}

pub(crate) fn record_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Record>> {
    let build = || -> Result<Record> {
        Ok(Record {
            id: text_of(col(row, 0)?, "checkpoint_id")?.unwrap_or_default(),
            parent: text_of(col(row, 1)?, "parent_checkpoint_id")?.filter(|p| !p.is_empty()),
            tag: text_of(col(row, 2)?, "type")?,
            blob: bytes_of(col(row, 3)?, "checkpoint")?.into(),
            metadata: bytes_of(col(row, 4)?, "metadata")?,
        })
    };
    Ok(build())
}

/// A stored write with its sort key.
#[derive(Debug)]
pub(crate) struct WriteRecord {
    pub(crate) checkpoint_id: String,
    task_path: String,
    task_id: String,
    idx: i64,
    channel: String,
    tag: Option<String>,
    value: Bytes,
}

impl WriteRecord {
    pub(crate) fn into_write(self, serde: &dyn Serializer) -> Result<PendingWrite> {
        let tag = self
            .tag
            .ok_or_else(|| Error::serde(format!("write {}/{} has no type tag", self.task_id, self.idx)))?;
        Ok(PendingWrite {
            value: serde.loads_typed_bytes(&tag, &self.value)?,
            task_id: self.task_id,
            channel: self.channel,
            task_path: self.task_path,
            idx: self.idx,
        })
    }
}

pub(crate) fn write_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<WriteRecord>> {
    let build = || -> Result<WriteRecord> {
        Ok(WriteRecord {
            checkpoint_id: text_of(col(row, 0)?, "checkpoint_id")?.unwrap_or_default(),
            task_id: text_of(col(row, 1)?, "task_id")?.unwrap_or_default(),
            channel: text_of(col(row, 2)?, "channel")?.unwrap_or_default(),
            tag: text_of(col(row, 3)?, "type")?,
            value: bytes_of(col(row, 4)?, "value")?.into(),
            task_path: text_of(col(row, 5)?, "task_path")?.unwrap_or_default(),
            idx: row.get(6).map_err(sql_error)?,
        })
    };
    Ok(build())
}

/// The `channel_values` entries of a stored checkpoint.
pub(crate) fn stored_channel_values(
    serde: &dyn Serializer,
    tag: Option<&str>,
    blob: &[u8],
) -> Result<Vec<(Value, Value)>> {
    let tag = tag.ok_or_else(|| Error::serde("checkpoint row has no type tag"))?;
    match serde.loads_typed(tag, blob)? {
        Value::Map(entries) => Ok(entries
            .into_iter()
            .find(|(k, _)| k.as_str() == Some("channel_values"))
            .and_then(|(_, v)| match v {
                Value::Map(values) => Some(values.into_vec()),
                _ => None,
            })
            .unwrap_or_default()),
        _ => Err(Error::serde("checkpoint is not a map")),
    }
}

/// The bytes of a stored metadata column (BLOB as Python writes it, TEXT
/// from older writers, NULL = empty).
pub(crate) fn metadata_bytes(value: ValueRef<'_>) -> Result<&[u8]> {
    match value {
        ValueRef::Null => Ok(&[]),
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(b),
        _ => Err(Error::serde("metadata column holds a number")),
    }
}

/// Reads a stored metadata column.
pub(crate) fn metadata_from_ref(value: ValueRef<'_>) -> Result<CheckpointMetadata> {
    CheckpointMetadata::from_json(metadata_bytes(value)?)
}

pub(crate) fn col<'a>(row: &'a rusqlite::Row<'_>, index: usize) -> Result<ValueRef<'a>> {
    row.get_ref(index).map_err(sql_error)
}

pub(crate) fn bytes_of(value: ValueRef<'_>, what: &str) -> Result<Vec<u8>> {
    match value {
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(b.to_vec()),
        ValueRef::Null => Ok(Vec::new()),
        _ => Err(Error::serde(format!("{what} column holds a number"))),
    }
}

pub(crate) fn text_of(value: ValueRef<'_>, what: &str) -> Result<Option<String>> {
    match value {
        ValueRef::Null => Ok(None),
        ValueRef::Text(b) | ValueRef::Blob(b) => String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| Error::serde(format!("{what} is not UTF-8"))),
        ValueRef::Integer(i) => Ok(Some(i.to_string())),
        ValueRef::Real(f) => Ok(Some(crate::serde::py_float_repr(f))),
    }
}
