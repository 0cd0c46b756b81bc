//! PostgreSQL-specific behaviour: migrations, the inline/blob split as stored
//! rows, values JSONB cannot hold, statement modes, reconnection, paging.

use crate::harness;
use crate::postgres_support;

use std::sync::Arc;

use checkpointer::postgres::{tokio_postgres, PostgresSaver, StatementMode};
use checkpointer::serde::{Ext, Value};
use checkpointer::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, Error, ListOptions,
};
use postgres_support::{
    connect, create_database, drop_database, migrations, saver_on, schema_of, shared_database, skip, url_of,
};

/// Migrations 0–5 of Python's `langgraph-checkpoint-postgres` 3.2.0
/// (`langgraph/checkpoint/postgres/base.py`), as Python runs them: kept here
/// rather than taken from the crate, so the test sets up what Python left.
const PYTHON_MIGRATIONS_TO_V5: [&str; 6] = [
    "CREATE TABLE IF NOT EXISTS checkpoint_migrations (\n    v INTEGER PRIMARY KEY\n);",
    "CREATE TABLE IF NOT EXISTS checkpoints (\n    thread_id TEXT NOT NULL,\n    checkpoint_ns TEXT NOT NULL DEFAULT '',\n    \
     checkpoint_id TEXT NOT NULL,\n    parent_checkpoint_id TEXT,\n    type TEXT,\n    checkpoint JSONB NOT NULL,\n    \
     metadata JSONB NOT NULL DEFAULT '{}',\n    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)\n);",
    "CREATE TABLE IF NOT EXISTS checkpoint_blobs (\n    thread_id TEXT NOT NULL,\n    checkpoint_ns TEXT NOT NULL DEFAULT '',\n    \
     channel TEXT NOT NULL,\n    version TEXT NOT NULL,\n    type TEXT NOT NULL,\n    blob BYTEA,\n    \
     PRIMARY KEY (thread_id, checkpoint_ns, channel, version)\n);",
    "CREATE TABLE IF NOT EXISTS checkpoint_writes (\n    thread_id TEXT NOT NULL,\n    checkpoint_ns TEXT NOT NULL DEFAULT '',\n    \
     checkpoint_id TEXT NOT NULL,\n    task_id TEXT NOT NULL,\n    idx INTEGER NOT NULL,\n    channel TEXT NOT NULL,\n    \
     type TEXT,\n    blob BYTEA NOT NULL,\n    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)\n);",
    "ALTER TABLE checkpoint_blobs ALTER COLUMN blob DROP not null;",
    "SELECT 1;",
];

/// The first key (`classid`) of the per-thread advisory lock `put` takes
/// shared: `pg_advisory_xact_lock(int4, int4)` on (this, `hashtext(thread_id)`).
const THREAD_LOCK_CLASS: i32 = 0x636b_7074;

fn thread() -> String {
    format!("t-{:016x}", rand::random::<u64>())
}

fn checkpoint(values: &[(&str, Value)]) -> Checkpoint {
    let mut cp = Checkpoint::new(0);
    for (ch, v) in values {
        cp.channel_values.insert((*ch).to_owned(), v.clone());
        cp.channel_versions
            .insert((*ch).to_owned(), checkpointer::version::next_version(None).unwrap());
    }
    cp
}

async fn put(saver: &dyn CheckpointSaver, config: &CheckpointConfig, cp: &Checkpoint) -> CheckpointConfig {
    saver
        .put(
            config,
            cp,
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &cp.channel_versions,
        )
        .await
        .unwrap()
}

/// A fresh database, or `None` after printing why there is none.
async fn fresh() -> Option<String> {
    match create_database().await {
        Ok(name) => Some(name),
        Err(reason) => {
            skip(&reason);
            None
        }
    }
}

async fn setup_creates_python_schema_once_and_concurrently() {
    let Some(db) = fresh().await else { return };
    // lazy (`build`): the setups below run by hand
    let savers: Vec<PostgresSaver> = (0..6)
        .map(|_| PostgresSaver::builder().url(url_of(&db)).build().unwrap())
        .collect();
    assert_eq!(savers[0].migration_version().await.unwrap(), None);
    // Six processes' worth of setup at once: they take turns.
    let handles: Vec<_> = savers
        .iter()
        .cloned()
        .map(|s| tokio::spawn(async move { s.setup().await }))
        .collect();
    for h in handles {
        h.await.unwrap().unwrap();
    }
    assert_eq!(migrations(&db).await, (0..=9).collect::<Vec<_>>());
    assert_eq!(savers[0].migration_version().await.unwrap(), Some(9));
    let schema = schema_of(&db).await;
    for line in [
        "checkpoint_writes.task_path text NO '':: text #9",
        "checkpoint_blobs.blob bytea YES - #6",
        "checkpoints.metadata jsonb NO '{}'::jsonb #7",
    ] {
        let line = line.replace(":: ", "::");
        assert!(schema.contains(&line), "{line} missing from {schema:#?}");
    }
    assert!(schema
        .iter()
        .any(|l| l.contains("checkpoint_writes_thread_id_idx ON public.checkpoint_writes USING btree (thread_id)")));
    // Again: nothing to do, nothing changes.
    savers[1].setup().await.unwrap();
    assert_eq!(schema_of(&db).await, schema);
    drop(savers);
    drop_database(&db).await;
}

/// `PostgresSaver::open` returns a saver ready to use: on a fresh database
/// it has run every migration, and opening again changes nothing.
async fn open_creates_the_schema() {
    let Some(db) = fresh().await else { return };
    let lazy = PostgresSaver::builder().url(url_of(&db)).build().unwrap();
    assert_eq!(lazy.migration_version().await.unwrap(), None);

    let saver = PostgresSaver::open(url_of(&db)).await.unwrap();
    assert_eq!(saver.migration_version().await.unwrap(), Some(9));
    assert_eq!(migrations(&db).await, (0..=9).collect::<Vec<_>>());
    let t = thread();
    let stored = put(
        &saver,
        &CheckpointConfig::new(&t),
        &checkpoint(&[("x", Value::from(1))]),
    )
    .await;
    assert_eq!(saver.get_tuple(&stored).await.unwrap().unwrap().config, stored);

    let schema = schema_of(&db).await;
    let again = PostgresSaver::open(url_of(&db)).await.unwrap();
    assert_eq!(again.migration_version().await.unwrap(), Some(9));
    assert_eq!(schema_of(&db).await, schema);
    drop((lazy, saver, again));
    drop_database(&db).await;
}

/// The builder's `open` (with settings, and on an existing pool) runs the
/// migrations too; its `build` runs none.
async fn builder_open_creates_the_schema() {
    let Some(db) = fresh().await else { return };
    let saver = PostgresSaver::builder()
        .url(url_of(&db))
        .max_connections(2)
        .statement_mode(StatementMode::Unnamed)
        .open()
        .await
        .unwrap();
    assert_eq!(saver.migration_version().await.unwrap(), Some(9));
    assert_eq!(saver.statement_mode(), StatementMode::Unnamed);
    drop(saver);
    drop_database(&db).await;

    let Some(db) = fresh().await else { return };
    let pool = PostgresSaver::builder()
        .url(url_of(&db))
        .build()
        .unwrap()
        .pool()
        .clone();
    let lazy = PostgresSaver::builder().pool(pool.clone()).build().unwrap();
    assert_eq!(lazy.migration_version().await.unwrap(), None);
    let saver = PostgresSaver::builder().pool(pool).open().await.unwrap();
    assert_eq!(saver.migration_version().await.unwrap(), Some(9));
    assert_eq!(lazy.migration_version().await.unwrap(), Some(9));
    let t = thread();
    let stored = put(&lazy, &CheckpointConfig::new(&t), &checkpoint(&[("x", Value::from(1))])).await;
    assert!(saver.get_tuple(&stored).await.unwrap().is_some());
    drop((lazy, saver));
    drop_database(&db).await;
}

async fn setup_in_transaction_builds_the_same_schema() {
    let Some(reference) = fresh().await else { return };
    let Some(db) = fresh().await else { return };
    PostgresSaver::open(url_of(&reference)).await.unwrap();

    let saver = PostgresSaver::builder().url(url_of(&db)).build().unwrap();
    let mut client = connect(&db).await.unwrap();
    // Rolled back: nothing stays.
    let tx = client.transaction().await.unwrap();
    saver.setup_in_transaction(&tx).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(saver.migration_version().await.unwrap(), None);
    // Committed: the same schema as `setup`, indexes included.
    let tx = client.transaction().await.unwrap();
    tx.batch_execute("CREATE TABLE app_table (x int)").await.unwrap();
    saver.setup_in_transaction(&tx).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(migrations(&db).await, (0..=9).collect::<Vec<_>>());
    let with_app: Vec<String> = schema_of(&db)
        .await
        .into_iter()
        .filter(|l| !l.starts_with("app_table."))
        .collect();
    assert_eq!(with_app, schema_of(&reference).await);
    drop_database(&db).await;
    drop_database(&reference).await;
}

async fn setup_continues_a_partial_migration() {
    let Some(db) = fresh().await else { return };
    let client = connect(&db).await.unwrap();
    // A database an older Python saver left at version 5: no indexes, no task_path.
    for (v, sql) in PYTHON_MIGRATIONS_TO_V5.iter().enumerate() {
        client.batch_execute(sql).await.unwrap();
        client
            .execute("INSERT INTO checkpoint_migrations (v) VALUES ($1)", &[&(v as i32)])
            .await
            .unwrap();
    }
    client
        .batch_execute(
            "INSERT INTO checkpoint_writes (thread_id, checkpoint_id, task_id, idx, channel, type, blob) \
             VALUES ('t', 'c', 'task', 0, 'ch', 'msgpack', '\\x01')",
        )
        .await
        .unwrap();
    let saver = PostgresSaver::open(url_of(&db)).await.unwrap();
    assert_eq!(migrations(&db).await, (0..=9).collect::<Vec<_>>());
    let path: String = client
        .query_one("SELECT task_path FROM checkpoint_writes", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(path, "");
    drop(saver);
    drop_database(&db).await;
}

async fn values_split_between_jsonb_and_blobs_as_python_does() {
    let Some(db) = shared_database() else { return };
    let saver = saver_on(&db, StatementMode::Prepared, 2);
    let t = thread();
    let snapshot = Value::Ext(Box::new(Ext::delta_snapshot(Value::from(vec!["a"]))));
    let values = [
        ("str", Value::from("meow")),
        ("int", Value::Int(-3)),
        ("big", Value::UInt(u64::MAX)),
        ("float", Value::Float(2.5)),
        ("huge", Value::Float(1e22)),
        ("tiny", Value::Float(5e-324)),
        ("bool", Value::Bool(true)),
        ("nil", Value::Nil),
        ("list", Value::from(vec![1, 2])),
        ("bytes", Value::Bin(bytes::Bytes::from_static(b"\x00\x01"))),
        ("nan", Value::Float(f64::NAN)),
        ("inf", Value::Float(f64::NEG_INFINITY)),
        ("negzero", Value::Float(-0.0)),
        ("f32", Value::F32(1.5)),
        ("nul", Value::from("a\0b")),
        ("log", snapshot.clone()),
    ];
    let cp = checkpoint(&values);
    let stored = put(&saver, &CheckpointConfig::new(&t), &cp).await;

    let client = connect(&db).await.unwrap();
    let inline: Vec<String> = client
        .query(
            "SELECT jsonb_object_keys(checkpoint -> 'channel_values') FROM checkpoints WHERE thread_id = $1",
            &[&t],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut inline_sorted = inline.clone();
    inline_sorted.sort();
    assert_eq!(
        inline_sorted,
        ["big", "bool", "float", "huge", "int", "log", "nil", "str", "tiny"]
    );
    let marker: String = client
        .query_one(
            "SELECT (checkpoint -> 'channel_values' -> 'log')::text FROM checkpoints WHERE thread_id = $1",
            &[&t],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(marker, "true", "delta snapshots leave Python's inline marker");
    let mut blobs: Vec<(String, String)> = client
        .query("SELECT channel, type FROM checkpoint_blobs WHERE thread_id = $1", &[&t])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    blobs.sort();
    let expected: Vec<(String, String)> = [
        ("bytes", "bytes"),
        ("f32", "msgpack"),
        ("inf", "msgpack"),
        ("list", "msgpack"),
        ("log", "msgpack"),
        ("nan", "msgpack"),
        ("negzero", "msgpack"),
        ("nul", "msgpack"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(blobs, expected);
    // JSONB keeps what Python's json.loads needs to see floats as floats.
    let huge: String = client
        .query_one(
            "SELECT (checkpoint -> 'channel_values' -> 'huge')::text FROM checkpoints WHERE thread_id = $1",
            &[&t],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(huge, "10000000000000000000000.0");

    let got = saver.get_tuple(&stored).await.unwrap().unwrap().checkpoint;
    for (ch, want) in &values {
        let have = &got.channel_values[*ch];
        match want {
            Value::Float(f) if f.is_nan() => assert!(matches!(have, Value::Float(h) if h.is_nan())),
            Value::Float(f) if *f == 0.0 => {
                assert!(matches!(have, Value::Float(h) if *h == 0.0 && h.is_sign_negative()))
            }
            _ => assert_eq!(have, want, "channel {ch}"),
        }
    }
    assert_eq!(got.channel_values.len(), values.len());
}

async fn metadata_jsonb_cannot_hold_is_refused_and_nothing_is_written() {
    let Some(db) = shared_database() else { return };
    let saver = saver_on(&db, StatementMode::Prepared, 2);
    let t = thread();
    let cp = checkpoint(&[("list", Value::from(vec![1]))]);
    for bad in [
        Value::map([("deep", Value::from(vec![Value::from("x\0y")]))]),
        Value::Float(f64::NAN),
        Value::Bin(bytes::Bytes::from_static(b"x")),
        Value::Map(vec![(Value::Int(1), Value::Nil)].into()),
    ] {
        let mut md = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        md.insert("bad", bad.clone());
        let err = saver
            .put(&CheckpointConfig::new(&t), &cp, &md, &cp.channel_versions)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{bad:?}: {err:?}");
    }
    let client = connect(&db).await.unwrap();
    for table in ["checkpoints", "checkpoint_blobs"] {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {table} WHERE thread_id = $1"), &[&t])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table} after refused puts");
    }
    // Unlike Python's saver, `writes` stays in the metadata (one filter for
    // every backend).
    let mut md = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    md.insert("writes", Value::map([("node", Value::Int(1))]));
    let stored = saver
        .put(&CheckpointConfig::new(&t), &cp, &md, &cp.channel_versions)
        .await
        .unwrap();
    assert_eq!(saver.get_tuple(&stored).await.unwrap().unwrap().metadata, md);
    let found = saver
        .list_vec(
            Some(CheckpointConfig::new(&t)),
            ListOptions::default().filter("writes", Value::map([("node", Value::Int(1))])),
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

async fn prepared_statement_count(saver: &PostgresSaver) -> i64 {
    let client = saver.pool().get().await.unwrap();
    client
        .simple_query("SELECT count(*) FROM pg_prepared_statements")
        .await
        .unwrap()
        .into_iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
            _ => None,
        })
        .unwrap()
}

async fn unnamed_mode_leaves_no_prepared_statements() {
    let Some(db) = shared_database() else { return };
    for (mode, expect_named) in [(StatementMode::Unnamed, false), (StatementMode::Prepared, true)] {
        // One connection, so every call and the count run on the same session.
        let saver = saver_on(&db, mode, 1);
        let t = thread();
        let cp = checkpoint(&[("a", Value::from(vec![1]))]);
        let stored = put(&saver, &CheckpointConfig::new(&t), &cp).await;
        saver
            .put_writes(&stored, &[("a".into(), Value::Int(2))], "task", "")
            .await
            .unwrap();
        saver.get_tuple(&stored).await.unwrap().unwrap();
        saver
            .list_vec(Some(CheckpointConfig::new(&t)), ListOptions::default())
            .await
            .unwrap();
        saver
            .get_delta_channel_history(&stored, &["a".to_owned()])
            .await
            .unwrap();
        saver
            .prune(std::slice::from_ref(&t), checkpointer::PruneStrategy::KeepLatest)
            .await
            .unwrap();
        saver.delete_thread(&t).await.unwrap();
        let named = prepared_statement_count(&saver).await;
        assert_eq!(named > 0, expect_named, "{mode:?}: {named} prepared statements");
    }
}

async fn calls_succeed_after_the_server_drops_connections() {
    // Its own database: the server kills every connection to it.
    let Some(db) = fresh().await else { return };
    let saver = saver_on(&db, StatementMode::Prepared, 4);
    saver.setup().await.unwrap();
    let t = thread();
    let mut parent = CheckpointConfig::new(&t);
    for round in 0..3 {
        // Warm the pool, then have the server kill every connection of the
        // saver (as cloud servers do with idle ones).
        saver.get_tuple(&parent).await.unwrap();
        let admin = connect("postgres").await.unwrap();
        let killed: i64 = admin
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1) k",
                &[&db],
            )
            .await
            .unwrap()
            .get(0);
        assert!(killed >= 1, "round {round}: no connection to kill");
        // A read right away: repeated once on a fresh connection if needed.
        saver.get_tuple(&parent).await.unwrap();
        // A write: succeeds, or fails retryably (nothing committed) and then
        // succeeds.
        let cp = checkpoint(&[("n", Value::Int(round))]);
        let md = CheckpointMetadata::new(CheckpointSource::Loop, round);
        parent = match saver.put(&parent, &cp, &md, &cp.channel_versions).await {
            Ok(c) => c,
            Err(e) => {
                assert!(matches!(e, Error::Storage { .. }), "{e:?}");
                saver.put(&parent, &cp, &md, &cp.channel_versions).await.unwrap()
            }
        };
    }
    let history = saver
        .list_vec(Some(CheckpointConfig::new(&t)), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(history.len(), 3);
    drop(saver);
    drop_database(&db).await;
}

async fn list_pages_through_long_histories() {
    let Some(db) = shared_database() else { return };
    let saver = saver_on(&db, StatementMode::Prepared, 2);
    let t = thread();
    let mut parent = CheckpointConfig::new(&t);
    let mut ids = Vec::new();
    for i in 0..250 {
        let cp = checkpoint(&[("i", Value::Int(i)), ("list", Value::from(vec![i]))]);
        let mut md = CheckpointMetadata::new(CheckpointSource::Loop, i);
        md.insert("parity", i % 2);
        let ns_config = if i % 5 == 0 {
            parent.clone().with_ns("sub:x")
        } else {
            parent.clone()
        };
        let stored = saver.put(&ns_config, &cp, &md, &cp.channel_versions).await.unwrap();
        ids.push(cp.id.clone());
        if i % 5 != 0 {
            parent = stored;
        }
    }
    ids.reverse();
    let all: Vec<String> = saver
        .list_vec(Some(CheckpointConfig::all_namespaces(&t)), ListOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.checkpoint.id)
        .collect();
    assert_eq!(all, ids);
    let odd = saver
        .list_vec(
            Some(CheckpointConfig::all_namespaces(&t)),
            ListOptions::default().filter("parity", 1).limit(101),
        )
        .await
        .unwrap();
    assert_eq!(odd.len(), 101);
    assert!(odd.iter().all(|t| t.metadata.get("parity") == Some(&Value::Int(1))));
    assert_eq!(odd[0].checkpoint.id, ids[0]);
    let before = saver
        .list_vec(
            Some(CheckpointConfig::new(&t)),
            ListOptions::default().before(ids[10].clone()).limit(150),
        )
        .await
        .unwrap();
    assert_eq!(before.len(), 150);
    assert!(before
        .iter()
        .all(|tu| tu.checkpoint.id < ids[10] && tu.config.ns() == ""));
    assert_eq!(
        before[0].checkpoint.channel_values["list"],
        Value::from(vec![before[0].metadata.step().unwrap()])
    );
}

async fn delta_history_over_a_deep_chain() {
    let Some(db) = shared_database() else { return };
    let saver = saver_on(&db, StatementMode::Unnamed, 2);
    let t = thread();
    let mut parent = CheckpointConfig::new(&t);
    let mut version = None;
    let depth = 300;
    for i in 0..depth {
        let mut cp = Checkpoint::new(i);
        let v = saver.get_next_version(version.as_ref()).unwrap();
        cp.channel_versions.insert("log".into(), v.clone());
        if i == 0 {
            cp.channel_values.insert(
                "log".into(),
                Value::Ext(Box::new(Ext::delta_snapshot(Value::from(vec!["seed"])))),
            );
        }
        version = Some(v);
        // The runtime's bookkeeping: counters name the delta channel except
        // where it was snapshotted.
        let mut md = CheckpointMetadata::new(CheckpointSource::Loop, i);
        if i > 0 {
            md.insert(
                "counters_since_delta_snapshot",
                Value::map([("log", Value::from(vec![i, i]))]),
            );
        }
        let stored = saver.put(&parent, &cp, &md, &cp.channel_versions).await.unwrap();
        saver
            .put_writes(
                &stored,
                &[("log".into(), Value::from(vec![i]))],
                &format!("task-{i}"),
                "",
            )
            .await
            .unwrap();
        parent = stored;
    }
    let history = saver
        .get_delta_channel_history(&CheckpointConfig::new(&t), &["log".to_owned(), "other".to_owned()])
        .await
        .unwrap();
    let log = &history["log"];
    assert_eq!(
        log.seed,
        Some(Value::Ext(Box::new(Ext::delta_snapshot(Value::from(vec!["seed"])))))
    );
    let got: Vec<Value> = log.writes.iter().map(|w| w.value.clone()).collect();
    let want: Vec<Value> = (0..depth - 1).map(|i| Value::from(vec![i])).collect();
    assert_eq!(
        got, want,
        "writes of every ancestor, oldest first, the head's own excluded"
    );
    assert_eq!(history["other"].seed, None);
    assert!(history["other"].writes.is_empty());
    // Prune keeps the whole chain the head needs, and its writes, ...
    saver
        .prune(std::slice::from_ref(&t), checkpointer::PruneStrategy::KeepLatest)
        .await
        .unwrap();
    let again = saver
        .get_delta_channel_history(&CheckpointConfig::new(&t), &["log".to_owned()])
        .await
        .unwrap();
    assert_eq!(again["log"], *log);
    // ... and nothing more: a consumed trigger (version, no value, not a delta
    // channel) keeps no history.
    let client = connect(&db).await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM checkpoints WHERE thread_id = $1", &[&t])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, depth);
    let mut head = saver.latest(&t).await.unwrap().unwrap();
    head.checkpoint.id = checkpointer::id::checkpoint_id(depth);
    head.checkpoint
        .channel_versions
        .insert("branch:to:x".into(), saver.get_next_version(None).unwrap());
    let mut md = head.metadata.clone();
    md.remove("counters_since_delta_snapshot");
    head.checkpoint
        .channel_values
        .insert("log".into(), Value::Ext(Box::new(Ext::delta_snapshot(Value::Nil))));
    let cfg = CheckpointConfig::new(&t).with_checkpoint_id(head.config.checkpoint_id.clone().unwrap());
    saver
        .put(&cfg, &head.checkpoint, &md, &head.checkpoint.channel_versions)
        .await
        .unwrap();
    saver
        .prune(std::slice::from_ref(&t), checkpointer::PruneStrategy::KeepLatest)
        .await
        .unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM checkpoints WHERE thread_id = $1", &[&t])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "a snapshotted head needs no ancestors");
}

async fn python_style_integer_versions_and_legacy_sends() {
    let Some(db) = shared_database() else { return };
    let saver = saver_on(&db, StatementMode::Prepared, 2);
    let t = thread();
    // A v3 checkpoint whose sends live in the parent's __pregel_tasks writes.
    let mut parent_cp = Checkpoint::new(0);
    parent_cp.channel_versions.insert("a".into(), ChannelVersion::Int(3));
    parent_cp.channel_values.insert("a".into(), Value::from("x"));
    let parent = put(&saver, &CheckpointConfig::new(&t), &parent_cp).await;
    saver
        .put_writes(
            &parent,
            &[
                ("__pregel_tasks".into(), Value::from("send-1")),
                ("__pregel_tasks".into(), Value::from("send-2")),
            ],
            "task",
            "",
        )
        .await
        .unwrap();
    let mut child = Checkpoint::new(1);
    child.v = 3;
    child.pending_sends = Some(Vec::new());
    child.channel_versions.insert("a".into(), ChannelVersion::Int(4));
    child.channel_values.insert("a".into(), Value::from("y"));
    let stored = put(&saver, &parent, &child).await;
    let got = saver.get_tuple(&stored).await.unwrap().unwrap().checkpoint;
    assert_eq!(
        got.channel_values["__pregel_tasks"],
        Value::from(vec!["send-1", "send-2"])
    );
    assert_eq!(got.channel_versions["__pregel_tasks"], ChannelVersion::Int(4));
    assert_eq!(got.channel_versions["a"], ChannelVersion::Int(4));
}

async fn list_restores_the_legacy_sends_of_every_checkpoint() {
    let Some(db) = shared_database() else { return };
    for mode in [StatementMode::Prepared, StatementMode::Unnamed] {
        let saver = saver_on(&db, mode, 2);
        let t = thread();
        // root (v4, sends r-1, r-2) <- a (v3, sends a-1) <- b (v3, no sends)
        let mut config = CheckpointConfig::new(&t);
        let mut ids = Vec::new();
        for (step, sends) in [(0, vec!["r-1", "r-2"]), (1, vec!["a-1"]), (2, vec![])] {
            let mut cp = Checkpoint::new(step);
            if step > 0 {
                cp.v = 3;
                cp.pending_sends = Some(Vec::new());
            }
            cp.channel_versions.insert("a".into(), ChannelVersion::Int(step + 1));
            cp.channel_values.insert("a".into(), Value::from("x"));
            config = put(&saver, &config, &cp).await;
            let writes: Vec<(String, Value)> = sends
                .iter()
                .map(|s| ("__pregel_tasks".to_owned(), Value::from(*s)))
                .collect();
            saver.put_writes(&config, &writes, "task", "").await.unwrap();
            ids.push(cp.id.clone());
        }
        let listed = saver
            .list_vec(Some(CheckpointConfig::new(&t)), ListOptions::default())
            .await
            .unwrap();
        let sends = |id: &str| {
            let tuple = listed.iter().find(|x| x.checkpoint.id == id).unwrap();
            tuple.checkpoint.channel_values.get("__pregel_tasks").cloned()
        };
        assert_eq!(listed.len(), 3, "{mode:?}");
        assert_eq!(sends(&ids[2]), Some(Value::from(vec!["a-1"])), "{mode:?}");
        assert_eq!(sends(&ids[1]), Some(Value::from(vec!["r-1", "r-2"])), "{mode:?}");
        assert_eq!(sends(&ids[0]), None, "{mode:?}: v4 checkpoints keep what they have");
    }
}

async fn one_saver_runs_calls_in_parallel() {
    let Some(db) = shared_database() else { return };
    let saver = Arc::new(saver_on(&db, StatementMode::Prepared, 4));
    let (blocked, free) = (thread(), thread());
    // Hold the advisory lock `put` takes (shared) on one thread's key, from
    // outside the saver: a put to that thread waits on the server.
    let mut admin = connect(&db).await.unwrap();
    let tx = admin.transaction().await.unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&THREAD_LOCK_CLASS, &blocked],
    )
    .await
    .unwrap();
    let pending = {
        let saver = saver.clone();
        let blocked = blocked.clone();
        tokio::spawn(async move {
            put(
                &*saver,
                &CheckpointConfig::new(&blocked),
                &checkpoint(&[("a", Value::Int(1))]),
            )
            .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!pending.is_finished(), "the put should wait for the lock");
    // Meanwhile the same saver serves other calls.
    let done = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let stored = put(
            &*saver,
            &CheckpointConfig::new(&free),
            &checkpoint(&[("b", Value::Int(2))]),
        )
        .await;
        saver.get_tuple(&stored).await.unwrap().unwrap();
        saver.list_vec(None, ListOptions::default().limit(3)).await.unwrap();
    })
    .await;
    assert!(done.is_ok(), "calls on other threads were held up by a pending put");
    assert!(!pending.is_finished());
    tx.commit().await.unwrap();
    let stored = pending.await.unwrap();
    assert!(saver.get_tuple(&stored).await.unwrap().is_some());
}

/// With an encrypting serializer no channel value is left in plaintext in the
/// checkpoint JSONB (Python leaves primitives there): every value is an
/// encrypted blob, and reading gives the values back.
#[cfg(feature = "encryption")]
async fn encryption_leaves_no_plaintext_value_inline() {
    use checkpointer::serde::EncryptedSerializer;
    let Some(db) = fresh().await else { return };
    let serde = EncryptedSerializer::from_key(b"0123456789abcdef0123456789abcdef").unwrap();
    let saver = PostgresSaver::builder()
        .url(url_of(&db))
        .serializer(Arc::new(serde))
        .open()
        .await
        .unwrap();

    let mut cp = Checkpoint::new(0);
    for (ch, v) in [
        ("password", Value::from("plaintext-password")),
        ("count", Value::from(41_999)),
        ("flag", Value::Nil),
    ] {
        cp.channel_values.insert(ch.into(), v);
        cp.channel_versions
            .insert(ch.into(), saver.get_next_version(None).unwrap());
    }
    let new_versions = cp.channel_versions.clone();
    let cfg = saver
        .put(
            &CheckpointConfig::new("enc"),
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &new_versions,
        )
        .await
        .unwrap();

    let client = connect(&db).await.unwrap();
    let row = client
        .query_one("SELECT checkpoint::text FROM checkpoints WHERE thread_id = 'enc'", &[])
        .await
        .unwrap();
    let stored: String = row.get(0);
    assert!(!stored.contains("plaintext-password"), "{stored}");
    assert!(!stored.contains("41999"), "{stored}");
    let tags: Vec<String> = client
        .query(
            "SELECT type FROM checkpoint_blobs WHERE thread_id = 'enc' ORDER BY channel",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tags, ["msgpack+aes", "null+aes", "msgpack+aes"]);

    let back = saver.get_tuple(&cfg).await.unwrap().unwrap();
    assert_eq!(
        back.checkpoint.channel_values["password"],
        Value::from("plaintext-password")
    );
    assert_eq!(back.checkpoint.channel_values["count"], Value::from(41_999));
    assert_eq!(back.checkpoint.channel_values["flag"], Value::Nil);
    drop(client);
    drop_database(&db).await;
}

/// The tests of this module, for the harness of `main.rs`.
/// A channel the put neither wrote nor gave a value keeps the inline value
/// its parent holds at that version; with `fill_from_parent(false)` the
/// checkpoint is stored as given, as Python's `PostgresSaver` stores it.
async fn fill_from_parent_is_a_builder_choice() {
    let Some(db) = fresh().await else { return };
    for fill in [true, false] {
        let saver = PostgresSaver::builder()
            .url(url_of(&db))
            .fill_from_parent(fill)
            .open()
            .await
            .unwrap();
        let thread = thread();
        let v1 = ChannelVersion::from("00000000000000000000000000000001.0.1");
        let v2 = ChannelVersion::from("00000000000000000000000000000002.0.2");
        let mut cp1 = Checkpoint::new(0);
        cp1.channel_values.insert("a".into(), Value::from("a1"));
        cp1.channel_values.insert("b".into(), Value::from("b1"));
        cp1.channel_versions.insert("a".into(), v1.clone());
        cp1.channel_versions.insert("b".into(), v1.clone());
        let c1 = put(&saver, &CheckpointConfig::new(&thread), &cp1).await;
        let mut cp2 = Checkpoint::new(1);
        cp2.channel_values.insert("a".into(), Value::from("a2"));
        cp2.channel_versions.insert("a".into(), v2.clone());
        cp2.channel_versions.insert("b".into(), v1.clone());
        let new_versions = checkpointer::ChannelVersions::from([("a".to_owned(), v2)]);
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 1);
        let c2 = saver.put(&c1, &cp2, &meta, &new_versions).await.unwrap();
        let got = saver.get_tuple(&c2).await.unwrap().unwrap().checkpoint;
        let expected = fill.then(|| Value::from("b1"));
        assert_eq!(
            got.channel_values.get("b"),
            expected.as_ref(),
            "fill_from_parent({fill})"
        );
        let client = connect(&db).await.unwrap();
        let stored: Vec<String> = client
            .query(
                "SELECT jsonb_object_keys(checkpoint -> 'channel_values') FROM checkpoints WHERE checkpoint_id = $1",
                &[&cp2.id],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut stored = stored;
        stored.sort();
        let want: Vec<String> = if fill {
            vec!["a".into(), "b".into()]
        } else {
            vec!["a".into()]
        };
        assert_eq!(stored, want, "fill_from_parent({fill})");
    }
    drop_database(&db).await;
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    #[cfg_attr(not(feature = "encryption"), allow(unused_mut))]
    let mut out = vec![
        harness::tokio(
            "saver::fill_from_parent_is_a_builder_choice",
            &[&crate::POSTGRES],
            2,
            fill_from_parent_is_a_builder_choice,
        ),
        harness::tokio(
            "saver::setup_creates_python_schema_once_and_concurrently",
            &[&crate::POSTGRES],
            2,
            setup_creates_python_schema_once_and_concurrently,
        ),
        harness::tokio(
            "saver::open_creates_the_schema",
            &[&crate::POSTGRES],
            2,
            open_creates_the_schema,
        ),
        harness::tokio(
            "saver::builder_open_creates_the_schema",
            &[&crate::POSTGRES],
            2,
            builder_open_creates_the_schema,
        ),
        harness::tokio(
            "saver::setup_in_transaction_builds_the_same_schema",
            &[&crate::POSTGRES],
            2,
            setup_in_transaction_builds_the_same_schema,
        ),
        harness::tokio(
            "saver::setup_continues_a_partial_migration",
            &[&crate::POSTGRES],
            2,
            setup_continues_a_partial_migration,
        ),
        harness::tokio(
            "saver::values_split_between_jsonb_and_blobs_as_python_does",
            &[&crate::POSTGRES],
            2,
            values_split_between_jsonb_and_blobs_as_python_does,
        ),
        harness::tokio(
            "saver::metadata_jsonb_cannot_hold_is_refused_and_nothing_is_written",
            &[&crate::POSTGRES],
            2,
            metadata_jsonb_cannot_hold_is_refused_and_nothing_is_written,
        ),
        harness::tokio(
            "saver::unnamed_mode_leaves_no_prepared_statements",
            &[&crate::POSTGRES],
            2,
            unnamed_mode_leaves_no_prepared_statements,
        ),
        harness::tokio(
            "saver::calls_succeed_after_the_server_drops_connections",
            &[&crate::POSTGRES],
            2,
            calls_succeed_after_the_server_drops_connections,
        ),
        harness::tokio(
            "saver::list_pages_through_long_histories",
            &[&crate::POSTGRES],
            2,
            list_pages_through_long_histories,
        ),
        harness::tokio(
            "saver::delta_history_over_a_deep_chain",
            &[&crate::POSTGRES],
            2,
            delta_history_over_a_deep_chain,
        ),
        harness::tokio(
            "saver::python_style_integer_versions_and_legacy_sends",
            &[&crate::POSTGRES],
            2,
            python_style_integer_versions_and_legacy_sends,
        ),
        harness::tokio(
            "saver::list_restores_the_legacy_sends_of_every_checkpoint",
            &[&crate::POSTGRES],
            2,
            list_restores_the_legacy_sends_of_every_checkpoint,
        ),
        harness::tokio(
            "saver::one_saver_runs_calls_in_parallel",
            &[&crate::POSTGRES],
            2,
            one_saver_runs_calls_in_parallel,
        ),
    ];
    #[cfg(feature = "encryption")]
    out.push(harness::tokio(
        "saver::encryption_leaves_no_plaintext_value_inline",
        &[&crate::POSTGRES],
        2,
        encryption_leaves_no_plaintext_value_inline,
    ));
    out
}
