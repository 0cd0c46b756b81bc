//! Write ownership ([`crate::fence`]) and atomic steps ([`crate::atomic`]),
//! checked on the savers whose [`CheckpointSaver::as_fenceable`] is `Some`.
//! The first check has the shape langchain-ai/langgraph#8796 proposes for
//! LangGraph's suite: two writers on one thread, exactly one lineage
//! survives, the loser gets an error.

use std::time::Duration;

use super::{generate_config, generate_metadata, get, list, new_thread_id};
use super::{CheckFailure, CheckResult};
use crate::checkpoint::{Checkpoint, PendingWrite};
use crate::config::CheckpointConfig;
use crate::error::Error;
use crate::fence::{Fence, Fenceable};
use crate::saver::{CheckpointSaver, ListOptions};
use crate::serde::Value;

fn fenceable_of(saver: &dyn CheckpointSaver) -> Result<&dyn Fenceable, CheckFailure> {
    saver
        .as_fenceable()
        .ok_or_else(|| CheckFailure::new("the saver has no fencing (as_fenceable is None)"))
}

fn writer(store: &dyn Fenceable, name: String, lease: Duration) -> Result<std::sync::Arc<dyn Fenceable>, CheckFailure> {
    Ok(store.fenced_saver(Fence::new(name, lease))?)
}

/// A loop checkpoint of `step` whose value `who` names its writer.
fn step_checkpoint(step: i64, who: &str) -> Checkpoint {
    let mut cp = Checkpoint::new(step);
    cp.channel_values.insert("who".into(), Value::from(who));
    cp
}

/// Puts a chain of `n` checkpoints after `parent`: the configs stored and
/// the errors of the refused puts.
async fn chain(
    w: &dyn Fenceable,
    mut parent: CheckpointConfig,
    n: i64,
    who: &str,
) -> (Vec<CheckpointConfig>, Vec<Error>) {
    let (mut stored, mut refused) = (Vec::new(), Vec::new());
    for step in 0..n {
        let cp = step_checkpoint(step, who);
        match w
            .put(&parent, &cp, &generate_metadata("loop", step), &Default::default())
            .await
        {
            Ok(config) => {
                stored.push(config.clone());
                parent = config;
            }
            Err(e) => refused.push(e),
        }
    }
    (stored, refused)
}

fn all_fenced(errors: &[Error], writer: &str) -> CheckResult {
    for e in errors {
        ensure!(
            matches!(e, Error::Fenced { writer: w, .. } if w == writer) && !e.is_retryable(),
            "a refused write of {writer} fails with Error::Fenced naming it, not retryable; got {e:?}"
        );
    }
    Ok(())
}

/// The thread's root namespace as (id, parent id), newest first; fails
/// unless it is one lineage.
async fn one_lineage(saver: &dyn CheckpointSaver, thread: &str) -> Result<Vec<String>, CheckFailure> {
    let tuples = list(saver, Some(generate_config(thread)), ListOptions::default()).await?;
    let ids: Vec<String> = tuples
        .iter()
        .map(|t| t.config.checkpoint_id.clone().unwrap_or_default())
        .collect();
    for (i, t) in tuples.iter().enumerate() {
        let parent = t.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone());
        ensure_eq!(
            parent,
            ids.get(i + 1).cloned(),
            "the parent of checkpoint {i} of {ids:?}"
        );
    }
    Ok(ids)
}

/// Two fenced writers each put a chain of checkpoints on one new thread at
/// once: one gets the thread and stores its whole chain, every put of the
/// other fails with `Error::Fenced`, and the thread is one lineage.
pub async fn fencing_two_writers_one_lineage(saver: &dyn CheckpointSaver) -> CheckResult {
    two_writers_race(saver, saver, 5).await
}

/// [`fencing_two_writers_one_lineage`] on two savers of one store (what two
/// processes hold: connections, pools or writer threads of their own),
/// each writer putting a chain of `steps`: exactly one writer stores its
/// whole chain, every put of the other is refused with `Error::Fenced`
/// naming the thread and that writer, the thread is one lineage, the
/// winner's, and either saver reads the winner's last checkpoint as the
/// latest.
///
/// # Errors
/// A [`CheckFailure`] saying what did not hold.
pub async fn two_writers_race(store_a: &dyn CheckpointSaver, store_b: &dyn CheckpointSaver, steps: i64) -> CheckResult {
    let thread = new_thread_id();
    let lease = Duration::from_secs(30);
    let (name_a, name_b) = (format!("{thread}-a"), format!("{thread}-b"));
    let a = writer(fenceable_of(store_a)?, name_a.clone(), lease)?;
    let b = writer(fenceable_of(store_b)?, name_b.clone(), lease)?;
    let ((stored_a, refused_a), (stored_b, refused_b)) = futures::join!(
        chain(a.as_ref(), generate_config(&thread), steps, &name_a),
        chain(b.as_ref(), generate_config(&thread), steps, &name_b)
    );
    let (winner, winner_name, loser, refused, loser_name) = match (stored_a.len(), stored_b.len()) {
        (_, 0) => (stored_a, &name_a, stored_b, refused_b, &name_b),
        (0, _) => (stored_b, &name_b, stored_a, refused_a, &name_a),
        (x, y) => {
            return Err(CheckFailure::new(format!(
                "both writers stored checkpoints on one thread ({x} and {y}): the thread forked"
            )))
        }
    };
    let n = usize::try_from(steps).unwrap_or(0);
    ensure_eq!(winner.len(), n, "checkpoints the owner stored");
    ensure!(loser.is_empty(), "the other writer stored nothing");
    ensure_eq!(refused.len(), n, "puts refused to the other writer");
    all_fenced(&refused, loser_name)?;
    for e in &refused {
        ensure!(
            matches!(e, Error::Fenced { thread_id, .. } if *thread_id == thread),
            "a refusal names the thread {thread}: {e:?}"
        );
    }
    let mut want: Vec<String> = winner
        .iter()
        .map(|c| c.checkpoint_id.clone().unwrap_or_default())
        .collect();
    want.reverse();
    ensure_eq!(one_lineage(store_a, &thread).await?, want, "the thread's history");
    let latest = get(store_b, &generate_config(&thread)).await?;
    ensure_eq!(
        latest.checkpoint.channel_values.get("who"),
        Some(&Value::from(winner_name.as_str())),
        "the latest checkpoint, read by the other saver"
    );
    ensure_eq!(Some(latest.config), winner.last().cloned(), "the latest checkpoint");
    Ok(())
}

/// A writer whose lease expired and was taken over still holds its token:
/// its `put`, `put_writes`, `delete_thread` and atomic step are refused and
/// change nothing; the new owner's writes pass.
pub async fn fencing_stale_writer_is_refused(saver: &dyn CheckpointSaver) -> CheckResult {
    let store = fenceable_of(saver)?;
    let thread = new_thread_id();
    let (name_a, name_b) = (format!("{thread}-a"), format!("{thread}-b"));
    let a = writer(store, name_a.clone(), Duration::from_millis(100))?;
    let b = writer(store, name_b, Duration::from_secs(30))?;
    let root = a
        .put(
            &generate_config(&thread),
            &step_checkpoint(0, &name_a),
            &generate_metadata("loop", 0),
            &Default::default(),
        )
        .await?;
    ensure!(
        take_over(b.as_ref(), &thread).await?,
        "another writer takes the thread once a 100 ms lease expired (waited 5 s)"
    );
    let before = list(saver, Some(generate_config(&thread)), ListOptions::default()).await?;
    let meta = generate_metadata("loop", 1);
    let mut refused = Vec::new();
    if let Err(e) = a
        .put(&root, &step_checkpoint(1, &name_a), &meta, &Default::default())
        .await
    {
        refused.push(e);
    }
    if let Err(e) = a
        .put_writes(&root, &[("who".into(), Value::from("late"))], "task", "")
        .await
    {
        refused.push(e);
    }
    if let Err(e) = a.delete_thread(&thread).await {
        refused.push(e);
    }
    let step = step_checkpoint(1, &name_a).successor(1);
    let writes = [PendingWrite::new("task", "who", "late")];
    if let Err(e) = a.put_step_with_writes(&root, &step, &meta, &writes).await {
        refused.push(e);
    }
    ensure_eq!(
        refused.len(),
        4,
        "stale writes refused (put, put_writes, delete_thread, step)"
    );
    all_fenced(&refused, &name_a)?;
    let after = list(saver, Some(generate_config(&thread)), ListOptions::default()).await?;
    ensure_eq!(after, before, "the thread after refused writes");
    b.put(&root, &step_checkpoint(1, "b"), &meta, &Default::default())
        .await?;
    ensure_eq!(
        one_lineage(saver, &thread).await?.len(),
        2,
        "checkpoints after the owner's put"
    );
    Ok(())
}

/// `w` acquires `thread` as soon as its holder's lease expires; false after
/// 5 s of trying.
pub(super) async fn take_over(w: &dyn Fenceable, thread: &str) -> Result<bool, CheckFailure> {
    for _ in 0..500 {
        match w.acquire(thread).await {
            Ok(_) => return Ok(true),
            Err(Error::Fenced { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

/// A loop checkpoint put by `w` after `parent`.
async fn put_one(
    w: &dyn CheckpointSaver,
    parent: &CheckpointConfig,
    step: i64,
    who: &str,
) -> crate::Result<CheckpointConfig> {
    w.put(
        parent,
        &step_checkpoint(step, who),
        &generate_metadata("loop", step),
        &Default::default(),
    )
    .await
}

fn fenced_as(result: crate::Result<CheckpointConfig>, writer: &str, what: &str) -> CheckResult {
    match result {
        Ok(_) => Err(CheckFailure::new(format!(
            "{what}: stored, though {writer} does not own the thread"
        ))),
        Err(e) => all_fenced(&[e], writer),
    }
}

/// `put_step_with_writes` stores a step's writes of two tasks (regular and
/// special channels) against the parent, in the contract's order, and the
/// next checkpoint as its child, both read back; a non-owner's step stores
/// neither; bad writes (an index not its position's, a parent without a
/// checkpoint id) are refused before anything is stored; an unfenced saver
/// takes steps too, one without writes included.
pub async fn fencing_atomic_step_is_whole(saver: &dyn CheckpointSaver) -> CheckResult {
    let store = fenceable_of(saver)?;
    let thread = new_thread_id();
    let owner = writer(store, format!("{thread}-owner"), Duration::from_secs(30))?;
    let other_name = format!("{thread}-other");
    let other = writer(store, other_name.clone(), Duration::from_secs(30))?;
    let root = put_one(owner.as_ref(), &generate_config(&thread), 0, "owner").await?;
    let writes = [
        PendingWrite::new("task-b", "who", "b").with_task_path("~__pregel_pull, b"),
        PendingWrite::new("task-a", "who", "a").with_task_path("~__pregel_pull, a"),
        PendingWrite::new("task-a", "branch:to:b", Value::Nil)
            .with_task_path("~__pregel_pull, a")
            .with_idx(1),
        PendingWrite::new("task-a", "__error__", "boom")
            .with_task_path("~__pregel_pull, a")
            .with_idx(-1),
        PendingWrite::new("task-b", "__error__", "bang")
            .with_task_path("~__pregel_pull, b")
            .with_idx(-1),
    ];
    let mut step = get(saver, &root).await?.checkpoint.successor(1);
    step.write("who", "a", |v| saver.get_next_version(v))?;
    let meta = generate_metadata("loop", 1);
    let refused = other.put_step_with_writes(&root, &step, &meta, &writes).await;
    ensure!(refused.is_err(), "a non-owner's step is refused");
    let refused: Vec<Error> = refused.err().into_iter().collect();
    all_fenced(&refused, &other_name)?;
    ensure!(
        matches!(&refused[0], Error::Fenced { thread_id, .. } if *thread_id == thread),
        "the refusal names the thread: {refused:?}"
    );
    ensure!(
        get(saver, &root).await?.pending_writes.is_empty(),
        "a refused step stored writes"
    );
    ensure_eq!(
        one_lineage(saver, &thread).await?.len(),
        1,
        "checkpoints after a refused step"
    );
    let bad = [PendingWrite::new("task-a", "who", "a").with_idx(3)];
    ensure!(
        matches!(
            owner.put_step_with_writes(&root, &step, &meta, &bad).await,
            Err(Error::InvalidInput { .. })
        ),
        "a write whose index is not its position's is refused with InvalidInput"
    );
    ensure!(
        matches!(
            owner
                .put_step_with_writes(&generate_config(&thread), &step, &meta, &writes)
                .await,
            Err(Error::InvalidInput { .. })
        ),
        "writes against a parent without a checkpoint id are refused with InvalidInput"
    );
    ensure_eq!(
        one_lineage(saver, &thread).await?.len(),
        1,
        "checkpoints after refused bad steps"
    );
    let stored = owner.put_step_with_writes(&root, &step, &meta, &writes).await?;
    ensure_eq!(stored.parent_config.as_ref(), Some(&root), "the step's parent");
    let mut want = writes.to_vec();
    want.sort_by(|x, y| (&x.task_path, &x.task_id, x.idx).cmp(&(&y.task_path, &y.task_id, y.idx)));
    ensure_eq!(get(saver, &root).await?.pending_writes, want, "the step's writes");
    let latest = get(saver, &generate_config(&thread)).await?;
    ensure_eq!(latest.config, stored.config, "the latest checkpoint");
    ensure_eq!(
        latest.parent_config.as_ref(),
        Some(&root),
        "the latest checkpoint's parent"
    );
    ensure_eq!(
        latest.checkpoint.channel_values.get("who"),
        Some(&Value::from("a")),
        "the step's checkpoint's value"
    );
    // the unfenced saver takes steps too, one without writes included
    let plain = store
        .put_step_with_writes(&stored.config, &stored.checkpoint.successor(2), &meta, &[])
        .await?;
    ensure_eq!(
        one_lineage(saver, &thread).await?.len(),
        3,
        "checkpoints after a plain step"
    );
    ensure_eq!(
        plain.parent_config.as_ref(),
        Some(&stored.config),
        "the plain step's parent"
    );
    Ok(())
}

/// The owner writes freely: its first write acquires the thread; it writes
/// on across a renewal, forks from an older checkpoint, writes on an older
/// checkpoint and in a subgraph namespace of the thread; another fenced
/// writer is refused meanwhile, an unfenced saver is not (fencing is
/// opt-in); a released thread is refused to the old owner and taken at once
/// by another writer.
pub async fn fencing_owner_writes_freely(saver: &dyn CheckpointSaver) -> CheckResult {
    let store = fenceable_of(saver)?;
    let thread = new_thread_id();
    let (name_a, name_b) = (format!("{thread}-a"), format!("{thread}-b"));
    let a = writer(store, name_a.clone(), Duration::from_secs(30))?;
    let b = writer(store, name_b.clone(), Duration::from_secs(30))?;
    let first = put_one(a.as_ref(), &generate_config(&thread), 0, &name_a).await?;
    let second = put_one(a.as_ref(), &first, 1, &name_a).await?;
    ensure_eq!(a.renew(&thread).await?.writer, name_a, "the renewed lease's owner");
    let fork = put_one(a.as_ref(), &first, 1, &name_a).await?;
    a.put_writes(&first, &[("who".into(), Value::from("update"))], "task", "")
        .await?;
    let child = generate_config(&thread).with_ns("child:1");
    put_one(a.as_ref(), &child, 0, &name_a).await?;
    fenced_as(
        put_one(b.as_ref(), &second, 2, &name_b).await,
        &name_b,
        "a put by another writer",
    )?;
    ensure_eq!(root_checkpoints(saver, &thread).await?, 3, "root-namespace checkpoints");
    ensure!(fork != second, "a fork is a checkpoint of its own");
    put_one(saver, &second, 2, "unfenced").await?;
    ensure!(a.release(&thread).await?, "the owner releases its lease");
    fenced_as(
        put_one(a.as_ref(), &second, 3, &name_a).await,
        &name_a,
        "a put after release",
    )?;
    b.acquire(&thread).await?;
    put_one(b.as_ref(), &second, 3, &name_b).await?;
    Ok(())
}

/// The number of checkpoints of the thread's root namespace.
async fn root_checkpoints(saver: &dyn CheckpointSaver, thread: &str) -> Result<usize, CheckFailure> {
    Ok(list(saver, Some(generate_config(thread)), ListOptions::default())
        .await?
        .len())
}

/// Bad fences: typed errors, nothing stored; a fenced saver declares what
/// its store does (its whole-thread operations are fenced, not refused),
/// except retention, which it refuses.
pub async fn fencing_bad_fences_are_refused(saver: &dyn CheckpointSaver) -> CheckResult {
    let store = fenceable_of(saver)?;
    let thread = new_thread_id();
    for fence in [
        Fence::new("", Duration::from_secs(1)),
        Fence::new("a\0b", Duration::from_secs(1)),
        Fence::new("a", Duration::ZERO),
        Fence::new("a", Duration::from_secs(2 * 24 * 3600)),
    ] {
        ensure!(
            matches!(store.fenced_saver(fence.clone()), Err(Error::InvalidInput { .. })),
            "{fence:?} is refused with InvalidInput"
        );
    }
    let a = writer(store, format!("{thread}-a"), Duration::from_secs(1))?;
    ensure!(
        matches!(a.acquire("").await, Err(Error::InvalidInput { .. })),
        "an empty thread id is refused with InvalidInput"
    );
    ensure!(
        matches!(store.acquire(&thread).await, Err(Error::InvalidInput { .. })),
        "an unfenced saver has no lease to take (InvalidInput)"
    );
    ensure!(
        a.capabilities() == store.capabilities(),
        "a fenced saver runs what its store runs (its whole-thread operations and retention are fenced, not refused)"
    );
    ensure!(
        list(saver, Some(generate_config(&thread)), ListOptions::default())
            .await?
            .is_empty(),
        "nothing stored"
    );
    Ok(())
}
