//! Fencing on `SqliteSaver` (`tests/support/fencing.rs`): two savers on one
//! file are two writers as two processes would be (each its own writer
//! thread and connections; the file's lock orders their transactions).

use std::time::Duration;

use checkpointer::sqlite::SqliteSaver;

use crate::fencing_support as fencing;

async fn two_savers() -> (tempfile::TempDir, SqliteSaver, SqliteSaver) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fenced.db");
    let a = SqliteSaver::open(&path).await.unwrap();
    let b = SqliteSaver::open(&path).await.unwrap();
    (dir, a, b)
}

#[cfg(feature = "conformance")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_two_writers_one_lineage() {
    let (_dir, a, b) = two_savers().await;
    checkpointer::conformance::fencing::two_writers_race(&a, &b, 20)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_stale_owner_races_new_owner() {
    let (_dir, a, b) = two_savers().await;
    fencing::stale_owner_races_new_owner(&a, &b, 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_lease_expires_and_is_taken_over() {
    let (_dir, a, b) = two_savers().await;
    fencing::lease_expires_and_is_taken_over(&a, &b, Duration::from_millis(400), Duration::from_millis(150)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_ownership_is_the_stores() {
    let (dir, a, _b) = two_savers().await;
    let path = dir.path().join("fenced.db");
    // the first saver keeps its connections; a saver opened anew is the
    // writer's restart
    let reopened = SqliteSaver::open(&path).await.unwrap();
    fencing::ownership_is_the_stores(&a, &reopened).await;
}

crate::maintained!(SqliteSaver);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_maintenance_is_fenced() {
    let (_dir, a, b) = two_savers().await;
    fencing::maintenance_is_fenced(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_purge_leases_of_deleted_threads() {
    let (_dir, a, _b) = two_savers().await;
    fencing::purge_leases_of_deleted_threads(&a).await;
}

/// The lease lives in a side table Python's savers never read; the tables
/// Python reads keep their shape.
#[cfg(feature = "conformance")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_leaves_pythons_tables_alone() {
    let (dir, a, _b) = two_savers().await;
    let before = tables(&dir.path().join("fenced.db"));
    checkpointer::conformance::fencing::fencing_owner_writes_freely(&a)
        .await
        .unwrap();
    let after = tables(&dir.path().join("fenced.db"));
    let added: Vec<_> = after.iter().filter(|t| !before.contains(t)).cloned().collect();
    assert_eq!(added.len(), 1, "{added:?}");
    assert!(added[0].starts_with("CREATE TABLE checkpointer_leases"), "{added:?}");
    for t in &before {
        assert!(after.contains(t), "changed: {t}");
    }
}

#[cfg(feature = "conformance")]
fn tables(path: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Fenced writes and atomic steps are jobs of the writer's group commit
/// like any write: writers at once, each on its own thread (one in four has
/// lost its thread to another writer), each a fenced `put`, `put_writes`
/// and atomic step per round. The stale writers' jobs are refused alone
/// (`Error::Fenced`, nothing of them stored), every other call succeeds,
/// and the writer committed fewer transactions than it ran jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fencing_group_commit_groups_fenced_writes_and_steps() {
    use std::sync::Arc;

    use checkpointer::fence::{Fence, Fenceable};
    use checkpointer::{
        CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt, CheckpointSource, CheckpointTuple,
        Error, PendingWrite, StepCheckpoint,
    };

    const WRITERS: usize = 16;
    const ROUNDS: i64 = 10;
    let (_dir, store, _b) = two_savers().await;
    let stale = |i: usize| i % 4 == 1;
    let mut writers = Vec::new();
    for i in 0..WRITERS {
        let thread = format!("sg-{i}");
        let w: Arc<dyn Fenceable> = store
            .fenced_saver(Fence::new(format!("w-{i}"), Duration::from_secs(60)))
            .unwrap();
        w.acquire(&thread).await.unwrap();
        if stale(i) {
            assert!(w.release(&thread).await.unwrap());
            let usurper = store
                .fenced_saver(Fence::new(format!("u-{i}"), Duration::from_secs(60)))
                .unwrap();
            usurper.acquire(&thread).await.unwrap();
        }
        writers.push((i, thread, w));
    }
    let before = store.writer_stats();
    let start = Arc::new(tokio::sync::Barrier::new(WRITERS));
    let tasks: Vec<_> = writers
        .into_iter()
        .map(|(i, thread, w)| {
            let start = start.clone();
            tokio::spawn(async move {
                let meta = |n| CheckpointMetadata::new(CheckpointSource::Loop, n);
                let mut first = StepCheckpoint::first(0);
                first.write("n", 0, |v| w.get_next_version(v)).unwrap();
                start.wait().await;
                let mut outcomes = Vec::new();
                let mut parent = match w.put_step(&CheckpointConfig::new(&thread), &first, &meta(0)).await {
                    Ok(t) => t,
                    Err(e) => {
                        outcomes.push(Err(e));
                        CheckpointTuple {
                            config: CheckpointConfig::new(&thread).with_checkpoint_id(first.checkpoint().id.clone()),
                            checkpoint: first.checkpoint().clone(),
                            metadata: meta(0),
                            parent_config: None,
                            pending_writes: Vec::new(),
                        }
                    }
                };
                for n in 1..=ROUNDS {
                    let mut step = parent.checkpoint.successor(n);
                    step.write("n", n, |v| w.get_next_version(v)).unwrap();
                    let writes = [PendingWrite::new("task", "n", n)];
                    let next = if n % 2 == 0 {
                        w.put_step_with_writes(&parent.config, &step, &meta(n), &writes).await
                    } else {
                        outcomes.push(w.put_pending_writes(&parent.config, &writes).await);
                        w.put_step(&parent.config, &step, &meta(n)).await
                    };
                    match next {
                        Ok(t) => parent = t,
                        Err(e) => outcomes.push(Err(e)),
                    }
                }
                (i, thread, outcomes)
            })
        })
        .collect();
    for task in tasks {
        let (i, thread, outcomes) = task.await.unwrap();
        if !stale(i) {
            assert!(outcomes.iter().all(Result::is_ok), "{thread}: {outcomes:?}");
            let latest = store.get_tuple(&CheckpointConfig::new(&thread)).await.unwrap().unwrap();
            assert_eq!(latest.metadata.step(), Some(ROUNDS), "{thread}");
            continue;
        }
        assert_eq!(outcomes.len() as i64, 1 + ROUNDS + ROUNDS / 2, "{thread}");
        for out in outcomes {
            assert!(
                matches!(&out, Err(Error::Fenced { thread_id, writer, .. }) if *thread_id == thread && *writer == format!("w-{i}")),
                "{thread}: {out:?}"
            );
        }
        assert!(
            store
                .get_tuple(&CheckpointConfig::new(&thread))
                .await
                .unwrap()
                .is_none(),
            "{thread}"
        );
    }
    let after = store.writer_stats();
    let (jobs, transactions) = (
        after.requests - before.requests,
        after.transactions - before.transactions,
    );
    assert!(jobs >= (WRITERS as u64) * (1 + ROUNDS as u64 * 3 / 2), "{jobs} jobs");
    assert!(
        transactions < jobs,
        "no two fenced jobs shared a transaction: {jobs} jobs, {transactions} transactions"
    );
}
