//! The PostgreSQL store against Python's `PostgresStore`
//! (langgraph-checkpoint-postgres 3.2.0), live, each on a fresh database,
//! through `scripts/store_python_peer.py --store postgres`. Without an
//! index on both sides: this server has no pgvector, which Python's store
//! needs for one too, so the sequences' queries are plain searches.
//!
//! * the recorded sequence (`testdata/store/sequence.json`) run by each
//!   gives the same results but for the ops where Python's store is known
//!   to answer otherwise, each checked for what it is;
//! * a database Python's store wrote (`testdata/store/cross_write.json`,
//!   TTLs included) reads the same through ours as through Python's
//!   (`cross_read.json`), and so does one ours wrote, but for Python
//!   returning the item expired at once (it omits expired items only with
//!   `omit_expired`); the TTL columns each side writes are the same.

use std::path::Path;
use std::process::Command;

use checkpointer::store::{PostgresStore, TtlConfig};
use serde_json::Value;

use crate::harness;
use crate::postgres_support::{self, url_of, TestDatabase};
use crate::store_sequence::{run_path_on, sequence_path};

fn testdata(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/store")
        .join(name)
}

/// The peer's results of the sequence at `seq` on Python's PostgresStore at `url`.
fn python_postgres(url: &str, seq: &Path) -> Value {
    let python = std::env::var("CHECKPOINTER_PYTHON").expect("CHECKPOINTER_PYTHON");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/store_python_peer.py");
    let out = Command::new(python)
        .arg(script)
        .args(["--store", "postgres", "--url", url])
        .arg(seq)
        .output()
        .expect("run the Python peer");
    assert!(
        out.status.success(),
        "peer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the peer's JSON")
}

async fn our_store(url: &str) -> PostgresStore {
    PostgresStore::builder()
        .url(url)
        .ttl(TtlConfig::default())
        .max_connections(2)
        .open()
        .await
        .expect("open our store")
}

async fn fresh() -> (TestDatabase, String) {
    let db = postgres_support::fresh_database().await.expect("a fresh database");
    let url = url_of(&db.0);
    (db, url)
}

pub fn tests() -> Vec<harness::Trial> {
    let needs: &[&'static harness::Need] = &[&crate::PYTHON, &crate::POSTGRES];
    vec![
        harness::tokio(
            "store::python_postgres_store_sequence_gives_our_results",
            needs,
            2,
            sequence_against_python_postgres,
        ),
        harness::tokio(
            "store::python_postgres_database_reads_the_same_through_ours",
            needs,
            2,
            || async { cross_read(Writer::Python).await },
        ),
        harness::tokio(
            "store::our_postgres_database_reads_the_same_through_python",
            needs,
            2,
            || async { cross_read(Writer::Ours).await },
        ),
    ]
}

fn list(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("not a list: {v}"))
}

fn sorted(v: &Value) -> Vec<String> {
    let mut all: Vec<String> = list(v).iter().map(Value::to_string).collect();
    all.sort();
    all
}

fn load(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Compares a search's results: items put in one batch tie on
/// `updated_at` (one statement's time in Python's store, the batch's in
/// ours) and the two break ties differently, so a whole result is
/// compared as a set, and a page cut out of tied items by its length.
fn assert_same_search(spec: &Value, ours: &Value, python: &Value, at: &str) {
    let whole = spec["offset"] == 0 && list(ours).len() < spec["limit"].as_u64().unwrap_or(0) as usize;
    if whole {
        assert_eq!(
            sorted(ours),
            sorted(python),
            "{at}: ours (left), Python's PostgresStore (right)"
        );
    } else {
        assert_eq!(list(ours).len(), list(python).len(), "{at}: a page of tied items");
    }
}

async fn sequence_against_python_postgres() {
    let (_theirs, their_url) = fresh().await;
    let (_ours, our_url) = fresh().await;
    let seq = sequence_path();
    let python = python_postgres(&their_url, &seq);
    let store = our_store(&our_url).await;
    let ours = run_path_on(&store, &seq).await;
    // `{"n": {"$ne": 5}}`: Python's SQL (`value->'n' != '5'::jsonb`) is NULL
    // for an item without `n`, which the contract (and the in-memory
    // store) matches
    let has_n: Vec<Value> = list(&ours[1][8])
        .iter()
        .filter(|e| e["value"].get("n").is_some())
        .cloned()
        .collect();
    assert!(has_n.len() < list(&ours[1][8]).len(), "ours matches the item without n");
    assert_eq!(
        sorted(&python[1][8]),
        sorted(&Value::Array(has_n)),
        "$ne on a missing field"
    );
    // a filter on a nested object: Python's reads its keys as operators
    let raised = python[1][10]["error"].as_str().unwrap_or_default();
    assert!(raised.contains("Unsupported operator"), "{}", python[1][10]);
    assert_eq!(list(&ours[1][10]).len(), 1, "the nested filter matches as in memory");
    let spec = load(&seq);
    for (b, batch) in list(&python).iter().enumerate() {
        for (i, theirs) in list(batch).iter().enumerate() {
            if [(1, 8), (1, 10)].contains(&(b, i)) {
                continue;
            }
            let (op, mine) = (&spec["batches"][b][i], &ours[b][i]);
            let at = format!("batch {b}, op {i}");
            if op["op"] == "search" {
                assert_same_search(op, mine, theirs, &at);
            } else {
                assert_eq!(
                    mine, theirs,
                    "{at}: ours (left) differs from Python's PostgresStore (right)"
                );
            }
        }
    }
}

enum Writer {
    Python,
    Ours,
}

/// Python's results without the expired item and the namespace only it
/// fills (`docs.old`).
fn without_expired(python: &Value) -> Value {
    let mut out = python.clone();
    for result in out[0].as_array_mut().into_iter().flatten() {
        if result["key"] == "expired" {
            *result = Value::Null;
        }
        if let Some(entries) = result.as_array_mut() {
            entries.retain(|e| e["key"] != "expired" && *e != serde_json::json!(["docs", "old"]));
        }
    }
    out
}

/// Each row's key, `ttl_minutes` and TTL in whole seconds
/// (`expires_at - updated_at`).
async fn ttl_rows(db: &str) -> Vec<(String, Option<i32>, Option<f64>)> {
    let client = postgres_support::connect(db).await.unwrap();
    client
        .query(
            "SELECT key, ttl_minutes, round(extract(epoch FROM expires_at - updated_at))::float8 FROM store ORDER BY key",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// The reads of `cross_read.json` on a database written by `writer` with
/// `cross_write.json`, by Python's store then by ours.
async fn cross_read(writer: Writer) {
    let (db, url) = fresh().await;
    let (write, read) = (testdata("cross_write.json"), testdata("cross_read.json"));
    match writer {
        Writer::Python => {
            python_postgres(&url, &write);
        }
        Writer::Ours => {
            let store = our_store(&url).await;
            run_path_on(&store, &write).await;
        }
    }
    // the TTL columns, as Python writes them: whole minutes in the INT
    // column (90.5 minutes rounds to 90), the exact TTL in expires_at
    let rows = ttl_rows(&db.0).await;
    let ttl = |key: &str| rows.iter().find(|r| r.0 == key).map(|r| (r.1, r.2)).unwrap();
    assert_eq!(ttl("async"), (Some(60), Some(3600.0)));
    assert_eq!(ttl("gen"), (Some(90), Some(5430.0)));
    assert_eq!(ttl("expired"), (Some(0), Some(0.0)));
    assert_eq!(ttl("own"), (None, None));
    let python = python_postgres(&url, &read);
    let store = our_store(&url).await;
    let ours = run_path_on(&store, &read).await;
    // Python's PostgresStore returns the item put with a TTL of 0 minutes
    // (it omits expired items only with `omit_expired`); ours never does
    assert_eq!(python[0][2]["key"], "expired", "{}", python[0][2]);
    assert_eq!(ours[0][2], Value::Null);
    let python = without_expired(&python);
    let reads = load(&read);
    assert_eq!(list(&ours[0]).len(), list(&python[0]).len());
    for (i, (o, p)) in list(&ours[0]).iter().zip(list(&python[0])).enumerate() {
        let op = &reads["batches"][0][i];
        if op["op"] == "search" {
            assert_same_search(op, o, p, &format!("op {i}"));
        } else {
            assert_eq!(o, p, "op {i}: ours (left), Python's (right)");
        }
    }
}
