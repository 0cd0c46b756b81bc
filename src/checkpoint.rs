//! The data model: checkpoints, their metadata, pending writes (spec §1).

use indexmap::IndexMap;

use crate::config::CheckpointConfig;
use crate::serde::Value;
use crate::version::ChannelVersion;

/// The checkpoint format version written by this crate (LangGraph's current).
pub const CHECKPOINT_VERSION: i64 = 4;

/// Channel values by channel name, in insertion order.
pub type ChannelValues = IndexMap<String, Value>;
/// Channel versions by channel name, in insertion order.
pub type ChannelVersions = IndexMap<String, ChannelVersion>;

/// A snapshot of a graph's state at one super-step (spec §1.2).
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
    pub versions_seen: IndexMap<String, ChannelVersions>,
    /// Channels written in the step that produced this checkpoint.
    pub updated_channels: Option<Vec<String>>,
    /// Sends of checkpoints older than v4, kept as read.
    pub pending_sends: Option<Vec<Value>>,
    /// Keys this crate does not know, kept in order so they survive a round trip.
    pub extra: Vec<(String, Value)>,
}

impl Checkpoint {
    /// An empty v4 checkpoint with a fresh id (clock sequence = `step`) and the
    /// current time.
    pub fn new(step: i64) -> Self {
        Checkpoint {
            v: CHECKPOINT_VERSION,
            id: crate::id::checkpoint_id(step),
            ts: crate::id::now_iso(),
            channel_values: IndexMap::new(),
            channel_versions: IndexMap::new(),
            versions_seen: IndexMap::new(),
            updated_channels: None,
            pending_sends: None,
            extra: Vec::new(),
        }
    }
}

/// What produced a checkpoint (spec §1.3).
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
/// accessors for the keys LangGraph defines (spec §1.3).
///
/// Every key is kept in its order, so metadata read from a store and written
/// again produces the same bytes.
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
pub struct CheckpointMetadata(pub IndexMap<String, Value>);

impl CheckpointMetadata {
    /// `{"source": source, "step": step, "parents": {}}`, the runtime's shape.
    pub fn new(source: CheckpointSource, step: i64) -> Self {
        let mut m = IndexMap::new();
        m.insert("source".to_owned(), Value::from(source.as_str()));
        m.insert("step".to_owned(), Value::Int(step));
        m.insert("parents".to_owned(), Value::Map(Vec::new()));
        CheckpointMetadata(m)
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

/// A checkpoint with everything a reader needs to resume from it (spec §1.4).
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

/// One write a task made, saved before the next checkpoint (spec §1.5).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingWrite {
    /// The task that made the write.
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The value written.
    pub value: Value,
}

impl PendingWrite {
    /// Builds a pending write.
    pub fn new(task_id: impl Into<String>, channel: impl Into<String>, value: impl Into<Value>) -> Self {
        PendingWrite {
            task_id: task_id.into(),
            channel: channel.into(),
            value: value.into(),
        }
    }
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

/// The order in which pending writes are returned: (task_path, task_id, idx),
/// strings by code point.
pub fn writes_sort_key<'a>(task_path: &'a str, task_id: &'a str, idx: i64) -> (&'a str, &'a str, i64) {
    (task_path, task_id, idx)
}

/// Config keys never copied into metadata (spec §1.3).
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
        Value::Str(s) if s.contains('\0') => Value::Str(s.replace('\0', "")),
        other => other.clone(),
    }
}

/// Builds the metadata LangGraph stores for a `put` made with run config
/// (spec §1.3): top-level string values lose U+0000; then every scalar entry
/// (string, integer, boolean, float) of `run_metadata` and then of
/// `configurable` is added unless its key is already present, starts with
/// `__`, or is one of LangGraph's reserved config keys.
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
    CheckpointMetadata(out)
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
    fn merge_matches_spec_example() {
        // spec §1.3 observed example
        let mut m = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        m.insert("note", "a\0b");
        m.insert("tup", Value::Array(vec![Value::Int(1), Value::Int(2)]));
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
            ("obj".to_owned(), Value::Map(vec![])),
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
