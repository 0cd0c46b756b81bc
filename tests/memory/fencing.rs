//! Fencing on `InMemorySaver` (`tests/support/fencing.rs`): the store is
//! the process, so "two connections" are two handles of one saver. The
//! single-store scenarios are conformance checks (`conformance::fencing`).

use std::sync::Arc;
use std::time::Duration;

use checkpointer::InMemorySaver;

use crate::fencing_support as fencing;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_stale_owner_races_new_owner() {
    let store = InMemorySaver::new();
    fencing::stale_owner_races_new_owner(&store, &store, 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_lease_expires_and_is_taken_over() {
    let store = InMemorySaver::new();
    fencing::lease_expires_and_is_taken_over(&store, &store, Duration::from_millis(300), Duration::from_millis(100))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_ownership_is_the_stores() {
    let store = Arc::new(InMemorySaver::new());
    fencing::ownership_is_the_stores(store.as_ref(), store.as_ref()).await;
}

crate::maintained!(InMemorySaver);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_maintenance_is_fenced() {
    let store = InMemorySaver::new();
    fencing::maintenance_is_fenced(&store, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_purge_leases_of_deleted_threads() {
    fencing::purge_leases_of_deleted_threads(&InMemorySaver::new()).await;
}
