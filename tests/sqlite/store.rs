//! `SqliteStore` on a real file: the Store conformance suite (with and
//! without an index; every check's store on one shared file, as several
//! processes would share it), the model-based test against the `BTreeMap`
//! oracle, TTL with a clock the test moves, the sequence of
//! `testdata/store/` against the in-memory results, rows as Python's
//! `SqliteStore` writes them, and a failed batch leaving nothing.

use std::sync::{Arc, OnceLock};

use checkpointer::store::{
    HashedNgramEmbeddings, IndexConfig, Namespace, Op, PutOp, SearchOp, SqliteStore, Store, StoreExt,
};
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
async fn ttl_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ttl.sqlite");
    crate::store_suite::ttl_scenarios(|ttl, clock| {
        let builder = SqliteStore::builder(&path).ttl(ttl).clock(clock);
        async move { builder.open().await.unwrap() }
    })
    .await;
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
    crate::store_suite::python_rows_read(&store).await;
    let ns = Namespace::new(["users", "ada"]).unwrap();
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

/// Searches without a query give the same pages walking our index by time
/// as reading the prefix and sorting (the same file without the index):
/// newest first, the puts of one batch (one time) in row order (by
/// namespace first under a prefix), as Python's statements give them; across wide and narrow prefixes, an old namespace (the walk's bound
/// spent, the prefix plan finishing), filters SQL decides and filters it
/// does not, offsets, and items expired at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walk_by_time_pages_as_the_prefix_plan() {
    use checkpointer::store::{Filter, FilterOp, Ttl};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("walk.sqlite");
    let store = SqliteStore::open(&path).await.unwrap();
    let ns = |labels: &[&str]| Namespace::new(labels.iter().copied()).unwrap();
    // the old namespace first, then 29 batches of 100 spread over others
    let old: Vec<Op> = (0..100)
        .map(|i| {
            Op::Put(PutOp::new(
                ns(&["w", "old"]),
                format!("o{i:03}"),
                json!({"kind": "k1", "n": i}),
            ))
        })
        .collect();
    store.batch(old).await.unwrap();
    for b in 0..29 {
        let ops: Vec<Op> = (0..100)
            .map(|j| {
                let i = b * 100 + j;
                let place = match i % 10 {
                    0 => ns(&["w", "u1", "deep"]),
                    k => ns(&["w", &format!("u{}", k % 7)]),
                };
                let put = PutOp::new(
                    place,
                    format!("k{}", 3000 - i),
                    json!({"kind": format!("k{}", i % 3), "n": i}),
                );
                Op::Put(if i % 13 == 0 { put.ttl(Ttl::Minutes(0.0)) } else { put })
            })
            .collect();
        store.batch(ops).await.unwrap();
    }
    // a few rare items, and one namespace of few items
    for i in 0..30 {
        store
            .put(&ns(&["few"]), &format!("f{i}"), json!({"kind": "rare", "n": i}))
            .await
            .unwrap();
    }
    let searches = |prefix: &[&str]| {
        let p = ns(prefix);
        vec![
            SearchOp::new(p.clone()).limit(10),
            SearchOp::new(p.clone()).limit(7).offset(95),
            SearchOp::new(p.clone())
                .filter(Filter::new().eq("kind", "k2"))
                .limit(10)
                .offset(3),
            SearchOp::new(p.clone())
                .filter(Filter::new().eq("kind", "rare"))
                .limit(10),
            SearchOp::new(p.clone())
                .filter(Filter::new().compare("n", FilterOp::Gt, 2990))
                .limit(5),
            SearchOp::new(p).filter(Filter::new().eq("kind", "none")).limit(10),
        ]
    };
    let prefixes: [&[&str]; 7] = [
        &[],
        &["w"],
        &["w", "u1"],
        &["w", "u1", "deep"],
        &["w", "old"],
        &["few"],
        &["none"],
    ];
    let run = |store: SqliteStore| async move {
        let mut out = Vec::new();
        for prefix in prefixes {
            for op in searches(prefix) {
                out.push(store.search(op).await.unwrap());
            }
        }
        store.close().await.unwrap();
        out
    };
    let walked = run(store).await;
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("DROP INDEX store_updated_at_idx").unwrap();
    let read_only = SqliteStore::builder(&path).read_only(true).open().await.unwrap();
    let sorted = run(read_only).await;
    assert_eq!(walked.len(), sorted.len());
    for (i, (w, s)) in walked.iter().zip(&sorted).enumerate() {
        assert_eq!(w, s, "search {i}: walked (left), sorted (right)");
        for pair in w.windows(2) {
            let (a, b) = (&pair[0].item, &pair[1].item);
            assert!(a.updated_at >= b.updated_at, "search {i}: {a:?} before {b:?}");
        }
    }
    assert!(walked.iter().any(|page| page.len() == 10), "pages were found");
    assert_eq!(walked[4 * 6].len(), 10, "the old namespace is found");
    // the index is gone: a read-only open did not make it again
    let indexes: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'store_updated_at_idx'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(indexes, 0);
    // a writable open adds it again, and a store that sees it dropped
    // while open still searches
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(
        conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'store_updated_at_idx'",
            [],
            |r| r.get::<_, i64>(0)
        )
        .unwrap(),
        1
    );
    conn.execute_batch("DROP INDEX store_updated_at_idx").unwrap();
    let again = store.search(SearchOp::new(ns(&["w"])).limit(10)).await.unwrap();
    assert_eq!(again, sorted[6]);
}
