//! Checks of [`CheckpointSaver::get_delta_channel_history`]: LangGraph's 8
//! tests and ours (see `docs/design.md`, *Conformance suite*; the rules:
//! *Delta channel history*).

use std::future::Future;
use std::time::Duration;

use futures::future::{select, Either};
use indexmap::IndexMap;

use super::*;
use crate::saver::DeltaChannelHistory;

/// One step of a delta fixture: values stored at the step's checkpoint and
/// writes made against it (by task `task-<step>`).
#[derive(Default)]
struct Step {
    values: Vec<(&'static str, Value)>,
    writes: Vec<(&'static str, Value)>,
}

fn step(values: Vec<(&'static str, Value)>, writes: Vec<(&'static str, Value)>) -> Step {
    Step { values, writes }
}

fn task(step: usize) -> String {
    format!("task-{step}")
}

/// Puts one checkpoint per step, chained by parent, in a fresh thread. Every
/// channel of `channels` gets version `step + 1` at each step (new at each
/// put), so a channel without a value at a step has no stored value there.
async fn build(
    s: &dyn CheckpointSaver,
    channels: &[&str],
    steps: Vec<Step>,
) -> Result<(String, Vec<CheckpointConfig>), CheckFailure> {
    let t = new_thread_id();
    let mut parent = generate_config(&t);
    let mut configs = Vec::new();
    for (i, st) in steps.into_iter().enumerate() {
        let versions: Vec<(&str, ChannelVersion)> = channels
            .iter()
            .map(|ch| (*ch, ChannelVersion::Int(i as i64 + 1)))
            .collect();
        let cp = checkpoint_with(&st.values, &versions);
        parent = put_all(s, &parent, &cp, &generate_metadata("loop", i as i64 - 1)).await?;
        if !st.writes.is_empty() {
            put_writes(s, &parent, &st.writes, &task(i), "").await?;
        }
        configs.push(parent.clone());
    }
    Ok((t, configs))
}

async fn history(
    s: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    channels: &[&str],
) -> Result<IndexMap<String, DeltaChannelHistory>, CheckFailure> {
    let channels: Vec<String> = channels.iter().map(|c| (*c).to_owned()).collect();
    Ok(s.get_delta_channel_history(config, &channels).await?)
}

fn expect(entries: Vec<(&str, Vec<PendingWrite>, Option<Value>)>) -> IndexMap<String, DeltaChannelHistory> {
    entries
        .into_iter()
        .map(|(ch, writes, seed)| (ch.to_owned(), DeltaChannelHistory { writes, seed }))
        .collect()
}

/// Builds `steps` and checks the history of channel `log` at the latest
/// checkpoint: `writes`, oldest first, after `seed`.
async fn log_history_is(
    s: &dyn CheckpointSaver,
    steps: Vec<Step>,
    writes: Vec<PendingWrite>,
    seed: Option<Value>,
) -> CheckResult {
    let (t, _) = build(s, &["log"], steps).await?;
    let got = history(s, &generate_config(&t), &["log"]).await?;
    ensure_eq!(got, expect(vec![("log", writes, seed)]), "history of log");
    Ok(())
}

/// The write of `step`'s task on `ch`, the `idx`-th write of its call.
fn int_write(step: usize, ch: &str, idx: i64) -> PendingWrite {
    pw(&task(step), ch, step).with_idx(idx)
}

/// Snapshot at step 0, writes at 1..=4, head 4: writes 1, 2, 3 oldest first,
/// seed the snapshot; other channels' writes are not included.
pub async fn delta_channel_history_returns_writes_oldest_first(s: &dyn CheckpointSaver) -> CheckResult {
    let mut steps = vec![step(vec![("log", Value::delta_snapshot(Value::Int(0)))], vec![])];
    for i in 1..=4usize {
        steps.push(step(vec![], vec![("other", Value::from("x")), ("log", Value::from(i))]));
    }
    log_history_is(
        s,
        steps,
        (1..=3).map(|i| int_write(i, "log", 1)).collect(),
        Some(Value::delta_snapshot(Value::Int(0))),
    )
    .await
}

/// Snapshots at 0 and 3, head 5: the seed is the snapshot of step 3 (as
/// stored, ext 7) and the writes are step 4's.
pub async fn delta_channel_history_seed_is_nearest_snapshot(s: &dyn CheckpointSaver) -> CheckResult {
    let mut steps = Vec::new();
    for i in 0..=5usize {
        if i == 0 || i == 3 {
            steps.push(step(vec![("log", Value::delta_snapshot(Value::from(i)))], vec![]));
        } else {
            steps.push(step(vec![], vec![("log", Value::from(i))]));
        }
    }
    log_history_is(
        s,
        steps,
        vec![int_write(4, "log", 0)],
        Some(Value::delta_snapshot(Value::Int(3))),
    )
    .await
}

/// Writes stored on the target itself are pending for the next step and are
/// not returned.
pub async fn delta_channel_history_excludes_target_pending_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let steps = vec![
        step(vec![("log", Value::delta_snapshot(Value::Int(0)))], vec![]),
        step(vec![], vec![("log", Value::Int(1))]),
        step(vec![], vec![("log", Value::Int(2))]),
    ];
    let (t, configs) = build(s, &["log"], steps).await?;
    put_writes(s, &configs[2], &[("log", Value::Int(99))], "late-task", "").await?;
    let got = history(s, &generate_config(&t), &["log"]).await?;
    let want = expect(vec![(
        "log",
        vec![int_write(1, "log", 0)],
        Some(Value::delta_snapshot(Value::Int(0))),
    )]);
    ensure_eq!(got, want, "history of log");
    Ok(())
}

/// Each channel ends at its own nearest stored value: `a` snapshotted at 1,
/// `b` at 3, writes on both at every step, head 4 ⇒ `a` 1, 2, 3 and `b` 3
/// (writes at the seed checkpoint included).
pub async fn delta_channel_history_multi_channel(s: &dyn CheckpointSaver) -> CheckResult {
    let mut steps = Vec::new();
    for i in 0..=4usize {
        let mut values = Vec::new();
        if i == 1 {
            values.push(("a", Value::delta_snapshot(Value::from("a-snap"))));
        }
        if i == 3 {
            values.push(("b", Value::delta_snapshot(Value::from("b-snap"))));
        }
        steps.push(step(values, vec![("a", Value::from(i)), ("b", Value::from(i))]));
    }
    let (t, _) = build(s, &["a", "b"], steps).await?;
    let got = history(s, &generate_config(&t), &["a", "b"]).await?;
    let want = expect(vec![
        (
            "a",
            (1..=3).map(|i| int_write(i, "a", 0)).collect(),
            Some(Value::delta_snapshot(Value::from("a-snap"))),
        ),
        (
            "b",
            vec![int_write(3, "b", 1)],
            Some(Value::delta_snapshot(Value::from("b-snap"))),
        ),
    ]);
    ensure_eq!(got, want, "history of a and b");
    Ok(())
}

/// No channels asked, an empty map returned.
pub async fn delta_channel_history_empty_channels_returns_empty(s: &dyn CheckpointSaver) -> CheckResult {
    let steps = vec![
        step(vec![("log", Value::delta_snapshot(Value::Int(0)))], vec![]),
        step(vec![], vec![("log", Value::Int(1))]),
    ];
    let (t, _) = build(s, &["log"], steps).await?;
    ensure_eq!(
        history(s, &generate_config(&t), &[]).await?,
        IndexMap::new(),
        "history of no channel"
    );
    Ok(())
}

/// Without any stored value the walk reaches the root: no seed, every
/// ancestor's writes.
pub async fn delta_channel_history_walk_to_root_no_seed(s: &dyn CheckpointSaver) -> CheckResult {
    let steps = (0..=3usize)
        .map(|i| step(vec![], vec![("log", Value::from(i))]))
        .collect();
    log_history_is(s, steps, (0..=2).map(|i| int_write(i, "log", 0)).collect(), None).await
}

/// A plain (pre-delta) stored value is a seed too.
pub async fn delta_channel_history_migration_plain_value_as_seed(s: &dyn CheckpointSaver) -> CheckResult {
    let plain = Value::from(vec![10, 20, 30]);
    let steps = vec![
        step(vec![], vec![("log", Value::Int(0))]),
        step(vec![("log", plain.clone())], vec![]),
        step(vec![], vec![("log", Value::Int(2))]),
        step(vec![], vec![]),
    ];
    log_history_is(s, steps, vec![int_write(2, "log", 0)], Some(plain)).await
}

/// Writes stored at the seed checkpoint are replayed, before later ones.
pub async fn delta_channel_history_seed_ancestor_own_writes_are_replayed(s: &dyn CheckpointSaver) -> CheckResult {
    let steps = vec![
        step(vec![("log", Value::from(vec![10]))], vec![]),
        step(
            vec![("log", Value::from(vec![10, 20]))],
            vec![("log", Value::from("at-seed"))],
        ),
        step(vec![], vec![("log", Value::from("after-seed"))]),
        step(vec![], vec![]),
    ];
    log_history_is(
        s,
        steps,
        vec![pw(&task(1), "log", "at-seed"), pw(&task(2), "log", "after-seed")],
        Some(Value::from(vec![10, 20])),
    )
    .await
}

/// A missing target (unknown thread, unknown id) gives every channel no
/// writes and no seed.
pub async fn delta_channel_history_missing_target(s: &dyn CheckpointSaver) -> CheckResult {
    let empty = expect(vec![("a", vec![], None), ("b", vec![], None)]);
    let got = history(s, &generate_config(&new_thread_id()), &["a", "b"]).await?;
    ensure_eq!(got, empty, "unknown thread");
    let steps = vec![
        step(vec![("a", Value::Int(0))], vec![("a", Value::Int(0))]),
        step(vec![], vec![]),
    ];
    let (t, _) = build(s, &["a", "b"], steps).await?;
    let unknown = generate_config(&t).with_checkpoint_id(generate_checkpoint().id);
    ensure_eq!(history(s, &unknown, &["a", "b"]).await?, empty, "unknown checkpoint id");
    Ok(())
}

/// A stored nil is a value: it is the seed.
pub async fn delta_channel_history_nil_value_is_seed(s: &dyn CheckpointSaver) -> CheckResult {
    let steps = vec![
        step(vec![("log", Value::from("older"))], vec![("log", Value::Int(0))]),
        step(vec![("log", Value::Nil)], vec![]),
        step(vec![], vec![("log", Value::Int(2))]),
        step(vec![], vec![]),
    ];
    log_history_is(s, steps, vec![int_write(2, "log", 0)], Some(Value::Nil)).await
}

/// The walk follows parent links, not id order: a fork's history skips the
/// sibling branch.
pub async fn delta_channel_history_follows_parents(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let v = |n| channel_versions(&[("log", ChannelVersion::Int(n))]);
    let mut root = checkpoint_with(&[("log", Value::delta_snapshot(Value::from("root")))], &[]);
    root.channel_versions = v(1);
    let c0 = put_all(s, &generate_config(&t), &root, &generate_metadata("loop", 0)).await?;
    let mut branch1 = generate_checkpoint();
    branch1.channel_versions = v(2);
    let b1 = put_all(s, &c0, &branch1, &generate_metadata("loop", 1)).await?;
    put_writes(s, &b1, &[("log", Value::from("branch1"))], "t1", "").await?;
    let mut branch2 = generate_checkpoint();
    branch2.channel_versions = v(3);
    let b2 = put_all(s, &c0, &branch2, &generate_metadata("fork", 1)).await?;
    put_writes(s, &b2, &[("log", Value::from("branch2"))], "t2", "").await?;
    // a head on each branch sees its branch's write over the root's snapshot
    for (branch, version, task, value, what) in [
        (&b2, 4, "t2", "branch2", "the fork's head"),
        (&b1, 5, "t1", "branch1", "the first branch's head"),
    ] {
        let mut head = generate_checkpoint();
        head.channel_versions = v(version);
        let h = put_all(s, branch, &head, &generate_metadata("loop", 2)).await?;
        let got = history(s, &h, &["log"]).await?;
        let want = expect(vec![(
            "log",
            vec![pw(task, "log", value)],
            Some(Value::delta_snapshot(Value::from("root"))),
        )]);
        ensure_eq!(got, want, "history of {what}");
    }
    Ok(())
}

/// The target is the config's checkpoint id when given, the latest otherwise.
pub async fn delta_channel_history_target_is_config_id_or_latest(s: &dyn CheckpointSaver) -> CheckResult {
    let mut steps = vec![step(vec![("log", Value::delta_snapshot(Value::Int(0)))], vec![])];
    for i in 1..=4usize {
        steps.push(step(vec![], vec![("log", Value::from(i))]));
    }
    let (t, configs) = build(s, &["log"], steps).await?;
    let seed = Some(Value::delta_snapshot(Value::Int(0)));
    let got = history(s, &configs[3], &["log"]).await?;
    let want = expect(vec![(
        "log",
        (1..=2).map(|i| int_write(i, "log", 0)).collect(),
        seed.clone(),
    )]);
    ensure_eq!(got, want, "target = step 3");
    let got = history(s, &generate_config(&t), &["log"]).await?;
    let want = expect(vec![("log", (1..=3).map(|i| int_write(i, "log", 0)).collect(), seed)]);
    ensure_eq!(got, want, "target = latest");
    Ok(())
}

/// Within one checkpoint, writes come in (task_path, task_id, idx) order.
pub async fn delta_channel_history_writes_sorted_within_checkpoint(s: &dyn CheckpointSaver) -> CheckResult {
    let steps = vec![
        step(vec![("log", Value::delta_snapshot(Value::Int(0)))], vec![]),
        step(vec![], vec![]),
        step(vec![], vec![]),
    ];
    let (t, configs) = build(s, &["log"], steps).await?;
    let at = &configs[1];
    put_writes(
        s,
        at,
        &[
            ("log", Value::from("z1")),
            ("x", Value::Int(0)),
            ("log", Value::from("z2")),
        ],
        "tz",
        "~p, b",
    )
    .await?;
    put_writes(s, at, &[("log", Value::from("late"))], "t0", "~p, c").await?;
    put_writes(s, at, &[("log", Value::from("first"))], "tq", "").await?;
    put_writes(s, at, &[("log", Value::from("a"))], "ta", "~p, b").await?;
    let got = history(s, &generate_config(&t), &["log"]).await?;
    let want = expect(vec![(
        "log",
        vec![
            pw("tq", "log", "first"),
            pw("ta", "log", "a").with_task_path("~p, b"),
            pw("tz", "log", "z1").with_task_path("~p, b"),
            pw("tz", "log", "z2").with_task_path("~p, b").with_idx(2),
            pw("t0", "log", "late").with_task_path("~p, c"),
        ],
        Some(Value::delta_snapshot(Value::Int(0))),
    )]);
    ensure_eq!(got, want, "history of log");
    Ok(())
}

/// A cycle of parent links ends the walk (no seed) instead of looping.
pub async fn delta_channel_history_parent_cycle_terminates(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut a = generate_checkpoint();
    let mut b = generate_checkpoint();
    a.channel_versions = channel_versions(&[("log", ChannelVersion::Int(1))]);
    b.channel_versions = channel_versions(&[("log", ChannelVersion::Int(2))]);
    let a_cfg = put_all(
        s,
        &generate_config(&t).with_checkpoint_id(b.id.clone()),
        &a,
        &generate_metadata("loop", 0),
    )
    .await?;
    let b_cfg = put_all(s, &a_cfg, &b, &generate_metadata("loop", 1)).await?;
    put_writes(s, &a_cfg, &[("log", Value::from("a"))], "ta", "").await?;
    put_writes(s, &b_cfg, &[("log", Value::from("b"))], "tb", "").await?;
    let channels = ["log".to_owned()];
    let call = s.get_delta_channel_history(&b_cfg, &channels);
    let got = match within(Duration::from_secs(30), call).await {
        Some(result) => result?,
        None => {
            return Err(CheckFailure::new(
                "get_delta_channel_history did not return within 30s on a parent cycle",
            ))
        }
    };
    let log = got.get("log");
    ensure!(
        log.is_some_and(|h| h.seed.is_none()),
        "history on a parent cycle: {got:?}"
    );
    Ok(())
}

/// `fut`'s output, or `None` when `limit` passes first (timed by a helper
/// thread, so no runtime timer is needed).
async fn within<T>(limit: Duration, fut: impl Future<Output = T>) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let _ = tx.send(());
    });
    let fut = std::pin::pin!(fut);
    match select(fut, rx).await {
        Either::Left((out, _)) => Some(out),
        Either::Right(_) => None,
    }
}
