//! `checkpointer::open(url)` on every scheme against the real stores
//! (memory, a SQLite file, PostgreSQL, Redis, `rediss://` with a private CA
//! and with a client certificate, Redis Cluster lists over plain and TLS
//! connections), and the administrative face ([`SaverAdmin`]) checked by one
//! function on all four backends: backend, layout, setup, identity, size,
//! emptiness, import, close. Then [`OpenOptions`]: read-only and
//! not-creating opens of missing stores are typed errors that write
//! nothing; bad URLs are [`Error::InvalidInput`] without their password;
//! any SQLite path names its file; the saver's settings reach the stores
//! that honour them, and the others refuse them.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]

use std::sync::Arc;

use crate::harness;
use crate::postgres_support;
use crate::redis_support;

use checkpointer::import::{ImportMode, ImportedCheckpoint, ThreadImport};
use checkpointer::{
    open, ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaverExt,
    CheckpointSource, Error, OpenOptions, SaverAdmin, TtlConfig, Value, ValueLayout,
};

#[cfg(feature = "redis-tls")]
#[path = "../support/redis_tls.rs"]
mod redis_tls;

#[path = "../support/redis_cluster.rs"]
mod cluster_support;

/// `openssl` and a `redis-server` built with TLS.
#[cfg(feature = "redis-tls")]
static TLS: harness::Need = harness::Need::new("openssl and redis-server with TLS", redis_tls::available);

/// A Redis Cluster speaking only TLS.
#[cfg(feature = "redis-tls")]
static TLS_CLUSTER: harness::Need = harness::Need::new("a Redis Cluster with TLS", redis_tls::cluster_available);

/// A Redis Cluster.
static CLUSTER: harness::Need = harness::Need::new("a Redis Cluster", cluster_support::available);

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    let both = &[&crate::POSTGRES, &crate::REDIS];
    #[cfg_attr(not(feature = "redis-tls"), allow(unused_mut))]
    let mut out = vec![
        harness::tokio("open::every_scheme_opens_a_saver", both, 2, every_scheme_opens_a_saver),
        harness::tokio(
            "open::the_admin_face_on_every_backend",
            both,
            2,
            the_admin_face_on_every_backend,
        ),
        harness::tokio(
            "open::missing_stores_are_typed_errors_and_stay_untouched",
            both,
            2,
            missing_stores,
        ),
        harness::tokio("open::bad_urls_are_invalid_input_without_passwords", &[], 0, bad_urls),
        harness::tokio("open::any_sqlite_path_names_its_file", &[], 0, sqlite_paths),
        harness::tokio("open::the_settings_reach_the_store", both, 2, settings),
        harness::tokio("open::cluster_lists_open_a_cluster", &[&CLUSTER], 2, cluster_lists),
    ];
    #[cfg(feature = "redis-tls")]
    out.extend([
        harness::tokio("open::rediss_with_a_private_ca_and_mutual_tls", &[&TLS], 2, rediss),
        harness::tokio("open::rediss_cluster_lists", &[&TLS_CLUSTER], 2, rediss_cluster),
    ]);
    out
}

fn postgres_url(db: &str) -> String {
    postgres_support::url_of(db)
}

fn redis_url(prefix: &str) -> String {
    format!("{}?prefix={prefix}", redis_support::url())
}

/// A checkpoint stored and read back through the saver `open` gave.
async fn round_trip(url: &str) {
    let saver = open(url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let config = CheckpointConfig::new("open-round-trip");
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("a".into(), Value::from("x"));
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let stored = saver.put(&config, &cp, &meta, &ChannelVersions::new()).await.unwrap();
    let latest = saver.latest("open-round-trip").await.unwrap().expect("stored");
    assert_eq!(latest.config, stored, "{url}");
    assert_eq!(latest.checkpoint.channel_values["a"], Value::from("x"), "{url}");
}

async fn every_scheme_opens_a_saver() {
    round_trip("memory:").await;
    round_trip("memory://").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("open.sqlite");
    round_trip(&format!("sqlite://{}", file.display())).await;
    assert!(file.exists());
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    round_trip(&postgres_url(&db.0)).await;
    round_trip(&postgres_url(&db.0).replacen("postgresql://", "postgres://", 1)).await;
    let prefix = redis_support::fresh_prefix();
    round_trip(&redis_url(&prefix)).await;
    assert!(!redis_support::keys_of(&prefix).await.is_empty());
}

/// One thread of two checkpoints, the first with a write.
fn thread(id: &str) -> ThreadImport {
    let first = Checkpoint::new(0);
    let mut second = Checkpoint::new(1);
    second.channel_values.insert("a".into(), Value::Int(1));
    ThreadImport {
        thread_id: id.to_owned(),
        checkpoints: vec![
            ImportedCheckpoint {
                checkpoint_ns: String::new(),
                parent_checkpoint_id: None,
                checkpoint: first.clone(),
                metadata: CheckpointMetadata::new(CheckpointSource::Input, -1),
                writes: vec![checkpointer::import::ImportedWrite {
                    task_id: "t".into(),
                    task_path: "p".into(),
                    idx: 0,
                    channel: "a".into(),
                    value: Value::Int(1),
                }],
            },
            ImportedCheckpoint {
                checkpoint_ns: String::new(),
                parent_checkpoint_id: Some(first.id.clone()),
                checkpoint: second,
                metadata: CheckpointMetadata::new(CheckpointSource::Loop, 0),
                writes: Vec::new(),
            },
        ],
    }
}

/// What every backend's face must answer; `expect` is what differs.
struct Expect {
    backend: &'static str,
    layout: ValueLayout,
    /// `None`: never shared; `Some`: the identity has this start.
    identity: Option<&'static str>,
    /// `None`: cannot tell; `Some(in_memory)`.
    size: Option<bool>,
}

async fn check_face(url: &str, expect: Expect) {
    let store: Arc<dyn SaverAdmin> = OpenOptions::new().open(url).await.unwrap();
    assert_eq!(store.backend(), expect.backend, "{url}");
    assert_eq!(store.layout(), expect.layout, "{url}");
    assert!(!store.import_note().is_empty());
    assert!(!store.name().is_empty());
    store.setup().await.unwrap();
    assert!(store.is_empty().await.unwrap(), "{url}: a fresh store");
    let identity = store.identity().await.unwrap();
    match expect.identity {
        None => assert_eq!(identity, None, "{url}"),
        Some(start) => {
            let id = identity.clone().expect("an identity");
            assert!(id.starts_with(start), "{url}: {id}");
            // the same store opened again is the same store
            let again = OpenOptions::new().open(url).await.unwrap();
            assert_eq!(again.identity().await.unwrap(), identity, "{url}");
            again.close().await.unwrap();
        }
    }
    let t = thread("admin-import");
    // every backend imports
    if let Err(e) = store.import_thread(&t, ImportMode::Create).await {
        panic!("{url}: {e}");
    }
    let saver = store.saver();
    let latest = saver.latest("admin-import").await.unwrap().expect("imported");
    assert_eq!(latest.checkpoint.id, t.checkpoints[1].checkpoint.id, "{url}");
    let first = saver
        .get_tuple(&CheckpointConfig::new("admin-import").with_checkpoint_id(t.checkpoints[0].checkpoint.id.clone()))
        .await
        .unwrap()
        .expect("the first checkpoint");
    assert_eq!(first.pending_writes.len(), 1, "{url}");
    assert!(!store.is_empty().await.unwrap(), "{url}");
    // Create refuses a thread that exists, Replace swaps it
    let again = store.import_thread(&t, ImportMode::Create).await.unwrap_err();
    assert!(matches!(again, Error::ThreadExists { .. }), "{url}: {again:?}");
    store.import_thread(&t, ImportMode::Replace).await.unwrap();
    let size = store.storage_size().await.unwrap();
    match expect.size {
        None => assert_eq!(size, None, "{url}"),
        Some(in_memory) => {
            let size = size.expect("a size");
            assert!(size.bytes > 0, "{url}: {size:?}");
            assert_eq!(size.in_memory, in_memory, "{url}");
        }
    }
    store.close().await.unwrap();
}

async fn the_admin_face_on_every_backend() {
    check_face(
        "memory:",
        Expect {
            backend: "memory",
            layout: ValueLayout::PerVersion,
            identity: None,
            size: None,
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admin.sqlite");
    let sqlite = format!("sqlite://{}", file.display());
    check_face(
        &sqlite,
        Expect {
            backend: "sqlite",
            layout: ValueLayout::Inline,
            identity: Some("file "),
            size: Some(false),
        },
    )
    .await;
    let store = OpenOptions::new().read_only(true).open(&sqlite).await.unwrap();
    assert_eq!(store.source_name(), "admin.sqlite");
    store.close().await.unwrap();
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    check_face(
        &postgres_url(&db.0),
        Expect {
            backend: "postgres",
            layout: ValueLayout::PerVersion,
            identity: Some("postgres "),
            size: Some(false),
        },
    )
    .await;
    let prefix = redis_support::fresh_prefix();
    check_face(
        &redis_url(&prefix),
        Expect {
            backend: "redis",
            layout: ValueLayout::PerVersion,
            identity: Some("redis "),
            size: Some(true),
        },
    )
    .await;
    // two prefixes of one server are two stores
    let a = OpenOptions::new().open(&redis_url(&prefix)).await.unwrap();
    let b = OpenOptions::new()
        .open(&redis_url(&redis_support::fresh_prefix()))
        .await
        .unwrap();
    assert_ne!(a.identity().await.unwrap(), b.identity().await.unwrap());
}

fn read_only() -> OpenOptions {
    OpenOptions::new().read_only(true)
}

fn existing() -> OpenOptions {
    OpenOptions::new().create(false)
}

async fn missing_stores() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sqlite");
    let url = format!("sqlite://{}", missing.display());
    for options in [read_only(), existing()] {
        let e = options.open(&url).await.unwrap_err();
        assert!(
            matches!(&e, Error::NotFound { what } if what.contains("no such file")),
            "{e:?}"
        );
    }
    let nowhere = format!("sqlite://{}", dir.path().join("no-dir").join("t.sqlite").display());
    let e = OpenOptions::new().open(&nowhere).await.unwrap_err();
    assert!(
        matches!(&e, Error::NotFound { what } if what.contains("no such directory")),
        "{e:?}"
    );
    assert!(!missing.exists(), "an open created the file");
    // a SQLite file without the tables is left as it was
    let other = dir.path().join("other.sqlite");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let before = std::fs::read(&other).unwrap();
    let url = format!("sqlite://{}", other.display());
    for options in [read_only(), existing()] {
        let e = options.open(&url).await.unwrap_err();
        assert!(matches!(e, Error::Storage { .. }), "{e:?}");
        assert!(e.to_string().contains("has no checkpoint tables"), "{e}");
    }
    assert_eq!(std::fs::read(&other).unwrap(), before);
    // read-only: the file stays as it was, and the saver refuses writes
    let file = dir.path().join("ro.sqlite");
    let url = format!("sqlite://{}", file.display());
    OpenOptions::new().open(&url).await.unwrap().close().await.unwrap();
    let before = std::fs::read(&file).unwrap();
    let store = read_only().open(&url).await.unwrap();
    assert!(store.is_empty().await.unwrap());
    let e = store.saver().delete_thread("t").await.unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    store.close().await.unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), before);
    // a PostgreSQL database without the tables
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    for options in [read_only(), existing()] {
        let e = options.open(&postgres_url(&db.0)).await.unwrap_err();
        assert!(e.to_string().contains("has no checkpoint tables"), "{e}");
    }
    assert_eq!(
        postgres_support::schema_of(&db.0).await,
        Vec::<String>::new(),
        "nothing created"
    );
    // a Redis prefix without the marker: no key is written
    let prefix = redis_support::fresh_prefix();
    for options in [read_only(), existing()] {
        let e = options.open(&redis_url(&prefix)).await.unwrap_err();
        assert!(matches!(e, Error::Storage { .. }), "{e:?}");
        assert!(e.to_string().contains("no checkpoint store under key prefix"), "{e}");
    }
    assert!(redis_support::keys_of(&prefix).await.is_empty());
    OpenOptions::new().open(&redis_url(&prefix)).await.unwrap();
    assert_eq!(redis_support::keys_of(&prefix).await.len(), 1, "the layout marker");
    read_only().open(&redis_url(&prefix)).await.unwrap();
}

async fn bad_urls() {
    for url in [
        "",
        "nope",
        "mysql://u:SECRET@h/x",
        "sqlite://",
        "postgres://u:SECRET@h:notaport/db",
        "postgresql://u@h/db?password=SECRET&bogus=1",
        "redis://:SECRET@h:notaport",
        "redis://:SECRET@h?bogus=1",
        "redis://:SECRET@h/0?password=SECRET",
        "redis://:SECRET@h?ca=/ca.pem",
        "rediss://:SECRET@h?cert=/c.pem",
        "redis://:SECRET@h:1?prefix=a,redis://:SECRET@h:2?prefix=b",
        "redis://:SECRET@h?prefix=a%7Bb",
    ] {
        let e = OpenOptions::check(url).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{url}: {e:?}");
        let e = OpenOptions::new().open(url).await.unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{url}: {e:?}");
        let text = format!("{e} {e:?}");
        assert!(!text.contains("SECRET"), "{url}: {text}");
    }
    // an unreadable certificate file is a missing file
    let e = OpenOptions::new()
        .open("rediss://:SECRET@127.0.0.1:1?ca=/no/such/ca.pem")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::NotFound { what } if what.contains("/no/such/ca.pem")),
        "{e:?}"
    );
    assert!(!format!("{e} {e:?}").contains("SECRET"));
    // an unreachable server: a storage error, masked
    let e = OpenOptions::new()
        .open("postgres://u:SECRET@127.0.0.1:1/db?connect_timeout=3")
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Storage { .. }), "{e:?}");
    assert!(!format!("{e} {e:?}").contains("SECRET"));
}

/// The journal mode a SQLite file is in.
fn journal_mode(path: &std::path::Path) -> String {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap()
}

async fn sqlite_paths() {
    // the rest of the URL is the path as written: nothing is decoded
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("a b?c#d%20é");
    std::fs::create_dir(&sub).unwrap();
    let file = sub.join("x %41?y#z ü.sqlite");
    let url = format!("sqlite://{}", file.display());
    assert_eq!(OpenOptions::check(&url).unwrap(), "sqlite");
    round_trip(&url).await;
    assert!(file.exists(), "{url}");
    let names: Vec<String> = std::fs::read_dir(&sub)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with("-wal") && !n.ends_with("-shm"))
        .collect();
    assert_eq!(names, ["x %41?y#z ü.sqlite"], "one file, at the path");
    let again = OpenOptions::new().create(false).open(&url).await.unwrap();
    assert!(again.saver().latest("open-round-trip").await.unwrap().is_some());
    again.close().await.unwrap();
    // a private in-memory database: never shared, nothing on disk
    let memory = OpenOptions::new().open("sqlite://:memory:").await.unwrap();
    assert_eq!(memory.backend(), "sqlite");
    assert_eq!(memory.identity().await.unwrap(), None);
    assert_eq!(memory.storage_size().await.unwrap(), None);
    memory.close().await.unwrap();
    round_trip("sqlite://:memory:").await;
    assert!(!std::path::Path::new(":memory:").exists());
}

/// A parent with channel `a`, then a child versioning `a` without its
/// value: whether the child's row holds it.
async fn child_holds_parent_value(store: &dyn SaverAdmin) -> bool {
    let saver = store.saver();
    let v1 = ChannelVersion::Int(1);
    let mut parent = Checkpoint::new(0);
    parent.channel_values.insert("a".into(), Value::from("x"));
    parent.channel_versions.insert("a".into(), v1.clone());
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let new: ChannelVersions = [("a".to_owned(), v1.clone())].into_iter().collect();
    let at = saver
        .put(&CheckpointConfig::new("fill"), &parent, &meta, &new)
        .await
        .unwrap();
    let mut child = Checkpoint::new(1);
    child.channel_versions.insert("a".into(), v1);
    saver.put(&at, &child, &meta, &ChannelVersions::new()).await.unwrap();
    let latest = saver.latest("fill").await.unwrap().expect("stored");
    latest.checkpoint.channel_values.contains_key("a")
}

async fn settings() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
    // SQLite: a checkpoint stored as given, the file left in WAL mode
    let store = OpenOptions::new()
        .fill_from_parent(false)
        .restore_journal(false)
        .open(&sqlite("as-given.sqlite"))
        .await
        .unwrap();
    assert!(!child_holds_parent_value(&*store).await);
    store.close().await.unwrap();
    assert_eq!(journal_mode(&dir.path().join("as-given.sqlite")), "wal");
    let store = OpenOptions::new().open(&sqlite("filled.sqlite")).await.unwrap();
    assert!(child_holds_parent_value(&*store).await);
    store.close().await.unwrap();
    assert_eq!(journal_mode(&dir.path().join("filled.sqlite")), "delete");
    // what a store cannot honour is refused before anything is opened
    for (options, url) in [
        (OpenOptions::new().lazy(true), sqlite("lazy.sqlite")),
        (OpenOptions::new().ttl(TtlConfig::minutes(1.0)), sqlite("ttl.sqlite")),
        (OpenOptions::new().max_connections(2), sqlite("pool.sqlite")),
        (OpenOptions::new().restore_journal(false), "memory:".to_owned()),
        (OpenOptions::new().fill_from_parent(false), redis_url("never")),
        (OpenOptions::new().lazy(true), redis_url("never")),
        (OpenOptions::new().ttl(TtlConfig::minutes(1.0)), postgres_url("never")),
    ] {
        let e = options.open(&url).await.unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{url}: {e:?}");
        assert!(e.to_string().contains("cannot honour"), "{e}");
    }
    for refused in ["lazy.sqlite", "ttl.sqlite", "pool.sqlite"] {
        assert!(!dir.path().join(refused).exists(), "{refused} created");
    }
    // PostgreSQL: lazy opens reach nothing; setup creates the tables
    let unreachable = OpenOptions::new()
        .lazy(true)
        .open("postgres://u:SECRET@127.0.0.1:1/db?connect_timeout=3")
        .await
        .unwrap();
    let e = unreachable.setup().await.unwrap_err();
    assert!(matches!(e, Error::Storage { .. }), "{e:?}");
    assert!(!format!("{e} {e:?}").contains("SECRET"));
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let lazy = OpenOptions::new()
        .lazy(true)
        .fill_from_parent(false)
        .max_connections(2)
        .open(&postgres_url(&db.0))
        .await
        .unwrap();
    assert_eq!(
        postgres_support::schema_of(&db.0).await,
        Vec::<String>::new(),
        "nothing created"
    );
    lazy.setup().await.unwrap();
    assert!(!postgres_support::schema_of(&db.0).await.is_empty());
    assert!(!child_holds_parent_value(&*lazy).await);
    // Redis: every key of a thread expires
    let prefix = redis_support::fresh_prefix();
    let store = OpenOptions::new()
        .ttl(TtlConfig::minutes(1.0))
        .open(&redis_url(&prefix))
        .await
        .unwrap();
    round_trip_on(&*store).await;
    let mut conn = redis_support::connection().await.unwrap();
    let keys = redis_support::keys_of(&prefix).await;
    let mut expiring = 0;
    for key in &keys {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut conn).await.unwrap();
        assert!(ttl <= 60_000, "{ttl}");
        expiring += usize::from(ttl > 0);
    }
    assert!(
        expiring > 0 && expiring < keys.len(),
        "the thread's keys expire, the marker stays"
    );
    redis_support::cleanup(&prefix).await;
}

/// A checkpoint stored through `store`'s saver.
async fn round_trip_on(store: &dyn SaverAdmin) {
    let config = CheckpointConfig::new("open-round-trip");
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let stored = store
        .saver()
        .put(&config, &Checkpoint::new(0), &meta, &ChannelVersions::new())
        .await
        .unwrap();
    assert_eq!(
        store.saver().latest("open-round-trip").await.unwrap().map(|t| t.config),
        Some(stored)
    );
}

async fn cluster_lists() {
    let prefix = cluster_support::fresh_prefix();
    let nodes = cluster_support::the_cluster().urls().join(",");
    let url = format!("{nodes}?prefix={prefix}");
    let e = existing().open(&url).await.unwrap_err();
    assert!(matches!(e, Error::Storage { .. }), "{e:?}");
    round_trip(&url).await;
    let store = read_only().open(&url).await.unwrap();
    assert_eq!(store.backend(), "redis");
    let id = store.identity().await.unwrap().expect("an identity");
    assert!(id.starts_with("redis cluster "), "{id}");
    let size = store.storage_size().await.unwrap().expect("a cluster's size");
    assert!(size.in_memory && size.bytes > 0, "{size:?}");
    store
        .import_thread(&thread("cluster-import"), ImportMode::Create)
        .await
        .unwrap();
    assert!(store.saver().latest("cluster-import").await.unwrap().is_some());
    cluster_support::cleanup(&prefix).await;
}

#[cfg(feature = "redis-tls")]
fn encoded(path: &std::path::Path) -> String {
    path.display()
        .to_string()
        .replace('%', "%25")
        .replace(' ', "%20")
        .replace('&', "%26")
}

#[cfg(feature = "redis-tls")]
async fn rediss() {
    let tls = redis_tls::tls().unwrap();
    let ca = encoded(&tls.path("ca.pem"));
    let url = format!("{}?prefix={}&ca={ca}", tls.url(), redis_support::fresh_prefix());
    round_trip(&url).await;
    let store = read_only().open(&url).await.unwrap();
    assert!(store.identity().await.unwrap().is_some());
    assert!(!store.name().contains(redis_tls::PASSWORD), "{}", store.name());
    assert!(!format!("{store:?}").contains(redis_tls::PASSWORD));
    // without the CA: the server's certificate is not trusted
    let e = OpenOptions::new().open(&tls.url()).await.unwrap_err();
    assert!(matches!(e, Error::Storage { .. }), "{e:?}");
    assert!(!format!("{e} {e:?}").contains(redis_tls::PASSWORD));
    let mtls = format!(
        "{}?prefix={}&ca={ca}&cert={}&key={}",
        tls.mtls_url(),
        redis_support::fresh_prefix(),
        encoded(&tls.path("client.pem")),
        encoded(&tls.path("client.key"))
    );
    round_trip(&mtls).await;
}

#[cfg(feature = "redis-tls")]
async fn rediss_cluster() {
    let tls = redis_tls::tls().unwrap();
    let url = format!(
        "{}?prefix=open-{}&ca={}",
        redis_tls::cluster_urls().join(","),
        std::process::id(),
        encoded(&tls.path("ca.pem"))
    );
    round_trip(&url).await;
}
