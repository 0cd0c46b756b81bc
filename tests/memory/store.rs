//! The long-term memory `InMemoryStore`: the Store conformance suite (with
//! and without an index), the model-based test against a `BTreeMap`
//! oracle, TTL with a clock the test moves, and the results of Python's
//! `InMemoryStore` recorded in `testdata/store/` (re-recorded against the
//! live Python by `tests/python/store.rs`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use checkpointer::store::{
    HashedNgramEmbeddings, InMemoryStore, IndexConfig, Namespace, PutOp, SearchOp, Store, StoreExt, Ttl, TtlConfig,
};
use parking_lot::Mutex;
use serde_json::json;

mod plain {
    use super::*;
    checkpointer::store_conformance_tests!(|| async { Arc::new(InMemoryStore::new()) as Arc<dyn Store> });
}

mod indexed {
    use super::*;
    checkpointer::store_conformance_tests!(|| async {
        let index = IndexConfig::new(64, Arc::new(HashedNgramEmbeddings::new(64))).fields(["text"]);
        Arc::new(InMemoryStore::builder().index(index).build().expect("a valid index")) as Arc<dyn Store>
    });
}

#[test]
fn in_memory_store_matches_the_oracle() {
    use proptest::test_runner::{Config, TestRunner};
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runner
        .run(&checkpointer::store::conformance::model::model_batches(), |batches| {
            let store = InMemoryStore::new();
            rt.block_on(checkpointer::store::conformance::model::check_against_oracle(
                &store, &batches,
            ))
            .map_err(|f| proptest::test_runner::TestCaseError::fail(f.to_string()))
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// A clock the test moves by hand.
fn manual_clock() -> (Arc<Mutex<SystemTime>>, impl Fn() -> SystemTime + Send + Sync + 'static) {
    let now = Arc::new(Mutex::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)));
    let read = Arc::clone(&now);
    (now, move || *read.lock())
}

fn advance(clock: &Mutex<SystemTime>, minutes: u64) {
    let mut now = clock.lock();
    *now += Duration::from_secs(minutes * 60);
}

#[tokio::test]
async fn ttl_expires_after_its_minutes_and_reads_refresh_it() {
    let (clock, read) = manual_clock();
    let store = InMemoryStore::builder()
        .ttl(TtlConfig::default())
        .clock(read)
        .build()
        .unwrap();
    let ns = Namespace::new(["ttl"]).unwrap();
    store
        .put_op(PutOp::new(ns.clone(), "read", json!({})).ttl(Ttl::Minutes(10.0)))
        .await
        .unwrap();
    store
        .put_op(PutOp::new(ns.clone(), "unread", json!({})).ttl(Ttl::Minutes(10.0)))
        .await
        .unwrap();
    store
        .put_op(PutOp::new(ns.clone(), "norefresh", json!({})).ttl(Ttl::Minutes(10.0)))
        .await
        .unwrap();
    advance(&clock, 9);
    assert!(store.get(&ns, "read").await.unwrap().is_some());
    let quiet = SearchOp::new(ns.clone()).refresh_ttl(false);
    assert_eq!(store.search(quiet).await.unwrap().len(), 3);
    advance(&clock, 2); // 11 minutes after the puts, 2 after the refreshing get
    assert!(
        store.get(&ns, "read").await.unwrap().is_some(),
        "the get restarted its TTL"
    );
    assert!(store.get(&ns, "unread").await.unwrap().is_none(), "expired");
    assert!(
        store.get(&ns, "norefresh").await.unwrap().is_none(),
        "a search with refresh_ttl false did not refresh"
    );
    assert_eq!(store.sweep_ttl().await.unwrap(), 2);
    advance(&clock, 10);
    assert!(
        store.get(&ns, "read").await.unwrap().is_none(),
        "10 minutes after its last read"
    );
}

#[tokio::test]
async fn default_ttl_applies_and_refresh_on_read_false_is_kept() {
    let (clock, read) = manual_clock();
    let config = TtlConfig {
        refresh_on_read: Some(false),
        default_ttl: Some(5.0),
        sweep_interval_minutes: None,
    };
    let store = InMemoryStore::builder().ttl(config).clock(read).build().unwrap();
    let ns = Namespace::new(["ttl"]).unwrap();
    store.put(&ns, "default", json!({})).await.unwrap();
    store
        .put_op(PutOp::new(ns.clone(), "never", json!({})).ttl(Ttl::Never))
        .await
        .unwrap();
    advance(&clock, 4);
    assert!(store.get(&ns, "default").await.unwrap().is_some());
    advance(&clock, 2);
    assert!(
        store.get(&ns, "default").await.unwrap().is_none(),
        "refresh_on_read false: the get did not refresh"
    );
    assert!(store.get(&ns, "never").await.unwrap().is_some());
    let refused = InMemoryStore::builder()
        .ttl(TtlConfig {
            default_ttl: Some(f64::NAN),
            ..TtlConfig::default()
        })
        .build();
    assert!(refused.is_err());
}

#[tokio::test]
async fn recorded_python_in_memory_results_match() {
    let recorded = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/store/inmemory.json"))
        .expect("testdata/store/inmemory.json");
    let recorded: serde_json::Value = serde_json::from_str(&recorded).unwrap();
    let ours = crate::store_sequence::run().await;
    crate::store_sequence::assert_same(&ours, &recorded);
}
