//! Criterion benches for `PostgresSaver` against the PostgreSQL server at
//! `CHECKPOINTER_PG_URL` (default `postgresql://postgres@127.0.0.1:5432`), in
//! a fresh database dropped afterwards: the cost of each operation at 10 and
//! 1 000 checkpoints per thread, and 16 writers at once.
//!
//! `cargo bench --features postgres --bench postgres`
//!
//! The workload is the one of `benches/sqlite.rs`: a 20-message list (~200 B
//! per message, a new version, so a new blob, per checkpoint) and two scalar
//! channels, a few other threads in the database, and `put` re-putting the
//! latest checkpoint so the history length stays what the bench says.
//! Histories are filled with `synchronous_commit = off` (setup only); the
//! measured saver connects afterwards with the server's defaults.
//! `put_x16_concurrent` is 16 puts to 16 threads issued at once by 16 tasks,
//! reported as time per put: 1 / (concurrent throughput).

#[path = "../tests/support/postgres.rs"]
mod postgres_support;

use std::hint::black_box;
use std::sync::Arc;

use checkpointer::postgres::{PostgresSaver, StatementMode};
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, ListOptions, Value,
};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use tokio::runtime::Runtime;

const SIZES: [usize; 2] = [10, 1_000];

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

struct Filled {
    latest: CheckpointConfig,
    latest_checkpoint: Checkpoint,
    latest_versions: ChannelVersions,
    middle_id: String,
}

async fn fill(saver: &PostgresSaver, thread: &str, n: usize) -> Filled {
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
            let v = saver.get_next_version(cp.channel_versions.get(ch));
            cp.channel_versions.insert(ch.into(), v.clone());
            new_versions.insert(ch.into(), v);
        }
        if step == 0 {
            let v = saver.get_next_version(None);
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

fn benches(c: &mut Criterion) {
    let db = match postgres_support::block_on_thread(postgres_support::create_database()) {
        Ok(db) => db,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    let rt = Runtime::new().unwrap();
    let url = postgres_support::url_of(&db);
    let mode = match std::env::var("CHECKPOINTER_PG_STATEMENTS").as_deref() {
        Ok("unnamed") => StatementMode::Unnamed,
        _ => StatementMode::Prepared,
    };
    let open = || {
        PostgresSaver::builder()
            .url(url.clone())
            .statement_mode(mode)
            .max_connections(16)
            .build()
            .unwrap()
    };
    let mut group = c.benchmark_group("postgres");
    group.sample_size(20);
    for n in SIZES {
        let thread = format!("bench-{n}");
        let f = rt.block_on(async {
            let setup = open();
            setup.setup().await.unwrap();
            let admin = postgres_support::connect(&db).await.unwrap();
            admin
                .batch_execute(&format!("ALTER DATABASE \"{db}\" SET synchronous_commit = off"))
                .await
                .unwrap();
            setup.pool().retain(|_, _| false);
            for other in 0..3 {
                fill(&setup, &format!("other-{n}-{other}"), n.min(100)).await;
            }
            let f = fill(&setup, &thread, n).await;
            admin
                .batch_execute(&format!("ALTER DATABASE \"{db}\" RESET synchronous_commit"))
                .await
                .unwrap();
            admin.batch_execute("VACUUM ANALYZE").await.unwrap();
            f
        });
        let saver = Arc::new(open());
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, n as i64);
        let latest_cfg = CheckpointConfig::new(&thread);
        let by_id = CheckpointConfig::new(&thread).with_checkpoint_id(&f.middle_id);
        let writes_cfg = CheckpointConfig::new(&thread).with_checkpoint_id(&f.latest_checkpoint.id);
        let writes = vec![
            ("messages".to_owned(), message(99)),
            ("step".to_owned(), Value::from(1)),
        ];

        group.bench_with_input(BenchmarkId::new("put", n), &n, |b, _| {
            b.to_async(&rt).iter(|| async {
                saver
                    .put(&f.latest, &f.latest_checkpoint, &meta, &f.latest_versions)
                    .await
                    .unwrap()
            })
        });
        group.bench_with_input(BenchmarkId::new("put_x16_concurrent", n), &n, |b, _| {
            b.to_async(&rt).iter_custom(|iters| {
                let saver = saver.clone();
                let (cp, meta, versions) = (f.latest_checkpoint.clone(), meta.clone(), f.latest_versions.clone());
                async move {
                    let start = std::time::Instant::now();
                    for _ in 0..iters {
                        let puts: Vec<_> = (0..16)
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
                    start.elapsed() / 16
                }
            })
        });
        let mut task = 0u64;
        group.bench_with_input(BenchmarkId::new("put_writes", n), &n, |b, _| {
            b.to_async(&rt).iter_batched(
                || {
                    task += 1;
                    format!("task-{task}")
                },
                |task_id| {
                    let (saver, writes_cfg, writes) = (&saver, &writes_cfg, &writes);
                    async move { saver.put_writes(writes_cfg, writes, &task_id, "").await.unwrap() }
                },
                BatchSize::SmallInput,
            )
        });
        // keep get_tuple(latest) from reading thousands of bench writes
        rt.block_on(saver.put(&f.latest, &f.latest_checkpoint, &meta, &f.latest_versions))
            .unwrap();
        rt.block_on(async {
            let admin = postgres_support::connect(&db).await.unwrap();
            admin
                .execute(
                    "DELETE FROM checkpoint_writes WHERE thread_id = $1 AND task_id LIKE 'task-%'",
                    &[&thread],
                )
                .await
                .unwrap();
            // Without this, every get_tuple(latest) below walks the dead index
            // entries of the deleted bench writes until autovacuum runs.
            admin.batch_execute("VACUUM checkpoint_writes").await.unwrap();
        });
        group.bench_with_input(BenchmarkId::new("get_tuple_latest", n), &n, |b, _| {
            b.to_async(&rt)
                .iter(|| async { black_box(saver.get_tuple(&latest_cfg).await.unwrap()) })
        });
        group.bench_with_input(BenchmarkId::new("get_tuple_by_id", n), &n, |b, _| {
            b.to_async(&rt)
                .iter(|| async { black_box(saver.get_tuple(&by_id).await.unwrap()) })
        });
        group.bench_with_input(BenchmarkId::new("list_limit_10", n), &n, |b, _| {
            b.to_async(&rt).iter(|| async {
                black_box(
                    saver
                        .list_vec(Some(latest_cfg.clone()), ListOptions::default().limit(10))
                        .await
                        .unwrap(),
                )
            })
        });
        group.bench_with_input(BenchmarkId::new("delta_history", n), &n, |b, _| {
            b.to_async(&rt).iter(|| async {
                black_box(
                    saver
                        .get_delta_channel_history(&latest_cfg, &["messages".to_owned()])
                        .await
                        .unwrap(),
                )
            })
        });
    }
    group.finish();
    drop(rt);
    postgres_support::block_on_thread(async move { postgres_support::drop_database(&db).await });
}

criterion_group!(postgres, benches);
criterion_main!(postgres);
