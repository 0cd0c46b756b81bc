//! The SQLite store against Python's `SqliteStore`
//! (langgraph-checkpoint-sqlite 3.1.2, sqlite-vec loaded), live, through
//! `scripts/store_python_peer.py --store sqlite`:
//!
//! * the recorded sequence (`testdata/store/sequence.json`) run by each on
//!   its own file gives the same results, scores to the last bit, but for
//!   the ops where Python's store has a known fault, each checked for what
//!   it is;
//! * a file Python's store wrote (`testdata/store/cross_write.json`: an
//!   index on the test embedding, TTLs, an item expired at once, one not
//!   indexed) reads the same through ours as through Python's
//!   (`cross_read.json`), and so does a file ours wrote, but for Python
//!   returning the expired item (langchain-ai/langgraph#8902) and ours
//!   listing the item without vectors after the ranked ones;
//! * our indexes by time (`store_updated_at_idx`,
//!   `store_prefix_updated_at_idx`) are transparent: Python's store
//!   migrates (its vector table), writes and reads a file that has them,
//!   ours adds them to a file Python created, and a read-only open of such
//!   a file creates nothing and reads the same without them.

use std::path::Path;
use std::process::Command;

use checkpointer::store::{SqliteStore, TtlConfig};
use serde_json::Value;

use crate::harness;
use crate::store_sequence::{
    index_config, index_config_of, python_store, run_on, run_path_on, sequence_path, testdata, without_expired,
};

/// The peer's results of the sequence at `seq` on Python's SqliteStore on `db`.
fn python_sqlite(db: &Path, seq: &Path) -> Value {
    python_store("sqlite", "--db", db.as_os_str(), seq)
}

async fn our_store(db: &Path, seq: &Path) -> SqliteStore {
    SqliteStore::builder(db)
        .index(index_config_of(seq))
        .ttl(TtlConfig::default())
        .open()
        .await
        .expect("open our store")
}

fn op(results: &Value, batch: usize, op: usize) -> &Value {
    &results[batch][op]
}

fn list(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("not a list: {v}"))
}

/// The entries of a search result that have a score.
fn scored(v: &Value) -> Vec<Value> {
    list(v).iter().filter(|e| !e["score"].is_null()).cloned().collect()
}

pub fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "store::python_sqlite_store_sequence_gives_our_results",
            &[&crate::PYTHON],
            2,
            sequence_against_python_sqlite,
        ),
        harness::tokio(
            "store::python_sqlite_file_reads_the_same_through_ours",
            &[&crate::PYTHON],
            2,
            || async { cross_read(Writer::Python).await },
        ),
        harness::tokio(
            "store::vector_scores_equal_sqlite_vec_to_the_last_bit",
            &[&crate::PYTHON],
            2,
            scores_equal_sqlite_vec,
        ),
        harness::tokio(
            "store::our_sqlite_file_reads_the_same_through_python",
            &[&crate::PYTHON],
            2,
            || async { cross_read(Writer::Ours).await },
        ),
        harness::tokio(
            "store::python_migrates_and_writes_a_file_with_our_time_index",
            &[&crate::PYTHON],
            2,
            || async { cross_read(Writer::PythonOnOurs).await },
        ),
    ]
}

async fn sequence_against_python_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let seq = sequence_path();
    let python = python_sqlite(&dir.path().join("python.sqlite"), &seq);
    let store = SqliteStore::builder(dir.path().join("ours.sqlite"))
        .index(index_config())
        .ttl(TtlConfig::default())
        .open()
        .await
        .unwrap();
    let ours = run_on(&store).await;
    let memory = crate::store_sequence::run().await;
    // (batch, op): where Python's SqliteStore is known to answer otherwise
    let known: &[(usize, usize)] = &[(1, 8), (1, 10), (3, 3), (3, 4), (4, 0)];
    // `{"n": {"$ne": 5}}`: its SQL (`json_extract(value, '$.n') != 5.0`) is
    // NULL for an item without `n`, which the in-memory store matches
    let has_n: Vec<Value> = list(op(&ours, 1, 8))
        .iter()
        .filter(|e| e["value"].get("n").is_some())
        .cloned()
        .collect();
    assert!(
        has_n.len() < list(op(&ours, 1, 8)).len(),
        "ours matches the item without n"
    );
    assert_eq!(op(&python, 1, 8), &Value::Array(has_n), "$ne on a missing field");
    // a filter on a nested object: Python's SqliteStore reads its keys as
    // operators and raises; ours matches as the in-memory store does
    let raised = op(&python, 1, 10)["error"].as_str().unwrap_or_default();
    assert!(raised.contains("Unsupported operator"), "{}", op(&python, 1, 10));
    assert_eq!(op(&ours, 1, 10), op(&memory, 1, 10), "nested filter as in memory");
    // a vector search: Python's leaves out the items without vectors (at
    // (3, 4), offset 3 is past the 3 ranked items: ours has only the item
    // without vectors, as in memory)
    for (b, i) in [(3, 3), (3, 4), (4, 0)] {
        assert!(
            scored(op(&ours, b, i)).len() < list(op(&ours, b, i)).len(),
            "batch {b}, op {i}: ours lists items without vectors"
        );
        assert_eq!(
            op(&python, b, i),
            &Value::Array(scored(op(&ours, b, i))),
            "batch {b}, op {i}: the ranked items and their scores"
        );
        assert_eq!(
            op(&ours, b, i).as_array().map(Vec::len),
            op(&memory, b, i).as_array().map(Vec::len)
        );
    }
    // everything else: the same, in the same order, scores to the last bit;
    // but a search without a query, newest first in both, is compared as a
    // set: Python's `updated_at` is `CURRENT_TIMESTAMP`, whole seconds, so
    // items put within one second tie and come in index order, where ours
    // (microseconds) has the later put first
    let spec = load(&seq);
    let batches = list(&python).len();
    assert_eq!(batches, list(&ours).len());
    for b in 0..batches {
        for i in 0..list(&python[b]).len() {
            if known.contains(&(b, i)) {
                continue;
            }
            let read = &spec["batches"][b][i];
            if read["op"] == "search" && read["query"].as_str().is_none_or(str::is_empty) {
                assert_eq!(
                    sorted(op(&ours, b, i)),
                    sorted(op(&python, b, i)),
                    "batch {b}, op {i}: ours (left), Python's SqliteStore (right)"
                );
                continue;
            }
            assert_eq!(
                op(&ours, b, i),
                op(&python, b, i),
                "batch {b}, op {i}: ours (left) differs from Python's SqliteStore (right)"
            );
        }
    }
}

enum Writer {
    Python,
    Ours,
    /// Python's store on a file ours created without an index configured:
    /// Python runs its vector migration on a file that has our index by
    /// time, then writes.
    PythonOnOurs,
}

/// Whether the file at `db` has our indexes by time.
fn has_time_index(db: &Path) -> bool {
    let conn = rusqlite::Connection::open(db).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index'
             AND name IN ('store_updated_at_idx', 'store_prefix_updated_at_idx')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(n == 0 || n == 2, "one of our two indexes: {n}");
    n == 2
}

/// The reads of `cross_read.json` on a file written by `writer` with
/// `cross_write.json`, by Python's store then by ours.
async fn cross_read(writer: Writer) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.sqlite");
    let (write, read) = (testdata("cross_write.json"), testdata("cross_read.json"));
    let mut read_only = None;
    match writer {
        Writer::Python => {
            python_sqlite(&db, &write);
            assert!(!has_time_index(&db), "Python's store made our index");
            // a read-only open creates nothing, and reads without the index
            let store = SqliteStore::builder(&db)
                .index(index_config_of(&read))
                .ttl(TtlConfig::default())
                .read_only(true)
                .open()
                .await
                .unwrap();
            read_only = Some(run_path_on(&store, &read).await);
            store.close().await.unwrap();
            assert!(!has_time_index(&db), "a read-only open made our index");
        }
        Writer::Ours => {
            let store = our_store(&db, &write).await;
            run_path_on(&store, &write).await;
            store.close().await.unwrap();
        }
        Writer::PythonOnOurs => {
            let store = SqliteStore::open(&db).await.unwrap();
            store.close().await.unwrap();
            assert!(has_time_index(&db));
            python_sqlite(&db, &write);
            assert!(has_time_index(&db), "Python's store dropped our index");
            let conn = rusqlite::Connection::open(&db).unwrap();
            let vector_migrations: i64 = conn
                .query_row("SELECT count(*) FROM vector_migrations", [], |r| r.get(0))
                .unwrap();
            assert_eq!(vector_migrations, 1, "Python migrated the vector table");
            let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
            assert_eq!(check, "ok");
        }
    }
    let python = python_sqlite(&db, &read);
    assert!(
        has_time_index(&db) == !matches!(writer, Writer::Python),
        "Python's reads left our index as it was"
    );
    let store = our_store(&db, &read).await;
    assert!(has_time_index(&db), "ours adds its index to the file");
    let ours = run_path_on(&store, &read).await;
    if let Some(read_only) = read_only {
        // without the index (prefix plan) as with it (walk)
        assert_eq!(read_only, ours, "read-only without the index, writable with it");
    }
    // Python's SqliteStore returns the item put with a TTL of 0 minutes
    // (it ignores expiry until a sweep, langchain-ai/langgraph#8902); ours
    // never does
    assert_eq!(op(&python, 0, 2)["key"], "expired", "{}", op(&python, 0, 2));
    assert_eq!(op(&ours, 0, 2), &Value::Null);
    let python = without_expired(&python);
    assert_eq!(list(&ours[0]).len(), list(&python[0]).len());
    let reads = load(&read);
    for (i, (o, p)) in list(&ours[0]).iter().zip(list(&python[0])).enumerate() {
        let read = &list(&reads["batches"][0])[i];
        if read["query"].is_string() {
            // ours lists the item put with index false after the ranked ones
            let unscored: Vec<&Value> = list(o).iter().filter(|e| e["score"].is_null()).collect();
            assert!(unscored.iter().all(|e| e["key"] == "plain"), "op {i}: {o}");
            assert_eq!(
                &Value::Array(scored(o)),
                p,
                "op {i}: the ranked items, scores to the last bit"
            );
        } else if read["op"] == "search" {
            // newest first; items put in one batch tie, and the two
            // stores' statements may break the tie differently
            assert_eq!(sorted(o), sorted(p), "op {i}: ours (left), Python's (right)");
        } else {
            assert_eq!(o, p, "op {i}: ours (left), Python's (right)");
        }
    }
    let searched = op(&ours, 0, 4);
    assert!(
        list(searched)
            .iter()
            .any(|e| e["key"] == "plain" && e["score"].is_null()),
        "the item without vectors follows the ranked ones: {searched}"
    );
}

fn load(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn sorted(v: &Value) -> Vec<String> {
    let mut all: Vec<String> = list(v).iter().map(Value::to_string).collect();
    all.sort();
    all
}

/// Random, non-integer vectors by text (`v0`, `q3`, ...): sums of
/// products that round in `f32`, where the order of the additions shows.
struct RandomVectors;

const RANDOM_DIMS: usize = 48;

fn random_vector(text: &str) -> Vec<f32> {
    // xorshift64* seeded by the text: the same vector every time
    let mut x = text.bytes().fold(0x9E37_79B9_7F4A_7C15u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    });
    (0..RANDOM_DIMS)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
            (r as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[async_trait::async_trait]
impl checkpointer::store::Embeddings for RandomVectors {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, checkpointer::store::EmbedError> {
        Ok(texts.iter().map(|t| random_vector(t)).collect())
    }
}

/// Our scores of random vectors (through a search of our store) against
/// sqlite-vec's own `vec_distance_cosine`, loaded by Python, over the same
/// blobs in the same file: equal as `f64`.
async fn scores_equal_sqlite_vec() {
    use checkpointer::store::{IndexConfig, Namespace, SearchOp, StoreExt};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("random.sqlite");
    let index = IndexConfig::new(RANDOM_DIMS, std::sync::Arc::new(RandomVectors)).fields(["text"]);
    let store = SqliteStore::builder(&db).index(index).open().await.unwrap();
    let ns = Namespace::new(["random"]).unwrap();
    for i in 0..40 {
        store
            .put(&ns, &format!("v{i}"), serde_json::json!({"text": format!("v{i}")}))
            .await
            .unwrap();
    }
    let mut ours = std::collections::BTreeMap::new();
    for j in 0..5 {
        for found in store
            .search(SearchOp::new(ns.clone()).query(format!("q{j}")).limit(100))
            .await
            .unwrap()
        {
            ours.insert(format!("q{j}/{}", found.item.key), found.score.expect("a score"));
        }
    }
    store.close().await.unwrap();
    assert_eq!(ours.len(), 200);
    let queries: Vec<String> = (0..5)
        .map(|j| {
            let blob: Vec<u8> = random_vector(&format!("q{j}"))
                .iter()
                .flat_map(|f| f.to_le_bytes())
                .collect();
            hex::encode(blob)
        })
        .collect();
    let script = r#"
import json, sys
import sqlite3
if not hasattr(sqlite3.Connection, "enable_load_extension"):
    from pysqlite3 import dbapi2 as sqlite3
import sqlite_vec
conn = sqlite3.connect(sys.argv[1])
conn.enable_load_extension(True)
sqlite_vec.load(conn)
out = {}
for j, q in enumerate(json.loads(sys.argv[2])):
    for key, score in conn.execute(
        "SELECT key, 1.0 - vec_distance_cosine(embedding, ?) FROM store_vectors", (bytes.fromhex(q),)
    ):
        out[f"q{j}/{key}"] = score
print(json.dumps(out))
"#;
    let python = std::env::var("CHECKPOINTER_PYTHON").expect("CHECKPOINTER_PYTHON");
    let out = Command::new(python)
        .args(["-c", script])
        .arg(&db)
        .arg(serde_json::to_string(&queries).unwrap())
        .output()
        .expect("run Python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs: std::collections::BTreeMap<String, f64> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(theirs.len(), ours.len());
    let differing: Vec<_> = ours
        .iter()
        .filter(|(k, v)| theirs.get(*k).map(|t| t.to_bits()) != Some(v.to_bits()))
        .map(|(k, v)| (k, v, theirs.get(k)))
        .collect();
    assert!(
        differing.is_empty(),
        "{} of 200 scores differ: {:?}",
        differing.len(),
        &differing[..differing.len().min(5)]
    );
}
