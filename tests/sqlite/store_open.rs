//! The store's front door on `sqlite://` URLs (created, required, read
//! only) and `SqliteStore`'s background TTL sweeper on a real file: rows
//! deleted without a call, in slices, the task ended when the store is
//! dropped.

use std::path::Path;
use std::time::Duration;

use checkpointer::store::{Namespace, PutOp, SqliteStore, Store, StoreExt, StoreOptions, TtlConfig};
use checkpointer::Error;
use serde_json::json;

use crate::store_sweeper::{ends_on_drop, stops_when_asked, sweep_namespace, swept_without_a_call};

fn url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

fn rows(path: &Path, prefix: &str) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT count(*) FROM store WHERE prefix = ?1", [prefix], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn sqlite_url_creates_requires_and_reads_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.sqlite");
    let missing = dir.path().join("missing.sqlite");
    for options in [StoreOptions::new().create(false), StoreOptions::new().read_only(true)] {
        let e = options.open(&url(&missing)).await.map(drop).unwrap_err();
        assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
    }
    assert!(!missing.exists());
    let e = checkpointer::store::open(&url(&dir.path().join("no/such/dir.sqlite")))
        .await
        .map(drop)
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
    let e = checkpointer::store::open(&url(dir.path())).await.map(drop).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");

    // written through the front door, then closed (its WAL folded in)
    drop(checkpointer::store::open(&url(&file)).await.unwrap());
    // a dropped store's writer thread closes its connection on its own
    // time: until then a later store's close is not the last one, and the
    // WAL would be folded into the file after the snapshot below
    let wal = dir.path().join("memory.sqlite-wal");
    for _ in 0..1000 {
        if !wal.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!wal.exists(), "the dropped store never closed its connection");
    let store = SqliteStore::open(&file).await.unwrap();
    let ns = Namespace::new(["users", "ada"]).unwrap();
    store.put(&ns, "prefs", json!({"theme": "dark"})).await.unwrap();
    store
        .put_op(PutOp::new(ns.clone(), "ttl", json!({})).ttl(checkpointer::store::Ttl::Minutes(10.0)))
        .await
        .unwrap();
    store.close().await.unwrap();
    drop(store);
    let before = std::fs::read(&file).unwrap();
    let expires: String = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("SELECT expires_at FROM store WHERE key = 'ttl'", [], |r| r.get(0))
        .unwrap();

    let reader = StoreOptions::new().read_only(true).ttl(TtlConfig::default());
    let store = reader.open(&url(&file)).await.unwrap();
    assert_eq!(store.get(&ns, "prefs").await.unwrap().unwrap().value["theme"], "dark");
    assert!(store.get(&ns, "ttl").await.unwrap().is_some());
    let e = store.put(&ns, "x", json!({})).await.map(drop).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    let e = store.sweep_ttl().await.map(drop).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    drop(store);
    // not written: no TTL restarted by the reads, no WAL switch
    assert!(std::fs::read(&file).unwrap() == before, "the file changed");
    let after: String = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("SELECT expires_at FROM store WHERE key = 'ttl'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(after, expires);

    let e = reader
        .sweep_interval(Duration::from_secs(1))
        .open(&url(&file))
        .await
        .map(drop)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
    // a checkpoint file without store tables is not created into
    let saver_file = dir.path().join("saver.sqlite");
    drop(checkpointer::open(&url(&saver_file)).await.unwrap());
    let e = StoreOptions::new()
        .read_only(true)
        .open(&url(&saver_file))
        .await
        .map(drop)
        .unwrap_err();
    assert!(e.to_string().contains("no store table"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sweeper_deletes_rows_in_slices_and_ends_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.sqlite");
    let options = StoreOptions::new().sweep_interval(Duration::from_millis(20));
    let store = options.open(&url(&file)).await.unwrap();
    swept_without_a_call(&store, 2_500).await;
    // the rows are gone from the file, the live one kept
    assert_eq!(rows(&file, &sweep_namespace().dotted()), 1);
    ends_on_drop(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sweeper_stops_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions::new().sweep_interval(Duration::from_millis(20));
    let store: std::sync::Arc<dyn Store> = options.open(&url(&dir.path().join("s.sqlite"))).await.unwrap();
    stops_when_asked(store).await;
}
