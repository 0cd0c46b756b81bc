//! `PostgresSaver` against the server at `CHECKPOINTER_PG_URL` (see
//! `postgres_support`): the saver itself, the conformance suite in both
//! statement modes, the model-based property test, concurrency, error
//! messages, encryption at rest, connections terminated mid-call and a
//! silent network partition. One test binary, one module per former test
//! file. Restarting the server disturbs every other test on it, so that test
//! is a binary of its own (`tests/postgres_restart.rs`).
//!
//! The harness is `tests/support/harness.rs` (`harness = false`): without a
//! reachable server the tests are reported ignored, with the reason, outside
//! CI, and fail in CI (`CI=true`).

#[path = "../support/catalogue.rs"]
mod catalogue_support;

#[path = "../support/harness.rs"]
mod harness;

#[path = "../support/postgres.rs"]
mod postgres_support;

#[path = "../support/fencing.rs"]
mod fencing_support;

#[path = "../support/retention.rs"]
mod retention_support;
#[path = "../support/step_crash.rs"]
mod step_crash_support;

mod bad_input;
mod concurrency;
#[cfg(feature = "conformance")]
mod conformance;
#[cfg(feature = "encryption")]
mod encryption;
mod errors;
mod faults;
mod fencing;
mod group_commit;
mod group_fencing;
#[cfg(feature = "conformance")]
mod model;
mod permanent;
mod retain_crash;
mod saver;
mod step_crash;
#[cfg(all(feature = "store", feature = "conformance"))]
mod store;
#[cfg(all(feature = "store", feature = "conformance"))]
#[path = "../support/store_sequence.rs"]
mod store_sequence;
#[cfg(all(feature = "store", feature = "conformance"))]
#[path = "../support/store_suite.rs"]
mod store_suite;
mod timeouts;
#[cfg(feature = "sqlite")]
mod verify;

/// A PostgreSQL server at `CHECKPOINTER_PG_URL`.
pub(crate) static POSTGRES: harness::Need = harness::Need::new("PostgreSQL", postgres_support::reachable);

fn main() {
    step_crash_support::child_if_asked();
    postgres_support::under_harness();
    let mut tests = Vec::new();
    tests.extend(bad_input::tests());
    tests.extend(concurrency::tests());
    #[cfg(feature = "conformance")]
    tests.extend(conformance::tests());
    #[cfg(feature = "encryption")]
    tests.extend(encryption::tests());
    tests.extend(errors::tests());
    tests.extend(faults::tests());
    tests.extend(fencing::tests());
    tests.extend(step_crash::tests());
    tests.extend(group_commit::tests());
    tests.extend(group_fencing::tests());
    #[cfg(feature = "conformance")]
    tests.extend(model::tests());
    tests.extend(permanent::tests());
    tests.extend(retain_crash::tests());
    tests.extend(saver::tests());
    #[cfg(all(feature = "store", feature = "conformance"))]
    tests.extend(store::tests());
    tests.extend(timeouts::tests());
    #[cfg(feature = "sqlite")]
    tests.extend(verify::tests());
    tests.push(harness::no_libtest_attributes("postgres"));
    tests.push(harness::missing_need_is_reported_ignored(
        "saver::one_saver_runs_calls_in_parallel",
        &[("CHECKPOINTER_PG_URL", Some("postgresql://postgres@127.0.0.1:1"))],
    ));
    harness::main(tests)
}
