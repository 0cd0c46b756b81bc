//! Encoded I/O ([`crate::encoded`]): `put_encoded`, `put_writes_encoded`,
//! `get_tuple_encoded` and `list_encoded` agree with the decoded calls, and
//! refuse bad bytes with the errors of `put` and `put_writes`. Run on the
//! savers whose [`CheckpointSaver::as_encoded`] is `Some`.
//!
//! A payload read back sealed by the saver's serializer (a tag with `+`)
//! is compared by its tag only: the check cannot open it.

use futures::TryStreamExt;

use super::{checkpoint_with, generate_config, generate_metadata, get, metadata_eq, new_thread_id, str_version};
use super::{CheckFailure, CheckResult};
use crate::checkpoint::{Checkpoint, CheckpointMetadata, CheckpointTuple};
use crate::config::CheckpointConfig;
use crate::encoded::{EncodedSaver, EncodedTuple};
use crate::error::Error;
use crate::saver::{CheckpointSaver, ListOptions};
use crate::serde::{msgpack, JsonPlusSerializer, Serializer, TypedBytes, Value};

fn encoded_of(saver: &dyn CheckpointSaver) -> Result<&dyn EncodedSaver, CheckFailure> {
    saver
        .as_encoded()
        .ok_or_else(|| CheckFailure::new("the saver has no encoded I/O (as_encoded is None)"))
}

fn dumps(value: &Value) -> Result<TypedBytes, CheckFailure> {
    Ok(JsonPlusSerializer.dumps_typed(value)?)
}

/// A checkpoint with a string, an integer, a nil, bytes and nested
/// containers, every channel versioned.
fn sample_checkpoint() -> Checkpoint {
    let nested = Value::Array(
        vec![
            Value::Map(
                vec![
                    (Value::from("role"), Value::from("user")),
                    (Value::from("n"), Value::Int(1)),
                ]
                .into(),
            ),
            Value::Array(vec![Value::Int(-7), Value::Nil, Value::Bool(true)].into()),
        ]
        .into(),
    );
    checkpoint_with(
        &[
            ("text", Value::from("hello")),
            ("count", Value::Int(42)),
            ("none", Value::Nil),
            ("raw", Value::Bin(bytes::Bytes::from_static(b"\x00\x01\xff"))),
            ("messages", nested),
        ],
        &[
            ("text", str_version(1)),
            ("count", str_version(1)),
            ("none", str_version(1)),
            ("raw", str_version(1)),
            ("messages", str_version(1)),
        ],
    )
}

/// `read` is `decoded` encoded: the same keys, the metadata, the checkpoint
/// and writes equal to the decoded ones (byte for byte as
/// `JsonPlusSerializer` encodes them, unless sealed).
fn same_tuple(read: &EncodedTuple, decoded: &CheckpointTuple) -> CheckResult {
    ensure_eq!(read.thread_id, decoded.config.thread_id, "thread_id");
    ensure_eq!(read.checkpoint_ns, decoded.config.ns(), "checkpoint_ns");
    ensure_eq!(read.checkpoint_id, decoded.checkpoint.id, "checkpoint_id");
    let parent = decoded.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone());
    ensure_eq!(read.parent_checkpoint_id, parent, "parent_checkpoint_id");
    if read.metadata.tag == "msgpack" {
        let metadata = CheckpointMetadata::from_value(&msgpack::decode_bytes(&read.metadata.data)?)?;
        ensure!(
            metadata_eq(&metadata, &decoded.metadata),
            "metadata {metadata:?} is not {:?}",
            decoded.metadata
        );
    }
    if !read.checkpoint.tag.contains('+') {
        ensure_eq!(
            read.checkpoint,
            dumps(&decoded.checkpoint.to_value(true))?,
            "the encoded checkpoint against the decoded one, encoded"
        );
    }
    ensure_eq!(read.writes.len(), decoded.pending_writes.len(), "number of writes");
    for (got, want) in read.writes.iter().zip(&decoded.pending_writes) {
        ensure_eq!(
            (&got.task_id, &got.channel),
            (&want.task_id, &want.channel),
            "write keys"
        );
        if got.value.tag == "msgpack" {
            let value = JsonPlusSerializer.loads_typed_bytes(&got.value.tag, &got.value.data)?;
            ensure_eq!(value, want.value, "write value of channel {:?}", want.channel);
        }
    }
    Ok(())
}

/// The listing of `config` as encoded tuples.
async fn list_encoded(saver: &dyn EncodedSaver, config: &CheckpointConfig) -> Result<Vec<EncodedTuple>, CheckFailure> {
    Ok(saver
        .list_encoded(Some(config.clone()), ListOptions::default())
        .try_collect()
        .await?)
}

/// A checkpoint and writes stored by `put_encoded` and `put_writes_encoded`
/// read back as `get_tuple` reads them, encoded, the writes as the bytes
/// given (unless sealed); `list_encoded` yields what `get_tuple_encoded`
/// does.
pub async fn encoded_put_round_trips_bytes(saver: &dyn CheckpointSaver) -> CheckResult {
    let enc = encoded_of(saver)?;
    let t = new_thread_id();
    let cp = sample_checkpoint();
    let bytes = dumps(&cp.to_value(true))?;
    let meta = generate_metadata("input", -1);
    let stored = enc
        .put_encoded(&generate_config(&t), &cp.id, bytes, &meta, &cp.channel_versions)
        .await?;
    let writes = vec![
        ("text".to_owned(), dumps(&Value::from("written"))?),
        (
            "messages".to_owned(),
            dumps(&Value::Array(vec![Value::Int(1), Value::from("x")].into()))?,
        ),
        ("none".to_owned(), dumps(&Value::Nil)?),
    ];
    enc.put_writes_encoded(&stored, writes.clone(), "task-1", "").await?;

    let decoded = get(saver, &stored).await?;
    ensure_eq!(decoded.checkpoint, cp, "the checkpoint read decoded");
    let read = enc
        .get_tuple_encoded(&stored)
        .await?
        .ok_or_else(|| CheckFailure::new("get_tuple_encoded found nothing"))?;
    // not byte for byte against the bytes given: a store may keep maps in
    // an order of its own (PostgreSQL's JSONB sorts keys), as `get_tuple`
    // reads them
    ensure_eq!(read.writes.len(), writes.len(), "number of writes");
    for (got, (channel, given)) in read.writes.iter().zip(&writes) {
        ensure_eq!(&got.channel, channel, "write channel");
        if !got.value.tag.contains('+') {
            ensure_eq!(
                &got.value,
                given,
                "write of channel {channel:?} against the bytes given"
            );
        }
    }
    same_tuple(&read, &decoded)?;
    ensure_eq!(
        list_encoded(enc, &stored).await?,
        vec![read],
        "list_encoded against get_tuple_encoded"
    );
    Ok(())
}

/// A checkpoint and writes stored by `put` and `put_writes` read by
/// `get_tuple_encoded` and `list_encoded` as `get_tuple` reads them,
/// encoded by `JsonPlusSerializer`; the latest checkpoint without an id.
pub async fn encoded_reads_match_decoded_reads(saver: &dyn CheckpointSaver) -> CheckResult {
    let enc = encoded_of(saver)?;
    let t = new_thread_id();
    let cp = sample_checkpoint();
    let first = saver
        .put(
            &generate_config(&t),
            &cp,
            &generate_metadata("input", -1),
            &cp.channel_versions,
        )
        .await?;
    let mut next = checkpoint_with(&[("count", Value::Int(43))], &[("count", str_version(2))]);
    next.channel_versions.insert("text".into(), str_version(1));
    let second = saver
        .put(&first, &next, &generate_metadata("loop", 0), &next.channel_versions)
        .await?;
    let writes = [
        ("text".to_owned(), Value::from("w")),
        ("raw".to_owned(), Value::Bin(bytes::Bytes::from_static(b"\x07"))),
    ];
    saver.put_writes(&second, &writes, "task-b", "").await?;
    saver.put_writes(&second, &writes[..1], "task-a", "").await?;
    for config in [first.clone(), second.clone(), generate_config(&t)] {
        let decoded = get(saver, &config).await?;
        let read = enc
            .get_tuple_encoded(&config)
            .await?
            .ok_or_else(|| CheckFailure::new("get_tuple_encoded found nothing"))?;
        same_tuple(&read, &decoded)?;
    }
    let listed = list_encoded(enc, &generate_config(&t)).await?;
    ensure_eq!(listed.len(), 2, "checkpoints listed");
    for read in &listed {
        let config = generate_config(&t).with_checkpoint_id(read.checkpoint_id.clone());
        let decoded = get(saver, &config).await?;
        same_tuple(read, &decoded)?;
    }
    ensure!(
        enc.get_tuple_encoded(&generate_config(&new_thread_id()))
            .await?
            .is_none(),
        "a checkpoint of an unknown thread"
    );
    Ok(())
}

/// Bad bytes are refused with the errors `put` and `put_writes` give
/// (malformed msgpack: `Serde`; an id that is not the checkpoint's, an empty
/// id, writes without a checkpoint id: `InvalidInput`), and nothing is stored.
pub async fn encoded_bad_input_is_refused_as_decoded(saver: &dyn CheckpointSaver) -> CheckResult {
    let enc = encoded_of(saver)?;
    let t = new_thread_id();
    let config = generate_config(&t);
    let cp = sample_checkpoint();
    let meta = generate_metadata("input", -1);
    let good = dumps(&cp.to_value(true))?;
    let truncated = TypedBytes::new("msgpack", good.data.slice(..good.data.len() - 1));
    let bad_msgpack = [TypedBytes::new("msgpack", vec![0xc1]), truncated];
    for bytes in bad_msgpack.iter().cloned() {
        let got = enc
            .put_encoded(&config, &cp.id, bytes, &meta, &cp.channel_versions)
            .await;
        ensure!(
            matches!(got, Err(Error::Serde { .. })),
            "malformed checkpoint bytes: {got:?}"
        );
    }
    let got = enc
        .put_encoded(&config, "another-id", good.clone(), &meta, &cp.channel_versions)
        .await;
    ensure!(
        matches!(got, Err(Error::InvalidInput { .. })),
        "an id that is not the checkpoint's: {got:?}"
    );
    let got = enc.put_encoded(&config, "", good, &meta, &cp.channel_versions).await;
    ensure!(
        matches!(got, Err(Error::InvalidInput { .. })),
        "an empty checkpoint id: {got:?}"
    );
    ensure!(
        saver.get_tuple(&config).await?.is_none(),
        "a refused put_encoded stored a checkpoint"
    );

    let stored = saver.put(&config, &cp, &meta, &cp.channel_versions).await?;
    for bytes in bad_msgpack {
        let got = enc
            .put_writes_encoded(&stored, vec![("text".to_owned(), bytes)], "task", "")
            .await;
        ensure!(
            matches!(got, Err(Error::Serde { .. })),
            "malformed write bytes: {got:?}"
        );
    }
    let no_id = generate_config(&t);
    let decoded = saver
        .put_writes(&no_id, &[("text".to_owned(), Value::Int(1))], "task", "")
        .await;
    let encoded = enc
        .put_writes_encoded(&no_id, vec![("text".to_owned(), dumps(&Value::Int(1))?)], "task", "")
        .await;
    ensure!(
        matches!(encoded, Err(Error::InvalidInput { .. })),
        "writes without a checkpoint id: {encoded:?}"
    );
    ensure_eq!(
        encoded.as_ref().map_err(std::mem::discriminant),
        decoded.as_ref().map_err(std::mem::discriminant),
        "the error of put_writes_encoded against put_writes"
    );
    let read = get(saver, &stored).await?;
    ensure!(
        read.pending_writes.is_empty(),
        "refused writes were stored: {:?}",
        read.pending_writes
    );
    Ok(())
}
