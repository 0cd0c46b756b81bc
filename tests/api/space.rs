//! [`SaverAdmin::space_usage`] and [`SaverAdmin::reclaim_space`] against
//! the real stores: a SQLite file this crate creates shrinks in bounded
//! steps after deletes (freelist 0, WAL truncated); a file without
//! incremental auto-vacuum (as Python's `SqliteSaver` creates) keeps its
//! freelist unless rewritten; PostgreSQL reports each table with its TOAST
//! and indexes and vacuums without growing; Redis memory drops when threads
//! go. What is kept reads back after every reclaim.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]

use std::sync::Arc;

use crate::harness;
use crate::postgres_support;
use crate::redis_support;

use checkpointer::import::{ImportMode, ImportedCheckpoint, ImportedWrite, ThreadImport};
use checkpointer::space::{ReclaimOptions, SpaceUsage};
use checkpointer::{
    Checkpoint, CheckpointMetadata, CheckpointSaverExt, CheckpointSource, Error, OpenOptions, SaverAdmin, Value,
};

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "space::sqlite_reclaim_shrinks_a_file_in_steps",
            &[],
            2,
            sqlite_reclaim_shrinks_a_file_in_steps,
        ),
        harness::tokio(
            "space::sqlite_without_incremental_vacuum_needs_a_rewrite",
            &[],
            2,
            sqlite_without_incremental_vacuum_needs_a_rewrite,
        ),
        harness::tokio(
            "space::postgres_reports_tables_with_toast_and_vacuums",
            &[&crate::POSTGRES],
            2,
            postgres_reports_tables_with_toast_and_vacuums,
        ),
        harness::tokio(
            "space::redis_memory_drops_when_threads_go",
            &[&crate::REDIS],
            2,
            redis_memory_drops_when_threads_go,
        ),
        harness::tokio(
            "space::options_a_store_cannot_honour_are_refused",
            &[&crate::POSTGRES, &crate::REDIS],
            2,
            refused,
        ),
    ]
}

/// `n` bytes of hex that no compressor shrinks much (an LCG's digits).
fn noise(seed: u64, n: usize) -> String {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            char::from(b"0123456789abcdef"[usize::try_from(x >> 60).unwrap_or(0)])
        })
        .collect()
}

/// A thread of `steps` checkpoints, each with a 6 KB list value and a write.
fn thread(id: &str, steps: usize) -> ThreadImport {
    let mut checkpoints = Vec::new();
    let mut parent: Option<String> = None;
    for step in 0..steps {
        let mut cp = Checkpoint::new(i64::try_from(step).unwrap());
        let seed = u64::try_from(step).unwrap() + u64::from(id.bytes().map(u32::from).sum::<u32>()) * 1000;
        // a list: PostgreSQL keeps it in `checkpoint_blobs` (a string stays inline)
        cp.channel_values
            .insert("doc".into(), Value::from(vec![Value::from(noise(seed, 6000))]));
        cp.channel_versions.insert(
            "doc".into(),
            checkpointer::ChannelVersion::Int(i64::try_from(step).unwrap() + 1),
        );
        let id_now = cp.id.clone();
        checkpoints.push(ImportedCheckpoint {
            checkpoint_ns: String::new(),
            parent_checkpoint_id: parent.replace(id_now),
            checkpoint: cp,
            metadata: CheckpointMetadata::new(CheckpointSource::Loop, i64::try_from(step).unwrap()),
            writes: vec![ImportedWrite {
                task_id: format!("task-{step}"),
                task_path: String::new(),
                idx: 0,
                channel: "doc".into(),
                value: Value::from(noise(seed + 7, 500)),
            }],
        });
    }
    ThreadImport {
        thread_id: id.to_owned(),
        checkpoints,
    }
}

/// Fills `store` with threads `t0..tN`, deletes all but `t0`, and gives the
/// usage before the deletes and after them.
async fn fill_and_delete(store: &Arc<dyn SaverAdmin>, threads: usize, steps: usize) -> (SpaceUsage, SpaceUsage) {
    for t in 0..threads {
        store
            .import_thread(&thread(&format!("t{t}"), steps), ImportMode::Replace)
            .await
            .unwrap();
    }
    let full = store.space_usage().await.unwrap().expect("a size");
    let saver = store.saver();
    for t in 1..threads {
        saver.delete_thread(&format!("t{t}")).await.unwrap();
    }
    (full, store.space_usage().await.unwrap().expect("a size"))
}

/// `t0` reads back whole.
async fn kept(store: &Arc<dyn SaverAdmin>, steps: usize) {
    let saver = store.saver();
    let latest = saver.latest("t0").await.unwrap().expect("t0 kept");
    assert_eq!(
        latest.checkpoint.channel_values["doc"],
        thread("t0", steps).checkpoints[steps - 1].checkpoint.channel_values["doc"]
    );
    let history = saver
        .list_vec(Some(checkpointer::CheckpointConfig::new("t0")), Default::default())
        .await
        .unwrap();
    assert_eq!(history.len(), steps);
    assert!(saver.latest("t1").await.unwrap().is_none());
}

async fn sqlite_reclaim_shrinks_a_file_in_steps() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("space.sqlite");
    let url = format!("sqlite://{}", file.display());
    let store = OpenOptions::new().open(&url).await.unwrap();
    let (full, deleted) = fill_and_delete(&store, 8, 40).await;
    let free = deleted.part("database").and_then(|p| p.reclaimable_bytes).unwrap();
    assert!(free > 0, "deletes leave free pages: {deleted:?}");
    assert!(deleted.reclaimable_bytes.unwrap() >= free);
    // small steps: several of them
    let report = store.reclaim_space(ReclaimOptions::new().step_pages(16)).await.unwrap();
    assert!(report.steps > 1, "{report:?}");
    let after = report.after.clone().unwrap();
    assert_eq!(after.part("database").unwrap().reclaimable_bytes, Some(0), "{report:?}");
    assert_eq!(after.part("wal").unwrap().bytes, 0, "{report:?}");
    assert!(after.bytes < full.bytes, "{full:?} -> {after:?}");
    assert!(report.freed_bytes().unwrap() > 0, "{report:?}");
    let on_disk = std::fs::metadata(&file).unwrap().len();
    assert_eq!(on_disk, after.part("database").unwrap().bytes);
    assert!(on_disk < full.part("database").unwrap().bytes.max(full.bytes));
    kept(&store, 40).await;
    // nothing left: a second reclaim runs no step
    let again = store.reclaim_space(ReclaimOptions::new()).await.unwrap();
    assert_eq!(again.steps, 0, "{again:?}");
    store.close().await.unwrap();
    // the file is incremental for Python's saver too: only a header flag
    let conn = rusqlite::Connection::open(&file).unwrap();
    let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, 2);
    // read-only: refused
    let ro = OpenOptions::new().read_only(true).open(&url).await.unwrap();
    let e = ro.reclaim_space(ReclaimOptions::new()).await.unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
}

async fn sqlite_without_incremental_vacuum_needs_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("python.sqlite");
    // Python's SqliteSaver creates its tables in a plain file
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', \
             checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB, \
             PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)); \
             CREATE TABLE IF NOT EXISTS writes (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', \
             checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, task_path TEXT NOT NULL DEFAULT '', idx INTEGER NOT NULL, \
             channel TEXT NOT NULL, type TEXT, value BLOB, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));",
        )
        .unwrap();
    let url = format!("sqlite://{}", file.display());
    let store = OpenOptions::new().open(&url).await.unwrap();
    let (_, deleted) = fill_and_delete(&store, 6, 30).await;
    let free = deleted.part("database").unwrap().reclaimable_bytes.unwrap();
    assert!(free > 0);
    let report = store.reclaim_space(ReclaimOptions::new()).await.unwrap();
    assert_eq!(report.steps, 0, "{report:?}");
    assert!(report.actions[0].contains("rewrite"), "{report:?}");
    assert_eq!(
        report
            .after
            .as_ref()
            .unwrap()
            .part("database")
            .unwrap()
            .reclaimable_bytes,
        Some(free)
    );
    let report = store.reclaim_space(ReclaimOptions::new().rewrite(true)).await.unwrap();
    assert_eq!(report.steps, 1, "{report:?}");
    let after = report.after.clone().unwrap();
    assert_eq!(after.part("database").unwrap().reclaimable_bytes, Some(0), "{report:?}");
    assert!(after.bytes < deleted.bytes, "{deleted:?} -> {after:?}");
    kept(&store, 30).await;
    store.close().await.unwrap();
    let conn = rusqlite::Connection::open(&file).unwrap();
    let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, 2, "the rewrite switched the file to incremental auto-vacuum");
}

async fn postgres_reports_tables_with_toast_and_vacuums() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let store = OpenOptions::new().open(&postgres_support::url_of(&db.0)).await.unwrap();
    let (full, deleted) = fill_and_delete(&store, 6, 30).await;
    let names: Vec<&str> = full.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "checkpoints",
            "checkpoint_blobs",
            "checkpoint_writes",
            "checkpoint_migrations"
        ]
    );
    let blobs = full.part("checkpoint_blobs").unwrap();
    assert!(blobs.toast_bytes > 0, "6 KB values go to TOAST: {blobs:?}");
    assert!(blobs.index_bytes > 0 && blobs.table_bytes > 0, "{blobs:?}");
    assert!(
        blobs.bytes >= blobs.table_bytes + blobs.toast_bytes + blobs.index_bytes,
        "{blobs:?}"
    );
    let size = store.storage_size().await.unwrap().unwrap();
    assert_eq!(deleted.bytes, size.bytes, "the parts sum to storage_size");
    let report = store.reclaim_space(ReclaimOptions::new()).await.unwrap();
    assert_eq!(report.steps, 3, "{report:?}");
    assert!(
        report.actions.iter().any(|a| a == "VACUUM checkpoint_blobs"),
        "{report:?}"
    );
    let after = report.after.clone().unwrap();
    assert!(
        after.bytes <= deleted.bytes,
        "a vacuum never grows the store: {deleted:?} -> {after:?}"
    );
    kept(&store, 30).await;
    // the space is reused: the same threads again take no more than before
    for t in 1..6 {
        store
            .import_thread(&thread(&format!("t{t}"), 30), ImportMode::Replace)
            .await
            .unwrap();
    }
    let refilled = store.space_usage().await.unwrap().unwrap();
    let toast = |u: &SpaceUsage| u.part("checkpoint_blobs").unwrap().toast_bytes;
    // (without reuse it would grow by five sixths; an eighth of slack for
    // the free space map's granularity)
    assert!(
        toast(&refilled) <= toast(&deleted) + toast(&deleted) / 8,
        "{deleted:?} -> {refilled:?}"
    );
    store.close().await.unwrap();
}

async fn redis_memory_drops_when_threads_go() {
    let prefix = redis_support::fresh_prefix();
    let url = format!("{}?prefix={prefix}", redis_support::url());
    let store = OpenOptions::new().open(&url).await.unwrap();
    let (full, deleted) = fill_and_delete(&store, 6, 20).await;
    assert!(full.in_memory);
    assert!(deleted.bytes < full.bytes / 2, "{full:?} -> {deleted:?}");
    let report = store.reclaim_space(ReclaimOptions::new()).await.unwrap();
    assert!(report.after.unwrap().bytes <= deleted.bytes);
    kept(&store, 20).await;
    store.close().await.unwrap();
}

async fn refused() {
    let memory = OpenOptions::new().open("memory:").await.unwrap();
    let report = memory.reclaim_space(ReclaimOptions::new()).await.unwrap();
    assert_eq!((report.before, report.steps), (None, 0));
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let redis = format!("{}?prefix={}", redis_support::url(), redis_support::fresh_prefix());
    for url in ["memory:".to_owned(), postgres_support::url_of(&db.0), redis] {
        let store = OpenOptions::new().open(&url).await.unwrap();
        let e = store
            .reclaim_space(ReclaimOptions::new().rewrite(true))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidInput { reason } if reason.contains("rewrite")),
            "{url}: {e:?}"
        );
    }
}
