//! The model-based property test against `SqliteSaver`:
//! random operation sequences compared with the `ContractModel` oracle, on a
//! fresh in-memory database per case and on a shared file (per-case thread
//! prefixes). `PROPTEST_CASES` / `MODEL_MAX_OPS` set the size (64 × ≤ 40).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use checkpointer::conformance::model::{check_against_oracle, ModelConfig};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::CheckpointSaver;

fn report(name: &str, stats: &checkpointer::conformance::model::ModelStats) {
    println!(
        "{name}: {} cases, {} operations {:?}, left out {:?}",
        stats.cases,
        stats.total_ops(),
        stats.ops,
        stats.skipped_ops
    );
}

#[test]
fn sqlite_in_memory_matches_the_oracle() {
    let stats = check_against_oracle(
        || async {
            Arc::new(SqliteSaver::open_in_memory().await.expect("in-memory SQLite")) as Arc<dyn CheckpointSaver>
        },
        ModelConfig::default(),
    )
    .unwrap_or_else(|failure| panic!("{failure}"));
    report("in memory", &stats);
}

#[test]
fn sqlite_shared_file_matches_the_oracle() {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    let path = FILE
        .get_or_init(|| {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("model_sqlite");
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            dir.join("shared.sqlite")
        })
        .clone();
    let stats =
        check_against_oracle(
            move || {
                let path = path.clone();
                async move {
                    Arc::new(SqliteSaver::open(&path).await.expect("open SQLite file")) as Arc<dyn CheckpointSaver>
                }
            },
            ModelConfig::default().shared_store(),
        )
        .unwrap_or_else(|failure| panic!("{failure}"));
    report("shared file", &stats);
}
