//! Bad input never panics, never loses stored data and leaves the database
//! usable: files that are not databases, corrupted rows, unknown type tags,
//! truncated blobs, and thread ids or filter keys made of quotes and SQL.

use std::path::{Path, PathBuf};

use crate::catalogue_support;

use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, Error, ListOptions, Value,
};
use futures::StreamExt;
use rusqlite::Connection;

fn db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.sqlite");
    (dir, path)
}

async fn put(saver: &SqliteSaver, thread: &str, value: &str) -> CheckpointConfig {
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("x".into(), Value::from(value));
    let mut metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    metadata.insert("tag", value);
    let config = saver
        .put(&CheckpointConfig::new(thread), &cp, &metadata, &ChannelVersions::new())
        .await
        .unwrap();
    saver
        .put_writes(&config, &[("w".into(), Value::from(value))], "task", "")
        .await
        .unwrap();
    config
}

fn sql(path: &Path, statement: &str) {
    Connection::open(path).unwrap().execute_batch(statement).unwrap();
}

async fn value_of(saver: &SqliteSaver, config: &CheckpointConfig) -> Value {
    saver
        .get_tuple(config)
        .await
        .unwrap()
        .unwrap()
        .checkpoint
        .channel_values["x"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_a_database_is_refused_and_left_alone() {
    let (_dir, path) = db();
    let junk = b"this is not a SQLite database, just some text that is long enough to have a header\n".repeat(64);
    std::fs::write(&path, &junk).unwrap();
    let err = SqliteSaver::open(&path).await.unwrap_err();
    assert!(matches!(err, Error::Storage { retryable: false, .. }), "{err:?}");
    assert!(err.to_string().contains("not a database"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), junk, "the file is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_rows_give_typed_errors_and_spare_the_rest() {
    let (_dir, path) = db();
    let saver = SqliteSaver::open(&path).await.unwrap();
    let good = put(&saver, "good", "kept").await;
    let cases: [(&str, &str); 7] = [
        (
            "truncated",
            "UPDATE checkpoints SET checkpoint = substr(checkpoint, 1, 10) WHERE thread_id = 'truncated'",
        ),
        (
            "unknown-tag",
            "UPDATE checkpoints SET type = 'pickle' WHERE thread_id = 'unknown-tag'",
        ),
        (
            "no-tag",
            "UPDATE checkpoints SET type = NULL WHERE thread_id = 'no-tag'",
        ),
        (
            "garbage",
            "UPDATE checkpoints SET checkpoint = x'c1c1c1' WHERE thread_id = 'garbage'",
        ),
        (
            "not-a-map",
            "UPDATE checkpoints SET checkpoint = x'93010203' WHERE thread_id = 'not-a-map'",
        ),
        (
            "bad-metadata",
            "UPDATE checkpoints SET metadata = '{\"step\": ' WHERE thread_id = 'bad-metadata'",
        ),
        (
            "bad-write",
            "UPDATE writes SET value = x'dd' WHERE thread_id = 'bad-write'",
        ),
    ];
    for (thread, corruption) in cases {
        let config = put(&saver, thread, thread).await;
        sql(&path, corruption);
        let err = saver.get_tuple(&config).await.unwrap_err();
        assert!(matches!(err, Error::Serde { .. }), "{thread}: {err:?}");
        // latest lookup of the same thread: the same typed error
        let err = saver.get_tuple(&CheckpointConfig::new(thread)).await.unwrap_err();
        assert!(matches!(err, Error::Serde { .. }), "{thread}: {err:?}");
    }
    // a non-UTF-8 task id written by someone else
    let config = put(&saver, "bad-text", "v").await;
    sql(
        &path,
        "UPDATE writes SET task_id = CAST(x'ff00fe' AS TEXT) WHERE thread_id = 'bad-text'",
    );
    assert!(matches!(saver.get_tuple(&config).await, Err(Error::Serde { .. })));

    // listing everything: the bad rows are error items, the others come through
    let mut ok = Vec::new();
    let mut errors = 0;
    let mut stream = saver.list(None, ListOptions::default());
    while let Some(item) = stream.next().await {
        match item {
            Ok(t) => ok.push(t.config.thread_id),
            Err(e) => {
                assert!(matches!(e, Error::Serde { .. }), "{e:?}");
                errors += 1;
            }
        }
    }
    drop(stream);
    assert_eq!(ok, ["good"]);
    assert_eq!(errors, 8);
    // a filter never hides a row whose metadata cannot be read
    let filtered: Vec<_> = saver
        .list(None, ListOptions::default().filter("tag", "kept"))
        .collect()
        .await;
    assert_eq!(filtered.len(), 2, "{filtered:?}");
    assert!(filtered.iter().any(|r| r.is_err()));

    // nothing stored was lost and the database still takes writes
    assert_eq!(value_of(&saver, &good).await, Value::from("kept"));
    let again = put(&saver, "after", "works").await;
    assert_eq!(value_of(&saver, &again).await, Value::from("works"));
    saver.delete_thread("truncated").await.unwrap();
    assert!(saver
        .get_tuple(&CheckpointConfig::new("truncated"))
        .await
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_thread_ids_and_filter_keys_are_data() {
    let (_dir, path) = db();
    let saver = SqliteSaver::open(&path).await.unwrap();
    let threads = [
        "'; DROP TABLE checkpoints; --",
        "\" OR 1=1 --",
        "a'b\"c\\d",
        "",
        "nul\0inside",
        "nul",
        "日本語 🚀",
        "%_*?[",
    ];
    for t in threads {
        put(&saver, t, t).await;
    }
    for t in threads {
        let got = saver.get_tuple(&CheckpointConfig::new(t)).await.unwrap().unwrap();
        assert_eq!(got.config.thread_id, t);
        assert_eq!(got.checkpoint.channel_values["x"], Value::from(t));
        let listed = saver
            .list_vec(Some(CheckpointConfig::all_namespaces(t)), ListOptions::default())
            .await
            .unwrap();
        assert_eq!(listed.len(), 1, "{t:?}");
    }
    let keys = [
        "tag') OR 1=1 --",
        "$.tag",
        "tag\"",
        "' UNION SELECT * FROM writes --",
        "a.b",
        "",
        "\0",
    ];
    for key in keys {
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        metadata.insert(key, "hit");
        let thread = format!("filter-{key}");
        saver
            .put(
                &CheckpointConfig::new(&thread),
                &Checkpoint::new(0),
                &metadata,
                &ChannelVersions::new(),
            )
            .await
            .unwrap();
        let hits = saver
            .list_vec(None, ListOptions::default().filter(key, "hit"))
            .await
            .unwrap();
        assert_eq!(hits.len(), 1, "{key:?}");
        assert_eq!(hits[0].config.thread_id, thread);
        let misses = saver
            .list_vec(None, ListOptions::default().filter(key, "miss"))
            .await
            .unwrap();
        assert!(misses.is_empty(), "{key:?}");
    }
    for t in threads {
        saver.delete_thread(t).await.unwrap();
        assert!(
            saver.get_tuple(&CheckpointConfig::new(t)).await.unwrap().is_none(),
            "{t:?}"
        );
    }
    // the tables are all still there
    let tables: i64 = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('checkpoints', 'writes')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 2);
}

/// Values that cannot be stored fail the call that brought them with a typed
/// error; the calls around them succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unstorable_metadata_fails_alone() {
    let (_dir, path) = db();
    let saver = SqliteSaver::open(&path).await.unwrap();
    let mut metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    metadata.insert("raw", Value::Bin(bytes::Bytes::from_static(b"\x00")));
    let err = saver
        .put(
            &CheckpointConfig::new("t"),
            &Checkpoint::new(0),
            &metadata,
            &ChannelVersions::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Serde { .. }), "{err:?}");
    assert!(saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_none());
    let err = saver
        .put_writes(&CheckpointConfig::new("t"), &[("a".into(), Value::Int(1))], "task", "")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    put(&saver, "t", "fine").await;
}

/// A filtered `list` whose one row has a 200 000-key metadata map: the
/// comparison (one SQL function call, which SQLite's progress handler cannot
/// stop) runs off the caller's thread, so a current-thread runtime keeps
/// running its other tasks meanwhile. Before, the runtime thread sat in the
/// filter for seconds and the other task could not run until `list` returned.
#[test]
fn a_wide_filtered_row_leaves_a_current_thread_runtime_free() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (_dir, path) = db();
        let saver = SqliteSaver::open(&path).await.unwrap();
        let wide = |reverse: bool| {
            let mut entries: Vec<(Value, Value)> = (0..200_000)
                .map(|i| (Value::from(format!("key-{i}")), Value::Int(i)))
                .collect();
            if reverse {
                entries.reverse();
            }
            Value::Map(entries.into())
        };
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        metadata.insert("wide", wide(false));
        let config = CheckpointConfig::new("t");
        saver
            .put(&config, &Checkpoint::new(0), &metadata, &ChannelVersions::new())
            .await
            .unwrap();
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        let found = saver
            .list_vec(Some(config), ListOptions::default().filter("wide", wide(true)))
            .await
            .unwrap();
        let ran = ticks.load(std::sync::atomic::Ordering::Relaxed);
        ticker.abort();
        assert_eq!(found.len(), 1);
        assert!(ran > 0, "the other task never ran while list compared the row");
    });
}

// ---------------------------------------------------------------------------
// The bad-input catalogue's SQLite rows (`docs/reliability.md`, B44, B45,
// B51, B52): bytes altered in the checkpoint and metadata columns.

/// Runs each statement on thread `bad` of a fresh file (see
/// [`catalogue_support::each_statement_is_serde`]).
async fn each_statement_is_serde(statements: &[&str], listed: bool) {
    let (_dir, path) = db();
    let saver = SqliteSaver::open(&path).await.unwrap();
    catalogue_support::each_statement_is_serde(&saver, statements, listed, |statement| {
        sql(&path, statement);
        std::future::ready(())
    })
    .await;
}

/// B44: the checkpoint column not msgpack, of the wrong shape, or tagged
/// `pickle`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b44_corrupt_checkpoint_column() {
    each_statement_is_serde(
        &[
            "UPDATE checkpoints SET checkpoint = x'2a' WHERE thread_id = 'bad'",
            "UPDATE checkpoints SET checkpoint = x'81a176a4666f7572' WHERE thread_id = 'bad'",
            "UPDATE checkpoints SET type = 'pickle' WHERE thread_id = 'bad'",
        ],
        true,
    )
    .await;
}

/// B45: the metadata column cut, a JSON array, or invalid UTF-8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b45_corrupt_metadata_column() {
    each_statement_is_serde(
        &[
            "UPDATE checkpoints SET metadata = x'7b22' WHERE thread_id = 'bad'",
            "UPDATE checkpoints SET metadata = '[1, 2]' WHERE thread_id = 'bad'",
            "UPDATE checkpoints SET metadata = x'7b2261223a2022ff227d' WHERE thread_id = 'bad'",
        ],
        false,
    )
    .await;
}

#[cfg(feature = "encryption")]
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An encrypting saver on a fresh file.
#[cfg(feature = "encryption")]
async fn encrypting() -> (tempfile::TempDir, PathBuf, SqliteSaver) {
    let (dir, path) = db();
    let serde = checkpointer::serde::EncryptedSerializer::from_key(b"0123456789abcdef0123456789abcdef").unwrap();
    let saver = SqliteSaver::builder(&path)
        .serializer(std::sync::Arc::new(serde))
        .open()
        .await
        .unwrap();
    (dir, path, saver)
}

/// B51: the checkpoint row of an encrypting saver, values and all, replaced
/// by plaintext msgpack: `PlaintextRefused` (tag `msgpack`) from `get_tuple`
/// and `list`.
#[cfg(feature = "encryption")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b51_inline_plaintext_under_encryption() {
    use checkpointer::{serde::msgpack, EncryptionError};
    let (_dir, path, saver) = encrypting().await;
    let config = catalogue_support::put_x(&saver, "t", "secret").await;
    let mut cp = Checkpoint::new(0);
    cp.id = catalogue_support::ID1.to_owned();
    cp.channel_values.insert("x".into(), Value::from("evil"));
    cp.channel_versions
        .insert("x".into(), checkpointer::ChannelVersion::Int(1));
    let bytes = msgpack::encode(&cp.to_value(true)).unwrap();
    sql(
        &path,
        &format!(
            "UPDATE checkpoints SET type = 'msgpack', checkpoint = x'{}' WHERE thread_id = 't'",
            hex(&bytes)
        ),
    );
    let refused = |what: &str, got: Result<String, Error>| match got {
        Err(Error::Encryption(EncryptionError::PlaintextRefused { tag })) => assert_eq!(tag, "msgpack", "{what}"),
        other => panic!("{what}: {other:?}"),
    };
    refused("get_tuple", saver.get_tuple(&config).await.map(|t| format!("{t:?}")));
    refused(
        "list",
        saver
            .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
            .await
            .map(|t| format!("{t:?}")),
    );
}

/// B52: an encrypting saver's checkpoint column (where SQLite keeps the
/// channel values) that does not decrypt: `AuthenticationFailed` from
/// `get_tuple` and `list`.
#[cfg(feature = "encryption")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b52_channel_value_that_does_not_decrypt() {
    use checkpointer::EncryptionError;
    let (_dir, path, saver) = encrypting().await;
    let config = catalogue_support::put_x(&saver, "t", "x").await;
    sql(
        &path,
        &format!(
            "UPDATE checkpoints SET checkpoint = x'{}' WHERE thread_id = 't'",
            hex(&[0u8; 40])
        ),
    );
    let got = saver.get_tuple(&config).await;
    assert!(
        matches!(got, Err(Error::Encryption(EncryptionError::AuthenticationFailed))),
        "{got:?}"
    );
    let listed = saver
        .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
        .await;
    assert!(
        matches!(listed, Err(Error::Encryption(EncryptionError::AuthenticationFailed))),
        "{listed:?}"
    );
}
