//! Encoded reads of the memory store ([`crate::encoded`]): stored payloads
//! handed out as they are, without decoding and encoding them again.

use super::backend::Memory;
use super::store::{Found, Stored};
use crate::encoded::{EncodedTuple, EncodedWrite};
use crate::engine::values::{self, checkpoint_msgpack, stored_payload};
use crate::engine::{decode, sort_writes_by};
use crate::error::Result;
use crate::serde::{JsonPlusSerializer, Serializer, TypedBytes};

impl Memory {
    /// The row as [`EncodedTuple::from_tuple`] makes it of the decoded one,
    /// from what the store holds: the metadata's msgpack as kept; the
    /// checkpoint's msgpack with encoded values spliced in as stored (live
    /// ones encoded); each encoded write as stored (a plaintext one refused
    /// where the serializer refuses plaintext, as decoding it would), live
    /// ones encoded. A checkpoint a value of which cannot be spliced (see
    /// [`checkpoint_msgpack`]) is decoded and encoded instead.
    pub(super) fn encoded(&self, found: Found) -> Result<EncodedTuple> {
        let record = found.record.clone();
        let stored: Vec<(&str, values::Stored<'_>)> = record
            .stored_values()
            .map(|(channel, s)| (channel, as_stored(s)))
            .collect();
        let Some(checkpoint) = checkpoint_msgpack(self.serde.as_ref(), &record.hot()?.skeleton, &stored)? else {
            return EncodedTuple::from_tuple(&decode(self, found)?);
        };
        let mut writes = Vec::new();
        if let Some(set) = &found.writes {
            writes.reserve(set.len());
            for w in set.iter() {
                let value = match &w.value {
                    Stored::Live { value, .. } => JsonPlusSerializer.dumps_typed(value)?,
                    Stored::Encoded { tag, data } => {
                        stored_payload(self.serde.as_ref(), tag.as_str().to_owned(), data.clone())?
                    }
                };
                writes.push((w, value));
            }
        }
        sort_writes_by(&mut writes, |(w, _)| (&w.task_path, &w.task_id, w.idx));
        Ok(EncodedTuple {
            thread_id: found.thread.to_string(),
            checkpoint_ns: found.ns.to_string(),
            checkpoint_id: record.id.to_string(),
            parent_checkpoint_id: record.parent.as_deref().map(str::to_owned),
            checkpoint,
            metadata: TypedBytes::new("msgpack", record.metadata_msgpack().to_vec()),
            writes: writes
                .into_iter()
                .map(|(w, value)| EncodedWrite {
                    task_id: w.task_id.to_string(),
                    channel: w.channel.clone(),
                    value,
                })
                .collect(),
        })
    }
}

fn as_stored(s: &Stored) -> values::Stored<'_> {
    match s {
        Stored::Live { value, .. } => values::Stored::Value(value),
        Stored::Encoded { tag, data } => values::Stored::Typed {
            tag: tag.as_str(),
            data,
        },
    }
}
