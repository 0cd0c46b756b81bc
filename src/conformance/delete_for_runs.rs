//! Checks of [`CheckpointSaver::delete_for_runs`]: LangGraph's 7 tests and ours (see
//! `docs/design.md`, *Conformance suite*).

use super::*;

/// Puts a checkpoint whose metadata `run_id` is `run` under `parent`, with
/// one write.
async fn put_run(
    s: &dyn CheckpointSaver,
    parent: &CheckpointConfig,
    run: &str,
) -> Result<CheckpointConfig, CheckFailure> {
    let mut md = generate_metadata("loop", 0);
    md.insert("run_id", run);
    let cfg = put_all(s, parent, &generate_checkpoint(), &md).await?;
    put_writes(s, &cfg, &[("ch", Value::from(run))], "task1", "").await?;
    Ok(cfg)
}

/// The ids of `thread` (all namespaces) whose metadata run_id is `run`.
async fn ids_of_run(s: &dyn CheckpointSaver, thread: &str, run: &str) -> Result<Vec<String>, CheckFailure> {
    list_ids(
        s,
        Some(CheckpointConfig::all_namespaces(thread)),
        ListOptions::default().filter("run_id", run),
    )
    .await
}

/// Deleting one run removes its checkpoints and keeps the other run's.
pub async fn delete_for_runs_single(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let (run1, run2) = (new_thread_id(), new_thread_id());
    let c1 = put_run(s, &generate_config(&t), &run1).await?;
    let c2 = put_run(s, &c1, &run2).await?;
    s.delete_for_runs(std::slice::from_ref(&run1)).await?;
    ensure_eq!(
        ids_of_run(s, &t, &run1).await?,
        Vec::<String>::new(),
        "run1 checkpoints"
    );
    ensure_eq!(ids_of_run(s, &t, &run2).await?, vec![id_of(&c2)], "run2 checkpoints");
    Ok(())
}

/// Several runs go in one call.
pub async fn delete_for_runs_multiple(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let runs = [new_thread_id(), new_thread_id(), new_thread_id()];
    let mut parent = generate_config(&t);
    for run in &runs {
        parent = put_run(s, &parent, run).await?;
    }
    s.delete_for_runs(&runs[..2]).await?;
    let left = list(s, Some(generate_config(&t)), ListOptions::default()).await?;
    ensure_eq!(
        left.iter()
            .map(|x| x.metadata.run_id().map(str::to_owned))
            .collect::<Vec<_>>(),
        vec![Some(runs[2].clone())],
        "runs left"
    );
    Ok(())
}

/// Checkpoints of other runs, and without a run id, in other threads, stay.
pub async fn delete_for_runs_preserves_other_runs(s: &dyn CheckpointSaver) -> CheckResult {
    let (t1, t2) = (new_thread_id(), new_thread_id());
    let (gone, kept) = (new_thread_id(), new_thread_id());
    put_run(s, &generate_config(&t1), &gone).await?;
    put_run(s, &generate_config(&t2), &kept).await?;
    put_empty(s, &generate_config(&t2), "loop", 1).await?;
    let before = delete_thread::snapshot(s, &t2).await?;
    s.delete_for_runs(std::slice::from_ref(&gone)).await?;
    ensure_eq!(delete_thread::snapshot(s, &t2).await?, before, "the other thread");
    ensure_eq!(before.len(), 2, "checkpoints of the other thread");
    Ok(())
}

/// The deleted checkpoints' writes go too: the same id put again has none.
pub async fn delete_for_runs_removes_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let run = new_thread_id();
    let cp = generate_checkpoint();
    let mut md = generate_metadata("loop", 0);
    md.insert("run_id", run.clone());
    let cfg = put_all(s, &generate_config(&t), &cp, &md).await?;
    put_writes(s, &cfg, &[("ch", Value::from("w"))], "task1", "").await?;
    s.delete_for_runs(&[run]).await?;
    ensure!(s.get_tuple(&cfg).await?.is_none(), "deleted checkpoint still found");
    let again = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    ensure_eq!(get(s, &again).await?.pending_writes, vec![], "writes after re-put");
    Ok(())
}

/// An empty list deletes nothing.
pub async fn delete_for_runs_empty_list_noop(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    put_run(s, &generate_config(&t), &new_thread_id()).await?;
    delete_thread::unchanged_by(s, &t, "delete_for_runs([])", s.delete_for_runs(&[])).await
}

/// Unknown run ids delete nothing.
pub async fn delete_for_runs_nonexistent_noop(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    put_run(s, &generate_config(&t), &new_thread_id()).await?;
    delete_thread::unchanged_by(
        s,
        &t,
        "unknown runs",
        s.delete_for_runs(&[new_thread_id(), new_thread_id()]),
    )
    .await
}

/// A run's checkpoints go in every namespace.
pub async fn delete_for_runs_across_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let run = new_thread_id();
    put_run(s, &generate_config(&t), &run).await?;
    put_run(s, &generate_config(&t).with_ns("child:1"), &run).await?;
    ensure_eq!(ids_of_run(s, &t, &run).await?.len(), 2, "checkpoints before");
    s.delete_for_runs(std::slice::from_ref(&run)).await?;
    ensure_eq!(
        ids_of_run(s, &t, &run).await?,
        Vec::<String>::new(),
        "checkpoints after"
    );
    Ok(())
}

/// A run's checkpoints go in every thread.
pub async fn delete_for_runs_across_threads(s: &dyn CheckpointSaver) -> CheckResult {
    let (t1, t2) = (new_thread_id(), new_thread_id());
    let run = new_thread_id();
    put_run(s, &generate_config(&t1), &run).await?;
    put_run(s, &generate_config(&t2), &run).await?;
    s.delete_for_runs(std::slice::from_ref(&run)).await?;
    ensure_eq!(ids_of_run(s, &t1, &run).await?, Vec::<String>::new(), "thread 1");
    ensure_eq!(ids_of_run(s, &t2, &run).await?, Vec::<String>::new(), "thread 2");
    Ok(())
}

/// Values a remaining checkpoint reads from the version a deleted one stored
/// are kept.
pub async fn delete_for_runs_keeps_values_of_remaining(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let (run1, run2) = (new_thread_id(), new_thread_id());
    let v = str_version(1);
    let cp1 = checkpoint_with(&[("a", Value::from("A"))], &[("a", v.clone())]);
    let mut md1 = generate_metadata("loop", 0);
    md1.insert("run_id", run1.clone());
    let c1 = put_all(s, &generate_config(&t), &cp1, &md1).await?;
    let cp2 = checkpoint_with(&[], &[("a", v)]);
    let mut md2 = generate_metadata("loop", 1);
    md2.insert("run_id", run2);
    let c2 = s.put(&c1, &cp2, &md2, &ChannelVersions::new()).await?;
    ensure_eq!(
        get(s, &c2).await?.checkpoint.channel_values.get("a"),
        Some(&Value::from("A")),
        "a before delete_for_runs"
    );
    s.delete_for_runs(&[run1]).await?;
    ensure!(s.get_tuple(&c1).await?.is_none(), "run1 checkpoint still found");
    ensure_eq!(
        get(s, &c2).await?.checkpoint.channel_values.get("a"),
        Some(&Value::from("A")),
        "a after deleting the run that stored it"
    );
    Ok(())
}
