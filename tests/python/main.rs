//! Compatibility with the real Python packages (the peer venv of
//! `scripts/python-venv.sh`, named by `CHECKPOINTER_PYTHON`), both
//! directions: Python's `SqliteSaver` and `PostgresSaver` read the crate's
//! rows and the crate reads theirs, and LangGraph's `EncryptedSerializer`
//! decrypts what the crate encrypted and the other way round. One test
//! binary, one module per former test file.

#[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
#[path = "../support/postgres.rs"]
mod postgres_support;
#[cfg(all(feature = "sqlite", feature = "render"))]
#[path = "../support/sqlite.rs"]
mod sqlite_support;

#[cfg(feature = "encryption")]
mod encryption;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod mini_runtime;
#[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
mod postgres;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod sqlite;
