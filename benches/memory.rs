//! Criterion benches for `InMemorySaver`: the cost of each operation at
//! 10, 1 000 and 10 000 checkpoints per thread.
//!
//! `cargo bench --bench memory`
//!
//! `put_writes_one_call/{100000,1000000}`: one `put_writes` of that many
//! writes into an empty saver (a fresh one per iteration), the call LangGraph
//! never makes but a caller can: it must stay O(k log k), and the store lock
//! is not held while it builds the set (see `src/memory/tests.rs`).
//!
//! Every thread holds a state of a 20-message list (~200 B per message, a new
//! version per checkpoint) and two scalar channels, and a few other threads
//! exist so that per-thread costs are not mistaken for whole-store costs.
//! `put` re-puts the latest checkpoint (same id, same versions), so the
//! history length stays what the bench says it is.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, InMemorySaver, ListOptions, Value,
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

/// A filled thread: what the benches address.
struct Filled {
    latest: CheckpointConfig,
    latest_checkpoint: Checkpoint,
    latest_versions: ChannelVersions,
    middle_id: String,
}

async fn fill(saver: &InMemorySaver, thread: &str, n: usize) -> Filled {
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
    let (latest_parent, latest_checkpoint, latest_versions) = last.unwrap();
    Filled {
        latest: latest_parent,
        latest_checkpoint,
        latest_versions,
        middle_id,
    }
}

struct Fixture {
    saver: Arc<InMemorySaver>,
    thread: String,
    filled: Filled,
}

async fn fixture(n: usize) -> Fixture {
    let saver = InMemorySaver::new();
    for other in 0..3 {
        fill(&saver, &format!("other-{other}"), n.min(1_000)).await;
    }
    let filled = fill(&saver, "bench", n).await;
    Fixture {
        saver: Arc::new(saver),
        thread: "bench".to_owned(),
        filled,
    }
}

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let mut group = c.benchmark_group("memory");
    group.sample_size(20);
    for n in SIZES {
        let f = rt.block_on(fixture(n));
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, n as i64);
        let latest_cfg = CheckpointConfig::new(&f.thread);
        let by_id = CheckpointConfig::new(&f.thread).with_checkpoint_id(&f.filled.middle_id);
        let writes = vec![
            ("messages".to_owned(), message(99)),
            ("step".to_owned(), Value::from(1)),
        ];

        group.bench_with_input(BenchmarkId::new("put", n), &n, |b, _| {
            b.to_async(&rt).iter(|| async {
                f.saver
                    .put(
                        &f.filled.latest,
                        &f.filled.latest_checkpoint,
                        &meta,
                        &f.filled.latest_versions,
                    )
                    .await
                    .unwrap()
            })
        });
        // Each iteration writes a task's two writes against its own checkpoint
        // id (writes may precede their checkpoint), so no checkpoint collects
        // more writes than a real super-step makes and the reads below see
        // the thread as it was filled.
        let mut task = 0u64;
        group.bench_with_input(BenchmarkId::new("put_writes", n), &n, |b, _| {
            b.to_async(&rt).iter_batched(
                || {
                    task += 1;
                    CheckpointConfig::new(&f.thread).with_checkpoint_id(format!("pending-{task:012}"))
                },
                |cfg| {
                    let saver = &f.saver;
                    let writes = &writes;
                    async move { saver.put_writes(&cfg, writes, "task", "").await.unwrap() }
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_with_input(BenchmarkId::new("get_tuple_latest", n), &n, |b, _| {
            b.to_async(&rt)
                .iter(|| async { black_box(f.saver.get_tuple(&latest_cfg).await.unwrap()) })
        });
        group.bench_with_input(BenchmarkId::new("get_tuple_by_id", n), &n, |b, _| {
            b.to_async(&rt)
                .iter(|| async { black_box(f.saver.get_tuple(&by_id).await.unwrap()) })
        });
        group.bench_with_input(BenchmarkId::new("list_limit_10", n), &n, |b, _| {
            b.to_async(&rt).iter(|| async {
                black_box(
                    f.saver
                        .list_vec(Some(latest_cfg.clone()), ListOptions::default().limit(10))
                        .await
                        .unwrap(),
                )
            })
        });
        let mut victim = 0u64;
        group.bench_with_input(BenchmarkId::new("delete_thread", n), &n, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    victim += 1;
                    let thread = format!("victim-{victim}");
                    rt.block_on(fill(&f.saver, &thread, n));
                    let start = Instant::now();
                    rt.block_on(f.saver.delete_thread(&thread)).unwrap();
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();

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

criterion_group!(memory, benches);
criterion_main!(memory);
