//! `SqliteStore` on a real file: the Store conformance suite (with and
//! without an index; every check's store on one shared file, as several
//! processes would share it), the model-based test against the `BTreeMap`
//! oracle, TTL with a clock the test moves, the sequence of
//! `testdata/store/` against the in-memory results, rows as Python's
//! `SqliteStore` writes them, and a failed batch leaving nothing.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use checkpointer::store::{
    GetOp, HashedNgramEmbeddings, IndexConfig, Namespace, Op, PutOp, SearchOp, SqliteStore, Store, StoreExt, Ttl,
    TtlConfig,
};
use parking_lot::Mutex;
use serde_json::json;

/// One file for every conformance check of this binary.
fn shared_file() -> std::path::PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .join("store.sqlite")
}

fn index(dims: usize) -> IndexConfig {
    IndexConfig::new(dims, Arc::new(HashedNgramEmbeddings::new(dims))).fields(["text"])
}

mod plain {
    use super::*;
    checkpointer::store_conformance_tests!(|| async {
        Arc::new(SqliteStore::open(shared_file()).await.expect("open the store")) as Arc<dyn Store>
    });
}

mod indexed {
    use super::*;
    checkpointer::store_conformance_tests!(|| async {
        let store = SqliteStore::builder(shared_file()).index(index(64)).open().await;
        Arc::new(store.expect("open the store")) as Arc<dyn Store>
    });
}

#[test]
fn sqlite_store_matches_the_oracle() {
    use proptest::test_runner::{Config, TestRunner};
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = rt.block_on(SqliteStore::open(dir.path().join("model.sqlite"))).unwrap();
    runner
        .run(&checkpointer::store::conformance::model::model_batches(), |batches| {
            // each case under a fresh root of the same file
            rt.block_on(checkpointer::store::conformance::model::check_against_oracle(
                &store, &batches,
            ))
            .map_err(|f| proptest::test_runner::TestCaseError::fail(f.to_string()))
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// A clock the test moves by hand.
fn manual_clock() -> (Arc<Mutex<SystemTime>>, impl Fn() -> SystemTime + Send + Sync + 'static) {
    let now = Arc::new(Mutex::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)));
    let read = Arc::clone(&now);
    (now, move || *read.lock())
}

fn advance(clock: &Mutex<SystemTime>, minutes: u64) {
    *clock.lock() += Duration::from_secs(minutes * 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_expires_after_its_minutes_and_reads_refresh_it() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, read) = manual_clock();
    let store = SqliteStore::builder(dir.path().join("ttl.sqlite"))
        .ttl(TtlConfig::default())
        .clock(read)
        .open()
        .await
        .unwrap();
    let ns = Namespace::new(["ttl"]).unwrap();
    for key in ["read", "unread", "norefresh", "searched"] {
        store
            .put_op(PutOp::new(ns.clone(), key, json!({"k": key})).ttl(Ttl::Minutes(10.0)))
            .await
            .unwrap();
    }
    advance(&clock, 9);
    assert!(store.get(&ns, "read").await.unwrap().is_some());
    let quiet = SearchOp::new(ns.clone()).refresh_ttl(false);
    assert_eq!(store.search(quiet).await.unwrap().len(), 4);
    let filter = checkpointer::store::Filter::new().eq("k", "searched");
    assert_eq!(
        store
            .search(SearchOp::new(ns.clone()).filter(filter))
            .await
            .unwrap()
            .len(),
        1
    );
    advance(&clock, 2); // 11 minutes after the puts, 2 after the refreshing reads
    assert!(
        store.get(&ns, "read").await.unwrap().is_some(),
        "the get restarted its TTL"
    );
    assert!(
        store.get(&ns, "searched").await.unwrap().is_some(),
        "the search restarted its TTL"
    );
    assert!(store.get(&ns, "unread").await.unwrap().is_none(), "expired");
    assert!(
        store.get(&ns, "norefresh").await.unwrap().is_none(),
        "a search with refresh_ttl false did not refresh"
    );
    assert_eq!(
        store.list_namespaces(Default::default()).await.unwrap(),
        std::slice::from_ref(&ns),
        "the namespace still holds live items"
    );
    assert_eq!(store.sweep_ttl().await.unwrap(), 2);
    assert_eq!(store.sweep_ttl().await.unwrap(), 0);
    advance(&clock, 10);
    assert!(
        store.get(&ns, "read").await.unwrap().is_none(),
        "10 minutes after its last read"
    );
    assert!(store.list_namespaces(Default::default()).await.unwrap().is_empty());
    // the same in a batch with a write: the reads refresh inside its transaction
    store
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "late", json!({})).ttl(Ttl::Minutes(3.0))),
            Op::Get(GetOp::new(ns.clone(), "late")),
        ])
        .await
        .unwrap();
    advance(&clock, 2);
    let _ = store.get(&ns, "late").await.unwrap().expect("live");
    advance(&clock, 2);
    assert!(store.get(&ns, "late").await.unwrap().is_some(), "refreshed at minute 2");
}

/// The in-memory sequence's results, but for the order of items without a
/// score (newest first here, as Python's SQLite store orders a search;
/// insertion order in memory): the ranked items in order, scores within
/// `f32` rounding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_sequence_gives_the_in_memory_results() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("seq.sqlite"))
        .index(crate::store_sequence::index_config())
        .open()
        .await
        .unwrap();
    let ours = crate::store_sequence::run_on(&store).await;
    let memory = crate::store_sequence::run().await;
    let (ours, memory) = (ours.as_array().unwrap(), memory.as_array().unwrap());
    assert_eq!(ours.len(), memory.len());
    for (b, (o, m)) in ours.iter().zip(memory).enumerate() {
        for (i, (x, y)) in o.as_array().unwrap().iter().zip(m.as_array().unwrap()).enumerate() {
            let (Some(xs), Some(ys)) = (x.as_array(), y.as_array()) else {
                assert_eq!(x, y, "batch {b}, op {i}");
                continue;
            };
            assert_eq!(xs.len(), ys.len(), "batch {b}, op {i}: {x} vs {y}");
            // items with a score in rank order, then those without in any order
            let key = |e: &serde_json::Value| {
                let scoreless = e["score"].is_null();
                let k = (e["ns"].to_string(), e["key"].to_string(), e["value"].to_string());
                (scoreless, k)
            };
            let sorted = |list: &[serde_json::Value]| {
                let mut keys: Vec<_> = list.iter().map(key).collect();
                let first = keys.iter().position(|(scoreless, _)| *scoreless).unwrap_or(keys.len());
                keys[first..].sort();
                keys
            };
            assert_eq!(sorted(xs), sorted(ys), "batch {b}, op {i}");
            let by_key = |list: &[serde_json::Value]| {
                let mut v: Vec<_> = list.iter().map(|e| (key(e).1, e["score"].as_f64())).collect();
                v.sort_by(|a, b| a.0.cmp(&b.0));
                v
            };
            let (xs, ys) = (by_key(xs), by_key(ys));
            for ((_, e), (_, f)) in xs.iter().zip(&ys) {
                match (*e, *f) {
                    (Some(s), Some(t)) => assert!((s - t).abs() < 1e-6, "batch {b}, op {i}: {s} vs {t}"),
                    (s, t) => assert_eq!(s, t, "batch {b}, op {i}"),
                }
            }
        }
    }
}

/// Rows as Python's `SqliteStore` writes them (value a BLOB of orjson
/// bytes, `CURRENT_TIMESTAMP` times, `expires_at` as `str(datetime)`) are
/// read, expired ones are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_in_python_form_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("py.sqlite");
    let store = SqliteStore::open(&path).await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) VALUES
         ('users.ada', 'prefs', CAST('{\"theme\":\"dark\",\"é\":[1.5,null]}' AS BLOB), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, NULL, NULL),
         ('users.ada', 'old', CAST('{}' AS BLOB), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '2001-01-01 00:00:00.000001+00:00', 5.0),
         ('users.ada', 'later', CAST('{}' AS BLOB), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '2999-01-01 00:00:00+00:00', 5.0)",
    )
    .unwrap();
    let ns = Namespace::new(["users", "ada"]).unwrap();
    let item = store.get(&ns, "prefs").await.unwrap().expect("Python's row");
    assert_eq!(
        serde_json::Value::Object(item.value),
        json!({"theme": "dark", "é": [1.5, null]})
    );
    let age = SystemTime::now().duration_since(item.created_at).unwrap_or_default();
    assert!(
        age < Duration::from_secs(3600),
        "CURRENT_TIMESTAMP read as UTC: {age:?}"
    );
    assert!(store.get(&ns, "old").await.unwrap().is_none(), "expired in 2001");
    assert!(store.get(&ns, "later").await.unwrap().is_some());
    assert_eq!(store.search(SearchOp::new(ns.clone())).await.unwrap().len(), 2);
    // and ours as Python reads them: compact JSON bytes, str(datetime) times
    store.put(&ns, "ours", json!({"a": [1, 2.5]})).await.unwrap();
    let (value, created): (Vec<u8>, String) = conn
        .query_row("SELECT value, created_at FROM store WHERE key = 'ours'", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(value, br#"{"a":[1,2.5]}"#);
    assert!(
        created.ends_with("+00:00") && created.as_bytes()[10] == b' ',
        "{created}"
    );
    let migrations: Vec<i64> = conn
        .prepare("SELECT v FROM store_migrations ORDER BY v")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(migrations, [0, 1, 2, 3, 4]);
    store.close().await.unwrap();
}

/// A batch whose search fails inside the transaction (vectors of another
/// length in the file) stores nothing of its puts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_failing_in_sql_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dims.sqlite");
    let ns = Namespace::new(["docs"]).unwrap();
    let small = SqliteStore::builder(&path).index(index(8)).open().await.unwrap();
    small.put(&ns, "a", json!({"text": "short vectors"})).await.unwrap();
    small.close().await.unwrap();
    let big = SqliteStore::builder(&path).index(index(16)).open().await.unwrap();
    let out = big
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "b", json!({"text": "long vectors"}))),
            Op::Search(SearchOp::new(ns.clone()).query("vectors")),
        ])
        .await;
    assert!(matches!(out, Err(checkpointer::Error::Storage { .. })), "{out:?}");
    assert!(
        big.get(&ns, "b").await.unwrap().is_none(),
        "the put of the failed batch"
    );
    assert!(big.get(&ns, "a").await.unwrap().is_some());
}

/// What was stored is there after a reopen, vectors included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_and_vectors_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopen.sqlite");
    let ns = Namespace::new(["docs"]).unwrap();
    let store = SqliteStore::builder(&path).index(index(32)).open().await.unwrap();
    store.put(&ns, "rust", json!({"text": "rust ownership"})).await.unwrap();
    store.put(&ns, "soup", json!({"text": "tomato soup"})).await.unwrap();
    let before = store
        .search(SearchOp::new(ns.clone()).query("ownership"))
        .await
        .unwrap();
    store.close().await.unwrap();
    let store = SqliteStore::builder(&path).index(index(32)).open().await.unwrap();
    let after = store
        .search(SearchOp::new(ns.clone()).query("ownership"))
        .await
        .unwrap();
    assert_eq!(after, before);
    assert_eq!(after[0].item.key, "rust");
    store.delete(&ns, "rust").await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let vectors: i64 = conn
        .query_row("SELECT count(*) FROM store_vectors WHERE key = 'rust'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(vectors, 0, "a delete removes the item's vectors");
}
