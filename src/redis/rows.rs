//! Rows in and out of Redis: the replies of the `READ` script parsed into
//! [`RawItem`]s, and checkpoints and writes packed into the records the
//! scripts store and decoded back (`docs/design.md`, *Redis layout*).

use std::collections::HashSet;

use bytes::Bytes;
use indexmap::IndexMap;
use redis::Value as RValue;

use super::backend::Redis;
use super::keys::{self, blob_field, escape, field_channel, pack, unpack};
use crate::checkpoint::{Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::encoded::{metadata_msgpack, EncodedTuple, EncodedWrite};
use crate::engine::values::{self, Stored, Values};
use crate::engine::{sort_writes_by, Link};
use crate::error::{Error, Result};
use crate::serde::{JsonPlusSerializer, Serializer, TypedBytes, Value};

/// A checkpoint as read, decoded by [`Backend::decode`](crate::engine::Backend::decode).
pub(crate) struct RawItem {
    pub(super) thread: String,
    pub(super) ns: String,
    pub(super) id: String,
    pub(super) rec: Vec<u8>,
    /// (blob field, packed value) in `channel_versions` order.
    pub(super) blobs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// (write field, packed write).
    pub(super) writes: Vec<(Vec<u8>, Vec<u8>)>,
}

pub(super) fn bad_reply() -> Error {
    Error::serde("unexpected reply from Redis")
}

pub(super) fn arr(v: RValue) -> Result<Vec<RValue>> {
    match v {
        RValue::Array(a) | RValue::Set(a) => Ok(a),
        RValue::Nil => Ok(Vec::new()),
        _ => Err(bad_reply()),
    }
}

pub(super) fn bytes_of(v: RValue) -> Result<Vec<u8>> {
    match v {
        RValue::BulkString(b) => Ok(b),
        RValue::SimpleString(s) => Ok(s.into_bytes()),
        RValue::Int(i) => Ok(i.to_string().into_bytes()),
        RValue::Okay => Ok(b"OK".to_vec()),
        _ => Err(bad_reply()),
    }
}

fn opt_bytes(v: RValue) -> Result<Option<Vec<u8>>> {
    match v {
        RValue::Nil => Ok(None),
        other => bytes_of(other).map(Some),
    }
}

pub(super) fn int_of(v: &RValue) -> Result<i64> {
    match v {
        RValue::Int(i) => Ok(*i),
        _ => Err(bad_reply()),
    }
}

fn string_of(v: RValue, what: &str) -> Result<String> {
    keys::text(&bytes_of(v)?, what)
}

/// A flat (field, value) array as pairs.
fn pairs(v: RValue) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut it = arr(v)?.into_iter();
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((bytes_of(k)?, bytes_of(v)?));
    }
    Ok(out)
}

/// `ns \0 rest` as (ns, rest).
pub(super) fn split_key(key: &[u8]) -> Result<(String, String)> {
    let text = keys::text(key, "checkpoint key")?;
    let (ns, rest) = text.split_once('\0').ok_or_else(bad_reply)?;
    Ok((ns.to_owned(), rest.to_owned()))
}

/// An item of the `READ` script.
fn parse_item(thread: &str, v: RValue) -> Result<RawItem> {
    let mut parts = arr(v)?.into_iter();
    let id = string_of(parts.next().ok_or_else(bad_reply)?, "checkpoint id")?;
    let ns = string_of(parts.next().ok_or_else(bad_reply)?, "namespace")?;
    let rec = bytes_of(parts.next().ok_or_else(bad_reply)?)?;
    let mut blobs = Vec::new();
    let mut writes = Vec::new();
    if let (Some(fields), Some(values), Some(ws)) = (parts.next(), parts.next(), parts.next()) {
        let fields = arr(fields)?;
        let values = arr(values)?;
        for (f, v) in fields.into_iter().zip(values) {
            blobs.push((bytes_of(f)?, opt_bytes(v)?));
        }
        writes = pairs(ws)?;
    }
    Ok(RawItem {
        thread: thread.to_owned(),
        ns,
        id,
        rec,
        blobs,
        writes,
    })
}

/// The reply of `READ`: (entries examined, the last one, the items); the
/// thread's version, third, is skipped.
pub(super) fn parse_read(thread: &str, v: RValue) -> Result<(usize, Vec<u8>, Vec<RawItem>)> {
    let mut parts = arr(v)?.into_iter();
    let examined = int_of(&parts.next().ok_or_else(bad_reply)?)?;
    let last = bytes_of(parts.next().ok_or_else(bad_reply)?)?;
    let _version = parts.next().ok_or_else(bad_reply)?;
    let items = parts.map(|p| parse_item(thread, p)).collect::<Result<Vec<_>>>()?;
    Ok((usize::try_from(examined).unwrap_or(0), last, items))
}

/// The parts of a checkpoint record: has parent, parent, checkpoint tag and
/// bytes, metadata tag and bytes.
pub(super) const RECORD_PARTS: usize = 6;
/// The parts of a stored write: task id, task path, channel, tag, bytes.
const WRITE_PARTS: usize = 5;
/// The tag of a version whose channel holds no value.
pub(super) const EMPTY: &[u8] = b"empty";

impl Redis {
    /// A checkpoint as stored: its record (`B:ck`), the blob fields its
    /// versions name (`B:cf`, in order), and the values to store by field
    /// (`B:bl`, without the namespace): each value of a versioned channel,
    /// or the `empty` tag for a version `new` says was written without one.
    /// Values are stored by (channel, version), once; the record keeps only
    /// values whose channel has no version.
    #[allow(clippy::type_complexity)]
    pub(super) fn encode_checkpoint(
        &self,
        parent_id: Option<&str>,
        checkpoint: &Checkpoint,
        values: Values<'_>,
        metadata: &CheckpointMetadata,
        new: impl Fn(&str) -> bool,
    ) -> Result<(Vec<u8>, Vec<String>, Vec<(String, Vec<u8>)>)> {
        let mut fields = Vec::with_capacity(checkpoint.channel_versions.len());
        let mut blobs: Vec<(String, Vec<u8>)> = Vec::new();
        for (channel, version) in &checkpoint.channel_versions {
            let field = blob_field(channel, &escape(&version.to_string()));
            if let Some(value) = values.get(channel) {
                let TypedBytes { tag, data } = value.typed(self.serde.as_ref())?;
                blobs.push((field.clone(), pack(&[tag.as_bytes(), &data])));
            } else if new(channel) {
                blobs.push((field.clone(), pack(&[EMPTY, b""])));
            }
            fields.push(field);
        }
        let skeleton = Checkpoint {
            channel_values: values
                .iter()
                .filter(|(ch, _)| !checkpoint.channel_versions.contains_key(*ch))
                .map(|(k, v)| Ok((k.clone(), v.to_value()?)))
                .collect::<Result<_>>()?,
            ..checkpoint.clone()
        };
        let cp = self.serde.dumps_typed(&skeleton.to_value(true))?;
        let meta = self.serde.dumps_typed(&metadata.to_value())?;
        let record = pack(&[
            if parent_id.is_some() { b"1" } else { b"0" },
            parent_id.unwrap_or("").as_bytes(),
            cp.tag.as_bytes(),
            &cp.data,
            meta.tag.as_bytes(),
            &meta.data,
        ]);
        Ok((record, fields, blobs))
    }

    /// Decodes a stored checkpoint record: (parent, checkpoint without the
    /// values kept by version, metadata).
    pub(super) fn record(&self, rec: &[u8]) -> Result<(Option<String>, Checkpoint, CheckpointMetadata)> {
        let parts = unpack(rec, RECORD_PARTS)?;
        let parent = (parts[0] == b"1")
            .then(|| keys::text(parts[1], "parent id"))
            .transpose()?;
        let tag = keys::text(parts[2], "type tag")?;
        let checkpoint =
            Checkpoint::from_value(&self.serde.loads_typed_bytes(&tag, &Bytes::copy_from_slice(parts[3]))?)?;
        let metadata = self.metadata(&parts)?;
        Ok((parent, checkpoint, metadata))
    }

    pub(super) fn metadata(&self, parts: &[&[u8]]) -> Result<CheckpointMetadata> {
        let tag = keys::text(parts[4], "metadata tag")?;
        CheckpointMetadata::from_value(&self.serde.loads_typed_bytes(&tag, &Bytes::copy_from_slice(parts[5]))?)
    }

    pub(super) fn decode_item(&self, item: RawItem) -> Result<CheckpointTuple> {
        let (parent, mut checkpoint, metadata) = self.record(&item.rec)?;
        self.decode_values(&mut checkpoint, &item.blobs)?;
        self.tuple(item, parent, checkpoint, metadata)
    }

    /// [`decode_item`](Self::decode_item) as bytes: the checkpoint's stored
    /// values spliced in without being decoded when they can be (see
    /// [`values::checkpoint_msgpack`]; decoded and encoded otherwise), the
    /// writes as stored.
    pub(super) fn encoded_item(&self, item: RawItem) -> Result<EncodedTuple> {
        let (parent, mut checkpoint, metadata) = self.record(&item.rec)?;
        let mut stored: IndexMap<String, Stored<'_>> = checkpoint
            .channel_values
            .iter()
            .map(|(k, v)| (k.clone(), Stored::Value(v)))
            .collect();
        // a blob that does not parse is left to `decode_values`, which
        // refuses it in its turn
        let parts: Option<Vec<_>> = item
            .blobs
            .iter()
            .filter_map(|(field, value)| Some((field, unpack(value.as_ref()?, 2).ok())))
            .filter(|(_, p)| p.as_ref().is_none_or(|p| p[0] != EMPTY))
            .map(|(field, p)| {
                let p = p?;
                Some((field_channel(field).ok()?, keys::text(p[0], "type tag").ok()?, p[1]))
            })
            .collect();
        let spliced = match &parts {
            Some(parts) => {
                for (channel, tag, data) in parts {
                    stored.insert(channel.clone(), Stored::Typed { tag, data });
                }
                let values: Vec<(&str, Stored<'_>)> = stored.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                values::checkpoint_msgpack(self.serde.as_ref(), &checkpoint, &values)?
            }
            None => None,
        };
        drop(stored);
        let checkpoint_bytes = match spliced {
            Some(bytes) => bytes,
            None => {
                self.decode_values(&mut checkpoint, &item.blobs)?;
                JsonPlusSerializer.dumps_typed(&checkpoint.to_value(true))?
            }
        };
        let mut writes = item
            .writes
            .iter()
            .map(|(field, value)| Self::write_key(field, value))
            .collect::<Result<Vec<_>>>()?;
        sort_writes_by(&mut writes, |(task_id, task_path, _, idx, _)| {
            (task_path, task_id, *idx)
        });
        let writes = writes
            .into_iter()
            .map(|(task_id, _, channel, _, typed)| {
                Ok(EncodedWrite {
                    task_id,
                    channel,
                    value: values::stored_payload(self.serde.as_ref(), typed.tag, typed.data)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(EncodedTuple {
            thread_id: item.thread,
            checkpoint_ns: item.ns,
            checkpoint_id: item.id,
            parent_checkpoint_id: parent,
            checkpoint: checkpoint_bytes,
            metadata: metadata_msgpack(&metadata)?,
            writes,
        })
    }

    /// Sets the values of a checkpoint's stored blobs.
    fn decode_values(&self, checkpoint: &mut Checkpoint, blobs: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<()> {
        for (field, value) in blobs {
            let Some(value) = value else { continue };
            let parts = unpack(value, 2)?;
            if parts[0] == EMPTY {
                continue;
            }
            let tag = keys::text(parts[0], "type tag")?;
            let value = self.serde.loads_typed_bytes(&tag, &Bytes::copy_from_slice(parts[1]))?;
            checkpoint.channel_values.insert(field_channel(field)?, value);
        }
        Ok(())
    }

    /// The tuple of an item whose record is read: its writes decoded.
    fn tuple(
        &self,
        item: RawItem,
        parent: Option<String>,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
    ) -> Result<CheckpointTuple> {
        let pending_writes = item
            .writes
            .into_iter()
            .map(|(field, value)| self.decode_write(&field, &value))
            .collect::<Result<Vec<_>>>()?;
        let parent_config = parent.map(|p| {
            CheckpointConfig::new(item.thread.as_str())
                .with_ns(item.ns.as_str())
                .with_checkpoint_id(p)
        });
        Ok(CheckpointTuple {
            config: CheckpointConfig::new(item.thread)
                .with_ns(item.ns)
                .with_checkpoint_id(item.id),
            checkpoint,
            metadata,
            parent_config,
            pending_writes,
        })
    }

    /// A link of a delta history: only the values and writes of `wanted`
    /// channels are decoded (the script sent only their values).
    pub(super) fn decode_link(&self, item: RawItem, wanted: &HashSet<&str>) -> Result<Link> {
        let (_, checkpoint, _) = self.record(&item.rec)?;
        let mut seeds: Vec<(String, Value)> = checkpoint
            .channel_values
            .into_iter()
            .filter(|(ch, _)| wanted.contains(ch.as_str()))
            .collect();
        for (field, value) in item.blobs {
            let Some(value) = value else { continue };
            let parts = unpack(&value, 2)?;
            let channel = field_channel(&field)?;
            if parts[0] == EMPTY || !wanted.contains(channel.as_str()) {
                continue;
            }
            let tag = keys::text(parts[0], "type tag")?;
            seeds.push((
                channel,
                self.serde.loads_typed_bytes(&tag, &Bytes::copy_from_slice(parts[1]))?,
            ));
        }
        let mut writes = Vec::new();
        for (field, value) in item.writes {
            let (task_id, task_path, channel, idx, typed) = Self::write_key(&field, &value)?;
            if wanted.contains(channel.as_str()) {
                writes.push(PendingWrite {
                    value: self.serde.loads_typed_bytes(&typed.tag, &typed.data)?,
                    task_id,
                    channel,
                    task_path,
                    idx,
                });
            }
        }
        Ok(Link { seeds, writes })
    }

    pub(super) fn write_key(field: &[u8], value: &[u8]) -> Result<(String, String, String, i64, TypedBytes)> {
        let parts = unpack(value, WRITE_PARTS)?;
        let idx = std::str::from_utf8(field)
            .ok()
            .and_then(|f| f.rsplit(':').next())
            .and_then(|i| i.parse::<i64>().ok())
            .ok_or_else(|| Error::serde("malformed write field in Redis"))?;
        Ok((
            keys::text(parts[0], "task id")?,
            keys::text(parts[1], "task path")?,
            keys::text(parts[2], "channel")?,
            idx,
            TypedBytes {
                tag: keys::text(parts[3], "type tag")?,
                data: Bytes::copy_from_slice(parts[4]),
            },
        ))
    }

    pub(super) fn decode_write(&self, field: &[u8], value: &[u8]) -> Result<PendingWrite> {
        let (task_id, task_path, channel, idx, typed) = Self::write_key(field, value)?;
        Ok(PendingWrite {
            value: self.serde.loads_typed_bytes(&typed.tag, &typed.data)?,
            task_id,
            channel,
            task_path,
            idx,
        })
    }
}
