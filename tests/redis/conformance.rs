//! The conformance suite against `RedisSaver`: one test per check
//! (`conformance::<check>`), each on a key prefix of its own, removed
//! afterwards.

use crate::harness;
use crate::redis_support;

use std::sync::Arc;

use checkpointer::conformance::{checks, Outcome};
use checkpointer::redis::RedisSaver;
use checkpointer::{CheckpointSaver, InMemorySaver};

/// The tests of this module, for the harness of `main.rs`; also checks
/// that Redis declares every operation the memory saver does.
pub(crate) fn tests() -> Vec<harness::Trial> {
    let mut out = vec![harness::test(
        "conformance::declares_what_memory_declares",
        &[&crate::REDIS],
        || {
            redis_support::block_on_thread(async {
                let saver = redis_support::saver().await;
                assert_eq!(saver.capabilities(), InMemorySaver::new().capabilities());
                redis_support::cleanup(saver.key_prefix()).await;
            });
        },
    )];
    for check in checks() {
        let name = check.name();
        out.push(harness::tokio(
            &format!("conformance::{name}"),
            &[&crate::REDIS],
            2,
            move || async move {
                let saver: RedisSaver = redis_support::saver().await;
                let prefix = saver.key_prefix().to_owned();
                let shared: Arc<dyn CheckpointSaver> = Arc::new(saver);
                let outcome = check.run(&*shared).await;
                redis_support::cleanup(&prefix).await;
                match outcome {
                    Outcome::Passed => {}
                    Outcome::Skipped(reason) => panic!("conformance check `{name}` did not run: {reason}"),
                    Outcome::Failed(failure) => panic!("conformance check `{name}` failed: {failure}"),
                }
            },
        ));
    }
    out
}
