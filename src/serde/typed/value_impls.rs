//! `Serialize` and `Deserialize` for [`Value`] itself.

use std::cell::RefCell;
use std::fmt;

use ::serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use ::serde::ser::{self, Serialize};
use ::serde::{Deserialize, Deserializer};
use bytes::Bytes;

use super::level::ValueLevel;
use super::{EXT_TOKEN, F32_TOKEN};
use crate::error::{Error, Result};
use crate::serde::msgpack_codec::encode;
use crate::serde::value::{Ext, ExtPayload, Value};

impl Serialize for Value {
    fn serialize<S: ser::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Value::Nil => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::UInt(u) => s.serialize_u64(*u),
            Value::F32(f) => s.serialize_newtype_struct(F32_TOKEN, f),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Str(v) => s.serialize_str(v),
            Value::Bin(b) => s.serialize_bytes(b),
            Value::Array(items) => {
                let _level = ValueLevel::enter().map_err(ser::Error::custom)?;
                s.collect_seq(items)
            }
            Value::Map(entries) => {
                use ser::SerializeMap;
                let _level = ValueLevel::enter().map_err(ser::Error::custom)?;
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Value::Ext(ext) => {
                let _level = ValueLevel::enter().map_err(ser::Error::custom)?;
                s.serialize_newtype_struct(EXT_TOKEN, &ExtRepr(ext))
            }
        }
    }
}

thread_local! {
    /// Hand-over of an extension from `ExtRepr::serialize` to the bridge's
    /// serializer, which asked for it right before (see `ValueSerializer`).
    pub(super) static CAPTURE: RefCell<Capture> = const { RefCell::new(Capture::Idle) };
}

pub(super) enum Capture {
    Idle,
    Requested,
    Filled(Ext),
}

/// How an extension presents itself to serde: to the bridge it hands itself
/// over whole; to any other format it is the pair `(code, payload bytes)`.
struct ExtRepr<'a>(&'a Ext);

impl Serialize for ExtRepr<'_> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let captured = CAPTURE.with(|c| {
            let mut c = c.borrow_mut();
            if matches!(*c, Capture::Requested) {
                *c = Capture::Filled(self.0.clone());
                true
            } else {
                false
            }
        });
        if captured {
            return s.serialize_unit();
        }
        use ser::SerializeTuple;
        let payload: Bytes = match &self.0.payload {
            ExtPayload::Raw(raw) => raw.clone(),
            ExtPayload::Decoded(inner) => encode(inner).map_err(ser::Error::custom)?.into(),
        };
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&self.0.code)?;
        t.serialize_element(&BytesRepr(&payload))?;
        t.end()
    }
}

struct BytesRepr<'a>(&'a [u8]);

impl Serialize for BytesRepr<'_> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any msgpack value")
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> std::result::Result<Value, E> {
        int128(v).map_err(E::custom)
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> std::result::Result<Value, E> {
        uint128(v).map_err(E::custom)
    }

    fn visit_f32<E>(self, v: f32) -> std::result::Result<Value, E> {
        Ok(Value::F32(v))
    }

    fn visit_f64<E>(self, v: f64) -> std::result::Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_char<E>(self, v: char) -> std::result::Result<Value, E> {
        Ok(Value::Str(v.into()))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Value, E> {
        Ok(Value::Str(v.into()))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<Value, E> {
        Ok(Value::Str(v.into()))
    }

    fn visit_bytes<E>(self, v: &[u8]) -> std::result::Result<Value, E> {
        Ok(Value::Bin(Bytes::copy_from_slice(v)))
    }

    fn visit_byte_buf<E>(self, v: Vec<u8>) -> std::result::Result<Value, E> {
        Ok(Value::Bin(Bytes::from(v)))
    }

    fn visit_none<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        // A format may nest `Some`s without bound: each counts as a level.
        let _level = ValueLevel::enter().map_err(de::Error::custom)?;
        Value::deserialize(d)
    }

    /// The bridge presents an extension as a newtype struct around
    /// `(code, payload)`; the payload is itself a newtype around the decoded
    /// value, or bytes.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        let _level = ValueLevel::enter().map_err(de::Error::custom)?;
        d.deserialize_tuple(2, ExtVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let _level = ValueLevel::enter().map_err(de::Error::custom)?;
        Ok(Value::Array(collect(seq.size_hint(), || seq.next_element())?.into()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
        let _level = ValueLevel::enter().map_err(de::Error::custom)?;
        Ok(Value::Map(collect(map.size_hint(), || map.next_entry())?.into()))
    }
}

/// The elements `next` yields until it has none; the format's size hint is
/// trusted only up to 4096 elements.
fn collect<T, E>(
    size_hint: Option<usize>,
    mut next: impl FnMut() -> std::result::Result<Option<T>, E>,
) -> std::result::Result<Vec<T>, E> {
    let mut items = Vec::with_capacity(size_hint.unwrap_or(0).min(4096));
    while let Some(item) = next()? {
        items.push(item);
    }
    Ok(items)
}

struct ExtVisitor;

impl<'de> Visitor<'de> for ExtVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an extension (code, payload)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let code: i8 = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let payload = seq
            .next_element_seed(PayloadSeed { code })?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok(Value::Ext(Box::new(Ext { code, payload })))
    }
}

struct PayloadSeed {
    code: i8,
}

impl<'de> DeserializeSeed<'de> for PayloadSeed {
    type Value = ExtPayload;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<ExtPayload, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PayloadSeed {
    type Value = ExtPayload;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an extension payload")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> std::result::Result<ExtPayload, D::Error> {
        Ok(ExtPayload::Decoded(Box::new(Value::deserialize(d)?)))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> std::result::Result<ExtPayload, E> {
        Ok(Ext::raw(self.code, Bytes::copy_from_slice(v)).into_parts().1)
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> std::result::Result<ExtPayload, E> {
        Ok(Ext::raw(self.code, Bytes::from(v)).into_parts().1)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<ExtPayload, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element::<u8>()? {
            bytes.push(b);
        }
        Ok(Ext::raw(self.code, Bytes::from(bytes)).into_parts().1)
    }
}

/// Undoes what another serde format makes of an extension: the pair
/// `[code, payload bytes]` (bytes as bin or as an array of small integers)
/// becomes the extension again. Anything else is returned unchanged.
pub(crate) fn ext_from_pair(v: Value) -> Value {
    let Value::Array(items) = &v else { return v };
    let [Value::Int(code), payload] = items.as_slice() else {
        return v;
    };
    let Ok(code) = i8::try_from(*code) else { return v };
    let raw = match payload {
        Value::Bin(b) => b.clone(),
        Value::Array(bytes) => match bytes
            .iter()
            .map(|b| b.as_i64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
        {
            Some(raw) => Bytes::from(raw),
            None => return v,
        },
        _ => return v,
    };
    Value::Ext(Box::new(Ext::raw(code, raw)))
}

pub(super) fn int128(v: i128) -> Result<Value> {
    i64::try_from(v)
        .map(Value::Int)
        .or_else(|_| u64::try_from(v).map(Value::UInt))
        .map_err(|_| outside_msgpack(v))
}

pub(super) fn uint128(v: u128) -> Result<Value> {
    u64::try_from(v).map(Value::from).map_err(|_| outside_msgpack(v))
}

fn outside_msgpack(v: impl fmt::Display) -> Error {
    Error::serde(format!("integer {v} is outside the msgpack range -2^63..2^64-1"))
}
