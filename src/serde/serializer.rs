//! The `Serializer` trait and LangGraph's default serializer.

use std::fmt;

use bytes::Bytes;

use super::Value;
use crate::error::{Error, Result};

/// A serialized value with its type tag, as stored next to each other in every
/// backend (spec §4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedBytes {
    /// `msgpack`, `null`, `bytes`, `bytearray`, `empty`, `json`, or any of
    /// these with a `+<cipher>` suffix.
    pub tag: String,
    /// The payload.
    pub data: Bytes,
}

impl TypedBytes {
    /// Builds a typed payload.
    pub fn new(tag: impl Into<String>, data: impl Into<Bytes>) -> Self {
        TypedBytes {
            tag: tag.into(),
            data: data.into(),
        }
    }

    /// The storage marker for "this channel version has no value".
    pub fn empty() -> Self {
        TypedBytes::new("empty", Bytes::new())
    }

    /// Whether this is the `empty` marker.
    pub fn is_empty_marker(&self) -> bool {
        self.tag == "empty"
    }
}

/// Turns values into (tag, bytes) and back.
///
/// Implementations must be deterministic for a given value except where a
/// cipher adds randomness, and `loads_typed(dumps_typed(v)) == v`.
pub trait Serializer: Send + Sync + fmt::Debug {
    /// Serializes a value.
    ///
    /// # Errors
    /// [`Error::Serde`] when the value cannot be encoded.
    fn dumps_typed(&self, value: &Value) -> Result<TypedBytes>;

    /// Deserializes a tagged payload.
    ///
    /// # Errors
    /// [`Error::Serde`] for unknown tags and malformed payloads.
    fn loads_typed(&self, tag: &str, data: &[u8]) -> Result<Value>;
}

/// LangGraph's default serializer (`JsonPlusSerializer`): `null` for nil,
/// `bytes` for top-level bytes, `msgpack` for everything else; reads
/// `bytearray` and the legacy `json` tag too.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonPlusSerializer;

impl Serializer for JsonPlusSerializer {
    fn dumps_typed(&self, value: &Value) -> Result<TypedBytes> {
        Ok(match value {
            Value::Nil => TypedBytes::new("null", Bytes::new()),
            Value::Bin(b) => TypedBytes::new("bytes", b.clone()),
            other => TypedBytes::new("msgpack", super::msgpack::encode(other)?),
        })
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> Result<Value> {
        match tag {
            "null" | "empty" => Ok(Value::Nil),
            "bytes" | "bytearray" => Ok(Value::Bin(Bytes::copy_from_slice(data))),
            "msgpack" => super::msgpack::decode(data),
            other => Err(Error::serde(format!("unknown serialization type {other:?}"))),
        }
    }
}
