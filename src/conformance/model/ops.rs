//! The operations a model test generates, and the strategies that generate
//! them from small pools so that they collide.

use std::fmt;

use proptest::prelude::*;

use crate::saver::Operation;
use crate::serde::Value;
use crate::version::ChannelVersion;

pub(super) const THREADS: [&str; 3] = ["a", "b", "c"];
const CHANNELS: [&str; 4] = ["x", "y", "msgs", "delta"];
const WRITE_CHANNELS: [&str; 8] = [
    "x",
    "y",
    "delta",
    "__error__",
    "__interrupt__",
    "__resume__",
    "__scheduled__",
    "__pregel_tasks",
];
const TASKS: [&str; 2] = ["task-1", "task-2"];
const TASK_PATHS: [&str; 3] = ["", "~p1", "~p2"];
const RUNS: [&str; 3] = ["r1", "r2", "r3"];
const SOURCES: [&str; 4] = ["input", "loop", "update", "fork"];
const USERS: [&str; 2] = ["alice", "bob"];
const ID_POOL: u64 = 8;

/// The id of the `k`th checkpoint of the pool: uuid6-shaped, ordered by `k`.
pub fn model_checkpoint_id(k: u64) -> String {
    format!("1ef00000-0000-6000-8000-{k:012x}")
}

/// One channel of a generated `put`.
#[derive(Debug, Clone, PartialEq)]
pub struct PutChannel {
    /// The channel.
    pub channel: String,
    /// Its version in `channel_versions`.
    pub version: ChannelVersion,
    /// Whether the channel is in `new_versions`.
    pub is_new: bool,
    /// Whether the value ([`value_for`] of channel and version) is left out
    /// of `channel_values`, for the saver to read from the version; only for
    /// channels not in `new_versions`.
    pub omit_value: bool,
}

impl PutChannel {
    /// Whether the put gives the channel's value.
    pub(super) fn gives_value(&self) -> bool {
        value_for(&self.channel, &self.version).is_some() && (self.is_new || !self.omit_value)
    }
}

/// The checkpoint a generated `put_writes` targets.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteTarget {
    /// The checkpoint the last `put` of the sequence stored (in its thread and
    /// namespace, whatever the operation's), as a runtime writes; skipped
    /// when there is none or it is gone.
    LastPut,
    /// The latest checkpoint of the (thread, namespace) when the writes are
    /// made; the operation is skipped when there is none.
    Latest,
    /// This checkpoint id; the operation is skipped when it does not exist.
    Id(String),
    /// No checkpoint id in the config: the call must fail.
    Missing,
}

/// One generated operation. Thread and run ids are shown without the
/// per-case prefix.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelOp {
    /// [`CheckpointSaver::put`](crate::saver::CheckpointSaver::put).
    Put {
        /// Thread.
        thread: String,
        /// Namespace.
        ns: String,
        /// The checkpoint's id.
        id: String,
        /// The parent (the config's checkpoint id).
        parent: Option<String>,
        /// Channels, versions, values and new versions.
        channels: Vec<PutChannel>,
        /// Metadata entries.
        metadata: Vec<(String, Value)>,
    },
    /// [`CheckpointSaver::put_writes`](crate::saver::CheckpointSaver::put_writes).
    /// Run only when the target checkpoint exists (or the id is missing,
    /// which must fail): what `copy_thread`,
    /// `prune` and `delete_for_runs` do with writes whose checkpoint does not
    /// exist the contract leaves open, and backends differ (InMemorySaver
    /// treats them as thread content, the SQL savers as rows of no
    /// checkpoint). Writes before their checkpoint are checked by the
    /// conformance suite.
    PutWrites {
        /// Thread.
        thread: String,
        /// Namespace.
        ns: String,
        /// Target checkpoint.
        target: WriteTarget,
        /// Task id.
        task_id: String,
        /// Task path.
        task_path: String,
        /// (channel, value) pairs.
        writes: Vec<(String, Value)>,
    },
    /// [`CheckpointSaver::get_tuple`](crate::saver::CheckpointSaver::get_tuple).
    GetTuple {
        /// Thread.
        thread: String,
        /// Namespace.
        ns: String,
        /// Checkpoint id, or latest.
        id: Option<String>,
    },
    /// [`CheckpointSaver::list`](crate::saver::CheckpointSaver::list).
    List {
        /// Thread, or every thread.
        thread: Option<String>,
        /// Namespace, or every namespace.
        ns: Option<String>,
        /// Only this checkpoint id.
        id: Option<String>,
        /// Metadata filter.
        filter: Vec<(String, Value)>,
        /// `before`.
        before: Option<String>,
        /// `limit`.
        limit: Option<usize>,
    },
    /// [`CheckpointSaver::delete_thread`](crate::saver::CheckpointSaver::delete_thread).
    DeleteThread {
        /// Thread.
        thread: String,
    },
    /// [`CheckpointSaver::delete_for_runs`](crate::saver::CheckpointSaver::delete_for_runs).
    DeleteForRuns {
        /// Run ids.
        run_ids: Vec<String>,
    },
    /// [`CheckpointSaver::copy_thread`](crate::saver::CheckpointSaver::copy_thread).
    CopyThread {
        /// Source thread.
        source: String,
        /// Target thread.
        target: String,
    },
    /// [`CheckpointSaver::prune`](crate::saver::CheckpointSaver::prune).
    Prune {
        /// Threads.
        threads: Vec<String>,
        /// [`PruneStrategy::KeepLatest`](crate::saver::PruneStrategy::KeepLatest) when true, else
        /// [`PruneStrategy::Delete`](crate::saver::PruneStrategy::Delete).
        keep_latest: bool,
    },
    /// [`CheckpointSaver::list_threads`](crate::saver::CheckpointSaver::list_threads).
    ListThreads {
        /// Metadata filter.
        filter: Vec<(String, Value)>,
        /// Cursor.
        after: Option<String>,
        /// Limit.
        limit: Option<usize>,
    },
    /// [`CheckpointSaver::get_delta_channel_history`](crate::saver::CheckpointSaver::get_delta_channel_history).
    DeltaChannelHistory {
        /// Thread.
        thread: String,
        /// Namespace.
        ns: String,
        /// Target checkpoint, or latest.
        id: Option<String>,
        /// Channels asked for.
        channels: Vec<String>,
    },
}

impl ModelOp {
    /// The operation's method name.
    pub fn name(&self) -> &'static str {
        self.operation().name()
    }

    /// The saver operation it calls.
    pub fn operation(&self) -> Operation {
        match self {
            ModelOp::Put { .. } => Operation::Put,
            ModelOp::PutWrites { .. } => Operation::PutWrites,
            ModelOp::GetTuple { .. } => Operation::GetTuple,
            ModelOp::List { .. } => Operation::List,
            ModelOp::DeleteThread { .. } => Operation::DeleteThread,
            ModelOp::DeleteForRuns { .. } => Operation::DeleteForRuns,
            ModelOp::CopyThread { .. } => Operation::CopyThread,
            ModelOp::Prune { .. } => Operation::Prune,
            ModelOp::ListThreads { .. } => Operation::ListThreads,
            ModelOp::DeltaChannelHistory { .. } => Operation::DeltaChannelHistory,
        }
    }
}

/// The value of `channel` at `version`: a function of both, as in LangGraph,
/// where a version names one value (or none: an empty channel, one version
/// in eight). Covers nil, integers, strings with U+0000 and non-ASCII text,
/// binaries, nested lists and maps, delta snapshots (ext 7) and floats.
pub fn value_for(channel: &str, version: &ChannelVersion) -> Option<Value> {
    let key = format!("{channel}@{version}");
    let h = key
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    if h % 8 == 7 {
        return None;
    }
    Some(match h % 8 {
        0 => Value::Nil,
        1 => Value::Int(i64::from(h % 1000) - 500),
        2 => Value::from(format!("{key} é\u{0}")),
        3 => Value::Bin(bytes::Bytes::from(key.into_bytes())),
        4 => Value::Array((vec![Value::map([("role", Value::from("user")), ("text", Value::from(key))])]).into()),
        5 => Value::delta_snapshot(Value::Array((vec![Value::Int(i64::from(h % 10))]).into())),
        _ => Value::map([("nested", Value::map([("k", Value::Float(f64::from(h % 100) / 8.0))]))]),
    })
}

fn pick<T: Clone + fmt::Debug + 'static>(items: &'static [T]) -> impl Strategy<Value = T> + Clone {
    proptest::sample::select(items)
}

fn string_of(items: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    pick(items).prop_map(str::to_owned)
}

/// Indexes into the id pool, the first three more often, so that
/// operations meet.
fn id_index() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![2 => 0..3u64, 1 => 0..ID_POOL]
}

fn id_strategy() -> impl Strategy<Value = String> + Clone {
    id_index().prop_map(model_checkpoint_id)
}

fn version_strategy() -> impl Strategy<Value = ChannelVersion> {
    prop_oneof![
        (1i64..5).prop_map(ChannelVersion::Int),
        (1i64..5, 0u8..2).prop_map(|(n, f)| ChannelVersion::Str(format!("{n:032}.{:016}", u64::from(f) * 7))),
    ]
}

fn write_value_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Nil),
        (-3i64..3).prop_map(Value::Int),
        pick(&["", "v", "é\u{0}x", "'; DROP TABLE checkpoints; --"]).prop_map(Value::from),
        Just(Value::Bin(bytes::Bytes::from_static(b"\x00\xff"))),
        Just(Value::Float(-0.0)),
        (0i64..3).prop_map(|n| Value::map([("k", Value::Int(n))])),
        (0i64..3).prop_map(|n| Value::delta_snapshot(Value::Array(vec![Value::Int(n)].into()))),
    ]
}

/// Each channel of the pool, present or not, with its version and flags. (No
/// `prop_flat_map`: its shrinking is slow.)
fn put_channels() -> impl Strategy<Value = Vec<PutChannel>> {
    proptest::collection::vec(
        proptest::option::of((version_strategy(), any::<bool>(), any::<bool>())),
        CHANNELS.len(),
    )
    .prop_map(|slots| {
        CHANNELS
            .iter()
            .zip(slots)
            .filter_map(|(ch, slot)| {
                slot.map(|(version, omit_value, is_new)| PutChannel {
                    channel: (*ch).to_owned(),
                    version,
                    is_new,
                    omit_value,
                })
            })
            .collect()
    })
}

/// The metadata of a put: source, step, run id, user, the root parent (kept
/// only in a child namespace), delta counter, nested tags.
type MetaParts = (
    String,
    i64,
    Option<String>,
    Option<Value>,
    Option<String>,
    Option<i64>,
    u8,
);

fn metadata_parts() -> impl Strategy<Value = MetaParts> {
    (
        string_of(&SOURCES),
        -1i64..4,
        proptest::option::of(string_of(&RUNS)),
        proptest::option::of(prop_oneof![
            string_of(&USERS).prop_map(Value::from),
            Just(Value::Int(1))
        ]),
        proptest::option::of(id_strategy()),
        proptest::option::of(1i64..4),
        0u8..3,
    )
}

fn build_metadata(parts: MetaParts, ns_is_child: bool) -> Vec<(String, Value)> {
    let (source, step, run, user, parent_root, counter, tags) = parts;
    let mut out = vec![
        ("source".to_owned(), Value::from(source)),
        ("step".to_owned(), Value::Int(step)),
    ];
    if let Some(run) = run {
        out.push(("run_id".to_owned(), Value::from(run)));
    }
    if let Some(user) = user {
        out.push(("user".to_owned(), user));
    }
    let parents = match parent_root {
        Some(root) if ns_is_child => Value::map([("", Value::from(root))]),
        _ => Value::Map(Vec::new().into()),
    };
    out.push(("parents".to_owned(), parents));
    if tags > 0 {
        out.push(("tags".to_owned(), tags_value(tags == 1)));
    }
    if let Some(counter) = counter {
        out.push((
            "counters_since_delta_snapshot".to_owned(),
            Value::map([("delta", Value::Int(counter))]),
        ));
    }
    out
}

/// A nested map with the same entries in either key order: filters match
/// it by content.
fn tags_value(a_first: bool) -> Value {
    let (a, b) = (("a", Value::Int(1)), ("b", Value::from("x")));
    if a_first {
        Value::map([a, b])
    } else {
        Value::map([b, a])
    }
}

fn filter_strategy() -> impl Strategy<Value = Vec<(String, Value)>> {
    let entry = prop_oneof![
        string_of(&SOURCES).prop_map(|s| ("source".to_owned(), Value::from(s))),
        (-1i64..4).prop_map(|s| ("step".to_owned(), Value::Int(s))),
        string_of(&RUNS).prop_map(|r| ("run_id".to_owned(), Value::from(r))),
        Just(("run_id".to_owned(), Value::Nil)),
        string_of(&USERS).prop_map(|u| ("user".to_owned(), Value::from(u))),
        Just(("user".to_owned(), Value::Int(1))),
        Just(("user".to_owned(), Value::Bool(true))),
        Just(("parents".to_owned(), Value::Map(Vec::new().into()))),
        any::<bool>().prop_map(|ab| ("tags".to_owned(), tags_value(ab))),
    ];
    proptest::collection::vec(entry, 0..3).prop_map(|entries| {
        let mut out: Vec<(String, Value)> = Vec::new();
        for (k, v) in entries {
            if !out.iter().any(|(k2, _)| *k2 == k) {
                out.push((k, v));
            }
        }
        out
    })
}

fn op_strategy() -> impl Strategy<Value = ModelOp> {
    let thread = || prop_oneof![3 => Just("a"), 2 => Just("b"), 1 => Just("c")].prop_map(str::to_owned);
    let ns = || prop_oneof![4 => Just(""), 1 => Just("sub:1"), 1 => Just("sub:2")].prop_map(str::to_owned);
    // A parent is an older checkpoint (a smaller id), as uuid6 ids are: no
    // parent cycles (their loop guard is left to the conformance suite).
    let put = (
        thread(),
        ns(),
        id_index(),
        proptest::option::of(prop_oneof![3 => Just(1u64), 1 => 2u64..ID_POOL]),
        put_channels(),
        metadata_parts(),
    )
        .prop_map(|(thread, ns, id, back, channels, meta)| {
            let metadata = build_metadata(meta, !ns.is_empty());
            ModelOp::Put {
                thread,
                ns,
                id: model_checkpoint_id(id),
                parent: back.and_then(|d| id.checked_sub(d)).map(model_checkpoint_id),
                channels,
                metadata,
            }
        });
    let put_writes = (
        thread(),
        ns(),
        prop_oneof![
            8 => Just(WriteTarget::LastPut),
            2 => Just(WriteTarget::Latest),
            2 => id_strategy().prop_map(WriteTarget::Id),
            1 => Just(WriteTarget::Missing),
        ],
        string_of(&TASKS),
        string_of(&TASK_PATHS),
        proptest::collection::vec((string_of(&WRITE_CHANNELS), write_value_strategy()), 0..4),
    )
        .prop_map(|(thread, ns, target, task_id, task_path, writes)| ModelOp::PutWrites {
            thread,
            ns,
            target,
            task_id,
            task_path,
            writes,
        });
    let get_tuple = (thread(), ns(), proptest::option::of(id_strategy()))
        .prop_map(|(thread, ns, id)| ModelOp::GetTuple { thread, ns, id });
    let list = (
        prop_oneof![4 => thread().prop_map(Some), 1 => Just(None)],
        proptest::option::of(ns()),
        prop_oneof![5 => Just(None), 1 => id_strategy().prop_map(Some)],
        filter_strategy(),
        proptest::option::of(id_strategy()),
        proptest::option::of(0usize..4),
    )
        .prop_map(|(thread, ns, id, filter, before, limit)| ModelOp::List {
            thread,
            ns,
            id,
            filter,
            before,
            limit,
        });
    let delete_thread = thread().prop_map(|thread| ModelOp::DeleteThread { thread });
    let delete_for_runs = proptest::sample::subsequence(RUNS.to_vec(), 0..=2).prop_map(|runs| ModelOp::DeleteForRuns {
        run_ids: runs.into_iter().map(str::to_owned).collect(),
    });
    let copy_thread = (thread(), thread()).prop_map(|(source, target)| ModelOp::CopyThread { source, target });
    let prune = (
        proptest::sample::subsequence(THREADS.to_vec(), 0..=2),
        prop_oneof![3 => Just(true), 1 => Just(false)],
    )
        .prop_map(|(threads, keep_latest)| ModelOp::Prune {
            threads: threads.into_iter().map(str::to_owned).collect(),
            keep_latest,
        });
    let list_threads = (
        filter_strategy(),
        proptest::option::of(thread()),
        proptest::option::of(0usize..3),
    )
        .prop_map(|(filter, after, limit)| ModelOp::ListThreads { filter, after, limit });
    let delta = (
        thread(),
        ns(),
        proptest::option::of(id_strategy()),
        proptest::sample::subsequence(vec!["delta", "x", "msgs"], 0..=2),
    )
        .prop_map(|(thread, ns, id, channels)| ModelOp::DeltaChannelHistory {
            thread,
            ns,
            id,
            channels: channels.into_iter().map(str::to_owned).collect(),
        });
    prop_oneof![
        8 => put,
        5 => put_writes,
        3 => get_tuple,
        4 => list,
        1 => delete_thread,
        1 => delete_for_runs,
        2 => copy_thread,
        2 => prune,
        2 => list_threads,
        2 => delta,
    ]
}

/// Sequences of 1 to `max_ops` operations.
pub fn ops_strategy(max_ops: usize) -> impl Strategy<Value = Vec<ModelOp>> {
    proptest::collection::vec(op_strategy(), 1..=max_ops.max(1))
}
