//! A checkpoint map taken apart at its channel values without decoding them.

use bytes::Bytes;

use super::decode::{all_read, decode_bytes, DResult, Fail, Scanner};
use super::MAX_DEPTH;
use crate::error::Result;
use crate::serde::value::Value;

/// What [`split_checkpoint`] makes of a checkpoint's msgpack bytes.
#[derive(Debug)]
pub(crate) struct SplitCheckpoint {
    /// The checkpoint map as decoded, except that each value of a
    /// `channel_values` map is nil (its keys stay, in order).
    pub(crate) skeleton: Value,
    /// Each entry of `channel_values` in order (a name may repeat, as in
    /// the map): its key and where its value lies in the input.
    pub(crate) channels: Vec<(Value, ValueBytes)>,
}

/// One value inside the input of [`split_checkpoint`].
#[derive(Debug, Clone)]
pub(crate) struct ValueBytes {
    /// Its bytes, a slice of the input.
    pub(crate) bytes: Bytes,
    /// Whether they are in the canonical form: then decoding them and
    /// encoding the value gives them back unchanged.
    pub(crate) canonical: bool,
    /// How many levels of lists, maps and extensions it nests (0 for a
    /// scalar), counted as `limits` counts them.
    pub(crate) height: usize,
}

/// Splits the msgpack bytes of a checkpoint map at its `channel_values`,
/// reading the rest as [`decode_bytes`] would and each channel value only
/// far enough to check it, so that a saver storing every value on its own
/// can store its bytes as they are.
///
/// The bytes are checked as [`decode_bytes`] checks them, in one pass and
/// in the same order, so a payload it refuses is refused with the same
/// error. Input that is not a map splits into its decoded self and no
/// channels.
///
/// # Errors
/// As [`decode_bytes`](super::decode_bytes).
pub(crate) fn split_checkpoint(input: &Bytes) -> Result<SplitCheckpoint> {
    let mut scan = Scanner::new(input, MAX_DEPTH);
    let (skeleton, channels) = match walk(&mut scan, input) {
        Ok(Some(split)) => split,
        // not a map: as decoded (the caller refuses it as a checkpoint)
        Ok(None) => (decode_bytes(input)?, Vec::new()),
        Err(fail) => return Err(fail.into_error()),
    };
    all_read(input.len(), scan.pos)?;
    Ok(SplitCheckpoint { skeleton, channels })
}

/// The one pass of [`split_checkpoint`]: `None` (the value checked) when
/// the input is not a map.
#[allow(clippy::type_complexity)]
fn walk(scan: &mut Scanner<'_>, input: &Bytes) -> DResult<Option<(Value, Vec<(Value, ValueBytes)>)>> {
    let Some(n) = scan.map_header(0)? else {
        scan.value(0)?;
        return Ok(None);
    };
    let mut skeleton = Vec::with_capacity(n);
    let mut channels = Vec::new();
    for _ in 0..n {
        let key = read(scan, input, 1)?;
        if key.as_str() != Some("channel_values") {
            let value = read(scan, input, 1)?;
            skeleton.push((key, value));
            continue;
        }
        let Some(m) = scan.map_header(1)? else {
            let value = read(scan, input, 1)?;
            skeleton.push((key, value));
            continue;
        };
        let mut names = Vec::with_capacity(m);
        channels.reserve(m);
        for _ in 0..m {
            let name = read(scan, input, 2)?;
            let at = scan.pos;
            scan.canonical = true;
            scan.deepest = 0;
            scan.value(2)?;
            names.push((name.clone(), Value::Nil));
            channels.push((
                name,
                ValueBytes {
                    bytes: input.slice(at..scan.pos),
                    canonical: scan.canonical,
                    // a channel value sits two levels down
                    height: scan.deepest.saturating_sub(2),
                },
            ));
        }
        skeleton.push((key, Value::Map(names.into())));
    }
    Ok(Some((Value::Map(skeleton.into()), channels)))
}

/// The value at the scanner's position (at `depth`), checked, then decoded.
fn read(scan: &mut Scanner<'_>, input: &Bytes, depth: usize) -> DResult<Value> {
    let at = scan.pos;
    scan.value(depth)?;
    // checked: decoding it cannot fail
    decode_bytes(&input.slice(at..scan.pos)).map_err(|e| Fail::Malformed(e.to_string()))
}

/// Whether `bytes` is one msgpack value that [`decode`](super::decode) reads
/// within `max_depth` levels and that is in the canonical form, so that
/// decoding and encoding it gives it back unchanged.
pub(crate) fn is_canonical(bytes: &[u8], max_depth: usize) -> bool {
    let mut scan = Scanner::new(bytes, max_depth);
    scan.value(0).is_ok() && scan.pos == bytes.len() && scan.canonical
}
