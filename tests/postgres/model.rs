//! The model-based property test against `PostgresSaver`:
//! random operation sequences compared with the `ContractModel` oracle on the
//! shared test database (per-case thread and run id prefixes). Without a
//! server the test is ignored outside CI and fails in CI (see `main.rs`).
//! `PROPTEST_CASES` / `MODEL_MAX_OPS` set the size (64 × ≤ 40).

use crate::harness;
use crate::postgres_support;

use checkpointer::conformance::model::{check_against_oracle, ModelConfig};
use checkpointer::postgres::StatementMode;

fn postgres_matches_the_oracle() {
    let stats = check_against_oracle(
        || postgres_support::conformance_saver(StatementMode::Prepared),
        // JSONB keeps metadata keys in its own order.
        ModelConfig::default().shared_store().unordered_metadata(),
    )
    .unwrap_or_else(|failure| panic!("{failure}"));
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

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::test(
        "model::postgres_matches_the_oracle",
        &[&crate::POSTGRES],
        postgres_matches_the_oracle,
    )]
}
