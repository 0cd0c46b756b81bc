//! The channel values of a `put`: decoded, or as the bytes a caller encoded
//! them in ([`crate::encoded`]), so that a store keeping each value on its
//! own (Postgres, Redis) stores those bytes without decoding them.

use bytes::Bytes;
use indexmap::IndexMap;

use crate::checkpoint::{ChannelValues, Checkpoint};
use crate::error::Result;
use crate::serde::msgpack::peek;
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
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // PostgreSQL's rows
    pub(crate) fn len(self) -> usize {
        match self {
            Values::Decoded(m) => m.len(),
            Values::Split(m) => m.len(),
        }
    }

    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // PostgreSQL's rows
    pub(crate) fn contains_key(self, channel: &str) -> bool {
        match self {
            Values::Decoded(m) => m.contains_key(channel),
            Values::Split(m) => m.contains_key(channel),
        }
    }

    #[cfg_attr(not(feature = "redis"), allow(dead_code))] // Redis's records
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
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // PostgreSQL's rows
    pub(crate) fn as_value(self) -> Option<&'a Value> {
        match self {
            Slot::Value(v) => Some(v),
            Slot::Msgpack(_) => None,
        }
    }

    /// The value, decoded when it is bytes.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))] // Redis's reads
    pub(crate) fn to_value(self) -> Result<Value> {
        match self {
            Slot::Value(v) => Ok(v.clone()),
            Slot::Msgpack(b) => msgpack::decode_bytes(b),
        }
    }

    /// Whether it is a delta-channel snapshot (msgpack extension 7).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // PostgreSQL's rows
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

/// A channel value of a stored checkpoint, for [`checkpoint_msgpack`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stored<'a> {
    /// Decoded with the checkpoint.
    Value(&'a Value),
    /// A payload as stored (never the `empty` marker).
    Typed { tag: &'a str, data: &'a [u8] },
}

/// The checkpoint [`EncodedTuple::from_tuple`](crate::encoded::EncodedTuple::from_tuple)
/// makes of `skeleton` with these channel values (in this order, each name
/// once), with stored payloads spliced in as they are: the same bytes,
/// without decoding a value. `None` when a payload must be decoded to
/// know them (another tag, bytes not in the canonical form or that would
/// not read back inside a checkpoint, a payload `serde` does not open
/// without decoding, or stores in a form of its own): the caller then
/// decodes the row, which also gives the errors a bad payload deserves.
///
/// # Errors
/// [`crate::Error::Serde`] when a decoded value cannot be encoded.
pub(crate) fn checkpoint_msgpack(
    serde: &dyn Serializer,
    skeleton: &Checkpoint,
    values: &[(&str, Stored<'_>)],
) -> Result<Option<TypedBytes>> {
    let Value::Map(entries) = skeleton.to_value(false) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(256);
    let Some(()) = map_header(&mut out, entries.len() + 1) else {
        return Ok(None);
    };
    let at = entries.len().min(3);
    for (i, (k, v)) in entries.iter().enumerate() {
        if i == at {
            break;
        }
        msgpack::encode_into(k, &mut out)?;
        msgpack::encode_into(v, &mut out)?;
    }
    msgpack::encode_into(&Value::from("channel_values"), &mut out)?;
    let Some(()) = map_header(&mut out, values.len()) else {
        return Ok(None);
    };
    let plaintext_ours = serde.reads_plaintext() && (serde.preserves_values() || serde.encrypts());
    for (name, value) in values {
        msgpack::encode_into(&Value::from(*name), &mut out)?;
        let (tag, data) = match *value {
            Stored::Value(v) => {
                msgpack::encode_into(v, &mut out)?;
                continue;
            }
            Stored::Typed { tag, data } => (tag, data),
        };
        let opened;
        let (tag, data) = if tag.contains('+') {
            match serde.unseal(&TypedBytes::new(tag, Bytes::copy_from_slice(data))) {
                Ok(Some(plain)) => {
                    opened = plain;
                    (opened.tag.as_str(), &opened.data[..])
                }
                _ => return Ok(None),
            }
        } else if plaintext_ours {
            (tag, data)
        } else {
            return Ok(None);
        };
        match tag {
            // a channel value sits two levels down
            "msgpack" if msgpack::is_canonical(data, msgpack::MAX_DEPTH - 2) => out.extend_from_slice(data),
            "bytes" | "bytearray" => {
                let Ok(n) = u32::try_from(data.len()) else {
                    return Ok(None);
                };
                msgpack::bin_header(&mut out, n);
                out.extend_from_slice(data);
            }
            "null" => out.push(0xc0),
            _ => return Ok(None),
        }
    }
    for (k, v) in entries.iter().skip(at) {
        msgpack::encode_into(k, &mut out)?;
        msgpack::encode_into(v, &mut out)?;
    }
    Ok(Some(TypedBytes::new("msgpack", out)))
}

/// A stored payload handed out as it is (a pending write of an encoded
/// read), refused as decoding it would refuse it for being plaintext.
///
/// # Errors
/// [`crate::EncryptionError::PlaintextRefused`] for a plaintext payload when
/// `serde` refuses plaintext.
pub(crate) fn stored_payload(serde: &dyn Serializer, tag: String, data: Bytes) -> Result<TypedBytes> {
    if !serde.reads_plaintext() && !tag.contains('+') {
        return Err(crate::error::EncryptionError::PlaintextRefused { tag }.into());
    }
    Ok(TypedBytes::new(tag, data))
}

/// A msgpack map header of `n` entries, as the encoder writes it; `None`
/// when msgpack cannot frame so many.
fn map_header(out: &mut Vec<u8>, n: usize) -> Option<()> {
    match u32::try_from(n).ok()? {
        n @ 0..=15 => out.push(0x80 | n as u8),
        n @ 16..=0xffff => {
            out.push(0xde);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0xdf);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
    Some(())
}

/// The code of the extension `b` holds, if it is one.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))] // PostgreSQL's rows
fn ext_code(b: &[u8]) -> Option<i8> {
    match peek::header(b)? {
        (peek::Payload::Ext, n) => b.get(n).map(|&c| c as i8),
        _ => None,
    }
}

/// Where the contents of the binary `b` holds lie, if it is one.
fn bin_contents(b: &[u8]) -> Option<std::ops::Range<usize>> {
    match peek::header(b)? {
        (peek::Payload::Bin, n) => (n <= b.len()).then_some(n..b.len()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
