//! The `Serializer` trait and LangGraph's default serializer.

use std::fmt;

use bytes::Bytes;

use super::{json, msgpack, Value};
use crate::error::{Error, Result};

/// A serialized value with its type tag, as stored next to each other in every
/// backend (see `docs/design.md`, *Serialized values*).
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
///
/// # Wrapping a serializer
///
/// [`encrypts`](Self::encrypts), [`reads_plaintext`](Self::reads_plaintext)
/// and [`preserves_values`](Self::preserves_values) tell a saver what the
/// stored bytes are, so a wrapper answers all three for the bytes *it*
/// stores. A wrapper that transforms the bytes (encrypts, compresses,
/// retags them) answers for its own output, whatever its inner serializer
/// says: `EncryptedSerializer` encrypts, reads plaintext only when
/// `allow_plaintext` is set, and never preserves values. A wrapper that
/// stores its inner serializer's bytes unchanged (to count, record or log
/// them) forwards all three, so wrapping an encrypting serializer never
/// lets a saver keep values in plaintext, and wrapping a preserving one
/// costs nothing.
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

    /// [`loads_typed`](Self::loads_typed) of a shared buffer (a row a saver
    /// read): a serializer that can may hand out parts of `data` in the
    /// result instead of copies (`JsonPlusSerializer` does, through
    /// [`msgpack::decode_bytes`](crate::serde::msgpack::decode_bytes)).
    /// Savers call this one.
    ///
    /// Default: `self.loads_typed(tag, data)`, which is always correct. A
    /// wrapper that stores its inner serializer's bytes unchanged forwards
    /// this too, so that its reads stay zero-copy.
    ///
    /// # Errors
    /// As [`loads_typed`](Self::loads_typed).
    fn loads_typed_bytes(&self, tag: &str, data: &Bytes) -> Result<Value> {
        self.loads_typed(tag, data)
    }

    /// Whether the payloads this serializer stores are encrypted (see
    /// `EncryptedSerializer`, feature `encryption`). A saver that can keep
    /// values outside the serializer (Postgres keeps primitive channel values
    /// inline in its JSONB, as Python does) must then route every value
    /// through the serializer, so that nothing is stored in plaintext.
    /// Default: `false`. Wrappers: see [the trait docs](Serializer#wrapping-a-serializer).
    fn encrypts(&self) -> bool {
        false
    }

    /// Whether [`loads_typed`](Self::loads_typed) reads payloads stored
    /// without encryption. A saver that keeps values outside the serializer
    /// (the primitive channel values Postgres keeps inline in its JSONB, as
    /// Python does) asks this before handing such a value out: when it is
    /// `false`, an inline value is refused with
    /// [`EncryptionError::PlaintextRefused`](crate::EncryptionError::PlaintextRefused),
    /// exactly as `loads_typed` refuses a plaintext payload.
    ///
    /// Default: `!self.encrypts()`, so a wrapper that forwards only
    /// [`encrypts`](Self::encrypts) fails closed. Wrappers: see
    /// [the trait docs](Serializer#wrapping-a-serializer).
    fn reads_plaintext(&self) -> bool {
        !self.encrypts()
    }

    /// What this serializer stores for a value another serializer encoded
    /// as `plain` (a caller's encoded I/O, see [`crate::encoded`]): a
    /// payload already sealed (`+<cipher>` in its tag) or a serializer that
    /// does not encrypt keeps it untouched; an encrypting one seals it.
    /// Default: untouched, or decoded and stored again when
    /// [`encrypts`](Self::encrypts) (always correct; an encrypting
    /// serializer seals the bytes directly instead).
    ///
    /// # Errors
    /// [`Error::Serde`] when `plain` cannot be read, or sealing fails.
    fn seal(&self, plain: TypedBytes) -> Result<TypedBytes> {
        if !self.encrypts() || plain.tag.contains('+') {
            return Ok(plain);
        }
        self.dumps_typed(&self.loads_typed_bytes(&plain.tag, &plain.data)?)
    }

    /// `sealed`, a payload this serializer stores (`+<cipher>` in its tag),
    /// opened without decoding the value: the inner serializer's tag and
    /// bytes, as [`seal`](Self::seal) was given them. `None` when this
    /// serializer cannot (the caller decodes the payload with
    /// [`loads_typed`](Self::loads_typed) instead). A saver that splits a
    /// caller's checkpoint into per-channel payloads opens it once with
    /// this, then seals each part. Default: `None`.
    ///
    /// # Errors
    /// As [`loads_typed`](Self::loads_typed) for a payload it cannot open
    /// (an unknown cipher, a failed decryption).
    fn unseal(&self, sealed: &TypedBytes) -> Result<Option<TypedBytes>> {
        let _ = sealed;
        Ok(None)
    }

    /// Whether the stored bytes are the value and nothing else: no cipher, no
    /// other transformation, and `loads_typed(dumps_typed(v))` is `v` itself
    /// for every value `dumps_typed` accepts. A saver that holds values in
    /// memory may then keep the [`Value`] as given instead of its bytes,
    /// sharing it rather than encoding and decoding it, and need not call the
    /// serializer at all (`InMemorySaver` does). `false` is always safe.
    /// Default: `false`. Wrappers: see [the trait docs](Serializer#wrapping-a-serializer).
    fn preserves_values(&self) -> bool {
        false
    }
}

/// LangGraph's default serializer, Python's `JsonPlusSerializer`.
///
/// | value | tag | payload |
/// |---|---|---|
/// | [`Value::Nil`] | `null` | empty |
/// | top-level [`Value::Bin`] | `bytes` | the bytes themselves |
/// | anything else | `msgpack` | [`msgpack::encode`](crate::serde::msgpack::encode) |
///
/// Reading accepts `null`, `bytes`, `bytearray` (as [`Value::Bin`]),
/// `msgpack`, the legacy `json` tag and the `empty` storage marker:
///
/// * `json` is parsed into plain data by
///   [`json::from_json`](crate::serde::json::from_json). Python revives
///   LangChain `{"lc": 1|2, "type": "constructor", …}` envelopes into objects;
///   here they stay plain maps, since nothing is ever constructed.
/// * `empty` means "this channel version has no value". Savers check
///   [`TypedBytes::is_empty_marker`] and treat it as absence *before* calling
///   `loads_typed`; if it does reach `loads_typed` it reads as [`Value::Nil`].
///
/// Every other tag is refused, including `pickle` (Python-only, opaque) and
/// tags with a `+<cipher>` suffix, which only a wrapping encrypting serializer
/// can read.
///
/// ```
/// use checkpointer::serde::{JsonPlusSerializer, Serializer};
/// use checkpointer::Value;
/// let serde = JsonPlusSerializer;
/// let typed = serde.dumps_typed(&Value::from("hello")).unwrap();
/// assert_eq!(typed.tag, "msgpack");
/// assert_eq!(&typed.data[..], b"\xa5hello");
/// assert_eq!(serde.loads_typed(&typed.tag, &typed.data).unwrap(), Value::from("hello"));
/// assert_eq!(serde.dumps_typed(&Value::Nil).unwrap().tag, "null");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonPlusSerializer;

impl Serializer for JsonPlusSerializer {
    fn dumps_typed(&self, value: &Value) -> Result<TypedBytes> {
        Ok(match value {
            Value::Nil => TypedBytes::new("null", Bytes::new()),
            Value::Bin(b) => TypedBytes::new("bytes", b.clone()),
            other => TypedBytes::new("msgpack", msgpack::encode(other)?),
        })
    }

    fn preserves_values(&self) -> bool {
        true
    }

    fn loads_typed_bytes(&self, tag: &str, data: &Bytes) -> Result<Value> {
        match tag {
            "bytes" | "bytearray" => Ok(Value::Bin(data.clone())),
            "msgpack" => msgpack::decode_bytes(data),
            _ => self.loads_typed(tag, data),
        }
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> Result<Value> {
        match tag {
            "null" | "empty" => Ok(Value::Nil),
            "bytes" | "bytearray" => Ok(Value::Bin(Bytes::copy_from_slice(data))),
            "msgpack" => msgpack::decode(data),
            "json" => json::from_json(data),
            other => Err(Error::serde(format!("unknown serialization type {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_without_codec() {
        let s = JsonPlusSerializer;
        assert_eq!(
            s.dumps_typed(&Value::Nil).unwrap(),
            TypedBytes::new("null", Bytes::new())
        );
        let abc = Value::Bin(Bytes::from_static(b"abc"));
        assert_eq!(
            s.dumps_typed(&abc).unwrap(),
            TypedBytes::new("bytes", Bytes::from_static(b"abc"))
        );
        assert_eq!(s.loads_typed("null", b"").unwrap(), Value::Nil);
        assert_eq!(s.loads_typed("empty", b"").unwrap(), Value::Nil);
        assert_eq!(s.loads_typed("bytes", b"abc").unwrap(), abc);
        assert_eq!(
            s.loads_typed("bytearray", b"ab").unwrap(),
            Value::Bin(Bytes::from_static(b"ab"))
        );
        assert_eq!(
            s.loads_typed("json", br#"{"a": [1, 2.0]}"#).unwrap(),
            Value::map([("a", Value::Array(vec![Value::Int(1), Value::Float(2.0)].into()))])
        );
        assert!(matches!(s.loads_typed("json", b"{"), Err(Error::Serde { .. })));
    }

    #[test]
    fn loads_typed_bytes_reads_as_loads_typed_and_shares_the_buffer() {
        let s = JsonPlusSerializer;
        let long = Value::from(vec![Value::from("x".repeat(300)), Value::Int(1)]);
        for value in [
            long,
            Value::Nil,
            Value::Bin(Bytes::from_static(b"abc")),
            Value::from("short"),
        ] {
            let typed = s.dumps_typed(&value).unwrap();
            assert_eq!(s.loads_typed_bytes(&typed.tag, &typed.data).unwrap(), value);
            assert_eq!(s.loads_typed(&typed.tag, &typed.data).unwrap(), value);
        }
        let row = Bytes::from_static(b"raw bytes");
        let Value::Bin(bin) = s.loads_typed_bytes("bytearray", &row).unwrap() else {
            panic!()
        };
        assert_eq!(bin.as_ptr(), row.as_ptr());
        assert!(s.loads_typed_bytes("json", &Bytes::from_static(b"[1]")).is_ok());
        assert!(s.loads_typed_bytes("pickle", &row).is_err());
    }

    #[test]
    fn unknown_tags_are_refused() {
        let s = JsonPlusSerializer;
        for tag in ["pickle", "msgpack+aes", "null+aes", "", "MSGPACK", "str"] {
            match s.loads_typed(tag, b"\x01") {
                Err(Error::Serde { reason }) => assert!(reason.contains("unknown serialization type"), "{reason}"),
                other => panic!("{tag}: {other:?}"),
            }
        }
    }
}
