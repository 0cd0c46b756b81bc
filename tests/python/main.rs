//! Compatibility with the real Python packages (the peer venv of
//! `scripts/python-venv.sh`, named by `CHECKPOINTER_PYTHON`), both
//! directions: Python's `SqliteSaver` and `PostgresSaver` read the crate's
//! rows and the crate reads theirs, and LangGraph's `EncryptedSerializer`
//! decrypts what the crate encrypted and the other way round. One test
//! binary, one module per former test file.
//!
//! The harness is `tests/support/harness.rs` (`harness = false`): without
//! `CHECKPOINTER_PYTHON` (or, for the PostgreSQL part, a reachable server)
//! the tests are reported ignored, with the reason, outside CI, and fail in
//! CI (`CI=true`).

#[path = "../support/harness.rs"]
mod harness;

#[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
#[path = "../support/postgres.rs"]
mod postgres_support;
#[cfg(all(feature = "sqlite", feature = "render"))]
#[path = "../support/sqlite.rs"]
mod sqlite_support;

#[cfg(all(feature = "sqlite", feature = "render"))]
mod add_messages;
#[cfg(feature = "encryption")]
mod encryption;
#[cfg(all(feature = "sqlite", feature = "render"))]
#[path = "../sqlite/task_ids.rs"]
mod fixture_task_ids;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod mini_runtime;
#[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
mod postgres;
#[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
mod retention;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod runtime_branch;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod runtime_send;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod send_task_ids;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod side_by_side;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod sqlite;
#[cfg(feature = "store")]
mod store;
#[cfg(all(feature = "store", feature = "postgres", feature = "sqlite", feature = "render"))]
mod store_postgres;
#[cfg(feature = "store")]
#[path = "../support/store_sequence.rs"]
mod store_sequence;
#[cfg(all(feature = "store", feature = "sqlite"))]
mod store_sqlite;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod verify;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod verify_delta;
#[cfg(all(feature = "sqlite", feature = "render"))]
mod versions;

/// The peer venv's Python at `CHECKPOINTER_PYTHON` (`scripts/python-venv.sh`).
#[cfg(any(
    feature = "encryption",
    feature = "store",
    all(feature = "sqlite", feature = "render")
))]
pub(crate) static PYTHON: harness::Need = harness::Need::new("the Python peer", harness::python_set);

/// A PostgreSQL server at `CHECKPOINTER_PG_URL`.
#[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
pub(crate) static POSTGRES: harness::Need = harness::Need::new("PostgreSQL", postgres_support::reachable);

fn main() {
    #[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
    postgres_support::under_harness();
    let mut tests: Vec<harness::Trial> = Vec::new();
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(add_messages::tests());
    #[cfg(feature = "encryption")]
    tests.extend(encryption::tests());
    #[cfg(feature = "store")]
    tests.extend(store::tests());
    #[cfg(all(feature = "store", feature = "sqlite"))]
    tests.extend(store_sqlite::tests());
    #[cfg(all(feature = "store", feature = "postgres", feature = "sqlite", feature = "render"))]
    tests.extend(store_postgres::tests());
    #[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
    tests.extend(postgres::tests());
    #[cfg(all(feature = "postgres", feature = "sqlite", feature = "render"))]
    tests.extend(retention::tests());
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(sqlite::tests());
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(mini_runtime::tests());
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(runtime_send::tests());
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(runtime_branch::tests());
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(send_task_ids::tests());
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(versions::tests());
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(verify::tests());
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.extend(verify_delta::tests());
    tests.push(harness::no_libtest_attributes("python"));
    #[cfg(all(feature = "sqlite", feature = "render"))]
    tests.push(harness::missing_need_is_reported_ignored(
        "sqlite::python_reads_a_quickstart_run_as_langgraph_writes_it",
        &[("CHECKPOINTER_PYTHON", None)],
    ));
    harness::main(tests)
}
