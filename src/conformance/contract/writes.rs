//! The `put_writes` rules: the per-write conflict rule, writes before their
//! checkpoint, the required checkpoint id and the order pending writes come
//! back in.

use super::*;
use crate::checkpoint::channels;
use crate::Error;

/// A special-channel write replaces an earlier one of the same task, for each
/// of `__error__`, `__scheduled__`, `__interrupt__`, `__resume__`.
pub async fn put_writes_special_channels_overwrite(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    let specials = [
        channels::RESUME,
        channels::INTERRUPT,
        channels::SCHEDULED,
        channels::ERROR,
    ];
    for ch in specials {
        put_writes(s, &cfg, &[(ch, Value::from("first"))], "task1", "").await?;
    }
    for ch in specials {
        put_writes(s, &cfg, &[(ch, Value::from("second"))], "task1", "").await?;
    }
    // Fixed indexes -4, -3, -2, -1: the order of `specials`.
    let expected: Vec<PendingWrite> = specials.iter().map(|ch| pw("task1", ch, "second")).collect();
    ensure_eq!(get(s, &cfg).await?.pending_writes, expected, "pending writes");
    Ok(())
}

/// The conflict rule is decided per write: in a batch mixing regular and
/// special writes, the special write still replaces and the regular one still
/// keeps the first value.
pub async fn put_writes_mixed_batch_per_write(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    put_writes(s, &cfg, &[(channels::ERROR, Value::from("e2"))], "task1", "").await?;
    for (a, error, what) in [
        (1, "e3", "after the first mixed batch"),
        (99, "e4", "after the second mixed batch"),
    ] {
        let writes = [("a", Value::Int(a)), (channels::ERROR, Value::from(error))];
        let expected = vec![pw("task1", channels::ERROR, error), pw("task1", "a", 1)];
        pending_after(s, &cfg, &writes, expected, what).await?;
    }
    Ok(())
}

/// Writes may be stored before their checkpoint; they show once it is put.
pub async fn put_writes_before_checkpoint(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let target = generate_config(&t).with_checkpoint_id(cp.id.clone());
    put_writes(s, &target, &[("ch", Value::from("early"))], "task1", "").await?;
    let stored = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    ensure_eq!(
        get(s, &stored).await?.pending_writes,
        vec![pw("task1", "ch", "early")],
        "writes stored before the checkpoint"
    );
    Ok(())
}

/// `put_writes` without a checkpoint id is [`Error::InvalidInput`].
pub async fn put_writes_requires_checkpoint_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    for cfg in [generate_config(&t), generate_config(&t).with_checkpoint_id("")] {
        let writes = [("ch".to_owned(), Value::Int(1))];
        match s.put_writes(&cfg, &writes, "task1", "").await {
            Err(Error::InvalidInput { .. }) => {}
            other => {
                return Err(CheckFailure::new(format!(
                    "put_writes({cfg:?}) without a checkpoint id: got {other:?}, expected InvalidInput"
                )))
            }
        }
    }
    Ok(())
}

/// Pending writes come back sorted by (task_path, task_id, idx): paths and ids
/// by code point, idx numerically with special (negative) indexes first, from
/// `get_tuple` by id, latest, and `list`.
pub async fn pending_writes_sorted(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    // (task_path, task_id, writes)
    type Call<'a> = (&'a str, &'a str, Vec<(&'a str, Value)>);
    let calls: Vec<Call<'_>> = vec![
        (
            "~__pregel_pull, a",
            "t-b",
            vec![
                ("x", Value::Int(1)),
                (channels::ERROR, Value::from("e")),
                ("y", Value::Int(2)),
            ],
        ),
        (
            "~__pregel_push, 0000000000, 0000000000",
            "t-0",
            vec![("z", Value::Int(3))],
        ),
        ("", "t-z", vec![("w", Value::Int(4))]),
        ("~__pregel_pull, a", "t-a", vec![("v", Value::Int(5))]),
        ("~__pregel_pull, é", "t-c", vec![("u", Value::Int(6))]),
        ("~__pregel_pull, z", "t-d", vec![("s", Value::Int(7))]),
        ("~__pregel_pull, Z", "t-e", vec![("q", Value::Int(8))]),
        (
            "~__pregel_pull, b",
            "t-f",
            (0..11)
                .map(|i| {
                    (
                        ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10"][i],
                        Value::from(i),
                    )
                })
                .collect(),
        ),
    ];
    for (path, task, writes) in &calls {
        put_writes(s, &cfg, writes, task, path).await?;
    }
    // each with the task path of its call and its index in the call (the
    // error's index is fixed)
    let pull = |node: &str| format!("~__pregel_pull, {node}");
    let mut expected = vec![
        pw("t-z", "w", 4),
        pw("t-e", "q", 8).with_task_path(pull("Z")),
        pw("t-a", "v", 5).with_task_path(pull("a")),
        pw("t-b", channels::ERROR, "e").with_task_path(pull("a")),
        pw("t-b", "x", 1).with_task_path(pull("a")),
        pw("t-b", "y", 2).with_task_path(pull("a")).with_idx(2),
    ];
    expected.extend((0..11usize).map(|i| {
        pw("t-f", &format!("c{i}"), i)
            .with_task_path(pull("b"))
            .with_idx(i as i64)
    }));
    expected.extend([
        pw("t-d", "s", 7).with_task_path(pull("z")),
        pw("t-c", "u", 6).with_task_path(pull("é")),
        pw("t-0", "z", 3).with_task_path("~__pregel_push, 0000000000, 0000000000"),
    ]);

    ensure_eq!(get(s, &cfg).await?.pending_writes, expected, "get_tuple by id");
    let latest = get(s, &generate_config(&cfg.thread_id)).await?;
    ensure_eq!(latest.pending_writes, expected, "get_tuple latest");
    let listed = list(s, Some(generate_config(&cfg.thread_id)), ListOptions::default()).await?;
    ensure_eq!(listed.len(), 1, "listed checkpoints");
    ensure_eq!(listed[0].pending_writes, expected, "list");
    Ok(())
}
