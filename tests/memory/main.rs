//! `InMemorySaver`, the reference backend: the conformance suite (plain and
//! with values encrypted at rest), the model-based property test, encryption
//! at rest and the key from the environment, and Python `InMemorySaver`
//! dumps from the shared fixtures. One test binary, one module per former
//! test file.
//!
//! `encryption` changes `LANGGRAPH_AES_KEY` in this process. Nothing else in
//! this binary reads that variable, and nothing here runs C code that reads
//! the environment (SQLite, name lookups), which a change of it could race
//! with: keep it that way, or give that test a binary of its own.

#[cfg(feature = "conformance")]
mod conformance;
#[cfg(all(feature = "conformance", feature = "encryption"))]
mod conformance_encrypted;
#[cfg(feature = "encryption")]
mod encryption;
#[path = "../support/fencing.rs"]
mod fencing_support;

mod fencing;
mod fixtures;
mod large_threads;
#[cfg(feature = "conformance")]
mod model;
mod per_thread;
#[cfg(all(feature = "store", feature = "conformance"))]
mod store;
#[cfg(all(feature = "store", feature = "conformance"))]
#[path = "../support/store_sequence.rs"]
mod store_sequence;
#[cfg(all(feature = "store", feature = "conformance"))]
#[path = "../support/store_suite.rs"]
mod store_suite;
