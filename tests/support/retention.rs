//! A store for retention crash tests, the same on every backend: threads of
//! long chains with interrupts, marks, a fork and a delta channel, with
//! deterministic ids, so the checkpoints a policy keeps can be computed on
//! an `InMemorySaver` filled the same way.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use checkpointer::retention::{RetainOptions, RetentionPolicy};
use checkpointer::verify::{verify_thread, ViolationKind};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, CheckpointTuple, InMemorySaver, ListOptions, Value,
};

pub const THREADS: [&str; 3] = ["retain-a", "retain-b", "retain-c"];
pub const STEPS: u64 = 150;

pub fn policy() -> RetentionPolicy {
    RetentionPolicy::new().keep_last(10)
}

pub fn options() -> RetainOptions {
    RetainOptions::default().batch(4)
}

fn id(i: u64) -> String {
    format!("1ef00000-0000-6000-8000-{i:012x}")
}

/// Fills `saver` with the threads: each a chain of [`STEPS`] checkpoints
/// with a write each, an interrupt every 37 steps, a mark every 53, a
/// delta channel with a seed every 25 steps, and a fork at step 60.
pub async fn fill(saver: &dyn CheckpointSaver) {
    for (t, thread) in THREADS.iter().enumerate() {
        let mut parent = CheckpointConfig::new(*thread);
        let mut at_60 = None;
        for i in 0..STEPS {
            let mut cp = Checkpoint::new(i as i64);
            cp.id = id(i * 4 + t as u64);
            cp.ts = "2024-01-01T00:00:00+00:00".into();
            let v = ChannelVersion::Int(i as i64 + 1);
            cp.channel_values.insert("step".into(), Value::Int(i as i64));
            cp.channel_versions.insert("step".into(), v.clone());
            cp.channel_versions.insert("log".into(), v.clone());
            if i % 25 == 0 {
                cp.channel_values
                    .insert("log".into(), Value::from(vec![format!("seed {i}")]));
            }
            let mut md = CheckpointMetadata::new(CheckpointSource::Loop, i as i64);
            md.insert(
                "counters_since_delta_snapshot",
                Value::map([("log", Value::from(vec![(i % 25) as i64, (i % 25) as i64]))]),
            );
            if i % 53 == 7 {
                md.insert("pinned", true);
            }
            let new: ChannelVersions = cp.channel_versions.clone();
            parent = saver.put(&parent, &cp, &md, &new).await.unwrap();
            let mut writes = vec![("log".to_owned(), Value::from(format!("w{i}")))];
            if i % 37 == 5 {
                writes.push(("__interrupt__".to_owned(), Value::from("ask")));
            }
            saver.put_writes(&parent, &writes, "task", "").await.unwrap();
            if i == 60 {
                at_60 = Some(parent.clone());
            }
        }
        // a fork from step 60, one checkpoint long, older than the tip
        let mut cp = Checkpoint::new(61);
        cp.id = id(STEPS * 4 + t as u64);
        cp.ts = "2024-01-01T00:00:00+00:00".into();
        let md = CheckpointMetadata::new(CheckpointSource::Update, 61);
        saver
            .put(&at_60.unwrap(), &cp, &md, &ChannelVersions::new())
            .await
            .unwrap();
    }
}

/// Every checkpoint of the threads, by (thread, ns, id).
pub async fn snapshot(saver: &dyn CheckpointSaver) -> BTreeMap<(String, String, String), CheckpointTuple> {
    let mut out = BTreeMap::new();
    for thread in THREADS {
        let all = saver
            .list_vec(Some(CheckpointConfig::all_namespaces(thread)), ListOptions::default())
            .await
            .unwrap();
        for t in all {
            let key = (thread.to_owned(), t.config.ns().to_owned(), t.checkpoint.id.clone());
            out.insert(key, t);
        }
    }
    out
}

/// The keys the policy keeps: the survivors of an uninterrupted run on an
/// `InMemorySaver` filled the same way.
pub async fn expected_kept() -> Vec<(String, String, String)> {
    let memory = InMemorySaver::new();
    fill(&memory).await;
    memory.retain(&policy(), options()).await.unwrap();
    snapshot(&memory).await.into_keys().collect()
}

/// After an interrupted run: every thread reads whole, `verify` finds no
/// missing parent and no orphan write, and every kept checkpoint is as it
/// was (its parent kept or cleared).
pub async fn check_after_crash(
    saver: &dyn CheckpointSaver,
    original: &BTreeMap<(String, String, String), CheckpointTuple>,
    kept: &[(String, String, String)],
) {
    let now = snapshot(saver).await;
    for key in kept {
        let before = &original[key];
        let after = now.get(key).unwrap_or_else(|| panic!("{key:?} is gone"));
        assert_eq!(after.checkpoint, before.checkpoint, "{key:?}");
        assert_eq!(after.metadata, before.metadata, "{key:?}");
        assert_eq!(after.pending_writes, before.pending_writes, "{key:?}");
        if after.parent_config != before.parent_config {
            assert_eq!(after.parent_config, None, "{key:?}: parent changed");
        }
    }
    for thread in THREADS {
        let report = verify_thread(saver, thread).await.unwrap();
        for kind in [ViolationKind::MissingParent, ViolationKind::OrphanWrites] {
            let found: Vec<_> = report.of_kind(kind).collect();
            assert!(found.is_empty(), "{thread}: {found:?}");
        }
    }
}

/// The end state once a run completes: exactly the kept checkpoints.
pub async fn check_finished(saver: &dyn CheckpointSaver, kept: &[(String, String, String)]) {
    let report = saver.retain(&policy(), options()).await.unwrap();
    let _ = report;
    let now: Vec<_> = snapshot(saver).await.into_keys().collect();
    assert_eq!(now, kept);
}

/// A random pause before a kill or an abort.
pub fn random_pause(max_ms: u64) -> Duration {
    Duration::from_millis(rand::random::<u64>() % max_ms.max(1))
}
