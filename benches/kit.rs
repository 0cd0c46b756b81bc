//! Criterion benches of the runtime kit at n and 10 n channels: one
//! super-step (`thread::apply_writes`) of n tasks, each woken by its own
//! trigger and writing its own channel, and `Thread::update_state` of an
//! n-key update over an in-memory saver. Each must grow O(n log n): about
//! 10-12x from n to 10 n, never 100x.
//!
//! ```sh
//! cargo bench -p checkpointer-benches --all-features --bench kit
//! KIT_BENCH_SIZES=10000,100000 cargo bench -p checkpointer-benches --all-features --bench kit -- --warm-up-time 2 --measurement-time 10
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::thread::{apply_writes, next_tasks, TaskWrites, BRANCH_TO};
use checkpointer::version::next_version;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};

/// The sizes measured: `KIT_BENCH_SIZES` (comma-separated), by default
/// 1 000, 10 000 and 100 000.
fn sizes() -> Vec<usize> {
    std::env::var("KIT_BENCH_SIZES")
        .unwrap_or_else(|_| "1000,10000,100000".to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// An input checkpoint holding n triggers, its metadata and its next tasks.
fn input(n: usize) -> (Checkpoint, Vec<TaskState>) {
    let mut step = StepCheckpoint::first(-1);
    for i in 0..n {
        step.write(&format!("{BRANCH_TO}n{i:06}"), Value::Nil, next_version)
            .expect("a first version");
    }
    let cp = step.into_checkpoint();
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let tasks = next_tasks(&cp, "", &meta, &[]).expect("uuid ids");
    (cp, tasks)
}

fn step(c: &mut Criterion) {
    let mut group = c.benchmark_group("kit/apply_writes");
    group.sample_size(10);
    for n in sizes() {
        let (parent, tasks) = input(n);
        let writes: Vec<Vec<(String, Value)>> = (0..n)
            .map(|i| vec![(format!("k{i:06}"), Value::from(i as i64))])
            .collect();
        let done: Vec<TaskWrites<'_>> = tasks
            .iter()
            .zip(&writes)
            .map(|(t, w)| TaskWrites {
                node: &t.name,
                triggers: &t.triggers,
                writes: w,
            })
            .collect();
        let v = next_version(parent.max_version()).expect("continues");
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let step = apply_writes(&parent, 0, &done, &v, None).expect("applies");
                // what put stores: the sealed checkpoint
                step.checkpoint().updated_channels.as_ref().map(|u| u.len())
            })
        });
    }
    group.finish();
}

fn update_state(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("kit/update_state");
    group.sample_size(10);
    for n in sizes() {
        let update: BTreeMap<String, i64> = (0..n).map(|i| (format!("k{i:06}"), i as i64)).collect();
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || {
                    // a fresh saver with an input checkpoint, so the writes are stored too
                    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
                    let t = Thread::new(saver, "t");
                    rt.block_on(t.put_input(None, Value::map([("k000000", Value::from(-1))]), None))
                        .expect("stored");
                    t
                },
                |t| rt.block_on(t.update_state(&update, "agent")).expect("updated"),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// A floor for comparison, no kit code: what any step of n channels does at
/// least (copy the parent's n values, insert n new channels into a map and
/// a hash set, sort n names), so its growth from n to 10 n shows what the
/// memory hierarchy alone adds.
fn baseline(c: &mut Criterion) {
    let mut group = c.benchmark_group("kit/baseline");
    group.sample_size(10);
    for n in sizes() {
        let parent: indexmap::IndexMap<String, Value> =
            (0..n).map(|i| (format!("{BRANCH_TO}n{i:06}"), Value::Nil)).collect();
        let names: Vec<String> = (0..n).rev().map(|i| format!("k{i:06}")).collect();
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let mut values = parent.clone();
                let mut seen = std::collections::HashSet::new();
                for (i, name) in names.iter().enumerate() {
                    values.insert(name.clone(), Value::from(i as i64));
                    seen.insert(name.clone());
                }
                let mut sorted: Vec<String> = names.clone();
                sorted.sort_unstable();
                (values.len(), seen.len(), sorted.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, step, update_state, baseline);
criterion_main!(benches);
