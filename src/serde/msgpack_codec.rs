//! msgpack codec (placeholder signatures; implemented in the serde issue work).

use super::Value;
use crate::error::{Error, Result};

/// The deepest nesting of arrays, maps and extension payloads [`decode`] accepts.
pub const MAX_DEPTH: usize = 256;

/// Limits applied while decoding untrusted bytes.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Maximum nesting depth.
    pub max_depth: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits { max_depth: MAX_DEPTH }
    }
}

/// Encodes a value exactly as Python's serializer would.
///
/// # Errors
/// Never for values decoded from msgpack; reserved for values that cannot be
/// represented.
pub fn encode(value: &Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_into(value, &mut out)?;
    Ok(out)
}

/// Appends the encoding of `value` to `out`.
///
/// # Errors
/// As [`encode`].
pub fn encode_into(value: &Value, out: &mut Vec<u8>) -> Result<()> {
    let _ = (value, out);
    Err(Error::serde("msgpack encoder not implemented yet"))
}

/// Decodes one msgpack value that must span all of `bytes`.
///
/// # Errors
/// [`Error::Serde`] for truncated, malformed or too deeply nested input.
pub fn decode(bytes: &[u8]) -> Result<Value> {
    let _ = bytes;
    Err(Error::serde("msgpack decoder not implemented yet"))
}
