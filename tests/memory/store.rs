//! The long-term memory `InMemoryStore`: the Store conformance suite (with
//! and without an index), the model-based test against a `BTreeMap`
//! oracle, TTL with a clock the test moves, and the results of Python's
//! `InMemoryStore` recorded in `testdata/store/` (re-recorded against the
//! live Python by `tests/python/store.rs`).

use std::sync::Arc;

use checkpointer::store::{HashedNgramEmbeddings, InMemoryStore, IndexConfig, Store, TtlConfig};

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
async fn ttl_scenarios() {
    crate::store_suite::ttl_scenarios(|ttl, clock| async move {
        InMemoryStore::builder().ttl(ttl).clock(clock).build().unwrap()
    })
    .await;
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
