//! Criterion benches of every saver through `Arc<dyn CheckpointSaver>`, as a
//! framework holds one: the cost of each operation at 10, 1 000 and 10 000
//! checkpoints per thread (PostgreSQL: 10 and 1 000).
//!
//! ```sh
//! cargo bench -p checkpointer-benches --all-features --bench saver
//! SAVER_BENCH_SAVERS=memory,sqlite SAVER_BENCH_SIZES=10,1000 cargo bench -p checkpointer-benches --all-features --bench saver -- 'sqlite/'
//! SAVER_BENCH_SAVERS=redis cargo bench -p checkpointer-benches --all-features --bench saver -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Benchmark ids are `<saver>/<operation>/<n>`, those of the former
//! `benches/memory.rs`, `benches/sqlite.rs` and `benches/postgres.rs`, so
//! criterion compares with their saved results. A saver that cannot run is
//! skipped with a `SKIPPED` line on stderr: SQLite and PostgreSQL without
//! their feature, PostgreSQL without `CHECKPOINTER_PG_URL` (the server, no
//! database part; the bench makes a fresh database and drops it afterwards)
//! or when the server cannot be reached, Redis without its feature or when
//! the server at `CHECKPOINTER_REDIS_URL` (default `redis://127.0.0.1:6379`)
//! does not answer (the bench writes under key prefixes of its own,
//! `cktest-<pid>-...`, and deletes their keys afterwards; it never flushes).
//! `CHECKPOINTER_PG_STATEMENTS=unnamed` measures the unnamed-statement mode.
//!
//! Every thread holds a state of a 20-message list (~200 B per message, a new
//! version, so a new blob, per checkpoint) and two scalar channels, and a few
//! other threads share the store so that per-thread costs are not mistaken
//! for whole-store costs. `put` re-puts the latest checkpoint (same id, same
//! versions), so the history length stays what the bench says. On SQLite and
//! PostgreSQL the history is filled with durability off (`synchronous = OFF`,
//! `synchronous_commit = off`; setup only) and the measured saver is opened
//! afterwards with the defaults (WAL and `synchronous = FULL` on SQLite, as
//! Python's saver).
//!
//! Every saver runs `put`, `put_writes` (a task's two writes), `get_tuple`
//! of the latest checkpoint and by id, and `list` with limit 10. Beyond
//! those, as before:
//! * memory: `delete_thread` of a thread of n checkpoints, and
//!   `put_writes_one_call/{100000,1000000}`, one `put_writes` of that many
//!   writes into an empty saver (a fresh one per iteration): the call
//!   LangGraph never makes but a caller can; it must stay O(k log k), and
//!   the store lock is not held while it builds the set
//!   (see `src/memory/tests.rs`);
//! * SQLite: `put_x8_concurrent`, eight puts to eight threads issued at once
//!   (time per put): what group commit buys;
//! * PostgreSQL: `put_x16_concurrent`, the same with 16 tasks on a pool of 16
//!   connections (1 / concurrent throughput), and `delta_history`;
//! * Redis: `floor_evalsha`, the physical floor measured in the same run: an
//!   `EVALSHA` of the script `return 1` on a plain multiplexed connection to
//!   the same server (one round trip through the script machinery, no key,
//!   no payload), so each operation reads as so many floors.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, InMemorySaver, ListOptions, Value,
};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkGroup, BenchmarkId, Criterion};
use tokio::runtime::Runtime;

#[cfg(feature = "postgres")]
#[path = "../tests/support/postgres.rs"]
mod postgres_support;
#[cfg(feature = "redis")]
#[path = "../tests/support/redis.rs"]
mod redis_support;
mod support;

#[cfg(feature = "postgres")]
use checkpointer::postgres::{PostgresSaver, StatementMode};
#[cfg(feature = "sqlite")]
use checkpointer::sqlite::{SqliteSaver, Synchronous};

fn message(i: usize) -> Value {
    Value::map([
        ("type", Value::from(if i % 2 == 0 { "human" } else { "ai" })),
        (
            "content",
            Value::from(format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(6))),
        ),
        ("id", Value::from(format!("msg-{i:08}"))),
    ])
}

/// A filled thread: what the benches address.
struct Filled {
    latest: CheckpointConfig,
    latest_checkpoint: Checkpoint,
    latest_versions: ChannelVersions,
    middle_id: String,
}

async fn fill(saver: &dyn CheckpointSaver, thread: &str, n: usize) -> Filled {
    let messages: Vec<Value> = (0..20).map(message).collect();
    let mut parent = CheckpointConfig::new(thread);
    let mut prev: Option<Checkpoint> = None;
    let mut middle_id = String::new();
    let mut last = None;
    for step in 0..n {
        let mut cp = prev.clone().unwrap_or_else(|| Checkpoint::new(step as i64));
        cp.id = checkpointer::id::checkpoint_id(step as i64);
        cp.channel_values
            .insert("messages".into(), Value::Array(messages.clone().into()));
        cp.channel_values.insert("step".into(), Value::from(step));
        cp.channel_values.insert("user".into(), Value::from("ada"));
        let mut new_versions = ChannelVersions::new();
        for ch in ["messages", "step"] {
            let v = saver
                .get_next_version(cp.channel_versions.get(ch))
                .expect("a fresh counter continues");
            cp.channel_versions.insert(ch.into(), v.clone());
            new_versions.insert(ch.into(), v);
        }
        if step == 0 {
            let v = saver.get_next_version(None).expect("the first version");
            cp.channel_versions.insert("user".into(), v.clone());
            new_versions.insert("user".into(), v);
        }
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
        let cfg = saver.put(&parent, &cp, &meta, &new_versions).await.unwrap();
        if step == n / 2 {
            middle_id = cp.id.clone();
        }
        last = Some((parent.clone(), cp.clone(), new_versions));
        parent = cfg;
        prev = Some(cp);
    }
    let (latest, latest_checkpoint, latest_versions) = last.unwrap();
    Filled {
        latest,
        latest_checkpoint,
        latest_versions,
        middle_id,
    }
}

/// Where the `put_writes` bench writes.
enum WritesAt {
    /// Each iteration a task's writes against its own checkpoint id (writes
    /// may precede their checkpoint), so no checkpoint collects more writes
    /// than a real super-step makes and the reads see the thread as filled.
    OwnCheckpoint,
    /// Each iteration another task's writes against this checkpoint.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    Checkpoint(String),
}

/// One saver under test: where its stores live for the whole run, and what
/// its former bench measured beyond the common operations.
enum Site {
    Memory,
    #[cfg(feature = "sqlite")]
    Sqlite(tempfile::TempDir),
    #[cfg(feature = "postgres")]
    Postgres {
        db: String,
        mode: StatementMode,
    },
    /// The server at `CHECKPOINTER_REDIS_URL`; each size under a fresh key prefix.
    #[cfg(feature = "redis")]
    Redis,
}

/// A store holding a filled history of `n` checkpoints in `thread`.
struct Store {
    saver: Arc<dyn CheckpointSaver>,
    thread: String,
    filled: Filled,
    writes_at: WritesAt,
    #[cfg(feature = "sqlite")]
    sqlite: Option<Arc<SqliteSaver>>,
    /// The key prefix whose keys `close` deletes.
    #[cfg(feature = "redis")]
    redis_prefix: Option<String>,
}

impl Store {
    fn new(saver: Arc<dyn CheckpointSaver>, thread: String, filled: Filled, writes_at: WritesAt) -> Store {
        Store {
            saver,
            thread,
            filled,
            writes_at,
            #[cfg(feature = "sqlite")]
            sqlite: None,
            #[cfg(feature = "redis")]
            redis_prefix: None,
        }
    }

    fn close(self, rt: &Runtime) {
        #[cfg(feature = "sqlite")]
        if let Some(sqlite) = self.sqlite {
            drop(self.saver);
            rt.block_on(sqlite.close()).unwrap();
        }
        #[cfg(feature = "redis")]
        if let Some(prefix) = self.redis_prefix {
            rt.block_on(redis_support::cleanup(&prefix));
        }
        let _ = rt;
    }
}

impl Site {
    /// The site of saver `name`, or why it is skipped.
    fn new(name: &str) -> Result<Site, String> {
        match name {
            "memory" => Ok(Site::Memory),
            #[cfg(feature = "sqlite")]
            "sqlite" => Ok(Site::Sqlite(tempfile::tempdir().unwrap())),
            #[cfg(not(feature = "sqlite"))]
            "sqlite" => {
                Err("built without feature `sqlite` (cargo bench -p checkpointer-benches --all-features)".to_owned())
            }
            #[cfg(feature = "postgres")]
            "postgres" => {
                if std::env::var_os("CHECKPOINTER_PG_URL").is_none() {
                    return Err("CHECKPOINTER_PG_URL is not set".to_owned());
                }
                let db = postgres_support::block_on_thread(postgres_support::create_database())?;
                let mode = match std::env::var("CHECKPOINTER_PG_STATEMENTS").as_deref() {
                    Ok("unnamed") => StatementMode::Unnamed,
                    _ => StatementMode::Prepared,
                };
                Ok(Site::Postgres { db, mode })
            }
            #[cfg(not(feature = "postgres"))]
            "postgres" => {
                Err("built without feature `postgres` (cargo bench -p checkpointer-benches --all-features)".to_owned())
            }
            #[cfg(feature = "redis")]
            "redis" => redis_support::reachable().map(|()| Site::Redis),
            #[cfg(not(feature = "redis"))]
            "redis" => {
                Err("built without feature `redis` (cargo bench -p checkpointer-benches --all-features)".to_owned())
            }
            other => panic!("unknown saver {other} (memory, sqlite, postgres, redis)"),
        }
    }

    fn sizes(&self) -> Vec<usize> {
        let default = match self {
            #[cfg(feature = "postgres")]
            Site::Postgres { .. } => "10,1000",
            _ => "10,1000,10000",
        };
        support::env_list("SAVER_BENCH_SIZES", default)
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect()
    }

    /// `put_x<k>_concurrent`: k puts to k threads at once.
    fn concurrent_puts(&self) -> Option<usize> {
        match self {
            Site::Memory => None,
            #[cfg(feature = "sqlite")]
            Site::Sqlite(_) => Some(8),
            #[cfg(feature = "postgres")]
            Site::Postgres { .. } => Some(16),
            #[cfg(feature = "redis")]
            Site::Redis => None,
        }
    }

    fn open(&self, rt: &Runtime, n: usize) -> Store {
        match self {
            Site::Memory => {
                let saver = InMemorySaver::new();
                let filled = rt.block_on(async {
                    for other in 0..3 {
                        fill(&saver, &format!("other-{other}"), n.min(1_000)).await;
                    }
                    fill(&saver, "bench", n).await
                });
                Store::new(Arc::new(saver), "bench".to_owned(), filled, WritesAt::OwnCheckpoint)
            }
            #[cfg(feature = "sqlite")]
            Site::Sqlite(dir) => {
                let path = dir.path().join(format!("bench-{n}.sqlite"));
                let filled = rt.block_on(async {
                    let setup = SqliteSaver::builder(&path)
                        .synchronous(Synchronous::Off)
                        .open()
                        .await
                        .unwrap();
                    for other in 0..3 {
                        fill(&setup, &format!("other-{other}"), n.min(1_000)).await;
                    }
                    let filled = fill(&setup, "bench", n).await;
                    setup.close().await.unwrap();
                    filled
                });
                let saver = Arc::new(rt.block_on(SqliteSaver::open(&path)).unwrap());
                let at = WritesAt::Checkpoint(checkpointer::id::checkpoint_id(0));
                let mut store = Store::new(saver.clone(), "bench".to_owned(), filled, at);
                store.sqlite = Some(saver);
                store
            }
            #[cfg(feature = "postgres")]
            Site::Postgres { db, mode } => {
                let open = || {
                    PostgresSaver::builder()
                        .url(postgres_support::url_of(db))
                        .statement_mode(*mode)
                        .max_connections(16)
                        .build()
                        .unwrap()
                };
                let thread = format!("bench-{n}");
                let filled = rt.block_on(async {
                    let setup = open();
                    setup.setup().await.unwrap();
                    let admin = postgres_support::connect(db).await.unwrap();
                    admin
                        .batch_execute(&format!("ALTER DATABASE \"{db}\" SET synchronous_commit = off"))
                        .await
                        .unwrap();
                    setup.pool().retain(|_, _| false);
                    for other in 0..3 {
                        fill(&setup, &format!("other-{n}-{other}"), n.min(100)).await;
                    }
                    let filled = fill(&setup, &thread, n).await;
                    admin
                        .batch_execute(&format!("ALTER DATABASE \"{db}\" RESET synchronous_commit"))
                        .await
                        .unwrap();
                    admin.batch_execute("VACUUM ANALYZE").await.unwrap();
                    filled
                });
                let at = WritesAt::Checkpoint(filled.latest_checkpoint.id.clone());
                Store::new(Arc::new(open()), thread, filled, at)
            }
            #[cfg(feature = "redis")]
            Site::Redis => {
                let prefix = redis_support::fresh_prefix();
                let saver = rt.block_on(redis_support::saver_on(prefix.clone()));
                let filled = rt.block_on(async {
                    for other in 0..3 {
                        fill(&saver, &format!("other-{other}"), n.min(1_000)).await;
                    }
                    fill(&saver, "bench", n).await
                });
                // writes against checkpoints of their own (as memory): one
                // checkpoint gathering thousands would slow the reads of n = 10
                let mut store = Store::new(Arc::new(saver), "bench".to_owned(), filled, WritesAt::OwnCheckpoint);
                store.redis_prefix = Some(prefix);
                store
            }
        }
    }

    /// After the `put_writes` bench, before the reads.
    fn after_writes(&self, rt: &Runtime, store: &Store, meta: &CheckpointMetadata) {
        #[cfg(feature = "postgres")]
        if let Site::Postgres { db, .. } = self {
            let f = &store.filled;
            rt.block_on(async {
                // keep get_tuple(latest) from reading thousands of bench writes
                store
                    .saver
                    .put(&f.latest, &f.latest_checkpoint, meta, &f.latest_versions)
                    .await
                    .unwrap();
                let admin = postgres_support::connect(db).await.unwrap();
                admin
                    .execute(
                        "DELETE FROM checkpoint_writes WHERE thread_id = $1 AND task_id LIKE 'task-%'",
                        &[&store.thread],
                    )
                    .await
                    .unwrap();
                // Without this, every get_tuple(latest) below walks the dead
                // index entries of the deleted bench writes until autovacuum runs.
                admin.batch_execute("VACUUM checkpoint_writes").await.unwrap();
            });
        }
        let _ = (rt, store, meta);
    }

    fn finish(self) {
        #[cfg(feature = "postgres")]
        if let Site::Postgres { db, .. } = self {
            postgres_support::block_on_thread(async move { postgres_support::drop_database(&db).await });
        }
    }
}

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    for name in support::env_list("SAVER_BENCH_SAVERS", "memory,sqlite,postgres") {
        let site = match Site::new(&name) {
            Ok(site) => site,
            Err(reason) => {
                eprintln!("\nSKIPPED: the {name} benches: {reason}\n");
                continue;
            }
        };
        let mut group = c.benchmark_group(name.as_str());
        group.sample_size(20);
        for n in site.sizes() {
            let store = site.open(&rt, n);
            operations(&mut group, &rt, &site, &store, n);
            store.close(&rt);
        }
        group.finish();
        match site {
            Site::Memory => put_writes_one_call(c, &rt),
            #[cfg(feature = "sqlite")]
            Site::Sqlite(_) => {}
            #[cfg(feature = "postgres")]
            Site::Postgres { .. } => {}
            #[cfg(feature = "redis")]
            Site::Redis => {}
        }
        site.finish();
    }
}

fn operations(group: &mut BenchmarkGroup<'_, WallTime>, rt: &Runtime, site: &Site, store: &Store, n: usize) {
    let (saver, f) = (&store.saver, &store.filled);
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, n as i64);
    let latest_cfg = CheckpointConfig::new(&store.thread);
    let by_id = CheckpointConfig::new(&store.thread).with_checkpoint_id(&f.middle_id);
    let writes = vec![
        ("messages".to_owned(), message(99)),
        ("step".to_owned(), Value::from(1)),
    ];

    group.bench_with_input(BenchmarkId::new("put", n), &n, |b, _| {
        b.to_async(rt).iter(|| async {
            saver
                .put(&f.latest, &f.latest_checkpoint, &meta, &f.latest_versions)
                .await
                .unwrap()
        })
    });
    if let Some(k) = site.concurrent_puts() {
        group.bench_with_input(BenchmarkId::new(format!("put_x{k}_concurrent"), n), &n, |b, _| {
            b.to_async(rt).iter_custom(|iters| {
                let saver = saver.clone();
                let (cp, meta, versions) = (f.latest_checkpoint.clone(), meta.clone(), f.latest_versions.clone());
                async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let puts: Vec<_> = (0..k)
                            .map(|w| {
                                let (s, cp, meta, versions) =
                                    (saver.clone(), cp.clone(), meta.clone(), versions.clone());
                                tokio::spawn(async move {
                                    s.put(&CheckpointConfig::new(format!("concurrent-{w}")), &cp, &meta, &versions)
                                        .await
                                        .unwrap()
                                })
                            })
                            .collect();
                        for p in puts {
                            p.await.unwrap();
                        }
                    }
                    start.elapsed() / k as u32
                }
            })
        });
    }
    let mut task = 0u64;
    group.bench_with_input(BenchmarkId::new("put_writes", n), &n, |b, _| {
        b.to_async(rt).iter_batched(
            || {
                task += 1;
                match &store.writes_at {
                    WritesAt::OwnCheckpoint => (
                        CheckpointConfig::new(&store.thread).with_checkpoint_id(format!("pending-{task:012}")),
                        "task".to_owned(),
                    ),
                    WritesAt::Checkpoint(id) => (
                        CheckpointConfig::new(&store.thread).with_checkpoint_id(id),
                        format!("task-{task}"),
                    ),
                }
            },
            |(cfg, task_id)| {
                let writes = &writes;
                async move {
                    saver.put_writes(&cfg, writes, &task_id, "").await.unwrap();
                    // dropped after the clock stops, as the inputs were before
                    (cfg, task_id)
                }
            },
            BatchSize::SmallInput,
        )
    });
    site.after_writes(rt, store, &meta);
    group.bench_with_input(BenchmarkId::new("get_tuple_latest", n), &n, |b, _| {
        b.to_async(rt)
            .iter(|| async { black_box(saver.get_tuple(&latest_cfg).await.unwrap()) })
    });
    group.bench_with_input(BenchmarkId::new("get_tuple_by_id", n), &n, |b, _| {
        b.to_async(rt)
            .iter(|| async { black_box(saver.get_tuple(&by_id).await.unwrap()) })
    });
    group.bench_with_input(BenchmarkId::new("list_limit_10", n), &n, |b, _| {
        b.to_async(rt).iter(|| async {
            black_box(
                saver
                    .list_vec(Some(latest_cfg.clone()), ListOptions::default().limit(10))
                    .await
                    .unwrap(),
            )
        })
    });
    match site {
        Site::Memory => {
            let mut victim = 0u64;
            group.bench_with_input(BenchmarkId::new("delete_thread", n), &n, |b, _| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        victim += 1;
                        let thread = format!("victim-{victim}");
                        rt.block_on(fill(&**saver, &thread, n));
                        let start = Instant::now();
                        rt.block_on(saver.delete_thread(&thread)).unwrap();
                        total += start.elapsed();
                    }
                    total
                })
            });
        }
        #[cfg(feature = "postgres")]
        Site::Postgres { .. } => {
            group.bench_with_input(BenchmarkId::new("delta_history", n), &n, |b, _| {
                b.to_async(rt).iter(|| async {
                    black_box(
                        saver
                            .get_delta_channel_history(&latest_cfg, &["messages".to_owned()])
                            .await
                            .unwrap(),
                    )
                })
            });
        }
        #[cfg(feature = "sqlite")]
        Site::Sqlite(_) => {}
        #[cfg(feature = "redis")]
        Site::Redis => {
            let conn = rt.block_on(redis_support::connection()).unwrap();
            let noop = redis::Script::new("return 1");
            group.bench_with_input(BenchmarkId::new("floor_evalsha", n), &n, |b, _| {
                b.to_async(rt).iter(|| {
                    let (mut conn, noop) = (conn.clone(), &noop);
                    async move { black_box(noop.invoke_async::<_, i64>(&mut conn).await.unwrap()) }
                })
            });
        }
    }
}

fn put_writes_one_call(c: &mut Criterion, rt: &Runtime) {
    let mut group = c.benchmark_group("memory");
    group.sample_size(10);
    for k in [100_000usize, 1_000_000] {
        let writes: Vec<(String, Value)> = (0..k).map(|i| (format!("ch{i}"), Value::from(i))).collect();
        let cfg = CheckpointConfig::new("t").with_checkpoint_id("1");
        group.bench_with_input(BenchmarkId::new("put_writes_one_call", k), &k, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let saver = InMemorySaver::new();
                    let start = Instant::now();
                    rt.block_on(saver.put_writes(&cfg, &writes, "task", "")).unwrap();
                    total += start.elapsed();
                    drop(saver);
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(saver, benches);
criterion_main!(saver);
