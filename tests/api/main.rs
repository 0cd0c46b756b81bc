//! The public API across backends: the blocking facade, `FaultySaver`, the
//! proof that the conformance checks catch broken savers, the bad-input
//! catalogue of `docs/reliability.md` on every backend, the masking of
//! secrets in every connection-string form, `open(url)` and the
//! administrative face on every backend, `import_thread` and encoded
//! I/O on every saver, and the workload generator. One test binary, one
//! module per former test file.
//!
//! The harness is `tests/support/harness.rs` (`harness = false`): the tests
//! that need PostgreSQL are reported ignored, with the reason, when no server
//! answers outside CI, and fail in CI (`CI=true`).

#[path = "../support/harness.rs"]
mod harness;

#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis", feature = "encryption"))]
#[path = "../support/catalogue.rs"]
mod catalogue_support;

#[cfg(feature = "postgres")]
#[path = "../support/postgres.rs"]
mod postgres_support;
#[cfg(feature = "redis")]
#[path = "../support/redis.rs"]
mod redis_support;

#[cfg(feature = "sqlite")]
mod agent_app;
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis", feature = "encryption"))]
mod bad_input_catalogue;
mod blocking;
#[cfg(feature = "conformance")]
mod conformance_broken;
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod encoded;
mod every_saver;
#[cfg(feature = "conformance")]
mod faulty_saver;
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod import_thread;
mod kit_limits;
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod open;
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod secrets;
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod space;
#[cfg(all(feature = "sqlite", feature = "conformance"))]
mod step_atomic;
mod step_sends;
mod steps;
mod subgraph_resume;
mod thread_branch;
mod thread_state;
mod workload_sample;

/// A PostgreSQL server at `CHECKPOINTER_PG_URL`.
#[cfg(feature = "postgres")]
pub(crate) static POSTGRES: harness::Need = harness::Need::new("PostgreSQL", postgres_support::reachable);

/// A Redis server at `CHECKPOINTER_REDIS_URL`.
#[cfg(feature = "redis")]
pub(crate) static REDIS: harness::Need = harness::Need::new("Redis", redis_support::reachable);

fn main() {
    #[cfg(feature = "sqlite")]
    if let Ok(path) = std::env::var(agent_app::CHILD) {
        return agent_app::child(&path);
    }
    #[cfg(feature = "postgres")]
    postgres_support::under_harness();
    let mut tests = Vec::new();
    #[cfg(feature = "sqlite")]
    tests.extend(agent_app::tests());
    #[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis", feature = "encryption"))]
    tests.extend(bad_input_catalogue::tests());
    tests.extend(blocking::tests());
    #[cfg(feature = "conformance")]
    tests.extend(conformance_broken::tests());
    #[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
    tests.extend(encoded::tests());
    #[cfg(feature = "conformance")]
    tests.extend(faulty_saver::tests());
    #[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
    tests.extend(import_thread::tests());
    tests.extend(kit_limits::tests());
    #[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
    tests.extend(open::tests());
    #[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
    tests.extend(secrets::tests());
    #[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
    tests.extend(space::tests());
    #[cfg(all(feature = "sqlite", feature = "conformance"))]
    tests.extend(step_atomic::tests());
    tests.extend(step_sends::tests());
    tests.extend(steps::tests());
    tests.extend(subgraph_resume::tests());
    tests.extend(thread_branch::tests());
    tests.extend(thread_state::tests());
    tests.extend(workload_sample::tests());
    tests.push(harness::no_libtest_attributes("api"));
    harness::main(tests)
}
