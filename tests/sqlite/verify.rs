//! The row verifier over every fixture Python wrote: the `SqliteSaver`
//! databases read through the crate's saver, and the `InMemorySaver` dumps
//! turned into the tuples Python's saver returns. None has a violation.

use std::collections::BTreeMap;
use std::path::Path;

use checkpointer::serde::{JsonPlusSerializer, Serializer, TypedBytes, Value};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::verify::{verify_store, ThreadVerifier};
use checkpointer::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, PendingWrite};

use crate::sqlite_support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sqlite_fixture_verifies() {
    let testdata = sqlite_support::testdata_dir();
    let mut checked = 0;
    for (name, path) in sqlite_support::fixtures(&testdata) {
        let (_dir, copy) = sqlite_support::temp_copy(&path);
        let saver = SqliteSaver::open(&copy).await.unwrap();
        let report = verify_store(&saver).await.unwrap();
        let shown: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert!(report.is_ok(), "{name}: {shown:#?}");
        assert!(report.checkpoints > 0 && report.writes > 0, "{name}: {report:?}");
        println!(
            "{name}: {} thread(s), {} checkpoints, {} writes, {} task ids not recomputed",
            report.threads, report.checkpoints, report.writes, report.unchecked_task_ids
        );
        checked += report.checkpoints;
        saver.close().await.unwrap();
    }
    assert!(checked > 20, "{checked}");
}

fn typed(v: &serde_json::Value) -> TypedBytes {
    TypedBytes::new(
        v["type"].as_str().unwrap(),
        hex::decode(v["hex"].as_str().unwrap()).unwrap(),
    )
}

fn value(v: &serde_json::Value) -> Value {
    let t = typed(v);
    JsonPlusSerializer.loads_typed(&t.tag, &t.data).unwrap()
}

/// The tuples Python's `InMemorySaver` returns for the dump at `path`, by
/// thread.
fn memory_tuples(path: &Path) -> BTreeMap<String, Vec<CheckpointTuple>> {
    let dump: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out: BTreeMap<String, Vec<CheckpointTuple>> = BTreeMap::new();
    for entry in dump["storage"].as_array().unwrap() {
        let (thread, ns) = (
            entry["thread_id"].as_str().unwrap(),
            entry["checkpoint_ns"].as_str().unwrap(),
        );
        let mut cp = Checkpoint::from_value(&value(&entry["checkpoint"])).unwrap();
        let metadata = CheckpointMetadata::from_value(&value(&entry["metadata"])).unwrap();
        for blob in dump["blobs"].as_array().unwrap() {
            let ch = blob["channel"].as_str().unwrap();
            let at_version = cp.channel_versions.get(ch).map(ToString::to_string);
            if blob["thread_id"] == thread
                && blob["checkpoint_ns"] == ns
                && at_version.as_deref() == blob["version"].as_str()
                && blob["value"]["type"] != "empty"
            {
                cp.channel_values.insert(ch.to_owned(), value(&blob["value"]));
            }
        }
        let id = cp.id.clone();
        let config = CheckpointConfig::new(thread).with_ns(ns).with_checkpoint_id(&id);
        let mut pending_writes: Vec<PendingWrite> = dump["writes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["thread_id"] == thread && w["checkpoint_ns"] == ns && w["checkpoint_id"] == id.as_str())
            .map(|w| {
                PendingWrite::new(
                    w["task_id"].as_str().unwrap(),
                    w["channel"].as_str().unwrap(),
                    value(&w["value"]),
                )
                .with_task_path(w["task_path"].as_str().unwrap())
                .with_idx(w["idx"].as_i64().unwrap())
            })
            .collect();
        pending_writes.sort_by(|a, b| (&a.task_path, &a.task_id, a.idx).cmp(&(&b.task_path, &b.task_id, b.idx)));
        out.entry(thread.to_owned()).or_default().push(CheckpointTuple {
            config,
            checkpoint: cp,
            metadata,
            parent_config: entry["parent_checkpoint_id"]
                .as_str()
                .map(|p| CheckpointConfig::new(thread).with_ns(ns).with_checkpoint_id(p)),
            pending_writes,
        });
    }
    out
}

#[test]
fn every_memory_fixture_verifies() {
    let dir = sqlite_support::testdata_dir().join("fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".memory.json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "{files:?}");
    for path in files {
        let mut writes = 0;
        for (thread, tuples) in memory_tuples(&path) {
            let mut verifier = ThreadVerifier::new(&thread);
            for t in &tuples {
                writes += t.pending_writes.len();
                verifier.push(t);
            }
            let report = verifier.finish();
            let shown: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
            assert!(report.is_ok(), "{}: {shown:#?}", path.display());
            assert_eq!(report.checkpoints, tuples.len());
        }
        assert!(writes > 0, "{}", path.display());
    }
}
