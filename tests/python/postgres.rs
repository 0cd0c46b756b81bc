//! Compatibility with Python's `PostgresSaver` (langgraph-checkpoint-postgres
//! 3.2.0), both directions. Needs the peer venv
//! (`CHECKPOINTER_PYTHON=$(scripts/python-venv.sh)`), `testdata/` and a
//! PostgreSQL server; without them the tests are reported ignored, in CI
//! (`CI=true`) they fail.
//!
//! * Python reads the crate's rows: every fixture of `testdata/` replayed into
//!   PostgreSQL through the crate reads in `read_fixtures.py` exactly as
//!   Python's own SQLite file does; values Python's saver could not store
//!   itself read back as the crate wrote them.
//! * The crate reads Python's rows: after real LangGraph graphs ran on
//!   Python's `PostgresSaver`, the crate's dump equals `read_fixtures.py`'s.
//! * One schema: Python's `setup` changes nothing on a database the crate
//!   migrated, and the crate's `setup` runs nothing on one Python migrated.

use crate::harness;
use crate::{postgres_support, sqlite_support};

use std::path::{Path, PathBuf};

use bytes::Bytes;
use checkpointer::checkpoint::NULL_TASK_ID;
use checkpointer::postgres::{PostgresSaver, StatementMode};
use checkpointer::serde::{render, Ext, ExtKind};
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Value,
};
use postgres_support::{connect, create_database, drop_database, migrations, schema_of, skip, url_of};

struct Peer {
    python: PathBuf,
    testdata: PathBuf,
}

impl Peer {
    fn script(&self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg_python_peer.py")
    }

    fn run(&self, script: &Path, args: &[&str]) -> String {
        let (ok, stdout, stderr) = sqlite_support::run_python(&self.python, script, args);
        assert!(ok, "{} {args:?} failed:\n{stderr}", script.display());
        stdout
    }

    /// `read_fixtures.py` on database `db`: Python's view of everything in it.
    fn dump(&self, db: &str) -> serde_json::Value {
        let out = self.run(&self.testdata.join("peer/read_fixtures.py"), &[&url_of(db)]);
        serde_json::from_str(&out).unwrap()
    }

    fn setup(&self, db: &str) {
        self.run(&self.script(), &["setup", &url_of(db)]);
    }

    fn graphs(&self, db: &str) {
        self.run(&self.script(), &["graphs", &url_of(db)]);
    }
}

/// The Python peer and a fresh database, or `None` after printing why not.
async fn prerequisites() -> Option<(Peer, String)> {
    let testdata = sqlite_support::testdata_dir();
    let python = sqlite_support::require_python()?;
    match create_database().await {
        Ok(db) => Some((Peer { python, testdata }, db)),
        Err(reason) => {
            skip(&reason);
            None
        }
    }
}

async fn saver(db: &str, mode: StatementMode) -> PostgresSaver {
    PostgresSaver::builder()
        .url(url_of(db))
        .statement_mode(mode)
        .max_connections(2)
        .open()
        .await
        .unwrap()
}

/// Fails with the first path where two dumps differ (a whole-dump assert
/// message would be unreadable).
fn assert_same(got: &serde_json::Value, want: &serde_json::Value, what: &str) {
    fn first_diff(a: &serde_json::Value, b: &serde_json::Value, path: String) -> Option<String> {
        use serde_json::Value::*;
        match (a, b) {
            (Object(x), Object(y)) => {
                for k in x.keys().chain(y.keys()) {
                    match (x.get(k), y.get(k)) {
                        (Some(p), Some(q)) => {
                            if let Some(d) = first_diff(p, q, format!("{path}.{k}")) {
                                return Some(d);
                            }
                        }
                        (p, q) => return Some(format!("{path}.{k}: {p:?} vs {q:?}")),
                    }
                }
                None
            }
            (Array(x), Array(y)) if x.len() == y.len() => x
                .iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (p, q))| first_diff(p, q, format!("{path}[{i}]"))),
            _ if a == b => None,
            _ => Some(format!("{path}: {a} vs {b}")),
        }
    }
    if let Some(d) = first_diff(got, want, String::new()) {
        panic!("{what}: dumps differ at {d}");
    }
}

async fn python_reads_every_fixture_the_crate_wrote() {
    let Some((peer, _)) = prerequisites().await else { return };
    for (name, path) in sqlite_support::fixtures(&peer.testdata) {
        let db = create_database().await.unwrap();
        let target = saver(&db, StatementMode::Prepared).await;
        let (_dir, copy) = sqlite_support::temp_copy(&path);
        sqlite_support::replay(&copy, &target).await;
        let mut expected: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(path.with_file_name(name.replace(".sqlite", ".expected.json"))).unwrap(),
        )
        .unwrap();
        expected["source"] = "postgres".into();
        let got = peer.dump(&db);
        assert_same(&got, &expected, &name);
        // The crate reads its own rows as Python does, too.
        assert_same(&render::dump(&target, "postgres").await.unwrap(), &got, &name);
        drop(target);
        drop_database(&db).await;
    }
}

async fn crate_reads_what_python_graphs_wrote() {
    let Some((peer, db)) = prerequisites().await else {
        return;
    };
    peer.graphs(&db);
    let python = peer.dump(&db);
    assert_eq!(python["errors"], serde_json::json!([]));
    assert_eq!(python["summary"]["threads"], 5, "{}", python["summary"]);
    for mode in [StatementMode::Prepared, StatementMode::Unnamed] {
        let ours = render::dump(&saver(&db, mode).await, "postgres").await.unwrap();
        assert_same(&ours, &python, &format!("{mode:?}"));
    }
    encoded_reads_are_what_python_wrote(&saver(&db, StatementMode::Prepared).await, &db).await;
    drop_database(&db).await;
}

/// Encoded reads of Python's rows: each checkpoint as `get_tuple` reads it,
/// encoded by `JsonPlusSerializer` (its blobs spliced in as stored), each
/// write as Python stored it (`type`, `blob`); `list_encoded` gives the same.
async fn encoded_reads_are_what_python_wrote(saver: &PostgresSaver, db: &str) {
    use checkpointer::encoded::{EncodedSaver, EncodedTuple};
    use futures::TryStreamExt;
    let client = connect(db).await.unwrap();
    let tuples: Vec<_> = saver.list(None, Default::default()).try_collect().await.unwrap();
    assert!(tuples.len() > 5, "{}", tuples.len());
    let listed: Vec<EncodedTuple> = saver
        .list_encoded(None, Default::default())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed.len(), tuples.len());
    let mut writes_seen = 0;
    for (tuple, listed) in tuples.iter().zip(listed) {
        let read = saver.get_tuple_encoded(&tuple.config).await.unwrap().unwrap();
        assert_eq!(read, listed);
        let whole = EncodedTuple::from_tuple(tuple).unwrap();
        assert_eq!(read.checkpoint, whole.checkpoint, "{:?}", tuple.config);
        assert_eq!(read.metadata, whole.metadata);
        let rows = client
            .query(
                "SELECT task_id, channel, type, blob FROM checkpoint_writes \
                 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 \
                 ORDER BY task_path COLLATE \"C\", task_id COLLATE \"C\", idx",
                &[&tuple.config.thread_id, &tuple.config.ns(), &tuple.checkpoint.id],
            )
            .await
            .unwrap();
        let stored: Vec<(String, String, String, Vec<u8>)> = rows
            .iter()
            .map(|r| {
                (
                    r.get(0),
                    r.get(1),
                    r.get(2),
                    r.get::<_, Option<Vec<u8>>>(3).unwrap_or_default(),
                )
            })
            .collect();
        let got: Vec<(String, String, String, Vec<u8>)> = read
            .writes
            .iter()
            .map(|w| {
                (
                    w.task_id.clone(),
                    w.channel.clone(),
                    w.value.tag.clone(),
                    w.value.data.to_vec(),
                )
            })
            .collect();
        assert_eq!(got, stored, "{:?}", tuple.config);
        writes_seen += got.len();
    }
    assert!(writes_seen > 0);
}

fn obj(kind: ExtKind, module: &str, name: &str, arg: Value) -> Value {
    Value::Ext(Box::new(Ext::object(kind, module, name, arg).unwrap()))
}

/// Values of every kind, including those Python's own saver cannot store
/// inline (NaN, infinities, U+0000, -0.0) and floats JSONB would turn into
/// integers.
fn hostile_values() -> Vec<(&'static str, Value)> {
    vec![
        ("nan", Value::Float(f64::NAN)),
        ("inf", Value::Float(f64::INFINITY)),
        ("nul", Value::from("a\0b")),
        ("negzero", Value::Float(-0.0)),
        ("huge", Value::Float(1e22)),
        ("e16", Value::Float(1e16)),
        ("tiny", Value::Float(1.5e-5)),
        ("float", Value::Float(0.1)),
        ("big", Value::UInt(u64::MAX)),
        ("neg", Value::Int(i64::MIN)),
        ("text", Value::from("naïve \"quote\" \u{1} 🕰")),
        ("none", Value::Nil),
        ("yes", Value::Bool(true)),
        ("raw", Value::Bin(Bytes::from_static(b"\x00\xffbytes"))),
        (
            "nested",
            Value::Map(
                (vec![
                    (Value::Int(1), Value::from("int key")),
                    (Value::from("nul"), Value::from("x\0")),
                    (Value::from("nan"), Value::Float(f64::NAN)),
                    (
                        Value::from("list"),
                        Value::Array((vec![Value::Nil, Value::Float(-0.0)]).into()),
                    ),
                ])
                .into(),
            ),
        ),
        (
            "when",
            Value::Ext(Box::new(
                Ext::object_with_method(
                    ExtKind::MethodSingleArg,
                    "datetime",
                    "datetime",
                    Value::from("2024-01-02T03:04:05.000678+00:00"),
                    "fromisoformat",
                )
                .unwrap(),
            )),
        ),
        (
            "id",
            obj(
                ExtKind::ConstructorSingleArg,
                "uuid",
                "UUID",
                Value::from("12345678123456781234567812345678"),
            ),
        ),
        ("log", Value::delta_snapshot(Value::from(vec!["in", "n1"]))),
    ]
}

async fn python_reads_values_its_own_saver_could_not_store() {
    let Some((peer, db)) = prerequisites().await else {
        return;
    };
    let saver = saver(&db, StatementMode::Prepared).await;
    let mut root = Checkpoint::new(0);
    for (ch, value) in hostile_values() {
        root.channel_values.insert(ch.into(), value);
        root.channel_versions
            .insert(ch.into(), saver.get_next_version(None).unwrap());
    }
    let mut metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    metadata.insert("run_id", "run-1");
    metadata.insert("score", Value::Float(1e16));
    metadata.insert("note", "naïve \"quote\" \u{1}");
    metadata.insert(
        "nested",
        Value::map([("deep", Value::from(vec![Value::Nil, Value::Float(0.5)]))]),
    );
    let root_cfg = saver
        .put(
            &CheckpointConfig::new("hostile"),
            &root,
            &metadata,
            &ChannelVersions::new(),
        )
        .await
        .unwrap();
    saver
        .put_writes(
            &root_cfg,
            &[("__resume__".into(), Value::from("yes"))],
            NULL_TASK_ID,
            "",
        )
        .await
        .unwrap();
    let writes: Vec<(String, Value)> = hostile_values()
        .into_iter()
        .map(|(c, v)| (c.to_owned(), v))
        .chain([("__error__".to_owned(), Value::from("ValueError('boom')"))])
        .collect();
    saver
        .put_writes(&root_cfg, &writes, "task-1", "~__pregel_pull, node")
        .await
        .unwrap();
    // A child namespace and a next checkpoint that only names versions.
    let child = CheckpointConfig::new("hostile").with_ns("child:3dad8c10-2692-f41f-69ba-4ffb93f90bd7");
    let mut md = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    md.insert("parents", Value::map([("", Value::from(root.id.as_str()))]));
    let mut sub = Checkpoint::new(0);
    sub.channel_values.insert("x".into(), Value::from(vec![1]));
    sub.channel_versions
        .insert("x".into(), saver.get_next_version(None).unwrap());
    saver
        .put(&child, &sub, &md, &sub.channel_versions.clone())
        .await
        .unwrap();
    let mut next = Checkpoint::new(1);
    next.channel_versions = root.channel_versions.clone();
    saver
        .put(
            &root_cfg,
            &next,
            &CheckpointMetadata::new(CheckpointSource::Loop, 1),
            &ChannelVersions::new(),
        )
        .await
        .unwrap();

    let python = peer.dump(&db);
    assert_eq!(python["errors"], serde_json::json!([]));
    let ours = render::dump(&saver, "postgres").await.unwrap();
    assert_same(&python, &ours, "hostile values");
    // Spot checks of Python's rendering: the values the crate wrote.
    let cps = &python["threads"][0]["namespaces"][0]["checkpoints"];
    for cp in [&cps[0], &cps[1]] {
        let values = &cp["checkpoint"]["channel_values"];
        assert_eq!(values["nan"], serde_json::json!({"__float__": "nan"}));
        assert_eq!(values["nul"], "a\u{0}b");
        assert_eq!(values["negzero"], serde_json::json!(-0.0));
        assert!(values["huge"].is_f64() && values["e16"].is_f64(), "{values}");
        assert_eq!(values["log"], serde_json::json!([["in", "n1"]]));
    }
    assert!(cps[0]["metadata"]["score"].is_f64());
    drop(saver);
    drop_database(&db).await;
}

async fn python_and_crate_share_one_schema() {
    let Some((peer, ours)) = prerequisites().await else {
        return;
    };
    // The crate migrates; Python's setup then has nothing to do.
    saver(&ours, StatementMode::Prepared).await;
    let (schema, versions) = (schema_of(&ours).await, migrations(&ours).await);
    assert_eq!(versions, (0..=9).collect::<Vec<_>>());
    peer.setup(&ours);
    assert_eq!(
        schema_of(&ours).await,
        schema,
        "Python's setup changed the crate's schema"
    );
    assert_eq!(migrations(&ours).await, versions);

    // Python migrates; the result is the crate's schema, and the crate's
    // setup runs nothing (a dropped index stays dropped).
    let theirs = create_database().await.unwrap();
    peer.setup(&theirs);
    assert_eq!(
        schema_of(&theirs).await,
        schema,
        "Python's schema differs from the crate's"
    );
    assert_eq!(migrations(&theirs).await, versions);
    let client = connect(&theirs).await.unwrap();
    client
        .batch_execute("DROP INDEX checkpoints_thread_id_idx")
        .await
        .unwrap();
    saver(&theirs, StatementMode::Prepared).await;
    let after = schema_of(&theirs).await;
    assert!(
        !after.iter().any(|l| l.starts_with("checkpoints_thread_id_idx")),
        "the crate re-ran a migration Python had recorded"
    );
    drop(client);
    drop_database(&ours).await;
    drop_database(&theirs).await;
}

/// With an encrypting serializer the crate keeps no channel value inline in
/// plaintext (Python would leave primitives there); Python's `PostgresSaver`
/// with `EncryptedSerializer.from_pycryptodome_aes` and the same key reads
/// every value back.
#[cfg(feature = "encryption")]
async fn python_decrypts_values_the_crate_encrypted() {
    use std::sync::Arc;

    use checkpointer::serde::EncryptedSerializer;
    let Some((peer, db)) = prerequisites().await else {
        return;
    };
    const KEY: &[u8; 32] = b"0123456789abcdef0123456789abcdef";
    let saver = PostgresSaver::builder()
        .url(url_of(&db))
        .serializer(Arc::new(EncryptedSerializer::from_key(KEY).unwrap()))
        .open()
        .await
        .unwrap();
    let mut cp = Checkpoint::new(0);
    for (ch, v) in [
        ("password", Value::from("plaintext-password")),
        ("count", Value::from(41_999)),
        ("flag", Value::Nil),
        ("items", Value::from(vec![1, 2])),
    ] {
        cp.channel_values.insert(ch.into(), v);
        cp.channel_versions
            .insert(ch.into(), saver.get_next_version(None).unwrap());
    }
    let new_versions: ChannelVersions = cp.channel_versions.clone();
    saver
        .put(
            &CheckpointConfig::new("enc"),
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &new_versions,
        )
        .await
        .unwrap();

    let script = std::env::temp_dir().join(format!("ckpt_decrypt_{}.py", std::process::id()));
    std::fs::write(
        &script,
        r#"import json, sys
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
with PostgresSaver.from_conn_string(sys.argv[1]) as saver:
    saver.serde = EncryptedSerializer.from_pycryptodome_aes(key=sys.argv[2].encode())
    t = saver.get_tuple({"configurable": {"thread_id": "enc", "checkpoint_ns": ""}})
    print(json.dumps(t.checkpoint["channel_values"], sort_keys=True))
"#,
    )
    .unwrap();
    let key = std::str::from_utf8(KEY).unwrap();
    let out = peer.run(&script, &[&url_of(&db), key]);
    let _ = std::fs::remove_file(&script);
    assert_eq!(
        out.trim(),
        r#"{"count": 41999, "flag": null, "items": [1, 2], "password": "plaintext-password"}"#
    );
    drop(saver);
    drop_database(&db).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "postgres::python_reads_every_fixture_the_crate_wrote",
            &[&crate::PYTHON, &crate::POSTGRES],
            2,
            python_reads_every_fixture_the_crate_wrote,
        ),
        harness::tokio(
            "postgres::crate_reads_what_python_graphs_wrote",
            &[&crate::PYTHON, &crate::POSTGRES],
            2,
            crate_reads_what_python_graphs_wrote,
        ),
        harness::tokio(
            "postgres::python_reads_values_its_own_saver_could_not_store",
            &[&crate::PYTHON, &crate::POSTGRES],
            2,
            python_reads_values_its_own_saver_could_not_store,
        ),
        harness::tokio(
            "postgres::python_and_crate_share_one_schema",
            &[&crate::PYTHON, &crate::POSTGRES],
            2,
            python_and_crate_share_one_schema,
        ),
        harness::tokio(
            "postgres::python_decrypts_values_the_crate_encrypted",
            &[&crate::PYTHON, &crate::POSTGRES],
            2,
            python_decrypts_values_the_crate_encrypted,
        ),
    ]
}
