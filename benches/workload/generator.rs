//! The deterministic op stream of `../shared/peer/WORKLOAD.md` (v1): ids,
//! timestamps, payloads, the read plan and the op-stream digest, exactly as
//! `bench_python.py` produces them. Shared by `benches/workload/main.rs`,
//! `benches/scaling.rs`, `benches/concurrency.rs` and
//! `tests/api/workload_sample.rs`.
#![allow(dead_code)]

use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Value,
};
use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};

/// The scalar channels, in channel order.
pub const SCALARS: [&str; 4] = ["counter", "status", "flag", "score"];
/// Every channel, in channel order.
pub const ALL_CHANNELS: [&str; 5] = ["messages", "counter", "status", "flag", "score"];
/// The task path of every write.
pub const TASK_PATH: &str = "~__pregel_pull, agent";
const BASE_TICKS: u64 = 0x1F0_0000_0000_0000;
const CONTENT_LEN: usize = 150;

/// splitmix64, as WORKLOAD.md §5 defines it.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A stream seeded with `seed` (taken mod 2^64).
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `next() % n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The RNG stream of read phase `phase`: seeded `seed * 1000 + phase`.
pub fn phase_rng(seed: u64, phase: u64) -> SplitMix64 {
    SplitMix64::new(seed.wrapping_mul(1000).wrapping_add(phase))
}

/// `thread-{t:05}`.
pub fn thread_id(t: usize) -> String {
    format!("thread-{t:05}")
}

/// The UUIDv6-shaped id of step `s` of thread `t` (sorts in `t*steps+s` order).
pub fn checkpoint_id(t: usize, s: usize, steps: usize) -> String {
    let g = (t * steps + s) as u64;
    let ticks = BASE_TICKS + g;
    let time_high = (ticks >> 28) & 0xFFFF_FFFF;
    let time_mid = (ticks >> 12) & 0xFFFF;
    let time_low = ticks & 0x0FFF;
    let clock_seq = 0x8000 | (s as u64 & 0x3FFF);
    let node = t as u64 & 0xFFFF_FFFF_FFFF;
    format!("{time_high:08x}-{time_mid:04x}-6{time_low:03x}-{clock_seq:04x}-{node:012x}")
}

/// 2025-01-01T00:00:00 UTC plus `t*steps+s` milliseconds, 6 fraction digits.
pub fn checkpoint_ts(t: usize, s: usize, steps: usize) -> String {
    let g = (t * steps + s) as u64;
    let (secs, ms) = (g / 1000, g % 1000);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(20_089 + days as i64); // 2025-01-01 = day 20089 since 1970
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        ms * 1000
    )
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `{t:08x}-0000-5000-8000-{s:012x}`.
pub fn task_id(t: usize, s: usize) -> String {
    format!("{t:08x}-0000-5000-8000-{s:012x}")
}

/// The (role, content, id) of `message(t, s)`.
pub fn message_parts(seed: u64, t: usize, s: usize) -> (&'static str, String, String) {
    let mut content = String::with_capacity(192);
    for j in 0..3 {
        let digest = Sha256::digest(format!("{seed}:{t}:{s}:{j}").as_bytes());
        for b in digest.iter() {
            content.push_str(&format!("{b:02x}"));
        }
    }
    content.truncate(CONTENT_LEN);
    let role = if s % 2 == 0 { "user" } else { "assistant" };
    (role, content, format!("msg-{t:05}-{s:05}"))
}

/// `message(t, s)` as a saver value: a map role, content, id (in that order).
pub fn message(seed: u64, t: usize, s: usize) -> Value {
    let (role, content, id) = message_parts(seed, t, s);
    Value::map([
        ("role", Value::from(role)),
        ("content", Value::from(content)),
        ("id", Value::from(id)),
    ])
}

fn message_json(seed: u64, t: usize, s: usize) -> Json {
    let (role, content, id) = message_parts(seed, t, s);
    json!({"role": role, "content": content, "id": id})
}

/// The scalar channel changed at step `s >= 1`.
pub fn changed_scalar(s: usize) -> &'static str {
    SCALARS[s % 4]
}

/// A scalar's value, as a saver value or as JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// `counter`
    Int(i64),
    /// `status`
    Str(String),
    /// `flag`
    Bool(bool),
    /// `score`
    Float(f64),
}

impl Scalar {
    /// As a saver value.
    pub fn to_value(&self) -> Value {
        match self {
            Scalar::Int(i) => Value::Int(*i),
            Scalar::Str(s) => Value::from(s.as_str()),
            Scalar::Bool(b) => Value::Bool(*b),
            Scalar::Float(f) => Value::Float(*f),
        }
    }

    fn to_json(&self) -> Json {
        match self {
            Scalar::Int(i) => json!(i),
            Scalar::Str(s) => json!(s),
            Scalar::Bool(b) => json!(b),
            Scalar::Float(f) => json!(f),
        }
    }
}

/// The value scalar `name` takes when it changes at step `s >= 1`.
pub fn scalar_value(name: &str, s: usize) -> Scalar {
    match name {
        "counter" => Scalar::Int(s as i64),
        "status" => Scalar::Str(format!("status-{s}")),
        // changes at s = 2, 6, 10, ... toggling false, true, false, ...
        "flag" => Scalar::Bool(((s as i64 - 2).div_euclid(4)) % 2 == 1),
        _ => Scalar::Float(s as f64 * 0.25),
    }
}

/// The scalars at step 0, in channel order.
pub fn initial_scalars() -> Vec<(&'static str, Scalar)> {
    vec![
        ("counter", Scalar::Int(0)),
        ("status", Scalar::Str("status-0".into())),
        ("flag", Scalar::Bool(true)),
        ("score", Scalar::Float(0.0)),
    ]
}

/// The channels step `s` changes, in channel order.
pub fn changed_channels(s: usize) -> Vec<&'static str> {
    if s == 0 {
        ALL_CHANNELS.to_vec()
    } else {
        vec!["messages", changed_scalar(s)]
    }
}

/// One step of one thread: what `put` and `put_writes` receive, versions aside.
#[derive(Debug, Clone)]
pub struct Op {
    /// thread index
    pub t: usize,
    /// step index
    pub s: usize,
    /// `thread_id(t)`
    pub thread_id: String,
    /// `checkpoint_id(t, s)`
    pub checkpoint_id: String,
    /// `checkpoint_id(t, s-1)`, none at step 0
    pub parent_checkpoint_id: Option<String>,
    /// `ts(t, s)`
    pub ts: String,
    /// channels changed at this step
    pub changed_channels: Vec<&'static str>,
    /// the 4 scalars after this step, in channel order
    pub scalars: Vec<(&'static str, Scalar)>,
    /// `task_id(t, s)`
    pub writes_task_id: String,
    /// the scalar written by the pending writes, and its value
    pub write_scalar: (&'static str, Scalar),
}

/// The ops of thread `t`, steps `0..steps`.
pub fn thread_ops(t: usize, steps: usize) -> Vec<Op> {
    let mut scalars = initial_scalars();
    let mut out = Vec::with_capacity(steps);
    for s in 0..steps {
        if s > 0 {
            let c = changed_scalar(s);
            if let Some(slot) = scalars.iter_mut().find(|(n, _)| *n == c) {
                slot.1 = scalar_value(c, s);
            }
        }
        let next = changed_scalar(s + 1);
        out.push(Op {
            t,
            s,
            thread_id: thread_id(t),
            checkpoint_id: checkpoint_id(t, s, steps),
            parent_checkpoint_id: (s > 0).then(|| checkpoint_id(t, s - 1, steps)),
            ts: checkpoint_ts(t, s, steps),
            changed_channels: changed_channels(s),
            scalars: scalars.clone(),
            writes_task_id: task_id(t, s),
            write_scalar: (next, scalar_value(next, s + 1)),
        });
    }
    out
}

impl Op {
    /// The 2 pending writes stored after this step's put.
    pub fn writes(&self, seed: u64) -> Vec<(String, Value)> {
        vec![
            (
                "messages".to_owned(),
                Value::Array((vec![message(seed, self.t, self.s + 1)]).into()),
            ),
            (self.write_scalar.0.to_owned(), self.write_scalar.1.to_value()),
        ]
    }

    /// The compact, key-sorted JSON line of `workload_ops()` (no newline).
    pub fn json_line(&self, seed: u64) -> String {
        let scalars: Map<String, Json> = self
            .scalars
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.to_json()))
            .collect();
        let op = json!({
            "thread_id": self.thread_id,
            "step": self.s,
            "checkpoint_id": self.checkpoint_id,
            "parent_checkpoint_id": self.parent_checkpoint_id,
            "ts": self.ts,
            "changed_channels": self.changed_channels,
            "appended_message": message_json(seed, self.t, self.s),
            "scalars": scalars,
            "metadata": {"source": "loop", "step": self.s, "parents": {}},
            "writes_task_id": self.writes_task_id,
            "writes_task_path": TASK_PATH,
            "writes": [
                ["messages", [message_json(seed, self.t, self.s + 1)]],
                [self.write_scalar.0, self.write_scalar.1.to_json()],
            ],
        });
        sorted(op).to_string()
    }
}

/// `v` with every object's keys in ascending order (as Python's `sort_keys`).
fn sorted(v: Json) -> Json {
    match v {
        Json::Object(m) => {
            let mut entries: Vec<(String, Json)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Json::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Json::Array(a) => Json::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// The whole op stream as JSONL (each line followed by `\n`).
pub fn dump(seed: u64, threads: usize, steps: usize) -> String {
    let mut out = String::new();
    for t in 0..threads {
        for op in thread_ops(t, steps) {
            out.push_str(&op.json_line(seed));
            out.push('\n');
        }
    }
    out
}

/// SHA-256 (hex) of the op stream (WORKLOAD.md §6).
pub fn digest(seed: u64, threads: usize, steps: usize) -> String {
    let mut h = Sha256::new();
    for t in 0..threads {
        for op in thread_ops(t, steps) {
            h.update(op.json_line(seed).as_bytes());
            h.update(b"\n");
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The read plan of WORKLOAD.md §5.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadPlan {
    /// `get_tuple_by_id` picks: (t, s)
    pub gets: Vec<(usize, usize)>,
    /// `list_filter_thread`: (t, k)
    pub thread_filters: Vec<(usize, usize)>,
    /// `list_filter_global`: k
    pub global_filters: Vec<usize>,
}

/// The read plan for the given sizes.
pub fn read_plan(seed: u64, threads: usize, steps: usize, random_gets: usize, global_filters: usize) -> ReadPlan {
    let (tn, sn) = (threads as u64, steps as u64);
    let mut r = phase_rng(seed, 1);
    let gets = (0..random_gets)
        .map(|_| {
            let t = r.below(tn) as usize;
            let s = r.below(sn) as usize;
            (t, s)
        })
        .collect();
    let mut r = phase_rng(seed, 2);
    let thread_filters = (0..threads).map(|t| (t, r.below(sn) as usize)).collect();
    let mut r = phase_rng(seed, 3);
    let global_filters = (0..global_filters).map(|_| r.below(sn) as usize).collect();
    ReadPlan {
        gets,
        thread_filters,
        global_filters,
    }
}

impl ReadPlan {
    /// As Python's `json.dump(plan)` writes it (separators `, ` and `: `).
    pub fn to_python_json(&self) -> String {
        let pairs = |v: &[(usize, usize)]| {
            v.iter()
                .map(|(a, b)| format!("[{a}, {b}]"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let globals = self
            .global_filters
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "{{\"gets\": [{}], \"thread_filters\": [{}], \"global_filters\": [{}]}}",
            pairs(&self.gets),
            pairs(&self.thread_filters),
            globals
        )
    }
}

/// The arguments of one step's `put` and `put_writes`.
#[derive(Debug, Clone)]
pub struct StepArgs {
    /// the op this step follows
    pub op: Op,
    /// `put`'s config (names the parent from step 1)
    pub config: CheckpointConfig,
    /// the checkpoint (WORKLOAD.md §3 step 2)
    pub checkpoint: Checkpoint,
    /// `{"source": "loop", "step": s, "parents": {}}`
    pub metadata: CheckpointMetadata,
    /// the versions of the channels this step changed
    pub new_versions: ChannelVersions,
    /// the 2 pending writes stored after the put
    pub writes: Vec<(String, Value)>,
}

/// Builds the checkpoints of one thread step by step, keeping the channel
/// versions (from the saver's `get_next_version`) and the message list.
#[derive(Debug)]
pub struct ThreadStream {
    seed: u64,
    t: usize,
    ops: std::vec::IntoIter<Op>,
    msgs: Vec<Value>,
    window: Option<usize>,
    versions: ChannelVersions,
    prev_msg_version: Option<ChannelVersion>,
}

impl ThreadStream {
    /// Thread `t` of the workload with `steps` steps.
    pub fn new(seed: u64, t: usize, steps: usize) -> Self {
        ThreadStream {
            seed,
            t,
            ops: thread_ops(t, steps).into_iter(),
            msgs: Vec::new(),
            window: None,
            versions: Default::default(),
            prev_msg_version: None,
        }
    }

    /// Keeps only the last `n` messages in `messages` (constant-size
    /// checkpoints, for the scaling bench); the workload itself keeps all.
    /// The window starts full (`n - 1` messages of steps the thread never
    /// runs, numbered from 90 000), so every checkpoint, the first ones
    /// included, holds `n` messages of the workload's size.
    pub fn with_window(mut self, n: usize) -> Self {
        self.window = Some(n);
        self.msgs = (0..n.saturating_sub(1))
            .map(|i| message(self.seed, self.t, 90_000 + i))
            .collect();
        self
    }

    /// The next step, versions from `next_version`; `None` after the last.
    pub fn next_step(&mut self, next_version: impl Fn(Option<&ChannelVersion>) -> ChannelVersion) -> Option<StepArgs> {
        let op = self.ops.next()?;
        if let Some(pv) = self.versions.get("messages") {
            self.prev_msg_version = Some(pv.clone());
        }
        let mut new_versions: ChannelVersions = ChannelVersions::new();
        for ch in &op.changed_channels {
            let v = next_version(self.versions.get(*ch));
            self.versions.insert((*ch).to_owned(), v.clone());
            new_versions.insert((*ch).to_owned(), v);
        }
        self.msgs.push(message(self.seed, self.t, op.s));
        if let Some(w) = self.window {
            if self.msgs.len() > w {
                self.msgs.remove(0);
            }
        }
        let mut cp = Checkpoint::new(op.s as i64);
        cp.id = op.checkpoint_id.clone();
        cp.ts = op.ts.clone();
        cp.channel_values
            .insert("messages".into(), Value::Array(self.msgs.clone().into()));
        for (name, v) in &op.scalars {
            cp.channel_values.insert((*name).to_owned(), v.to_value());
        }
        cp.channel_versions = self.versions.clone();
        if op.s > 0 {
            if let Some(pv) = &self.prev_msg_version {
                let mut seen = ChannelVersions::new();
                seen.insert("messages".to_owned(), pv.clone());
                cp.versions_seen.insert("agent".into(), seen);
            }
        }
        let mut updated: Vec<String> = op.changed_channels.iter().map(|c| (*c).to_owned()).collect();
        updated.sort();
        cp.updated_channels = Some(updated.into());
        let mut config = CheckpointConfig::new(&op.thread_id).with_ns("");
        config.checkpoint_id = op.parent_checkpoint_id.clone();
        let metadata = CheckpointMetadata::new(CheckpointSource::Loop, op.s as i64);
        let writes = op.writes(self.seed);
        Some(StepArgs {
            op,
            config,
            checkpoint: cp,
            metadata,
            new_versions,
            writes,
        })
    }
}
