//! Checks of [`CheckpointSaver::put_writes`]: LangGraph's 10 tests (see
//! `docs/design.md`, *Conformance suite*).

use super::*;
use crate::checkpoint::channels;

/// A stored checkpoint of a fresh thread (namespace `ns`), as writes target.
pub(crate) async fn stored_checkpoint(s: &dyn CheckpointSaver, ns: &str) -> Result<CheckpointConfig, CheckFailure> {
    let t = new_thread_id();
    put_all(
        s,
        &generate_config(&t).with_ns(ns),
        &generate_checkpoint(),
        &generate_metadata("loop", 0),
    )
    .await
}

/// One write comes back as exactly `(task_id, "channel1", "value1")`.
pub async fn put_writes_basic(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    let expected = vec![pw("task1", "channel1", "value1")];
    pending_after(
        s,
        &cfg,
        &[("channel1", Value::from("value1"))],
        expected,
        "pending writes",
    )
    .await
}

/// Three writes of one task come back with their channels and values, in
/// call order.
pub async fn put_writes_multiple_writes_same_task(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    let writes = [
        ("ch1", Value::from("v1")),
        ("ch2", Value::from("v2")),
        ("ch3", Value::from("v3")),
    ];
    let expected = vec![
        pw("task1", "ch1", "v1"),
        pw("task1", "ch2", "v2").with_idx(1),
        pw("task1", "ch3", "v3").with_idx(2),
    ];
    pending_after(s, &cfg, &writes, expected, "pending writes").await
}

/// Writes of two tasks are both kept, each with its value.
pub async fn put_writes_multiple_tasks(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    put_writes(s, &cfg, &[("ch", Value::from("from-1"))], "task1", "").await?;
    put_writes(s, &cfg, &[("ch", Value::from("from-2"))], "task2", "").await?;
    let tuple = get(s, &cfg).await?;
    ensure_eq!(
        tuple.pending_writes,
        vec![pw("task1", "ch", "from-1"), pw("task2", "ch", "from-2")],
        "pending writes"
    );
    Ok(())
}

/// The task id of a write is kept exactly.
pub async fn put_writes_preserves_task_id(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    let task = "3dad8c10-2692-f41f-69ba-4ffb93f90bd7";
    put_writes(s, &cfg, &[("ch", Value::Int(1))], task, "~__pregel_pull, node").await?;
    let tuple = get(s, &cfg).await?;
    ensure_eq!(
        tuple
            .pending_writes
            .iter()
            .map(|w| w.task_id.as_str())
            .collect::<Vec<_>>(),
        vec![task],
        "task ids"
    );
    Ok(())
}

/// A write's channel and structured value round-trip.
pub async fn put_writes_preserves_channel_and_value(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    let value = Value::map([
        ("key", Value::from("value")),
        ("n", Value::from(vec![1, 2])),
        ("nested", Value::map([("z", Value::Nil), ("a", Value::Float(0.5))])),
    ]);
    put_writes(s, &cfg, &[("my_channel", value.clone())], "task1", "").await?;
    let tuple = get(s, &cfg).await?;
    ensure_eq!(
        tuple.pending_writes,
        vec![pw("task1", "my_channel", value)],
        "pending writes"
    );
    Ok(())
}

/// A task path is accepted and comes back with the write, which is stored
/// once.
pub async fn put_writes_task_path(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    put_writes(s, &cfg, &[("ch", Value::from("v"))], "task1", "a:b:c").await?;
    let tuple = get(s, &cfg).await?;
    ensure_eq!(
        tuple.pending_writes,
        vec![pw("task1", "ch", "v").with_task_path("a:b:c")],
        "pending writes"
    );
    Ok(())
}

/// Repeating a call stores the writes once; a retry with other values keeps
/// the first values (regular writes are keep-first per (task_id, idx)).
pub async fn put_writes_idempotent(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    let writes = [("ch", Value::from("first")), ("other", Value::Int(1))];
    put_writes(s, &cfg, &writes, "task1", "").await?;
    put_writes(s, &cfg, &writes, "task1", "").await?;
    let expected = vec![pw("task1", "ch", "first"), pw("task1", "other", 1).with_idx(1)];
    ensure_eq!(
        get(s, &cfg).await?.pending_writes,
        expected,
        "after the same call twice"
    );
    put_writes(
        s,
        &cfg,
        &[("ch", Value::from("second")), ("other", Value::Int(2))],
        "task1",
        "",
    )
    .await?;
    ensure_eq!(
        get(s, &cfg).await?.pending_writes,
        expected,
        "after a retry with new values"
    );
    Ok(())
}

/// `__error__` and `__interrupt__` writes are stored with their values.
pub async fn put_writes_special_channels(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    let interrupt = Value::map([("value", Value::from("ask")), ("id", Value::from("i-1"))]);
    let writes = [
        (channels::ERROR, Value::from("boom")),
        (channels::INTERRUPT, interrupt.clone()),
    ];
    // Fixed indexes: __interrupt__ = -3 sorts before __error__ = -1.
    let expected = vec![
        pw("task1", channels::INTERRUPT, interrupt),
        pw("task1", channels::ERROR, "boom"),
    ];
    pending_after(s, &cfg, &writes, expected, "pending writes").await
}

/// Writes against a root checkpoint and a `child:1` checkpoint stay apart.
pub async fn put_writes_across_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let root = put_empty(s, &generate_config(&t), "loop", 0).await?;
    let child = put_empty(s, &generate_config(&t).with_ns("child:1"), "loop", 0).await?;
    put_writes(s, &root, &[("ch", Value::from("root"))], "task1", "").await?;
    put_writes(s, &child, &[("ch", Value::from("child"))], "task1", "").await?;
    ensure_eq!(
        get(s, &root).await?.pending_writes,
        vec![pw("task1", "ch", "root")],
        "root writes"
    );
    ensure_eq!(
        get(s, &child).await?.pending_writes,
        vec![pw("task1", "ch", "child")],
        "child writes"
    );
    // The same checkpoint id in the other namespace has no writes.
    let cross = generate_config(&t).with_ns("child:1").with_checkpoint_id(id_of(&root));
    ensure!(
        s.get_tuple(&cross).await?.is_none(),
        "root checkpoint found in namespace child:1"
    );
    Ok(())
}

/// A checkpoint put after writes starts with no pending writes; the writes
/// stay on the checkpoint they were made against.
pub async fn put_writes_cleared_on_next_checkpoint(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = stored_checkpoint(s, "").await?;
    put_writes(s, &cfg, &[("ch", Value::from("v"))], "task1", "").await?;
    let next = put_empty(s, &cfg, "loop", 1).await?;
    ensure_eq!(
        get(s, &next).await?.pending_writes,
        vec![],
        "writes of the new checkpoint"
    );
    ensure_eq!(
        get(s, &cfg).await?.pending_writes,
        vec![pw("task1", "ch", "v")],
        "writes of the old checkpoint"
    );
    Ok(())
}
