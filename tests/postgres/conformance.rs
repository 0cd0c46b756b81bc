//! The conformance suite against PostgreSQL, once with prepared statements
//! and once in the unnamed-statement mode used behind transaction poolers:
//! one test per check (`conformance::prepared::<check>`), as
//! `checkpointer::conformance_tests!` would make, listed for the harness.

use crate::harness;
use crate::postgres_support;

use checkpointer::conformance::{checks, Outcome, Skip};
use checkpointer::postgres::{PostgresSaver, StatementMode};
use checkpointer::CheckpointSaver;

/// The tests of this module, for the harness of `main.rs`: a check of an
/// operation `PostgresSaver` does not declare is ignored, not passed.
pub(crate) fn tests() -> Vec<harness::Trial> {
    let mut out = vec![harness::tokio(
        "conformance::refuses_what_postgresql_cannot_hold",
        &[&crate::POSTGRES],
        2,
        refuses_what_postgresql_cannot_hold,
    )];
    let declared = PostgresSaver::builder()
        .url(postgres_support::url_of("postgres"))
        .build()
        .unwrap()
        .capabilities();
    for (module, mode) in [
        ("prepared", StatementMode::Prepared),
        ("unnamed", StatementMode::Unnamed),
    ] {
        for check in checks() {
            let name = check.name();
            let trial = harness::test(
                &format!("conformance::{module}::{name}"),
                &[&crate::POSTGRES],
                move || {
                    let runtime = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                        .unwrap();
                    let outcome = runtime.block_on(async {
                        match postgres_support::conformance_saver(mode).await {
                            Ok(saver) => check.run(&*saver).await,
                            Err(Skip(reason)) => panic!("{reason}"),
                        }
                    });
                    match outcome {
                        Outcome::Passed => {}
                        Outcome::Skipped(reason) => panic!("conformance check `{name}` did not run: {reason}"),
                        Outcome::Failed(failure) => panic!("conformance check `{name}` failed: {failure}"),
                    }
                },
            );
            let undeclared = check.capability().operation().is_some_and(|op| !declared.supports(op));
            out.push(if undeclared {
                trial.with_kind("not declared by PostgresSaver").with_ignored_flag(true)
            } else {
                trial
            });
        }
    }
    out
}

/// PostgreSQL text and JSONB cannot hold U+0000, JSONB has no NaN, and a
/// btree index entry holds about 2.7 kB: the catalogue's rows B02, B03,
/// B07–B09, B11 and B17 are refused whole, with the typed errors the
/// conformance checks accept (`Refusals`).
async fn refuses_what_postgresql_cannot_hold() {
    use checkpointer::conformance::identifiers::{refusals, Refusals};
    let saver = postgres_support::conformance_saver(StatementMode::Prepared)
        .await
        .unwrap_or_else(|Skip(reason)| panic!("{reason}"));
    let got = refusals(&*saver).await.unwrap();
    assert_eq!(
        got,
        Refusals {
            nul_in_ids: true,
            nul_in_names_and_metadata: true,
            non_finite_metadata: true,
            oversized_ids: true,
        }
    );
}
