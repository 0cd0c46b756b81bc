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
    let store = fenceable_of(saver)?;
    let thread = new_thread_id();
    let lease = Duration::from_secs(30);
    let (name_a, name_b) = (format!("{thread}-a"), format!("{thread}-b"));
    let a = writer(store, name_a.clone(), lease)?;
    let b = writer(store, name_b.clone(), lease)?;
    let n = 5;
    let ((stored_a, refused_a), (stored_b, refused_b)) = futures::join!(
        chain(a.as_ref(), generate_config(&thread), n, &name_a),
        chain(b.as_ref(), generate_config(&thread), n, &name_b)
    );
    let (winner, loser, refused, loser_name) = match (stored_a.len(), stored_b.len()) {
        (_, 0) => (stored_a, stored_b, refused_b, &name_b),
        (0, _) => (stored_b, stored_a, refused_a, &name_a),
        (x, y) => {
            return Err(CheckFailure::new(format!(
                "both writers stored checkpoints on one thread ({x} and {y}): the thread forked"
            )))
        }
    };
    ensure_eq!(winner.len(), n as usize, "checkpoints the owner stored");
    ensure!(loser.is_empty(), "the other writer stored nothing");
    ensure_eq!(refused.len(), n as usize, "puts refused to the other writer");
    all_fenced(&refused, loser_name)?;
    let mut want: Vec<String> = winner
        .iter()
        .map(|c| c.checkpoint_id.clone().unwrap_or_default())
        .collect();
    want.reverse();
    ensure_eq!(one_lineage(saver, &thread).await?, want, "the thread's history");
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
    let mut taken = false;
    for _ in 0..500 {
        match b.acquire(&thread).await {
            Ok(_) => {
                taken = true;
                break;
            }
            Err(Error::Fenced { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(e) => return Err(e.into()),
        }
    }
    ensure!(
        taken,
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

/// `put_step_with_writes` stores a step's writes of two tasks against the
/// parent and the next checkpoint as its child, both read back; a
/// non-owner's step stores neither.
pub async fn fencing_atomic_step_is_whole(saver: &dyn CheckpointSaver) -> CheckResult {
    let store = fenceable_of(saver)?;
    let thread = new_thread_id();
    let owner = writer(store, format!("{thread}-owner"), Duration::from_secs(30))?;
    let other_name = format!("{thread}-other");
    let other = writer(store, other_name.clone(), Duration::from_secs(30))?;
    let root = owner
        .put(
            &generate_config(&thread),
            &step_checkpoint(0, "owner"),
            &generate_metadata("loop", 0),
            &Default::default(),
        )
        .await?;
    let writes = [
        PendingWrite::new("task-b", "who", "b").with_task_path("~__pregel_pull, b"),
        PendingWrite::new("task-a", "who", "a").with_task_path("~__pregel_pull, a"),
        PendingWrite::new("task-a", "__error__", "boom")
            .with_task_path("~__pregel_pull, a")
            .with_idx(-1),
    ];
    let step = step_checkpoint(0, "owner").successor(1);
    let meta = generate_metadata("loop", 1);
    let refused = other.put_step_with_writes(&root, &step, &meta, &writes).await;
    ensure!(refused.is_err(), "a non-owner's step is refused");
    all_fenced(&refused.err().into_iter().collect::<Vec<_>>(), &other_name)?;
    ensure!(
        get(saver, &root).await?.pending_writes.is_empty(),
        "a refused step stored writes"
    );
    ensure_eq!(
        one_lineage(saver, &thread).await?.len(),
        1,
        "checkpoints after a refused step"
    );
    let stored = owner.put_step_with_writes(&root, &step, &meta, &writes).await?;
    ensure_eq!(stored.parent_config.as_ref(), Some(&root), "the step's parent");
    let mut want = writes.to_vec();
    want.sort_by(|x, y| (&x.task_path, &x.task_id, x.idx).cmp(&(&y.task_path, &y.task_id, y.idx)));
    ensure_eq!(get(saver, &root).await?.pending_writes, want, "the step's writes");
    ensure_eq!(
        get(saver, &generate_config(&thread)).await?.config,
        stored.config,
        "the latest checkpoint"
    );
    Ok(())
}
