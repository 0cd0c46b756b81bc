//! The background TTL sweeper, on any store that runs one: expired items go
//! without a call, in slices, and the task ends when the store is dropped
//! (or stopped). Shared by the memory and SQLite test binaries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::store::{Namespace, Op, PutOp, Store, StoreExt, Ttl, TtlSweeper};
use serde_json::json;

/// The namespace the sweeper checks write under.
pub fn sweep_namespace() -> Namespace {
    Namespace::new(["sweep"]).unwrap()
}

/// Puts `expired` items with a TTL of 0 minutes and one that never
/// expires, in one batch; waits (at most 30 s) until the store's sweeper has
/// deleted them without being called; returns its handle.
pub async fn swept_without_a_call(store: &Arc<dyn Store>, expired: usize) -> TtlSweeper {
    let sweeper = store.sweeper().expect("the builder started a sweeper");
    assert!(sweeper.is_running());
    let ns = sweep_namespace();
    let mut ops: Vec<Op> = (0..expired)
        .map(|i| Op::Put(PutOp::new(ns.clone(), format!("k{i}"), json!({"i": i})).ttl(Ttl::Minutes(0.0))))
        .collect();
    ops.push(Op::Put(
        PutOp::new(ns.clone(), "live", json!({"i": -1})).ttl(Ttl::Never),
    ));
    store.batch(ops).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while sweeper.swept() < expired as u64 {
        assert!(
            Instant::now() < deadline,
            "swept {} of {expired} in 30 s: {sweeper:?}",
            sweeper.swept()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(sweeper.swept(), expired as u64);
    // nothing left for a sweep to do, the live item kept
    assert_eq!(store.sweep_ttl().await.unwrap(), 0);
    assert!(store.get(&ns, "live").await.unwrap().is_some());
    sweeper
}

/// Drops the last reference to the store: the sweeper ends (within 5 s,
/// though its interval is longer).
pub async fn ends_on_drop(store: Arc<dyn Store>) {
    let sweeper = store.sweeper().expect("a sweeper");
    assert!(sweeper.is_running());
    drop(store);
    tokio::time::timeout(Duration::from_secs(5), sweeper.stopped())
        .await
        .expect("the sweeper ended with its store")
        .unwrap();
    assert!(!sweeper.is_running());
}

/// `stop()` ends the task; the store goes on without it.
pub async fn stops_when_asked(store: Arc<dyn Store>) {
    let sweeper = store.sweeper().expect("a sweeper");
    sweeper.stop();
    tokio::time::timeout(Duration::from_secs(5), sweeper.stopped())
        .await
        .expect("the sweeper stopped")
        .unwrap();
    assert!(!sweeper.is_running());
    let ns = sweep_namespace();
    store
        .put_op(PutOp::new(ns.clone(), "after", json!({})).ttl(Ttl::Minutes(0.0)))
        .await
        .unwrap();
    tokio::time::sleep(sweeper.interval() * 3).await;
    assert_eq!(store.sweep_ttl().await.unwrap(), 1, "a stopped sweeper swept");
}
