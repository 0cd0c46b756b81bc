//! Fencing scenarios shared by every backend's tests that need more than
//! the conformance suite's one saver (`checkpointer::conformance::fencing`
//! holds the rest, run by every backend's conformance tests): two savers on
//! one store (two connections where the backend has connections: what two
//! processes would hold), a lease time and slack per backend, a saver
//! reopened. Each makes fenced writers of its own with fresh names and
//! works on a fresh thread.

#![allow(dead_code)] // each binary uses what its backend supports

use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::fence::{Fence, Fenceable};
use checkpointer::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt, CheckpointSource, Error,
    ListOptions, Value,
};

fn fresh(what: &str) -> String {
    format!("fence-{what}-{}", rand::random::<u64>())
}

fn writer(store: &dyn Fenceable, name: &str, lease: Duration) -> Arc<dyn Fenceable> {
    store.fenced_saver(Fence::new(name, lease)).expect("fenced saver")
}

/// A loop checkpoint of `step` with one value naming its writer.
async fn put_step(
    saver: &dyn Fenceable,
    parent: &CheckpointConfig,
    step: i64,
    who: &str,
) -> checkpointer::Result<CheckpointConfig> {
    let mut cp = Checkpoint::new(step);
    cp.channel_values
        .insert("who".into(), Value::from(format!("{who}-{step}")));
    cp.channel_versions
        .insert("who".into(), saver.get_next_version(None).expect("version"));
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
    saver.put(parent, &cp, &meta, &cp.channel_versions).await
}

fn assert_fenced(err: &Error, thread: &str, writer: &str) {
    match err {
        Error::Fenced {
            thread_id, writer: w, ..
        } => {
            assert_eq!(thread_id, thread);
            assert_eq!(w, writer);
            assert!(!err.is_retryable());
        }
        other => panic!("expected Error::Fenced for {writer} on {thread}, got {other:?}"),
    }
}

/// The thread's checkpoints as (id, parent id), newest first.
async fn history<S: CheckpointSaver + ?Sized>(store: &S, thread: &str) -> Vec<(String, Option<String>)> {
    store
        .list_vec(Some(CheckpointConfig::new(thread)), ListOptions::default())
        .await
        .expect("list")
        .into_iter()
        .map(|t| {
            (
                t.config.checkpoint_id.expect("id"),
                t.parent_config.and_then(|p| p.checkpoint_id),
            )
        })
        .collect()
}

/// The case only the store's check can decide: a writer whose lease
/// expired still holds its token and writes on, racing the writer that
/// took the thread over. Every stale write is refused, every new owner's
/// write passes, and the thread is one lineage: the stale owner's first
/// checkpoint, then the new owner's chain.
pub async fn stale_owner_races_new_owner(store_a: &dyn Fenceable, store_b: &dyn Fenceable, steps: i64) {
    let thread = fresh("stale");
    let lease = Duration::from_millis(150);
    let (name_a, name_b) = (fresh("a"), fresh("b"));
    let a = writer(store_a, &name_a, lease);
    let b = writer(store_b, &name_b, Duration::from_secs(30));
    let root = put_step(a.as_ref(), &CheckpointConfig::new(&thread), 0, &name_a)
        .await
        .expect("owner writes");
    loop {
        match b.acquire(&thread).await {
            Ok(_) => break,
            Err(Error::Fenced { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(e) => panic!("acquire failed: {e}"),
        }
    }
    let chain = |saver: Arc<dyn Fenceable>, name: String| {
        let (root, thread) = (root.clone(), thread.clone());
        tokio::spawn(async move {
            let (mut parent, mut stored, mut refused) = (root, 0, 0);
            for step in 1..=steps {
                match put_step(saver.as_ref(), &parent, step, &name).await {
                    Ok(config) => {
                        parent = config;
                        stored += 1;
                    }
                    Err(e) => {
                        assert_fenced(&e, &thread, &name);
                        refused += 1;
                    }
                }
                let writes = [("who".to_owned(), Value::from(name.as_str()))];
                if let Err(e) = saver.put_writes(&parent, &writes, &name, "").await {
                    assert_fenced(&e, &thread, &name);
                }
            }
            (stored, refused)
        })
    };
    let (stale, fresh_owner) =
        futures::future::join(chain(a.clone(), name_a.clone()), chain(b.clone(), name_b.clone())).await;
    assert_eq!(stale.expect("task"), (0, steps), "every stale write refused");
    assert_eq!(fresh_owner.expect("task"), (steps, 0), "every owner's write passes");
    let got = history(store_a, &thread).await;
    assert_eq!(got.len() as i64, steps + 1);
    for pair in got.windows(2) {
        assert_eq!(pair[0].1.as_deref(), Some(pair[1].0.as_str()), "a fork in {got:?}");
    }
    for t in store_a
        .list_vec(Some(CheckpointConfig::new(&thread)), ListOptions::default())
        .await
        .expect("list")
    {
        assert!(
            t.pending_writes.iter().all(|w| w.task_id != name_a),
            "a stale write was stored"
        );
    }
    assert_fenced(&a.renew(&thread).await.expect_err("lost"), &thread, &name_a);
}

/// A lease that is neither written nor renewed expires on the store's clock:
/// another writer is refused before, and takes the thread within the lease
/// time plus `slack` (a round trip and the polling step) after the owner's
/// last write; the old owner's writes (`put`, `put_writes`, `delete_thread`)
/// are refused from then on and change nothing, and `renew` tells it.
pub async fn lease_expires_and_is_taken_over(
    store_a: &dyn Fenceable,
    store_b: &dyn Fenceable,
    lease: Duration,
    slack: Duration,
) {
    let thread = fresh("expiry");
    let (name_a, name_b) = (fresh("a"), fresh("b"));
    let a = writer(store_a, &name_a, lease);
    let b = writer(store_b, &name_b, lease);
    let first = a.acquire(&thread).await.expect("acquire");
    let stored = put_step(a.as_ref(), &CheckpointConfig::new(&thread), 0, &name_a)
        .await
        .expect("owner writes");
    let written = Instant::now();
    let err = b.acquire(&thread).await.expect_err("held");
    assert_fenced(&err, &thread, &name_b);
    let taken = loop {
        match b.acquire(&thread).await {
            Ok(lease) => break lease,
            Err(Error::Fenced { .. }) => {
                assert!(
                    written.elapsed() <= lease + slack,
                    "not taken over {:?} after the last write (lease {lease:?})",
                    written.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("acquire failed: {e}"),
        }
    };
    let waited = written.elapsed();
    assert!(taken.epoch > first.epoch, "epochs grow: {first:?} then {taken:?}");
    // the store's clock and ours started the lease at most a round trip apart
    assert!(
        waited + slack >= lease,
        "taken over after {waited:?}, before the lease of {lease:?}"
    );

    let put = put_step(a.as_ref(), &stored, 1, &name_a).await.expect_err("fenced out");
    assert_fenced(&put, &thread, &name_a);
    let writes = a
        .put_writes(&stored, &[("who".into(), Value::from("late"))], "task", "")
        .await
        .expect_err("fenced out");
    assert_fenced(&writes, &thread, &name_a);
    let delete = a.delete_thread(&thread).await.expect_err("fenced out");
    assert_fenced(&delete, &thread, &name_a);
    let renew = a.renew(&thread).await.expect_err("lost");
    assert_fenced(&renew, &thread, &name_a);
    assert!(!a.release(&thread).await.expect("release"));
    let tuple = store_b.get_tuple(&stored).await.expect("read").expect("still there");
    assert!(tuple.pending_writes.is_empty(), "a refused put_writes stored nothing");
    assert_eq!(history(store_b, &thread).await.len(), 1, "a refused put stored nothing");

    // the new owner writes on from the old owner's checkpoint (a fork is
    // the owner's to make) and may delete the thread
    put_step(b.as_ref(), &stored, 1, &name_b)
        .await
        .expect("new owner writes");
    assert_eq!(history(store_a, &thread).await.len(), 2);
    b.delete_thread(&thread).await.expect("owner deletes");
    assert!(history(store_a, &thread).await.is_empty());
    // the lease outlives the thread's rows: still b's, epochs still grow
    assert_fenced(&a.acquire(&thread).await.expect_err("b holds it"), &thread, &name_a);
    assert!(b.release(&thread).await.expect("release"));
    assert!(a.acquire(&thread).await.expect("free again").epoch > taken.epoch);
}

/// Ownership is the store's, not the connection's: `reopened` is a new
/// saver (new connections) on the same store. The writer's lease survives
/// it (`a` keeps writing through its own saver after the other connection
/// came and went); a saver of the same writer identity may take the
/// thread back at once (a restarted worker), which fences the old one.
pub async fn ownership_is_the_stores(store: &dyn Fenceable, reopened: &dyn Fenceable) {
    let thread = fresh("reopen");
    let name = fresh("a");
    let lease = Duration::from_secs(30);
    let a = writer(store, &name, lease);
    let first = put_step(a.as_ref(), &CheckpointConfig::new(&thread), 0, &name)
        .await
        .expect("write");
    let again = writer(reopened, &name, lease);
    let lease_again = again.acquire(&thread).await.expect("same writer takes it back");
    let second = put_step(again.as_ref(), &first, 1, &name).await.expect("write");
    assert_fenced(
        &put_step(a.as_ref(), &first, 1, &name).await.expect_err("stale epoch"),
        &thread,
        &name,
    );
    let other = writer(store, &fresh("b"), lease);
    assert!(matches!(other.acquire(&thread).await, Err(Error::Fenced { .. })));
    assert_eq!(again.renew(&thread).await.expect("renew").epoch, lease_again.epoch);
    put_step(again.as_ref(), &second, 2, &name).await.expect("write");
    assert_eq!(history(reopened, &thread).await.len(), 3);
}
