//! A caller's plaintext msgpack checkpoint checked in one pass, for a store
//! that keeps the bytes as given: the checks of its bytes and of its fields,
//! and its id, without decoding it.

use crate::checkpoint::CHECKPOINT_VERSION;
use crate::error::{Error, Result};
use crate::serde::msgpack::peek::{elements, map_entries, pairs, peek, text, text_bytes, Peek};
use crate::serde::msgpack::{DecodeLimits, MAX_DEPTH};

/// The id of the checkpoint `plain` holds, refused where decoding it
/// within [`MAX_DEPTH`] levels and reading the value with
/// [`Checkpoint::from_value`](crate::checkpoint::Checkpoint::from_value)
/// refuse it, with their errors: first what the bytes break (as `unstorable`
/// words it), then the first field `from_value` refuses, in its order.
pub(super) fn checkpoint_id(plain: &[u8], unstorable: impl FnOnce(Error) -> Error) -> Result<&str> {
    let entries = map_entries(plain, DecodeLimits { max_depth: MAX_DEPTH })
        .map_err(unstorable)?
        .ok_or_else(|| Error::serde("checkpoint is not a map"))?;
    let (mut v, mut id, mut ts) = (None, None, false);
    for entry in &entries {
        // the keys are compared as bytes: checked, they are UTF-8
        let key = text_bytes(entry.key).ok_or_else(|| Error::serde("checkpoint has a non-string key"))?;
        match key {
            b"v" => v = int(entry.value),
            b"id" => id = Some(entry.value),
            b"ts" => ts = peek(entry.value) == Peek::Str,
            b"channel_values" => {
                let names = entry
                    .inner
                    .as_deref()
                    .ok_or_else(|| Error::serde("checkpoint channel_values is not a map"))?;
                if names.iter().any(|(name, _)| peek(name) != Peek::Str) {
                    return Err(Error::serde("checkpoint channel_values has a non-string key"));
                }
            }
            b"channel_versions" => {
                let map = entry
                    .inner
                    .as_deref()
                    .ok_or_else(|| Error::serde("checkpoint channel_versions is not a map"))?;
                versions(map.iter().copied(), "channel_versions")?;
            }
            b"versions_seen" => {
                let nodes = entry
                    .inner
                    .as_deref()
                    .ok_or_else(|| Error::serde("checkpoint versions_seen is not a map"))?;
                for (node, seen) in nodes {
                    if peek(node) != Peek::Str {
                        return Err(Error::serde("checkpoint versions_seen has a non-string key"));
                    }
                    if peek(seen) != Peek::Map {
                        return Err(Error::serde("checkpoint versions_seen is not a map"));
                    }
                    versions(pairs(seen), "versions_seen")?;
                }
            }
            b"updated_channels" => match peek(entry.value) {
                Peek::Nil => {}
                Peek::Array => {
                    let mut names = elements(entry.value).into_iter().flatten();
                    if names.any(|name| peek(name) != Peek::Str) {
                        return Err(Error::serde("checkpoint updated_channels holds a non-string"));
                    }
                }
                _ => return Err(Error::serde("checkpoint updated_channels is not a list")),
            },
            b"pending_sends" if !matches!(peek(entry.value), Peek::Array | Peek::Nil) => {
                return Err(Error::serde("checkpoint pending_sends is not a list"));
            }
            _ => {}
        }
    }
    let v = v.ok_or_else(|| Error::serde("checkpoint has no integer `v`"))?;
    if !(1..=CHECKPOINT_VERSION).contains(&v) {
        return Err(Error::serde(format!(
            "checkpoint format v{v} is not supported (1–{CHECKPOINT_VERSION})"
        )));
    }
    let id = id
        .and_then(text)
        .ok_or_else(|| Error::serde("checkpoint has no string `id`"))?;
    if !ts {
        return Err(Error::serde("checkpoint has no string `ts`"));
    }
    Ok(id)
}

fn int(v: &[u8]) -> Option<i64> {
    match peek(v) {
        Peek::Int(i) => Some(i),
        _ => None,
    }
}

/// The checks of a map of channel versions (`what`).
fn versions<'a>(map: impl Iterator<Item = (&'a [u8], &'a [u8])>, what: &str) -> Result<()> {
    for (key, version) in map {
        if peek(key) != Peek::Str {
            return Err(Error::serde(format!("checkpoint {what} has a non-string key")));
        }
        if !matches!(peek(version), Peek::Str | Peek::Int(_) | Peek::Float) {
            let key = text(key).unwrap_or_default();
            return Err(Error::serde(format!("checkpoint {what}[{key:?}] is not a version")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
