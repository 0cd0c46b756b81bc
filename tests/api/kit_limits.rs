//! The runtime kit at its limits, on every backend: a manual update of
//! 100 000 keys and a super-step of 100 000 channels finish (in O(n log n))
//! with the right result; a stored step of `i64::MAX` and version counters
//! that cannot be continued are refused with a typed error and nothing
//! written, never wrapped or restarted.

use std::collections::BTreeMap;
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::task::task_id_from_parts;
use checkpointer::thread::{apply_writes, next_tasks, TaskWrites, BRANCH_TO};

const N: usize = 100_000;

fn uid(prefix: &str) -> String {
    format!("{prefix}-{}", checkpointer::id::checkpoint_id(0))
}

fn key(i: usize) -> String {
    format!("k{i:06}")
}

/// `update_state` with 100 000 keys: every key stored as a write against
/// the latest checkpoint and in the new checkpoint's state.
async fn update_state_of_a_hundred_thousand_keys(saver: Arc<dyn CheckpointSaver>) {
    let t = Thread::new(saver.clone(), uid("wide-update"));
    let input = t
        .put_input(None, Value::map([("k000000", Value::from(-1))]), None)
        .await
        .unwrap();
    let update: BTreeMap<String, i64> = (0..N).map(|i| (key(i), i as i64)).collect();
    let cfg = t.update_state(&update, "agent").await.unwrap();
    let snap: StateSnapshot<BTreeMap<String, i64>> = t.state().await.unwrap().unwrap();
    assert_eq!(snap.config, cfg);
    assert_eq!(snap.values, update);
    assert_eq!(snap.step(), 0);
    let on_input = t.tuple(input.config.checkpoint_id()).await.unwrap().unwrap();
    assert_eq!(on_input.pending_writes.len(), N);
    let versions = &snap.checkpoint.channel_versions;
    let version = &versions[key(0).as_str()];
    assert!(
        (0..N).all(|i| versions[key(i).as_str()] == *version),
        "one version for the update"
    );
    assert!(*version > input.checkpoint.channel_versions[START]);
}

/// One super-step of 100 000 tasks, each woken by its own trigger and
/// writing its own channel: the triggers are consumed, every write is
/// applied and listed (sorted) in `updated_channels`, every node records
/// what it saw, and the store hands the whole step back.
async fn step_of_a_hundred_thousand_channels(saver: Arc<dyn CheckpointSaver>) {
    let t = Thread::new(saver.clone(), uid("wide-step"));
    let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
    let trigger = |i: usize| format!("{BRANCH_TO}n{i:06}");
    let mut input = StepCheckpoint::first(-1);
    for i in (0..N).rev() {
        input.write(&trigger(i), Value::Nil, next).unwrap();
    }
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let first = saver.put_step(&t.config(), &input, &meta).await.unwrap();
    let listed = first.checkpoint.updated_channels.as_deref().unwrap();
    assert_eq!(listed.len(), N);
    assert!(listed.windows(2).all(|w| w[0] < w[1]), "sorted, each once");

    let tasks = next_tasks(&first.checkpoint, "", &first.metadata, &[]).unwrap();
    assert_eq!(tasks.len(), N);
    let writes: Vec<Vec<(String, Value)>> = (0..N).map(|i| vec![(key(i), Value::from(i as i64))]).collect();
    let done: Vec<TaskWrites<'_>> = tasks
        .iter()
        .zip(&writes)
        .map(|(task, writes)| TaskWrites {
            node: &task.name,
            triggers: &task.triggers,
            writes,
        })
        .collect();
    let v = saver.get_next_version(first.checkpoint.max_version()).unwrap();
    let step = apply_writes(&first.checkpoint, 0, &done, &v, None).unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let stored = saver.put_step(&first.config, &step, &meta).await.unwrap();

    let read = saver.get_tuple(&stored.config).await.unwrap().unwrap();
    assert_eq!(read, stored);
    let cp = &read.checkpoint;
    assert_eq!(cp.channel_values.len(), N, "the triggers are consumed");
    assert!((0..N).all(|i| cp.channel_values[key(i).as_str()] == Value::from(i as i64)));
    assert_eq!(cp.channel_versions.len(), 2 * N);
    assert!(cp.channel_versions.values().all(|x| *x == v));
    let updated = cp.updated_channels.as_deref().unwrap();
    assert_eq!(updated.len(), N);
    assert!(updated.iter().enumerate().all(|(i, c)| *c == key(i)));
    assert_eq!(cp.versions_seen.len(), N);
    let seen_v = &first.checkpoint.channel_versions[trigger(7).as_str()];
    assert_eq!(cp.versions_seen["n000007"][trigger(7).as_str()], *seen_v);
    assert!(next_tasks(cp, "", &read.metadata, &[]).unwrap().is_empty());
}

/// Metadata whose step no step follows: updates, forks and inputs on it are
/// refused with `InvalidInput` and write nothing; reading it works, its
/// tasks carrying the ids Python gives them at step 2^63.
async fn steps_no_step_follows_are_refused(saver: Arc<dyn CheckpointSaver>, steps: Vec<Value>) {
    let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
    for step in steps {
        let t = Thread::new(saver.clone(), uid("last-step"));
        let mut cp = StepCheckpoint::first(0);
        cp.write(START, Value::map([("k", Value::from(1))]), next).unwrap();
        let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        meta.insert("step", step.clone());
        let stored = saver.put_step(&t.config(), &cp, &meta).await.unwrap();
        let id = stored.config.checkpoint_id().unwrap();

        let refused = [
            t.update_state(&Value::map([("k", Value::from(2))]), "agent")
                .await
                .map(|_| ()),
            t.fork(id).await.map(|_| ()),
            t.put_input(Some(&stored), Value::map([("k", Value::from(3))]), None)
                .await
                .map(|_| ()),
        ];
        for (what, got) in ["update_state", "fork", "put_input"].iter().zip(refused) {
            let err = got.expect_err(what);
            assert!(matches!(err, Error::InvalidInput { .. }), "{what} at {step:?}: {err:?}");
            assert!(err.to_string().contains("step"), "{err}");
        }
        let history = t.history::<Value>(ListOptions::default()).await.unwrap();
        assert_eq!(history.len(), 1, "nothing written at {step:?}");
        assert!(history[0].checkpoint.id == id && history[0].tasks[0].writes.is_empty());
        assert!(t.tuple(Some(id)).await.unwrap().unwrap().pending_writes.is_empty());

        if step == Value::Int(i64::MAX) {
            let snap: StateSnapshot<Value> = t.state().await.unwrap().unwrap();
            let python =
                task_id_from_parts(id, &[START, "9223372036854775808", START, "__pregel_pull", START]).unwrap();
            assert_eq!(snap.tasks[0].id, python);
        }
    }
}

/// Version counters `get_next_version` cannot continue with a version that
/// sorts above them are refused, and an update over such a checkpoint
/// writes nothing; counters Python's `int()` reads continue as Python's.
async fn versions_never_go_back(saver: Arc<dyn CheckpointSaver>) {
    let head = |v: ChannelVersion| v.to_string().split_once('.').unwrap().0.to_owned();
    let counter = |n: u32| format!("{n:032}");
    for (current, want) in [
        ("+7.5", Some(counter(8))),
        (" 7.5", Some(counter(8))),
        ("\t12\u{3000}.5", Some(counter(13))),
        ("\u{3000}12.5", None), // 0…13 sorts below U+3000
        ("00000000000000000000000000000041.0.5", Some(counter(42))),
        ("1_000.5", None),                            // 0…1001 sorts below "1_000.5"
        ("\u{0661}\u{0663}.5", None),                 // Arabic-Indic 13: 0…14 sorts below
        ("-0000000000000000000000000000005.5", None), // -4 sorts below -5 as text
        ("99999999999999999999999999999999.5", None), // 33 digits sort below 32 nines
        ("x.1", None),                                // Python's int() raises
        ("1__0.5", None),
        ("", None),
    ] {
        let got = saver.get_next_version(Some(&ChannelVersion::from(current)));
        match (&want, got) {
            (Some(want), Ok(v)) => {
                assert!(v > ChannelVersion::from(current));
                assert_eq!(&head(v), want, "{current:?}");
            }
            (None, Err(err)) => assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}"),
            (want, got) => panic!("{current:?}: want {want:?}, got {got:?}"),
        }
    }
    let t = Thread::new(saver.clone(), uid("version"));
    let mut cp = StepCheckpoint::first(0);
    cp.write(START, Value::map([("k", Value::from(1))]), |_| {
        Ok(ChannelVersion::from("1_000.5"))
    })
    .unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let stored = saver.put_step(&t.config(), &cp, &meta).await.unwrap();
    let err = t
        .update_state(&Value::map([("k", Value::from(2))]), "agent")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert_eq!(t.history::<Value>(ListOptions::default()).await.unwrap().len(), 1);
    assert!(saver
        .get_tuple(&stored.config)
        .await
        .unwrap()
        .unwrap()
        .pending_writes
        .is_empty());
}

async fn all(saver: Arc<dyn CheckpointSaver>, big: bool, steps: Vec<Value>) {
    steps_no_step_follows_are_refused(saver.clone(), steps).await;
    versions_never_go_back(saver.clone()).await;
    if big {
        update_state_of_a_hundred_thousand_keys(saver.clone()).await;
        step_of_a_hundred_thousand_channels(saver).await;
    }
}

async fn on_memory() {
    let steps = vec![
        Value::Int(i64::MAX),
        Value::UInt(u64::MAX),
        Value::from("7"),
        Value::Nil,
    ];
    all(Arc::new(InMemorySaver::new()), true, steps).await;
}

#[cfg(feature = "sqlite")]
async fn on_a_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let saver = checkpointer::sqlite::SqliteSaver::open(dir.path().join("t.sqlite"))
        .await
        .unwrap();
    all(Arc::new(saver), true, vec![Value::Int(i64::MAX), Value::from("7")]).await;
}

#[cfg(feature = "postgres")]
async fn on_postgres() {
    let Some(db) = crate::postgres_support::shared_database() else {
        return;
    };
    let saver = crate::postgres_support::saver_on(&db, checkpointer::postgres::StatementMode::Prepared, 2);
    all(Arc::new(saver), false, vec![Value::Int(i64::MAX), Value::from("7")]).await;
}

#[cfg(feature = "redis")]
async fn on_redis() {
    let saver = checkpointer::redis::RedisSaver::open(crate::redis_support::url())
        .await
        .unwrap();
    all(Arc::new(saver), false, vec![Value::Int(i64::MAX), Value::from("7")]).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<crate::harness::Trial> {
    use crate::harness;
    #[allow(unused_mut)]
    let mut tests = vec![harness::tokio("kit_limits::on_memory", &[], 0, on_memory)];
    #[cfg(feature = "sqlite")]
    tests.push(harness::tokio("kit_limits::on_a_sqlite_file", &[], 2, on_a_sqlite_file));
    #[cfg(feature = "postgres")]
    tests.push(harness::tokio(
        "kit_limits::on_postgres",
        &[&crate::POSTGRES],
        2,
        on_postgres,
    ));
    #[cfg(feature = "redis")]
    tests.push(harness::tokio("kit_limits::on_redis", &[&crate::REDIS], 2, on_redis));
    tests
}
