//! The store filler (`benches/fill/`) at 5 MB on a SQLite file: the threads
//! it writes pass [`checkpointer::verify`], have what it promises (long
//! histories, interrupts, forks, subgraph namespaces, pending writes), come
//! out the same for the same seed, and Python's `SqliteSaver` reads one.
//! `cargo test -p checkpointer-benches --all-features --test fill` (the
//! Python check is `#[ignore]`d without `CHECKPOINTER_PYTHON`:
//! `-- --include-ignored`, as `.ci/run` runs it).

#[path = "../fill/gen.rs"]
mod generator;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::verify::verify_store;
use checkpointer::{OpenOptions, SaverAdmin};
use generator::{fill, Fill};

const FIVE_MB: u64 = 5 << 20;

async fn filled(path: &std::path::Path, seed: u64) -> Arc<dyn SaverAdmin> {
    let url = format!("sqlite://{}", path.display());
    let store = OpenOptions::new().open(&url).await.unwrap();
    let options = Fill {
        bytes: FIVE_MB,
        seed,
        writers: 4,
        steps: (40, 120),
        progress: false,
    };
    let (counts, _, bytes) = fill(&store, &options).await.unwrap();
    assert!(bytes >= FIVE_MB, "{bytes}");
    assert!(counts.checkpoints.load(Ordering::Relaxed) >= 40);
    assert!(counts.interrupts.load(Ordering::Relaxed) > 0);
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filled_store_passes_verify_and_has_every_shape() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled(&dir.path().join("fill.sqlite"), 7).await;
    let saver = store.saver();
    let report = verify_store(saver.as_ref()).await.unwrap();
    assert!(report.is_ok(), "{report:?}");
    let threads = saver.list_threads(Default::default()).await.unwrap();
    assert!(threads.len() >= 4, "{}", threads.len());
    let (mut namespaces, mut forks, mut pending) = (0, 0, 0);
    for t in &threads {
        let all = saver
            .list_vec(
                Some(CheckpointConfig::all_namespaces(&t.thread_id)),
                ListOptions::default(),
            )
            .await
            .unwrap();
        namespaces += all.iter().filter(|c| !c.config.ns().is_empty()).count();
        forks += all
            .iter()
            .filter(|c| c.metadata.source() == Some(CheckpointSource::Fork))
            .count();
        pending += all.iter().filter(|c| !c.pending_writes.is_empty()).count();
    }
    assert!(namespaces > 0, "subgraph checkpoints");
    assert!(forks > 0, "forks");
    assert!(pending > 0, "pending writes");
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_the_same_threads() {
    let dir = tempfile::tempdir().unwrap();
    let mut shapes = Vec::new();
    for name in ["a.sqlite", "b.sqlite"] {
        let store = filled(&dir.path().join(name), 11).await;
        let saver = store.saver();
        let first = saver.list_threads(Default::default()).await.unwrap()[0]
            .thread_id
            .clone();
        let all = saver
            .list_vec(Some(CheckpointConfig::new(first.clone())), ListOptions::default())
            .await
            .unwrap();
        let values: Vec<_> = all.iter().map(|t| t.checkpoint.channel_values.clone()).collect();
        shapes.push((first, values));
        store.close().await.unwrap();
    }
    assert_eq!(shapes[0], shapes[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs CHECKPOINTER_PYTHON, a Python with langgraph-checkpoint-sqlite (`-- --include-ignored`)"]
async fn python_reads_a_filled_thread() {
    let python = std::env::var("CHECKPOINTER_PYTHON").expect("CHECKPOINTER_PYTHON");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fill.sqlite");
    let store = filled(&path, 5).await;
    let saver = store.saver();
    let thread = saver.list_threads(Default::default()).await.unwrap()[0]
        .thread_id
        .clone();
    let ours = saver
        .list_vec(Some(CheckpointConfig::new(thread.clone())), ListOptions::default())
        .await
        .unwrap();
    let latest = ours[0].checkpoint.id.clone();
    store.close().await.unwrap();
    let script = r#"
import sqlite3, sys
from langgraph.checkpoint.sqlite import SqliteSaver
saver = SqliteSaver(sqlite3.connect(sys.argv[1], check_same_thread=False))
config = {"configurable": {"thread_id": sys.argv[2], "checkpoint_ns": ""}}
history = list(saver.list(config))
latest = saver.get_tuple(config)
print(len(history), latest.checkpoint["id"], len(latest.checkpoint["channel_values"].get("messages", [])))
"#;
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(&path)
        .arg(&thread)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields[0], ours.len().to_string(), "{text}");
    assert_eq!(fields[1], latest, "{text}");
    assert!(fields[2].parse::<usize>().unwrap() > 0, "{text}");
}
