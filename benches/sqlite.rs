//! Criterion benches for `SqliteSaver` on a file, at the durability Python's
//! saver uses (WAL, `synchronous = FULL`): the cost of each operation at 10,
//! 1 000 and 10 000 checkpoints per thread.
//!
//! `cargo bench --features sqlite-bundled --bench sqlite`
//!
//! The workload is the one of `benches/memory.rs`: a 20-message list (~200 B
//! per message, a new version per checkpoint) and two scalar channels per
//! checkpoint, a few other threads in the file, and `put` re-putting the
//! latest checkpoint so the history length stays what the bench says.
//! Histories are filled with `synchronous = OFF` (setup only); the measured
//! saver is opened afterwards with the default settings.
//! `SQLITE_BENCH_SIZES=10,1000` limits the history lengths measured.
//! `put_x8_concurrent` is eight puts to eight threads issued at once (time per
//! put): what group commit buys.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use checkpointer::sqlite::{SqliteSaver, Synchronous};
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, ListOptions, Value,
};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use tokio::runtime::Runtime;

const SIZES: [usize; 3] = [10, 1_000, 10_000];

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

async fn fill(saver: &SqliteSaver, thread: &str, n: usize) -> Filled {
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

async fn fixture(path: &Path, n: usize) -> (SqliteSaver, Filled) {
    let setup = SqliteSaver::builder(path)
        .synchronous(Synchronous::Off)
        .open()
        .await
        .unwrap();
    for other in 0..3 {
        fill(&setup, &format!("other-{other}"), n.min(1_000)).await;
    }
    let filled = fill(&setup, "bench", n).await;
    setup.close().await.unwrap();
    (SqliteSaver::open(path).await.unwrap(), filled)
}

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("sqlite");
    group.sample_size(20);
    // SQLITE_BENCH_SIZES=10,1000 runs a subset
    let sizes: Vec<usize> = std::env::var("SQLITE_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| SIZES.to_vec());
    for n in sizes {
        let (saver, f) = rt.block_on(fixture(&dir.path().join(format!("bench-{n}.sqlite")), n));
        let saver = Arc::new(saver);
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, n as i64);
        let latest_cfg = CheckpointConfig::new("bench");
        let by_id = CheckpointConfig::new("bench").with_checkpoint_id(&f.middle_id);
        // writes go to a checkpoint of their own (writes may precede their
        // checkpoint), so the reads below do not carry the bench's writes
        let writes_cfg = CheckpointConfig::new("bench").with_checkpoint_id(checkpointer::id::checkpoint_id(0));
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
        group.bench_with_input(BenchmarkId::new("put_x8_concurrent", n), &n, |b, _| {
            b.to_async(&rt).iter_custom(|iters| {
                let saver = saver.clone();
                let (cp, meta, versions) = (f.latest_checkpoint.clone(), meta.clone(), f.latest_versions.clone());
                async move {
                    let start = std::time::Instant::now();
                    for _ in 0..iters {
                        let puts: Vec<_> = (0..8)
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
                    start.elapsed() / 8
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
        rt.block_on(saver.close()).unwrap();
    }
    group.finish();
}

criterion_group!(sqlite, benches);
criterion_main!(sqlite);
