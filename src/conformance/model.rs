//! Model-based testing: random sequences of every saver operation, run
//! against a saver under test and against [`InMemorySaver`] (the oracle),
//! comparing every result. A difference fails the run, and proptest shrinks
//! the sequence to a minimal one.
//!
//! The operations draw from small pools (3 threads, 3 namespaces, 8
//! checkpoint ids, 4 channels, integer and string versions, 3 run ids) so
//! that sequences collide: re-puts of an id, writes before their
//! checkpoint, forks from old parents, copies onto used threads, prunes of
//! delta-channel histories, filters that match and miss.
//!
//! ```
//! use std::sync::Arc;
//! use checkpointer::conformance::model::{check_against_oracle, ModelConfig};
//! use checkpointer::{CheckpointSaver, InMemorySaver};
//!
//! let stats = check_against_oracle(
//!     || async { Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver> },
//!     ModelConfig::default().cases(4).max_ops(10),
//! )
//! .unwrap_or_else(|failure| panic!("{failure}"));
//! assert_eq!(stats.cases, 4);
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;

use futures::StreamExt;
use parking_lot::Mutex;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

use super::{SaverOrSkip, Skip};
use crate::checkpoint::{ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple};
use crate::config::CheckpointConfig;
use crate::error::Error;
use crate::memory::InMemorySaver;
use crate::saver::{Capabilities, CheckpointSaver, ListOptions, ListThreadsOptions, PruneStrategy};
use crate::serde::Value;
use crate::version::ChannelVersion;

const THREADS: [&str; 3] = ["a", "b", "c"];
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

/// How many cases, how long, and whether the saver under test is fresh for
/// each case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// Random sequences to run (default: env `PROPTEST_CASES`, else 64).
    pub cases: u32,
    /// Longest sequence (default: env `MODEL_MAX_OPS`, else 40).
    pub max_ops: usize,
    /// Whether the factory returns an empty saver for each case (default).
    /// When false (a shared database), thread and run ids get a per-case
    /// prefix and whole-store results (`list` without a thread,
    /// `list_threads`) are restricted to the case's threads; `list` without
    /// a thread then applies its `limit` after that restriction.
    pub exclusive: bool,
    /// Whether metadata keeps its key order (default). False for stores that
    /// normalize it (Postgres JSONB): metadata is then compared with keys
    /// sorted, at every level.
    pub ordered_metadata: bool,
    /// A fixed seed for the random sequences (default: env
    /// `PROPTEST_RNG_SEED`, else a fresh one per run).
    pub seed: Option<u64>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
            std::env::var(name).ok().and_then(|v| v.parse().ok())
        }
        ModelConfig {
            cases: env("PROPTEST_CASES").unwrap_or(64),
            max_ops: env("MODEL_MAX_OPS").map_or(40, |n: u32| n as usize),
            exclusive: true,
            ordered_metadata: true,
            seed: env("PROPTEST_RNG_SEED"),
        }
    }
}

impl ModelConfig {
    /// Sets the number of cases.
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases;
        self
    }

    /// Sets the longest sequence.
    pub fn max_ops(mut self, max_ops: usize) -> Self {
        self.max_ops = max_ops;
        self
    }

    /// The store does not keep metadata key order (see
    /// [`ModelConfig::ordered_metadata`]).
    pub fn unordered_metadata(mut self) -> Self {
        self.ordered_metadata = false;
        self
    }

    /// Fixes the seed, so the run is repeatable.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The factory's savers share one store (see [`ModelConfig::exclusive`]).
    pub fn shared_store(mut self) -> Self {
        self.exclusive = false;
        self
    }
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
    fn gives_value(&self) -> bool {
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
    /// [`CheckpointSaver::put`].
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
    /// [`CheckpointSaver::put_writes`]. Run only when the target checkpoint
    /// exists (or the id is missing, which must fail): what `copy_thread`,
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
    /// [`CheckpointSaver::get_tuple`].
    GetTuple {
        /// Thread.
        thread: String,
        /// Namespace.
        ns: String,
        /// Checkpoint id, or latest.
        id: Option<String>,
    },
    /// [`CheckpointSaver::list`].
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
    /// [`CheckpointSaver::delete_thread`].
    DeleteThread {
        /// Thread.
        thread: String,
    },
    /// [`CheckpointSaver::delete_for_runs`].
    DeleteForRuns {
        /// Run ids.
        run_ids: Vec<String>,
    },
    /// [`CheckpointSaver::copy_thread`].
    CopyThread {
        /// Source thread.
        source: String,
        /// Target thread.
        target: String,
    },
    /// [`CheckpointSaver::prune`].
    Prune {
        /// Threads.
        threads: Vec<String>,
        /// [`PruneStrategy::KeepLatest`] when true, else [`PruneStrategy::Delete`].
        keep_latest: bool,
    },
    /// [`CheckpointSaver::list_threads`].
    ListThreads {
        /// Metadata filter.
        filter: Vec<(String, Value)>,
        /// Cursor.
        after: Option<String>,
        /// Limit.
        limit: Option<usize>,
    },
    /// [`CheckpointSaver::get_delta_channel_history`].
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
        match self {
            ModelOp::Put { .. } => "put",
            ModelOp::PutWrites { .. } => "put_writes",
            ModelOp::GetTuple { .. } => "get_tuple",
            ModelOp::List { .. } => "list",
            ModelOp::DeleteThread { .. } => "delete_thread",
            ModelOp::DeleteForRuns { .. } => "delete_for_runs",
            ModelOp::CopyThread { .. } => "copy_thread",
            ModelOp::Prune { .. } => "prune",
            ModelOp::ListThreads { .. } => "list_threads",
            ModelOp::DeltaChannelHistory { .. } => "get_delta_channel_history",
        }
    }

    fn needs(&self, caps: &Capabilities) -> bool {
        match self {
            ModelOp::DeleteForRuns { .. } => caps.delete_for_runs,
            ModelOp::CopyThread { .. } => caps.copy_thread,
            ModelOp::Prune { .. } => caps.prune,
            ModelOp::ListThreads { .. } => caps.list_threads,
            ModelOp::DeltaChannelHistory { .. } => caps.delta_channel_history,
            _ => true,
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

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelStats {
    /// Sequences run (shrinking runs excluded).
    pub cases: u32,
    /// Operations run on both savers, by name (shrinking runs included).
    pub ops: BTreeMap<&'static str, u64>,
    /// Generated operations left out (a `put_writes` whose checkpoint does
    /// not exist, see [`ModelOp::PutWrites`]), by name.
    pub skipped_ops: BTreeMap<&'static str, u64>,
    /// Why nothing ran, when the factory returned a [`Skip`].
    pub skipped: Option<String>,
}

impl ModelStats {
    /// Operations run, all kinds.
    pub fn total_ops(&self) -> u64 {
        self.ops.values().sum()
    }
}

/// Operations a [`replay`] ran and left out, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Run on both savers.
    pub ran: BTreeMap<&'static str, u64>,
    /// Left out (see [`ModelStats::skipped_ops`]).
    pub skipped: BTreeMap<&'static str, u64>,
}

/// A sequence on which the saver under test and the oracle disagree, shrunk
/// by proptest.
#[derive(Debug, Clone)]
pub struct ModelFailure {
    /// The minimal sequence.
    pub ops: Vec<ModelOp>,
    /// What differed (or what went wrong).
    pub reason: String,
}

impl fmt::Display for ModelFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "the saver differs from the InMemorySaver oracle: {}", self.reason)?;
        writeln!(f, "minimal sequence ({} operations):", self.ops.len())?;
        for (i, op) in self.ops.iter().enumerate() {
            writeln!(f, "  {i:>2}: {op:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ModelFailure {}

fn error_kind(err: &Error) -> &'static str {
    match err {
        Error::Serde { .. } => "Serde",
        Error::InvalidInput { .. } => "InvalidInput",
        Error::Unsupported { .. } => "Unsupported",
        Error::ThreadExists { .. } => "ThreadExists",
        Error::BlockingInAsync { .. } => "BlockingInAsync",
        Error::Encryption(_) => "Encryption",
        Error::Storage { .. } => "Storage",
    }
}

type Outcome<T> = Result<T, &'static str>;

fn outcome<T>(r: crate::Result<T>) -> Outcome<T> {
    r.map_err(|e| error_kind(&e))
}

/// Applies per-case prefixes to thread and run ids.
struct Names<'a> {
    prefix: &'a str,
}

impl Names<'_> {
    fn thread(&self, t: &str) -> String {
        format!("{}{t}", self.prefix)
    }

    fn value(&self, key: &str, v: &Value) -> Value {
        match (key, v) {
            ("run_id", Value::Str(r)) => Value::from(format!("{}{r}", self.prefix)),
            _ => v.clone(),
        }
    }

    fn entries(&self, entries: &[(String, Value)]) -> indexmap::IndexMap<String, Value> {
        entries.iter().map(|(k, v)| (k.clone(), self.value(k, v))).collect()
    }

    fn owns(&self, thread: &str) -> bool {
        thread.starts_with(self.prefix)
    }
}

fn build_put(op_channels: &[PutChannel], id: &str) -> (Checkpoint, ChannelVersions) {
    let mut cp = Checkpoint::new(0);
    cp.id = id.to_owned();
    cp.ts = "2024-01-01T00:00:00+00:00".to_owned();
    let mut new_versions = ChannelVersions::new();
    for c in op_channels {
        cp.channel_versions.insert(c.channel.clone(), c.version.clone());
        if c.gives_value() {
            if let Some(value) = value_for(&c.channel, &c.version) {
                cp.channel_values.insert(c.channel.clone(), value);
            }
        }
        if c.is_new {
            new_versions.insert(c.channel.clone(), c.version.clone());
        }
    }
    if let Some(first) = op_channels.first() {
        let mut seen = ChannelVersions::new();
        seen.insert(first.channel.clone(), first.version.clone());
        cp.versions_seen.insert("node".to_owned(), seen);
    }
    cp.updated_channels = Some(new_versions.keys().cloned().collect());
    (cp, new_versions)
}

/// A value a put leaves out for the saver to read from the version is, in
/// the model as in the LangGraph runtime (untouched channels keep their
/// parent's version), one the parent holds at that version. Where the parent
/// holds none, the model gives the value: the contract's "read from the
/// version the checkpoint names" is then open, and backends differ (blob
/// stores find a value any checkpoint of the thread stored at that version;
/// SQLite, storing whole checkpoints, copies from the parent only).
async fn settle_omitted(
    oracle: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    channels: &[PutChannel],
) -> Vec<PutChannel> {
    let omitted = |c: &PutChannel| c.omit_value && !c.is_new && value_for(&c.channel, &c.version).is_some();
    let mut out = channels.to_vec();
    if !out.iter().any(omitted) {
        return out;
    }
    let parent = match config.checkpoint_id() {
        Some(_) => oracle.get_tuple(config).await.ok().flatten(),
        None => None,
    };
    for c in out.iter_mut().filter(|c| omitted(c)) {
        c.omit_value = parent.as_ref().is_some_and(|p| {
            p.checkpoint.channel_versions.get(&c.channel) == Some(&c.version)
                && p.checkpoint.channel_values.contains_key(&c.channel)
        });
    }
    out
}

/// Puts metadata in a canonical key order when the store does not keep it.
struct Canon {
    sort: bool,
}

impl Canon {
    fn value(v: &mut Value) {
        match v {
            Value::Map(entries) => {
                for (_, v) in entries.iter_mut() {
                    Self::value(v);
                }
                entries.sort_by(|(a, _), (b, _)| format!("{a:?}").cmp(&format!("{b:?}")));
            }
            Value::Array(items) => items.iter_mut().for_each(Self::value),
            _ => {}
        }
    }

    fn metadata(&self, m: &mut CheckpointMetadata) {
        if self.sort {
            m.0.sort_keys();
            m.0.values_mut().for_each(Self::value);
        }
    }

    fn tuple(&self, r: Outcome<Option<CheckpointTuple>>) -> Outcome<Option<CheckpointTuple>> {
        r.map(|t| {
            t.map(|mut t| {
                self.metadata(&mut t.metadata);
                t
            })
        })
    }

    fn tuples(&self, r: Outcome<Vec<CheckpointTuple>>) -> Outcome<Vec<CheckpointTuple>> {
        r.map(|mut ts| {
            ts.iter_mut().for_each(|t| self.metadata(&mut t.metadata));
            ts
        })
    }

    fn threads(&self, r: Outcome<Vec<crate::saver::ThreadInfo>>) -> Outcome<Vec<crate::saver::ThreadInfo>> {
        r.map(|mut ts| {
            ts.iter_mut().for_each(|t| self.metadata(&mut t.metadata));
            ts
        })
    }
}

async fn collect_list(
    saver: &dyn CheckpointSaver,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> Outcome<Vec<CheckpointTuple>> {
    let mut out = Vec::new();
    let mut stream = saver.list(config, options);
    while let Some(item) = stream.next().await {
        out.push(outcome(item)?);
    }
    Ok(out)
}

/// Compares one result; the message names the operation only unless
/// `verbose` (shrinking replays thousands of failing cases: only the minimal
/// one is described).
fn compare<T: PartialEq + fmt::Debug>(
    step: usize,
    op: &ModelOp,
    got: &Outcome<T>,
    want: &Outcome<T>,
    verbose: bool,
) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let head = format!("operation {step} ({})", op.name());
    if !verbose {
        return Err(head);
    }
    Err(format!(
        "{head} returned\n    {got:?}\n  the oracle returned\n    {want:?}"
    ))
}

/// [`compare`] for sequences: a verbose message shows the lengths and the
/// first item that differs.
fn compare_items<T: PartialEq + fmt::Debug>(
    step: usize,
    op: &ModelOp,
    got: &Outcome<Vec<T>>,
    want: &Outcome<Vec<T>>,
    verbose: bool,
) -> Result<(), String> {
    match (got, want) {
        (Ok(g), Ok(w)) if verbose && g != w => {
            let i = g.iter().zip(w).take_while(|(a, b)| a == b).count();
            Err(format!(
                "operation {step} ({}) returned {} items, the oracle {}; first difference at item {i}:\n    {:?}\n  the oracle's:\n    {:?}",
                op.name(),
                g.len(),
                w.len(),
                g.get(i),
                w.get(i)
            ))
        }
        _ => compare(step, op, got, want, verbose),
    }
}

/// How [`replay`] names things and reports.
#[derive(Debug, Clone, Default)]
pub struct ReplaySettings {
    /// Prefix of every thread and run id (empty for an exclusive saver).
    pub prefix: String,
    /// Whether the saver under test holds nothing but this case (see
    /// [`ModelConfig::exclusive`]).
    pub exclusive: bool,
    /// Whether a difference is described in full (both results) or only
    /// named.
    pub verbose: bool,
    /// Whether metadata is compared with its key order (see
    /// [`ModelConfig::ordered_metadata`]).
    pub ordered_metadata: bool,
}

/// Runs `ops` on `saver` and on `oracle`, comparing every result, then the
/// whole state of the case's threads, and counts the operations run and left
/// out in `counts`. Operations `saver` does not declare in its capabilities are left
/// out.
///
/// # Errors
/// The first difference, in words.
pub async fn replay(
    saver: &dyn CheckpointSaver,
    oracle: &InMemorySaver,
    ops: &[ModelOp],
    settings: &ReplaySettings,
    counts: &mut OpCounts,
) -> Result<(), String> {
    let ReplaySettings {
        prefix,
        exclusive,
        verbose,
        ..
    } = settings;
    let (exclusive, verbose) = (*exclusive, *verbose);
    let canon = Canon {
        sort: !settings.ordered_metadata,
    };
    let names = Names { prefix };
    let mut last_put: Option<CheckpointConfig> = None;
    let caps = saver.capabilities();
    for (step, op) in ops.iter().enumerate() {
        if !op.needs(&caps) {
            continue;
        }
        match op {
            ModelOp::Put {
                thread,
                ns,
                id,
                parent,
                channels,
                metadata,
            } => {
                let mut config = CheckpointConfig::new(names.thread(thread)).with_ns(ns.clone());
                config.checkpoint_id = parent.clone();
                let channels = settle_omitted(oracle, &config, channels).await;
                let (cp, new_versions) = build_put(&channels, id);
                let meta = CheckpointMetadata(names.entries(metadata));
                let got = outcome(saver.put(&config, &cp, &meta, &new_versions).await);
                let want = outcome(oracle.put(&config, &cp, &meta, &new_versions).await);
                compare(step, op, &got, &want, verbose)?;
                last_put = want.ok();
            }
            ModelOp::PutWrites {
                thread,
                ns,
                target,
                task_id,
                task_path,
                writes,
            } => {
                let mut config = CheckpointConfig::new(names.thread(thread)).with_ns(ns.clone());
                let found = match target {
                    WriteTarget::Missing => Some(None),
                    WriteTarget::LastPut => match &last_put {
                        Some(stored) => {
                            config = stored.clone();
                            // It may have been deleted since.
                            oracle
                                .get_tuple(&config)
                                .await
                                .ok()
                                .flatten()
                                .map(|t| t.config.checkpoint_id)
                        }
                        None => None,
                    },
                    WriteTarget::Latest => oracle
                        .get_tuple(&config)
                        .await
                        .ok()
                        .flatten()
                        .map(|t| t.config.checkpoint_id),
                    WriteTarget::Id(id) => {
                        config.checkpoint_id = Some(id.clone());
                        oracle
                            .get_tuple(&config)
                            .await
                            .ok()
                            .flatten()
                            .map(|t| t.config.checkpoint_id)
                    }
                };
                let Some(id) = found else {
                    // Writes before their checkpoint: see `ModelOp::PutWrites`.
                    *counts.skipped.entry(op.name()).or_default() += 1;
                    continue;
                };
                config.checkpoint_id = id;
                let got = outcome(saver.put_writes(&config, writes, task_id, task_path).await);
                let want = outcome(oracle.put_writes(&config, writes, task_id, task_path).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::GetTuple { thread, ns, id } => {
                let mut config = CheckpointConfig::new(names.thread(thread)).with_ns(ns.clone());
                config.checkpoint_id = id.clone();
                let got = canon.tuple(outcome(saver.get_tuple(&config).await));
                let want = canon.tuple(outcome(oracle.get_tuple(&config).await));
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::List {
                thread,
                ns,
                id,
                filter,
                before,
                limit,
            } => {
                let config = thread.as_ref().map(|t| CheckpointConfig {
                    thread_id: names.thread(t),
                    checkpoint_ns: ns.clone(),
                    checkpoint_id: id.clone(),
                });
                let options = ListOptions {
                    filter: names.entries(filter),
                    before: before.clone(),
                    limit: *limit,
                };
                let (got, want) = if config.is_none() && !exclusive {
                    let unlimited = ListOptions {
                        limit: None,
                        ..options.clone()
                    };
                    let restrict = |r: Outcome<Vec<CheckpointTuple>>| {
                        r.map(|items| {
                            items
                                .into_iter()
                                .filter(|t| names.owns(&t.config.thread_id))
                                .take(limit.unwrap_or(usize::MAX))
                                .collect::<Vec<_>>()
                        })
                    };
                    (
                        canon.tuples(restrict(collect_list(saver, None, unlimited.clone()).await)),
                        canon.tuples(restrict(collect_list(oracle, None, unlimited).await)),
                    )
                } else {
                    (
                        canon.tuples(collect_list(saver, config.clone(), options.clone()).await),
                        canon.tuples(collect_list(oracle, config, options).await),
                    )
                };
                compare_items(step, op, &got, &want, verbose)?;
            }
            ModelOp::DeleteThread { thread } => {
                let t = names.thread(thread);
                let got = outcome(saver.delete_thread(&t).await);
                let want = outcome(oracle.delete_thread(&t).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::DeleteForRuns { run_ids } => {
                let runs: Vec<String> = run_ids.iter().map(|r| format!("{prefix}{r}")).collect();
                let got = outcome(saver.delete_for_runs(&runs).await);
                let want = outcome(oracle.delete_for_runs(&runs).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::CopyThread { source, target } => {
                let (s, t) = (names.thread(source), names.thread(target));
                let got = outcome(saver.copy_thread(&s, &t).await);
                let want = outcome(oracle.copy_thread(&s, &t).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::Prune { threads, keep_latest } => {
                let threads: Vec<String> = threads.iter().map(|t| names.thread(t)).collect();
                let strategy = if *keep_latest {
                    PruneStrategy::KeepLatest
                } else {
                    PruneStrategy::Delete
                };
                let got = outcome(saver.prune(&threads, strategy).await);
                let want = outcome(oracle.prune(&threads, strategy).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::ListThreads { filter, after, limit } => {
                let options = ListThreadsOptions {
                    filter: names.entries(filter),
                    after: match after {
                        Some(a) => Some(names.thread(a)),
                        None if exclusive => None,
                        None => Some(prefix.to_owned()),
                    },
                    limit: *limit,
                };
                let restrict = |r: crate::Result<Vec<crate::saver::ThreadInfo>>| {
                    outcome(r).map(|v| v.into_iter().filter(|t| names.owns(&t.thread_id)).collect::<Vec<_>>())
                };
                let got = canon.threads(restrict(saver.list_threads(options.clone()).await));
                let want = canon.threads(restrict(oracle.list_threads(options).await));
                compare_items(step, op, &got, &want, verbose)?;
            }
            ModelOp::DeltaChannelHistory {
                thread,
                ns,
                id,
                channels,
            } => {
                let mut config = CheckpointConfig::new(names.thread(thread)).with_ns(ns.clone());
                config.checkpoint_id = id.clone();
                let ordered = |r: crate::Result<indexmap::IndexMap<String, crate::saver::DeltaChannelHistory>>| {
                    outcome(r).map(|m| m.into_iter().collect::<Vec<_>>())
                };
                let got = ordered(saver.get_delta_channel_history(&config, channels).await);
                let want = ordered(oracle.get_delta_channel_history(&config, channels).await);
                compare_items(step, op, &got, &want, verbose)?;
            }
        }
        *counts.ran.entry(op.name()).or_default() += 1;
    }
    // The whole state of the case's threads, every namespace.
    let final_op = ModelOp::List {
        thread: None,
        ns: None,
        id: None,
        filter: Vec::new(),
        before: None,
        limit: None,
    };
    for thread in THREADS {
        let config = Some(CheckpointConfig::all_namespaces(names.thread(thread)));
        let got = canon.tuples(collect_list(saver, config.clone(), ListOptions::default()).await);
        let want = canon.tuples(collect_list(oracle, config, ListOptions::default()).await);
        compare_items(ops.len(), &final_op, &got, &want, verbose)
            .map_err(|e| format!("final state of thread {thread}: {e}"))?;
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|err| panic!("cannot build a tokio runtime: {err}"))
}

/// Runs `config.cases` random sequences against a saver made by `factory`
/// (called once per sequence, shrinking runs included) and against a fresh
/// [`InMemorySaver`], comparing every result. The factory may return
/// `Arc<dyn CheckpointSaver>` or `Result<_, Skip>` like the conformance
/// suite's.
///
/// # Errors
/// The minimal sequence on which the two differ, with the difference.
///
/// # Panics
/// When no tokio runtime can be built (this is a test harness).
pub fn check_against_oracle<F, Fut>(factory: F, config: ModelConfig) -> Result<ModelStats, ModelFailure>
where
    F: Fn() -> Fut,
    Fut: Future,
    Fut::Output: SaverOrSkip,
{
    let rt = runtime();
    let stats = Mutex::new(ModelStats::default());
    let skip: Mutex<Option<Skip>> = Mutex::new(None);
    let mut runner = TestRunner::new(Config {
        cases: config.cases,
        failure_persistence: None,
        rng_seed: config.seed.map_or(RngSeed::Random, RngSeed::Fixed),
        ..Config::default()
    });
    // One case: a fresh saver from the factory, a fresh oracle.
    let run_case = |ops: &[ModelOp], verbose: bool| -> Result<(), String> {
        if skip.lock().is_some() {
            return Ok(());
        }
        let settings = ReplaySettings {
            prefix: if config.exclusive {
                String::new()
            } else {
                format!("m{:016x}-", rand::random::<u64>())
            },
            exclusive: config.exclusive,
            verbose,
            ordered_metadata: config.ordered_metadata,
        };
        let mut counts = OpCounts::default();
        let out = rt.block_on(async {
            let saver = match factory().await.saver_or_skip() {
                Ok(saver) => saver,
                Err(reason) => {
                    *skip.lock() = Some(reason);
                    return Ok(());
                }
            };
            let oracle = InMemorySaver::new();
            replay(&*saver, &oracle, ops, &settings, &mut counts).await
        });
        let mut stats = stats.lock();
        for (name, n) in counts.ran {
            *stats.ops.entry(name).or_default() += n;
        }
        for (name, n) in counts.skipped {
            *stats.skipped_ops.entry(name).or_default() += n;
        }
        out
    };
    let result = runner.run(&ops_strategy(config.max_ops), |ops| {
        run_case(&ops, false).map_err(TestCaseError::fail)
    });
    if let Some(Skip(reason)) = skip.lock().take() {
        let mut stats = stats.into_inner();
        stats.skipped = Some(reason);
        return Ok(stats);
    }
    match result {
        Ok(()) => {
            let mut stats = stats.into_inner();
            stats.cases = config.cases;
            Ok(stats)
        }
        Err(TestError::Fail(reason, ops)) => {
            // Describe the minimal case in full (if it fails again).
            let reason = run_case(&ops, true)
                .err()
                .unwrap_or_else(|| format!("{} (did not fail again when replayed)", reason.message()));
            Err(ModelFailure { ops, reason })
        }
        Err(TestError::Abort(reason)) => Err(ModelFailure {
            ops: Vec::new(),
            reason: format!("aborted: {}", reason.message()),
        }),
    }
}
