//! `import_thread` on every saver (InMemorySaver, SQLite, PostgreSQL,
//! Redis): a whole thread stored as given (writes with their task paths and
//! indexes, gaps and special channels kept), `Create` refusing a thread that
//! exists without writing anything, `Replace` swapping the thread, bad input
//! refused before anything is written with the error `put` and `put_writes`
//! give it.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]

use crate::harness;
use crate::postgres_support;
use crate::redis_support;

use checkpointer::import::{ImportMode, ImportedCheckpoint, ImportedWrite, ThreadImport};
use checkpointer::postgres::{PostgresSaver, StatementMode};
use checkpointer::redis::RedisSaver;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, Error, InMemorySaver, ListOptions, Value,
};

fn write(task: &str, path: &str, idx: i64, channel: &str, v: i64) -> ImportedWrite {
    ImportedWrite {
        task_id: task.into(),
        task_path: path.into(),
        idx,
        channel: channel.into(),
        value: Value::Int(v),
    }
}

/// Three checkpoints in two namespaces; the root's first has writes with a
/// gap in their indexes, a special channel and two task paths.
fn thread(id: &str, steps: usize) -> ThreadImport {
    let mut checkpoints = Vec::new();
    let mut parent: Option<String> = None;
    for step in 0..steps {
        let mut cp = Checkpoint::new(step as i64);
        cp.channel_values.insert("a".into(), Value::Int(step as i64));
        cp.channel_versions
            .insert("a".into(), ChannelVersion::Str(format!("{:032}.0.5", step + 1)));
        let writes = if step == 0 {
            vec![
                write("t1", "p", 0, "a", 10),
                write("t1", "p", 2, "b", 12),
                write("t1", "q", 3, "c", 13),
                write("t1", "p", -3, "__interrupt__", 9),
            ]
        } else {
            Vec::new()
        };
        checkpoints.push(ImportedCheckpoint {
            checkpoint_ns: String::new(),
            parent_checkpoint_id: parent.clone(),
            checkpoint: cp.clone(),
            metadata: CheckpointMetadata::new(CheckpointSource::Loop, step as i64),
            writes,
        });
        parent = Some(cp.id.clone());
    }
    let mut sub = Checkpoint::new(0);
    sub.channel_values.insert("x".into(), Value::from("sub"));
    sub.channel_versions.insert("x".into(), ChannelVersion::Int(1));
    checkpoints.push(ImportedCheckpoint {
        checkpoint_ns: "child:1".into(),
        parent_checkpoint_id: None,
        checkpoint: sub,
        metadata: CheckpointMetadata::new(CheckpointSource::Loop, 0),
        writes: vec![write("t9", "", 0, "x", 1)],
    });
    ThreadImport {
        thread_id: id.into(),
        checkpoints,
    }
}

/// The saver under test.
#[derive(Clone, Copy)]
enum Target<'a> {
    Memory(&'a InMemorySaver),
    Sqlite(&'a SqliteSaver),
    Postgres(&'a PostgresSaver),
    Redis(&'a RedisSaver),
}

impl Target<'_> {
    async fn import(self, t: &ThreadImport, mode: ImportMode) -> checkpointer::Result<()> {
        match self {
            Target::Memory(s) => s.import_thread(t, mode).await,
            Target::Sqlite(s) => s.import_thread(t, mode).await,
            Target::Postgres(s) => s.import_thread(t, mode).await,
            Target::Redis(s) => s.import_thread(t, mode).await,
        }
    }

    fn saver(&self) -> &dyn CheckpointSaver {
        match self {
            Target::Memory(s) => *s,
            Target::Sqlite(s) => *s,
            Target::Postgres(s) => *s,
            Target::Redis(s) => *s,
        }
    }
}

/// A value nested `levels` arrays deep.
fn nested(levels: usize) -> Value {
    (0..levels).fold(Value::Int(0), |v, _| Value::Array(vec![v].into()))
}

/// What every saver answers alike beyond the round trip: a write key given
/// twice keeps the first regular value and the last special one; a value
/// `put` or `put_writes` refuses as too deep is refused here with the same
/// error, and nothing is written; a thread holding only writes is replaced
/// by `Create`.
async fn check_rules(target: Target<'_>) {
    let saver = target.saver();
    let import = |t, m| target.import(t, m);
    let id = format!("imp-rules-{:016x}", rand::random::<u64>());
    let mut twice = thread(&id, 1);
    let writes = &mut twice.checkpoints[0].writes;
    writes.push(write("t1", "p", 0, "a", 99));
    writes.push(write("t1", "p", -3, "__interrupt__", 77));
    import(&twice, ImportMode::Create).await.unwrap();
    let cp = &twice.checkpoints[0];
    let config = CheckpointConfig::new(&id).with_checkpoint_id(cp.checkpoint.id.clone());
    let got = saver.get_tuple(&config).await.unwrap().unwrap();
    let value_of = |channel: &str| {
        got.pending_writes
            .iter()
            .filter(|w| w.task_id == "t1" && w.channel == channel)
            .map(|w| w.value.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(value_of("a"), [Value::Int(10)], "a regular write keeps its first value");
    assert_eq!(
        value_of("__interrupt__"),
        [Value::Int(77)],
        "a special write keeps its last value"
    );

    // too deep: the error put and put_writes give, and nothing written
    let deep = checkpointer::limits::MAX_NESTING + 1;
    let probe = CheckpointConfig::new(format!("{id}-probe"));
    let mut too_deep = Checkpoint::new(0);
    too_deep.channel_values.insert("a".into(), nested(deep));
    too_deep.channel_versions.insert("a".into(), ChannelVersion::Int(1));
    let by_put = saver
        .put(
            &probe,
            &too_deep,
            &CheckpointMetadata::default(),
            &too_deep.channel_versions,
        )
        .await;
    assert!(matches!(by_put, Err(Error::Serde { .. })), "{by_put:?}");
    let by_writes = saver
        .put_writes(
            &probe.clone().with_checkpoint_id(too_deep.id.clone()),
            &[("a".to_owned(), nested(deep))],
            "t",
            "",
        )
        .await;
    assert!(matches!(by_writes, Err(Error::Serde { .. })), "{by_writes:?}");
    let fresh = format!("{id}-deep");
    let mut bad = thread(&fresh, 1);
    bad.checkpoints[0].checkpoint = too_deep.clone();
    assert!(matches!(
        import(&bad, ImportMode::Create).await,
        Err(Error::Serde { .. })
    ));
    let mut bad = thread(&fresh, 1);
    bad.checkpoints[0].writes[0].value = nested(deep);
    assert!(matches!(
        import(&bad, ImportMode::Create).await,
        Err(Error::Serde { .. })
    ));
    assert_eq!(count(saver, &fresh).await, 0);

    // a thread holding only writes: Create replaces them
    let orphan = format!("{id}-orphan");
    let first = thread(&orphan, 1);
    let cp = &first.checkpoints[0].checkpoint;
    saver
        .put_writes(
            &CheckpointConfig::new(&orphan).with_checkpoint_id(cp.id.clone()),
            &[("a".to_owned(), Value::Int(5))],
            "t-old",
            "",
        )
        .await
        .unwrap();
    import(&first, ImportMode::Create).await.unwrap();
    let got = saver
        .get_tuple(&CheckpointConfig::new(&orphan).with_checkpoint_id(cp.id.clone()))
        .await
        .unwrap()
        .unwrap();
    assert!(got.pending_writes.iter().all(|w| w.task_id != "t-old"));
    assert_eq!(got.pending_writes.len(), first.checkpoints[0].writes.len());
}

async fn check(target: Target<'_>) {
    let saver = target.saver();
    let import = |t, m| target.import(t, m);
    let id = format!("imp-{:016x}", rand::random::<u64>());
    let first = thread(&id, 3);
    import(&first, ImportMode::Create).await.unwrap();
    let all = saver
        .list_vec(Some(CheckpointConfig::all_namespaces(&id)), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 4);
    for want in &first.checkpoints {
        let got = all
            .iter()
            .find(|t| t.checkpoint.id == want.checkpoint.id)
            .unwrap_or_else(|| panic!("{} missing", want.checkpoint.id));
        assert_eq!(got.config.ns(), want.checkpoint_ns);
        assert_eq!(
            got.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
            want.parent_checkpoint_id
        );
        assert_eq!(got.checkpoint.channel_values, want.checkpoint.channel_values);
        assert_eq!(got.metadata, want.metadata);
        // (task_path, task_id, idx) order
        let mut writes = want.writes.clone();
        writes.sort_by(|a, b| (&a.task_path, &a.task_id, a.idx).cmp(&(&b.task_path, &b.task_id, b.idx)));
        let got: Vec<(&str, &str, &Value)> = got
            .pending_writes
            .iter()
            .map(|w| (w.task_id.as_str(), w.channel.as_str(), &w.value))
            .collect();
        let want: Vec<(&str, &str, &Value)> = writes
            .iter()
            .map(|w| (w.task_id.as_str(), w.channel.as_str(), &w.value))
            .collect();
        assert_eq!(got, want);
    }

    // Create again: refused, nothing changed
    let other = thread(&id, 1);
    match import(&other, ImportMode::Create).await {
        Err(Error::ThreadExists { thread_id }) => assert_eq!(thread_id, id),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(saver, &id).await, 4);

    // Replace: the new thread only
    import(&other, ImportMode::Replace).await.unwrap();
    let after = saver
        .list_vec(Some(CheckpointConfig::all_namespaces(&id)), ListOptions::default())
        .await
        .unwrap();
    let mut ids: Vec<&str> = after.iter().map(|t| t.checkpoint.id.as_str()).collect();
    let mut want: Vec<&str> = other.checkpoints.iter().map(|c| c.checkpoint.id.as_str()).collect();
    ids.sort();
    want.sort();
    assert_eq!(ids, want);

    // an empty checkpoint id: refused, the thread unchanged
    let mut bad = thread(&id, 2);
    bad.checkpoints[1].checkpoint.id = String::new();
    assert!(matches!(
        import(&bad, ImportMode::Replace).await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(count(saver, &id).await, 2);
}

async fn count(saver: &dyn CheckpointSaver, id: &str) -> usize {
    saver
        .list_vec(Some(CheckpointConfig::all_namespaces(id)), ListOptions::default())
        .await
        .unwrap()
        .len()
}

async fn memory_imports_whole_threads() {
    let saver = InMemorySaver::new();
    check(Target::Memory(&saver)).await;
    check_rules(Target::Memory(&saver)).await;
}

fn redis_imports_whole_threads() {
    redis_support::block_on_thread(async {
        let saver = redis_support::saver().await;
        check(Target::Redis(&saver)).await;
        check_rules(Target::Redis(&saver)).await;
    });
}

async fn sqlite_imports_whole_threads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("import.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    check(Target::Sqlite(&saver)).await;
    // on a file of its own: the rows read below are the first check's
    let rules = SqliteSaver::open(dir.path().join("rules.sqlite")).await.unwrap();
    check_rules(Target::Sqlite(&rules)).await;
    // the stored indexes are the given ones
    saver.close().await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare("SELECT task_path, idx, channel FROM writes WHERE task_id = 't1' ORDER BY idx")
        .unwrap();
    let rows: Vec<(String, i64, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // the last import replaced the thread with one whose first checkpoint
    // has the same writes
    assert_eq!(
        rows,
        [
            ("p".to_owned(), -3, "__interrupt__".to_owned()),
            ("p".to_owned(), 0, "a".to_owned()),
            ("p".to_owned(), 2, "b".to_owned()),
            ("q".to_owned(), 3, "c".to_owned()),
        ]
    );
}

fn postgres_imports_whole_threads() {
    let Some(db) = postgres_support::shared_database() else {
        return;
    };
    postgres_support::block_on_thread(async move {
        let saver = postgres_support::saver_on(&db, StatementMode::Prepared, 2);
        check(Target::Postgres(&saver)).await;
        check_rules(Target::Postgres(&saver)).await;
        let unnamed = postgres_support::saver_on(&db, StatementMode::Unnamed, 2);
        check(Target::Postgres(&unnamed)).await;
        // a write index beyond PostgreSQL's integer: refused before writing
        let mut big = thread("imp-big-idx", 1);
        big.checkpoints[0].writes[0].idx = i64::from(i32::MAX) + 1;
        assert!(matches!(
            saver.import_thread(&big, ImportMode::Create).await,
            Err(Error::InvalidInput { .. })
        ));
        assert!(saver
            .get_tuple(&CheckpointConfig::new("imp-big-idx"))
            .await
            .unwrap()
            .is_none());
    });
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "import_thread::memory_imports_whole_threads",
            &[],
            0,
            memory_imports_whole_threads,
        ),
        harness::test(
            "import_thread::redis_imports_whole_threads",
            &[&crate::REDIS],
            redis_imports_whole_threads,
        ),
        harness::tokio(
            "import_thread::sqlite_imports_whole_threads",
            &[],
            0,
            sqlite_imports_whole_threads,
        ),
        harness::test(
            "import_thread::postgres_imports_whole_threads",
            &[&crate::POSTGRES],
            postgres_imports_whole_threads,
        ),
    ]
}
