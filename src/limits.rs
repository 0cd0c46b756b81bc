//! The limits every saver enforces on what a caller passes in, checked once
//! before any backend code runs, so the same bad input gets the same typed
//! error from every backend.
//!
//! | input | rule | error |
//! |---|---|---|
//! | `checkpoint.id` at `put` | not empty | [`Error::InvalidInput`] |
//! | `config.checkpoint_id` at `put_writes` | present and not empty | [`Error::InvalidInput`] |
//! | a channel value, pending send or unknown checkpoint field at `put`, a write's value at `put_writes`, a metadata value at `put` | nests at most [`MAX_NESTING`] levels | [`Error::Serde`] (it cannot be stored so that it reads back) |
//! | a metadata filter value at `list` and `list_threads` | nests at most [`MAX_NESTING`] levels | [`Error::InvalidInput`] |
//!
//! Nesting is counted as the msgpack decoder counts it: each list, map and
//! extension value is one level, and so is each level inside the payload
//! of one of LangGraph's extension codes (0–7). A scalar is level 0, a list
//! of scalars level 1. The decoder reads values up to
//! [`MAX_DEPTH`](crate::serde::msgpack::MAX_DEPTH) (128) levels deep;
//! [`MAX_NESTING`] leaves room for the two levels a store wraps around a
//! value (SQLite keeps channel values inside the checkpoint's map), so
//! whatever a saver accepts reads back from every backend, and Python reads
//! it too.
//!
//! The checks stop at the limit: an input nested hundreds of thousands of
//! levels deep is refused after [`MAX_NESTING`] levels, never a stack
//! overflow.
//!
//! ```
//! use checkpointer::limits::MAX_NESTING;
//! use checkpointer::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource};
//! use checkpointer::{Error, InMemorySaver, Value};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let deep = (0..=MAX_NESTING).fold(Value::Nil, |v, _| Value::Array(vec![v].into()));
//! let mut checkpoint = Checkpoint::new(0);
//! checkpoint.channel_values.insert("deep".into(), deep);
//! let metadata = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let saver = InMemorySaver::new();
//! let err = saver
//!     .put(&CheckpointConfig::new("t"), &checkpoint, &metadata, &Default::default())
//!     .await
//!     .unwrap_err();
//! assert!(matches!(err, Error::Serde { .. }));
//! # }
//! ```

use indexmap::IndexMap;

use crate::checkpoint::{Checkpoint, CheckpointMetadata};
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::serde::{size_memo, ExtPayload, Value};

/// How many levels of lists, maps and extension values a channel value,
/// write value, metadata value or filter value may nest (see the module
/// docs for how levels are counted).
pub const MAX_NESTING: usize = crate::serde::msgpack::MAX_DEPTH - 2;

/// Whether `value` nests more than `limit` levels.
///
/// Recursive, but never deeper than `limit + 1` calls: a container at the
/// limit answers before looking inside. That costs no allocation, where an
/// explicit stack would cost one per checked value.
pub(crate) fn nests_deeper(value: &Value, limit: usize) -> bool {
    match value {
        // A list or map an earlier size walk measured (a value shared with
        // one already stored in memory) carries its height: no walk.
        Value::Array(items) if items.memo() != 0 => size_memo::height(items.memo()).is_some_and(|h| h > limit),
        Value::Map(entries) if entries.memo() != 0 => size_memo::height(entries.memo()).is_some_and(|h| h > limit),
        Value::Array(items) => {
            limit == 0
                || items
                    .iter()
                    .any(|item| is_container(item) && nests_deeper(item, limit - 1))
        }
        Value::Map(entries) => {
            limit == 0
                || entries.iter().any(|(k, v)| {
                    (is_container(k) && nests_deeper(k, limit - 1)) || (is_container(v) && nests_deeper(v, limit - 1))
                })
        }
        Value::Ext(ext) => {
            limit == 0
                || match &ext.payload {
                    ExtPayload::Decoded(inner) => nests_deeper(inner, limit - 1),
                    ExtPayload::Raw(raw) => {
                        (0..=7).contains(&ext.code) && crate::serde::msgpack_payload_too_deep(raw, limit - 1)
                    }
                }
        }
        _ => false,
    }
}

fn is_container(value: &Value) -> bool {
    matches!(value, Value::Array(_) | Value::Map(_) | Value::Ext(_))
}

fn too_deep_to_store(what: impl std::fmt::Display) -> Error {
    Error::serde(format!(
        "{what} nests deeper than the limit of {MAX_NESTING} levels and cannot be stored"
    ))
}

/// The checks of `put`, in the order a caller would fix them.
pub(crate) fn check_put(checkpoint: &Checkpoint, metadata: &CheckpointMetadata) -> Result<()> {
    if checkpoint.id.is_empty() {
        return Err(Error::invalid("checkpoint.id is empty: every checkpoint needs an id"));
    }
    for (channel, value) in &checkpoint.channel_values {
        if nests_deeper(value, MAX_NESTING) {
            return Err(too_deep_to_store(format_args!("channel value {channel:?}")));
        }
    }
    for value in checkpoint.pending_sends.iter().flatten() {
        if nests_deeper(value, MAX_NESTING) {
            return Err(too_deep_to_store("a pending send"));
        }
    }
    for (key, value) in &checkpoint.extra {
        if nests_deeper(value, MAX_NESTING) {
            return Err(too_deep_to_store(format_args!("checkpoint field {key:?}")));
        }
    }
    check_metadata(metadata)
}

/// The check [`check_put`] makes of a channel value, for one measured
/// without being decoded: it nests `height` levels.
pub(crate) fn check_channel_height(channel: &str, height: usize) -> Result<()> {
    if height > MAX_NESTING {
        return Err(too_deep_to_store(format_args!("channel value {channel:?}")));
    }
    Ok(())
}

/// Metadata values nest at most [`MAX_NESTING`] levels.
pub(crate) fn check_metadata(metadata: &CheckpointMetadata) -> Result<()> {
    for (key, value) in &metadata.0 {
        if nests_deeper(value, MAX_NESTING) {
            return Err(too_deep_to_store(format_args!("metadata value {key:?}")));
        }
    }
    Ok(())
}

/// The checks of `put_writes`; returns the checkpoint id the writes belong to.
pub(crate) fn check_put_writes<'a>(config: &'a CheckpointConfig, writes: &[(String, Value)]) -> Result<&'a str> {
    let Some(id) = config.checkpoint_id() else {
        return Err(Error::invalid(
            "put_writes needs config.checkpoint_id: the checkpoint the writes belong to",
        ));
    };
    for (channel, value) in writes {
        check_write(channel, value)?;
    }
    Ok(id)
}

/// A written value nests at most [`MAX_NESTING`] levels.
pub(crate) fn check_write(channel: &str, value: &Value) -> Result<()> {
    if nests_deeper(value, MAX_NESTING) {
        return Err(too_deep_to_store(format_args!(
            "the value written to channel {channel:?}"
        )));
    }
    Ok(())
}

/// A metadata filter's values nest at most [`MAX_NESTING`] levels.
pub(crate) fn check_filter(filter: &IndexMap<String, Value>) -> Result<()> {
    for (key, value) in filter {
        if nests_deeper(value, MAX_NESTING) {
            return Err(Error::invalid(format!(
                "the metadata filter value for {key:?} nests deeper than the limit of {MAX_NESTING} levels"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrays(levels: usize) -> Value {
        (0..levels).fold(Value::from(1), |v, _| Value::Array(vec![v].into()))
    }

    #[test]
    fn levels_are_counted_as_the_decoder_counts_them() {
        assert!(!nests_deeper(&Value::from(1), 0));
        assert!(!nests_deeper(&arrays(1), 1));
        assert!(nests_deeper(&arrays(1), 0));
        assert!(!nests_deeper(&arrays(MAX_NESTING), MAX_NESTING));
        assert!(nests_deeper(&arrays(MAX_NESTING + 1), MAX_NESTING));
        let wide = Value::Array(vec![arrays(3), arrays(7), Value::Nil].into());
        assert!(!nests_deeper(&wide, 8));
        assert!(nests_deeper(&wide, 7));
        let in_key = Value::Map(vec![(arrays(5), Value::Nil)].into());
        assert!(nests_deeper(&in_key, 5));
        assert!(!nests_deeper(&in_key, 6));
        // Each level is the same as the encoder's: what passes encodes, and
        // decodes below the decoder's limit.
        let at = arrays(MAX_NESTING);
        let bytes = crate::serde::msgpack::encode(&at).unwrap();
        assert_eq!(crate::serde::msgpack::decode(&bytes).unwrap(), at);
    }

    #[test]
    fn extension_payloads_count() {
        let raw = |levels: usize| {
            let mut payload = vec![0x91u8; levels];
            payload.push(0xc0);
            Value::Ext(Box::new(crate::serde::Ext {
                code: 0,
                payload: ExtPayload::Raw(payload.into()),
            }))
        };
        // One level for the extension, then the payload's own.
        assert!(!nests_deeper(&raw(9), 10));
        assert!(nests_deeper(&raw(10), 10));
        // Unknown codes are opaque bytes.
        let opaque = Value::Ext(Box::new(crate::serde::Ext {
            code: 42,
            payload: ExtPayload::Raw(vec![0x91u8; 500].into()),
        }));
        assert!(!nests_deeper(&opaque, 1));
    }

    #[test]
    fn far_beyond_the_limit_is_refused_without_recursion() {
        let deep = arrays(200_000);
        assert!(nests_deeper(&deep, MAX_NESTING));
        // Dropping a value this deep recurses in `Drop`: not the checks'
        // business (the caller built it), so leak it here.
        std::mem::forget(deep);
    }
}
