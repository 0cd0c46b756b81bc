//! The row verifier (`checkpointer::verify`) on a Redis store: every fixture
//! thread imported under a fresh key prefix verifies as it does in its
//! SQLite file, and one fact changed in a stored thread is caught
//! (`tests/support/verify_store.rs`).

use crate::{harness, redis_support};

#[path = "../support/verify_store.rs"]
mod verify_store;

async fn the_verifier_reads_redis_rows() {
    let prefix = redis_support::fresh_prefix();
    let url = format!("{}?prefix={prefix}", redis_support::url());
    let store = checkpointer::OpenOptions::new().open(&url).await.unwrap();
    let good = verify_store::fixtures_verify_on(&store, "redis").await;
    verify_store::mutations_are_caught_on(&store, "redis", &good).await;
    store.close().await.unwrap();
    redis_support::cleanup(&prefix).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![harness::tokio(
        "verify::the_verifier_reads_redis_rows",
        &[&crate::REDIS],
        2,
        the_verifier_reads_redis_rows,
    )]
}
