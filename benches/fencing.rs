//! What fencing and atomic steps cost, on every backend, in one run
//! (issue 32: a fenced put at most 1.1× an unfenced one, an atomic step at
//! most 1.1× the `put_writes` + `put` it replaces, group commit still
//! grouping).
//!
//! ```sh
//! nice -n 19 cargo bench -p checkpointer-benches --all-features --bench fencing
//! FENCING_BENCH_SAVERS=memory,sqlite cargo bench -p checkpointer-benches --all-features --bench fencing
//! ```
//!
//! Benchmark ids are `fencing/<backend>/<case>`, each iteration one call
//! (one step) in a chain of steps on one thread, a new thread per chain
//! whose first checkpoint (and, fenced, lease) is made outside the timing;
//! each step writes a ~200-byte message value:
//! * `put`, `put_fenced`: `put_step` by an unfenced saver and by a fenced
//!   one (which holds the thread's lease);
//! * `put_writes+put`, `atomic_step`: a task's write (~200 bytes) then the
//!   step's checkpoint, as `put_pending_writes` + `put_step`, or as one
//!   `put_step_with_writes`;
//! * SQLite and PostgreSQL, `x8/put`, `x8/put_fenced`, `x8/atomic_step_fenced`:
//!   eight tasks on a runtime of eight threads, each its own chain (and
//!   writer) at once; time per call (1 / throughput). After them a line says
//!   how many transactions carried how many writes (group commit grouping).
//!
//! Backends: memory; SQLite, a file in a temporary directory (WAL,
//! `synchronous = FULL`); PostgreSQL at `CHECKPOINTER_PG_URL` (a fresh
//! database, dropped afterwards); Redis at `CHECKPOINTER_REDIS_URL` (default
//! `redis://127.0.0.1:6379`, keys under a prefix of its own, deleted
//! afterwards). One that cannot run is skipped with a `SKIPPED` line.
//!
//! A chain has 1 000 steps at most (a sample of more runs several), and
//! each chain's thread is deleted after it (outside the timing), so a case
//! does not run on a store the cases before it filled.
//! `FENCING_BENCH_PROFILE=put_fenced:20000` runs one case's chain once, no
//! criterion, for a profiler; `FENCING_BENCH_PAIRS=21:200` measures each
//! pair of cases in alternation instead, for a host others share
//! (`docs/performance.md`, *Fencing*).

use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::fence::{Fence, Fenceable};
use checkpointer::{
    CheckpointConfig, CheckpointMetadata, CheckpointSaverExt, CheckpointSource, CheckpointTuple, InMemorySaver,
    PendingWrite, StepCheckpoint, Value,
};
use criterion::{criterion_group, criterion_main, Criterion};
use tokio::runtime::Runtime;

#[cfg(feature = "postgres")]
#[path = "../tests/support/postgres.rs"]
mod postgres_support;
#[cfg(feature = "redis")]
#[path = "../tests/support/redis.rs"]
mod redis_support;
mod support;

/// Concurrent tasks (and runtime threads) of the `x8` cases.
const TASKS: usize = 8;

fn message(i: u64) -> Value {
    Value::from(format!("message {i:>8} {}", "x".repeat(183)))
}

fn meta(n: i64) -> CheckpointMetadata {
    CheckpointMetadata::new(CheckpointSource::Loop, n)
}

/// How a step is stored.
#[derive(Clone, Copy, PartialEq)]
enum How {
    Put,
    WritesThenPut,
    Atomic,
}

/// A chain on a fresh thread: its first checkpoint, stored.
async fn start(saver: &dyn Fenceable, tag: &str) -> CheckpointTuple {
    let thread = format!("bench-{tag}-{}", rand::random::<u64>());
    let mut first = StepCheckpoint::first(0);
    first
        .write("messages", message(0), |v| saver.get_next_version(v))
        .unwrap();
    saver
        .put_step(&CheckpointConfig::new(&thread), &first, &meta(0))
        .await
        .unwrap()
}

/// One step after `parent`.
async fn step(saver: &dyn Fenceable, parent: &CheckpointTuple, n: i64, how: How) -> CheckpointTuple {
    let mut step = parent.checkpoint.successor(n);
    step.write("messages", message(n as u64), |v| saver.get_next_version(v))
        .unwrap();
    let writes = [PendingWrite::new("task", "messages", message(n as u64 + 1))];
    match how {
        How::Put => saver.put_step(&parent.config, &step, &meta(n)).await,
        How::WritesThenPut => {
            saver.put_pending_writes(&parent.config, &writes).await.unwrap();
            saver.put_step(&parent.config, &step, &meta(n)).await
        }
        How::Atomic => {
            saver
                .put_step_with_writes(&parent.config, &step, &meta(n), &writes)
                .await
        }
    }
    .unwrap()
}

/// Steps of one chain (one thread) at most: a sample of more steps runs
/// several chains, one after the other.
const CHAIN: u64 = 1000;

/// `iters` steps in chains of [`CHAIN`] steps at most, each on a fresh
/// thread; the time the steps took. Each thread is deleted after its chain
/// (outside the timing), so every case runs on a store of the same size
/// whatever ran before it, and a chain is as long in every case.
async fn chain(saver: &dyn Fenceable, how: How, iters: u64) -> Duration {
    let mut took = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let steps = left.min(CHAIN);
        left -= steps;
        let mut parent = start(saver, "chain").await;
        let t = Instant::now();
        for n in 1..=steps {
            parent = step(saver, &parent, n as i64, how).await;
        }
        took += t.elapsed();
        saver.delete_thread(&parent.config.thread_id).await.unwrap();
    }
    took
}

/// `TASKS` chains at once, each on a fresh thread with a saver of its own
/// (`fenced`: each its own writer); the time per step.
async fn chains(store: &Arc<dyn Fenceable>, fenced: bool, how: How, iters: u64) -> Duration {
    let mut savers = Vec::with_capacity(TASKS);
    for i in 0..TASKS {
        let saver = match fenced {
            true => store
                .fenced_saver(Fence::new(format!("bench-{i}"), Duration::from_secs(600)))
                .unwrap(),
            false => store.clone(),
        };
        let first = start(saver.as_ref(), "x8").await;
        savers.push((saver, first));
    }
    let t = Instant::now();
    let tasks: Vec<_> = savers
        .into_iter()
        .map(|(saver, mut parent)| {
            tokio::spawn(async move {
                for n in 1..=iters {
                    parent = step(saver.as_ref(), &parent, n as i64, how).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    t.elapsed() / TASKS as u32
}

/// Group-commit counts (writes, transactions) since the last call.
type Grouping = Box<dyn FnMut(&Runtime) -> (u64, u64)>;

/// What removes a backend's bench data.
type Cleanup = Box<dyn FnOnce(&Runtime)>;

/// A backend to measure, and what to clean up afterwards.
struct Site {
    name: &'static str,
    store: Arc<dyn Fenceable>,
    grouping: Option<Grouping>,
    cleanup: Option<Cleanup>,
    _dir: Option<tempfile::TempDir>,
}

fn sites(rt: &Runtime) -> Vec<Site> {
    let mut out = Vec::new();
    for name in support::env_list("FENCING_BENCH_SAVERS", "memory,sqlite,postgres,redis") {
        match site(rt, &name) {
            Ok(site) => out.push(site),
            Err(reason) => eprintln!("\nSKIPPED: the {name} fencing benches: {reason}\n"),
        }
    }
    out
}

fn site(rt: &Runtime, name: &str) -> Result<Site, String> {
    let _ = rt;
    match name {
        "memory" => Ok(Site {
            name: "memory",
            store: Arc::new(InMemorySaver::new()),
            grouping: None,
            cleanup: None,
            _dir: None,
        }),
        #[cfg(feature = "sqlite")]
        "sqlite" => {
            let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
            let saver = rt
                .block_on(checkpointer::sqlite::SqliteSaver::open(
                    dir.path().join("fencing.sqlite"),
                ))
                .map_err(|e| e.to_string())?;
            let saver = Arc::new(saver);
            let counted = saver.clone();
            let mut last = (0, 0);
            Ok(Site {
                name: "sqlite",
                store: saver,
                grouping: Some(Box::new(move |_| {
                    let s = counted.writer_stats();
                    let d = (s.requests - last.0, s.transactions - last.1);
                    last = (s.requests, s.transactions);
                    d
                })),
                cleanup: None,
                _dir: Some(dir),
            })
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            if std::env::var_os("CHECKPOINTER_PG_URL").is_none() {
                return Err("CHECKPOINTER_PG_URL is not set".to_owned());
            }
            let db = postgres_support::block_on_thread(postgres_support::create_database())?;
            let saver = rt
                .block_on(
                    checkpointer::postgres::PostgresSaver::builder()
                        .url(postgres_support::url_of(&db))
                        .max_connections(16)
                        .open(),
                )
                .map_err(|e| e.to_string())?;
            let counted = db.clone();
            Ok(Site {
                name: "postgres",
                store: Arc::new(saver),
                grouping: Some(Box::new(move |rt| rt.block_on(pg_grouping(&counted)))),
                cleanup: Some(Box::new(move |_| {
                    postgres_support::block_on_thread(async move { postgres_support::drop_database(&db).await })
                })),
                _dir: None,
            })
        }
        #[cfg(feature = "redis")]
        "redis" => {
            redis_support::reachable()?;
            let prefix = redis_support::fresh_prefix();
            let saver = rt.block_on(redis_support::saver_on(prefix.clone()));
            Ok(Site {
                name: "redis",
                store: Arc::new(saver),
                grouping: None,
                cleanup: Some(Box::new(move |rt| rt.block_on(redis_support::cleanup(&prefix)))),
                _dir: None,
            })
        }
        other => Err(format!(
            "unknown or not built (cargo bench -p checkpointer-benches --all-features): {other}"
        )),
    }
}

/// Checkpoint rows written since the last call, and the transactions that
/// wrote them (rows of one transaction share its `xmin`).
#[cfg(feature = "postgres")]
async fn pg_grouping(db: &str) -> (u64, u64) {
    let client = postgres_support::connect(db).await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT xmin::text) FROM checkpoints WHERE thread_id LIKE 'bench-x8-%' \
             AND metadata ->> 'step' <> '0'",
            &[],
        )
        .await
        .unwrap();
    let (rows, txs): (i64, i64) = (row.get(0), row.get(1));
    client
        .execute("DELETE FROM checkpoints WHERE thread_id LIKE 'bench-x8-%'", &[])
        .await
        .unwrap();
    (rows as u64, txs as u64)
}

/// `FENCING_BENCH_PROFILE=<case>:<steps>` (with `FENCING_BENCH_SAVERS`
/// naming one backend): runs that case's chain of `steps` steps once per
/// backend, outside criterion, and prints its time; for a profiler
/// (`valgrind --tool=callgrind`), where two runs of different lengths give
/// the instructions of one step by difference.
fn profile_case(rt: &Runtime, site: &str, cases: &[(&str, &Arc<dyn Fenceable>, How)], profile: &str) {
    let (want, steps) = profile.split_once(':').unwrap_or((profile, "1000"));
    let steps: u64 = steps.parse().expect("FENCING_BENCH_PROFILE: <case>:<steps>");
    let Some((case, saver, how)) = cases.iter().find(|(case, ..)| *case == want) else {
        panic!("FENCING_BENCH_PROFILE: no case {want:?}");
    };
    let took = rt.block_on(chain(saver.as_ref(), *how, steps));
    println!("PROFILE fencing/{site}/{case}: {steps} steps in {took:?}");
}

/// The median of `xs` (sorted in place).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// `FENCING_BENCH_PAIRS=<rounds>:<steps>`: instead of criterion, each pair
/// of cases (`put` and `put_fenced`, `put_writes+put` and `atomic_step`)
/// measured in `rounds` rounds of one chain of `steps` steps each, the two
/// in turn and in alternating order, so that a shared host's drift hits
/// both alike; prints each case's median time per step and the median of
/// the rounds' ratios.
fn paired(rt: &Runtime, site: &str, cases: &[(&str, &Arc<dyn Fenceable>, How)], spec: &str) {
    let (rounds, steps) = spec.split_once(':').unwrap_or((spec, "200"));
    let rounds: usize = rounds.parse().expect("FENCING_BENCH_PAIRS: <rounds>:<steps>");
    let steps: u64 = steps.parse().expect("FENCING_BENCH_PAIRS: <rounds>:<steps>");
    let per_step = |saver: &Arc<dyn Fenceable>, how: How| {
        rt.block_on(chain(saver.as_ref(), how, steps)).as_secs_f64() * 1e6 / steps as f64
    };
    for pair in cases.chunks(2) {
        let [(a, saver_a, how_a), (b, saver_b, how_b)] = pair else {
            continue;
        };
        let (mut times_a, mut times_b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let (x, y) = if round % 2 == 0 {
                let x = per_step(saver_a, *how_a);
                (x, per_step(saver_b, *how_b))
            } else {
                let y = per_step(saver_b, *how_b);
                (per_step(saver_a, *how_a), y)
            };
            times_a.push(x);
            times_b.push(y);
            ratios.push(y / x);
        }
        println!(
            "PAIRED fencing/{site}: {a} {:.1} µs, {b} {:.1} µs per step (medians of {rounds} rounds of {steps} steps); \
             {b}/{a} {:.3} (median of the rounds' ratios)",
            median(&mut times_a),
            median(&mut times_b),
            median(&mut ratios)
        );
    }
}

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let rt8 = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(TASKS)
        .enable_all()
        .build()
        .unwrap();
    let profile = std::env::var("FENCING_BENCH_PROFILE").ok();
    let pairs = std::env::var("FENCING_BENCH_PAIRS").ok();
    for mut site in sites(&rt) {
        let store = site.store.clone();
        let fenced = store
            .fenced_saver(Fence::new("bench-writer", Duration::from_secs(600)))
            .unwrap();
        let cases = [
            ("put", &store, How::Put),
            ("put_fenced", &fenced, How::Put),
            ("put_writes+put", &store, How::WritesThenPut),
            ("atomic_step", &store, How::Atomic),
        ];
        if profile.is_some() || pairs.is_some() {
            if let Some(profile) = &profile {
                profile_case(&rt, site.name, &cases, profile);
            }
            if let Some(pairs) = &pairs {
                paired(&rt, site.name, &cases, pairs);
            }
            if let Some(cleanup) = site.cleanup.take() {
                cleanup(&rt);
            }
            continue;
        }
        let mut group = c.benchmark_group(format!("fencing/{}", site.name));
        for (case, saver, how) in cases {
            group.bench_function(case, |b| {
                b.iter_custom(|iters| rt.block_on(chain(saver.as_ref(), how, iters)));
            });
        }
        if site.grouping.is_some() {
            for (case, fenced, how) in [
                ("x8/put", false, How::Put),
                ("x8/put_fenced", true, How::Put),
                ("x8/atomic_step_fenced", true, How::Atomic),
            ] {
                if let Some(grouping) = site.grouping.as_mut() {
                    grouping(&rt8);
                }
                group.bench_function(case, |b| {
                    b.iter_custom(|iters| rt8.block_on(chains(&store, fenced, how, iters)));
                });
                if let Some(grouping) = site.grouping.as_mut() {
                    let (writes, transactions) = grouping(&rt8);
                    println!(
                        "GROUPING fencing/{}/{case}: {writes} writes in {transactions} transactions ({:.2} per transaction)",
                        site.name,
                        writes as f64 / transactions.max(1) as f64
                    );
                }
            }
        }
        group.finish();
        if let Some(cleanup) = site.cleanup.take() {
            cleanup(&rt);
        }
    }
}

criterion_group! {
    name = fencing;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = benches
}
criterion_main!(fencing);
