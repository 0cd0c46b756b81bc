//! Checks of [`CheckpointSaver::delete_thread`]: LangGraph's 5 tests (see
//! `docs/design.md`, *Conformance suite*).

use super::*;

/// A thread with checkpoints in `""` and `child:1`, writes on each, and a
/// value stored at version 1 of channel `x`.
pub(crate) async fn populated_thread(s: &dyn CheckpointSaver) -> Result<(String, Vec<CheckpointConfig>), CheckFailure> {
    let t = new_thread_id();
    let mut configs = put_chain(s, &generate_config(&t), 2).await?;
    let child = checkpoint_with(&[("x", Value::from("child"))], &[("x", ChannelVersion::Int(1))]);
    configs.push(
        put_all(
            s,
            &generate_config(&t).with_ns("child:1"),
            &child,
            &generate_metadata("loop", 0),
        )
        .await?,
    );
    for cfg in &configs {
        put_writes(s, cfg, &[("ch", Value::from("w"))], "task1", "").await?;
    }
    Ok((t, configs))
}

/// Everything a populated thread holds, for before/after comparisons.
pub(crate) async fn snapshot(s: &dyn CheckpointSaver, thread: &str) -> Result<Vec<CheckpointTuple>, CheckFailure> {
    list(
        s,
        Some(CheckpointConfig::all_namespaces(thread)),
        ListOptions::default(),
    )
    .await
}

/// Fails unless `op` leaves `thread` as it was (checkpoints, values,
/// writes), saying `what` ran.
pub(crate) async fn unchanged_by<F>(s: &dyn CheckpointSaver, thread: &str, what: &str, op: F) -> CheckResult
where
    F: std::future::Future<Output = crate::Result<()>>,
{
    let before = snapshot(s, thread).await?;
    unchanged_since(s, thread, before, what, op).await
}

/// Fails unless `thread` after `op` is `before`, saying `what` ran.
pub(crate) async fn unchanged_since<F>(
    s: &dyn CheckpointSaver,
    thread: &str,
    before: Vec<CheckpointTuple>,
    what: &str,
    op: F,
) -> CheckResult
where
    F: std::future::Future<Output = crate::Result<()>>,
{
    op.await?;
    ensure_eq!(snapshot(s, thread).await?, before, "thread after {what}");
    Ok(())
}

/// After `delete_thread` the thread has no latest checkpoint, no checkpoint
/// by id and an empty listing.
pub async fn delete_thread_removes_checkpoints(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 3).await?;
    s.delete_thread(&t).await?;
    ensure!(s.get_tuple(&generate_config(&t)).await?.is_none(), "latest still found");
    for cfg in &configs {
        ensure!(s.get_tuple(cfg).await?.is_none(), "checkpoint {cfg:?} still found");
    }
    ensure_eq!(snapshot(s, &t).await?.len(), 0, "listed checkpoints");
    Ok(())
}

/// The thread's writes go too: the same checkpoint put again has none.
pub async fn delete_thread_removes_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let cfg = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    put_writes(s, &cfg, &[("ch", Value::from("w"))], "task1", "").await?;
    s.delete_thread(&t).await?;
    ensure!(s.get_tuple(&cfg).await?.is_none(), "checkpoint still found");
    let again = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    ensure_eq!(get(s, &again).await?.pending_writes, vec![], "writes after re-put");
    Ok(())
}

/// Every namespace of the thread is removed.
pub async fn delete_thread_removes_all_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, configs) = populated_thread(s).await?;
    s.delete_thread(&t).await?;
    for cfg in &configs {
        ensure!(s.get_tuple(cfg).await?.is_none(), "checkpoint {cfg:?} still found");
    }
    ensure!(
        s.get_tuple(&generate_config(&t).with_ns("child:1")).await?.is_none(),
        "child:1 still has a latest checkpoint"
    );
    ensure_eq!(snapshot(s, &t).await?.len(), 0, "listed checkpoints, all namespaces");
    Ok(())
}

/// Other threads keep their checkpoints, writes and values.
pub async fn delete_thread_preserves_other_threads(s: &dyn CheckpointSaver) -> CheckResult {
    let (gone, _) = populated_thread(s).await?;
    let (kept, _) = populated_thread(s).await?;
    let before = snapshot(s, &kept).await?;
    s.delete_thread(&gone).await?;
    ensure_eq!(snapshot(s, &kept).await?, before, "the other thread");
    ensure_eq!(before.len(), 3, "checkpoints of the other thread");
    Ok(())
}

/// Deleting an unknown thread succeeds and changes nothing.
pub async fn delete_thread_nonexistent_noop(s: &dyn CheckpointSaver) -> CheckResult {
    let (kept, _) = populated_thread(s).await?;
    let before = snapshot(s, &kept).await?;
    s.delete_thread(&new_thread_id()).await?;
    ensure_eq!(snapshot(s, &kept).await?, before, "an unrelated thread");
    Ok(())
}
