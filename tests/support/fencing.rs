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
use checkpointer::import::{ImportMode, ImportedCheckpoint, ThreadImport};
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

/// A saver whose whole-thread maintenance the scenarios fence: every
/// saver of the crate (each backend's binary implements it for its saver
/// with its inherent `fenced` and `import_thread`).
#[async_trait::async_trait]
pub trait Maintained: Fenceable {
    /// The saver fenced as `name` with `lease`.
    fn fenced_maintained(&self, name: &str, lease: Duration) -> Arc<dyn Maintained>;
    /// The saver's `import_thread`.
    async fn import(&self, thread: &ThreadImport, mode: ImportMode) -> checkpointer::Result<()>;
}

/// Implements [`Maintained`] for savers with inherent `fenced` and
/// `import_thread`.
#[macro_export]
macro_rules! maintained {
    ($($saver:ty),*) => {$(
        #[async_trait::async_trait]
        impl $crate::fencing_support::Maintained for $saver {
            fn fenced_maintained(
                &self,
                name: &str,
                lease: std::time::Duration,
            ) -> std::sync::Arc<dyn $crate::fencing_support::Maintained> {
                std::sync::Arc::new(self.fenced(checkpointer::fence::Fence::new(name, lease)).expect("fenced saver"))
            }
            async fn import(
                &self,
                thread: &checkpointer::import::ThreadImport,
                mode: checkpointer::import::ImportMode,
            ) -> checkpointer::Result<()> {
                self.import_thread(thread, mode).await
            }
        }
    )*};
}

/// Everything stored for `threads`: their tuples, newest first.
async fn snapshot<S: CheckpointSaver + ?Sized>(store: &S, threads: &[&str]) -> Vec<Vec<checkpointer::CheckpointTuple>> {
    let mut out = Vec::new();
    for t in threads {
        let tuples = store
            .list_vec(Some(CheckpointConfig::new(*t)), ListOptions::default())
            .await
            .expect("list");
        out.push(tuples);
    }
    out
}

/// A thread of one checkpoint, as an import takes it.
fn one_checkpoint(thread: &str) -> ThreadImport {
    let mut checkpoint = Checkpoint::new(0);
    checkpoint.channel_values.insert("who".into(), Value::from("imported"));
    ThreadImport {
        thread_id: thread.to_owned(),
        checkpoints: vec![ImportedCheckpoint {
            checkpoint_ns: String::new(),
            parent_checkpoint_id: None,
            checkpoint,
            metadata: CheckpointMetadata::new(CheckpointSource::Input, -1),
            writes: Vec::new(),
        }],
    }
}

/// `prune`, `import_thread`, `copy_thread` (its target) and
/// `delete_for_runs` of a fenced saver are fenced: a stale writer (it held
/// the thread, released it, and still carries its old epoch: only the
/// store's check can refuse it) and a writer that never held the thread
/// are refused with `Error::Fenced` and nothing changes, even by a call
/// that would change nothing (a copy of an empty thread or of a source id
/// with U+0000, an import of no checkpoint: the lease is checked before
/// whether the target holds anything); then the owner's succeed. `store_b` is a second connection
/// to the same store.
pub async fn maintenance_is_fenced(store_a: &dyn Maintained, store_b: &dyn Maintained) {
    use checkpointer::PruneStrategy;
    let lease = Duration::from_secs(30);
    let (thread, source, target) = (fresh("maint"), fresh("source"), fresh("target"));
    let run = fresh("run");
    let (stale_name, owner_name, never_name) = (fresh("stale"), fresh("owner"), fresh("never"));
    let stale = store_a.fenced_maintained(&stale_name, lease);
    let owner = store_b.fenced_maintained(&owner_name, lease);
    let never = store_a.fenced_maintained(&never_name, lease);
    // the stale writer held both threads first, then let them go
    for t in [&thread, &target] {
        stale.acquire(t).await.expect("acquire");
    }
    put_step(stale.as_ref(), &CheckpointConfig::new(&thread), 0, &stale_name)
        .await
        .expect("stale writer's first write");
    for t in [&thread, &target] {
        assert!(stale.release(t).await.expect("release"));
        owner.acquire(t).await.expect("the owner takes it");
    }
    // the owner's chain, each checkpoint of run `run`, a write on each
    let mut parent = store_a.latest(&thread).await.expect("read").expect("stored").config;
    for step in 1..5 {
        let mut cp = Checkpoint::new(step);
        cp.channel_values
            .insert("who".into(), Value::from(format!("owner-{step}")));
        cp.channel_versions
            .insert("who".into(), owner.get_next_version(None).expect("version"));
        let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
        meta.insert("run_id", run.as_str());
        parent = owner
            .put(&parent, &cp, &meta, &cp.channel_versions)
            .await
            .expect("owner's put");
        owner
            .put_writes(&parent, &[("who".to_owned(), Value::from("w"))], "task", "")
            .await
            .expect("owner's writes");
    }
    // an unfenced thread to copy from
    put_step(store_a, &CheckpointConfig::new(&source), 0, "plain")
        .await
        .expect("source");
    let threads = [thread.as_str(), target.as_str(), source.as_str()];
    let before = snapshot(store_a, &threads).await;
    assert_eq!(before[0].len(), 5);
    // a thread that holds nothing: copying it, or importing no checkpoint,
    // changes nothing, yet a writer without the lease is refused all the
    // same (not told `Ok` or `ThreadExists`)
    // a source with U+0000 is such a thread too (no PostgreSQL text, no
    // Redis key holds it): the same answers, the lease checked first
    let nul = format!("{}\0x", fresh("nul"));
    let (empty, nothing) = (
        fresh("empty"),
        ThreadImport {
            thread_id: thread.clone(),
            checkpoints: Vec::new(),
        },
    );
    for (who, name) in [(&stale, &stale_name), (&never, &never_name)] {
        let refusals = [
            (
                "prune keep_latest",
                &thread,
                who.prune(std::slice::from_ref(&thread), PruneStrategy::KeepLatest)
                    .await,
            ),
            (
                "prune delete",
                &thread,
                who.prune(std::slice::from_ref(&thread), PruneStrategy::Delete).await,
            ),
            (
                "import",
                &thread,
                who.import(&one_checkpoint(&thread), ImportMode::Replace).await,
            ),
            (
                "import create",
                &thread,
                who.import(&one_checkpoint(&thread), ImportMode::Create).await,
            ),
            (
                "import create of nothing",
                &thread,
                who.import(&nothing, ImportMode::Create).await,
            ),
            ("copy", &target, who.copy_thread(&source, &target).await),
            ("copy of nothing", &target, who.copy_thread(&empty, &target).await),
            (
                "copy of nothing onto a thread",
                &thread,
                who.copy_thread(&empty, &thread).await,
            ),
            ("copy of a U+0000 source", &target, who.copy_thread(&nul, &target).await),
            (
                "copy of a U+0000 source onto a thread",
                &thread,
                who.copy_thread(&nul, &thread).await,
            ),
            (
                "delete_for_runs",
                &thread,
                who.delete_for_runs(std::slice::from_ref(&run)).await,
            ),
        ];
        for (op, want, outcome) in refusals {
            let err = outcome.expect_err(op);
            assert_fenced(&err, want, name);
            assert_eq!(
                snapshot(store_b, &threads).await,
                before,
                "{name}'s refused {op} changed the store"
            );
        }
    }
    // the owner kept its lease through the refusals: its own succeed (or,
    // onto a thread that holds checkpoints, say so)
    let owner_caps = owner.capabilities();
    assert!(owner_caps.prune && owner_caps.copy_thread && owner_caps.delete_for_runs);
    for (op, outcome) in [
        ("copy of nothing", owner.copy_thread(&empty, &thread).await),
        ("copy of a U+0000 source", owner.copy_thread(&nul, &thread).await),
        (
            "import create of nothing",
            owner.import(&nothing, ImportMode::Create).await,
        ),
    ] {
        let err = outcome.expect_err(op);
        assert!(
            matches!(&err, Error::ThreadExists { thread_id } if *thread_id == thread),
            "the owner's {op}: {err:?}"
        );
    }
    owner
        .copy_thread(&empty, &target)
        .await
        .expect("the owner's copy of nothing");
    owner
        .copy_thread(&nul, &target)
        .await
        .expect("the owner's copy of a U+0000 source");
    assert_eq!(
        snapshot(store_b, &threads).await,
        before,
        "the owner's no-ops changed the store"
    );
    owner.copy_thread(&source, &target).await.expect("owner's copy");
    assert_eq!(history(store_a, &target).await, history(store_a, &source).await);
    owner
        .prune(std::slice::from_ref(&thread), PruneStrategy::KeepLatest)
        .await
        .expect("owner's prune");
    let pruned = history(store_a, &thread).await;
    assert!(pruned.len() < 5, "keep_latest removed nothing: {pruned:?}");
    assert_eq!(pruned[0].0, before[0][0].config.checkpoint_id.clone().expect("id"));
    owner
        .delete_for_runs(std::slice::from_ref(&run))
        .await
        .expect("owner's delete_for_runs");
    let left = snapshot(store_a, &[thread.as_str()]).await.remove(0);
    assert!(left.len() < pruned.len(), "delete_for_runs removed nothing");
    assert!(
        left.iter().all(|t| t.metadata.run_id() != Some(run.as_str())),
        "the run's checkpoints stayed"
    );
    owner
        .import(&one_checkpoint(&thread), ImportMode::Replace)
        .await
        .expect("owner's import");
    assert_eq!(history(store_b, &thread).await.len(), 1);
    owner
        .prune(&[thread.clone(), target.clone()], PruneStrategy::Delete)
        .await
        .expect("owner's prune delete");
    assert!(history(store_a, &thread).await.is_empty() && history(store_a, &target).await.is_empty());
    // the stale writer is still refused after the owner's maintenance
    let err = put_step(stale.as_ref(), &CheckpointConfig::new(&thread), 0, &stale_name)
        .await
        .expect_err("stale");
    assert_fenced(&err, &thread, &stale_name);
}

/// `purge_leases` removes the expired lease of a deleted thread and keeps
/// the one of a thread that holds data; a thread whose lease went gets, at
/// its next acquisition, an epoch above every one it had, and the old
/// epoch's writes stay refused.
pub async fn purge_leases_of_deleted_threads(store: &dyn Fenceable) {
    let (deleted, kept) = (fresh("purged"), fresh("kept"));
    let name = fresh("w");
    let a = writer(store, &name, Duration::from_millis(200));
    let mut epochs = Vec::new();
    for t in [&deleted, &kept] {
        epochs.push(a.acquire(t).await.expect("acquire").epoch);
        put_step(a.as_ref(), &CheckpointConfig::new(t), 0, &name)
            .await
            .expect("write");
    }
    a.delete_thread(&deleted).await.expect("the owner's delete");
    // a lease not yet expired stays
    store.purge_leases(Duration::ZERO).await.expect("purge");
    a.renew(&deleted).await.expect("an unexpired lease is kept");
    // both leases expire
    tokio::time::sleep(Duration::from_millis(400)).await;
    let purged = store.purge_leases(Duration::ZERO).await.expect("purge");
    assert!(purged >= 1, "the deleted thread's lease was not purged");
    // the thread with data keeps its lease: its owner renews it (a lease
    // renews past its deadline while no one took it)
    a.renew(&kept).await.expect("the lease of a thread with data is kept");
    assert_fenced(&a.renew(&deleted).await.expect_err("purged"), &deleted, &name);
    let b_name = fresh("b");
    let b = writer(store, &b_name, Duration::from_secs(30));
    let again = b.acquire(&deleted).await.expect("the purged thread is taken anew");
    assert!(
        again.epoch > epochs[0],
        "epoch {} after a purge, {} before",
        again.epoch,
        epochs[0]
    );
    put_step(b.as_ref(), &CheckpointConfig::new(&deleted), 0, &b_name)
        .await
        .expect("the new owner writes");
    let err = put_step(a.as_ref(), &CheckpointConfig::new(&deleted), 0, &name)
        .await
        .expect_err("the old epoch");
    assert_fenced(&err, &deleted, &name);
    assert!(matches!(
        store.purge_leases(Duration::from_secs(400 * 24 * 3600)).await,
        Err(Error::InvalidInput { .. })
    ));
}
