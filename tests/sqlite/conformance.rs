//! The conformance suite against `SqliteSaver`: on one shared file (every
//! check opens its own saver on it, so writers of several connections meet),
//! on a fresh file per check, and in memory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use checkpointer::sqlite::SqliteSaver;
use checkpointer::CheckpointSaver;

/// A directory for this process's databases, emptied once per run. One per
/// process, so that runners starting a process per test (cargo-nextest) do
/// not empty each other's.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("sqlite_conformance")
            .join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

async fn shared_file() -> Arc<dyn CheckpointSaver> {
    Arc::new(SqliteSaver::open(dir().join("shared.sqlite")).await.unwrap())
}

async fn fresh_file() -> Arc<dyn CheckpointSaver> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Arc::new(
        SqliteSaver::open(dir().join(format!("fresh-{n}.sqlite")))
            .await
            .unwrap(),
    )
}

mod shared {
    checkpointer::conformance_tests!(super::shared_file);
}

mod fresh {
    checkpointer::conformance_tests!(super::fresh_file);
}

mod memory {
    use super::*;
    checkpointer::conformance_tests!(|| async {
        Arc::new(SqliteSaver::open_in_memory().await.unwrap()) as Arc<dyn CheckpointSaver>
    });
}

/// `SqliteSaver` holds everything the catalogue's rows B02, B03, B07–B09,
/// B11 and B17 offer (U+0000, NaN in metadata as Python's `json.dumps`
/// writes it, 1 MiB ids): it refuses none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_nothing_a_store_may_refuse() {
    let got = checkpointer::conformance::identifiers::refusals(&*fresh_file().await)
        .await
        .unwrap();
    assert_eq!(got, checkpointer::conformance::identifiers::Refusals::default());
}
