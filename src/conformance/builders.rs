//! Builders, as LangGraph's conformance suite has them, and the helpers the
//! checks share.

use crate::checkpoint::{ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::saver::{CheckpointSaver, CheckpointSaverExt, ListOptions};
use crate::serde::Value;
use crate::version::{first_version, next_version, ChannelVersion};

use super::CheckFailure;

/// The metadata key checks use to find their own checkpoints in listings over
/// the whole store.
pub const MARKER_KEY: &str = "conformance_marker";

/// A fresh random thread id (uuid v4).
pub fn new_thread_id() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string()
}

/// A config for the root namespace of `thread_id`, without a checkpoint id.
pub fn generate_config(thread_id: &str) -> CheckpointConfig {
    CheckpointConfig::new(thread_id)
}

/// An empty v4 checkpoint with a fresh, increasing id and the current time.
pub fn generate_checkpoint() -> Checkpoint {
    Checkpoint::new(-1)
}

/// `{"source": source, "step": step, "parents": {}}`.
pub fn generate_metadata(source: &str, step: i64) -> CheckpointMetadata {
    let mut m = CheckpointMetadata::default();
    m.insert("source", source);
    m.insert("step", step);
    m.insert("parents", Value::Map(Vec::new().into()));
    m
}

/// A checkpoint holding `values`, with channel versions `versions`.
pub(crate) fn checkpoint_with(values: &[(&str, Value)], versions: &[(&str, ChannelVersion)]) -> Checkpoint {
    let mut cp = generate_checkpoint();
    for (ch, v) in values {
        cp.channel_values.insert((*ch).to_owned(), v.clone());
    }
    cp.channel_versions = channel_versions(versions);
    cp
}

/// A version map.
pub(crate) fn channel_versions(pairs: &[(&str, ChannelVersion)]) -> ChannelVersions {
    pairs.iter().map(|(ch, v)| ((*ch).to_owned(), v.clone())).collect()
}

/// A LangGraph string version whose counter is `n` (random fraction).
pub(crate) fn str_version(n: i64) -> ChannelVersion {
    // an integer's successor is a string version, above every integer: never refused
    next_version(Some(&ChannelVersion::Int(n.saturating_sub(1)))).unwrap_or_else(|_| first_version())
}

/// Metadata carrying the marker `marker`.
pub(crate) fn marked_metadata(source: &str, step: i64, marker: &str) -> CheckpointMetadata {
    let mut m = generate_metadata(source, step);
    m.insert(MARKER_KEY, marker);
    m
}

/// List options filtering on the marker `marker`.
pub(crate) fn marker_filter(marker: &str) -> ListOptions {
    ListOptions::default().filter(MARKER_KEY, marker)
}

/// Puts `checkpoint` with every channel of its `channel_versions` as new.
pub(crate) async fn put_all(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    checkpoint: &Checkpoint,
    metadata: &CheckpointMetadata,
) -> Result<CheckpointConfig, CheckFailure> {
    Ok(saver
        .put(config, checkpoint, metadata, &checkpoint.channel_versions)
        .await?)
}

/// Puts `n` checkpoints chained by parent in (thread, namespace of `config`),
/// checkpoint `i` with metadata `("loop", i)` and channel `"step"` = `i`;
/// returns the configs `put` returned, oldest first.
pub(crate) async fn put_chain(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    n: i64,
) -> Result<Vec<CheckpointConfig>, CheckFailure> {
    let mut out = Vec::new();
    let mut parent = config.clone();
    for i in 0..n {
        let cp = checkpoint_with(&[("step", Value::Int(i))], &[("step", ChannelVersion::Int(i + 1))]);
        let md = generate_metadata("loop", i);
        let stored = put_all(saver, &parent, &cp, &md).await?;
        out.push(stored.clone());
        parent = stored;
    }
    Ok(out)
}

/// Stores `writes` of `task_id` against `config`'s checkpoint.
pub(crate) async fn put_writes(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    writes: &[(&str, Value)],
    task_id: &str,
    task_path: &str,
) -> Result<(), CheckFailure> {
    let writes: Vec<(String, Value)> = writes.iter().map(|(c, v)| ((*c).to_owned(), v.clone())).collect();
    saver.put_writes(config, &writes, task_id, task_path).await?;
    Ok(())
}

/// The tuple `config` names, failing the check when there is none.
pub(crate) async fn get(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
) -> Result<CheckpointTuple, CheckFailure> {
    match saver.get_tuple(config).await? {
        Some(t) => Ok(t),
        None => Err(CheckFailure::new(format!("get_tuple({config:?}) returned None"))),
    }
}

/// `list` collected.
pub(crate) async fn list(
    saver: &dyn CheckpointSaver,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> Result<Vec<CheckpointTuple>, CheckFailure> {
    Ok(saver.list_vec(config, options).await?)
}

/// The checkpoint ids `list` yields, in order.
pub(crate) async fn list_ids(
    saver: &dyn CheckpointSaver,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> Result<Vec<String>, CheckFailure> {
    Ok(list(saver, config, options)
        .await?
        .into_iter()
        .map(|t| t.checkpoint.id)
        .collect())
}

/// The checkpoint ids of configs.
pub(crate) fn ids(configs: &[CheckpointConfig]) -> Vec<String> {
    configs
        .iter()
        .map(|c| c.checkpoint_id.clone().unwrap_or_default())
        .collect()
}

/// The id a config returned by `put` names.
pub(crate) fn id_of(config: &CheckpointConfig) -> String {
    config.checkpoint_id.clone().unwrap_or_default()
}

/// A pending write.
pub(crate) fn pw(task_id: &str, channel: &str, value: impl Into<Value>) -> PendingWrite {
    PendingWrite::new(task_id, channel, value)
}

/// A config naming one stored checkpoint, as savers return them.
pub(crate) fn stored_config(thread_id: &str, ns: &str, checkpoint_id: &str) -> CheckpointConfig {
    CheckpointConfig {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: Some(ns.to_owned()),
        checkpoint_id: Some(checkpoint_id.to_owned()),
    }
}

/// Whether two metadata maps hold the same keys with JSON-equal values.
pub(crate) fn metadata_eq(a: &CheckpointMetadata, b: &CheckpointMetadata) -> bool {
    a.0.len() == b.0.len()
        && a.0
            .iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| crate::saver::json_eq(v, w)))
}

/// Puts an empty checkpoint with metadata `(source, step)` below `config`.
pub(crate) async fn put_empty(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    source: &str,
    step: i64,
) -> Result<CheckpointConfig, CheckFailure> {
    put_all(saver, config, &generate_checkpoint(), &generate_metadata(source, step)).await
}

/// Fails unless channel `channel` of `tuple` holds the string `expected`
/// (`None`: no value), saying `what` was read.
pub(crate) fn has_value(
    tuple: &CheckpointTuple,
    channel: &str,
    expected: Option<&str>,
    what: &str,
) -> Result<(), CheckFailure> {
    let expected = expected.map(Value::from);
    ensure_eq!(
        tuple.checkpoint.channel_values.get(channel),
        expected.as_ref(),
        "{what} (channel {channel:?} of checkpoint {})",
        tuple.checkpoint.id
    );
    Ok(())
}

/// Puts `checkpoint` naming only the channels of `new` as new versions.
pub(crate) async fn put_new(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    checkpoint: &Checkpoint,
    metadata: &CheckpointMetadata,
    new: &[(&str, ChannelVersion)],
) -> Result<CheckpointConfig, CheckFailure> {
    Ok(saver.put(config, checkpoint, metadata, &channel_versions(new)).await?)
}

/// Stores `writes` of task `task1` against `config`'s checkpoint, then
/// fails unless its pending writes are `expected`, saying `what` was read.
pub(crate) async fn pending_after(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    writes: &[(&str, Value)],
    expected: Vec<PendingWrite>,
    what: &str,
) -> Result<(), CheckFailure> {
    put_writes(saver, config, writes, "task1", "").await?;
    ensure_eq!(get(saver, config).await?.pending_writes, expected, "{what}");
    Ok(())
}
