//! The `checkpointer` command run as a user runs it: one test binary, one
//! module per area.
//!
//! The harness is `tests/support/harness.rs` of the library (`harness =
//! false`): the tests that need PostgreSQL, Redis or the Python peer are reported
//! ignored, with the reason, when those are missing outside CI, and fail in
//! CI (`CI=true`).

#[path = "../../../tests/support/harness.rs"]
mod harness;

mod check_stores;
mod commands;
mod copy;
mod crash;
mod errors;
mod export;
mod hardening;
mod redis_store;
#[path = "../../../tests/support/redis.rs"]
mod redis_support;
mod redis_tls;
mod retention;
mod store_cmd;
mod support;

/// A PostgreSQL server at `CHECKPOINTER_PG_URL`.
pub(crate) static POSTGRES: harness::Need = harness::Need::new("PostgreSQL", support::pg_reachable);

/// A Redis server at `CHECKPOINTER_REDIS_URL` (default `redis://127.0.0.1:6379`).
pub(crate) static REDIS: harness::Need = harness::Need::new("Redis", redis_support::reachable);

/// The peer venv's Python at `CHECKPOINTER_PYTHON` (`scripts/python-venv.sh`).
pub(crate) static PYTHON: harness::Need = harness::Need::new("the Python peer", harness::python_set);

fn main() {
    let mut tests = Vec::new();
    tests.extend(commands::tests());
    tests.extend(copy::tests());
    tests.extend(crash::tests());
    tests.extend(errors::tests());
    tests.extend(export::tests());
    tests.extend(hardening::tests());
    tests.extend(check_stores::tests());
    tests.extend(redis_store::tests());
    tests.extend(retention::tests());
    tests.extend(redis_tls::tests());
    tests.extend(store_cmd::tests());
    tests.extend(store_cmd::postgres_tests());
    tests.push(harness::no_libtest_attributes("tests/cli"));
    harness::main(tests)
}
