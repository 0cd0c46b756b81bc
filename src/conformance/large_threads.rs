//! Operations over large threads while another thread is read
//! (`docs/reliability.md`, rows B59–B62): the results are exact and the
//! reads of an unrelated thread keep answering. How long a backend holds a
//! lock is its own business, checked in its tests (`tests/memory`).

use std::sync::atomic::{AtomicBool, Ordering};

use super::identifiers::{put_values, value_of, ID1};
use super::*;
use crate::saver::PruneStrategy;

/// Runs `op` while reads of `other` go on beside it; fails when a read
/// fails or misses `other`.
async fn while_reading<F>(s: &dyn CheckpointSaver, other: &CheckpointConfig, op: F) -> CheckResult
where
    F: std::future::Future<Output = CheckResult>,
{
    let done = AtomicBool::new(false);
    let reads = async {
        while !done.load(Ordering::SeqCst) {
            ensure!(s.get_tuple(other).await?.is_some(), "the other thread vanished");
            tokio::task::yield_now().await;
        }
        Ok(())
    };
    let op = async {
        let result = op.await;
        done.store(true, Ordering::SeqCst);
        result
    };
    let (read, done_op) = futures::join!(reads, op);
    done_op.and(read)
}

/// A chain of `n` checkpoints in a fresh thread (one write every 100), each
/// holding `step`; returns the configs in order.
async fn large_thread(s: &dyn CheckpointSaver, n: usize) -> Result<Vec<CheckpointConfig>, CheckFailure> {
    let mut parent = generate_config(&new_thread_id());
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let step = i64::try_from(i).map_err(|e| CheckFailure::new(e.to_string()))?;
        let mut cp = checkpoint_with(
            &[("step", Value::Int(step))],
            &[("step", ChannelVersion::Int(step + 1))],
        );
        cp.id = format!("1ef00000-0000-6000-8000-{i:012}");
        parent = put_all(s, &parent, &cp, &generate_metadata("loop", step)).await?;
        if i % 100 == 0 {
            put_writes(s, &parent, &[("w", Value::Int(step))], "task", "").await?;
        }
        out.push(parent.clone());
    }
    Ok(out)
}

/// B59: 100 000 writes in one `put_writes` while another thread is read are
/// all stored in index order; the same writes again keep the first values.
pub async fn put_writes_hundred_thousand_while_another_thread_reads(s: &dyn CheckpointSaver) -> CheckResult {
    let n = 100_000i64;
    let other = put_values(s, &generate_config(&new_thread_id()), ID1, &[]).await?;
    let stored = put_values(s, &generate_config(&new_thread_id()), ID1, &[]).await?;
    let writes: Vec<(String, Value)> = (0..n).map(|i| (format!("ch{i}"), Value::Int(i))).collect();
    while_reading(s, &other, async {
        Ok(s.put_writes(&stored, &writes, "task", "").await?)
    })
    .await?;
    let got = get(s, &stored).await?;
    ensure_eq!(got.pending_writes.len(), writes.len(), "writes stored");
    for (i, w) in (0i64..).zip(&got.pending_writes) {
        ensure!(
            w.channel == format!("ch{i}") && w.value == Value::Int(i),
            "write {i} out of index order: {w:?}"
        );
    }
    let again: Vec<(String, Value)> = (0..n).map(|i| (format!("ch{i}"), Value::Int(-1))).collect();
    s.put_writes(&stored, &again, "task", "").await?;
    let got = get(s, &stored).await?;
    ensure_eq!(
        got.pending_writes.len(),
        writes.len(),
        "writes after the same writes again"
    );
    ensure!(
        got.pending_writes.iter().all(|w| w.value != Value::Int(-1)),
        "a repeated write replaced the first value"
    );
    Ok(())
}

/// B60: `delete_for_runs` with 10 001 run ids over one thread of 3 000
/// checkpoints (every other one a victim) removes the victims only; the
/// rest stay in order, other threads untouched.
pub async fn delete_for_runs_in_one_large_thread(s: &dyn CheckpointSaver) -> CheckResult {
    let n = 3_000;
    let t = new_thread_id();
    let (even, odd) = (format!("even-{t}"), format!("odd-{t}"));
    let mut parent = generate_config(&t);
    for i in 0..n {
        let mut cp = generate_checkpoint();
        cp.id = format!("1ef00000-0000-6000-8000-{i:012}");
        let mut meta = generate_metadata("loop", i);
        meta.insert("run_id", if i % 2 == 0 { even.as_str() } else { odd.as_str() });
        parent = put_all(s, &parent, &cp, &meta).await?;
    }
    let bystander = put_chain(s, &generate_config(&new_thread_id()), 3).await?;
    let runs: Vec<String> = (0..10_000).map(|i| format!("run-{i}")).chain([odd]).collect();
    s.delete_for_runs(&runs).await?;
    let left = list(s, Some(generate_config(&t)), ListOptions::default()).await?;
    ensure_eq!(left.len(), 1_500, "checkpoints left");
    ensure!(
        left.iter().all(|c| c.metadata.run_id() == Some(even.as_str())),
        "a victim is left"
    );
    let ids: Vec<&str> = left.iter().map(|c| c.checkpoint.id.as_str()).collect();
    ensure!(ids.windows(2).all(|w| w[0] > w[1]), "newest first");
    ensure_eq!(
        list(
            s,
            Some(generate_config(&bystander[0].thread_id)),
            ListOptions::default()
        )
        .await?
        .len(),
        3,
        "the bystander's checkpoints"
    );
    Ok(())
}

/// B61: `copy_thread` of a thread of 300 checkpoints while another thread is
/// read: the target equals the source (checkpoints, values, writes).
pub async fn copy_thread_of_a_large_thread_while_another_thread_reads(s: &dyn CheckpointSaver) -> CheckResult {
    let n = 300;
    let other = put_values(s, &generate_config(&new_thread_id()), ID1, &[]).await?;
    let src = large_thread(s, n).await?;
    let dst = new_thread_id();
    while_reading(s, &other, async { Ok(s.copy_thread(&src[0].thread_id, &dst).await?) }).await?;
    ensure_eq!(
        list(s, Some(generate_config(&dst)), ListOptions::default())
            .await?
            .len(),
        n,
        "checkpoints copied"
    );
    for i in [0, n / 2, n - 1] {
        let a = get(s, &src[i]).await?;
        let b = get(
            s,
            &CheckpointConfig {
                thread_id: dst.clone(),
                ..src[i].clone()
            },
        )
        .await?;
        ensure_eq!(a.checkpoint, b.checkpoint, "checkpoint {i}");
        ensure_eq!(a.pending_writes, b.pending_writes, "writes of {i}");
    }
    Ok(())
}

/// B62: `prune(KeepLatest)` of a thread of 300 checkpoints while another
/// thread is read leaves only the latest checkpoint, with its values; the
/// other thread untouched.
pub async fn prune_of_a_large_thread_while_another_thread_reads(s: &dyn CheckpointSaver) -> CheckResult {
    let n = 300;
    let other = put_values(s, &generate_config(&new_thread_id()), ID1, &[]).await?;
    let configs = large_thread(s, n).await?;
    let t = configs[0].thread_id.clone();
    let prune = async { Ok(s.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest).await?) };
    while_reading(s, &other, prune).await?;
    let left = list(s, Some(generate_config(&t)), ListOptions::default()).await?;
    ensure_eq!(left.len(), 1, "checkpoints left");
    ensure_eq!(left[0].config, configs[n - 1], "the one left");
    ensure_eq!(value_of(&left[0], "step")?, Value::Int(299), "its value");
    ensure!(s.get_tuple(&configs[0]).await?.is_none(), "the oldest is gone");
    ensure!(s.get_tuple(&other).await?.is_some(), "the other thread is gone");
    Ok(())
}
