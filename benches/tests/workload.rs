//! The workload replayer's own tests: `benches/workload/` (run with
//! `cargo bench -p checkpointer-benches --all-features --bench workload -- FLAGS`) under the test
//! harness. `.ci/run` runs them with PostgreSQL:
//! `cargo test -p checkpointer-benches --all-features --test workload`.

#[path = "../workload/main.rs"]
#[allow(dead_code)]
mod workload;
