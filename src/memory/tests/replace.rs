//! `import_thread` with [`ImportMode::Replace`] against concurrent readers:
//! each read sees the old thread or the new one, never neither.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::import::{ImportMode, ImportedCheckpoint, ThreadImport};

#[allow(unused_imports)]
use super::*;

/// A thread of `steps` checkpoints of one channel in the root namespace.
fn import(thread: &str, steps: usize) -> ThreadImport {
    let mut checkpoints = Vec::new();
    let mut parent: Option<String> = None;
    for step in 0..steps {
        let mut c = Checkpoint::new(step as i64);
        c.channel_values.insert("a".to_owned(), Value::Int(step as i64));
        c.channel_versions.insert("a".to_owned(), ver(step as i64 + 1));
        checkpoints.push(ImportedCheckpoint {
            checkpoint_ns: String::new(),
            parent_checkpoint_id: parent.clone(),
            checkpoint: c.clone(),
            metadata: meta(step as i64),
            writes: Vec::new(),
        });
        parent = Some(c.id);
    }
    ThreadImport {
        thread_id: thread.to_owned(),
        checkpoints,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_import_never_shows_the_thread_absent() {
    let s = Arc::new(InMemorySaver::new());
    // Two versions of the thread: replacing one by the other changes every
    // key; replacing one by itself keeps them (its records take the same
    // global entries).
    let (a, b) = (import("t", 3), import("t", 4));
    s.import_thread(&a, ImportMode::Create).await.unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (s, done) = (s.clone(), done.clone());
        tokio::spawn(async move {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) || reads == 0 {
                let latest = s.get_tuple(&cfg("t", "", None)).await.unwrap();
                assert!(latest.is_some(), "get_tuple found no thread after {reads} reads");
                let in_thread = s.list(Some(cfg("t", "", None)), ListOptions::default()).count().await;
                assert!(
                    in_thread >= 3,
                    "list(thread) saw {in_thread} checkpoints after {reads} reads"
                );
                let all = s.list(None, ListOptions::default()).count().await;
                assert!(all >= 3, "list(None) saw {all} checkpoints after {reads} reads");
                let threads = s.thread_ids();
                assert_eq!(threads, ["t"], "after {reads} reads");
                reads += 1;
                tokio::task::yield_now().await;
            }
            reads
        })
    };
    for i in 0..300 {
        let next = if i % 3 == 0 { &a } else { &b };
        s.import_thread(next, ImportMode::Replace).await.unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.await.unwrap();
    assert!(reads > 0);
    assert_eq!(s.checkpoint_count(), 4);
    assert_eq!(s.list(None, ListOptions::default()).count().await, 4);
}
