//! The conformance suite against [`InMemorySaver`], the reference backend.

use std::sync::Arc;

use checkpointer::{CheckpointSaver, InMemorySaver};

checkpointer::conformance_tests!(|| async { Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver> });

/// `InMemorySaver` holds everything the catalogue's rows B02, B03, B07–B09,
/// B11 and B17 offer: it refuses none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_nothing_a_store_may_refuse() {
    let got = checkpointer::conformance::identifiers::refusals(&InMemorySaver::new())
        .await
        .unwrap();
    assert_eq!(got, checkpointer::conformance::identifiers::Refusals::default());
}
