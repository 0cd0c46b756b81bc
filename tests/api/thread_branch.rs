//! One branch of a thread's history (`Thread::ancestors`, `Thread::branch`)
//! beside the whole history (`Thread::history`), on memory, a SQLite file,
//! PostgreSQL and Redis: after a fork the history interleaves both
//! branches while a branch follows its parent links only; pages continue
//! where the last ended; namespaces keep their own branches; a parent that
//! is not stored (a pruned thread, a copy cut short) ends a branch without
//! an error; looping parent links end in a typed error.

use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::saver::PruneStrategy;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct State {
    n: i64,
}

fn uid(prefix: &str) -> String {
    format!("{prefix}-{}", checkpointer::id::checkpoint_id(0))
}

fn ids<S>(states: &[StateSnapshot<S>]) -> Vec<String> {
    states
        .iter()
        .map(|s| s.config.checkpoint_id().unwrap().to_owned())
        .collect()
}

fn id(config: &CheckpointConfig) -> String {
    config.checkpoint_id().unwrap().to_owned()
}

async fn walk_all(thread: &Thread, from: Option<&str>) -> Vec<String> {
    let mut walk = thread.ancestors(from);
    let mut out = Vec::new();
    while let Some(tuple) = walk.next_tuple().await.unwrap() {
        out.push(tuple.checkpoint.id);
    }
    // the end stays the end
    assert!(walk.next_tuple().await.unwrap().is_none());
    out
}

async fn scenario(saver: Arc<dyn CheckpointSaver>) {
    let t = Thread::new(saver.clone(), uid("branch"));

    // An empty namespace has an empty branch; a checkpoint that is not
    // stored is an error naming it.
    assert!(walk_all(&t, None).await.is_empty());
    let missing = checkpointer::id::checkpoint_id(0);
    let err = t.branch::<State>(Some(&missing), 10).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert!(err.to_string().contains(&missing), "{err}");

    // u1 → u2 → u3, then a fork of u2 (a sibling of u2: its parent is u1)
    // continued by u4.
    let u1 = id(&t.update_state(&State { n: 1 }, "count").await.unwrap());
    let u2 = id(&t.update_state(&State { n: 2 }, "count").await.unwrap());
    let u3 = id(&t.update_state(&State { n: 3 }, "count").await.unwrap());
    let fork = id(&t.fork(&u2).await.unwrap());
    let u4 = id(&t.update_state(&State { n: 4 }, "count").await.unwrap());

    // The whole history: every branch, newest first by id.
    let history: Vec<StateSnapshot<State>> = t.history(ListOptions::default()).await.unwrap();
    assert_eq!(
        ids(&history),
        [u4.as_str(), fork.as_str(), u3.as_str(), u2.as_str(), u1.as_str()]
    );

    // The live branch skips the abandoned u3 and the copied u2.
    let live: Vec<StateSnapshot<State>> = t.branch(None, 100).await.unwrap();
    assert_eq!(ids(&live), [u4.as_str(), fork.as_str(), u1.as_str()]);
    let values: Vec<i64> = live.iter().map(|s| s.values.n).collect();
    assert_eq!(values, [4, 2, 1]);
    assert_eq!(live[1].metadata.source(), Some(CheckpointSource::Fork));
    // each state's parent is the next one
    for pair in live.windows(2) {
        assert_eq!(
            pair[0].parent_config.as_ref().unwrap().checkpoint_id(),
            pair[1].config.checkpoint_id()
        );
    }
    assert!(live[2].parent_config.is_none());
    // The abandoned branch, from its tip.
    assert_eq!(walk_all(&t, Some(&u3)).await, [u3.as_str(), u2.as_str(), u1.as_str()]);
    assert_eq!(walk_all(&t, Some(&u1)).await, [u1.as_str()]);

    // Pages: each continues where the last ended.
    let mut walk = t.ancestors(None);
    let first: Vec<StateSnapshot<State>> = walk.page(2).await.unwrap();
    assert_eq!(ids(&first), [u4.as_str(), fork.as_str()]);
    assert_eq!(walk.next_id(), Some(u1.as_str()));
    let rest: Vec<StateSnapshot<State>> = walk.page(2).await.unwrap();
    assert_eq!(ids(&rest), [u1.as_str()]);
    assert!(walk.page::<State>(2).await.unwrap().is_empty());
    assert_eq!(walk.next_id(), None);
    // a later walk from a page's cursor
    let later: Vec<StateSnapshot<State>> = t
        .branch(first[1].parent_config.as_ref().unwrap().checkpoint_id(), 5)
        .await
        .unwrap();
    assert_eq!(ids(&later), [u1.as_str()]);
    assert!(t.branch::<State>(None, 0).await.unwrap().is_empty());

    // A namespace has its own branch, per namespace.
    let sub = t.in_namespace("child:1");
    let s1 = id(&sub.update_state(&State { n: 10 }, "count").await.unwrap());
    let s2 = id(&sub.update_state(&State { n: 11 }, "count").await.unwrap());
    assert_eq!(walk_all(&sub, None).await, [s2.as_str(), s1.as_str()]);
    assert_eq!(
        walk_all(&t, None).await,
        [u4.as_str(), fork.as_str(), u1.as_str()],
        "the root's branch is unchanged"
    );
    let err = sub.branch::<State>(Some(&u4), 1).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidInput { .. }),
        "a root checkpoint is not in the namespace: {err:?}"
    );

    // A parent that is not stored (a copy cut short) ends the branch.
    let cut = Thread::new(saver.clone(), uid("cut"));
    let mut step = StepCheckpoint::first(5);
    step.write("n", Value::from(5), |v| saver.get_next_version(v)).unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 5);
    let orphan = saver
        .put_step(&cut.at(&checkpointer::id::checkpoint_id(0)), &step, &meta)
        .await
        .unwrap();
    assert!(orphan.parent_config.is_some(), "the parent id is stored");
    let on_top = id(&cut.update_state(&State { n: 6 }, "count").await.unwrap());
    assert_eq!(walk_all(&cut, None).await, [on_top, orphan.checkpoint.id.clone()]);

    // A pruned thread keeps its latest checkpoint without a parent: a branch of one.
    if saver.capabilities().prune {
        saver
            .prune(&[t.thread_id().to_owned()], PruneStrategy::KeepLatest)
            .await
            .unwrap();
        assert_eq!(walk_all(&t, None).await, [u4.as_str()]);
    }

    // A long branch, walked in pages: every checkpoint once, steps descending.
    let long = Thread::new(saver.clone(), uid("long"));
    for n in 0..120 {
        long.update_state(&State { n }, "count").await.unwrap();
    }
    let mut walk = long.ancestors(None);
    let mut seen = Vec::new();
    loop {
        let page: Vec<StateSnapshot<State>> = walk.page(25).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() == 25 || walk.next_id().is_none());
        seen.extend(page.iter().map(|s| s.values.n));
    }
    assert_eq!(seen, (0..120).rev().collect::<Vec<_>>());

    for thread in [t.thread_id(), cut.thread_id(), long.thread_id()] {
        saver.delete_thread(thread).await.unwrap();
    }
}

/// Parent links that loop (two checkpoints naming each other, made by
/// storing the first again under the second): a typed error, not an
/// endless walk. Only where the saver keeps the re-stored parent.
async fn looping_links(saver: Arc<dyn CheckpointSaver>) {
    let t = Thread::new(saver.clone(), uid("loop"));
    let meta = CheckpointMetadata::new(CheckpointSource::Update, 0);
    let a = StepCheckpoint::first(0);
    let a_tuple = saver.put_step(&t.config(), &a, &meta).await.unwrap();
    let b = a_tuple.checkpoint.successor(1);
    let b_tuple = saver.put_step(&a_tuple.config, &b, &meta).await.unwrap();
    // a again, now as b's child
    saver.put_step(&b_tuple.config, &a, &meta).await.unwrap();
    let again = t.tuple(Some(&a_tuple.checkpoint.id)).await.unwrap().unwrap();
    assert_eq!(
        again.parent_config.as_ref().and_then(|p| p.checkpoint_id()),
        Some(b_tuple.checkpoint.id.as_str()),
        "the re-stored checkpoint names its new parent"
    );
    let mut walk = t.ancestors(Some(&a_tuple.checkpoint.id));
    let mut reads = 0;
    let err = loop {
        match walk.next_tuple().await {
            Ok(Some(_)) => reads += 1,
            Ok(None) => panic!("a loop ended"),
            Err(e) => break e,
        }
        assert!(reads < 10, "the loop was not found");
    };
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert!(err.to_string().contains("loop back"), "{err}");
    saver.delete_thread(t.thread_id()).await.unwrap();
}

/// The walk and the looping links on one saver.
async fn both(saver: Arc<dyn CheckpointSaver>) {
    scenario(saver.clone()).await;
    looping_links(saver).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<crate::harness::Trial> {
    crate::every_saver::trials("thread_branch::branch_", 0, both)
}
