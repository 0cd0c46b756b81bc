//! Many writers on one `PostgresSaver`: 16 on different OS
//! threads and 4 on one thread, into separate threads of history and into one
//! shared checkpoint, lose and duplicate nothing.

use crate::harness;
use crate::postgres_support;

use std::sync::Arc;

use checkpointer::postgres::{PostgresSaver, StatementMode};
use checkpointer::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt, CheckpointSource,
    ListOptions, Value,
};
use postgres_support::{saver_on, shared_database};

const STEPS: i64 = 12;

/// One writer: a chain of `STEPS` checkpoints in `thread`, each with two
/// writes, plus one write of its own into the shared checkpoint.
async fn writer(saver: &PostgresSaver, thread: &str, shared: &CheckpointConfig, who: usize) {
    let mut parent = CheckpointConfig::new(thread);
    for step in 0..STEPS {
        let mut cp = Checkpoint::new(step);
        cp.channel_values.insert("step".into(), Value::Int(step));
        cp.channel_values
            .insert("who".into(), Value::from(vec![who as i64, step]));
        for ch in ["step", "who"] {
            cp.channel_versions
                .insert(ch.into(), saver.get_next_version(None).unwrap());
        }
        let stored = saver
            .put(
                &parent,
                &cp,
                &CheckpointMetadata::new(CheckpointSource::Loop, step),
                &cp.channel_versions,
            )
            .await
            .unwrap();
        saver
            .put_writes(
                &stored,
                &[("a".into(), Value::Int(step)), ("b".into(), Value::from(vec![step]))],
                &format!("task-{step}"),
                "",
            )
            .await
            .unwrap();
        saver
            .put_writes(
                shared,
                &[("shared".into(), Value::from(vec![who as i64, step]))],
                &format!("writer-{who:02}-{step:02}"),
                "",
            )
            .await
            .unwrap();
        parent = stored;
    }
}

async fn verify(saver: &PostgresSaver, thread: &str, who: usize) {
    let history = saver
        .list_vec(Some(CheckpointConfig::new(thread)), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(history.len(), STEPS as usize, "{thread}");
    for (i, t) in history.iter().rev().enumerate() {
        let step = i as i64;
        assert_eq!(t.checkpoint.channel_values["who"], Value::from(vec![who as i64, step]));
        let values: Vec<&Value> = t.pending_writes.iter().map(|w| &w.value).collect();
        assert_eq!(
            values,
            [&Value::Int(step), &Value::from(vec![step])],
            "{thread} step {step}"
        );
    }
}

fn sixteen_threads_and_four_tasks_on_one_thread_lose_nothing() {
    let Some(db) = shared_database() else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let saver = Arc::new(runtime.block_on(async { saver_on(&db, StatementMode::Prepared, 16) }));
    let run = format!("{:08x}", rand::random::<u32>());
    let shared_thread = format!("shared-{run}");
    let shared = runtime.block_on(async {
        let cp = Checkpoint::new(0);
        saver
            .put(
                &CheckpointConfig::new(&shared_thread),
                &cp,
                &CheckpointMetadata::new(CheckpointSource::Loop, 0),
                &cp.channel_versions,
            )
            .await
            .unwrap()
    });

    // 16 writers, each driving its calls from its own OS thread.
    let handles: Vec<_> = (0..16)
        .map(|who| {
            let (saver, shared, handle) = (saver.clone(), shared.clone(), runtime.handle().clone());
            let thread = format!("w{who:02}-{run}");
            std::thread::spawn(move || handle.block_on(writer(&saver, &thread, &shared, who)))
        })
        .collect();
    // Meanwhile 4 writers interleaved on this one thread.
    runtime.block_on(async {
        let names: Vec<String> = (16..20).map(|who| format!("w{who:02}-{run}")).collect();
        futures::join!(
            writer(&saver, &names[0], &shared, 16),
            writer(&saver, &names[1], &shared, 17),
            writer(&saver, &names[2], &shared, 18),
            writer(&saver, &names[3], &shared, 19),
        );
    });
    for h in handles {
        h.join().unwrap();
    }

    runtime.block_on(async {
        for who in 0..20 {
            verify(&saver, &format!("w{who:02}-{run}"), who).await;
        }
        let writes = saver.get_tuple(&shared).await.unwrap().unwrap().pending_writes;
        assert_eq!(writes.len(), 20 * STEPS as usize, "writes into the shared checkpoint");
        let mut ids: Vec<&str> = writes.iter().map(|w| w.task_id.as_str()).collect();
        let sorted = ids.clone();
        ids.dedup();
        assert_eq!(ids.len(), sorted.len(), "a write was duplicated");
        for w in &writes {
            let (who, step) = (&w.task_id[7..9], &w.task_id[10..12]);
            let want = Value::from(vec![who.parse::<i64>().unwrap(), step.parse::<i64>().unwrap()]);
            assert_eq!(w.value, want, "{}", w.task_id);
        }
    });
}

async fn concurrent_puts_into_one_thread_keep_every_checkpoint() {
    let Some(db) = shared_database() else { return };
    let saver = Arc::new(saver_on(&db, StatementMode::Unnamed, 8));
    let thread = format!("one-{:08x}", rand::random::<u32>());
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (saver, thread) = (saver.clone(), thread.clone());
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for step in 0..10 {
                    let mut cp = Checkpoint::new(step);
                    cp.channel_values.insert("v".into(), Value::from(vec![i, step]));
                    cp.channel_versions
                        .insert("v".into(), saver.get_next_version(None).unwrap());
                    let config = CheckpointConfig::new(&thread).with_ns(format!("ns{}", i % 3));
                    saver
                        .put(
                            &config,
                            &cp,
                            &CheckpointMetadata::new(CheckpointSource::Loop, step),
                            &cp.channel_versions,
                        )
                        .await
                        .unwrap();
                    ids.push(cp.id);
                }
                ids
            })
        })
        .collect();
    let mut expected = Vec::new();
    for t in tasks {
        expected.extend(t.await.unwrap());
    }
    expected.sort();
    expected.reverse();
    let listed: Vec<String> = saver
        .list_vec(Some(CheckpointConfig::all_namespaces(&thread)), ListOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.checkpoint.id)
        .collect();
    assert_eq!(listed, expected);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "concurrency::sixteen_threads_and_four_tasks_on_one_thread_lose_nothing",
            &[&crate::POSTGRES],
            sixteen_threads_and_four_tasks_on_one_thread_lose_nothing,
        ),
        harness::tokio(
            "concurrency::concurrent_puts_into_one_thread_keep_every_checkpoint",
            &[&crate::POSTGRES],
            2,
            concurrent_puts_into_one_thread_keep_every_checkpoint,
        ),
    ]
}
