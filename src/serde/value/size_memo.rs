//! The size memo a [`SharedVec`](super::SharedVec) carries: a list's or map's
//! msgpack length and height (levels of nesting it opens, itself included),
//! packed in one `u64` by the size walk that measured it. Every holder of the
//! list shares it, so a value measured once (when `InMemorySaver` stored it)
//! is not walked again, by the size walk or by the input limits.

use crate::error::Error;
use crate::serde::msgpack::{deeper, MAX_DEPTH};

/// The memo of a container of encoded length `len` and height `height`
/// (0 is kept for "not computed"). Heights never exceed `MAX_DEPTH` in a
/// memo, as deeper values are refused before.
pub(crate) fn pack(len: usize, height: usize) -> u64 {
    ((len as u64) << 8 | height as u64) + 1
}

/// The length from a memo, if set, after the depth check the encoder makes:
/// a container of height `h` entered at `depth` fits when `depth + h <= MAX_DEPTH`.
pub(crate) fn len_at(memo: u64, depth: usize) -> Result<Option<usize>, Error> {
    if memo == 0 {
        return Ok(None);
    }
    let memo = memo - 1;
    let height = (memo & 0xff) as usize;
    // Its innermost container is entered at depth + height - 1.
    deeper(depth + height - 1)?;
    Ok(Some((memo >> 8) as usize))
}

/// The height a size walk recorded in a memo, if it has one.
pub(crate) fn height(memo: u64) -> Option<usize> {
    (memo != 0).then(|| ((memo - 1) & 0xff) as usize)
}

/// The height of a memo, or more than [`MAX_DEPTH`] when it is unset (so a
/// parent is never taken for shallower than it is).
pub(crate) fn height_or_worst(memo: u64) -> usize {
    height(memo).unwrap_or(MAX_DEPTH + 1)
}
