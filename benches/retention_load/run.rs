//! The retention-under-load measurement (see `main.rs`): the write load,
//! the phases, the raw `DELETE` floor and the space figures.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use checkpointer::prelude::*;
use checkpointer::retention::{RetainOptions, RetentionPolicy, RetentionReport};
use checkpointer::space::{ReclaimOptions, SpaceUsage};
use checkpointer::{ListThreadsOptions, SaverAdmin, ThreadInfo};
use serde_json::{json, Value as Json};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// The store's URL (`sqlite://`, `postgresql://`, `redis://`).
    pub url: String,
    /// Writers of the steady load.
    pub writers: usize,
    /// Puts per second of each writer.
    pub rate: f64,
    /// Puts per load thread before the writer starts a fresh one.
    pub thread_steps: usize,
    /// Length of the phases without retention (before, after).
    pub phase: Duration,
    /// The policy's `keep_last`.
    pub keep_last: usize,
    /// The share of the store's threads (the longest idle) that the
    /// policy's `delete_idle_threads` age makes idle.
    pub idle_fraction: f64,
    /// Checkpoints per retention batch.
    pub batch: usize,
    /// Threads of the floor comparison (half raw `DELETE`s, half `retain`
    /// without rest).
    pub floor_threads: usize,
    /// Retention's and the reclaim's rest (`RetainOptions::rest`).
    pub rest: u32,
    /// Pages per SQLite reclaim step.
    pub step_pages: u32,
    /// Whether the `reclaim` phase runs.
    pub reclaim: bool,
    /// Stop retention after the thread it is at when this much time has
    /// passed (`None`: every filled thread).
    pub retain_max: Option<Duration>,
    /// Alternate: retention runs this long (to the end of a thread), then
    /// rests as long with the load alone, and so on; the puts of the
    /// windows without it form the phase `between`, in the same minutes.
    pub alternate: Option<Duration>,
}

/// Latencies of one phase, in µs.
#[derive(Debug, Clone, Default)]
pub struct Phase {
    pub name: &'static str,
    pub seconds: f64,
    pub puts: Vec<u64>,
    /// Ticks a writer missed because a put outlasted its period.
    pub missed: u64,
}

impl Phase {
    /// The `q` quantile (nearest rank) in µs; 0 with no put.
    pub fn quantile(&self, q: f64) -> u64 {
        let mut v = self.puts.clone();
        v.sort_unstable();
        if v.is_empty() {
            return 0;
        }
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }

    fn json(&self) -> Json {
        json!({
            "phase": self.name,
            "seconds": self.seconds,
            "puts": self.puts.len(),
            "missed_ticks": self.missed,
            "p50_us": self.quantile(0.50),
            "p99_us": self.quantile(0.99),
            "max_us": self.puts.iter().max().copied().unwrap_or(0),
        })
    }
}

/// The (phase slot, µs) of each put a writer made.
type Timed = Vec<(u64, u64)>;

/// A statement parameter.
type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// The steady write load: `writers` tasks, each putting a checkpoint
/// (a 20-message window, about 4 KB) every `1 / rate` s on a thread of
/// its own, a fresh thread every `thread_steps` puts, each put timed into
/// the current phase's slot.
struct Load {
    stop: Arc<AtomicBool>,
    slot: Arc<AtomicU64>,
    missed: Arc<[AtomicU64; 8]>,
    tasks: Vec<tokio::task::JoinHandle<Result<Timed, String>>>,
}

fn message(w: usize, i: usize) -> Value {
    Value::map([
        ("type", Value::from(if i % 2 == 0 { "human" } else { "ai" })),
        (
            "content",
            Value::from(format!(
                "load {w} message {i}: {}",
                "steady traffic beside retention ".repeat(5)
            )),
        ),
        ("id", Value::from(format!("load-msg-{w}-{i:08}"))),
    ])
}

impl Load {
    fn start(saver: Arc<dyn CheckpointSaver>, options: &Options, run: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let slot = Arc::new(AtomicU64::new(0));
        let missed: Arc<[AtomicU64; 8]> = Arc::new(Default::default());
        let period = Duration::from_secs_f64(1.0 / options.rate.max(0.001));
        let tasks = (0..options.writers)
            .map(|w| {
                let (saver, stop, slot, missed) = (saver.clone(), stop.clone(), slot.clone(), missed.clone());
                let (steps, run) = (options.thread_steps.max(1), run.to_owned());
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    let mut tick = tokio::time::interval(period);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                    let mut last_tick = Instant::now();
                    let (mut n, mut thread_no) = (0usize, 0usize);
                    let mut parent = CheckpointConfig::new(format!("load-{run}-{w:02}-{thread_no:06}"));
                    let mut prev: Option<Checkpoint> = None;
                    while !stop.load(Ordering::Relaxed) {
                        tick.tick().await;
                        let late = last_tick.elapsed().as_secs_f64() / period.as_secs_f64();
                        if late > 1.5 {
                            let s = (slot.load(Ordering::Relaxed) as usize).min(7);
                            missed[s].fetch_add(late as u64 - 1, Ordering::Relaxed);
                        }
                        last_tick = Instant::now();
                        if n == steps {
                            (n, thread_no, prev) = (0, thread_no + 1, None);
                            parent = CheckpointConfig::new(format!("load-{run}-{w:02}-{thread_no:06}"));
                        }
                        let mut cp = Checkpoint::new(n as i64);
                        if let Some(p) = &prev {
                            cp.channel_versions = p.channel_versions.clone();
                        }
                        let window: Vec<Value> = (n..n + 20).map(|i| message(w, i)).collect();
                        cp.channel_values.insert("messages".into(), Value::Array(window.into()));
                        cp.channel_values.insert("step".into(), Value::from(n));
                        let mut new_versions = ChannelVersions::new();
                        // one new version for every channel a step changes
                        let v = saver.get_next_version(cp.max_version()).map_err(|e| e.to_string())?;
                        for ch in ["messages", "step"] {
                            cp.channel_versions.insert(ch.into(), v.clone());
                            new_versions.insert(ch.into(), v.clone());
                        }
                        let meta = CheckpointMetadata::new(CheckpointSource::Loop, n as i64);
                        let s = slot.load(Ordering::Relaxed);
                        let started = Instant::now();
                        let config = saver
                            .put(&parent, &cp, &meta, &new_versions)
                            .await
                            .map_err(|e| format!("load put: {e}"))?;
                        let took = started.elapsed().as_micros() as u64;
                        // a put that started in one phase counts there
                        out.push((s, took));
                        parent = config;
                        prev = Some(cp);
                        n += 1;
                    }
                    Ok(out)
                })
            })
            .collect();
        Load {
            stop,
            slot,
            missed,
            tasks,
        }
    }

    /// Stops the writers: the latencies of each phase slot.
    async fn finish(self) -> Result<(Vec<Vec<u64>>, Vec<u64>), String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut slots = vec![Vec::new(); 8];
        for t in self.tasks {
            for (s, us) in t.await.map_err(|e| format!("a load writer failed: {e}"))?? {
                slots[(s as usize).min(7)].push(us);
            }
        }
        let missed = self.missed.iter().map(|m| m.load(Ordering::Relaxed)).collect();
        Ok((slots, missed))
    }
}

/// Unix µs of a UUIDv6 checkpoint id (its 60-bit timestamp: 100 ns ticks
/// since 1582-10-15), `None` for another shape.
pub fn id_micros(id: &str) -> Option<i64> {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || hex.as_bytes()[12] != b'6' {
        return None;
    }
    let high = u64::from_str_radix(&hex[0..8], 16).ok()?;
    let mid = u64::from_str_radix(&hex[8..12], 16).ok()?;
    let low = u64::from_str_radix(&hex[13..16], 16).ok()?;
    let ticks = (high << 28) | (mid << 12) | low;
    let unix = ticks.checked_sub(0x01B2_1DD2_1381_4000)?;
    i64::try_from(unix / 10).ok()
}

fn now_micros() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

/// The policy: keep the last `keep_last` of each namespace (interrupts,
/// fork points, marks, delta history and the latest always stay), and
/// delete the threads idle longer than the age that makes the oldest
/// `idle_fraction` of `threads` idle (their latest checkpoint's id time).
pub fn policy(options: &Options, threads: &[ThreadInfo]) -> (RetentionPolicy, Duration) {
    let mut ages: Vec<i64> = threads
        .iter()
        .filter_map(|t| t.latest.checkpoint_id.as_deref().and_then(id_micros))
        .map(|ts| now_micros().saturating_sub(ts).max(0))
        .collect();
    ages.sort_unstable_by(|a, b| b.cmp(a));
    let k = ((options.idle_fraction * ages.len() as f64).floor() as usize).min(ages.len());
    // just younger than the k-th oldest: the k oldest are idle
    let idle_us = match k {
        0 => i64::MAX / 2,
        k => ages[k - 1].saturating_sub(1).max(1),
    };
    let idle = Duration::from_micros(u64::try_from(idle_us).unwrap_or(1));
    let policy = RetentionPolicy::new()
        .keep_last(options.keep_last)
        .delete_idle_threads(idle);
    (policy, idle)
}

fn space_json(space: &Option<SpaceUsage>) -> Json {
    let Some(s) = space else { return Json::Null };
    let parts: Vec<Json> = s
        .parts
        .iter()
        .map(|p| {
            json!({
                "name": p.name, "bytes": p.bytes, "table": p.table_bytes, "toast": p.toast_bytes,
                "index": p.index_bytes, "live_rows": p.live_rows, "dead_rows": p.dead_rows,
                "reclaimable": p.reclaimable_bytes,
            })
        })
        .collect();
    json!({"bytes": s.bytes, "in_memory": s.in_memory, "reclaimable": s.reclaimable_bytes, "parts": parts})
}

fn report_json(r: &RetentionReport, seconds: f64) -> Json {
    json!({
        "seconds": seconds,
        "threads_scanned": r.threads_scanned,
        "threads_deleted": r.threads_deleted,
        "checkpoints_scanned": r.checkpoints_scanned,
        "checkpoints_removed": r.checkpoints_removed,
        "writes_removed": r.writes_removed,
        "parents_cleared": r.parents_cleared,
        "batches": r.batches,
        "removed_per_s": r.checkpoints_removed as f64 / seconds.max(1e-9),
    })
}

/// One floor batch: (namespace, checkpoint ids, orphan (channel, version)
/// pairs for PostgreSQL).
type FloorBatch = (String, Vec<String>, Vec<(String, String)>);

/// The raw `DELETE` floor on one thread: the checkpoints `retain` would
/// remove (a dry run names them), in its batches, each batch one
/// transaction of the bare statements (no plan, no parents cleared).
/// Returns (checkpoints removed, seconds of the statements alone).
async fn floor_thread(
    url: &str,
    saver: &Arc<dyn CheckpointSaver>,
    policy: &RetentionPolicy,
    thread: &str,
    batch: usize,
) -> Result<(u64, f64), String> {
    let dry = saver
        .retain(
            policy,
            RetainOptions::default()
                .dry_run(true)
                .list_removed(true)
                .batch(batch)
                .threads([thread]),
        )
        .await
        .map_err(|e| format!("dry run: {e}"))?;
    let mut batches: Vec<FloorBatch> = Vec::new();
    for r in &dry.removed {
        match batches.last_mut() {
            Some((ns, ids, _)) if *ns == r.checkpoint_ns && ids.len() < batch => ids.push(r.checkpoint_id.clone()),
            _ => batches.push((r.checkpoint_ns.clone(), vec![r.checkpoint_id.clone()], Vec::new())),
        }
    }
    let n = dry.removed.len() as u64;
    if let Some(path) = url.strip_prefix("sqlite://") {
        let (path, thread) = (path.to_owned(), thread.to_owned());
        let secs = tokio::task::spawn_blocking(move || sqlite_floor(&path, &thread, &batches))
            .await
            .map_err(|e| e.to_string())??;
        return Ok((n, secs));
    }
    if url.starts_with("postgres") {
        return Ok((n, pg_floor(url, thread, batches).await?));
    }
    Err("no floor for this backend".into())
}

fn sqlite_floor(path: &str, thread: &str, batches: &[FloorBatch]) -> Result<f64, String> {
    let e = |e: rusqlite::Error| e.to_string();
    let conn = rusqlite::Connection::open(path).map_err(e)?;
    conn.busy_timeout(Duration::from_secs(30)).map_err(e)?;
    conn.execute_batch("PRAGMA synchronous = FULL").map_err(e)?;
    let started = Instant::now();
    for (ns, ids, _) in batches {
        let ids = serde_json::to_string(ids).map_err(|e| e.to_string())?;
        conn.execute_batch("BEGIN IMMEDIATE").map_err(e)?;
        for sql in [
            "DELETE FROM writes WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id IN (SELECT value FROM json_each(?3))",
            "DELETE FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id IN (SELECT value FROM json_each(?3))",
        ] {
            conn.prepare_cached(sql)
                .and_then(|mut s| s.execute(rusqlite::params![thread, ns, ids]))
                .map_err(e)?;
        }
        conn.execute_batch("COMMIT").map_err(e)?;
    }
    Ok(started.elapsed().as_secs_f64())
}

async fn pg_floor(url: &str, thread: &str, mut batches: Vec<FloorBatch>) -> Result<f64, String> {
    let e = |e: tokio_postgres::Error| e.to_string();
    let (mut client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.map_err(e)?;
    tokio::spawn(conn);
    // the orphans, before the clock: a (channel, version) named by no
    // checkpoint that stays goes with the last batch naming it
    let rows = client
        .query(
            "SELECT checkpoint_ns, checkpoint_id, e.key, e.value FROM checkpoints, \
             jsonb_each_text(checkpoint->'channel_versions') AS e WHERE thread_id = $1",
            &[&thread],
        )
        .await
        .map_err(e)?;
    let mut gone = std::collections::HashMap::new();
    for (i, (ns, ids, _)) in batches.iter().enumerate() {
        for id in ids {
            gone.insert((ns.clone(), id.clone()), i);
        }
    }
    let mut last: std::collections::HashMap<(String, String, String), Option<usize>> = Default::default();
    for row in &rows {
        let (ns, id, ch, ver): (String, String, String, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
        let b = gone.get(&(ns.clone(), id)).copied();
        let entry = last.entry((ns, ch, ver)).or_insert(b);
        *entry = match (*entry, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            _ => None, // a kept checkpoint names it
        };
    }
    for ((_, ch, ver), b) in last {
        if let Some(b) = b {
            batches[b].2.push((ch, ver));
        }
    }
    let del_writes = client
        .prepare(
            "DELETE FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY($3)",
        )
        .await
        .map_err(e)?;
    let del_cps = client
        .prepare("DELETE FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY($3)")
        .await
        .map_err(e)?;
    let del_blobs = client
        .prepare(
            "DELETE FROM checkpoint_blobs WHERE thread_id = $1 AND checkpoint_ns = $2 \
             AND (channel, version) IN (SELECT * FROM unnest($3::text[], $4::text[]))",
        )
        .await
        .map_err(e)?;
    let started = Instant::now();
    for (ns, ids, orphans) in &batches {
        let (chs, vers): (Vec<String>, Vec<String>) = orphans.iter().cloned().unzip();
        let tx = client.transaction().await.map_err(e)?;
        // pipelined: the three statements in one round trip
        let (p1, p2, p3): ([Param; 3], [Param; 3], [Param; 4]) =
            ([&thread, ns, ids], [&thread, ns, ids], [&thread, ns, &chs, &vers]);
        tokio::try_join!(
            tx.execute(&del_writes, &p1),
            tx.execute(&del_cps, &p2),
            tx.execute(&del_blobs, &p3),
        )
        .map_err(e)?;
        tx.commit().await.map_err(e)?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Runs the measurement on an open, filled store: one JSON object.
pub async fn run(store: &Arc<dyn SaverAdmin>, options: &Options, log: bool) -> Result<Json, String> {
    let say = |s: String| {
        if log {
            eprintln!("[{:>8.1}] {s}", now_micros() as f64 / 1e6 % 100_000.0);
        }
    };
    let saver = store.saver();
    let threads = saver
        .list_threads(ListThreadsOptions::default())
        .await
        .map_err(|e| format!("list_threads: {e}"))?;
    let (policy, idle) = policy(options, &threads);
    say(format!(
        "{} threads; policy keep_last({}) + delete_idle_threads({:.0} s)",
        threads.len(),
        options.keep_last,
        idle.as_secs_f64()
    ));
    let fill_threads: Vec<String> = threads.iter().map(|t| t.thread_id.clone()).collect();

    // 1. the floor next to retain, without load, on every k-th thread
    let mut floor = json!(null);
    let floored =
        options.floor_threads > 0 && (options.url.starts_with("sqlite://") || options.url.starts_with("postgres"));
    if floored {
        let step = (fill_threads.len() / options.floor_threads.max(1)).max(1);
        let sample: Vec<&String> = fill_threads.iter().step_by(step).take(options.floor_threads).collect();
        let (mut raw_n, mut raw_s, mut ours_n, mut ours_s) = (0u64, 0f64, 0u64, 0f64);
        let mut raw_threads = Vec::new();
        for (i, thread) in sample.iter().enumerate() {
            if i % 2 == 0 {
                raw_threads.push(thread.to_string());
                let (n, s) = floor_thread(&options.url, &saver, &policy, thread, options.batch).await?;
                (raw_n, raw_s) = (raw_n + n, raw_s + s);
            } else {
                // the floor's untimed dry run reads its thread first: so
                // does this one, so both are timed on a warm cache
                let options = RetainOptions::default().batch(options.batch).threads([thread.as_str()]);
                saver
                    .retain(&policy, options.clone().dry_run(true))
                    .await
                    .map_err(|e| format!("dry run: {e}"))?;
                let started = Instant::now();
                let r = saver
                    .retain(&policy, options.rest(0))
                    .await
                    .map_err(|e| format!("retain: {e}"))?;
                (ours_n, ours_s) = (ours_n + r.checkpoints_removed, ours_s + started.elapsed().as_secs_f64());
            }
        }
        floor = json!({
            "threads": sample.len(),
            // their kept checkpoints may name a removed parent: the floor
            // clears none
            "raw_threads": raw_threads,
            "raw_delete": {"removed": raw_n, "seconds": raw_s, "removed_per_s": raw_n as f64 / raw_s.max(1e-9)},
            "retain": {"removed": ours_n, "seconds": ours_s, "removed_per_s": ours_n as f64 / ours_s.max(1e-9)},
        });
        say(format!("floor: {floor}"));
    }

    // 2. the load: before, during retention, after, during reclaim
    let space_before = store.space_usage().await.map_err(|e| e.to_string())?;
    let run_id = format!("{:x}", now_micros());
    let load = Load::start(saver.clone(), options, &run_id);
    let t0 = Instant::now();
    say("phase before: load alone".into());
    tokio::time::sleep(options.phase).await;
    let before_s = t0.elapsed().as_secs_f64();

    load.slot.store(1, Ordering::Relaxed);
    say("phase retain: load + retention".into());
    let t1 = Instant::now();
    // thread by thread (one `retain` call each, the report summed), so a
    // time limit can stop it between threads
    let mut retained = RetentionReport::default();
    let (mut window, mut between_s) = (Instant::now(), 0.0);
    for thread in &fill_threads {
        if options.retain_max.is_some_and(|max| t1.elapsed() >= max) {
            break;
        }
        if let Some(length) = options.alternate.filter(|length| window.elapsed() >= *length) {
            load.slot.store(4, Ordering::Relaxed);
            tokio::time::sleep(length).await;
            between_s += length.as_secs_f64();
            load.slot.store(1, Ordering::Relaxed);
            window = Instant::now();
        }
        let r = saver
            .retain(
                &policy,
                RetainOptions::default()
                    .batch(options.batch)
                    .rest(options.rest)
                    .threads([thread.as_str()]),
            )
            .await
            .map_err(|e| format!("retain: {e}"))?;
        retained.threads_scanned += r.threads_scanned;
        retained.threads_deleted += r.threads_deleted;
        retained.checkpoints_scanned += r.checkpoints_scanned;
        retained.checkpoints_removed += r.checkpoints_removed;
        retained.writes_removed += r.writes_removed;
        retained.parents_cleared += r.parents_cleared;
        retained.batches += r.batches;
    }
    let retain_s = t1.elapsed().as_secs_f64() - between_s;
    say(format!("retained: {}", report_json(&retained, retain_s)));
    let space_retained = store.space_usage().await.map_err(|e| e.to_string())?;

    load.slot.store(2, Ordering::Relaxed);
    say("phase after: load alone".into());
    let t2 = Instant::now();
    tokio::time::sleep(options.phase).await;
    let after_s = t2.elapsed().as_secs_f64();

    load.slot.store(3, Ordering::Relaxed);
    say("phase reclaim: load + reclaim_space".into());
    let t3 = Instant::now();
    let reclaim = if options.reclaim {
        Some(
            store
                .reclaim_space(ReclaimOptions::new().rest(options.rest).step_pages(options.step_pages))
                .await
                .map_err(|e| format!("reclaim_space: {e}"))?,
        )
    } else {
        None
    };
    let reclaim_s = t3.elapsed().as_secs_f64();
    let (slots, missed) = load.finish().await?;

    let phases: Vec<Phase> = ["before", "retain", "after", "reclaim", "between"]
        .iter()
        .zip([before_s, retain_s, after_s, reclaim_s, between_s])
        .enumerate()
        .map(|(i, (name, seconds))| Phase {
            name,
            seconds,
            puts: slots[i].clone(),
            missed: missed[i],
        })
        .collect();
    let ratio = |a: &Phase, b: &Phase| a.quantile(0.99) as f64 / b.quantile(0.99).max(1) as f64;
    Ok(json!({
        "store": checkpointer::secret::redact(&options.url),
        "load": {"writers": options.writers, "rate_per_writer": options.rate, "thread_steps": options.thread_steps},
        "policy": {"keep_last": options.keep_last, "idle_s": idle.as_secs_f64(), "batch": options.batch, "rest": options.rest, "step_pages": options.step_pages},
        "phases": phases.iter().map(Phase::json).collect::<Vec<_>>(),
        "p99_ratio_retain_vs_before": ratio(&phases[1], &phases[0]),
        "p99_ratio_retain_vs_after": ratio(&phases[1], &phases[2]),
        "p99_ratio_reclaim_vs_before": ratio(&phases[3], &phases[0]),
        "p99_ratio_retain_vs_between": ratio(&phases[1], &phases[4]),
        "retain": report_json(&retained, retain_s),
        "floor": floor,
        "space": {
            "before": space_json(&space_before),
            "after_retain": space_json(&space_retained),
            "after_reclaim": space_json(&reclaim.as_ref().and_then(|r| r.after.clone())),
            "reclaim_steps": reclaim.as_ref().map(|r| r.steps),
            "reclaim_actions": reclaim.map(|r| r.actions),
        },
    }))
}
