//! What every store backend's tests run (a module `store_suite` of the
//! memory, SQLite and PostgreSQL test binaries): the model-based test
//! against the `BTreeMap` oracle, the TTL scenarios with a clock the test
//! moves, and the recorded sequence compared with the in-memory results.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use checkpointer::store::{
    Filter, GetOp, ListNamespacesOp, Namespace, Op, PutOp, SearchOp, Store, StoreExt, Ttl, TtlConfig,
};
use parking_lot::Mutex;
use serde_json::{json, Value};

/// A clock the test moves by hand, and the function a store reads it with.
pub fn manual_clock() -> (Arc<Mutex<SystemTime>>, impl Fn() -> SystemTime + Send + Sync + 'static) {
    let now = Arc::new(Mutex::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)));
    let read = Arc::clone(&now);
    (now, move || *read.lock())
}

/// Moves the clock `minutes` on.
pub fn advance(clock: &Mutex<SystemTime>, minutes: u64) {
    *clock.lock() += Duration::from_secs(minutes * 60);
}

/// The model-based test: `PROPTEST_CASES` (default `default_cases`)
/// random batch sequences on `store`, each under a fresh root, against the
/// oracle, on `rt`.
pub fn matches_the_oracle(store: &dyn Store, default_cases: u32, rt: &tokio::runtime::Runtime) {
    use proptest::test_runner::{Config, TestRunner};
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    runner
        .run(&checkpointer::store::conformance::model::model_batches(), |batches| {
            rt.block_on(checkpointer::store::conformance::model::check_against_oracle(
                store, &batches,
            ))
            .map_err(|f| proptest::test_runner::TestCaseError::fail(f.to_string()))
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// TTLs on a store with `TtlConfig::default()` reading `clock`, alone in
/// its database: expiry after the minutes, reads (gets, searches, inside a
/// batch with a write) restarting the TTL unless asked not to, the sweep.
pub async fn ttl_expires_after_its_minutes_and_reads_refresh_it(store: &dyn Store, clock: &Mutex<SystemTime>) {
    let ns = Namespace::new(["ttl"]).unwrap();
    for key in ["read", "unread", "norefresh", "searched"] {
        store
            .put_op(PutOp::new(ns.clone(), key, json!({"k": key})).ttl(Ttl::Minutes(10.0)))
            .await
            .unwrap();
    }
    advance(clock, 9);
    assert!(store.get(&ns, "read").await.unwrap().is_some());
    let quiet = SearchOp::new(ns.clone()).refresh_ttl(false);
    assert_eq!(store.search(quiet).await.unwrap().len(), 4);
    let filter = Filter::new().eq("k", "searched");
    assert_eq!(
        store
            .search(SearchOp::new(ns.clone()).filter(filter))
            .await
            .unwrap()
            .len(),
        1
    );
    advance(clock, 2); // 11 minutes after the puts, 2 after the refreshing reads
    assert!(
        store.get(&ns, "read").await.unwrap().is_some(),
        "the get restarted its TTL"
    );
    assert!(
        store.get(&ns, "searched").await.unwrap().is_some(),
        "the search restarted its TTL"
    );
    assert!(store.get(&ns, "unread").await.unwrap().is_none(), "expired");
    assert!(
        store.get(&ns, "norefresh").await.unwrap().is_none(),
        "a search with refresh_ttl false did not refresh"
    );
    assert_eq!(
        store.list_namespaces(ListNamespacesOp::default()).await.unwrap(),
        std::slice::from_ref(&ns),
        "the namespace still holds live items"
    );
    assert_eq!(store.sweep_ttl().await.unwrap(), 2);
    assert_eq!(store.sweep_ttl().await.unwrap(), 0);
    advance(clock, 10);
    assert!(
        store.get(&ns, "read").await.unwrap().is_none(),
        "10 minutes after its last read"
    );
    assert!(store
        .list_namespaces(ListNamespacesOp::default())
        .await
        .unwrap()
        .is_empty());
    // the same in a batch with a write: the reads refresh inside its transaction
    store
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "late", json!({})).ttl(Ttl::Minutes(3.0))),
            Op::Get(GetOp::new(ns.clone(), "late")),
        ])
        .await
        .unwrap();
    advance(clock, 2);
    let _ = store.get(&ns, "late").await.unwrap().expect("live");
    advance(clock, 2);
    assert!(store.get(&ns, "late").await.unwrap().is_some(), "refreshed at minute 2");
}

/// The configuration of [`default_ttl_applies_and_refresh_on_read_false_is_kept`].
pub fn five_minutes_no_refresh() -> TtlConfig {
    TtlConfig {
        refresh_on_read: Some(false),
        default_ttl: Some(5.0),
        sweep_interval_minutes: None,
    }
}

/// On a store with [`five_minutes_no_refresh`] reading `clock`: a put
/// without a TTL takes the default, reads do not refresh, `Ttl::Never`
/// never expires.
pub async fn default_ttl_applies_and_refresh_on_read_false_is_kept(store: &dyn Store, clock: &Mutex<SystemTime>) {
    let ns = checkpointer::store::conformance::fresh_namespace(&["ttl"]);
    store.put(&ns, "default", json!({})).await.unwrap();
    store
        .put_op(PutOp::new(ns.clone(), "never", json!({})).ttl(Ttl::Never))
        .await
        .unwrap();
    advance(clock, 4);
    assert!(store.get(&ns, "default").await.unwrap().is_some());
    advance(clock, 2);
    assert!(
        store.get(&ns, "default").await.unwrap().is_none(),
        "refresh_on_read false: the get did not refresh"
    );
    assert!(store.get(&ns, "never").await.unwrap().is_some());
}

/// `ours` equals `memory` (the sequence's results on the in-memory store)
/// but for the order of items without a score (newest first in the SQL
/// stores, insertion order in memory): the ranked items in order, then the
/// others in any order, scores within `f32` rounding.
pub fn assert_same_but_unranked_order(ours: &Value, memory: &Value) {
    let (ours, memory) = (ours.as_array().unwrap(), memory.as_array().unwrap());
    assert_eq!(ours.len(), memory.len());
    for (b, (o, m)) in ours.iter().zip(memory).enumerate() {
        for (i, (x, y)) in o.as_array().unwrap().iter().zip(m.as_array().unwrap()).enumerate() {
            let (Some(xs), Some(ys)) = (x.as_array(), y.as_array()) else {
                assert_eq!(x, y, "batch {b}, op {i}");
                continue;
            };
            assert_eq!(xs.len(), ys.len(), "batch {b}, op {i}: {x} vs {y}");
            // items with a score in rank order, then those without in any order
            let key = |e: &Value| {
                let scoreless = e["score"].is_null();
                let k = (e["ns"].to_string(), e["key"].to_string(), e["value"].to_string());
                (scoreless, k)
            };
            let sorted = |list: &[Value]| {
                let mut keys: Vec<_> = list.iter().map(key).collect();
                let first = keys.iter().position(|(scoreless, _)| *scoreless).unwrap_or(keys.len());
                keys[first..].sort();
                keys
            };
            assert_eq!(sorted(xs), sorted(ys), "batch {b}, op {i}");
            let by_key = |list: &[Value]| {
                let mut v: Vec<_> = list.iter().map(|e| (key(e).1, e["score"].as_f64())).collect();
                v.sort_by(|a, b| a.0.cmp(&b.0));
                v
            };
            let (xs, ys) = (by_key(xs), by_key(ys));
            for ((_, e), (_, f)) in xs.iter().zip(&ys) {
                match (*e, *f) {
                    (Some(s), Some(t)) => assert!((s - t).abs() < 1e-6, "batch {b}, op {i}: {s} vs {t}"),
                    (s, t) => assert_eq!(s, t, "batch {b}, op {i}"),
                }
            }
        }
    }
}
