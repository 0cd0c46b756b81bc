//! The row verifier (`checkpointer::verify`) on a PostgreSQL store: every
//! fixture thread imported into a fresh database verifies as it does in its
//! SQLite file, and one fact changed in a stored thread is caught
//! (`tests/support/verify_store.rs`).

use crate::{harness, postgres_support};

#[path = "../support/verify_store.rs"]
mod verify_store;

async fn the_verifier_reads_postgres_rows() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let store = checkpointer::OpenOptions::new()
        .open(&postgres_support::url_of(&db.0))
        .await
        .unwrap();
    let good = verify_store::fixtures_verify_on(&store, "pg").await;
    verify_store::mutations_are_caught_on(&store, "pg", &good).await;
    store.close().await.unwrap();
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::tokio(
        "verify::the_verifier_reads_postgres_rows",
        &[&crate::POSTGRES],
        2,
        the_verifier_reads_postgres_rows,
    )]
}
