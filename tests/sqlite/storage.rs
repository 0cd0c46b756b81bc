//! What `SqliteSaver` puts in the file, byte for byte (spec §7.2, §7.6), and
//! how it treats the schema of files it opens.

use checkpointer::sqlite::SqliteSaver;
use checkpointer::version::ChannelVersion;
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Value,
};
use rusqlite::Connection;

const GOLDEN: &str = "87a17604a27473d920323032342d30352d30345430363a33323a34322e3233353434342b30303a3030a26964d92431656630396530312d633335342d366530382d383030312d386131353033663962383735ae6368616e6e656c5f76616c75657383a46e616d65a46d656f77a56974656d739201a161a4666c6167c0b06368616e6e656c5f76657273696f6e7384a46e616d65d92430303030303030303030303030303030303030303030303030303030303030312e302e35a56974656d73d92530303030303030303030303030303030303030303030303030303030303030322e302e3235a4666c6167d92530303030303030303030303030303030303030303030303030303030303030322e302e3235a4676f6e65d92530303030303030303030303030303030303030303030303030303030303030322e302e3235ad76657273696f6e735f7365656e82a95f5f696e7075745f5f80a46e6f646581a46e616d65d92430303030303030303030303030303030303030303030303030303030303030312e302e35b0757064617465645f6368616e6e656c7391a56974656d73";

fn v(s: &str) -> ChannelVersion {
    ChannelVersion::Str(s.to_owned())
}

/// The spec's golden input (§7.6) stored by the crate gives the exact row
/// Python's saver writes: checkpoint bytes, type tag, metadata text, parent
/// id, and both writes with their indexes, task path and payloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_row_is_byte_identical_to_python() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("golden.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let (v1, v2) = (
        v("00000000000000000000000000000001.0.5"),
        v("00000000000000000000000000000002.0.25"),
    );
    let mut cp = Checkpoint::new(1);
    cp.ts = "2024-05-04T06:32:42.235444+00:00".into();
    cp.id = "1ef09e01-c354-6e08-8001-8a1503f9b875".into();
    cp.channel_values.insert("name".into(), Value::from("meow"));
    cp.channel_values.insert(
        "items".into(),
        Value::Array((vec![Value::Int(1), Value::from("a")]).into()),
    );
    cp.channel_values.insert("flag".into(), Value::Nil);
    for (ch, ver) in [("name", &v1), ("items", &v2), ("flag", &v2), ("gone", &v2)] {
        cp.channel_versions.insert(ch.into(), ver.clone());
    }
    cp.versions_seen.insert("__input__".into(), ChannelVersions::new());
    cp.versions_seen
        .insert("node".into(), ChannelVersions::from([("name".to_owned(), v1.clone())]));
    cp.updated_channels = Some(vec!["items".into()].into());
    let new_versions: ChannelVersions = ["items", "flag", "gone"]
        .iter()
        .map(|c| ((*c).to_owned(), v2.clone()))
        .collect();
    let config = CheckpointConfig::new("g1").with_checkpoint_id("1ef09e01-c354-6e07-8000-000000000000");
    let stored = saver
        .put(
            &config,
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Loop, 1),
            &new_versions,
        )
        .await
        .unwrap();
    saver
        .put_writes(
            &stored,
            &[
                ("items".into(), Value::Array((vec![Value::from("b")]).into())),
                ("__error__".into(), Value::from("boom")),
            ],
            "task-1",
            "~__pregel_pull, node",
        )
        .await
        .unwrap();
    saver.close().await.unwrap();

    let conn = Connection::open(&path).unwrap();
    let (thread, ns, id, parent, tag, blob, meta, meta_type): (
        String,
        String,
        String,
        String,
        String,
        Vec<u8>,
        Vec<u8>,
        String,
    ) = conn
        .query_row(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, \
             typeof(metadata) FROM checkpoints",
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(
        (thread.as_str(), ns.as_str(), id.as_str(), parent.as_str(), tag.as_str()),
        (
            "g1",
            "",
            "1ef09e01-c354-6e08-8001-8a1503f9b875",
            "1ef09e01-c354-6e07-8000-000000000000",
            "msgpack"
        )
    );
    assert_eq!(hex::encode(&blob), GOLDEN);
    assert_eq!(meta, br#"{"source": "loop", "step": 1, "parents": {}}"#);
    assert_eq!(meta_type, "blob");
    let writes: Vec<(String, String, i64, String, String, String)> = conn
        .prepare("SELECT task_id, task_path, idx, channel, type, hex(value) FROM writes ORDER BY idx")
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let row = |idx: i64, ch: &str, hex: &str| {
        (
            "task-1".to_owned(),
            "~__pregel_pull, node".to_owned(),
            idx,
            ch.to_owned(),
            "msgpack".to_owned(),
            hex.to_owned(),
        )
    };
    assert_eq!(
        writes,
        vec![row(-1, "__error__", "A4626F6F6D"), row(0, "items", "91A162")]
    );
}

/// A `null` write is an empty BLOB (not SQL NULL) tagged `null`; metadata
/// keeps Python's separators, key order and non-ASCII text; thread ids are
/// TEXT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_writes_metadata_and_thread_ids_as_python_stores_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let mut metadata = CheckpointMetadata::new(CheckpointSource::Input, -1);
    metadata.insert("user", "Zoë \"quoted\"");
    metadata.insert("score", Value::Float(1.0));
    metadata.insert("tup", Value::from(vec![1, 2]));
    let cp = Checkpoint::new(-1);
    let stored = saver
        .put(&CheckpointConfig::new("42"), &cp, &metadata, &ChannelVersions::new())
        .await
        .unwrap();
    saver
        .put_writes(
            &stored,
            &[("branch:to:a".into(), Value::Nil)],
            "t",
            "~__pregel_pull, __start__",
        )
        .await
        .unwrap();
    saver.close().await.unwrap();
    let conn = Connection::open(&path).unwrap();
    let (tag, kind, len): (String, String, i64) = conn
        .query_row("SELECT type, typeof(value), length(value) FROM writes", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!((tag.as_str(), kind.as_str(), len), ("null", "blob", 0));
    let (thread_type, meta): (String, Vec<u8>) = conn
        .query_row("SELECT typeof(thread_id), metadata FROM checkpoints", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(thread_type, "text");
    assert_eq!(
        String::from_utf8(meta).unwrap(),
        r#"{"source": "input", "step": -1, "parents": {}, "user": "Zoë \"quoted\"", "score": 1.0, "tup": [1, 2]}"#
    );
}

fn schema_of(path: &std::path::Path) -> Vec<(String, String)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT type, name FROM sqlite_master ORDER BY type, name")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Opening creates Python's two tables plus two plain indexes; opening again
/// changes nothing and keeps the data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("twice.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let cp = Checkpoint::new(0);
    saver
        .put(
            &CheckpointConfig::new("t"),
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &ChannelVersions::new(),
        )
        .await
        .unwrap();
    saver.close().await.unwrap();
    let first = schema_of(&path);
    let names: Vec<&str> = first.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "checkpointer_checkpoints_id_idx",
            "checkpointer_checkpoints_thread_idx",
            "sqlite_autoindex_checkpoints_1",
            "sqlite_autoindex_writes_1",
            "checkpoints",
            "writes"
        ]
    );
    for _ in 0..2 {
        let again = SqliteSaver::open(&path).await.unwrap();
        assert!(again.get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_some());
        again.close().await.unwrap();
        assert_eq!(schema_of(&path), first);
    }
    let mode: String = Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

/// A put acknowledged before the saver is dropped (without `close`) is in
/// the file when it is opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_then_reopen_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopen.sqlite");
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("x".into(), Value::from(vec![1, 2, 3]));
    {
        let saver = SqliteSaver::open(&path).await.unwrap();
        saver
            .put(
                &CheckpointConfig::new("t").with_ns("child:1"),
                &cp,
                &CheckpointMetadata::new(CheckpointSource::Loop, 0),
                &ChannelVersions::new(),
            )
            .await
            .unwrap();
        // dropped without close: the writer thread finishes on its own
    }
    let saver = SqliteSaver::open(&path).await.unwrap();
    let got = saver
        .get_tuple(&CheckpointConfig::new("t").with_ns("child:1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.checkpoint, cp);
}

/// A channel the put neither wrote nor gave a value is stored with the value
/// its parent holds at the same version, inline, so Python reads it too;
/// also when the parent was written by another saver (another process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwritten_channels_are_stored_from_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fill.sqlite");
    let first = SqliteSaver::open(&path).await.unwrap();
    let second = SqliteSaver::open(&path).await.unwrap();
    let (v1, v2) = (
        v("00000000000000000000000000000001.0.1"),
        v("00000000000000000000000000000002.0.2"),
    );
    let mut cp1 = Checkpoint::new(0);
    cp1.channel_values.insert("a".into(), Value::from("a1"));
    cp1.channel_values.insert("b".into(), Value::from("b1"));
    cp1.channel_versions.insert("a".into(), v1.clone());
    cp1.channel_versions.insert("b".into(), v1.clone());
    cp1.channel_versions.insert("trigger".into(), v1.clone());
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let c1 = first
        .put(&CheckpointConfig::new("t"), &cp1, &meta, &cp1.channel_versions.clone())
        .await
        .unwrap();
    for saver in [&first, &second] {
        let mut cp2 = Checkpoint::new(1);
        cp2.channel_values.insert("a".into(), Value::from("a2"));
        cp2.channel_versions.insert("a".into(), v2.clone());
        cp2.channel_versions.insert("b".into(), v1.clone());
        cp2.channel_versions.insert("trigger".into(), v1.clone());
        let new_versions = ChannelVersions::from([("a".to_owned(), v2.clone())]);
        let c2 = saver.put(&c1, &cp2, &meta, &new_versions).await.unwrap();
        let got = saver.get_tuple(&c2).await.unwrap().unwrap().checkpoint;
        assert_eq!(got.channel_values.get("b"), Some(&Value::from("b1")));
        assert_eq!(got.channel_values.get("trigger"), None);
        // stored inline: the raw row has it
        let blob: Vec<u8> = Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT checkpoint FROM checkpoints WHERE checkpoint_id = ?1",
                [&cp2.id],
                |r| r.get(0),
            )
            .unwrap();
        let stored = checkpointer::serde::msgpack::decode(&blob).unwrap();
        assert_eq!(
            stored.get("channel_values").and_then(|m| m.get("b")),
            Some(&Value::from("b1"))
        );
    }
}

/// With `fill_from_parent(false)` the same put stores the checkpoint as
/// given, as Python's `SqliteSaver` does: the row is the checkpoint's own
/// bytes, without the parent's value of the unwritten channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fill_from_parent_off_stores_the_checkpoint_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("as-given.sqlite");
    let saver = SqliteSaver::builder(&path)
        .fill_from_parent(false)
        .open()
        .await
        .unwrap();
    let (v1, v2) = (
        v("00000000000000000000000000000001.0.1"),
        v("00000000000000000000000000000002.0.2"),
    );
    let mut cp1 = Checkpoint::new(0);
    cp1.channel_values.insert("a".into(), Value::from("a1"));
    cp1.channel_values.insert("b".into(), Value::from("b1"));
    cp1.channel_versions.insert("a".into(), v1.clone());
    cp1.channel_versions.insert("b".into(), v1.clone());
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let c1 = saver
        .put(&CheckpointConfig::new("t"), &cp1, &meta, &cp1.channel_versions.clone())
        .await
        .unwrap();
    let mut cp2 = Checkpoint::new(1);
    cp2.channel_values.insert("a".into(), Value::from("a2"));
    cp2.channel_versions.insert("a".into(), v2.clone());
    cp2.channel_versions.insert("b".into(), v1.clone());
    let new_versions = ChannelVersions::from([("a".to_owned(), v2.clone())]);
    let c2 = saver.put(&c1, &cp2, &meta, &new_versions).await.unwrap();
    let got = saver.get_tuple(&c2).await.unwrap().unwrap().checkpoint;
    assert_eq!(got.channel_values.get("b"), None);
    assert_eq!(got, cp2);
    saver.close().await.unwrap();
    let blob: Vec<u8> = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT checkpoint FROM checkpoints WHERE checkpoint_id = ?1",
            [&cp2.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(blob, checkpointer::serde::msgpack::encode(&cp2.to_value(true)).unwrap());
}

/// `get_tuple_encoded` and `list_encoded` return the rows as stored: the checkpoint blob
/// and metadata bytes of the file, writes in (task_path, task_id, idx)
/// order, the same rows `get_tuple` and `list` decode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_reads_return_the_stored_bytes() {
    use checkpointer::encoded::EncodedSaver;
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raw.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("a".into(), Value::from("a1"));
    cp.channel_versions
        .insert("a".into(), v("00000000000000000000000000000001.0.1"));
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let c1 = saver
        .put(&CheckpointConfig::new("t"), &cp, &meta, &cp.channel_versions.clone())
        .await
        .unwrap();
    saver
        .put_writes(&c1, &[("a".into(), Value::from("w2"))], "task-b", "p2")
        .await
        .unwrap();
    saver
        .put_writes(
            &c1,
            &[("a".into(), Value::from("w1")), ("b".into(), Value::Nil)],
            "task-a",
            "p1",
        )
        .await
        .unwrap();
    let raw = saver
        .get_tuple_encoded(&CheckpointConfig::new("t"))
        .await
        .unwrap()
        .unwrap();
    let decoded = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap().unwrap();
    assert_eq!(raw.checkpoint_id, cp.id);
    assert_eq!(raw.parent_checkpoint_id, None);
    assert_eq!(raw.checkpoint.tag, "msgpack");
    let (blob, metadata): (Vec<u8>, Vec<u8>) = Connection::open(&path)
        .unwrap()
        .query_row("SELECT checkpoint, metadata FROM checkpoints", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(raw.checkpoint.data.as_ref(), blob.as_slice());
    assert_eq!(raw.metadata.tag, "json");
    assert_eq!(raw.metadata.data.as_ref(), metadata.as_slice());
    let channels: Vec<&str> = raw.writes.iter().map(|w| w.channel.as_str()).collect();
    let tasks: Vec<&str> = raw.writes.iter().map(|w| w.task_id.as_str()).collect();
    assert_eq!(channels, ["a", "b", "a"]);
    assert_eq!(tasks, ["task-a", "task-a", "task-b"]);
    assert_eq!(raw.writes[1].value.tag, "null");
    let expected: Vec<(&str, &str)> = decoded
        .pending_writes
        .iter()
        .map(|w| (w.task_id.as_str(), w.channel.as_str()))
        .collect();
    assert_eq!(
        tasks.iter().copied().zip(channels.iter().copied()).collect::<Vec<_>>(),
        expected
    );
    let listed: Vec<_> = saver
        .list_encoded(None, checkpointer::ListOptions::default())
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].checkpoint, raw.checkpoint);
    assert!(saver
        .get_tuple_encoded(&CheckpointConfig::new("nobody"))
        .await
        .unwrap()
        .is_none());
}

/// `put_encoded` stores the bytes it is given as the row's checkpoint, the
/// metadata as `put` writes it, and refuses what `put` refuses (an empty id,
/// a checkpoint nesting deeper than a reader decodes) without storing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_put_stores_the_given_bytes() {
    use checkpointer::encoded::EncodedSaver;
    use checkpointer::serde::{msgpack, TypedBytes};
    let none = checkpointer::ChannelVersions::default();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raw-put.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("a".into(), Value::from("a1"));
    cp.channel_versions
        .insert("a".into(), v("00000000000000000000000000000001.0.1"));
    let blob = msgpack::encode(&cp.to_value(true)).unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 3);
    let stored = saver
        .put_encoded(
            &CheckpointConfig::new("t"),
            &cp.id,
            TypedBytes::new("msgpack", blob.clone()),
            &meta,
            &none,
        )
        .await
        .unwrap();
    assert_eq!(stored.checkpoint_id.as_deref(), Some(cp.id.as_str()));
    let got = saver.get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!((got.checkpoint, got.metadata), (cp.clone(), meta.clone()));
    let (row_blob, row_meta): (Vec<u8>, String) = Connection::open(&path)
        .unwrap()
        .query_row("SELECT checkpoint, CAST(metadata AS TEXT) FROM checkpoints", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(row_blob, blob);
    assert_eq!(row_meta, meta.to_python_json().unwrap());

    // {"a": [[[…nil…]]]}, 131 levels: more than a reader decodes (128)
    let mut deep = vec![0x81, 0xa1, b'a'];
    deep.extend([0x91; 130]);
    deep.push(0xc0);
    let payload = TypedBytes::new("msgpack", deep);
    let refused = [
        saver
            .put_encoded(
                &CheckpointConfig::new("u"),
                "",
                TypedBytes::new("msgpack", blob.clone()),
                &meta,
                &none,
            )
            .await,
        saver
            .put_encoded(&CheckpointConfig::new("u"), &cp.id, payload, &meta, &none)
            .await,
    ];
    assert!(
        matches!(refused[0], Err(checkpointer::Error::InvalidInput { .. })),
        "{:?}",
        refused[0]
    );
    assert!(
        matches!(refused[1], Err(checkpointer::Error::Serde { .. })),
        "{:?}",
        refused[1]
    );
    let truncated = TypedBytes::new("msgpack", blob[..blob.len() - 1].to_vec());
    let refused = saver
        .put_encoded(&CheckpointConfig::new("u"), &cp.id, truncated, &meta, &none)
        .await;
    assert!(matches!(refused, Err(checkpointer::Error::Serde { .. })), "{refused:?}");
    assert!(saver.get_tuple(&CheckpointConfig::new("u")).await.unwrap().is_none());
}

/// `put_step` hands back, without a read, the tuple a read of the stored
/// file gives: three steps of a runner, each compared with `get_tuple` on a
/// fresh saver over the same file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_step_returns_what_a_read_of_the_file_returns() {
    use checkpointer::{CheckpointSaverExt, StepCheckpoint};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("steps.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
    let mut step = StepCheckpoint::first(-1);
    step.write("__start__", Value::map([("n", Value::from(1))]), next)
        .unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let mut tuples = vec![saver.put_step(&CheckpointConfig::new("t"), &step, &meta).await.unwrap()];
    for n in 0..2 {
        let prev = tuples.last().unwrap();
        let mut step = prev.checkpoint.successor(n);
        step.bump("__start__", next)
            .unwrap()
            .write("n", n, next)
            .unwrap()
            .mark_seen("node", &["n"]);
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, n);
        let t = saver.put_step(&prev.config, &step, &meta).await.unwrap();
        tuples.push(t);
    }
    drop(saver);
    let reader = SqliteSaver::open(&path).await.unwrap();
    for t in &tuples {
        let read = reader.get_tuple(&t.config).await.unwrap().unwrap();
        assert_eq!(&read, t);
    }
    assert_eq!(tuples[2].parent_config.as_ref(), Some(&tuples[1].config));
}

fn one_checkpoint() -> (Checkpoint, CheckpointMetadata, ChannelVersions) {
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("name".into(), Value::from("Ada"));
    cp.channel_versions
        .insert("name".into(), v("00000000000000000000000000000001.0.5"));
    let versions = cp.channel_versions.clone();
    (cp, CheckpointMetadata::new(CheckpointSource::Loop, 0), versions)
}

/// `open_in_memory` returns a saver ready to use: a put reads back.
#[tokio::test(flavor = "current_thread")]
async fn open_in_memory_round_trips_a_checkpoint() {
    let saver = SqliteSaver::open_in_memory().await.unwrap();
    assert_eq!(saver.path(), None);
    let (cp, meta, versions) = one_checkpoint();
    let stored = saver
        .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
        .await
        .unwrap();
    let got = saver.get_tuple(&stored).await.unwrap().expect("stored above");
    assert_eq!(got.config, stored);
    assert_eq!(got.checkpoint.id, cp.id);
    assert_eq!(got.checkpoint.channel_values["name"], Value::from("Ada"));
    // private: another in-memory saver sees nothing of it
    let other = SqliteSaver::open_in_memory().await.unwrap();
    assert!(other.get_tuple(&stored).await.unwrap().is_none());
}

/// The builder's `open` creates the file and Python's tables, with the
/// builder's settings; a second open of the file reads what the first wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_open_creates_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("built.sqlite");
    let saver = SqliteSaver::builder(&path)
        .readers(1)
        .busy_timeout(std::time::Duration::from_secs(1))
        .open()
        .await
        .unwrap();
    assert_eq!(saver.path(), Some(path.as_path()));
    let conn = Connection::open(&path).unwrap();
    let mut tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    tables.retain(|t| !t.starts_with("sqlite_"));
    assert_eq!(tables, ["checkpoints", "writes"]);
    let (cp, meta, versions) = one_checkpoint();
    let stored = saver
        .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
        .await
        .unwrap();
    saver.close().await.unwrap();
    let again = SqliteSaver::builder(&path).open().await.unwrap();
    assert!(again.get_tuple(&stored).await.unwrap().is_some());

    let memory = SqliteSaver::builder(":memory:").open().await.unwrap();
    assert_eq!(memory.path(), None);
    assert!(memory.get_tuple(&stored).await.unwrap().is_none());
}

/// The sync `build` (for code without a runtime) gives the same saver.
#[test]
fn builder_build_works_without_a_runtime() {
    let saver = SqliteSaver::builder(":memory:").build().unwrap();
    let blocking = checkpointer::blocking::BlockingSaver::new(std::sync::Arc::new(saver));
    let (cp, meta, versions) = one_checkpoint();
    let stored = blocking
        .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
        .unwrap();
    assert!(blocking.get_tuple(&stored).unwrap().is_some());
}
