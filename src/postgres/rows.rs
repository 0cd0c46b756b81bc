//! Turning rows into checkpoints, and checkpoints into rows (`docs/design.md`, *PostgreSQL backend*).

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use tokio_postgres::Row;

use super::conn::JsonbText;
use super::error::describe;
use super::jsonb;
use crate::checkpoint::{ChannelVersions, Checkpoint, CheckpointMetadata, PendingWrite};
use crate::config::CheckpointConfig;
use crate::engine::values::Values;
use crate::engine::{prune, Link};
use crate::error::{EncryptionError, Error, Result};
use crate::saver::{CheckpointKey, ThreadInfo, ThreadKeys, WriteKey};
use crate::serde::{Serializer, TypedBytes, Value};

/// The rows one `put` writes.
#[derive(Debug)]
pub(crate) struct PutRows {
    /// The checkpoint JSONB: the checkpoint with only its inline values.
    pub(crate) checkpoint: String,
    /// The metadata JSONB.
    pub(crate) metadata: String,
    pub(crate) blob_channels: Vec<String>,
    pub(crate) blob_versions: Vec<String>,
    pub(crate) blob_types: Vec<String>,
    pub(crate) blob_data: Vec<Option<Bytes>>,
    /// Channels with a version but neither a value nor a new version: they
    /// keep the parent's inline value at that version.
    pub(crate) unwritten: Vec<String>,
}

/// Splits a checkpoint into its JSONB row and its blobs as Python's saver
/// does (`docs/design.md`, *PostgreSQL backend*) — except that with an encrypting serializer
/// ([`Serializer::encrypts`]) no value is inline — with this crate's rule that a value present in
/// `channel_values` is never dropped: every value that is not inline gets a
/// blob at the version `channel_versions` names, whether or not its channel
/// is in `new_versions`. A channel this put neither gives a value nor names
/// in `new_versions` is listed in `unwritten`, to keep its parent's value.
///
/// # Errors
/// [`Error::InvalidInput`] for what PostgreSQL cannot hold (see
/// [`jsonb::write_json`]) and for a value that needs a blob but has no
/// version; [`Error::Serde`] when the serializer fails.
pub(crate) fn put_rows(
    checkpoint: &Checkpoint,
    values: Values<'_>,
    metadata: &CheckpointMetadata,
    new_versions: &ChannelVersions,
    serde: &dyn Serializer,
) -> Result<PutRows> {
    let mut inline = Vec::with_capacity(values.len());
    let mut rows = PutRows {
        checkpoint: String::new(),
        metadata: String::new(),
        blob_channels: Vec::new(),
        blob_versions: Vec::new(),
        blob_types: Vec::new(),
        blob_data: Vec::new(),
        unwritten: checkpoint
            .channel_versions
            .keys()
            .filter(|ch| !values.contains_key(ch) && !new_versions.contains_key(*ch))
            .cloned()
            .collect(),
    };
    // An encrypting serializer must see every value: nothing may sit in the
    // JSONB in plaintext, so primitives go to (encrypted) blobs too. Python's
    // reader merges blobs over inline values and decrypts them.
    let inline_allowed = !serde.encrypts();
    for (channel, value) in values.iter() {
        let snapshot = value.is_delta_snapshot();
        if let Some(value) = value
            .as_value()
            .filter(|v| inline_allowed && !snapshot && jsonb::is_inline(v))
        {
            inline.push((Value::Str(channel.as_str().into()), value.clone()));
            continue;
        }
        if snapshot {
            // Python's marker: the real value is in the blob at this version.
            inline.push((Value::Str(channel.as_str().into()), Value::Bool(true)));
        }
        let version = checkpoint.channel_versions.get(channel).ok_or_else(|| {
            Error::invalid(format!(
                "channel {channel:?} has a value but no entry in channel_versions; PostgresSaver stores such \
                 values by version"
            ))
        })?;
        let version = version.to_string();
        jsonb::check_text(channel, "channel name")?;
        jsonb::check_text(&version, "channel version")?;
        let TypedBytes { tag, data } = value.typed(serde)?;
        jsonb::check_text(&tag, "serializer tag")?;
        rows.blob_channels.push(channel.clone());
        rows.blob_versions.push(version);
        rows.blob_types.push(tag);
        rows.blob_data.push(Some(data));
    }
    let mut skeleton = match checkpoint.to_value(false) {
        Value::Map(entries) => entries,
        _ => Vec::new().into(),
    };
    let at = skeleton.len().min(3);
    skeleton.insert(at, (Value::from("channel_values"), Value::Map(inline.into())));
    rows.checkpoint = jsonb::to_json(&Value::Map(skeleton), "checkpoint")?;
    rows.metadata = jsonb::to_json(&metadata.to_value(), "metadata")?;
    Ok(rows)
}

/// A column of a row of the saver's statements.
pub(crate) fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T> {
    row.try_get(idx)
        .map_err(|e| Error::serde(format!("unexpected column from PostgreSQL: {}", describe(&e))))
}

/// Decodes a typed payload; a missing payload is empty.
pub(crate) fn load(serde: &dyn Serializer, tag: Option<&str>, data: Option<&[u8]>, what: &str) -> Result<Value> {
    let tag = tag.ok_or_else(|| Error::serde(format!("{what} has no type tag")))?;
    serde.loads_typed(tag, data.unwrap_or_default())
}

/// The tag [`EncryptionError::PlaintextRefused`] names for a channel value
/// found inline in the checkpoint JSONB.
pub(crate) const INLINE_TAG: &str = "jsonb";

/// The error for an inline value read through a serializer that refuses
/// plaintext.
pub(crate) fn inline_refused() -> Error {
    EncryptionError::PlaintextRefused {
        tag: INLINE_TAG.to_owned(),
    }
    .into()
}

/// Gives a checkpoint older than format v4 its sends back as Python's saver
/// does (`docs/design.md`, *PostgreSQL backend*): the parent's `__pregel_tasks` writes become the value of
/// channel `__pregel_tasks`, at the greatest version the checkpoint has (or a
/// first version when it has none).
pub(crate) fn migrate_sends(checkpoint: &mut Checkpoint, sends: Vec<Value>) {
    use crate::checkpoint::channels::TASKS;
    if sends.is_empty() {
        return;
    }
    let version = checkpoint
        .channel_versions
        .values()
        .cloned()
        .reduce(|a, b| if version_lt(&a, &b) { b } else { a })
        .unwrap_or_else(crate::version::first_version);
    checkpoint
        .channel_values
        .insert(TASKS.to_owned(), Value::Array(sends.into()));
    checkpoint.channel_versions.insert(TASKS.to_owned(), version);
}

fn version_lt(a: &crate::version::ChannelVersion, b: &crate::version::ChannelVersion) -> bool {
    use crate::version::ChannelVersion::*;
    match (a, b) {
        (Str(x), Str(y)) => x < y,
        (Int(x), Int(y)) => x < y,
        _ => a.counter() < b.counter(),
    }
}

/// The sends of [`super::queries::PARENT_SENDS`] for `n` parents, in the
/// order of the parents.
pub(crate) fn parent_sends(rows: &[Row], n: usize, serde: &dyn Serializer) -> Result<Vec<Vec<Value>>> {
    let mut sends: Vec<Vec<Value>> = vec![Vec::new(); n];
    for row in rows {
        let at: i64 = get(row, 0)?;
        let tag: Option<&str> = get(row, 1)?;
        let blob: Option<&[u8]> = get(row, 2)?;
        let list = at
            .checked_sub(1)
            .and_then(|at| usize::try_from(at).ok())
            .and_then(|at| sends.get_mut(at))
            .ok_or_else(|| Error::serde(format!("unexpected send position {at} from PostgreSQL")))?;
        list.push(load(serde, tag, blob, "a send")?);
    }
    Ok(sends)
}

/// One ancestor visited by the delta walk.
pub(crate) struct WalkStep {
    depth: i32,
    pub(crate) checkpoint_id: String,
    /// Channels still open on arrival: their writes here belong to the history.
    pub(crate) open: Vec<String>,
    /// Channels whose walk ends here, with the stored value.
    seeds: Vec<(String, Value)>,
}

/// The steps of a delta walk ([`super::queries::DELTA_WALK_BY_ID`]), nearest
/// first, up to the first repeated id.
pub(crate) fn walk_steps(rows: &[Row], serde: &dyn Serializer) -> Result<Vec<WalkStep>> {
    let mut steps: Vec<WalkStep> = Vec::new();
    let mut seen = HashSet::new();
    for row in rows {
        let depth: i32 = get(row, 0)?;
        let id: String = get(row, 1)?;
        if steps.last().is_none_or(|s| s.depth != depth) {
            if !seen.insert(id.clone()) {
                break; // a parent cycle
            }
            steps.push(WalkStep {
                depth,
                checkpoint_id: id,
                open: get(row, 2)?,
                seeds: Vec::new(),
            });
        }
        let channel: Option<String> = get(row, 4)?;
        if let (Some(channel), Some(step)) = (channel, steps.last_mut()) {
            let inline: Option<JsonbText> = get(row, 5)?;
            let tag: Option<String> = get(row, 6)?;
            let blob: Option<Vec<u8>> = get(row, 7)?;
            let value = match (tag, inline) {
                (Some(tag), _) => serde.loads_typed(&tag, blob.as_deref().unwrap_or_default())?,
                // Inline JSONB never went through the cipher.
                (None, Some(_)) if !serde.reads_plaintext() => return Err(inline_refused()),
                (None, Some(json)) => jsonb::from_json(&json.0)?,
                (None, None) => Value::Nil,
            };
            step.seeds.push((channel, value));
        }
    }
    Ok(steps)
}

/// The links of the walk `steps` with the writes of
/// [`super::queries::DELTA_WRITES`] saved against them.
pub(crate) fn links(steps: Vec<WalkStep>, rows: &[Row], serde: &dyn Serializer) -> Result<Vec<Link>> {
    let position: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.checkpoint_id.as_str(), i))
        .collect();
    let mut links: Vec<Link> = steps.iter().map(|_| Link::default()).collect();
    for row in rows {
        let checkpoint_id: &str = get(row, 0)?;
        let tag: Option<&str> = get(row, 5)?;
        let blob: Option<&[u8]> = get(row, 6)?;
        let write = PendingWrite {
            task_id: get(row, 2)?,
            channel: get(row, 1)?,
            value: load(serde, tag, blob, "a pending write")?,
            task_path: get(row, 3)?,
            idx: i64::from(get::<i32>(row, 4)?),
        };
        if let Some(&at) = position.get(checkpoint_id) {
            links[at].writes.push(write);
        }
    }
    for (link, step) in links.iter_mut().zip(steps) {
        link.seeds = step.seeds;
    }
    Ok(links)
}

/// Per namespace, the latest checkpoint of [`super::queries::PRUNE_HEADS`].
pub(crate) fn prune_heads(rows: &[Row]) -> Result<Vec<prune::Head>> {
    let mut heads = Vec::with_capacity(rows.len());
    for row in rows {
        let metadata: JsonbText = get(row, 4)?;
        let metadata = CheckpointMetadata::from_value(&jsonb::from_json(&metadata.0)?)?;
        let unstored: Vec<String> = get(row, 3)?;
        let ns: String = get(row, 0)?;
        let id: String = get(row, 1)?;
        heads.push(prune::Head::new(ns, id, &metadata, unstored.iter().map(String::as_str)));
    }
    Ok(heads)
}

/// The threads of [`super::queries::LIST_THREADS_FIRST`] (or `_AFTER`).
pub(crate) fn threads(rows: &[Row]) -> Result<Vec<ThreadInfo>> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let thread_id: String = get(row, 0)?;
        let ns: String = get(row, 1)?;
        let id: String = get(row, 2)?;
        let metadata: JsonbText = get(row, 3)?;
        out.push(ThreadInfo {
            latest: CheckpointConfig {
                thread_id: thread_id.clone(),
                checkpoint_ns: Some(ns),
                checkpoint_id: Some(id),
            },
            thread_id,
            metadata: CheckpointMetadata::from_value(&jsonb::from_json(&metadata.0)?)?,
        });
    }
    Ok(out)
}

/// The rows of [`queries::THREAD_KEYS`](super::queries::THREAD_KEYS).
pub(crate) fn thread_keys(rows: &[Row]) -> Result<ThreadKeys> {
    let mut keys = ThreadKeys::default();
    for row in rows {
        let (checkpoint_ns, checkpoint_id) = (get(row, 1)?, get(row, 2)?);
        if get::<i32>(row, 0)? == 0 {
            keys.checkpoints.push(CheckpointKey {
                checkpoint_ns,
                checkpoint_id,
                parent_checkpoint_id: get(row, 3)?,
            });
        } else {
            keys.writes.push(WriteKey {
                checkpoint_ns,
                checkpoint_id,
                task_id: get(row, 4)?,
                task_path: get(row, 5)?,
                idx: i64::from(get::<i32>(row, 6)?),
                channel: get(row, 7)?,
            });
        }
    }
    Ok(keys)
}

/// The values of `channel_values` keyed by channel, for tests.
#[cfg(test)]
pub(crate) fn inline_values(rows: &PutRows) -> indexmap::IndexMap<String, Value> {
    let v = jsonb::from_json(rows.checkpoint.as_bytes()).unwrap_or_default();
    v.get("channel_values")
        .and_then(Value::as_map)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.clone())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::JsonPlusSerializer;
    use crate::version::ChannelVersion;

    /// A checkpoint holding `values`, each channel at version 1.
    fn checkpoint_of<const N: usize>(values: [(&str, Value); N]) -> Checkpoint {
        let mut cp = Checkpoint::new(0);
        for (ch, val) in values {
            cp.channel_values.insert(ch.into(), val);
            cp.channel_versions.insert(ch.into(), ChannelVersion::Int(1));
        }
        cp
    }

    /// The rows of a `put` of `cp` with its own values, empty metadata and
    /// no new versions.
    fn rows_of(cp: &Checkpoint, serde: &dyn Serializer) -> Result<PutRows> {
        put_rows(
            cp,
            Values::Decoded(&cp.channel_values),
            &CheckpointMetadata::default(),
            &ChannelVersions::new(),
            serde,
        )
    }

    #[test]
    fn split_matches_python_with_our_rule() {
        let cp = checkpoint_of([
            ("name", Value::from("meow")),
            ("flag", Value::Nil),
            ("items", Value::from(vec![1, 2])),
            ("nan", Value::Float(f64::NAN)),
            ("nul", Value::from("a\0b")),
        ]);
        let rows = rows_of(&cp, &JsonPlusSerializer).unwrap();
        let inline = inline_values(&rows);
        assert_eq!(inline.keys().collect::<Vec<_>>(), ["name", "flag"]);
        assert_eq!(rows.blob_channels, ["items", "nan", "nul"]);
        assert_eq!(rows.blob_versions, ["1", "1", "1"]);
        assert_eq!(rows.blob_types, ["msgpack", "msgpack", "msgpack"]);
    }

    /// A checkpoint split from its bytes gives the rows its decoding gives.
    #[test]
    fn split_values_make_the_same_rows() {
        let mut cp = checkpoint_of([
            ("name", Value::from("meow")),
            ("flag", Value::Nil),
            ("items", Value::from(vec![1, 2])),
            ("nan", Value::Float(f64::NAN)),
            ("nul", Value::from("a\0b")),
            ("bin", Value::Bin(bytes::Bytes::from_static(b"\x00\x01"))),
            ("delta", Value::delta_snapshot(Value::from(vec!["a"]))),
            ("empty", Value::Map(Vec::new().into())),
        ]);
        cp.channel_versions.insert("unwritten".into(), ChannelVersion::Int(1));
        let bytes = bytes::Bytes::from(crate::serde::msgpack::encode(&cp.to_value(true)).unwrap());
        let md = CheckpointMetadata::default();
        let (skeleton, values) = crate::engine::encoded::split(&bytes, &cp.id, &md).unwrap();
        let new = ChannelVersions::new();
        for serde in [&JsonPlusSerializer as &dyn Serializer, &Sealing] {
            let want = put_rows(&cp, Values::Decoded(&cp.channel_values), &md, &new, serde).unwrap();
            let got = put_rows(&skeleton, Values::Split(&values), &md, &new, serde).unwrap();
            assert_eq!(format!("{got:?}"), format!("{want:?}"));
        }
    }

    /// Says it encrypts; tags what the default serializer writes with `+x`.
    #[derive(Debug)]
    struct Sealing;

    impl Serializer for Sealing {
        fn dumps_typed(&self, value: &Value) -> Result<TypedBytes> {
            let t = JsonPlusSerializer.dumps_typed(value)?;
            Ok(TypedBytes::new(format!("{}+x", t.tag), t.data))
        }
        fn loads_typed(&self, tag: &str, data: &[u8]) -> Result<Value> {
            JsonPlusSerializer.loads_typed(tag.trim_end_matches("+x"), data)
        }
        fn encrypts(&self) -> bool {
            true
        }
    }

    #[test]
    fn an_encrypting_serializer_gets_every_value() {
        let cp = checkpoint_of([
            ("name", Value::from("meow")),
            ("flag", Value::Nil),
            ("n", Value::Int(3)),
            ("yes", Value::Bool(true)),
            ("items", Value::from(vec![1, 2])),
        ]);
        let rows = rows_of(&cp, &Sealing).unwrap();
        assert!(inline_values(&rows).is_empty(), "{}", rows.checkpoint);
        assert_eq!(rows.blob_channels, ["name", "flag", "n", "yes", "items"]);
        assert!(
            rows.blob_types.iter().all(|t| t.ends_with("+x")),
            "{:?}",
            rows.blob_types
        );
        assert!(!rows.checkpoint.contains("meow"), "{}", rows.checkpoint);
    }

    #[test]
    fn value_without_version_needs_one() {
        let mut cp = Checkpoint::new(0);
        cp.channel_values.insert("inline".into(), Value::Int(1));
        assert!(rows_of(&cp, &JsonPlusSerializer).is_ok());
        cp.channel_values.insert("list".into(), Value::from(vec![1]));
        let err = rows_of(&cp, &JsonPlusSerializer).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }));
    }

    #[test]
    fn metadata_refusals_are_invalid_input() {
        let mut md = CheckpointMetadata::default();
        md.insert("nested", Value::map([("k", Value::from("a\0"))]));
        let cp = Checkpoint::new(0);
        let values = Values::Decoded(&cp.channel_values);
        let err = put_rows(&cp, values, &md, &ChannelVersions::new(), &JsonPlusSerializer).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }));
    }

    #[test]
    fn legacy_sends_take_the_greatest_version() {
        let mut cp = Checkpoint::new(0);
        cp.v = 3;
        cp.channel_versions
            .insert("a".into(), ChannelVersion::from("00000000000000000000000000000002.5"));
        cp.channel_versions
            .insert("b".into(), ChannelVersion::from("00000000000000000000000000000003.1"));
        migrate_sends(&mut cp, vec![Value::from("send")]);
        assert_eq!(
            cp.channel_versions["__pregel_tasks"],
            ChannelVersion::from("00000000000000000000000000000003.1")
        );
        assert_eq!(cp.channel_values["__pregel_tasks"], Value::from(vec!["send"]));
    }
}
