//! Conversions between what Python hands over (msgpack payloads, the
//! serializer's `(tag, bytes)` pairs) and the crate's types, and back.

use bytes::Bytes;
use checkpointer::encoded::EncodedTuple;
use checkpointer::serde::{msgpack, TypedBytes, Value};
use checkpointer::{ChannelVersion, ChannelVersions, CheckpointConfig, Error, ListOptions, PendingWrite};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::runtime::Result;

/// A msgpack payload for Python (`bytes`).
pub(crate) struct Packed(Vec<u8>);

impl<'py> IntoPyObject<'py> for Packed {
    type Target = PyBytes;
    type Output = Bound<'py, PyBytes>;
    type Error = std::convert::Infallible;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyBytes::new(py, &self.0))
    }
}

pub(crate) fn pack(value: &Value) -> Result<Packed> {
    msgpack::encode(value).map(Packed)
}

fn unpack(payload: &[u8]) -> Result<Value> {
    msgpack::decode_bytes(&Bytes::copy_from_slice(payload))
}

/// The channel versions of `msgpack({channel: version})` (`None`: none).
pub(crate) fn versions(value: &Value) -> Result<ChannelVersions> {
    let entries = match value {
        Value::Nil => return Ok(ChannelVersions::default()),
        other => other
            .as_map()
            .ok_or_else(|| Error::invalid("new_versions is not a dict"))?,
    };
    entries
        .iter()
        .map(|(k, v)| {
            let key = k
                .as_str()
                .ok_or_else(|| Error::invalid("new_versions has a key that is not a str"))?;
            let version = ChannelVersion::from_value(v)
                .ok_or_else(|| Error::invalid(format!("new_versions[{key:?}] is not a str or int version")))?;
            Ok((key.to_owned(), version))
        })
        .collect()
}

/// Writes as Python's serializer encoded them: `[(channel, tag, bytes)]`.
pub(crate) fn encoded_writes(writes: Vec<(String, String, Vec<u8>)>) -> Vec<(String, TypedBytes)> {
    writes
        .into_iter()
        .map(|(channel, tag, data)| (channel, TypedBytes::new(tag, data)))
        .collect()
}

/// A pending write for Python: `(task_id, channel, msgpack(value))`.
pub(crate) struct PackedWrite(String, String, Packed);

pub(crate) fn packed_write(w: &PendingWrite) -> Result<PackedWrite> {
    Ok(PackedWrite(w.task_id.clone(), w.channel.clone(), pack(&w.value)?))
}

impl<'py> IntoPyObject<'py> for PackedWrite {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        (self.0, self.1, self.2).into_pyobject(py)
    }
}

/// One channel's delta history for Python: `([(task, channel,
/// msgpack(value))], msgpack(seed) | None)`.
pub(crate) struct PackedHistory(pub(crate) Vec<PackedWrite>, pub(crate) Option<Packed>);

impl<'py> IntoPyObject<'py> for PackedHistory {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        (self.0, self.1).into_pyobject(py)
    }
}

/// Encoded tuples for Python: each `(thread_id, ns, id, parent | None, tag,
/// checkpoint bytes, metadata tag, metadata bytes, [(task_id, channel, tag,
/// value bytes)])`, decoded by the saver's serializer on the Python side as
/// Python's own savers decode their rows (metadata tagged `json` is JSON
/// text, empty when there is none).
pub(crate) struct Rows(pub(crate) Vec<EncodedTuple>);

fn row<'py>(py: Python<'py>, t: EncodedTuple) -> PyResult<Bound<'py, PyAny>> {
    let writes = t
        .writes
        .into_iter()
        .map(|w| (w.task_id, w.channel, w.value.tag, PyBytes::new(py, &w.value.data)).into_pyobject(py))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((
        t.thread_id,
        t.checkpoint_ns,
        t.checkpoint_id,
        t.parent_checkpoint_id,
        t.checkpoint.tag,
        PyBytes::new(py, &t.checkpoint.data),
        t.metadata.tag,
        PyBytes::new(py, &t.metadata.data),
        writes,
    )
        .into_pyobject(py)?
        .into_any())
}

impl<'py> IntoPyObject<'py> for Rows {
    type Target = PyList;
    type Output = Bound<'py, PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        let rows = self.0.into_iter().map(|t| row(py, t)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, rows)
    }
}

/// A checkpoint as Python names it: `(thread_id, checkpoint_ns,
/// checkpoint_id | None)` (no id: the latest; for `put`, the parent).
#[derive(FromPyObject)]
pub(crate) struct At(String, String, Option<String>);

impl At {
    pub(crate) fn config(self) -> CheckpointConfig {
        let At(thread_id, ns, checkpoint_id) = self;
        let mut config = CheckpointConfig::new(thread_id).with_ns(ns);
        config.checkpoint_id = checkpoint_id;
        config
    }
}

/// A listing as Python asks for it: `(thread_id | None, checkpoint_ns |
/// None, checkpoint_id | None, msgpack(filter) | None, before | None,
/// limit | None)`; no thread lists every thread, no namespace every
/// namespace.
#[derive(FromPyObject)]
pub(crate) struct ListQuery<'py>(
    Option<String>,
    Option<String>,
    Option<String>,
    Option<Bound<'py, PyBytes>>,
    Option<String>,
    Option<usize>,
);

impl ListQuery<'_> {
    /// The listing's config and options.
    pub(crate) fn into_parts(self) -> Result<(Option<CheckpointConfig>, ListOptions)> {
        let ListQuery(thread_id, checkpoint_ns, checkpoint_id, filter, before, limit) = self;
        let mut options = ListOptions {
            before,
            limit,
            ..ListOptions::default()
        };
        if let Some(filter) = filter {
            let value = unpack(filter.as_bytes())?;
            let entries = value
                .as_map()
                .ok_or_else(|| Error::invalid("the filter is not a dict"))?;
            for (k, v) in entries {
                let key = k
                    .as_str()
                    .ok_or_else(|| Error::invalid("the filter has a key that is not a str"))?;
                options.filter.insert(key.to_owned(), v.clone());
            }
        }
        let config = thread_id.map(|thread_id| CheckpointConfig {
            thread_id,
            checkpoint_ns,
            checkpoint_id,
        });
        Ok((config, options))
    }
}
