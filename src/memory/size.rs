//! Encoded sizes without encoding: what the checkpoint skeleton and metadata
//! would occupy as msgpack (the form Python's `InMemorySaver` keeps them in),
//! so `storage_bytes` is comparable with Python's numbers while we keep both in
//! native form.

use crate::checkpoint::{Checkpoint, CheckpointMetadata};
use crate::serde::{ExtPayload, Value};
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

/// The length of the canonical msgpack encoding of `v`.
pub(super) fn value_len(v: &Value) -> usize {
    match v {
        Value::Nil | Value::Bool(_) => 1,
        Value::Int(i) => int_len(*i),
        Value::UInt(_) | Value::Float(_) => 9,
        Value::F32(_) => 5,
        Value::Str(s) => str_len(s.len()),
        Value::Bin(b) => bin_len(b.len()),
        Value::Array(items) => container_header(items.len()) + items.iter().map(value_len).sum::<usize>(),
        Value::Map(entries) => {
            container_header(entries.len()) + entries.iter().map(|(k, v)| value_len(k) + value_len(v)).sum::<usize>()
        }
        Value::Ext(ext) => ext_len(match &ext.payload {
            ExtPayload::Decoded(inner) => value_len(inner),
            ExtPayload::Raw(raw) => raw.len(),
        }),
    }
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
pub(super) fn skeleton_len(c: &Checkpoint) -> usize {
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
        n +=
            str_len("pending_sends".len()) + container_header(sends.len()) + sends.iter().map(value_len).sum::<usize>();
    }
    n + c
        .extra
        .iter()
        .map(|(k, v)| str_len(k.len()) + value_len(v))
        .sum::<usize>()
}

/// The msgpack length of metadata stored as a map.
pub(super) fn metadata_len(m: &CheckpointMetadata) -> usize {
    container_header(m.0.len()) + m.0.iter().map(|(k, v)| str_len(k.len()) + value_len(v)).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_matches_python_bytes() {
        // spec §6.1: {"source": "loop", "step": 1, "parents": {}} is 28 bytes
        let m = CheckpointMetadata::new(crate::checkpoint::CheckpointSource::Loop, 1);
        assert_eq!(
            metadata_len(&m),
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
