//! Checks of [`CheckpointSaver::copy_thread`]: LangGraph's 8 tests and ours (see
//! `docs/design.md`, *Conformance suite*).

use super::*;
use crate::Error;

/// A source thread: three chained root checkpoints (the second reading a
/// value stored by the first), one `child:1` checkpoint, writes with task
/// paths on the latest root and on the child.
async fn source_thread(s: &dyn CheckpointSaver) -> Result<String, CheckFailure> {
    let t = new_thread_id();
    let (a1, b1, b2) = (str_version(1), str_version(1), str_version(2));
    let cp1 = checkpoint_with(
        &[("a", Value::from("A")), ("b", Value::from("b1"))],
        &[("a", a1.clone()), ("b", b1)],
    );
    let mut md = generate_metadata("input", -1);
    md.insert("user", "ada");
    let c1 = put_all(s, &generate_config(&t), &cp1, &md).await?;
    let cp2 = checkpoint_with(&[("b", Value::from("b2"))], &[("a", a1.clone()), ("b", b2.clone())]);
    let c2 = put_new(s, &c1, &cp2, &generate_metadata("loop", 0), &[("b", b2.clone())]).await?;
    put_writes(s, &c2, &[("b", Value::from("w"))], "task-x", "~__pregel_pull, n").await?;
    let cp3 = checkpoint_with(
        &[("c", Value::Int(3))],
        &[("a", a1), ("b", b2), ("c", ChannelVersion::Int(1))],
    );
    let c3 = put_new(
        s,
        &c2,
        &cp3,
        &generate_metadata("loop", 1),
        &[("c", ChannelVersion::Int(1))],
    )
    .await?;
    put_writes(
        s,
        &c3,
        &[("c", Value::Int(4)), ("b", Value::from("late"))],
        "task-b",
        "~__pregel_pull, z",
    )
    .await?;
    put_writes(s, &c3, &[("c", Value::Int(5))], "task-a", "").await?;
    let child = checkpoint_with(&[("x", Value::from("child"))], &[("x", ChannelVersion::Int(1))]);
    let mut md = generate_metadata("loop", 0);
    md.insert("parents", Value::map([("", Value::from(id_of(&c3)))]));
    let cc = put_all(s, &generate_config(&t).with_ns("child:1"), &child, &md).await?;
    put_writes(s, &cc, &[("x", Value::from("cw"))], "task-c", "~__pregel_pull, c").await?;
    Ok(t)
}

/// Every tuple of a thread (all namespaces) with thread ids blanked, so two
/// threads can be compared.
async fn anonymous(s: &dyn CheckpointSaver, thread: &str) -> Result<Vec<CheckpointTuple>, CheckFailure> {
    let mut tuples = delete_thread::snapshot(s, thread).await?;
    for t in &mut tuples {
        ensure_eq!(t.config.thread_id, thread, "thread of a listed tuple");
        t.config.thread_id.clear();
        if let Some(p) = &mut t.parent_config {
            ensure_eq!(p.thread_id, thread, "thread of a parent config");
            p.thread_id.clear();
        }
    }
    Ok(tuples)
}

/// Copies a fresh source thread to a fresh target; returns (source, target).
async fn copied(s: &dyn CheckpointSaver) -> Result<(String, String), CheckFailure> {
    let src = source_thread(s).await?;
    let dst = new_thread_id();
    s.copy_thread(&src, &dst).await?;
    Ok((src, dst))
}

/// The source's and the target's checkpoints after a copy, as many of each.
async fn copied_snapshots(
    s: &dyn CheckpointSaver,
) -> Result<(Vec<CheckpointTuple>, Vec<CheckpointTuple>), CheckFailure> {
    let (src, dst) = copied(s).await?;
    let a = delete_thread::snapshot(s, &src).await?;
    let b = delete_thread::snapshot(s, &dst).await?;
    ensure_eq!(b.len(), a.len(), "number of checkpoints");
    Ok((a, b))
}

/// The target gets the source's three root checkpoints.
pub async fn copy_thread_basic(s: &dyn CheckpointSaver) -> CheckResult {
    let (_, dst) = copied(s).await?;
    ensure_eq!(
        list(s, Some(generate_config(&dst)), ListOptions::default())
            .await?
            .len(),
        3,
        "root checkpoints of the target"
    );
    Ok(())
}

/// Every checkpoint is copied, with the same id and channel values.
pub async fn copy_thread_all_checkpoints(s: &dyn CheckpointSaver) -> CheckResult {
    let (a, b) = copied_snapshots(s).await?;
    for (x, y) in a.iter().zip(&b) {
        ensure_eq!(y.checkpoint, x.checkpoint, "checkpoint {}", x.checkpoint.id);
    }
    Ok(())
}

/// Metadata is copied.
pub async fn copy_thread_preserves_metadata(s: &dyn CheckpointSaver) -> CheckResult {
    let (a, b) = copied_snapshots(s).await?;
    for (x, y) in a.iter().zip(&b) {
        ensure!(
            metadata_eq(&x.metadata, &y.metadata),
            "metadata of {}: got {:?}, expected {:?}",
            x.checkpoint.id,
            y.metadata,
            x.metadata
        );
    }
    Ok(())
}

/// Namespaces are copied: the target has a root and a `child:1` checkpoint.
pub async fn copy_thread_preserves_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let (src, dst) = copied(s).await?;
    for ns in ["", "child:1"] {
        let a = get(s, &generate_config(&src).with_ns(ns)).await?;
        let b = get(s, &generate_config(&dst).with_ns(ns)).await?;
        ensure_eq!(
            b.config,
            stored_config(&dst, ns, &a.checkpoint.id),
            "latest of {ns:?} in the target"
        );
    }
    Ok(())
}

/// Writes are copied: the target's latest checkpoint has the source's.
pub async fn copy_thread_preserves_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let (src, dst) = copied(s).await?;
    let a = get(s, &generate_config(&src)).await?;
    let b = get(s, &generate_config(&dst)).await?;
    ensure!(
        !b.pending_writes.is_empty(),
        "the target's latest checkpoint has no writes"
    );
    ensure_eq!(b.pending_writes, a.pending_writes, "writes of the latest");
    Ok(())
}

/// The target lists the same ids in the same order.
pub async fn copy_thread_preserves_ordering(s: &dyn CheckpointSaver) -> CheckResult {
    let (src, dst) = copied(s).await?;
    for cfg in [CheckpointConfig::all_namespaces(""), generate_config("")] {
        let src_cfg = CheckpointConfig {
            thread_id: src.clone(),
            ..cfg.clone()
        };
        let dst_cfg = CheckpointConfig {
            thread_id: dst.clone(),
            ..cfg
        };
        let a = list_ids(s, Some(src_cfg), ListOptions::default()).await?;
        let b = list_ids(s, Some(dst_cfg), ListOptions::default()).await?;
        ensure_eq!(b, a, "ids newest first");
    }
    Ok(())
}

/// The source is left as it was.
pub async fn copy_thread_source_unchanged(s: &dyn CheckpointSaver) -> CheckResult {
    let src = source_thread(s).await?;
    let before = delete_thread::snapshot(s, &src).await?;
    s.copy_thread(&src, &new_thread_id()).await?;
    ensure_eq!(delete_thread::snapshot(s, &src).await?, before, "the source");
    Ok(())
}

/// Copying an unknown thread succeeds and leaves the target empty.
pub async fn copy_thread_nonexistent_source(s: &dyn CheckpointSaver) -> CheckResult {
    let dst = new_thread_id();
    s.copy_thread(&new_thread_id(), &dst).await?;
    ensure_eq!(
        delete_thread::snapshot(s, &dst).await?.len(),
        0,
        "checkpoints of the target"
    );
    Ok(())
}

/// A target that has any checkpoint is refused with
/// [`Error::ThreadExists`], and neither thread changes.
pub async fn copy_thread_existing_target_errors(s: &dyn CheckpointSaver) -> CheckResult {
    let src = source_thread(s).await?;
    let dst = new_thread_id();
    put_empty(s, &generate_config(&dst).with_ns("child:9"), "loop", 0).await?;
    let (src_before, dst_before) = (
        delete_thread::snapshot(s, &src).await?,
        delete_thread::snapshot(s, &dst).await?,
    );
    match s.copy_thread(&src, &dst).await {
        Err(Error::ThreadExists { thread_id }) => ensure_eq!(thread_id, dst, "thread in the error"),
        other => {
            return Err(CheckFailure::new(format!(
                "copy onto a thread with checkpoints: got {other:?}, expected ThreadExists"
            )))
        }
    }
    ensure_eq!(delete_thread::snapshot(s, &src).await?, src_before, "the source");
    ensure_eq!(delete_thread::snapshot(s, &dst).await?, dst_before, "the target");
    Ok(())
}

/// The copy is the source with another thread id: parents (pointing into the
/// target), values read through earlier versions, and writes in
/// (task_path, task_id, idx) order all match.
pub async fn copy_thread_preserves_parents_and_task_paths(s: &dyn CheckpointSaver) -> CheckResult {
    let (src, dst) = copied(s).await?;
    let a = anonymous(s, &src).await?;
    let b = anonymous(s, &dst).await?;
    ensure_eq!(b, a, "tuples of the target (thread ids blanked)");
    ensure_eq!(a.len(), 4, "checkpoints of the source");
    Ok(())
}
