//! Replays the reference workload of `../shared/peer/WORKLOAD.md` (the one
//! `bench_python.py` runs on Python's savers) on `InMemorySaver`, `SqliteSaver`,
//! `PostgresSaver` and `RedisSaver`, and prints one JSON line per (saver, operation) in the
//! line format of `results-python.jsonl`, so `results_table.py` renders both.
//!
//! ```sh
//! cargo bench -p checkpointer-benches --all-features --bench workload -- -T 20 -S 100 --repeats 1
//! cargo bench -p checkpointer-benches --all-features --bench workload -- --digest            # eea02be7…
//! cargo bench -p checkpointer-benches --all-features --bench workload -- --savers memory,sqlite --out rust.jsonl
//! ```
//!
//! Flags as `bench_python.py`: `-T/--threads`, `-S/--steps`, `--random-gets`,
//! `--global-filters`, `--seed`, `--repeats`, `--savers`; `--pg-server`
//! (default `$PEER_PG_SERVER` or `postgresql://postgres@127.0.0.1:5432`: the
//! run creates its own database `ckpt_bench_<pid>_<random>` there and drops
//! it at the end, a failed run included) or `--pg-url` (default
//! `$PEER_PG_URL`: an existing database, named explicitly; WARNING: its
//! checkpoint tables are dropped and recreated), `--redis-url`
//! (default `$PEER_REDIS_URL` or `redis://127.0.0.1:6379`; a fresh key
//! prefix per repeat, its keys deleted afterwards), `--tmpdir`,
//! `--out`, `--digest`, `--dump-workload FILE`. Each saver runs in its own
//! child process (this executable with `--worker KIND`), so peak RSS is per
//! saver. Durability is Python's: SQLite in WAL mode with `synchronous = FULL`,
//! one commit per `put`/`put_writes`; Postgres with the server's
//! `synchronous_commit`; Redis with the server's persistence settings (the
//! same server as Python's `--savers redis`).
//!
//! Next to each put, put_writes, get_tuple and list limit 10 call the worker
//! times the physical floor of the same operation on the same backend
//! (`benches/workload/floor.rs`; none on Redis, whose floor `benches/saver.rs`
//! measures), call by call; each line carries `median_us` (the
//! median call, median over repeats) and, for those ops, `floor_us`.
//! `--decode FILE` times `checkpointer::serde::msgpack::decode` of a blob
//! (the SQLite worker writes the latest checkpoint's with `--blob-out`).

mod floor;
mod generator;
mod target;

use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use checkpointer::postgres::PostgresSaver;
use checkpointer::redis::RedisSaver;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{CheckpointConfig, CheckpointSaver, CheckpointSaverExt, InMemorySaver, ListOptions, Value};
use serde_json::{json, Value as Json};

type Res<T> = Result<T, Box<dyn Error>>;

const PG_TABLES: [&str; 4] = [
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
];

const OPS: [(&str, &str); 9] = [
    ("put", "saver.put() of one checkpoint (T*S calls)"),
    (
        "put_writes",
        "saver.put_writes() of 2 writes from one task after each put (T*S calls)",
    ),
    (
        "get_tuple_latest",
        "get_tuple(thread, no checkpoint_id) once per thread (T calls)",
    ),
    (
        "get_tuple_by_id",
        "get_tuple(thread, checkpoint_id) for R seeded random (thread, step) picks",
    ),
    ("list_limit10", "list(thread, limit=10) fully consumed, once per thread"),
    (
        "list_full",
        "list(thread) full history (S tuples) fully consumed, once per thread",
    ),
    (
        "list_filter_thread",
        "list(thread, filter={'step': k}) once per thread, seeded k",
    ),
    (
        "list_filter_global",
        "list(None, filter={'step': k}) G times, seeded k (returns T tuples)",
    ),
    ("delete_thread", "delete_thread(thread) once per thread"),
];

#[derive(Debug, Clone)]
struct Args {
    savers: String,
    threads: usize,
    steps: usize,
    random_gets: usize,
    global_filters: usize,
    repeats: usize,
    seed: u64,
    /// A database named explicitly (`--pg-url`, `$PEER_PG_URL`); for a
    /// worker, the one its parent chose.
    pg_url: Option<String>,
    /// The server of the fresh database otherwise (`--pg-server`, `$PEER_PG_SERVER`).
    pg_server: Option<String>,
    redis_url: String,
    tmpdir: Option<String>,
    out: Option<String>,
    dump_workload: Option<String>,
    digest: bool,
    worker: Option<String>,
    blob_out: Option<String>,
    decode: Option<String>,
    decode_calls: usize,
    no_floors: bool,
}

impl Default for Args {
    /// The defaults of the flags, the environment's included.
    fn default() -> Args {
        Args {
            savers: "memory,sqlite,postgres".into(),
            threads: 100,
            steps: 100,
            random_gets: 1000,
            global_filters: 10,
            repeats: 3,
            seed: 42,
            pg_url: std::env::var("PEER_PG_URL").ok().filter(|u| !u.is_empty()),
            pg_server: std::env::var("PEER_PG_SERVER").ok().filter(|u| !u.is_empty()),
            redis_url: std::env::var("PEER_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
            tmpdir: None,
            out: None,
            dump_workload: None,
            digest: false,
            worker: None,
            blob_out: None,
            decode: None,
            decode_calls: 2000,
            no_floors: false,
        }
    }
}

impl Args {
    /// The read plan of this workload.
    fn read_plan(&self) -> generator::ReadPlan {
        generator::read_plan(
            self.seed,
            self.threads,
            self.steps,
            self.random_gets,
            self.global_filters,
        )
    }
}

fn parse_args() -> Res<Args> {
    let mut a = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
            _ => (flag.clone(), None),
        };
        if name == "--digest" {
            a.digest = true;
            continue;
        }
        if name == "--no-floors" {
            a.no_floors = true;
            continue;
        }
        if name == "--bench" {
            // `cargo bench` passes it to every bench target
            continue;
        }
        if name == "-h" || name == "--help" {
            println!("{}", include_str!("usage.txt"));
            std::process::exit(0);
        }
        let mut value = || -> Res<String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().ok_or_else(|| format!("{name} needs a value").into()),
            }
        };
        match name.as_str() {
            "--savers" => a.savers = value()?,
            "-T" | "--threads" => a.threads = value()?.parse()?,
            "-S" | "--steps" => a.steps = value()?.parse()?,
            "--random-gets" => a.random_gets = value()?.parse()?,
            "--global-filters" => a.global_filters = value()?.parse()?,
            "--repeats" => a.repeats = value()?.parse()?,
            "--seed" => a.seed = value()?.parse()?,
            "--pg-url" => a.pg_url = Some(value()?),
            "--pg-server" => a.pg_server = Some(value()?),
            "--redis-url" => a.redis_url = value()?,
            "--tmpdir" => a.tmpdir = Some(value()?),
            "--out" => a.out = Some(value()?),
            "--dump-workload" => a.dump_workload = Some(value()?),
            "--worker" => a.worker = Some(value()?),
            "--blob-out" => a.blob_out = Some(value()?),
            "--decode" => a.decode = Some(value()?),
            "--decode-calls" => a.decode_calls = value()?.parse()?,
            other => return Err(format!("unknown flag {other} (see --help)").into()),
        }
    }
    if a.threads == 0 || a.steps == 0 || a.repeats == 0 {
        return Err("-T, -S and --repeats must be at least 1".into());
    }
    Ok(a)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("[workload] error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let args = parse_args()?;
    if let Some(kind) = args.worker.clone() {
        return worker(&args, &kind);
    }
    if let Some(path) = &args.decode {
        return decode_bench(path, args.decode_calls, args.out.as_deref());
    }
    if args.digest || args.dump_workload.is_some() {
        if let Some(path) = &args.dump_workload {
            std::fs::write(path, generator::dump(args.seed, args.threads, args.steps))?;
            let plan = args.read_plan();
            let base = path.strip_suffix(".jsonl").unwrap_or(path);
            std::fs::write(format!("{base}.reads.json"), plan.to_python_json())?;
        }
        let line = json!({"threads": args.threads, "steps": args.steps, "seed": args.seed,
                          "digest": generator::digest(args.seed, args.threads, args.steps)});
        println!("{}", py_json(&line));
        return Ok(());
    }
    let kinds: Vec<&str> = args
        .savers
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect();
    // a database of its own unless one is named; dropped when `_fresh` goes,
    // a failed run included
    let (pg_url, _fresh) = if kinds.contains(&"postgres") {
        let (url, fresh) = target::pg_database(args.pg_url.as_deref(), args.pg_server.as_deref())?;
        (Some(url), fresh)
    } else {
        (None, None)
    };
    let exe = std::env::current_exe()?;
    for kind in kinds {
        eprintln!("[workload] running {kind} ...");
        let mut cmd = Command::new(&exe);
        cmd.arg("--worker").arg(kind);
        cmd.args(["--threads", &args.threads.to_string()]);
        cmd.args(["--steps", &args.steps.to_string()]);
        cmd.args(["--random-gets", &args.random_gets.to_string()]);
        cmd.args(["--global-filters", &args.global_filters.to_string()]);
        cmd.args(["--repeats", &args.repeats.to_string()]);
        cmd.args(["--seed", &args.seed.to_string()]);
        if let Some(url) = &pg_url {
            cmd.args(["--pg-url", url]);
        }
        cmd.args(["--redis-url", &args.redis_url]);
        if let Some(t) = &args.tmpdir {
            cmd.args(["--tmpdir", t]);
        }
        if let (Some(b), "sqlite") = (&args.blob_out, kind) {
            cmd.args(["--blob-out", b]);
        }
        if args.no_floors {
            cmd.arg("--no-floors");
        }
        let output = cmd.stderr(Stdio::inherit()).output()?;
        std::io::stdout().write_all(&output.stdout)?;
        if let Some(out) = &args.out {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(out)?
                .write_all(&output.stdout)?;
        }
        if !output.status.success() {
            return Err(format!("{kind} worker failed: {}", output.status).into());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Savers
// ---------------------------------------------------------------------------

enum Handle {
    Memory(InMemorySaver),
    Sqlite {
        saver: SqliteSaver,
        dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres(PostgresSaver),
    Redis {
        saver: RedisSaver,
        /// this repeat's key prefix: every key of the saver starts with `<prefix>:`
        prefix: String,
        conn: redis::aio::MultiplexedConnection,
    },
}

impl Handle {
    async fn open(kind: &str, args: &Args) -> Res<Handle> {
        Ok(match kind {
            "memory" => Handle::Memory(InMemorySaver::new()),
            "sqlite" => {
                let mut b = tempfile::Builder::new();
                b.prefix("peer-bench-");
                let dir = match &args.tmpdir {
                    Some(parent) => b.tempdir_in(parent)?,
                    None => b.tempdir()?,
                };
                let path = dir.path().join("bench.sqlite");
                // defaults: WAL, synchronous = FULL, one transaction per write
                let saver = SqliteSaver::open(&path).await?;
                Handle::Sqlite { saver, dir, path }
            }
            "postgres" => {
                // lazy: the old tables go before setup creates them afresh
                // (the run's own database, or the one named with --pg-url)
                let saver = PostgresSaver::builder().url(pg_url(args)?).build()?;
                {
                    let client = saver.pool().get().await?;
                    for tbl in PG_TABLES {
                        client
                            .batch_execute(&format!("DROP TABLE IF EXISTS {tbl} CASCADE"))
                            .await?;
                    }
                }
                saver.setup().await?;
                Handle::Postgres(saver)
            }
            "redis" => {
                // a fresh prefix per repeat: fresh storage on a shared server
                // without FLUSHDB (Python's side does the same)
                let prefix = format!("peer-bench-rs-{}-{:08x}", std::process::id(), rand::random::<u32>());
                let saver = RedisSaver::builder()
                    .url(&args.redis_url)
                    .key_prefix(&prefix)
                    .open()
                    .await?;
                let conn = redis::Client::open(args.redis_url.as_str())?
                    .get_multiplexed_async_connection()
                    .await?;
                Handle::Redis { saver, prefix, conn }
            }
            other => return Err(format!("unknown saver {other:?} (memory, sqlite, postgres, redis)").into()),
        })
    }

    fn saver(&self) -> &dyn CheckpointSaver {
        match self {
            Handle::Memory(s) => s,
            Handle::Sqlite { saver, .. } => saver,
            Handle::Postgres(s) => s,
            Handle::Redis { saver, .. } => saver,
        }
    }

    /// Storage after the put phase, as WORKLOAD.md §4 measures it.
    async fn storage(&self) -> Res<(u64, Json)> {
        match self {
            Handle::Memory(s) => Ok((
                s.storage_bytes() as u64,
                json!({"what": "InMemorySaver::storage_bytes(): serialized payload bytes (checkpoint+metadata+blobs+writes)"}),
            )),
            Handle::Sqlite { path, .. } => {
                let size = |p: &PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
                let wal_path = PathBuf::from(format!("{}-wal", path.display()));
                let (db, wal) = (size(path), size(&wal_path));
                let conn = rusqlite::Connection::open(path)?;
                let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
                if busy != 0 {
                    return Err("wal_checkpoint(TRUNCATE) was blocked".into());
                }
                drop(conn);
                let (db2, wal2) = (size(path), size(&wal_path));
                Ok((
                    db2 + wal2,
                    json!({"db_file_before_wal_checkpoint": db, "wal_file_before_wal_checkpoint": wal,
                           "db_file": db2, "wal_file": wal2}),
                ))
            }
            Handle::Postgres(s) => {
                let client = s.pool().get().await?;
                let mut detail = serde_json::Map::new();
                let mut total = 0u64;
                for tbl in PG_TABLES {
                    let row = client
                        .query_one("SELECT pg_total_relation_size($1::text::regclass)", &[&tbl])
                        .await?;
                    let n: i64 = row.get(0);
                    total += n as u64;
                    detail.insert(tbl.to_owned(), json!(n));
                }
                Ok((total, Json::Object(detail)))
            }
            Handle::Redis { prefix, conn, .. } => {
                let mut conn = conn.clone();
                let keys = redis_keys(&mut conn, prefix).await?;
                let mut total = 0u64;
                for chunk in keys.chunks(500) {
                    let mut pipe = redis::pipe();
                    for k in chunk {
                        pipe.cmd("MEMORY").arg("USAGE").arg(k).arg("SAMPLES").arg(0);
                    }
                    let sizes: Vec<Option<u64>> = pipe.query_async(&mut conn).await?;
                    total += sizes.into_iter().flatten().sum::<u64>();
                }
                Ok((
                    total,
                    json!({"keys": keys.len(), "what": "sum of MEMORY USAGE key SAMPLES 0 over the saver's keys (SCAN prefix:*)"}),
                ))
            }
        }
    }

    async fn close(self) -> Res<()> {
        match self {
            Handle::Memory(_) => {}
            Handle::Sqlite { saver, dir, .. } => {
                saver.close().await?;
                drop(saver);
                dir.close()?;
            }
            Handle::Postgres(s) => s.pool().close(),
            Handle::Redis {
                saver,
                prefix,
                mut conn,
            } => {
                drop(saver);
                // delete_thread leaves the layout marker and the global indexes
                for chunk in redis_keys(&mut conn, &prefix).await?.chunks(500) {
                    redis::cmd("UNLINK").arg(chunk).query_async::<i64>(&mut conn).await?;
                }
            }
        }
        Ok(())
    }
}

/// Every key under `<prefix>:` (`SCAN`, never `KEYS`).
async fn redis_keys(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> Res<Vec<Vec<u8>>> {
    let mut pattern = String::new();
    for ch in prefix.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(ch);
    }
    pattern.push_str(":*");
    let (mut cursor, mut out) = (0u64, Vec::new());
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        out.extend(batch);
        if next == 0 {
            return Ok(out);
        }
        cursor = next;
    }
}

// ---------------------------------------------------------------------------
// One repeat
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Timer {
    samples: BTreeMap<&'static str, Vec<u64>>,
    items: BTreeMap<&'static str, usize>,
    /// the floor's per-call timings, by the op they are the floor of
    floor: BTreeMap<&'static str, Vec<u64>>,
    /// RssAnon and RssFile (bytes), the largest seen at the ends of phases
    rss_anon_max: u64,
    rss_file_max: u64,
}

impl Timer {
    fn add(&mut self, op: &'static str, since: Instant, items: usize) {
        self.samples
            .entry(op)
            .or_default()
            .push(since.elapsed().as_nanos() as u64);
        *self.items.entry(op).or_default() += items;
    }

    fn add_floor(&mut self, op: &'static str, since: Instant) {
        self.floor
            .entry(op)
            .or_default()
            .push(since.elapsed().as_nanos() as u64);
    }

    fn sample_rss(&mut self) {
        self.rss_anon_max = self.rss_anon_max.max(proc_status_bytes("RssAnon:"));
        self.rss_file_max = self.rss_file_max.max(proc_status_bytes("RssFile:"));
    }
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Res<()> {
    if ok {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn messages_len(tuple: &checkpointer::CheckpointTuple) -> usize {
    tuple
        .checkpoint
        .channel_values
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, <[Value]>::len)
}

/// The floor of one backend (`workload/floor.rs`), driven call by call next
/// to the saver.
enum Floor {
    /// `--no-floors`: the saver alone
    None,
    Memory(floor::MemFloor),
    Sqlite(floor::SqliteFloor),
    Postgres(floor::PgFloor),
}

const NS: &str = "";

impl Floor {
    async fn open(handle: &Handle, args: &Args) -> Res<Floor> {
        if args.no_floors {
            return Ok(Floor::None);
        }
        Ok(match handle {
            Handle::Memory(_) => Floor::Memory(floor::MemFloor::default()),
            Handle::Sqlite { dir, path, .. } => Floor::Sqlite(floor::SqliteFloor::open(
                path,
                &dir.path().join("floor.sqlite"),
                SQLITE_READER_MMAP,
            )?),
            Handle::Postgres(_) => Floor::Postgres(floor::PgFloor::open(pg_url(args)?).await?),
            // its floor (an EVALSHA round trip) is in benches/saver.rs
            Handle::Redis { .. } => Floor::None,
        })
    }

    /// Whether the floor of a write can run before the saver's call (the SQL
    /// floors insert the rows the saver just stored, so they follow it).
    fn can_lead_writes(&self) -> bool {
        matches!(self, Floor::Memory(_))
    }

    async fn put(&mut self, step: &generator::StepArgs, tm: &mut Timer) -> Res<()> {
        let (thread, id) = (step.op.thread_id.as_str(), step.op.checkpoint_id.as_str());
        match self {
            Floor::None => {}
            Floor::Memory(f) => {
                let tuple = Arc::new((
                    step.checkpoint.clone(),
                    step.metadata.clone(),
                    step.op.parent_checkpoint_id.clone(),
                ));
                let t0 = Instant::now();
                f.put(thread, NS, id, tuple);
                tm.add_floor("put", t0);
            }
            Floor::Sqlite(f) => {
                let row = f.stored_checkpoint(thread, NS, id)?;
                let t0 = Instant::now();
                f.put(&row)?;
                tm.add_floor("put", t0);
            }
            Floor::Postgres(f) => {
                let versions: Vec<(String, String)> = step
                    .new_versions
                    .iter()
                    .map(|(c, v)| (c.clone(), v.to_string()))
                    .collect();
                let rows = f.stored_put(thread, NS, id, &versions).await?;
                let t0 = Instant::now();
                f.put(&rows).await?;
                tm.add_floor("put", t0);
            }
        }
        Ok(())
    }

    async fn put_writes(&mut self, step: &generator::StepArgs, tm: &mut Timer) -> Res<()> {
        let (thread, id, task) = (
            step.op.thread_id.as_str(),
            step.op.checkpoint_id.as_str(),
            step.op.writes_task_id.as_str(),
        );
        match self {
            Floor::None => {}
            Floor::Memory(f) => {
                let writes = Arc::new((task.to_owned(), step.writes.clone()));
                let t0 = Instant::now();
                f.put_writes(thread, NS, id, writes);
                tm.add_floor("put_writes", t0);
            }
            Floor::Sqlite(f) => {
                let rows = f.stored_writes(thread, NS, id, task)?;
                check(rows.len() == step.writes.len(), || {
                    "floor: stored writes missing".into()
                })?;
                let t0 = Instant::now();
                f.put_writes(&rows)?;
                tm.add_floor("put_writes", t0);
            }
            Floor::Postgres(f) => {
                let rows = f.stored_writes(thread, NS, id, task).await?;
                let t0 = Instant::now();
                f.put_writes(&rows).await?;
                tm.add_floor("put_writes", t0);
            }
        }
        Ok(())
    }

    /// get_tuple's floor; checks the id found and the two pending writes.
    /// delete_thread's floor: the raw deletes of the thread's rows (the
    /// floor's own copy), which held `steps` checkpoints.
    async fn delete_thread(&mut self, thread: &str, steps: usize, tm: &mut Timer) -> Res<()> {
        let op = "delete_thread";
        let removed = match self {
            Floor::None => return Ok(()),
            Floor::Memory(f) => {
                let t0 = Instant::now();
                let gone = f.delete_thread(thread);
                tm.add_floor(op, t0);
                if gone {
                    steps
                } else {
                    0
                }
            }
            Floor::Sqlite(f) => {
                let t0 = Instant::now();
                let n = f.delete_thread(thread)?;
                tm.add_floor(op, t0);
                n
            }
            Floor::Postgres(f) => {
                let t0 = Instant::now();
                let n = f.delete_thread(thread).await?;
                tm.add_floor(op, t0);
                usize::try_from(n).unwrap_or(0)
            }
        };
        check(removed == steps, || {
            format!("floor {op}: removed {removed} of {steps} checkpoints")
        })
    }

    async fn get(&self, op: &'static str, thread: &str, id: Option<&str>, expect: &str, tm: &mut Timer) -> Res<()> {
        let found = match self {
            Floor::None => return Ok(()),
            Floor::Memory(f) => {
                let t0 = Instant::now();
                let r = f.get(thread, NS, id);
                tm.add_floor(op, t0);
                r.map(|(cp, w)| (cp.0.id.clone(), w.map_or(0, |w| w.iter().map(|t| t.1.len()).sum())))
            }
            Floor::Sqlite(f) => {
                let t0 = Instant::now();
                let r = f.get(thread, NS, id)?;
                tm.add_floor(op, t0);
                r
            }
            Floor::Postgres(f) => {
                let t0 = Instant::now();
                let r = f.get(thread, NS, id).await?;
                tm.add_floor(op, t0);
                r
            }
        };
        check(matches!(&found, Some((cid, 2)) if cid == expect), || {
            format!("floor {op}: found {found:?}, expected {expect} with 2 writes")
        })
    }

    async fn list10(&self, thread: &str, expect: usize, tm: &mut Timer) -> Res<()> {
        let n = match self {
            Floor::None => return Ok(()),
            Floor::Memory(f) => {
                let t0 = Instant::now();
                let r = f.list(thread, NS, 10);
                tm.add_floor("list_limit10", t0);
                r.len()
            }
            Floor::Sqlite(f) => {
                let t0 = Instant::now();
                let n = f.list(thread, NS, 10)?;
                tm.add_floor("list_limit10", t0);
                n
            }
            Floor::Postgres(f) => {
                let t0 = Instant::now();
                let n = f.list10(thread, NS).await?;
                tm.add_floor("list_limit10", t0);
                n
            }
        };
        check(n == expect, || {
            format!("floor list limit 10: {n} tuples, expected {expect}")
        })
    }

    async fn close(self) -> Res<()> {
        if let Floor::Postgres(f) = self {
            f.drop_schema().await?;
        }
        Ok(())
    }
}

/// `SqliteSaver`'s default `reader_mmap_size`, given to the floor's
/// connection too.
const SQLITE_READER_MMAP: u64 = 256 << 20;

/// The database of a postgres worker (its parent passes `--pg-url`).
fn pg_url(args: &Args) -> Res<&str> {
    args.pg_url
        .as_deref()
        .ok_or_else(|| "the postgres worker needs --pg-url".into())
}

/// One repeat on a fresh saver; its storage (Redis keys, the SQLite
/// directory, the floor's schema) is removed whether the repeat succeeds
/// or fails.
async fn run_once(kind: &str, args: &Args, plan: &generator::ReadPlan, first: bool) -> Res<(Timer, (u64, Json))> {
    let handle = Handle::open(kind, args).await?;
    let out = match Floor::open(&handle, args).await {
        Ok(mut fl) => {
            let out = repeat(&handle, &mut fl, args, plan, first).await;
            let closed = fl.close().await;
            out.and_then(|out| closed.map(|()| out))
        }
        Err(e) => Err(e),
    };
    let closed = handle.close().await;
    out.and_then(|out| closed.map(|()| out))
}

async fn repeat(
    handle: &Handle,
    fl: &mut Floor,
    args: &Args,
    plan: &generator::ReadPlan,
    first: bool,
) -> Res<(Timer, (u64, Json))> {
    let (big_t, big_s, seed) = (args.threads, args.steps, args.seed);
    let saver = handle.saver();
    let mut tm = Timer::default();
    tm.sample_rss();

    // ---- put phase: saver and floor call by call ---------------------------
    let mut call = 0usize;
    for t in 0..big_t {
        let mut stream = generator::ThreadStream::new(seed, t, big_s);
        while let Some(step) =
            stream.next_step(|v| saver.get_next_version(v).expect("the generator's versions continue"))
        {
            // the memory floor goes first every other call; the SQL floors
            // insert what the saver stored, so they always follow it
            let lead = call % 2 == 1 && fl.can_lead_writes();
            call += 1;
            if lead {
                fl.put(&step, &mut tm).await?;
            }
            let t0 = Instant::now();
            let new_cfg = saver
                .put(&step.config, &step.checkpoint, &step.metadata, &step.new_versions)
                .await?;
            tm.add("put", t0, 1);
            if !lead {
                fl.put(&step, &mut tm).await?;
            }
            if lead {
                fl.put_writes(&step, &mut tm).await?;
            }
            let t0 = Instant::now();
            saver
                .put_writes(&new_cfg, &step.writes, &step.op.writes_task_id, generator::TASK_PATH)
                .await?;
            tm.add("put_writes", t0, 1);
            if !lead {
                fl.put_writes(&step, &mut tm).await?;
            }
            check(
                new_cfg.checkpoint_id.as_deref() == Some(step.op.checkpoint_id.as_str()),
                || {
                    format!(
                        "put returned {:?}, expected {}",
                        new_cfg.checkpoint_id, step.op.checkpoint_id
                    )
                },
            )?;
        }
    }
    tm.sample_rss();

    let storage = handle.storage().await?;
    if let (true, Some(out), Handle::Sqlite { path, .. }) = (first, &args.blob_out, &handle) {
        // the latest checkpoint of thread 0 as stored (for --decode)
        let conn = rusqlite::Connection::open(path)?;
        let blob: Vec<u8> = conn.query_row(
            "SELECT checkpoint FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = '' \
             ORDER BY checkpoint_id DESC LIMIT 1",
            [generator::thread_id(0)],
            |r| r.get(0),
        )?;
        std::fs::write(out, blob)?;
    }

    // ---- reads (floors alternate with the saver: odd calls go first) ------
    let cfg_of = |t: usize| CheckpointConfig::new(generator::thread_id(t)).with_ns("");

    for t in 0..big_t {
        let c = cfg_of(t);
        let expect = generator::checkpoint_id(t, big_s - 1, big_s);
        if t % 2 == 1 {
            fl.get("get_tuple_latest", &c.thread_id, None, &expect, &mut tm).await?;
        }
        let t0 = Instant::now();
        let tup = saver.get_tuple(&c).await?;
        tm.add("get_tuple_latest", t0, 1);
        if t % 2 == 0 {
            fl.get("get_tuple_latest", &c.thread_id, None, &expect, &mut tm).await?;
        }
        let tup = tup.ok_or("get_tuple latest: nothing")?;
        check(tup.checkpoint.id == expect, || {
            format!("latest of thread {t} is {}", tup.checkpoint.id)
        })?;
        check(messages_len(&tup) == big_s, || "latest: wrong message count".into())?;
        check(tup.pending_writes.len() == 2, || {
            "latest: expected 2 pending writes".into()
        })?;
    }

    for (i, &(t, s)) in plan.gets.iter().enumerate() {
        let id = generator::checkpoint_id(t, s, big_s);
        let c = cfg_of(t).with_checkpoint_id(id.clone());
        if i % 2 == 1 {
            fl.get("get_tuple_by_id", &c.thread_id, Some(&id), &id, &mut tm).await?;
        }
        let t0 = Instant::now();
        let tup = saver.get_tuple(&c).await?;
        tm.add("get_tuple_by_id", t0, 1);
        if i % 2 == 0 {
            fl.get("get_tuple_by_id", &c.thread_id, Some(&id), &id, &mut tm).await?;
        }
        let tup = tup.ok_or("get_tuple by id: nothing")?;
        check(messages_len(&tup) == s + 1, || "by id: wrong message count".into())?;
    }

    for t in 0..big_t {
        let thread = generator::thread_id(t);
        if t % 2 == 1 {
            fl.list10(&thread, big_s.min(10), &mut tm).await?;
        }
        let t0 = Instant::now();
        let res = saver
            .list_vec(Some(cfg_of(t)), ListOptions::default().limit(10))
            .await?;
        tm.add("list_limit10", t0, res.len());
        if t % 2 == 0 {
            fl.list10(&thread, big_s.min(10), &mut tm).await?;
        }
        check(res.len() == big_s.min(10), || "list limit 10: wrong count".into())?;
    }
    tm.sample_rss();

    for t in 0..big_t {
        let t0 = Instant::now();
        let res = saver.list_vec(Some(cfg_of(t)), ListOptions::default()).await?;
        tm.add("list_full", t0, res.len());
        check(res.len() == big_s, || "list full: wrong count".into())?;
    }

    for &(t, k) in &plan.thread_filters {
        let t0 = Instant::now();
        let res = saver
            .list_vec(Some(cfg_of(t)), ListOptions::default().filter("step", k as i64))
            .await?;
        tm.add("list_filter_thread", t0, res.len());
        check(res.len() == 1 && res[0].metadata.step() == Some(k as i64), || {
            "list filter thread: wrong result".into()
        })?;
    }

    for &k in &plan.global_filters {
        let t0 = Instant::now();
        let res = saver
            .list_vec(None, ListOptions::default().filter("step", k as i64))
            .await?;
        tm.add("list_filter_global", t0, res.len());
        check(res.len() == big_t, || "list filter global: wrong count".into())?;
    }
    tm.sample_rss();

    for t in 0..big_t {
        let thread = generator::thread_id(t);
        if t % 2 == 1 {
            fl.delete_thread(&thread, big_s, &mut tm).await?;
        }
        let t0 = Instant::now();
        saver.delete_thread(&thread).await?;
        tm.add("delete_thread", t0, 1);
        if t % 2 == 0 {
            fl.delete_thread(&thread, big_s, &mut tm).await?;
        }
    }
    check(saver.get_tuple(&cfg_of(0)).await?.is_none(), || {
        "thread 0 still there after delete_thread".into()
    })?;

    Ok((tm, storage))
}

// ---------------------------------------------------------------------------
// Decode: the latest checkpoint blob through checkpointer::serde::msgpack
// ---------------------------------------------------------------------------

/// Times `checkpointer::serde::msgpack::decode` (and the drop of its result)
/// of the bytes in `path`, call by call, after 50 warm-up calls; prints one
/// JSON line (median per call), as `scripts/decode_python.py` does for
/// ormsgpack.
fn decode_bench(path: &str, calls: usize, out: Option<&str>) -> Res<()> {
    let bytes = std::fs::read(path)?;
    for _ in 0..50 {
        drop(checkpointer::serde::msgpack::decode(&bytes)?);
    }
    let mut smp = Vec::with_capacity(calls);
    for _ in 0..calls.max(1) {
        let t0 = Instant::now();
        let v = checkpointer::serde::msgpack::decode(&bytes)?;
        drop(v);
        smp.push(t0.elapsed().as_nanos() as u64);
    }
    smp.sort_unstable();
    let n = smp.len();
    let mean = smp.iter().sum::<u64>() as f64 / n as f64 / 1000.0;
    let line = py_json(&json!({
        "saver": "msgpack", "op": "decode_latest_checkpoint", "impl": "rust",
        "what": "checkpointer::serde::msgpack::decode of the latest checkpoint blob of thread 0 (as SqliteSaver stored it), result dropped, per call",
        "bytes": bytes.len(), "calls": n,
        "median_us": round2(smp[n / 2] as f64 / 1000.0), "us_per_op": round2(mean),
        "p99_us": round2(smp[(n - 1).min(n * 99 / 100)] as f64 / 1000.0),
    }));
    println!("{line}");
    if let Some(out) = out {
        writeln!(
            std::fs::OpenOptions::new().create(true).append(true).open(out)?,
            "{line}"
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Worker: runs every repeat for one saver and prints the rows
// ---------------------------------------------------------------------------

/// `VmHWM` (peak) or `VmRSS` (now) of this process, in bytes.
fn proc_status_bytes(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn worker(args: &Args, kind: &str) -> Res<()> {
    let baseline_rss = proc_status_bytes("VmRSS:");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let plan = args.read_plan();
    let workload = json!({"threads": args.threads, "steps": args.steps, "random_gets": args.random_gets,
                          "global_filters": args.global_filters, "seed": args.seed, "repeats": args.repeats});
    let mut timers = Vec::new();
    let mut storages = Vec::new();
    let wall0 = Instant::now();
    for rep in 0..args.repeats {
        let r0 = Instant::now();
        let (tm, st) = rt.block_on(run_once(kind, args, &plan, rep == 0))?;
        timers.push(tm);
        storages.push(st);
        eprintln!(
            "[workload] {kind} repeat {}/{} done in {:.1}s",
            rep + 1,
            args.repeats,
            r0.elapsed().as_secs_f64()
        );
    }
    let wall = wall0.elapsed().as_secs_f64();

    let mut rows = Vec::new();
    let mut meta = json!({"saver": kind, "op": "_meta", "workload": workload,
        "versions": {"checkpointer": env!("CARGO_PKG_VERSION")},
        "rust_profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "wall_s": round2(wall), "floors": !args.no_floors});
    if kind == "sqlite" {
        meta["sqlite_version"] = json!(rusqlite::version());
        meta["sqlite_settings"] =
            json!("SqliteSaver::open defaults: journal_mode=WAL, synchronous=FULL, one commit per put/put_writes");
    }
    if kind == "postgres" {
        rt.block_on(async {
            let saver = PostgresSaver::builder().url(pg_url(args)?).build()?;
            let client = saver.pool().get().await?;
            for k in ["server_version", "synchronous_commit", "fsync", "shared_buffers"] {
                let row = client.query_one(&format!("SHOW {k}"), &[]).await?;
                let v: String = row.get(0);
                meta[format!("postgres_{k}")] = json!(v);
            }
            meta["postgres_settings"] =
                json!("PostgresSaver::open defaults: deadpool pool, autocommit, server defaults");
            Ok::<(), Box<dyn Error>>(())
        })?;
    }
    if kind == "redis" {
        rt.block_on(async {
            let mut conn = redis::Client::open(args.redis_url.as_str())?
                .get_multiplexed_async_connection()
                .await?;
            let info: String = redis::cmd("INFO").arg("server").query_async(&mut conn).await?;
            let version = info
                .lines()
                .find_map(|l| l.strip_prefix("redis_version:"))
                .unwrap_or_default()
                .trim()
                .to_owned();
            meta["redis_version"] = json!(version);
            for k in ["save", "appendonly", "appendfsync"] {
                let (_, v): (String, String) = redis::cmd("CONFIG").arg("GET").arg(k).query_async(&mut conn).await?;
                meta[format!("redis_{k}")] = json!(v);
            }
            meta["redis_settings"] = json!(
                "RedisSaver::builder().url(..).key_prefix(<fresh per repeat>).open() defaults: one multiplexed ConnectionManager, no TTL"
            );
            Ok::<(), Box<dyn Error>>(())
        })?;
    }
    rows.push(meta);
    let p50 = |smp: &[u64]| {
        let mut s = smp.to_vec();
        s.sort_unstable();
        s[s.len() / 2] as f64 / 1000.0
    };
    for (op, what) in OPS {
        // an operation the flags left out (`--global-filters 0`, ...) has no
        // timings: no row
        if timers.iter().any(|tm| tm.samples.get(op).is_none_or(|s| s.is_empty())) {
            continue;
        }
        let per_rep_us: Vec<f64> = timers
            .iter()
            .map(|tm| {
                let smp = &tm.samples[op];
                smp.iter().sum::<u64>() as f64 / smp.len() as f64 / 1000.0
            })
            .collect();
        let med_us = median(&per_rep_us);
        let mut order: Vec<usize> = (0..per_rep_us.len()).collect();
        order.sort_by(|&a, &b| per_rep_us[a].total_cmp(&per_rep_us[b]));
        let med_idx = order[order.len() / 2];
        let mut smp = timers[med_idx].samples[op].clone();
        smp.sort_unstable();
        let n = smp.len();
        let p50_each: Vec<f64> = timers.iter().map(|tm| p50(&tm.samples[op])).collect();
        let mut row = json!({
            "saver": kind,
            "op": op,
            "calls_per_repeat": n,
            "items_per_call": timers[med_idx].items[op] as f64 / n as f64,
            "us_per_op": round2(med_us),
            "ops_per_sec": round1(1e6 / med_us),
            "us_per_op_each_repeat": per_rep_us.iter().map(|x| round2(*x)).collect::<Vec<_>>(),
            "p50_us": round2(smp[n / 2] as f64 / 1000.0),
            "p99_us": round2(smp[(n - 1).min(n * 99 / 100)] as f64 / 1000.0),
            "median_us": round2(median(&p50_each)),
            "median_us_each_repeat": p50_each.iter().map(|x| round2(*x)).collect::<Vec<_>>(),
            "repeats": args.repeats,
            "what": what,
            "workload": workload,
        });
        if timers.iter().all(|tm| tm.floor.contains_key(op)) {
            let floor_each: Vec<f64> = timers.iter().map(|tm| p50(&tm.floor[op])).collect();
            let floor_mean: Vec<f64> = timers
                .iter()
                .map(|tm| tm.floor[op].iter().sum::<u64>() as f64 / tm.floor[op].len() as f64 / 1000.0)
                .collect();
            row["floor_us"] = json!(round2(median(&floor_each)));
            row["floor_us_each_repeat"] = json!(floor_each.iter().map(|x| round2(*x)).collect::<Vec<_>>());
            row["floor_mean_us"] = json!(round2(median(&floor_mean)));
            row["floor_what"] = json!(floor_what(kind, op));
        }
        rows.push(row);
    }
    let bytes: Vec<u64> = storages.iter().map(|s| s.0).collect();
    let med_bytes = median(&bytes.iter().map(|b| *b as f64).collect::<Vec<_>>()) as u64;
    rows.push(json!({"saver": kind, "op": "storage_after_put", "bytes": med_bytes,
        "bytes_each_repeat": bytes, "detail": storages[0].1, "workload": workload}));
    let anon = timers.iter().map(|tm| tm.rss_anon_max).max().unwrap_or(0);
    let file = timers.iter().map(|tm| tm.rss_file_max).max().unwrap_or(0);
    rows.push(json!({"saver": kind, "op": "peak_rss", "bytes": proc_status_bytes("VmHWM:"),
        "baseline_bytes": baseline_rss,
        "rss_anon_max_bytes": anon, "rss_file_max_bytes": file,
        "what": "VmHWM of the worker process (whole run, all repeats, the floor's structures included); baseline_bytes = VmRSS at start, before the workload; rss_anon_max_bytes / rss_file_max_bytes = the largest RssAnon (heap) and RssFile (mapped file pages, e.g. SQLite's memory-mapped reads) sampled at the end of each phase",
        "workload": workload}));
    let mut stdout = std::io::stdout().lock();
    for r in rows {
        writeln!(stdout, "{}", py_json(&r))?;
    }
    Ok(())
}

/// What the floor of `op` on `kind` is (the `floor_what` of its JSON line).
fn floor_what(kind: &str, op: &str) -> &'static str {
    match (kind, op) {
        ("memory", "put") => "Arc of the checkpoint (with metadata and parent id) inserted into nested BTreeMaps keyed by (thread, ns, id); the Arc built untimed",
        ("memory", "put_writes") => "Arc of the task's writes pushed under (thread, ns, id) in nested BTreeMaps; the Arc built untimed",
        ("memory", "list_limit10") => "range of the 10 newest ids in the BTreeMap + Arc clones of each checkpoint and its writes",
        ("memory", _) => "BTreeMap lookup (latest: last key) + Arc clone of the checkpoint and of its writes",
        ("sqlite", "put") => "raw rusqlite INSERT OR REPLACE of the row the saver just stored, LangGraph's tables only (spec 7.1), one transaction, WAL + synchronous=FULL",
        ("sqlite", "put_writes") => "raw rusqlite INSERT OR IGNORE of the write rows the saver just stored, LangGraph's tables only, one transaction, WAL + synchronous=FULL",
        ("sqlite", "list_limit10") => "raw SELECT of the 10 newest checkpoint rows + one SELECT of their writes (id range), every msgpack blob and metadata JSON walked without building values (mmap_size 256 MiB as the saver's readers)",
        ("sqlite", _) => "raw SELECT of the checkpoint row (by PK, or latest) + SELECT of its writes, every msgpack blob and metadata JSON walked without building values (mmap_size 256 MiB as the saver's readers)",
        ("postgres", "put") => "one raw tokio-postgres prepared statement (blob rows via unnest + checkpoint upsert, one commit) of the rows the saver just stored, LangGraph's tables (spec 8.1) in schema floor",
        ("postgres", "put_writes") => "one raw tokio-postgres prepared INSERT ... unnest of the write rows the saver just stored, one commit, LangGraph's tables in schema floor",
        ("postgres", "list_limit10") => "one raw prepared SELECT: the 10 newest checkpoint rows, each blob of their channel_versions by primary key and their writes; every msgpack blob and jsonb walked without building values",
        ("postgres", _) => "one raw prepared SELECT: the checkpoint row (by PK, or latest), each blob of its channel_versions by primary key and its writes; every msgpack blob and jsonb walked without building values",
        _ => "",
    }
}

/// JSON as Python's `json.dumps` writes it by default: separators `", "` and
/// `": "`, keys in insertion order.
fn py_json(v: &Json) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    serde::Serialize::serialize(v, &mut ser)
        .map_or_else(|_| String::new(), |()| String::from_utf8_lossy(&out).into_owned())
}

struct PyFormatter;

impl serde_json::ser::Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}
