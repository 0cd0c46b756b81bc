//! The model-based property test against `RedisSaver`: random operation
//! sequences compared with the `ContractModel` oracle, a fresh key prefix
//! per case. `PROPTEST_CASES` / `MODEL_MAX_OPS` set the size.

use crate::harness;
use crate::redis_support;

use std::sync::Arc;

use checkpointer::conformance::model::{check_against_oracle, ModelConfig};

fn redis_matches_the_oracle() {
    let family = redis_support::fresh_prefix();
    let stats = check_against_oracle(|| redis_support::family_saver(family.clone()), ModelConfig::default());
    redis_support::block_on_thread(async move { redis_support::cleanup_family(&family).await });
    let stats = stats.unwrap_or_else(|failure| panic!("{failure}"));
    match stats.skipped {
        Some(reason) => panic!("the model test did not run: {reason}"),
        None => println!(
            "{} cases, {} operations {:?}, left out {:?}",
            stats.cases,
            stats.total_ops(),
            stats.ops,
            stats.skipped_ops
        ),
    }
}

/// The same on one store shared by every case (per-case thread and run id
/// prefixes), so the global indexes hold other cases' threads.
fn redis_shared_store_matches_the_oracle() {
    let prefix = redis_support::fresh_prefix();
    let stats = check_against_oracle(
        || {
            let prefix = prefix.clone();
            async move { Arc::new(redis_support::saver_on(prefix).await) as Arc<dyn checkpointer::CheckpointSaver> }
        },
        ModelConfig::default().shared_store(),
    );
    redis_support::block_on_thread(async move { redis_support::cleanup(&prefix).await });
    let stats = stats.unwrap_or_else(|failure| panic!("{failure}"));
    assert!(
        stats.skipped.is_none(),
        "the model test did not run: {:?}",
        stats.skipped
    );
    println!("shared store: {} cases, {} operations", stats.cases, stats.total_ops());
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "model::redis_matches_the_oracle",
            &[&crate::REDIS],
            redis_matches_the_oracle,
        ),
        harness::test(
            "model::redis_shared_store_matches_the_oracle",
            &[&crate::REDIS],
            redis_shared_store_matches_the_oracle,
        ),
    ]
}
