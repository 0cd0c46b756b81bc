//! `SqliteStore` on a real file: the Store conformance suite (with and
//! without an index; every check's store on one shared file, as several
//! processes would share it), the model-based test against the `BTreeMap`
//! oracle, TTL with a clock the test moves, the sequence of
//! `testdata/store/` against the in-memory results, rows as Python's
//! `SqliteStore` writes them, and a failed batch leaving nothing.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use checkpointer::store::{
    HashedNgramEmbeddings, IndexConfig, Namespace, Op, PutOp, SearchOp, SqliteStore, Store, StoreExt, TtlConfig,
};
use serde_json::json;

use crate::store_suite::manual_clock;

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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = rt.block_on(SqliteStore::open(dir.path().join("model.sqlite"))).unwrap();
    crate::store_suite::matches_the_oracle(&store, 32, &rt);
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
    crate::store_suite::ttl_expires_after_its_minutes_and_reads_refresh_it(&store, &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_ttl_applies_and_refresh_on_read_false_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, read) = manual_clock();
    let store = SqliteStore::builder(dir.path().join("ttl.sqlite"))
        .ttl(crate::store_suite::five_minutes_no_refresh())
        .clock(read)
        .open()
        .await
        .unwrap();
    crate::store_suite::default_ttl_applies_and_refresh_on_read_false_is_kept(&store, &clock).await;
}

/// The in-memory sequence's results, but for the order of items without a
/// score (newest first here, as Python's SQLite store orders a search;
/// insertion order in memory).
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
    crate::store_suite::assert_same_but_unranked_order(&ours, &memory);
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
