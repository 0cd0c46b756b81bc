//! The long-term memory store against Python's `InMemoryStore`, live: the
//! sequence of `testdata/store/sequence.json` run by
//! `scripts/store_python_peer.py` (LangGraph's store, the test embedding
//! in Python) gives exactly our results, scores to the last bit, and the
//! recording in `testdata/store/inmemory.json` is current.

use crate::harness;

pub fn tests() -> Vec<harness::Trial> {
    vec![harness::tokio(
        "store::python_in_memory_store_gives_our_results",
        &[&crate::PYTHON],
        0,
        || async {
            let python = crate::store_sequence::python_peer(&[crate::store_sequence::sequence_path()]);
            let ours = crate::store_sequence::run().await;
            crate::store_sequence::assert_same(&ours, &python);
            let recorded = std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/store/inmemory.json"),
            )
            .expect("the recording");
            let recorded: serde_json::Value = serde_json::from_str(&recorded).expect("the recording's JSON");
            assert_eq!(
                python, recorded,
                "testdata/store/inmemory.json is stale: re-record it with the peer"
            );
        },
    )]
}
