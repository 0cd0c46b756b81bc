//! The channel values of a `put`: decoded, or as the bytes a caller encoded
//! them in ([`crate::encoded`]), so that a store keeping each value on its
//! own (Postgres, Redis) stores those bytes without decoding them.

use bytes::Bytes;
use indexmap::IndexMap;

use crate::checkpoint::ChannelValues;
use crate::error::Result;
use crate::serde::{msgpack, ExtKind, Serializer, TypedBytes, Value};

/// A channel value split out of a caller's checkpoint bytes.
#[derive(Debug, Clone)]
pub(crate) enum SplitValue {
    /// A scalar, or bytes not in the canonical form: decoded (cheap, or
    /// needed to store what `put` would).
    Value(Value),
    /// The canonical msgpack of a list, map, extension or binary: stored
    /// as it is.
    Msgpack(Bytes),
}

impl SplitValue {
    /// `bytes` (one msgpack value, checked) as it is best kept.
    pub(crate) fn new(bytes: msgpack::ValueBytes) -> Result<SplitValue> {
        let container = matches!(
            bytes.bytes.first(),
            Some(0x80..=0x9f | 0xdc..=0xdf | 0xc4..=0xc9 | 0xd4..=0xd8)
        );
        if container && bytes.canonical {
            return Ok(SplitValue::Msgpack(bytes.bytes));
        }
        Ok(SplitValue::Value(msgpack::decode_bytes(&bytes.bytes)?))
    }
}

/// The channel values of a checkpoint split out of its bytes, by name.
pub(crate) type SplitValues = IndexMap<String, SplitValue>;

/// Where a `put`'s channel values are: in its decoded checkpoint, or split
/// from the caller's bytes (its checkpoint then holds none).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Values<'a> {
    Decoded(&'a ChannelValues),
    Split(&'a SplitValues),
}

/// One channel value of [`Values`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slot<'a> {
    Value(&'a Value),
    /// Canonical msgpack of a list, map, extension or binary.
    Msgpack(&'a Bytes),
}

impl<'a> Values<'a> {
    pub(crate) fn len(self) -> usize {
        match self {
            Values::Decoded(m) => m.len(),
            Values::Split(m) => m.len(),
        }
    }

    pub(crate) fn contains_key(self, channel: &str) -> bool {
        match self {
            Values::Decoded(m) => m.contains_key(channel),
            Values::Split(m) => m.contains_key(channel),
        }
    }

    pub(crate) fn get(self, channel: &str) -> Option<Slot<'a>> {
        match self {
            Values::Decoded(m) => m.get(channel).map(Slot::Value),
            Values::Split(m) => m.get(channel).map(Slot::of),
        }
    }

    /// The values in order.
    pub(crate) fn iter(self) -> impl Iterator<Item = (&'a String, Slot<'a>)> {
        let (decoded, split) = match self {
            Values::Decoded(m) => (Some(m.iter().map(|(k, v)| (k, Slot::Value(v)))), None),
            Values::Split(m) => (None, Some(m.iter().map(|(k, v)| (k, Slot::of(v))))),
        };
        decoded.into_iter().flatten().chain(split.into_iter().flatten())
    }
}

impl<'a> Slot<'a> {
    fn of(value: &'a SplitValue) -> Slot<'a> {
        match value {
            SplitValue::Value(v) => Slot::Value(v),
            SplitValue::Msgpack(b) => Slot::Msgpack(b),
        }
    }

    /// The value when it is at hand without decoding.
    pub(crate) fn as_value(self) -> Option<&'a Value> {
        match self {
            Slot::Value(v) => Some(v),
            Slot::Msgpack(_) => None,
        }
    }

    /// The value, decoded when it is bytes.
    pub(crate) fn to_value(self) -> Result<Value> {
        match self {
            Slot::Value(v) => Ok(v.clone()),
            Slot::Msgpack(b) => msgpack::decode_bytes(b),
        }
    }

    /// Whether it is a delta-channel snapshot (msgpack extension 7).
    pub(crate) fn is_delta_snapshot(self) -> bool {
        match self {
            Slot::Value(Value::Ext(e)) => e.kind() == ExtKind::DeltaSnapshot,
            Slot::Value(_) => false,
            Slot::Msgpack(b) => ext_code(b).is_some_and(|code| ExtKind::from_code(code) == ExtKind::DeltaSnapshot),
        }
    }

    /// What `serde` stores for it: `dumps_typed` of a value; for bytes, the
    /// payload `JsonPlusSerializer` makes of the value they hold (the bytes
    /// themselves, or a binary's contents under `bytes`), sealed.
    pub(crate) fn typed(self, serde: &dyn Serializer) -> Result<TypedBytes> {
        match self {
            Slot::Value(v) => serde.dumps_typed(v),
            Slot::Msgpack(b) => serde.seal(match bin_contents(b) {
                Some(range) => TypedBytes::new("bytes", b.slice(range)),
                None => TypedBytes::new("msgpack", b.clone()),
            }),
        }
    }
}

/// The code of the extension `b` holds, if it is one.
fn ext_code(b: &[u8]) -> Option<i8> {
    let at = match *b.first()? {
        0xd4..=0xd8 => 1,
        0xc7 => 2,
        0xc8 => 3,
        0xc9 => 5,
        _ => return None,
    };
    b.get(at).map(|&c| c as i8)
}

/// Where the contents of the binary `b` holds lie, if it is one.
fn bin_contents(b: &[u8]) -> Option<std::ops::Range<usize>> {
    let header = match *b.first()? {
        0xc4 => 2,
        0xc5 => 3,
        0xc6 => 5,
        _ => return None,
    };
    (header <= b.len()).then_some(header..b.len())
}

#[cfg(test)]
mod tests;
