//! The public API across backends: the blocking facade, `FaultySaver`, the
//! proof that the conformance checks catch broken savers, the bad-input
//! catalogue of `docs/reliability.md` on every backend, `import_thread` on
//! SQLite and PostgreSQL, and the workload generator. One test binary, one
//! module per former test file.

#[cfg(feature = "postgres")]
#[path = "../support/postgres.rs"]
mod postgres_support;

#[cfg(all(feature = "sqlite", feature = "postgres", feature = "encryption"))]
mod bad_input_catalogue;
mod blocking;
#[cfg(feature = "conformance")]
mod conformance_broken;
#[cfg(feature = "conformance")]
mod faulty_saver;
#[cfg(all(feature = "sqlite", feature = "postgres"))]
mod import_thread;
mod thread_state;
mod workload_sample;
