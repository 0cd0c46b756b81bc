//! How costs grow with history length: `get_tuple` (latest), `list` (limit
//! 10, in the root namespace as WORKLOAD.md's reads are, and across all
//! namespaces of the thread) and `put` on a thread holding 10, 1 000 and
//! 10 000 checkpoints, on every backend. The target: get_tuple latest and list limit 10 at
//! 10 000 cost at most 1.5× what they cost at 10.
//!
//! ```sh
//! cargo bench -p checkpointer-benches --all-features --bench scaling
//! SCALING_SIZES=10,1000 SCALING_SAVERS=memory,sqlite SCALING_CALLS=100 cargo bench -p checkpointer-benches --all-features --bench scaling
//! SCALING_SAVERS=redis cargo bench -p checkpointer-benches --all-features --bench scaling
//! ```
//!
//! The checkpoints are those of thread 0 of `../shared/peer/WORKLOAD.md`
//! (two pending writes after each), except that `messages` keeps only the
//! last 10 messages, so every checkpoint has the same size (~2 KB) and only
//! the history length changes. Another thread of min(n, 1 000) checkpoints
//! shares the storage. Histories are filled with durability off (SQLite
//! `synchronous = OFF`, Postgres `synchronous_commit = off`, setup only); the
//! measured saver is opened afterwards with the defaults. `put` re-puts the
//! latest checkpoint, so the history length stays n. Redis (the server at
//! `CHECKPOINTER_REDIS_URL`, default `redis://127.0.0.1:6379`; skipped when
//! it does not answer) fills each size under a key prefix of its own and
//! deletes its keys afterwards, and adds the row `floor_evalsha`: an
//! `EVALSHA` of the script `return 1` on a plain connection to the same
//! server, timed in the same run (one round trip, the physical floor of a
//! one-script operation). Output: one JSON line
//! per (saver, n, op) with the mean (`us_per_op`) and median (`median_us`)
//! time per call, then a summary of the 10 000 ÷ 10 ratios of the means.

#[path = "workload/generator.rs"]
mod generator;
#[path = "../tests/support/postgres.rs"]
mod postgres_support;
#[path = "../tests/support/redis.rs"]
mod redis_support;
mod support;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use checkpointer::postgres::PostgresSaver;
use checkpointer::sqlite::{SqliteSaver, Synchronous};
use checkpointer::{CheckpointConfig, CheckpointSaver, CheckpointSaverExt, InMemorySaver, ListOptions};
use tokio::runtime::Runtime;

/// Fills thread `t` with `n` checkpoints; returns the last step's arguments.
async fn fill(saver: &dyn CheckpointSaver, t: usize, n: usize) -> generator::StepArgs {
    let mut stream = generator::ThreadStream::new(42, t, n).with_window(10);
    let mut last = None;
    while let Some(step) = stream.next_step(|v| saver.get_next_version(v).expect("the generator's versions continue")) {
        let cfg = saver
            .put(&step.config, &step.checkpoint, &step.metadata, &step.new_versions)
            .await
            .unwrap();
        saver
            .put_writes(&cfg, &step.writes, &step.op.writes_task_id, generator::TASK_PATH)
            .await
            .unwrap();
        last = Some(step);
    }
    last.unwrap()
}

async fn fill_all(saver: &dyn CheckpointSaver, n: usize) -> generator::StepArgs {
    fill(saver, 1, n.min(1_000)).await;
    fill(saver, 0, n).await
}

/// Mean and median microseconds per call of `f` over `calls` calls, each
/// timed on its own (after 3 warm-up calls).
async fn time<F, Fut>(calls: usize, mut f: F) -> (f64, f64)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..3 {
        f().await;
    }
    let mut each = Vec::with_capacity(calls);
    for _ in 0..calls.max(1) {
        let start = Instant::now();
        f().await;
        each.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let mean = each.iter().sum::<f64>() / each.len() as f64;
    each.sort_by(f64::total_cmp);
    (mean, each[each.len() / 2])
}

/// What a filled store leaves behind on a server.
enum Leftover {
    Nothing,
    /// the fresh PostgreSQL database
    Database(String),
    /// the key prefix of the Redis saver
    Redis(String),
}

impl Leftover {
    fn remove(self) {
        match self {
            Leftover::Nothing => {}
            Leftover::Database(name) => {
                postgres_support::block_on_thread(async move { postgres_support::drop_database(&name).await });
            }
            Leftover::Redis(prefix) => {
                redis_support::block_on_thread(async move { redis_support::cleanup(&prefix).await });
            }
        }
    }
}

/// Opens `kind` holding a filled history of `n`; `None` when Postgres or
/// Redis is absent.
fn open(
    rt: &Runtime,
    kind: &str,
    n: usize,
    dir: &std::path::Path,
) -> Option<(Arc<dyn CheckpointSaver>, generator::StepArgs, Leftover)> {
    match kind {
        "memory" => {
            let saver = InMemorySaver::new();
            let last = rt.block_on(fill_all(&saver, n));
            Some((Arc::new(saver), last, Leftover::Nothing))
        }
        "redis" => {
            if let Err(reason) = redis_support::reachable() {
                eprintln!("\nSKIPPED: the redis scaling bench: {reason}\n");
                return None;
            }
            let prefix = redis_support::fresh_prefix();
            let saver = rt.block_on(redis_support::saver_on(prefix.clone()));
            let last = rt.block_on(fill_all(&saver, n));
            Some((Arc::new(saver), last, Leftover::Redis(prefix)))
        }
        "sqlite" => {
            let path = dir.join(format!("scaling-{n}.sqlite"));
            let last = rt.block_on(async {
                let setup = SqliteSaver::builder(&path)
                    .synchronous(Synchronous::Off)
                    .open()
                    .await
                    .unwrap();
                let last = fill_all(&setup, n).await;
                setup.close().await.unwrap();
                last
            });
            let saver = rt.block_on(SqliteSaver::open(&path)).unwrap();
            Some((Arc::new(saver), last, Leftover::Nothing))
        }
        "postgres" => {
            let name = match postgres_support::block_on_thread(postgres_support::create_database()) {
                Ok(name) => name,
                Err(reason) => {
                    postgres_support::skip(&reason);
                    return None;
                }
            };
            let url = postgres_support::url_of(&name);
            let last = rt.block_on(async {
                let admin = postgres_support::connect(&name).await.unwrap();
                admin
                    .batch_execute(&format!("ALTER DATABASE \"{name}\" SET synchronous_commit = off"))
                    .await
                    .unwrap();
                let setup = PostgresSaver::builder()
                    .url(&url)
                    .max_connections(1)
                    .open()
                    .await
                    .unwrap();
                let last = fill_all(&setup, n).await;
                setup.pool().close();
                admin
                    .batch_execute(&format!("ALTER DATABASE \"{name}\" RESET synchronous_commit"))
                    .await
                    .unwrap();
                admin.batch_execute("VACUUM ANALYZE").await.unwrap();
                last
            });
            let saver = PostgresSaver::builder().url(&url).max_connections(1).build().unwrap();
            Some((Arc::new(saver), last, Leftover::Database(name)))
        }
        other => panic!("unknown saver {other} (memory, sqlite, postgres, redis)"),
    }
}

fn main() {
    let sizes: Vec<usize> = support::env_list("SCALING_SIZES", "10,1000,10000")
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect();
    let savers = support::env_list("SCALING_SAVERS", "memory,sqlite,postgres");
    let calls: usize = std::env::var("SCALING_CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut results: BTreeMap<(String, &'static str), Vec<(usize, f64)>> = BTreeMap::new();
    for kind in &savers {
        for &n in &sizes {
            let Some((saver, last, leftover)) = open(&rt, kind, n, dir.path()) else {
                continue;
            };
            // As WORKLOAD.md and LangGraph's own reads: the root namespace.
            let latest = CheckpointConfig::new(generator::thread_id(0)).with_ns("");
            // Every namespace of the thread (`checkpoint_ns` unset).
            let thread_wide = CheckpointConfig::new(generator::thread_id(0));
            let expected_id = generator::checkpoint_id(0, n - 1, n);
            let s = &*saver;
            let get = rt.block_on(time(calls, || async {
                let tup = s.get_tuple(&latest).await.unwrap().unwrap();
                assert_eq!(tup.checkpoint.id, expected_id);
                black_box(tup);
            }));
            let list_of = |config: &CheckpointConfig| {
                rt.block_on(time(calls, || async {
                    let res = s
                        .list_vec(Some(config.clone()), ListOptions::default().limit(10))
                        .await
                        .unwrap();
                    assert_eq!(res.len(), n.min(10));
                    black_box(res);
                }))
            };
            let list = list_of(&latest);
            let list_all_ns = list_of(&thread_wide);
            let put = rt.block_on(time(calls, || async {
                let cfg = s
                    .put(&last.config, &last.checkpoint, &last.metadata, &last.new_versions)
                    .await
                    .unwrap();
                black_box(cfg);
            }));
            let mut rows = vec![
                ("get_tuple_latest", get),
                ("list_limit10", list),
                ("list_limit10_all_ns", list_all_ns),
                ("put", put),
            ];
            if let Leftover::Redis(_) = leftover {
                let conn = rt.block_on(redis_support::connection()).unwrap();
                let noop = redis::Script::new("return 1");
                let floor = rt.block_on(time(calls, || {
                    let (mut conn, noop) = (conn.clone(), &noop);
                    async move {
                        black_box(noop.invoke_async::<_, i64>(&mut conn).await.unwrap());
                    }
                }));
                rows.push(("floor_evalsha", floor));
            }
            for (op, us) in rows {
                let (us, median) = us;
                println!(
                    "{}",
                    serde_json::json!({"bench": "scaling", "saver": kind, "checkpoints": n, "op": op,
                        "calls": calls, "us_per_op": (us * 100.0).round() / 100.0,
                        "median_us": (median * 100.0).round() / 100.0})
                );
                results.entry((kind.clone(), op)).or_default().push((n, us));
            }
            drop(saver);
            leftover.remove();
        }
    }
    eprintln!("\n| saver | op | us per call by checkpoints per thread | largest / smallest |");
    eprintln!("|---|---|---|---:|");
    for ((kind, op), points) in &results {
        let cells: Vec<String> = points.iter().map(|(n, us)| format!("{n}: {us:.1}")).collect();
        let ratio = match (points.first(), points.last()) {
            (Some(a), Some(b)) if points.len() > 1 => format!("{:.2}x", b.1 / a.1),
            _ => "-".to_owned(),
        };
        eprintln!("| {kind} | {op} | {} | {ratio} |", cells.join(", "));
    }
}
