//! Python `InMemorySaver` dumps (`testdata/fixtures/*.memory.json`): every
//! payload Python wrote decodes and encodes back to the same bytes, and stored
//! checkpoints survive `Checkpoint::from_value` / `to_value(false)` unchanged.

use std::path::{Path, PathBuf};

use checkpointer::serde::json::to_python_json;
use checkpointer::serde::{msgpack, JsonPlusSerializer, Serializer, TypedBytes, Value};
use checkpointer::{Checkpoint, CheckpointMetadata};

/// `testdata/fixtures/*.memory.json`, sorted.
fn memory_fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".memory.json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.memory.json in {}", dir.display());
    files
}

fn typed(v: &serde_json::Value) -> TypedBytes {
    let tag = v["type"].as_str().unwrap();
    let data = hex::decode(v["hex"].as_str().unwrap()).unwrap();
    TypedBytes::new(tag, data)
}

/// The payload reads and is written back as the same (tag, bytes).
fn check_payload(t: &TypedBytes, what: &str) -> Option<Value> {
    if t.is_empty_marker() {
        assert!(t.data.is_empty(), "{what}: empty marker with data");
        return None;
    }
    let value = JsonPlusSerializer
        .loads_typed(&t.tag, &t.data)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let again = JsonPlusSerializer.dumps_typed(&value).unwrap();
    assert_eq!(&again, t, "{what}: re-serialized differently");
    if t.tag == "msgpack" {
        assert_eq!(msgpack::encode(&value).unwrap(), t.data, "{what}");
    }
    Some(value)
}

#[derive(Default, Debug)]
struct Counts {
    files: usize,
    blobs: usize,
    writes: usize,
    checkpoints: usize,
    exts: usize,
}

/// Counts extension values, checking that each LangGraph one (codes 0–7)
/// decoded into readable parts: Python always writes canonical payloads.
fn count_exts(v: &Value) -> usize {
    match v {
        Value::Ext(e) => {
            let inner = e
                .decoded()
                .unwrap_or_else(|| panic!("ext {} kept raw: {e:?}", e.code()));
            if (0..=5).contains(&e.code()) {
                assert!(e.module().is_some() && e.name().is_some() && e.arg().is_some(), "{e:?}");
            }
            1 + count_exts(inner)
        }
        Value::Array(items) => items.iter().map(count_exts).sum(),
        Value::Map(entries) => entries.iter().map(|(k, v)| count_exts(k) + count_exts(v)).sum(),
        _ => 0,
    }
}

#[test]
fn memory_fixtures_round_trip_byte_exactly() {
    let files = memory_fixtures();
    let mut n = Counts::default();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        n.files += 1;

        for (i, blob) in doc["blobs"].as_array().unwrap().iter().enumerate() {
            let what = format!("{name} blob {i} ({})", blob["channel"]);
            if let Some(v) = check_payload(&typed(&blob["value"]), &what) {
                n.exts += count_exts(&v);
            }
            n.blobs += 1;
        }

        for (i, write) in doc["writes"].as_array().unwrap().iter().enumerate() {
            let what = format!("{name} write {i} ({})", write["channel"]);
            if let Some(v) = check_payload(&typed(&write["value"]), &what) {
                n.exts += count_exts(&v);
            }
            n.writes += 1;
        }

        for (i, entry) in doc["storage"].as_array().unwrap().iter().enumerate() {
            let what = format!("{name} checkpoint {i} ({})", entry["checkpoint_id"]);
            let stored = typed(&entry["checkpoint"]);
            assert_eq!(stored.tag, "msgpack", "{what}");
            let value = check_payload(&stored, &what).unwrap();
            let cp = Checkpoint::from_value(&value).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(cp.id, entry["checkpoint_id"].as_str().unwrap(), "{what}");
            assert!(
                cp.channel_values.is_empty(),
                "{what}: InMemory stores no channel_values"
            );
            let back = msgpack::encode(&cp.to_value(false)).unwrap();
            assert_eq!(back, stored.data, "{what}: Checkpoint::to_value(false) differs");
            n.exts += count_exts(&value);

            let what = format!("{name} metadata {i}");
            let stored = typed(&entry["metadata"]);
            let value = check_payload(&stored, &what).unwrap();
            let meta = CheckpointMetadata::from_value(&value).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(msgpack::encode(&meta.to_value()).unwrap(), stored.data, "{what}");
            assert!(meta.step().is_some(), "{what}: no step");
            // metadata is JSON-able, as the SQLite saver needs it to be
            let json = to_python_json(&value).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(meta.to_python_json().unwrap(), json);
            assert_eq!(CheckpointMetadata::from_json(json.as_bytes()).unwrap(), meta, "{what}");
            n.checkpoints += 1;
        }
    }
    eprintln!("checked {n:?}");
    assert!(
        n.files >= 4 && n.blobs > 0 && n.writes > 0 && n.checkpoints > 0,
        "{n:?}"
    );
    // f_messages holds LangChain messages: extension values must have been seen
    assert!(n.exts > 0, "{n:?}");
}
