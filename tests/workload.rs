//! The workload replayer's own tests: `benches/workload/` (run with
//! `cargo bench --all-features --bench workload -- FLAGS`) under the test
//! harness. `.ci/run` runs them with PostgreSQL:
//! `cargo test --all-features --test workload`.

#[path = "../benches/workload/main.rs"]
#[allow(dead_code)]
mod workload;
