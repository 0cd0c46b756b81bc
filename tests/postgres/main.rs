//! `PostgresSaver` against the server at `CHECKPOINTER_PG_URL` (see
//! `postgres_support`): the saver itself, the conformance suite in both
//! statement modes, the model-based property test, concurrency, error
//! messages, encryption at rest, connections terminated mid-call and a
//! silent network partition. One test binary, one module per former test
//! file. Restarting the server disturbs every other test on it, so that test
//! is a binary of its own (`tests/postgres_restart.rs`).

#[path = "../support/postgres.rs"]
mod postgres_support;

mod concurrency;
#[cfg(feature = "conformance")]
mod conformance;
#[cfg(feature = "encryption")]
mod encryption;
mod errors;
mod faults;
mod group_commit;
#[cfg(feature = "conformance")]
mod model;
mod saver;
mod timeouts;
