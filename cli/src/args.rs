//! The command line.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::output::ColorChoice;

const AFTER_HELP: &str = "\
Stores:
  sqlite://PATH             a SQLite file, relative path (sqlite:///ABS/PATH for an absolute one)
  postgres://USER@HOST/DB   a PostgreSQL database (postgresql:// too)
  redis://HOST:PORT/DB?prefix=NAME
                            the keys of a RedisSaver under key prefix NAME (default ckpt);
                            a password as redis://:PASSWORD@HOST is never printed
  rediss://HOST:PORT/DB?prefix=NAME&ca=CA.pem
                            the same over TLS, the server's certificate checked against the
                            webpki roots, or the CA file ca=PATH (a private CA); a client
                            certificate for mutual TLS: &cert=PATH&key=PATH (PEM files)
  redis://HOST:7000,redis://HOST:7001,…?prefix=NAME
                            a Redis Cluster, from some of its nodes (rediss:// too)
  memory:                   an empty in-memory store (a dry-run target for copy)

Exit codes:
  0 success   1 other failure   2 usage or bad URL   3 not found (file, thread, checkpoint)
  4 store error (connect, read, write, decode)   5 conflict (target thread exists)
  6 export, threads or check found the store inconsistent (a missing parent, missing writes, an unreadable row,
    a violated runtime invariant)";

/// Inspect, export, diff, copy and prune LangGraph checkpoint stores.
///
/// Reads and writes the tables of Python LangGraph's SqliteSaver and
/// PostgresSaver, byte-compatible with them, and the keys of checkpointer's
/// RedisSaver.
#[derive(Debug, Parser)]
#[command(name = "checkpointer", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,

    /// Colour the output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,

    /// Never show progress bars (they are only shown when stderr is a terminal).
    #[arg(long, global = true)]
    pub no_progress: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Threads with their checkpoint count, namespaces, latest step and time.
    Threads(ThreadsArgs),
    /// The checkpoints of a thread, newest first.
    History(HistoryArgs),
    /// One checkpoint: channel values, versions, metadata, pending writes.
    Show(ShowArgs),
    /// What changed between two checkpoints, channel by channel.
    Diff(DiffArgs),
    /// A canonical JSON dump, as testdata/peer/read_fixtures.py prints it.
    Export(ExportArgs),
    /// Copy threads between stores (e.g. SQLite to PostgreSQL or Redis).
    Copy(CopyArgs),
    /// Delete threads: every checkpoint, write and value, in all namespaces.
    DeleteThread(DeleteThreadArgs),
    /// Remove old checkpoints of threads.
    Prune(PruneArgs),
    /// Bytes per thread and per channel: what makes the store grow.
    Stats(StatsArgs),
    /// Give back the space deletes freed: SQLite incremental vacuum and WAL
    /// truncate, PostgreSQL VACUUM (never FULL).
    Reclaim(ReclaimArgs),
    /// Verify the rows a LangGraph runtime relies on: versions, steps,
    /// updated channels, task ids, interrupt and resume writes, parents.
    Check(CheckArgs),
    /// Read a long-term memory store (LangGraph's BaseStore: Python's
    /// SqliteStore file, or checkpointer's): namespaces, items, one item.
    Store(StoreArgs),
}

#[derive(Debug, Args)]
pub struct ThreadsArgs {
    /// The store.
    pub url: String,
    /// Only threads whose latest checkpoint's metadata has KEY equal to the
    /// JSON value (e.g. `source="loop"`, `step=3`); repeat to AND them.
    #[arg(long, value_name = "KEY=JSON")]
    pub filter: Vec<String>,
    /// At most N threads.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Only threads after this thread id (the cursor of the next page).
    #[arg(long, value_name = "THREAD")]
    pub after: Option<String>,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The store.
    pub url: String,
    /// The thread.
    pub thread: String,
    /// The namespace (default: the root namespace "").
    #[arg(long, value_name = "NS", conflicts_with = "all_ns")]
    pub ns: Option<String>,
    /// Every namespace of the thread.
    #[arg(long)]
    pub all_ns: bool,
    /// At most N checkpoints.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The store.
    pub url: String,
    /// The thread.
    pub thread: String,
    /// The checkpoint id (default: the latest).
    pub checkpoint: Option<String>,
    /// The namespace (default: the root namespace "").
    #[arg(long, value_name = "NS", default_value = "")]
    pub ns: String,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The store.
    pub url: String,
    /// The thread.
    pub thread: String,
    /// The older checkpoint id.
    pub from: String,
    /// The newer checkpoint id.
    pub to: String,
    /// The namespace of both (default: the root namespace "").
    #[arg(long, value_name = "NS", default_value = "")]
    pub ns: String,
    /// List unchanged channels too.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The store.
    pub url: String,
    /// Only this thread; repeat for more.
    #[arg(long, value_name = "THREAD")]
    pub thread: Vec<String>,
    /// Replace run-specific ids and timestamps by stable aliases, as
    /// `read_fixtures.py --normalize` does.
    #[arg(long)]
    pub normalize: bool,
    /// Write the dump to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Leave out the `"source"` line naming the store, so dumps of equal
    /// stores in different places compare byte-equal.
    #[arg(long)]
    pub no_source: bool,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to copy from.
    pub src: String,
    /// The store to copy to (created when missing: file, tables, Redis layout marker).
    pub dst: String,
    /// Only this thread; repeat for more (default: every thread).
    #[arg(long, value_name = "THREAD")]
    pub thread: Vec<String>,
    /// Replace threads that already exist in DST (deleted and copied in one
    /// transaction: DST has the old thread or the new one, never less).
    #[arg(long)]
    pub overwrite: bool,
    /// Skip threads DST already has exactly as SRC has them (to finish a
    /// copy that was cut short); the others are refused unless `--overwrite`.
    #[arg(long)]
    pub resume: bool,
}

#[derive(Debug, Args)]
pub struct DeleteThreadArgs {
    /// The store.
    pub url: String,
    /// The threads to delete.
    #[arg(required = true)]
    pub threads: Vec<String>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("strategy").required(true).multiple(true)
    .args(["keep_latest", "delete", "keep_last", "keep_newer_than", "delete_idle"])))]
#[command(group(clap::ArgGroup::new("which").required(true).args(["thread", "all_threads"])))]
pub struct PruneArgs {
    /// The store.
    pub url: String,
    /// Keep the latest checkpoint of each namespace (and what delta channels
    /// need to rebuild), remove the rest.
    #[arg(long, conflicts_with_all = ["delete", "policy", "dry_run"])]
    pub keep_latest: bool,
    /// Remove everything of the threads.
    #[arg(long, conflicts_with_all = ["policy", "dry_run"])]
    pub delete: bool,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// With a policy: print what would go and the bytes it frees; write
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// A thread to prune; repeat for more.
    #[arg(long, value_name = "THREAD")]
    pub thread: Vec<String>,
    /// Prune every thread of the store.
    #[arg(long)]
    pub all_threads: bool,
}

/// A retention policy (see the crate's `retention` module): what stays is
/// the union of the keep rules; the latest checkpoint of each namespace,
/// checkpoints with interrupts or pending writes, fork points and marked
/// checkpoints always stay.
#[derive(Debug, Args, Default)]
#[group(id = "policy", multiple = true, required = false)]
pub struct PolicyArgs {
    /// Keep the newest N checkpoints of each thread and namespace.
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,
    /// Keep checkpoints younger than DUR (`90s`, `45m`, `12h`, `30d`).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub keep_newer_than: Option<Duration>,
    /// Remove whole threads whose latest checkpoint is older than DUR.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub delete_idle: Option<Duration>,
    /// Also keep checkpoints whose metadata has key K (default `pinned`).
    #[arg(long, value_name = "K")]
    pub mark_key: Option<String>,
    /// Checkpoints removed per atomic step.
    #[arg(long, value_name = "N")]
    pub batch: Option<usize>,
    /// After each step, wait N times as long as it took, so that writes
    /// beside it find the store free (0: no wait, for a store no one else
    /// uses).
    #[arg(long, value_name = "N", default_value_t = checkpointer::retention::DEFAULT_REST)]
    pub rest: u32,
}

impl PolicyArgs {
    /// Whether a rule is given.
    pub fn is_set(&self) -> bool {
        self.keep_last.is_some() || self.keep_newer_than.is_some() || self.delete_idle.is_some()
    }
}

/// A duration: a whole number and a unit (`ms`, `s`, `m`, `h`, `d`).
///
/// # Errors
/// A message for clap when the text is not one, or overflows.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: a whole number and a unit (30d, 12h, 45m, 90s, 500ms)"))?;
    let per: u64 = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: the unit is one of ms, s, m, h, d")),
    };
    n.checked_mul(per)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long a duration"))
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The store.
    pub url: String,
    /// Only this thread; repeat for more (default: every thread).
    #[arg(long, value_name = "THREAD")]
    pub thread: Vec<String>,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The store.
    pub url: String,
    /// Only this thread; repeat for more (default: every thread).
    #[arg(long, value_name = "THREAD")]
    pub thread: Vec<String>,
    /// Show at most N threads and N channels, largest first.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// With a policy: also show what it would free (nothing is removed).
    #[command(flatten)]
    pub policy: PolicyArgs,
}

#[derive(Debug, Args)]
pub struct ReclaimArgs {
    /// The store.
    pub url: String,
    /// SQLite: rewrite a file without incremental auto-vacuum (VACUUM; holds
    /// the write lock until done), switching it to incremental.
    #[arg(long)]
    pub rewrite: bool,
    /// SQLite: pages given back per step (one short write transaction each).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub step_pages: u32,
    /// SQLite: after each step, wait N times as long as it took (0: no wait).
    #[arg(long, value_name = "N", default_value_t = checkpointer::retention::DEFAULT_REST)]
    pub rest: u32,
}

#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub command: StoreCommand,
}

/// What `store` reads; the store is opened read-only (no TTL restarts,
/// expired items never shown). A namespace is its labels joined by `.`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// The namespaces that hold items, sorted.
    Namespaces(StoreNamespacesArgs),
    /// The items under a namespace prefix, in the store's order.
    Items(StoreItemsArgs),
    /// One item: its namespace, times and value.
    Get(StoreGetArgs),
}

#[derive(Debug, Args)]
pub struct StoreNamespacesArgs {
    /// The store (memory:, sqlite://PATH).
    pub url: String,
    /// Only namespaces starting with these labels (`*` matches any one label).
    #[arg(long, value_name = "NS")]
    pub prefix: Option<String>,
    /// Only namespaces ending with these labels (`*` matches any one label).
    #[arg(long, value_name = "NS")]
    pub suffix: Option<String>,
    /// Cut namespaces to their first N labels (then deduplicated).
    #[arg(long, value_name = "N")]
    pub max_depth: Option<usize>,
    /// At most N namespaces.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: usize,
    /// Skip the first N.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub offset: usize,
}

#[derive(Debug, Args)]
pub struct StoreItemsArgs {
    /// The store (memory:, sqlite://PATH).
    pub url: String,
    /// The namespace prefix (`users` lists users.42 too; "" every item).
    pub namespace: String,
    /// Only items whose value matches this LangGraph filter, e.g.
    /// '{"kind": "note", "size": {"$gt": 10}}' ($eq $ne $gt $gte $lt $lte).
    #[arg(long, value_name = "JSON")]
    pub filter: Option<String>,
    /// At most N items.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub limit: usize,
    /// Skip the first N.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub offset: usize,
}

#[derive(Debug, Args)]
pub struct StoreGetArgs {
    /// The store (memory:, sqlite://PATH).
    pub url: String,
    /// The item's namespace.
    pub namespace: String,
    /// The item's key.
    pub key: String,
}
