//! Encoding: the canonical form ormsgpack writes.

use rmp::encode::{self as write, ByteBuf};
use rmp::Marker;

use super::{deeper, len32, payload_too_deep, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::serde::value::{ExtPayload, Value};

/// Encodes a value exactly as Python's serializer would.
///
/// ```
/// use checkpointer::serde::{msgpack, Value};
/// let v = Value::map([("a", Value::Int(1)), ("b", Value::Array(vec![Value::Bool(true), Value::Nil].into()))]);
/// assert_eq!(msgpack::encode(&v).unwrap(), [0x82, 0xa1, 0x61, 0x01, 0xa1, 0x62, 0x92, 0xc3, 0xc0]);
/// ```
///
/// # Errors
/// [`Error::Serde`] when a string, binary, array, map or extension is longer
/// than msgpack can frame (4 GiB), and when arrays, maps and extension
/// values nest deeper than [`MAX_DEPTH`]: [`decode`](fn@super::decode) would refuse the bytes,
/// so a value that could not be read back is never written.
pub fn encode(value: &Value) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    encode_into(value, &mut out)?;
    Ok(out)
}

/// Appends the encoding of `value` to `out`.
///
/// # Errors
/// As [`encode`].
pub fn encode_into(value: &Value, out: &mut Vec<u8>) -> Result<()> {
    let mut buf = ByteBuf::from_vec(std::mem::take(out));
    let written = encode_at(value, &mut buf, 0);
    *out = buf.into_vec();
    written
}

// Markers and lengths are written by `rmp` into a `ByteBuf`, whose error
// type is uninhabited: `let Ok(_) = ...` cannot fail. `rmp` picks the
// smallest form of every length and integer, and the unsigned forms for
// non-negative integers, as ormsgpack does. The one-byte headers of short
// strings, maps and arrays are pushed here (`fix_len`): `rmp`'s length
// writers are not inlined, and calling them for those cost a quarter more
// instructions per encode (docs/design.md).
fn encode_at(value: &Value, out: &mut ByteBuf, depth: usize) -> Result<()> {
    match value {
        Value::Nil => {
            let Ok(()) = write::write_nil(out);
        }
        Value::Bool(b) => {
            let Ok(()) = write::write_bool(out, *b);
        }
        Value::Int(i) => {
            let Ok(_) = write::write_sint(out, *i);
        }
        Value::UInt(u) => {
            let Ok(_) = write::write_uint(out, *u);
        }
        Value::F32(f) => {
            let Ok(()) = write::write_f32(out, *f);
        }
        Value::Float(f) => {
            let Ok(()) = write::write_f64(out, *f);
        }
        Value::Str(s) => {
            let n = len32(s.len(), "string")?;
            if !fix_len(out, FIXSTR, 32, n) {
                let Ok(_) = write::write_str_len(out, n);
            }
            out.as_mut_vec().extend_from_slice(s.as_bytes());
        }
        Value::Bin(b) => {
            let Ok(_) = write::write_bin_len(out, len32(b.len(), "binary")?);
            out.as_mut_vec().extend_from_slice(b);
        }
        Value::Array(items) => {
            let n = len32(items.len(), "array")?;
            if !fix_len(out, FIXARRAY, 16, n) {
                let Ok(_) = write::write_array_len(out, n);
            }
            let depth = deeper(depth)?;
            for item in items {
                encode_at(item, out, depth)?;
            }
        }
        Value::Map(entries) => {
            let n = len32(entries.len(), "map")?;
            if !fix_len(out, FIXMAP, 16, n) {
                let Ok(_) = write::write_map_len(out, n);
            }
            let depth = deeper(depth)?;
            for (k, v) in entries {
                encode_at(k, out, depth)?;
                encode_at(v, out, depth)?;
            }
        }
        Value::Ext(ext) => {
            let depth = deeper(depth)?;
            match &ext.payload {
                ExtPayload::Raw(raw) => {
                    // The decoder parses the payload of codes 0..=7 and refuses it
                    // when it nests too deep, even where it keeps the raw bytes.
                    if (0..=7).contains(&ext.code) && payload_too_deep(raw, MAX_DEPTH - depth) {
                        return Err(Error::serde(format!(
                            "msgpack: extension payload nests deeper than the limit of {MAX_DEPTH} and could not be read back"
                        )));
                    }
                    write_ext(ext.code, raw, out)?;
                }
                ExtPayload::Decoded(inner) => {
                    let mut payload = ByteBuf::with_capacity(64);
                    encode_at(inner, &mut payload, depth)?;
                    write_ext(ext.code, payload.as_slice(), out)?;
                }
            }
        }
    }
    Ok(())
}

const FIXSTR: u8 = Marker::FixStr(0).to_u8();
const FIXMAP: u8 = Marker::FixMap(0).to_u8();
const FIXARRAY: u8 = Marker::FixArray(0).to_u8();

/// Appends to `out` the header of a string of `n` bytes, in the form
/// [`encode`] writes.
pub(crate) fn str_header(out: &mut Vec<u8>, n: u32) {
    on_vec(out, |buf| {
        let Ok(_) = write::write_str_len(buf, n);
    });
}

/// Appends to `out` the header of a binary of `n` bytes, in the form
/// [`encode`] writes.
#[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))] // their split values
pub(crate) fn bin_header(out: &mut Vec<u8>, n: u32) {
    on_vec(out, |buf| {
        let Ok(_) = write::write_bin_len(buf, n);
    });
}

/// Appends to `out` the header of a map of `n` entries, in the form
/// [`encode`] writes.
pub(crate) fn map_header(out: &mut Vec<u8>, n: u32) {
    on_vec(out, |buf| {
        let Ok(_) = write::write_map_len(buf, n);
    });
}

/// Runs `write` on `out` as a `ByteBuf`, whose writes cannot fail.
fn on_vec(out: &mut Vec<u8>, write: impl FnOnce(&mut ByteBuf)) {
    let mut buf = ByteBuf::from_vec(std::mem::take(out));
    write(&mut buf);
    *out = buf.into_vec();
}

/// Writes the one-byte header `fix | n` when `n` is below `limit`.
#[inline]
fn fix_len(out: &mut ByteBuf, fix: u8, limit: u32, n: u32) -> bool {
    if n >= limit {
        return false;
    }
    out.as_mut_vec().push(fix | n as u8);
    true
}

fn write_ext(code: i8, payload: &[u8], out: &mut ByteBuf) -> Result<()> {
    let Ok(_) = write::write_ext_meta(out, len32(payload.len(), "extension payload")?, code);
    out.as_mut_vec().extend_from_slice(payload);
    Ok(())
}
