//! Encoded sizes without encoding: what the checkpoint skeleton and metadata
//! would occupy as msgpack (the form Python's `InMemorySaver` keeps them in),
//! so `storage_bytes` is comparable with Python's numbers while we keep both in
//! native form.

use crate::checkpoint::{Checkpoint, CheckpointMetadata};
use crate::error::{Error, Result};
use crate::serde::msgpack::{deeper, len32};
use crate::serde::{size_memo, ExtPayload, SharedVec, Value};
use crate::version::ChannelVersion;

fn str_len(n: usize) -> usize {
    n + match n {
        0..=31 => 1,
        32..=0xff => 2,
        0x100..=0xffff => 3,
        _ => 5,
    }
}

fn bin_len(n: usize) -> usize {
    n + match n {
        0..=0xff => 2,
        0x100..=0xffff => 3,
        _ => 5,
    }
}

fn container_header(n: usize) -> usize {
    match n {
        0..=15 => 1,
        16..=0xffff => 3,
        _ => 5,
    }
}

fn ext_len(n: usize) -> usize {
    n + match n {
        1 | 2 | 4 | 8 | 16 => 2,
        0..=0xff => 3,
        0x100..=0xffff => 4,
        _ => 6,
    }
}

fn int_len(i: i64) -> usize {
    if i >= 0 {
        match i {
            0..=0x7f => 1,
            0x80..=0xff => 2,
            0x100..=0xffff => 3,
            0x1_0000..=0xffff_ffff => 5,
            _ => 9,
        }
    } else {
        match i {
            -32..=-1 => 1,
            -128..=-33 => 2,
            -32768..=-129 => 3,
            -2_147_483_648..=-32769 => 5,
            _ => 9,
        }
    }
}

/// The length of the canonical msgpack encoding of `v`, entered at `depth`
/// (containers already open around it). Refuses, as the encoder does, nesting
/// deeper than [`MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH): the walk never recurses further than that.
fn walk_len(v: &Value, depth: usize) -> Result<usize> {
    Ok(match v {
        Value::Nil | Value::Bool(_) => 1,
        Value::Int(i) => int_len(*i),
        Value::UInt(_) | Value::Float(_) => 9,
        Value::F32(_) => 5,
        Value::Str(s) => str_len(s.len()),
        Value::Bin(b) => bin_len(b.len()),
        Value::Array(items) => {
            let d = deeper(depth)?;
            let mut n = container_header(items.len());
            for item in items.iter() {
                n += walk_len(item, d)?;
            }
            n
        }
        Value::Map(entries) => {
            let d = deeper(depth)?;
            let mut n = container_header(entries.len());
            for (k, v) in entries.iter() {
                n += walk_len(k, d)? + walk_len(v, d)?;
            }
            n
        }
        Value::Ext(ext) => {
            let d = deeper(depth)?;
            ext_len(match &ext.payload {
                ExtPayload::Decoded(inner) => walk_len(inner, d)?,
                ExtPayload::Raw(raw) => raw.len(),
            })
        }
    })
}

/// The length of the canonical msgpack encoding of `v` as a top-level value.
///
/// # Errors
/// `Error::Serde` when `v` nests deeper than [`MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH).
#[cfg(test)]
pub(super) fn value_len(v: &Value) -> Result<usize> {
    walk_len(v, 0)
}

/// [`walk_len`] with memos, refusing what the msgpack encoder refuses: nesting deeper
/// than [`MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH) and lengths msgpack cannot frame.
pub(super) fn checked_value_len(v: &Value) -> Result<usize> {
    match checked_len(v, 0) {
        Ok(n) => Ok(n),
        Err(Some(e)) => Err(e),
        // A raw payload of one of LangGraph's extension codes: only the
        // encoder knows whether it nests too deep to be read back.
        Err(None) => Ok(crate::serde::msgpack::encode(v)?.len()),
    }
}

/// The height of a value whose containers have memos (just computed by
/// `checked_len`); extension values count one level plus their payload.
fn value_height(mut v: &Value) -> usize {
    // A loop, not recursion, down a chain of extension values.
    let mut exts = 0;
    loop {
        return exts
            + match v {
                Value::Array(items) => size_memo::height_or_worst(items.memo()),
                Value::Map(entries) => size_memo::height_or_worst(entries.memo()),
                Value::Ext(ext) => match &ext.payload {
                    ExtPayload::Decoded(inner) => {
                        exts += 1;
                        v = inner;
                        continue;
                    }
                    ExtPayload::Raw(_) => 1,
                },
                _ => 0,
            };
    }
}

/// The checked length and the height of `v` (see [`checked_len`]).
fn sized(v: &Value, depth: usize) -> Result<(usize, usize), Option<Error>> {
    Ok((checked_len(v, depth)?, value_height(v)))
}

/// A list or map entered at `depth`: its memo if set, else its length and
/// height from those of its elements (`element` gives them), memoised.
fn checked_container<T>(
    list: &SharedVec<T>,
    what: &str,
    depth: usize,
    element: impl Fn(&T, usize) -> Result<(usize, usize), Option<Error>>,
) -> Result<usize, Option<Error>> {
    if let Some(n) = size_memo::len_at(list.memo(), depth).map_err(Some)? {
        return Ok(n);
    }
    let d = deeper(depth).map_err(Some)?;
    len32(list.len(), what).map_err(Some)?;
    let (mut n, mut height) = (container_header(list.len()), 1);
    for item in list.iter() {
        let (len, h) = element(item, d)?;
        n += len;
        height = height.max(1 + h);
    }
    list.set_memo(size_memo::pack(n, height));
    Ok(n)
}

/// `Err(None)`: ask the encoder.
fn checked_len(v: &Value, depth: usize) -> Result<usize, Option<Error>> {
    Ok(match v {
        Value::Str(s) => {
            len32(s.len(), "string").map_err(Some)?;
            str_len(s.len())
        }
        Value::Bin(b) => {
            len32(b.len(), "binary").map_err(Some)?;
            bin_len(b.len())
        }
        Value::Array(items) => checked_container(items, "array", depth, sized)?,
        Value::Map(entries) => checked_container(entries, "map", depth, |(k, v), d| {
            let ((kn, kh), (vn, vh)) = (sized(k, d)?, sized(v, d)?);
            Ok((kn + vn, kh.max(vh)))
        })?,
        Value::Ext(ext) => {
            let d = deeper(depth).map_err(Some)?;
            let inner = match &ext.payload {
                ExtPayload::Decoded(inner) => checked_len(inner, d)?,
                ExtPayload::Raw(_) if (0..=7).contains(&ext.code()) => return Err(None),
                ExtPayload::Raw(raw) => raw.len(),
            };
            len32(inner, "extension").map_err(Some)?;
            ext_len(inner)
        }
        other => walk_len(other, depth).map_err(Some)?,
    })
}

fn version_len(v: &ChannelVersion) -> usize {
    match v {
        ChannelVersion::Str(s) => str_len(s.len()),
        ChannelVersion::Int(i) => int_len(*i),
        ChannelVersion::Float(_) => 9,
    }
}

fn versions_len<'a>(versions: impl ExactSizeIterator<Item = (&'a String, &'a ChannelVersion)>) -> usize {
    container_header(versions.len()) + versions.map(|(k, v)| str_len(k.len()) + version_len(v)).sum::<usize>()
}

/// The msgpack length of a checkpoint without `channel_values`, as Python's
/// `InMemorySaver` stores it (keys v, ts, id, channel_versions, versions_seen,
/// updated_channels, then pending_sends and extra keys when present).
///
/// # Errors
/// `Error::Serde` when a send or an extra value nests deeper than [`MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH).
pub(super) fn skeleton_len(c: &Checkpoint) -> Result<usize> {
    let keys = 6 + usize::from(c.pending_sends.is_some()) + c.extra.len();
    let mut n = container_header(keys);
    n += str_len(1) + int_len(c.v);
    n += str_len(2) + str_len(c.ts.len());
    n += str_len(2) + str_len(c.id.len());
    n += str_len("channel_versions".len()) + versions_len(c.channel_versions.iter());
    n += str_len("versions_seen".len())
        + container_header(c.versions_seen.len())
        + c.versions_seen
            .iter()
            .map(|(node, seen)| str_len(node.len()) + versions_len(seen.iter()))
            .sum::<usize>();
    n += str_len("updated_channels".len())
        + match &c.updated_channels {
            None => 1,
            Some(chs) => container_header(chs.len()) + chs.iter().map(|s| str_len(s.len())).sum::<usize>(),
        };
    if let Some(sends) = &c.pending_sends {
        n += str_len("pending_sends".len()) + container_header(sends.len());
        for send in sends {
            // inside the checkpoint map and the sends list
            n += walk_len(send, 2)?;
        }
    }
    for (k, v) in &c.extra {
        n += str_len(k.len()) + walk_len(v, 1)?;
    }
    Ok(n)
}

/// The msgpack length of metadata stored as a map.
///
/// # Errors
/// `Error::Serde` when a value nests deeper than [`MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH) (the map
/// itself counts as one level).
pub(super) fn metadata_len(m: &CheckpointMetadata) -> Result<usize> {
    let mut n = container_header(m.0.len());
    for (k, v) in m.0.iter() {
        n += str_len(k.len()) + walk_len(v, 1)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_matches_python_bytes() {
        // Python's in-memory saver stores {"source": "loop", "step": 1, "parents": {}}
        // as these 28 msgpack bytes (docs/design.md, In-memory backend)
        let m = CheckpointMetadata::new(crate::checkpoint::CheckpointSource::Loop, 1);
        assert_eq!(
            metadata_len(&m).unwrap(),
            "83a6736f75726365a46c6f6f70a47374657001a7706172656e747380".len() / 2
        );
    }

    #[test]
    fn int_boundaries() {
        for (i, n) in [
            (0, 1),
            (127, 1),
            (128, 2),
            (255, 2),
            (256, 3),
            (65535, 3),
            (65536, 5),
            (4294967295, 5),
            (4294967296, 9),
            (-1, 1),
            (-32, 1),
            (-33, 2),
            (-128, 2),
            (-129, 3),
            (-32768, 3),
            (-32769, 5),
            (i64::from(i32::MIN), 5),
            (i64::from(i32::MIN) - 1, 9),
        ] {
            assert_eq!(int_len(i), n, "{i}");
        }
    }
}
