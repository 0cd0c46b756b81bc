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
