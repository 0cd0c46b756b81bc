//! The store's front door (`checkpointer::store::open`, `StoreOptions`) on
//! `memory:` and the URLs it refuses, and the background TTL sweeper of
//! `InMemoryStore`, in a runtime and outside one.

use std::sync::Arc;
use std::time::Duration;

use checkpointer::store::{InMemoryStore, Namespace, Store, StoreExt, StoreOptions, TtlConfig};
use checkpointer::Error;

use crate::store_sweeper::{ends_on_drop, stops_when_asked, swept_without_a_call};

fn every(ms: u64) -> StoreOptions {
    StoreOptions::new().sweep_interval(Duration::from_millis(ms))
}

#[tokio::test]
async fn memory_url_opens_a_fresh_store() {
    let a = checkpointer::store::open("memory:").await.unwrap();
    let b = checkpointer::store::open("memory://").await.unwrap();
    let ns = Namespace::new(["a"]).unwrap();
    a.put(&ns, "k", serde_json::json!({"v": 1})).await.unwrap();
    assert!(b.get(&ns, "k").await.unwrap().is_none(), "each open is its own store");
    assert!(a.sweeper().is_none(), "no sweeper unless asked");
    assert_eq!(StoreOptions::check("memory:").unwrap(), "memory");
}

#[tokio::test]
async fn urls_without_a_store_are_typed_errors_without_secrets() {
    let invalid = [
        "",
        "nope",
        "mysql://u:SECRET@h/x",
        "sqlite:x.db",
        "data.sqlite",
        "memory:x",
        "sqlite://",
        "postgres://u:SECRET@h:notaport/db",
        "host=h password=SECRET port=x",
    ];
    for url in invalid {
        let e = checkpointer::store::open(url).await.map(drop).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{url}: {e:?}");
        // the saver's front door answers the same
        let saver = checkpointer::open(url).await.map(drop).unwrap_err();
        assert_eq!(e.to_string(), saver.to_string(), "{url}");
        assert!(!format!("{e} {e:?}").contains("SECRET"), "{url}: {e}");
    }
    // PostgreSQL URLs open a PostgresStore: an unreachable server is an
    // error naming no secret, read-only too (its check of the tables needs
    // the server)
    for url in [
        "postgres://u:SECRET@127.0.0.1:1/db",
        "host=127.0.0.1 port=1 password=SECRET dbname=x",
    ] {
        let e = checkpointer::store::open(url).await.map(drop).unwrap_err();
        if cfg!(feature = "postgres") {
            assert!(
                !matches!(e, Error::Unsupported { .. } | Error::InvalidInput { .. }),
                "{url}: {e:?}"
            );
            let ro = StoreOptions::new()
                .read_only(true)
                .open(url)
                .await
                .map(drop)
                .unwrap_err();
            assert!(matches!(ro, Error::Storage { .. }), "{url}: {ro:?}");
            assert!(!format!("{ro} {ro:?}").contains("SECRET"), "{url}: {ro}");
        } else {
            assert!(e.to_string().contains("feature"), "{url}: {e}");
        }
        assert!(!format!("{e} {e:?}").contains("SECRET"), "{url}: {e}");
    }
    // a backend without a store: Unsupported, not a panic
    let url = "redis://:SECRET@127.0.0.1:1";
    let e = checkpointer::store::open(url).await.map(drop).unwrap_err();
    if cfg!(feature = "redis") {
        assert!(matches!(e, Error::Unsupported { .. }), "{url}: {e:?}");
    } else {
        assert!(e.to_string().contains("feature"), "{url}: {e}");
    }
    assert!(!format!("{e} {e:?}").contains("SECRET"), "{url}: {e}");
    let e = StoreOptions::new()
        .read_only(true)
        .open("memory:")
        .await
        .map(drop)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
    let e = every(0).open("memory:").await.map(drop).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
}

#[tokio::test]
async fn sweep_interval_minutes_starts_a_sweeper() {
    let minutes = |m: Option<u64>| TtlConfig {
        sweep_interval_minutes: m,
        ..TtlConfig::default()
    };
    let store = StoreOptions::new().ttl(minutes(Some(2))).open("memory:").await.unwrap();
    assert_eq!(store.sweeper().unwrap().interval(), Duration::from_secs(120));
    // 0, as Python's start_ttl_sweeper reads it: its default of 5 minutes
    let store = StoreOptions::new().ttl(minutes(Some(0))).open("memory:").await.unwrap();
    assert_eq!(store.sweeper().unwrap().interval(), Duration::from_secs(300));
    let store = StoreOptions::new().ttl(minutes(None)).open("memory:").await.unwrap();
    assert!(store.sweeper().is_none());
    // the builder's interval wins over the configuration's
    let store = InMemoryStore::builder()
        .ttl(minutes(Some(2)))
        .sweep_interval(Duration::from_secs(7))
        .build()
        .unwrap();
    assert_eq!(store.sweeper().unwrap().interval(), Duration::from_secs(7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_sweeper_sweeps_in_slices_and_ends_on_drop() {
    let store = every(20).ttl(TtlConfig::default()).open("memory:").await.unwrap();
    // more than two slices of 1000
    let sweeper = swept_without_a_call(&store, 2_500).await;
    assert!(sweeper.rounds() >= 1);
    ends_on_drop(store).await;
}

#[tokio::test]
async fn memory_sweeper_stops_when_asked() {
    stops_when_asked(every(20).open("memory:").await.unwrap()).await;
}

#[test]
fn memory_sweeper_runs_outside_a_runtime() {
    // built with no runtime: the sweeper runs on a thread of its own
    let store: Arc<dyn Store> = Arc::new(
        InMemoryStore::builder()
            .sweep_interval(Duration::from_millis(20))
            .build()
            .unwrap(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        swept_without_a_call(&store, 3).await;
        ends_on_drop(store).await;
    });
}
