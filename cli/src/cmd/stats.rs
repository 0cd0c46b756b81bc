//! `stats URL`: bytes per thread and per channel, to find what makes a
//! store grow.
//!
//! Sizes are the serialized bytes of what the backend stores: SQLite keeps
//! every channel value inside every checkpoint (a value is counted once per
//! checkpoint holding it), PostgreSQL keeps one blob per (namespace,
//! channel, version) (counted once), as Redis does. Writes count their serialized value,
//! checkpoints their metadata JSON and the rest of the checkpoint
//! (versions, versions seen). Table and index overhead is in the on-disk
//! size only. For Redis the size is the server's `MEMORY USAGE` of every
//! key of the prefix (`memory_bytes` in the JSON; `disk_bytes` is null).
//! The store's parts follow (`space` in the JSON): a SQLite file and its
//! WAL with the free pages in them, PostgreSQL's tables with their heap,
//! TOAST and indexes and their dead rows, and what `checkpointer reclaim`
//! could give back.

use std::collections::{HashMap, HashSet};

use checkpointer::retention::RetentionPolicy;
use checkpointer::serde::{json::to_python_json, msgpack, JsonPlusSerializer, Serializer};
use checkpointer::space::SpaceUsage;
use checkpointer::{CheckpointConfig, ListOptions, StorageSize, Value, ValueLayout as Layout};
use futures::StreamExt;
use serde_json::json;

use super::reclaim::{space_json, space_text};
use super::{finish, open, read_failure, retention, select_threads};
use crate::args::StatsArgs;
use crate::error::{CliError, CliResult, Context};
use crate::output::{emit, emit_json, human_bytes, Style, Table, Ui};
use crate::store::{Access, Store};

#[derive(Default, Clone)]
struct ChannelStats {
    /// Values stored (checkpoints holding one, or distinct versions).
    values: u64,
    value_bytes: u64,
    writes: u64,
    write_bytes: u64,
}

impl ChannelStats {
    fn total(&self) -> u64 {
        self.value_bytes + self.write_bytes
    }

    fn add(&mut self, other: &ChannelStats) {
        self.values += other.values;
        self.value_bytes += other.value_bytes;
        self.writes += other.writes;
        self.write_bytes += other.write_bytes;
    }

    fn to_json(&self) -> serde_json::Value {
        json!({
            "values": self.values,
            "value_bytes": self.value_bytes,
            "writes": self.writes,
            "write_bytes": self.write_bytes,
            "bytes": self.total(),
        })
    }
}

#[derive(Default)]
struct ThreadStats {
    thread_id: String,
    checkpoints: u64,
    namespaces: HashSet<String>,
    metadata_bytes: u64,
    checkpoint_bytes: u64,
    channels: HashMap<String, ChannelStats>,
    /// The bytes counted for each checkpoint, by (namespace, id): its own,
    /// its writes', and the values counted with it.
    sizes: HashMap<(String, String), u64>,
}

impl ThreadStats {
    fn channel_total(&self) -> ChannelStats {
        let mut t = ChannelStats::default();
        for c in self.channels.values() {
            t.add(c);
        }
        t
    }

    fn total(&self) -> u64 {
        self.channel_total().total() + self.metadata_bytes + self.checkpoint_bytes
    }

    fn largest_channel(&self) -> Option<(&String, &ChannelStats)> {
        self.channels
            .iter()
            .max_by_key(|(name, c)| (c.total(), std::cmp::Reverse(*name)))
    }
}

pub async fn run(args: StatsArgs, ui: Ui) -> CliResult {
    let policy = retention::policy_of(&args.policy)?;
    let store = open(&args.url, Access::Read).await?;
    let out = body(&store, &args, policy.as_ref(), ui).await;
    let (threads, size, space, layout, failed, freed) = finish(store, out).await?;
    let url = checkpointer::secret::redact(&args.url);
    let size = Size {
        bytes: size.map(|s| s.bytes),
        in_memory: size.is_some_and(|s| s.in_memory),
    };
    let parts = Parts {
        space: space.as_ref(),
        layout,
        freed: freed.as_ref(),
    };
    report(&url, &threads, size, parts, args.top, ui)?;
    if failed.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = failed.iter().map(|t| format!("{t:?}")).collect();
    Err(CliError::store(format!(
        "{} thread(s) cannot be read and are not counted: {}",
        failed.len(),
        names.join(", ")
    )))
}

type Measured = (
    Vec<ThreadStats>,
    Option<StorageSize>,
    Option<SpaceUsage>,
    Layout,
    Vec<String>,
    Option<retention::Freed>,
);

/// What the report shows beside the threads.
struct Parts<'a> {
    space: Option<&'a SpaceUsage>,
    layout: Layout,
    /// What a given policy would free.
    freed: Option<&'a retention::Freed>,
}

/// The stats of every thread that reads; the others are reported on stderr
/// (each bad row by namespace and checkpoint id) and named in the result.
async fn body(store: &Store, args: &StatsArgs, policy: Option<&RetentionPolicy>, ui: Ui) -> CliResult<Measured> {
    let threads = select_threads(store, &args.thread).await?;
    let layout = store.layout();
    let bar = ui.progress(Some(threads.len() as u64), "measuring");
    let mut out = Vec::new();
    let mut failed = Vec::new();
    let mut freed = policy.map(|_| retention::Freed::default());
    for thread in threads {
        bar.set_message(thread.clone());
        match thread_stats(store, thread.clone(), layout).await {
            Ok(s) => {
                if let (Some(policy), Some(freed)) = (policy, freed.as_mut()) {
                    let options = retention::options(&args.policy);
                    freed.add(retention::would_free(store, &thread, policy, options, &s.sizes).await?);
                }
                out.push(s);
            }
            Err(e) => {
                let lines = read_failure(store, &thread, &e).await;
                bar.suspend(|| {
                    for line in lines {
                        eprintln!("{} {line}", ui.paint_err(Style::Red, "error:"));
                    }
                });
                failed.push(thread);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let (size, space) = (store.size().await, store.space_usage().await);
    Ok((out, size, space, layout, failed, freed))
}

fn len(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The bytes a serializer stores for a value.
fn stored_len(v: &Value) -> u64 {
    JsonPlusSerializer.dumps_typed(v).map_or(0, |t| len(t.data.len()))
}

/// The serialized bytes of each checkpoint of `thread` (with its writes and
/// the values counted with it), by (namespace, id).
pub async fn checkpoint_sizes(store: &Store, thread: &str) -> CliResult<HashMap<(String, String), u64>> {
    Ok(thread_stats(store, thread.to_owned(), store.layout()).await?.sizes)
}

async fn thread_stats(store: &Store, thread: String, layout: Layout) -> CliResult<ThreadStats> {
    let mut stats = ThreadStats {
        thread_id: thread.clone(),
        ..ThreadStats::default()
    };
    let mut seen_versions: HashSet<(String, String, String)> = HashSet::new();
    let mut stream = store
        .saver
        .list(Some(CheckpointConfig::all_namespaces(&thread)), ListOptions::default());
    while let Some(t) = stream.next().await {
        let t = t.context(format!("cannot read thread {thread:?} of {}", store.name()))?;
        let ns = t.config.ns().to_owned();
        stats.checkpoints += 1;
        stats.namespaces.insert(ns.clone());
        let metadata = to_python_json(&t.metadata.to_value()).map_or(0, |s| len(s.len()));
        let own = msgpack::encode(&t.checkpoint.to_value(false)).map_or(0, |b| len(b.len()));
        stats.metadata_bytes += metadata;
        stats.checkpoint_bytes += own;
        let mut size = metadata.saturating_add(own);
        for (channel, value) in &t.checkpoint.channel_values {
            let bytes = match layout {
                Layout::Inline => msgpack::encode(value).map_or(0, |b| len(b.len())),
                Layout::PerVersion => {
                    let version = t
                        .checkpoint
                        .channel_versions
                        .get(channel)
                        .map(|v| v.to_string())
                        .unwrap_or_default();
                    if !seen_versions.insert((ns.clone(), channel.clone(), version)) {
                        continue;
                    }
                    stored_len(value)
                }
            };
            let c = stats.channels.entry(channel.clone()).or_default();
            c.values += 1;
            c.value_bytes += bytes;
            size = size.saturating_add(bytes);
        }
        for w in &t.pending_writes {
            let c = stats.channels.entry(w.channel.clone()).or_default();
            let bytes = stored_len(&w.value);
            c.writes += 1;
            c.write_bytes += bytes;
            size = size.saturating_add(bytes);
        }
        stats.sizes.insert((ns, t.checkpoint.id.clone()), size);
    }
    Ok(stats)
}

/// What the store takes: on disk (SQLite, PostgreSQL) or in the server's
/// memory (Redis: `MEMORY USAGE` of its keys).
struct Size {
    bytes: Option<u64>,
    in_memory: bool,
}

fn report(url: &str, threads: &[ThreadStats], size: Size, parts: Parts<'_>, top: usize, ui: Ui) -> CliResult {
    let Parts { space, layout, freed } = parts;
    let (disk, memory) = if size.in_memory {
        (None, size.bytes)
    } else {
        (size.bytes, None)
    };
    let mut channels: HashMap<&String, ChannelStats> = HashMap::new();
    for t in threads {
        for (name, c) in &t.channels {
            channels.entry(name).or_default().add(c);
        }
    }
    let mut channels: Vec<(&String, ChannelStats)> = channels.into_iter().collect();
    channels.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then_with(|| a.0.cmp(b.0)));
    let mut order: Vec<&ThreadStats> = threads.iter().collect();
    order.sort_by(|a, b| b.total().cmp(&a.total()).then_with(|| a.thread_id.cmp(&b.thread_id)));
    let total: u64 = threads.iter().map(ThreadStats::total).sum();
    let layout_text = match layout {
        Layout::Inline => "inline: every checkpoint holds all its channel values",
        Layout::PerVersion => "per version: one stored value per (namespace, channel, version)",
    };
    if ui.json {
        return emit_json(&json!({
            "store": url,
            "disk_bytes": disk,
            "memory_bytes": memory,
            "space": space.map(space_json),
            "layout": match layout { Layout::Inline => "inline", Layout::PerVersion => "per_version" },
            "bytes": total,
            "retention": freed.map(|f| f.to_json(false)),
            "threads": order.iter().map(|t| {
                let mut chans: Vec<(&String, &ChannelStats)> = t.channels.iter().collect();
                chans.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then_with(|| a.0.cmp(b.0)));
                let c = t.channel_total();
                json!({
                    "thread_id": t.thread_id,
                    "checkpoints": t.checkpoints,
                    "namespaces": t.namespaces.len(),
                    "writes": c.writes,
                    "value_bytes": c.value_bytes,
                    "write_bytes": c.write_bytes,
                    "metadata_bytes": t.metadata_bytes,
                    "checkpoint_bytes": t.checkpoint_bytes,
                    "bytes": t.total(),
                    "channels": chans.iter().map(|(n, c)| {
                        let mut v = c.to_json();
                        if let Some(m) = v.as_object_mut() {
                            m.insert("channel".into(), json!(n));
                        }
                        v
                    }).collect::<Vec<_>>(),
                })
            }).collect::<Vec<_>>(),
            "channels": channels.iter().map(|(n, c)| {
                let mut v = c.to_json();
                if let Some(m) = v.as_object_mut() {
                    m.insert("channel".into(), json!(n));
                }
                v
            }).collect::<Vec<_>>(),
        }));
    }
    let mut out = String::new();
    out.push_str(&format!("{}   {url}\n", ui.paint(Style::Bold, "store ")));
    if let Some(d) = disk {
        out.push_str(&format!(
            "{}   {} on disk\n",
            ui.paint(Style::Bold, "size  "),
            human_bytes(d)
        ));
    }
    if let Some(m) = memory {
        out.push_str(&format!(
            "{}   {} in memory (the server's MEMORY USAGE of the keys)\n",
            ui.paint(Style::Bold, "size  "),
            human_bytes(m)
        ));
    }
    if let Some(space) = space {
        out.push_str(&space_text(space, &ui));
    }
    out.push_str(&format!("{}   {layout_text}\n", ui.paint(Style::Bold, "layout")));
    out.push_str(&format!(
        "{}   {} thread(s), {} checkpoint(s), {} serialized\n",
        ui.paint(Style::Bold, "total "),
        threads.len(),
        threads.iter().map(|t| t.checkpoints).sum::<u64>(),
        human_bytes(total)
    ));
    if let Some(f) = freed {
        out.push_str(&format!("{}   {}\n", ui.paint(Style::Bold, "policy"), f.summary()));
    }
    out.push('\n');
    let mut table = Table::new(&[
        "THREAD",
        ">CHECKPOINTS",
        ">WRITES",
        ">VALUE BYTES",
        ">WRITE BYTES",
        ">CHECKPOINT BYTES",
        ">TOTAL",
        "LARGEST CHANNEL",
    ]);
    for t in order.iter().take(top) {
        let c = t.channel_total();
        let largest = t
            .largest_channel()
            .map_or(String::new(), |(n, c)| format!("{n} ({})", human_bytes(c.total())));
        table.row(vec![
            (t.thread_id.clone(), Some(Style::Cyan)),
            (t.checkpoints.to_string(), None),
            (c.writes.to_string(), None),
            (human_bytes(c.value_bytes), None),
            (human_bytes(c.write_bytes), None),
            (human_bytes(t.metadata_bytes + t.checkpoint_bytes), None),
            (human_bytes(t.total()), Some(Style::Bold)),
            (largest, None),
        ]);
    }
    out.push_str(&table.render(&ui));
    if order.len() > top {
        out.push_str(&format!("… {} more thread(s) (--top)\n", order.len() - top));
    }
    let mut table = Table::new(&[
        "CHANNEL",
        ">VALUES STORED",
        ">VALUE BYTES",
        ">WRITES",
        ">WRITE BYTES",
        ">TOTAL",
        ">SHARE",
    ]);
    for (name, c) in channels.iter().take(top) {
        let share = if total > 0 {
            format!("{:.1}%", c.total() as f64 * 100.0 / total as f64)
        } else {
            "-".to_owned()
        };
        table.row(vec![
            ((*name).clone(), Some(Style::Cyan)),
            (c.values.to_string(), None),
            (human_bytes(c.value_bytes), None),
            (c.writes.to_string(), None),
            (human_bytes(c.write_bytes), None),
            (human_bytes(c.total()), Some(Style::Bold)),
            (share, None),
        ]);
    }
    if !table.is_empty() {
        out.push('\n');
        out.push_str(&table.render(&ui));
        if channels.len() > top {
            out.push_str(&format!("… {} more channel(s) (--top)\n", channels.len() - top));
        }
    }
    emit(&out)
}
