//! The data model: checkpoints, their metadata, pending writes (see
//! `docs/design.md`, *Checkpoints*, *Checkpoint metadata* and *Pending writes*).

mod shared_map;
mod step;

use std::sync::Arc;

use indexmap::IndexMap;

pub use shared_map::SharedMap;
pub use step::StepCheckpoint;

use crate::config::CheckpointConfig;
use crate::serde::Value;
use crate::version::ChannelVersion;

/// The checkpoint format version written by this crate (LangGraph's current).
pub const CHECKPOINT_VERSION: i64 = 4;

/// Channel values by channel name, in insertion order (shared: see [`SharedMap`]).
pub type ChannelValues = SharedMap<String, Value>;
/// Channel versions by channel name, in insertion order (shared: see [`SharedMap`]).
pub type ChannelVersions = SharedMap<String, ChannelVersion>;

/// A snapshot of a graph's state at one super-step (see `docs/design.md`,
/// *Checkpoints*).
///
/// Cloning is cheap: the maps and `updated_channels` are shared
/// ([`SharedMap`], `Arc`) and channel values share their lists and maps, so a
/// clone copies the id and timestamp strings and nothing else. Savers store
/// the checkpoint `put` is given this way and hand it back the same way;
/// changing a map of a clone copies that map first, never touching the other
/// holders' view.
///
/// ```
/// use checkpointer::{Checkpoint, Value};
/// let mut cp = Checkpoint::new(0);
/// cp.channel_values.insert("messages".to_owned(), Value::from(vec!["hi"]));
/// let mut next = cp.clone(); // shares every map with `cp`
/// assert!(next.channel_values.ptr_eq(&cp.channel_values));
/// next.channel_values.insert("step".to_owned(), Value::from(1));
/// assert_eq!((cp.channel_values.len(), next.channel_values.len()), (1, 2));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Format version: 4 on write; 1–4 accepted on read.
    pub v: i64,
    /// The checkpoint id: a uuid6 string, unique and time-sortable.
    pub id: String,
    /// Creation time, ISO 8601 with offset (Python's `isoformat()`).
    pub ts: String,
    /// The value of every channel that has one.
    pub channel_values: ChannelValues,
    /// The current version of every channel ever written.
    pub channel_versions: ChannelVersions,
    /// For each node, the channel versions it had seen when it last ran.
    pub versions_seen: SharedMap<String, ChannelVersions>,
    /// Channels written in the step that produced this checkpoint (shared:
    /// cloning a checkpoint does not copy the list).
    pub updated_channels: Option<Arc<[String]>>,
    /// Sends of checkpoints older than v4, kept as read.
    pub pending_sends: Option<Vec<Value>>,
    /// Keys this crate does not know, kept in order so they survive a round trip.
    pub extra: Vec<(String, Value)>,
}

impl Checkpoint {
    /// An empty v4 checkpoint with a fresh id (clock sequence = `step`) and the
    /// current time.
    pub fn new(step: i64) -> Self {
        Checkpoint::with_identity(CHECKPOINT_VERSION, crate::id::checkpoint_id(step), crate::id::now_iso())
    }

    /// The greatest of the channel versions, `None` when no channel has one.
    /// LangGraph gives every channel a step changes the same new version,
    /// `get_next_version(max_version)`; pass this to the saver's
    /// [`get_next_version`](crate::CheckpointSaver::get_next_version) to do
    /// the same.
    ///
    /// ```
    /// use checkpointer::{Checkpoint, ChannelVersion};
    /// let mut cp = Checkpoint::new(0);
    /// assert_eq!(cp.max_version(), None);
    /// cp.channel_versions.insert("a".to_owned(), ChannelVersion::Int(3));
    /// cp.channel_versions.insert("b".to_owned(), ChannelVersion::Int(7));
    /// assert_eq!(cp.max_version(), Some(&ChannelVersion::Int(7)));
    /// ```
    pub fn max_version(&self) -> Option<&ChannelVersion> {
        self.channel_versions.values().max()
    }

    /// A checkpoint with the given format version, id and timestamp and
    /// nothing else.
    fn with_identity(v: i64, id: String, ts: String) -> Self {
        Checkpoint {
            v,
            id,
            ts,
            channel_values: SharedMap::new(),
            channel_versions: SharedMap::new(),
            versions_seen: SharedMap::new(),
            updated_channels: None,
            pending_sends: None,
            extra: Vec::new(),
        }
    }
}

/// What produced a checkpoint (see `docs/design.md`, *Checkpoint metadata*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckpointSource {
    /// The input checkpoint of an invoke or stream.
    Input,
    /// A loop step.
    Loop,
    /// A manual state update.
    Update,
    /// A copy made to fork a thread.
    Fork,
}

impl CheckpointSource {
    /// The string stored in metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointSource::Input => "input",
            CheckpointSource::Loop => "loop",
            CheckpointSource::Update => "update",
            CheckpointSource::Fork => "fork",
        }
    }

    /// Parses a stored source string.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "input" => CheckpointSource::Input,
            "loop" => CheckpointSource::Loop,
            "update" => CheckpointSource::Update,
            "fork" => CheckpointSource::Fork,
            _ => return None,
        })
    }
}

/// Metadata of a checkpoint: an ordered map of JSON-like values with typed
/// accessors for the keys LangGraph defines (see `docs/design.md`,
/// *Checkpoint metadata*).
///
/// Every key is kept in its order, so metadata read from a store and written
/// again produces the same bytes. The map is a [`SharedMap`]: cloning
/// metadata (as savers do when they store and return it) copies nothing.
///
/// ```
/// use checkpointer::{CheckpointMetadata, CheckpointSource};
/// let mut m = CheckpointMetadata::new(CheckpointSource::Loop, 3);
/// m.insert("user", "ada");
/// assert_eq!(m.step(), Some(3));
/// assert_eq!(m.source(), Some(CheckpointSource::Loop));
/// assert_eq!(m.keys().collect::<Vec<_>>(), ["source", "step", "parents", "user"]);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckpointMetadata(pub SharedMap<String, Value>);

impl CheckpointMetadata {
    /// `{"source": source, "step": step, "parents": {}}`, the runtime's shape.
    pub fn new(source: CheckpointSource, step: i64) -> Self {
        let mut m = IndexMap::new();
        m.insert("source".to_owned(), Value::from(source.as_str()));
        m.insert("step".to_owned(), Value::Int(step));
        m.insert("parents".to_owned(), Value::Map(Vec::new().into()));
        CheckpointMetadata(m.into())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// Sets `key`, keeping its position when it exists.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) -> &mut Self {
        self.0.insert(key.into(), value.into());
        self
    }

    /// Removes `key`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.shift_remove(key)
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// `source`, when present and one of the four known values.
    pub fn source(&self) -> Option<CheckpointSource> {
        self.get("source")
            .and_then(Value::as_str)
            .and_then(CheckpointSource::parse)
    }

    /// `step`, when present and an integer.
    pub fn step(&self) -> Option<i64> {
        self.get("step").and_then(Value::as_i64)
    }

    /// `run_id`, when present and a string.
    pub fn run_id(&self) -> Option<&str> {
        self.get("run_id").and_then(Value::as_str)
    }

    /// `parents`: namespace → checkpoint id of the enclosing graphs.
    pub fn parents(&self) -> Vec<(&str, &str)> {
        match self.get("parents") {
            Some(Value::Map(entries)) => entries
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?, v.as_str()?)))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// A checkpoint with everything a reader needs to resume from it (see
/// `docs/design.md`, *Checkpoints*).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::prelude::*;
/// let saver = InMemorySaver::new();
/// let cp = Checkpoint::new(0);
/// let config = CheckpointConfig::new("t");
/// let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
/// let stored = saver.put(&config, &cp, &meta, &ChannelVersions::new()).await?;
/// saver.put_writes(&stored, &[("out".to_owned(), Value::from(1))], "task-1", "").await?;
/// let tuple = saver.get_tuple(&stored).await?.expect("stored");
/// assert_eq!(tuple.config, stored);
/// assert_eq!(tuple.metadata.step(), Some(0));
/// assert!(tuple.parent_config.is_none());
/// assert_eq!(tuple.pending_writes[0].task_id, "task-1");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointTuple {
    /// Where the checkpoint is stored (thread, namespace, id).
    pub config: CheckpointConfig,
    /// The checkpoint with its channel values filled in.
    pub checkpoint: Checkpoint,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// The parent checkpoint, if any.
    pub parent_config: Option<CheckpointConfig>,
    /// Writes saved against this checkpoint, sorted by (task_path, task_id, idx).
    pub pending_writes: Vec<PendingWrite>,
}

impl CheckpointTuple {
    /// The tuple of `checkpoint`, just stored at `config` as the child of
    /// the checkpoint `parent` names (none when `parent` names none): what
    /// `put_step` and `put_step_with_writes` hand back, with no pending
    /// writes yet.
    pub(crate) fn stored(
        config: CheckpointConfig,
        parent: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
    ) -> CheckpointTuple {
        let parent_config = parent
            .checkpoint_id()
            .filter(|id| !id.is_empty())
            .map(|id| config.clone().with_checkpoint_id(id));
        CheckpointTuple {
            config,
            checkpoint: checkpoint.clone(),
            metadata: metadata.clone(),
            parent_config,
            pending_writes: Vec::new(),
        }
    }
}

/// One write a task made, saved before the next checkpoint (see
/// `docs/design.md`, *Pending writes*).
///
/// Besides what LangGraph's `(task_id, channel, value)` triple holds, a
/// stored write carries its key: the task path given to `put_writes` and its
/// index (the position in its call, or the fixed negative index of a special
/// channel such as [`channels::ERROR`]). With them a thread can be copied
/// exactly, from any backend to any other.
///
/// ```
/// use checkpointer::checkpoint::channels;
/// use checkpointer::PendingWrite;
///
/// let w = PendingWrite::new("task-1", "messages", "hi").with_task_path("~__pregel_pull, agent");
/// assert_eq!((w.task_path.as_str(), w.idx), ("~__pregel_pull, agent", 0));
/// // a special channel's index is fixed, whatever its position
/// assert_eq!(PendingWrite::new("task-1", channels::ERROR, "boom").idx, -1);
/// assert_eq!(PendingWrite::new("task-1", "messages", "again").with_idx(1).idx, 1);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PendingWrite {
    /// The task that made the write.
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The value written.
    pub value: Value,
    /// The task path given to `put_writes` (`""` when none was).
    pub task_path: String,
    /// The write's index within its task: its position in the `put_writes`
    /// call, or the fixed negative index of a special channel.
    pub idx: i64,
}

impl PendingWrite {
    /// Builds a pending write with an empty task path and the index
    /// `put_writes` would give it as the first write of a call: 0, or the
    /// fixed index of a special channel.
    pub fn new(task_id: impl Into<String>, channel: impl Into<String>, value: impl Into<Value>) -> Self {
        let channel = channel.into();
        PendingWrite {
            task_id: task_id.into(),
            idx: write_idx(&channel, 0),
            channel,
            value: value.into(),
            task_path: String::new(),
        }
    }

    /// The same write with this task path.
    #[must_use]
    pub fn with_task_path(mut self, task_path: impl Into<String>) -> Self {
        self.task_path = task_path.into();
        self
    }

    /// The same write at this index.
    #[must_use]
    pub fn with_idx(mut self, idx: i64) -> Self {
        self.idx = idx;
        self
    }
}

/// The delta channels a checkpoint's metadata names as rebuilt from history:
/// the keys of `counters_since_delta_snapshot` (LangGraph) and of
/// `delta_writes_versioned` (LangGraph.js; a list of names is accepted too).
/// A delta channel snapshotted at this checkpoint has no counter and a stored
/// value, so it needs no history.
pub fn delta_channels(metadata: &CheckpointMetadata) -> Vec<&str> {
    let mut out = Vec::new();
    for key in ["counters_since_delta_snapshot", "delta_writes_versioned"] {
        match metadata.get(key) {
            Some(Value::Map(entries)) => out.extend(entries.iter().filter_map(|(k, _)| k.as_str())),
            Some(Value::Array(items)) => out.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

/// The task id used for writes that no task produced.
pub const NULL_TASK_ID: &str = "00000000-0000-0000-0000-000000000000";

/// LangGraph's reserved channel names.
pub mod channels {
    /// A task's error.
    pub const ERROR: &str = "__error__";
    /// A scheduled task.
    pub const SCHEDULED: &str = "__scheduled__";
    /// An interrupt raised by a task.
    pub const INTERRUPT: &str = "__interrupt__";
    /// A value to resume an interrupt with.
    pub const RESUME: &str = "__resume__";
    /// Sends scheduled for the next step.
    pub const TASKS: &str = "__pregel_tasks";
    /// The graph input.
    pub const START: &str = "__start__";
}

/// The fixed write index of a special channel (LangGraph's `WRITES_IDX_MAP`),
/// `None` for regular channels.
pub fn special_write_idx(channel: &str) -> Option<i64> {
    match channel {
        channels::ERROR => Some(-1),
        channels::SCHEDULED => Some(-2),
        channels::INTERRUPT => Some(-3),
        channels::RESUME => Some(-4),
        _ => None,
    }
}

/// The stored index of the write at `position` of a `put_writes` call.
pub fn write_idx(channel: &str, position: usize) -> i64 {
    special_write_idx(channel).unwrap_or(position as i64)
}

/// Config keys never copied into metadata (see `docs/design.md`, *Checkpoint
/// metadata*).
const EXCLUDED_METADATA_KEYS: [&str; 9] = [
    "thread_id",
    "checkpoint_id",
    "checkpoint_ns",
    "checkpoint_map",
    "langgraph_step",
    "langgraph_node",
    "langgraph_triggers",
    "langgraph_path",
    "langgraph_checkpoint_ns",
];

fn strip_nul(v: &Value) -> Value {
    match v {
        Value::Str(s) if s.contains('\0') => Value::from(s.replace('\0', "")),
        other => other.clone(),
    }
}

/// Builds the metadata LangGraph stores for a `put` made with run config:
/// top-level string values lose U+0000; then every scalar entry (string,
/// integer, boolean, float) of `run_metadata` and then of `configurable` is
/// added unless its key is already present, starts with `__`, or is one of
/// LangGraph's reserved config keys (see `docs/design.md`, *Checkpoint
/// metadata*, for the list and an example).
///
/// ```
/// use checkpointer::{checkpoint::merge_run_metadata, CheckpointMetadata, CheckpointSource, Value};
/// let m = CheckpointMetadata::new(CheckpointSource::Loop, 0);
/// let run = [("run_id".to_string(), Value::from("r")), ("source".to_string(), Value::from("IGNORED"))];
/// let conf = [("user_id".to_string(), Value::from("u1")), ("__secret".to_string(), Value::from("x"))];
/// let merged = merge_run_metadata(&m, &run, &conf);
/// assert_eq!(merged.keys().collect::<Vec<_>>(), ["source", "step", "parents", "run_id", "user_id"]);
/// ```
pub fn merge_run_metadata(
    metadata: &CheckpointMetadata,
    run_metadata: &[(String, Value)],
    configurable: &[(String, Value)],
) -> CheckpointMetadata {
    let mut out: IndexMap<String, Value> = metadata.0.iter().map(|(k, v)| (k.clone(), strip_nul(v))).collect();
    for (key, value) in run_metadata.iter().chain(configurable) {
        if out.contains_key(key) || key.starts_with("__") || EXCLUDED_METADATA_KEYS.contains(&key.as_str()) {
            continue;
        }
        if matches!(
            value,
            Value::Str(_) | Value::Int(_) | Value::UInt(_) | Value::Bool(_) | Value::Float(_) | Value::F32(_)
        ) {
            out.insert(key.clone(), strip_nul(value));
        }
    }
    CheckpointMetadata(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_indexes() {
        assert_eq!(write_idx("__error__", 5), -1);
        assert_eq!(write_idx("__scheduled__", 5), -2);
        assert_eq!(write_idx("__interrupt__", 5), -3);
        assert_eq!(write_idx("__resume__", 5), -4);
        assert_eq!(write_idx("__pregel_tasks", 5), 5);
        assert_eq!(write_idx("items", 1), 1);
    }

    #[test]
    fn merge_matches_python_example() {
        // What Python stores for the example of docs/design.md, Checkpoint metadata
        let mut m = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        m.insert("note", "a\0b");
        m.insert("tup", Value::Array(vec![Value::Int(1), Value::Int(2)].into()));
        let run = vec![
            ("run_id".to_owned(), Value::from("r")),
            ("source".to_owned(), Value::from("IGNORED")),
            ("tag".to_owned(), Value::from("é\0z")),
        ];
        let conf = vec![
            ("thread_id".to_owned(), Value::from("t")),
            ("checkpoint_ns".to_owned(), Value::from("")),
            ("user_id".to_owned(), Value::from("u1")),
            ("n".to_owned(), Value::Int(3)),
            ("__secret".to_owned(), Value::from("x")),
            ("obj".to_owned(), Value::Map(vec![].into())),
            ("langgraph_step".to_owned(), Value::Int(4)),
        ];
        let merged = merge_run_metadata(&m, &run, &conf);
        let keys: Vec<_> = merged.keys().collect();
        assert_eq!(
            keys,
            ["source", "step", "parents", "note", "tup", "run_id", "tag", "user_id", "n"]
        );
        assert_eq!(merged.get("note"), Some(&Value::from("ab")));
        assert_eq!(merged.get("tag"), Some(&Value::from("éz")));
        assert_eq!(merged.get("source"), Some(&Value::from("loop")));
    }
}

fn versions_to_value(versions: &ChannelVersions) -> Value {
    Value::Map(
        versions
            .iter()
            .map(|(k, v)| (Value::Str(k.as_str().into()), v.to_value()))
            .collect(),
    )
}

fn versions_from_value(v: &Value, what: &str) -> crate::Result<ChannelVersions> {
    let entries = v
        .as_map()
        .ok_or_else(|| crate::Error::serde(format!("checkpoint {what} is not a map")))?;
    entries
        .iter()
        .map(|(k, v)| {
            let key = k
                .as_str()
                .ok_or_else(|| crate::Error::serde(format!("checkpoint {what} has a non-string key")))?;
            let version = ChannelVersion::from_value(v)
                .ok_or_else(|| crate::Error::serde(format!("checkpoint {what}[{key:?}] is not a version")))?;
            Ok((key.to_owned(), version))
        })
        .collect()
}

impl Checkpoint {
    /// The checkpoint as the msgpack map Python stores: keys `v, ts, id,
    /// channel_values, channel_versions, versions_seen, updated_channels`, then
    /// `pending_sends` when present, then unknown keys in their order.
    /// `channel_values` is left out when `include_channel_values` is false (the
    /// form blob-based savers store).
    pub fn to_value(&self, include_channel_values: bool) -> Value {
        let mut m: Vec<(Value, Value)> = Vec::with_capacity(8 + self.extra.len());
        m.push((Value::from("v"), Value::Int(self.v)));
        m.push((Value::from("ts"), Value::Str(self.ts.as_str().into())));
        m.push((Value::from("id"), Value::Str(self.id.as_str().into())));
        if include_channel_values {
            let values = self
                .channel_values
                .iter()
                .map(|(k, v)| (Value::Str(k.as_str().into()), v.clone()))
                .collect();
            m.push((Value::from("channel_values"), Value::Map(values)));
        }
        m.push((
            Value::from("channel_versions"),
            versions_to_value(&self.channel_versions),
        ));
        let seen = self
            .versions_seen
            .iter()
            .map(|(node, vs)| (Value::Str(node.as_str().into()), versions_to_value(vs)))
            .collect();
        m.push((Value::from("versions_seen"), Value::Map(seen)));
        let updated = match &self.updated_channels {
            Some(chs) => Value::Array(chs.iter().map(|c| Value::Str(c.as_str().into())).collect()),
            None => Value::Nil,
        };
        m.push((Value::from("updated_channels"), updated));
        if let Some(sends) = &self.pending_sends {
            m.push((Value::from("pending_sends"), Value::Array(sends.clone().into())));
        }
        for (k, v) in &self.extra {
            m.push((Value::Str(k.as_str().into()), v.clone()));
        }
        Value::Map(m.into())
    }

    /// Reads a stored checkpoint map (v 1–4). Missing `channel_values`,
    /// `channel_versions` or `versions_seen` read as empty.
    ///
    /// # Errors
    /// [`crate::Error::Serde`] when the value is not a checkpoint map, a required
    /// key (`v`, `id`, `ts`) is missing or of the wrong type, or `v` is not 1–4.
    pub fn from_value(value: &Value) -> crate::Result<Checkpoint> {
        let entries = value
            .as_map()
            .ok_or_else(|| crate::Error::serde("checkpoint is not a map"))?;
        let mut v = None;
        let mut id = None;
        let mut ts = None;
        let mut cp = Checkpoint::with_identity(0, String::new(), String::new());
        for (k, val) in entries {
            let key = k
                .as_str()
                .ok_or_else(|| crate::Error::serde("checkpoint has a non-string key"))?;
            match key {
                "v" => v = val.as_i64(),
                "id" => id = val.as_str().map(str::to_owned),
                "ts" => ts = val.as_str().map(str::to_owned),
                "channel_values" => {
                    let map = val
                        .as_map()
                        .ok_or_else(|| crate::Error::serde("checkpoint channel_values is not a map"))?;
                    cp.channel_values.reserve(map.len());
                    for (ck, cv) in map {
                        let name = ck
                            .as_str()
                            .ok_or_else(|| crate::Error::serde("checkpoint channel_values has a non-string key"))?;
                        cp.channel_values.insert(name.to_owned(), cv.clone());
                    }
                }
                "channel_versions" => cp.channel_versions = versions_from_value(val, "channel_versions")?,
                "versions_seen" => {
                    let map = val
                        .as_map()
                        .ok_or_else(|| crate::Error::serde("checkpoint versions_seen is not a map"))?;
                    for (node, vs) in map {
                        let node = node
                            .as_str()
                            .ok_or_else(|| crate::Error::serde("checkpoint versions_seen has a non-string key"))?;
                        cp.versions_seen
                            .insert(node.to_owned(), versions_from_value(vs, "versions_seen")?);
                    }
                }
                "updated_channels" => {
                    cp.updated_channels = match val {
                        Value::Nil => None,
                        Value::Array(items) => Some(
                            items
                                .iter()
                                .map(|c| c.as_str().map(str::to_owned))
                                .collect::<Option<Arc<[String]>>>()
                                .ok_or_else(|| crate::Error::serde("checkpoint updated_channels holds a non-string"))?,
                        ),
                        _ => return Err(crate::Error::serde("checkpoint updated_channels is not a list")),
                    }
                }
                "pending_sends" => {
                    cp.pending_sends = match val {
                        Value::Array(items) => Some(items.to_vec()),
                        Value::Nil => None,
                        _ => return Err(crate::Error::serde("checkpoint pending_sends is not a list")),
                    }
                }
                _ => cp.extra.push((key.to_owned(), val.clone())),
            }
        }
        cp.v = v.ok_or_else(|| crate::Error::serde("checkpoint has no integer `v`"))?;
        if !(1..=CHECKPOINT_VERSION).contains(&cp.v) {
            return Err(crate::Error::serde(format!(
                "checkpoint format v{} is not supported (1–{CHECKPOINT_VERSION})",
                cp.v
            )));
        }
        cp.id = id.ok_or_else(|| crate::Error::serde("checkpoint has no string `id`"))?;
        cp.ts = ts.ok_or_else(|| crate::Error::serde("checkpoint has no string `ts`"))?;
        Ok(cp)
    }
}

impl CheckpointMetadata {
    /// The metadata as a msgpack map value.
    pub fn to_value(&self) -> Value {
        Value::Map(
            self.0
                .iter()
                .map(|(k, v)| (Value::Str(k.as_str().into()), v.clone()))
                .collect(),
        )
    }

    /// Reads metadata from a map value.
    ///
    /// # Errors
    /// [`crate::Error::Serde`] when the value is not a map with string keys.
    pub fn from_value(value: &Value) -> crate::Result<Self> {
        let entries = match value {
            Value::Nil => return Ok(CheckpointMetadata::default()),
            Value::Map(entries) => entries,
            _ => return Err(crate::Error::serde("metadata is not a map")),
        };
        let mut m = IndexMap::with_capacity(entries.len());
        for (k, v) in entries {
            let key = match k {
                Value::Str(s) => s.as_str().to_owned(),
                _ => return Err(crate::Error::serde("metadata has a non-string key")),
            };
            m.insert(key, v.clone());
        }
        Ok(CheckpointMetadata(m.into()))
    }
}

#[cfg(test)]
mod codec_tests {
    use super::*;
    use crate::serde::msgpack;

    const GOLDEN: &str = "87a17604a27473d920323032342d30352d30345430363a33323a34322e3233353434342b30303a3030a26964d92431656630396530312d633335342d366530382d383030312d386131353033663962383735ae6368616e6e656c5f76616c75657383a46e616d65a46d656f77a56974656d739201a161a4666c6167c0b06368616e6e656c5f76657273696f6e7384a46e616d65d92430303030303030303030303030303030303030303030303030303030303030312e302e35a56974656d73d92530303030303030303030303030303030303030303030303030303030303030322e302e3235a4666c6167d92530303030303030303030303030303030303030303030303030303030303030322e302e3235a4676f6e65d92530303030303030303030303030303030303030303030303030303030303030322e302e3235ad76657273696f6e735f7365656e82a95f5f696e7075745f5f80a46e6f646581a46e616d65d92430303030303030303030303030303030303030303030303030303030303030312e302e35b0757064617465645f6368616e6e656c7391a56974656d73";

    #[test]
    fn golden_sqlite_checkpoint_round_trips() {
        let bytes = hex::decode(GOLDEN).unwrap();
        let cp = Checkpoint::from_value(&msgpack::decode(&bytes).unwrap()).unwrap();
        assert_eq!(cp.v, 4);
        assert_eq!(cp.id, "1ef09e01-c354-6e08-8001-8a1503f9b875");
        assert_eq!(cp.channel_values.keys().collect::<Vec<_>>(), ["name", "items", "flag"]);
        assert_eq!(cp.channel_versions["items"].counter(), Some(2));
        assert_eq!(cp.updated_channels.as_deref(), Some(&["items".to_owned()][..]));
        assert_eq!(msgpack::encode(&cp.to_value(true)).unwrap(), bytes);
        // without channel_values: the InMemory skeleton, header 0x86
        let skeleton = msgpack::encode(&cp.to_value(false)).unwrap();
        assert_eq!(skeleton[0], 0x86);
    }

    #[test]
    fn rejects_unknown_format_versions() {
        let mut cp = Checkpoint::new(0);
        cp.v = 9;
        assert!(Checkpoint::from_value(&cp.to_value(true)).is_err());
        cp.v = 1;
        cp.pending_sends = Some(vec![Value::Int(1)]);
        let back = Checkpoint::from_value(&cp.to_value(true)).unwrap();
        assert_eq!(back, cp);
    }

    #[test]
    fn metadata_vector() {
        let m = CheckpointMetadata::new(CheckpointSource::Loop, 1);
        assert_eq!(
            msgpack::encode(&m.to_value()).unwrap(),
            hex::decode("83a6736f75726365a46c6f6f70a47374657001a7706172656e747380").unwrap()
        );
    }
}
