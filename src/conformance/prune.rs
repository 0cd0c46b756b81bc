//! Checks of [`CheckpointSaver::prune`]: LangGraph's 8 tests and ours (see
//! `docs/design.md`, *Conformance suite*).

use super::*;
use crate::saver::PruneStrategy;

/// The configs `list` yields for every namespace of `thread`.
async fn configs_of(s: &dyn CheckpointSaver, thread: &str) -> Result<Vec<CheckpointConfig>, CheckFailure> {
    Ok(delete_thread::snapshot(s, thread)
        .await?
        .into_iter()
        .map(|t| t.config)
        .collect())
}

/// Keep-latest leaves only the newest of three checkpoints.
pub async fn prune_keep_latest_single_thread(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 3).await?;
    s.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest).await?;
    ensure_eq!(configs_of(s, &t).await?, vec![configs[2].clone()], "checkpoints left");
    ensure_eq!(
        get(s, &generate_config(&t))
            .await?
            .checkpoint
            .channel_values
            .get("step"),
        Some(&Value::Int(2)),
        "value of the kept checkpoint"
    );
    Ok(())
}

/// Keep-latest applies to each thread named.
pub async fn prune_keep_latest_multiple_threads(s: &dyn CheckpointSaver) -> CheckResult {
    let (t1, t2) = (new_thread_id(), new_thread_id());
    let c1 = put_chain(s, &generate_config(&t1), 3).await?;
    let c2 = put_chain(s, &generate_config(&t2), 2).await?;
    s.prune(&[t1.clone(), t2.clone()], PruneStrategy::KeepLatest).await?;
    ensure_eq!(configs_of(s, &t1).await?, vec![c1[2].clone()], "thread 1");
    ensure_eq!(configs_of(s, &t2).await?, vec![c2[1].clone()], "thread 2");
    Ok(())
}

/// A fresh thread with a chain of `root` checkpoints in the root namespace
/// and two in `child:1`, pruned with `KeepLatest`; returns the thread id and
/// both chains' configs.
async fn pruned_root_and_child(
    s: &dyn CheckpointSaver,
    root: i64,
) -> Result<(String, Vec<CheckpointConfig>, Vec<CheckpointConfig>), CheckFailure> {
    let t = new_thread_id();
    let root = put_chain(s, &generate_config(&t), root).await?;
    let child = put_chain(s, &generate_config(&t).with_ns("child:1"), 2).await?;
    s.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest).await?;
    Ok((t, root, child))
}

/// Each namespace keeps its latest (a `child:1` whose `parents` is empty is
/// not a per-call namespace of an older root checkpoint).
pub async fn prune_keep_latest_across_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, root, child) = pruned_root_and_child(s, 2).await?;
    let mut expected = vec![root[1].clone(), child[1].clone()];
    expected.sort_by(|a, b| b.checkpoint_id.cmp(&a.checkpoint_id));
    ensure_eq!(configs_of(s, &t).await?, expected, "checkpoints left");
    Ok(())
}

/// The kept checkpoint keeps its writes.
pub async fn prune_keep_latest_preserves_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 2).await?;
    put_writes(s, &configs[0], &[("old", Value::Int(0))], "task1", "").await?;
    put_writes(s, &configs[1], &[("ch", Value::from("kept"))], "task1", "p").await?;
    s.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest).await?;
    ensure_eq!(
        get(s, &configs[1]).await?.pending_writes,
        vec![pw("task1", "ch", "kept").with_task_path("p")],
        "writes of the kept checkpoint"
    );
    Ok(())
}

/// The delete strategy removes everything of the thread, in every namespace.
pub async fn prune_delete_all(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, configs) = delete_thread::populated_thread(s).await?;
    s.prune(std::slice::from_ref(&t), PruneStrategy::Delete).await?;
    ensure_eq!(configs_of(s, &t).await?, vec![], "checkpoints left");
    for cfg in &configs {
        ensure!(s.get_tuple(cfg).await?.is_none(), "checkpoint {cfg:?} still found");
    }
    Ok(())
}

/// Threads not named are untouched, by either strategy.
pub async fn prune_preserves_other_threads(s: &dyn CheckpointSaver) -> CheckResult {
    let (gone, _) = delete_thread::populated_thread(s).await?;
    let (kept, _) = delete_thread::populated_thread(s).await?;
    let before = delete_thread::snapshot(s, &kept).await?;
    s.prune(std::slice::from_ref(&gone), PruneStrategy::KeepLatest).await?;
    ensure_eq!(delete_thread::snapshot(s, &kept).await?, before, "after keep-latest");
    s.prune(std::slice::from_ref(&gone), PruneStrategy::Delete).await?;
    ensure_eq!(delete_thread::snapshot(s, &kept).await?, before, "after delete");
    Ok(())
}

/// An empty thread list prunes nothing.
pub async fn prune_empty_list_noop(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, _) = delete_thread::populated_thread(s).await?;
    let before = delete_thread::snapshot(s, &t).await?;
    s.prune(&[], PruneStrategy::KeepLatest).await?;
    delete_thread::unchanged_since(s, &t, before, "prune([])", s.prune(&[], PruneStrategy::Delete)).await
}

/// Unknown threads prune nothing and succeed.
pub async fn prune_nonexistent_noop(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, _) = delete_thread::populated_thread(s).await?;
    let before = delete_thread::snapshot(s, &t).await?;
    s.prune(&[new_thread_id()], PruneStrategy::KeepLatest).await?;
    delete_thread::unchanged_since(
        s,
        &t,
        before,
        "pruning unknown threads",
        s.prune(&[new_thread_id()], PruneStrategy::Delete),
    )
    .await
}

/// Values the kept checkpoint reads from versions stored by deleted
/// checkpoints survive.
pub async fn prune_keep_latest_keeps_referenced_values(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let (a1, b1, b2) = (str_version(1), str_version(1), str_version(2));
    let cp1 = checkpoint_with(
        &[("a", Value::from("A")), ("b", Value::from("B1"))],
        &[("a", a1.clone()), ("b", b1)],
    );
    let c1 = put_all(s, &generate_config(&t), &cp1, &generate_metadata("loop", 0)).await?;
    let cp2 = checkpoint_with(&[("b", Value::from("B2"))], &[("a", a1), ("b", b2.clone())]);
    let c2 = put_new(s, &c1, &cp2, &generate_metadata("loop", 1), &[("b", b2)]).await?;
    s.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest).await?;
    ensure!(s.get_tuple(&c1).await?.is_none(), "the older checkpoint is still there");
    let kept = get(s, &c2).await?.checkpoint;
    ensure_eq!(
        kept.channel_values.get("a"),
        Some(&Value::from("A")),
        "a (stored by the pruned checkpoint)"
    );
    ensure_eq!(kept.channel_values.get("b"), Some(&Value::from("B2")), "b");
    Ok(())
}

/// A kept checkpoint whose parent was pruned forgets it (`parent_config` is
/// `None`, as Python's `PostgresSaver.prune` leaves it), in every namespace;
/// of kept delta ancestors only the oldest does, the others keep their
/// parents.
pub async fn prune_keep_latest_forgets_pruned_parents(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, root, child) = pruned_root_and_child(s, 3).await?;
    for (ns, parent, head) in [("root", &root[1], &root[2]), ("child:1", &child[0], &child[1])] {
        ensure!(s.get_tuple(parent).await?.is_none(), "{ns}: the parent is still there");
        ensure_eq!(get(s, head).await?.parent_config, None, "{ns}: parent of the kept head");
    }
    for tuple in delete_thread::snapshot(s, &t).await? {
        ensure_eq!(tuple.parent_config, None, "parent of {:?} in list", tuple.config);
    }

    let (t, old, chain) = delta_thread(s).await?;
    s.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest).await?;
    ensure!(
        s.get_tuple(&old).await?.is_none(),
        "the input checkpoint is still there"
    );
    // oldest first: the snapshot step's parent went, the others' stayed
    let parents: Vec<Option<CheckpointConfig>> = std::iter::once(None)
        .chain(chain.iter().take(chain.len() - 1).cloned().map(Some))
        .collect();
    for (step, (cfg, parent)) in chain.iter().zip(&parents).enumerate() {
        ensure_eq!(&get(s, cfg).await?.parent_config, parent, "parent of kept step {step}");
    }
    let listed: Vec<_> = delete_thread::snapshot(s, &t)
        .await?
        .into_iter()
        .map(|t| t.parent_config)
        .collect();
    ensure_eq!(listed, parents.into_iter().rev().collect::<Vec<_>>(), "parents in list");
    Ok(())
}

/// A thread whose delta channel `log` has its snapshot at the first loop
/// step: an input checkpoint, then four loop steps with a write each. As
/// the runtime does, the metadata names the delta channel in
/// `counters_since_delta_snapshot` on every step after a snapshot;
/// `trigger`, a channel consumed at the head (a version, no value), needs no
/// history. Returns the thread, the input checkpoint and the steps.
pub(super) async fn delta_thread(
    s: &dyn CheckpointSaver,
) -> Result<(String, CheckpointConfig, Vec<CheckpointConfig>), CheckFailure> {
    let t = new_thread_id();
    let cm = checkpoint_with(
        &[("plain", Value::from("p0")), ("trigger", Value::Nil)],
        &[("plain", ChannelVersion::Int(1)), ("trigger", ChannelVersion::Int(1))],
    );
    let mut parent = put_all(s, &generate_config(&t), &cm, &generate_metadata("input", -1)).await?;
    let old = parent.clone();
    let mut chain = Vec::new();
    for step in 0..4i64 {
        let log_version = str_version(step + 1);
        let plain_version = ChannelVersion::Int(step + 2);
        let mut values = vec![("plain", Value::from(format!("p{}", step + 1)))];
        if step == 0 {
            values.push(("log", Value::delta_snapshot(Value::from(vec!["s"]))));
        }
        // The trigger was consumed at step 0: a new version, no value.
        let versions = [
            ("log", log_version),
            ("plain", plain_version),
            ("trigger", ChannelVersion::Int(2)),
        ];
        let cp = checkpoint_with(&values, &versions);
        let mut metadata = generate_metadata("loop", step);
        if step > 0 {
            metadata.insert(
                "counters_since_delta_snapshot",
                Value::map([("log", Value::from(vec![step, step]))]),
            );
        }
        parent = put_all(s, &parent, &cp, &metadata).await?;
        put_writes(s, &parent, &[("log", Value::from(format!("w{step}")))], "task1", "").await?;
        chain.push(parent.clone());
    }
    Ok((t, old, chain))
}

/// Keep-latest keeps, with their writes, the ancestors a delta channel needs:
/// the parent chain up to the nearest checkpoint storing the channel's value.
/// Older checkpoints go, among them the input checkpoint that last held the
/// value of `trigger`, a channel consumed at the head (see `delta_thread`).
pub async fn prune_keep_latest_keeps_delta_ancestors(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, old, chain) = delta_thread(s).await?;
    s.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest).await?;
    let mut expected = chain.clone();
    expected.reverse();
    ensure_eq!(configs_of(s, &t).await?, expected, "checkpoints left");
    ensure!(
        s.get_tuple(&old).await?.is_none(),
        "the checkpoint before the snapshot is still there"
    );
    for (step, cfg) in chain.iter().enumerate() {
        ensure_eq!(
            get(s, cfg).await?.pending_writes,
            vec![pw("task1", "log", format!("w{step}"))],
            "writes of step {step}"
        );
    }
    ensure_eq!(
        get(s, &chain[0]).await?.checkpoint.channel_values.get("log"),
        Some(&Value::delta_snapshot(Value::from(vec!["s"]))),
        "the snapshot"
    );
    Ok(())
}

/// Per-call namespaces (containing `:`) of an older root checkpoint are
/// removed entirely; those of the kept root, of an unknown root, and
/// per-thread namespaces (no `:`) keep their latest.
pub async fn prune_keep_latest_removes_call_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let root = put_chain(s, &generate_config(&t), 2).await?;
    let (r1, r2) = (id_of(&root[0]), id_of(&root[1]));
    let mut kept = vec![root[1].clone()];
    let cases: [(&str, &str, bool); 5] = [
        ("sub:t1", &r1, false),
        ("sub:t4|inner:t5", &r1, false),
        ("sub:t2", &r2, true),
        ("sub:t3", "1ef00000-0000-6000-8000-000000000000", true),
        ("sub", &r1, true),
    ];
    for (ns, parent_root, keeps) in cases {
        let mut parent = generate_config(&t).with_ns(ns);
        for step in 0..2 {
            let mut md = generate_metadata("loop", step);
            md.insert("parents", Value::map([("", Value::from(parent_root))]));
            parent = put_all(s, &parent, &generate_checkpoint(), &md).await?;
            put_writes(s, &parent, &[("ch", Value::Int(step))], "task1", "").await?;
        }
        if keeps {
            kept.push(parent);
        }
    }
    s.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest).await?;
    kept.sort_by(|a, b| {
        b.checkpoint_id
            .cmp(&a.checkpoint_id)
            .then(b.checkpoint_ns.cmp(&a.checkpoint_ns))
    });
    ensure_eq!(configs_of(s, &t).await?, kept, "checkpoints left");
    Ok(())
}
