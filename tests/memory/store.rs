//! The long-term memory `InMemoryStore`: the Store conformance suite (with
//! and without an index), the model-based test against a `BTreeMap`
//! oracle, TTL with a clock the test moves, and the results of Python's
//! `InMemoryStore` recorded in `testdata/store/` (re-recorded against the
//! live Python by `tests/python/store.rs`).

use std::sync::Arc;

use checkpointer::store::{HashedNgramEmbeddings, InMemoryStore, IndexConfig, Store, TtlConfig};

use crate::store_suite::manual_clock;

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
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    crate::store_suite::matches_the_oracle(&InMemoryStore::new(), 64, &rt);
}

#[tokio::test]
async fn ttl_expires_after_its_minutes_and_reads_refresh_it() {
    let (clock, read) = manual_clock();
    let store = InMemoryStore::builder()
        .ttl(TtlConfig::default())
        .clock(read)
        .build()
        .unwrap();
    crate::store_suite::ttl_expires_after_its_minutes_and_reads_refresh_it(&store, &clock).await;
}

#[tokio::test]
async fn default_ttl_applies_and_refresh_on_read_false_is_kept() {
    let (clock, read) = manual_clock();
    let store = InMemoryStore::builder()
        .ttl(crate::store_suite::five_minutes_no_refresh())
        .clock(read)
        .build()
        .unwrap();
    crate::store_suite::default_ttl_applies_and_refresh_on_read_false_is_kept(&store, &clock).await;
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
