//! msgpack as Python's serializer (ormsgpack) writes it, and a bounded decoder.
//!
//! Encoding is canonical: the smallest form for every length and integer,
//! unsigned forms for every non-negative integer, 64-bit floats. Python always
//! writes this form, so decoding its bytes and encoding the result gives the
//! same bytes. Extension payloads that were not written canonically are kept
//! as raw bytes, so they survive too.

mod decode;
mod encode;
pub(crate) mod peek;
mod split;
#[cfg(test)]
mod tests;

pub(crate) use decode::payload_too_deep;
pub use decode::{decode, decode_bytes, decode_bytes_with, decode_with, validate};
pub(crate) use encode::{bin_header, map_header, str_header};
pub use encode::{encode, encode_into};
pub(crate) use split::{is_canonical, split_checkpoint, ValueBytes};

use crate::error::{Error, Result};

/// The deepest nesting of arrays, maps and extension payloads [`decode`]
/// accepts. Deeper input is refused with [`Error::Serde`].
pub const MAX_DEPTH: usize = 128;

/// Limits applied while decoding untrusted bytes.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Maximum nesting depth of arrays, maps and extension payloads; values
    /// above [`MAX_DEPTH`] are treated as [`MAX_DEPTH`], so decoding always
    /// fits a 1 MiB stack.
    pub max_depth: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits { max_depth: MAX_DEPTH }
    }
}

// `deeper` and `len32` run for every container and string the encoder
// writes: inline, with their errors out of line.

/// Enters one nesting level as the decoder counts them.
#[inline]
pub(crate) fn deeper(depth: usize) -> Result<usize> {
    if depth >= MAX_DEPTH {
        return Err(too_deep_to_read_back());
    }
    Ok(depth + 1)
}

#[cold]
#[inline(never)]
fn too_deep_to_read_back() -> Error {
    Error::serde(format!(
        "msgpack: value nests deeper than the limit of {MAX_DEPTH} and could not be read back"
    ))
}

/// `n` as a msgpack length, refusing what msgpack cannot frame.
#[inline]
pub(crate) fn len32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| too_long(n, what))
}

#[cold]
#[inline(never)]
fn too_long(n: usize, what: &str) -> Error {
    Error::serde(format!("{what} of {n} elements is too long for msgpack"))
}
