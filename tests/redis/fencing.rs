//! Fencing on `RedisSaver` (`tests/support/fencing.rs`; the single-store
//! scenarios are conformance checks, `conformance::fencing`, run on the
//! server and the cluster): two savers with
//! connections of their own on one prefix are two processes' writers, on
//! one server and on the Redis Cluster; the lease is one more key of the
//! thread's slot, which deletes and TTLs leave alone.

use std::time::Duration;

use checkpointer::fence::Fence;
use checkpointer::redis::{key_slot, RedisSaver};
use checkpointer::TtlConfig;
use checkpointer::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource};

use crate::fencing_support as fencing;
use crate::harness;
use crate::{cluster_support, redis_support};

async fn two() -> (String, RedisSaver, RedisSaver) {
    let prefix = redis_support::fresh_prefix();
    let a = redis_support::saver_on(prefix.clone()).await;
    let b = redis_support::saver_on(prefix.clone()).await;
    (prefix, a, b)
}

#[cfg(feature = "conformance")]
async fn fencing_two_writers_one_lineage() {
    let (prefix, a, b) = two().await;
    checkpointer::conformance::fencing::two_writers_race(&a, &b, 20)
        .await
        .unwrap();
    redis_support::cleanup(&prefix).await;
}

async fn fencing_stale_owner_races_new_owner() {
    let (prefix, a, b) = two().await;
    fencing::stale_owner_races_new_owner(&a, &b, 20).await;
    redis_support::cleanup(&prefix).await;
}

async fn fencing_lease_expires_and_is_taken_over() {
    let (prefix, a, b) = two().await;
    fencing::lease_expires_and_is_taken_over(&a, &b, Duration::from_millis(400), Duration::from_millis(150)).await;
    redis_support::cleanup(&prefix).await;
}

async fn fencing_ownership_is_the_stores() {
    let (prefix, a, reopened) = two().await;
    fencing::ownership_is_the_stores(&a, &reopened).await;
    redis_support::cleanup(&prefix).await;
}

crate::maintained!(RedisSaver);

async fn fencing_maintenance_is_fenced() {
    let (prefix, a, b) = two().await;
    fencing::maintenance_is_fenced(&a, &b).await;
    redis_support::cleanup(&prefix).await;
}

async fn fencing_purge_leases_of_deleted_threads() {
    let (prefix, a, _) = two().await;
    fencing::purge_leases_of_deleted_threads(&a).await;
    redis_support::cleanup(&prefix).await;
}

/// The lease is `B:lease`, in the thread's slot; a fenced delete removes
/// the thread's keys and keeps it; a TTL gives it no deadline, and a
/// refused put stores no value either.
async fn fencing_lease_key_is_the_threads_and_outlives_it() {
    let prefix = redis_support::fresh_prefix();
    let store = RedisSaver::builder()
        .url(redis_support::url())
        .key_prefix(prefix.clone())
        .ttl(TtlConfig::new(Duration::from_secs(600)))
        .open()
        .await
        .unwrap();
    let a = store.fenced(Fence::new("a", Duration::from_secs(30))).unwrap();
    let b = store.fenced(Fence::new("b", Duration::from_secs(30))).unwrap();
    let thread = "lease{:}thread";
    a.acquire(thread).await.unwrap();
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("big".into(), vec![1i64, 2, 3].into());
    cp.channel_versions
        .insert("big".into(), a.get_next_version(None).unwrap());
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let stored = a
        .put(&CheckpointConfig::new(thread), &cp, &meta, &cp.channel_versions)
        .await
        .unwrap();
    let keys = redis_support::keys_of(&prefix).await;
    let lease: Vec<&Vec<u8>> = keys.iter().filter(|k| k.ends_with(b":lease")).collect();
    assert_eq!(lease.len(), 1, "{keys:?}");
    let data: Vec<&Vec<u8>> = keys.iter().filter(|k| k.ends_with(b":ck")).collect();
    assert_eq!(
        key_slot(lease[0]),
        key_slot(data[0]),
        "the lease shares the thread's slot"
    );
    let bl: Vec<u8> = data[0][..data[0].len() - 3].iter().chain(b":bl").copied().collect();
    let mut c = redis_support::connection().await.unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(lease[0]).query_async(&mut c).await.unwrap();
    assert_eq!(ttl, -1, "the lease has no deadline");
    let blobs: i64 = redis::cmd("HLEN").arg(&bl).query_async(&mut c).await.unwrap();
    // b's refused put carries a value of a new version: not stored
    let mut other = cp.clone();
    other.id = checkpointer::id::checkpoint_id(1);
    other
        .channel_versions
        .insert("big".into(), b.get_next_version(None).unwrap());
    assert!(b.put(&stored, &other, &meta, &other.channel_versions).await.is_err());
    let after: i64 = redis::cmd("HLEN").arg(&bl).query_async(&mut c).await.unwrap();
    assert_eq!(blobs, after, "a refused put stored a value");
    a.delete_thread(thread).await.unwrap();
    let keys = redis_support::keys_of(&prefix).await;
    let thread_keys: Vec<String> = keys
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .filter(|k| k.contains(":v2:{"))
        .collect();
    assert_eq!(thread_keys.len(), 1, "only the lease is left: {thread_keys:?}");
    assert!(thread_keys[0].ends_with(":lease"));
    redis_support::cleanup(&prefix).await;
}

async fn cluster_two() -> (String, RedisSaver, RedisSaver) {
    let prefix = cluster_support::fresh_prefix();
    let a = cluster_support::saver_on(prefix.clone()).await;
    let b = cluster_support::saver_on(prefix.clone()).await;
    (prefix, a, b)
}

async fn cluster_fencing_two_writers_one_lineage() {
    let (prefix, a, b) = cluster_two().await;
    #[cfg(feature = "conformance")]
    checkpointer::conformance::fencing::two_writers_race(&a, &b, 10)
        .await
        .unwrap();
    fencing::stale_owner_races_new_owner(&a, &b, 10).await;
    cluster_support::cleanup(&prefix).await;
}

async fn cluster_fencing_lease_expires_and_is_taken_over() {
    let (prefix, a, b) = cluster_two().await;
    fencing::lease_expires_and_is_taken_over(&a, &b, Duration::from_millis(400), Duration::from_millis(150)).await;
    fencing::maintenance_is_fenced(&a, &b).await;
    fencing::purge_leases_of_deleted_threads(&a).await;
    cluster_support::cleanup(&prefix).await;
}

type Body = fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

pub(crate) fn tests() -> Vec<harness::Trial> {
    let on_server: Vec<(&str, Body)> = vec![
        #[cfg(feature = "conformance")]
        ("fencing::fencing_two_writers_one_lineage", || {
            Box::pin(fencing_two_writers_one_lineage())
        }),
        ("fencing::fencing_purge_leases_of_deleted_threads", || {
            Box::pin(fencing_purge_leases_of_deleted_threads())
        }),
        ("fencing::fencing_maintenance_is_fenced", || {
            Box::pin(fencing_maintenance_is_fenced())
        }),
        ("fencing::fencing_stale_owner_races_new_owner", || {
            Box::pin(fencing_stale_owner_races_new_owner())
        }),
        ("fencing::fencing_lease_expires_and_is_taken_over", || {
            Box::pin(fencing_lease_expires_and_is_taken_over())
        }),
        ("fencing::fencing_ownership_is_the_stores", || {
            Box::pin(fencing_ownership_is_the_stores())
        }),
        ("fencing::fencing_lease_key_is_the_threads_and_outlives_it", || {
            Box::pin(fencing_lease_key_is_the_threads_and_outlives_it())
        }),
    ];
    let mut out: Vec<harness::Trial> = on_server
        .into_iter()
        .map(|(name, body)| harness::tokio(name, &[&crate::REDIS], 2, body))
        .collect();
    out.push(harness::tokio(
        "fencing::cluster_fencing_two_writers_one_lineage",
        &[&crate::CLUSTER],
        2,
        cluster_fencing_two_writers_one_lineage,
    ));
    out.push(harness::tokio(
        "fencing::cluster_fencing_lease_expires_and_is_taken_over",
        &[&crate::CLUSTER],
        2,
        cluster_fencing_lease_expires_and_is_taken_over,
    ));
    out
}
