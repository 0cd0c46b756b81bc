//! The row verifier (`checkpointer::verify`) on a real store of any backend:
//! every thread of every fixture Python wrote, imported row for row, has no
//! violation and the counts it has in the fixture's SQLite file; one fact
//! changed in an imported thread (or a row written through the saver) is
//! reported with its kind at its checkpoint, as the store reads it back.

use std::sync::Arc;

use checkpointer::import::{ImportMode, ImportedCheckpoint, ImportedWrite, ThreadImport};
use checkpointer::prelude::*;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::verify::{verify_thread, Report, ViolationKind};
use checkpointer::SaverAdmin;

#[path = "sqlite.rs"]
mod sqlite_support;

fn shown(report: &Report) -> Vec<String> {
    report.violations.iter().map(ToString::to_string).collect()
}

/// A thread's tuples (every namespace) as an import under `thread_id`.
fn as_import(thread_id: &str, tuples: &[CheckpointTuple]) -> ThreadImport {
    ThreadImport {
        thread_id: thread_id.to_owned(),
        checkpoints: tuples
            .iter()
            .map(|t| ImportedCheckpoint {
                checkpoint_ns: t.config.ns().to_owned(),
                parent_checkpoint_id: t
                    .parent_config
                    .as_ref()
                    .and_then(|p| p.checkpoint_id())
                    .map(str::to_owned),
                checkpoint: t.checkpoint.clone(),
                metadata: t.metadata.clone(),
                writes: t
                    .pending_writes
                    .iter()
                    .map(|w| ImportedWrite {
                        task_id: w.task_id.clone(),
                        task_path: w.task_path.clone(),
                        idx: w.idx,
                        channel: w.channel.clone(),
                        value: w.value.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Every thread of every SQLite fixture, imported into `store` as
/// `{prefix}-{fixture}-{thread}`, verifies with no violation and the
/// fixture's checkpoint and write counts; returns the b_reducer fixture's
/// thread `b-1` as read from the fixture.
pub async fn fixtures_verify_on(store: &Arc<dyn SaverAdmin>, prefix: &str) -> Vec<CheckpointTuple> {
    let testdata = sqlite_support::testdata_dir();
    let mut threads = 0;
    let mut b1 = Vec::new();
    for (name, path) in sqlite_support::fixtures(&testdata) {
        let (_dir, copy) = sqlite_support::temp_copy(&path);
        let source = SqliteSaver::open(&copy).await.unwrap();
        for info in source.list_threads(Default::default()).await.unwrap() {
            let thread = &info.thread_id;
            let tuples = source
                .list_vec(Some(CheckpointConfig::all_namespaces(thread)), ListOptions::default())
                .await
                .unwrap();
            let in_fixture = verify_thread(&source, thread).await.unwrap();
            assert!(in_fixture.is_ok(), "{name}/{thread}: {:#?}", shown(&in_fixture));
            let target = format!("{prefix}-{}-{thread}", name.trim_end_matches(".sqlite"));
            store
                .import_thread(&as_import(&target, &tuples), ImportMode::Create)
                .await
                .unwrap();
            let report = verify_thread(store.saver().as_ref(), &target).await.unwrap();
            assert!(
                report.is_ok(),
                "{name}/{thread} in {}: {:#?}",
                store.name(),
                shown(&report)
            );
            assert_eq!(
                (report.checkpoints, report.writes, report.unchecked_task_ids),
                (in_fixture.checkpoints, in_fixture.writes, in_fixture.unchecked_task_ids),
                "{name}/{thread}"
            );
            assert!(report.checkpoints > 0, "{name}/{thread}");
            threads += 1;
            if name == "b_reducer.sqlite" && thread == "b-1" {
                b1 = tuples;
            }
        }
        source.close().await.unwrap();
    }
    assert!(threads >= 4, "{threads}");
    let whole = checkpointer::verify::verify_store(store.saver().as_ref())
        .await
        .unwrap();
    assert!(whole.is_ok(), "{:#?}", shown(&whole));
    assert_eq!(whole.threads, threads, "{whole:?}");
    assert!(b1.len() > 4, "the b_reducer fixture's thread b-1: {}", b1.len());
    b1
}

/// One fact changed in `good` (b_reducer's `b-1`, newest first), imported
/// into `store` as a thread of its own; the violations the store's rows
/// give, as (kind, checkpoint, channel).
async fn imported_violations(
    store: &Arc<dyn SaverAdmin>,
    thread: &str,
    good: &[CheckpointTuple],
    change: impl Fn(&mut Vec<CheckpointTuple>),
) -> Report {
    let mut tuples = good.to_vec();
    change(&mut tuples);
    store
        .import_thread(&as_import(thread, &tuples), ImportMode::Create)
        .await
        .unwrap();
    verify_thread(store.saver().as_ref(), thread).await.unwrap()
}

fn kinds_at(report: &Report) -> Vec<(ViolationKind, String, Option<String>)> {
    report
        .violations
        .iter()
        .map(|v| (v.kind, v.checkpoint_id.clone(), v.channel.clone()))
        .collect()
}

/// Each one-fact change of `good` stored in `store` is caught with its kind
/// at its checkpoint (see [`fixtures_verify_on`] for `good`).
pub async fn mutations_are_caught_on(store: &Arc<dyn SaverAdmin>, prefix: &str, good: &[CheckpointTuple]) {
    let id = |i: usize| good[i].config.checkpoint_id().unwrap().to_owned();
    // good[0] is the head, a loop step; good[1] its parent
    assert_eq!(good[0].metadata.source(), Some(CheckpointSource::Loop));
    let head = id(0);
    let channel = good[0]
        .checkpoint
        .updated_channels
        .as_ref()
        .and_then(|u| u.first().cloned())
        .expect("the head updated a channel");

    // a checkpoint in the middle gone (with its writes), as a copy cut short
    let report = imported_violations(store, &format!("{prefix}-cut"), good, |t| {
        t.remove(2);
    })
    .await;
    assert_eq!(
        kinds_at(&report),
        [(ViolationKind::MissingParent, id(1), None)],
        "{:#?}",
        shown(&report)
    );

    // the head's step number off by one
    let report = imported_violations(store, &format!("{prefix}-step"), good, |t| {
        let step = t[0].metadata.step().unwrap();
        t[0].metadata.insert("step", Value::from(step + 1));
    })
    .await;
    assert_eq!(
        kinds_at(&report),
        [(ViolationKind::StepNumber, head.clone(), None)],
        "{:#?}",
        shown(&report)
    );

    // a channel's version moved back below the parent's
    let back = ChannelVersion::from("00000000000000000000000000000000.0.5");
    let report = imported_violations(store, &format!("{prefix}-back"), good, |t| {
        t[0].checkpoint.channel_versions.insert(channel.clone(), back.clone());
    })
    .await;
    let found = kinds_at(&report);
    assert!(
        found.contains(&(ViolationKind::VersionBackwards, head.clone(), Some(channel.clone()))),
        "{:#?}",
        shown(&report)
    );

    // a pending write's task id changed
    let report = imported_violations(store, &format!("{prefix}-task"), good, |t| {
        let task = t[1].pending_writes[0].task_id.clone();
        for w in t[1].pending_writes.iter_mut().filter(|w| w.task_id == task) {
            w.task_id = "00000000-0000-0000-0000-000000000001".into();
        }
    })
    .await;
    let found = kinds_at(&report);
    assert!(!found.is_empty(), "a changed task id passes");
    assert!(
        found
            .iter()
            .all(|(k, at, _)| *k == ViolationKind::TaskId && *at == id(1)),
        "{:#?}",
        shown(&report)
    );

    // writes stored through the saver for a checkpoint that is not stored
    let thread = format!("{prefix}-orphan");
    store
        .import_thread(&as_import(&thread, good), ImportMode::Create)
        .await
        .unwrap();
    let missing = "1f1ebff3-0000-6000-8000-000000000000";
    let config = CheckpointConfig::new(thread.as_str()).with_checkpoint_id(missing);
    let writes = [("x".to_owned(), Value::from(1))];
    store.saver().put_writes(&config, &writes, "task", "").await.unwrap();
    let report = verify_thread(store.saver().as_ref(), &thread).await.unwrap();
    // both backends list a thread's keys, so orphaned writes are seen
    assert!(store.saver().capabilities().thread_keys);
    assert_eq!(
        kinds_at(&report),
        [(ViolationKind::OrphanWrites, missing.to_owned(), None)],
        "{:#?}",
        shown(&report)
    );
}
