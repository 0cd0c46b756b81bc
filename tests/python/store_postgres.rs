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
//!   `omit_expired`); the TTL columns each side writes are the same;
//! * our index by time (`store_updated_at_idx`) is added by ours to a
//!   database Python's store set up, and Python's store sets up, reads and
//!   refreshes TTLs in a database that has it.

use std::ffi::OsStr;
use std::path::Path;

use checkpointer::store::{PostgresStore, TtlConfig};
use serde_json::Value;

use crate::harness;
use crate::postgres_support::{self, url_of, TestDatabase};
use crate::store_sequence::{
    assert_same_but_ties, canonical, python_store, run_path_on, sequence_path, testdata, without_expired,
};

/// The peer's results of the sequence at `seq` on Python's PostgresStore at `url`.
fn python_postgres(url: &str, seq: &Path) -> Value {
    python_store("postgres", "--url", OsStr::new(url), seq)
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
    let mut all: Vec<String> = list(v).iter().map(canonical).collect();
    all.sort();
    all
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
    assert_same_but_ties(&seq, &ours, &python, "Python's PostgresStore", &[(1, 8), (1, 10)]);
}

enum Writer {
    Python,
    Ours,
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

/// Whether the database at `db` has our index by time.
async fn has_time_index(db: &str) -> bool {
    let client = postgres_support::connect(db).await.unwrap();
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'store' AND indexname = 'store_updated_at_idx'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    n == 1
}

/// The reads of `cross_read.json` on a database written by `writer` with
/// `cross_write.json`, by Python's store then by ours.
async fn cross_read(writer: Writer) {
    let (db, url) = fresh().await;
    let (write, read) = (testdata("cross_write.json"), testdata("cross_read.json"));
    match writer {
        Writer::Python => {
            python_postgres(&url, &write);
            assert!(!has_time_index(&db.0).await, "Python's store made our index");
        }
        Writer::Ours => {
            let store = our_store(&url).await;
            run_path_on(&store, &write).await;
        }
    }
    let ours_first = matches!(writer, Writer::Ours);
    assert_eq!(has_time_index(&db.0).await, ours_first);
    // the TTL columns, as Python writes them: whole minutes in the INT
    // column (90.5 minutes rounds to 90), the exact TTL in expires_at
    let rows = ttl_rows(&db.0).await;
    let ttl = |key: &str| rows.iter().find(|r| r.0 == key).map(|r| (r.1, r.2)).unwrap();
    assert_eq!(ttl("async"), (Some(60), Some(3600.0)));
    assert_eq!(ttl("gen"), (Some(90), Some(5430.0)));
    assert_eq!(ttl("expired"), (Some(0), Some(0.0)));
    assert_eq!(ttl("own"), (None, None));
    let python = python_postgres(&url, &read);
    assert_eq!(has_time_index(&db.0).await, ours_first, "Python's setup and reads");
    let store = our_store(&url).await;
    assert!(has_time_index(&db.0).await, "ours adds its index");
    let ours = run_path_on(&store, &read).await;
    // Python's PostgresStore returns the item put with a TTL of 0 minutes
    // (it omits expired items only with `omit_expired`); ours never does
    assert_eq!(python[0][2]["key"], "expired", "{}", python[0][2]);
    assert_eq!(ours[0][2], Value::Null);
    let python = without_expired(&python);
    assert_same_but_ties(&read, &ours, &python, "Python's PostgresStore", &[]);
}
