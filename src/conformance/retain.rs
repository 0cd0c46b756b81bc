//! Checks of [`CheckpointSaver::retain`]: one per rule of a
//! [`RetentionPolicy`] (see `docs/design.md`, *Retention*). Every check
//! names its own threads, so it never touches another check's data.

use std::time::Duration;

use super::*;
use crate::checkpoint::channels::INTERRUPT;
use crate::error::Error;
use crate::fence::Fence;
use crate::retention::{RetainOptions, RetentionPolicy, RetentionReport};

const OLD_TS: &str = "2000-01-01T00:00:00+00:00";
const DAY: Duration = Duration::from_secs(86_400);

async fn retain(
    s: &dyn CheckpointSaver,
    policy: &RetentionPolicy,
    threads: &[&str],
) -> Result<RetentionReport, CheckFailure> {
    let options = RetainOptions::default().threads(threads.iter().copied()).batch(2);
    Ok(s.retain(policy, options).await?)
}

/// The ids `list` yields for (thread, root namespace), oldest first.
async fn left(s: &dyn CheckpointSaver, thread: &str) -> Result<Vec<String>, CheckFailure> {
    let mut ids = list_ids(s, Some(generate_config(thread)), ListOptions::default()).await?;
    ids.reverse();
    Ok(ids)
}

/// `put_chain` with `ts` set per checkpoint by `ts(i)`.
async fn chain_with_ts(
    s: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    n: i64,
    ts: impl Fn(i64) -> String,
) -> Result<Vec<CheckpointConfig>, CheckFailure> {
    let mut out = Vec::new();
    let mut parent = config.clone();
    for i in 0..n {
        let mut cp = checkpoint_with(&[("step", Value::Int(i))], &[("step", ChannelVersion::Int(i + 1))]);
        cp.ts = ts(i);
        parent = put_all(s, &parent, &cp, &generate_metadata("loop", i)).await?;
        out.push(parent.clone());
    }
    Ok(out)
}

/// `keep_last(n)` keeps the newest n with their writes; the oldest kept
/// forgets its removed parent; the removed go with their writes.
pub async fn retain_keep_last(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let c = put_chain(s, &generate_config(&t), 5).await?;
    for (i, cfg) in c.iter().enumerate() {
        put_writes(s, cfg, &[("ch", Value::Int(i as i64))], "task1", "").await?;
    }
    let report = retain(s, &RetentionPolicy::new().keep_last(2), &[&t]).await?;
    ensure_eq!(left(s, &t).await?, ids(&c[3..]), "checkpoints left");
    ensure_eq!(
        (
            report.checkpoints_removed,
            report.writes_removed,
            report.threads_scanned
        ),
        (3, 3, 1),
        "report"
    );
    ensure!(
        get(s, &c[3]).await?.parent_config.is_none(),
        "the oldest kept still has a parent"
    );
    ensure_eq!(
        get(s, &c[4]).await?.parent_config.map(|p| id_of(&p)),
        Some(id_of(&c[3])),
        "the newest kept's parent"
    );
    ensure_eq!(
        get(s, &c[3]).await?.pending_writes,
        vec![pw("task1", "ch", 3i64)],
        "kept writes"
    );
    ensure!(s.get_tuple(&c[0]).await?.is_none(), "a removed checkpoint reads back");
    // a second run removes nothing
    let again = retain(s, &RetentionPolicy::new().keep_last(2), &[&t]).await?;
    ensure_eq!(again.checkpoints_removed, 0, "second run");
    Ok(())
}

/// `keep_newer_than` keeps what is young by `ts`; the latest stays however
/// old.
pub async fn retain_keep_newer_than(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let now = generate_checkpoint().ts;
    let c = chain_with_ts(s, &generate_config(&t), 5, |i| {
        if i == 1 || i == 2 {
            now.clone()
        } else {
            OLD_TS.to_owned()
        }
    })
    .await?;
    retain(s, &RetentionPolicy::new().keep_newer_than(DAY), &[&t]).await?;
    ensure_eq!(
        left(s, &t).await?,
        ids(&c[1..])
            .into_iter()
            .filter(|i| *i != id_of(&c[3]))
            .collect::<Vec<_>>(),
        "left"
    );
    Ok(())
}

/// Each namespace keeps its own latest.
pub async fn retain_keeps_latest_per_namespace(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let root = put_chain(s, &generate_config(&t), 3).await?;
    let child = put_chain(s, &generate_config(&t).with_ns("child:1"), 3).await?;
    retain(
        s,
        &RetentionPolicy::new().keep_last(0).delete_idle_threads(DAY * 365),
        &[&t],
    )
    .await?;
    ensure_eq!(left(s, &t).await?, vec![id_of(&root[2])], "root namespace");
    let in_child = list_ids(s, Some(generate_config(&t).with_ns("child:1")), ListOptions::default()).await?;
    ensure_eq!(in_child, vec![id_of(&child[2])], "child namespace");
    Ok(())
}

/// A checkpoint with an interrupt stays with its writes, as does the
/// latest with its pending writes.
pub async fn retain_keeps_interrupts_and_pending_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let c = put_chain(s, &generate_config(&t), 4).await?;
    put_writes(s, &c[1], &[(INTERRUPT, Value::from("question?"))], "task1", "").await?;
    put_writes(s, &c[3], &[("ch", Value::from("pending"))], "task2", "").await?;
    retain(s, &RetentionPolicy::new().keep_last(1), &[&t]).await?;
    ensure_eq!(left(s, &t).await?, vec![id_of(&c[1]), id_of(&c[3])], "left");
    ensure_eq!(
        get(s, &c[1]).await?.pending_writes,
        vec![pw("task1", INTERRUPT, "question?")],
        "the interrupt"
    );
    ensure_eq!(
        get(s, &c[3]).await?.pending_writes,
        vec![pw("task2", "ch", "pending")],
        "pending"
    );
    ensure!(
        get(s, &c[3]).await?.parent_config.is_none(),
        "the latest's removed parent"
    );
    Ok(())
}

/// A fork point stays with the first checkpoint of each branch.
pub async fn retain_keeps_fork_points(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let c = put_chain(s, &generate_config(&t), 4).await?;
    // a second branch from c[1]
    let fork = put_all(s, &c[1], &generate_checkpoint(), &generate_metadata("fork", 2)).await?;
    let tip = put_all(s, &fork, &generate_checkpoint(), &generate_metadata("loop", 3)).await?;
    retain(s, &RetentionPolicy::new().keep_last(1), &[&t]).await?;
    ensure_eq!(
        left(s, &t).await?,
        vec![id_of(&c[1]), id_of(&c[2]), id_of(&fork), id_of(&tip)],
        "left"
    );
    ensure!(
        get(s, &c[1]).await?.parent_config.is_none(),
        "the fork point's removed parent"
    );
    ensure_eq!(
        get(s, &c[2]).await?.parent_config.map(|p| id_of(&p)),
        Some(id_of(&c[1])),
        "branch 1"
    );
    ensure_eq!(
        get(s, &fork).await?.parent_config.map(|p| id_of(&p)),
        Some(id_of(&c[1])),
        "branch 2"
    );
    Ok(())
}

/// Marked checkpoints stay (`pinned` by default, any key set); `null` and
/// `false` do not mark.
pub async fn retain_keeps_marked(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut parent = generate_config(&t);
    let mut c = Vec::new();
    let marks = [
        Some(("pinned", Value::Bool(true))),
        Some(("pinned", Value::Bool(false))),
        Some(("pinned", Value::Nil)),
        Some(("keep_me", Value::from("yes"))),
        None,
    ];
    for (i, mark) in marks.into_iter().enumerate() {
        let mut md = generate_metadata("loop", i as i64);
        if let Some((k, v)) = mark {
            md.insert(k, v);
        }
        parent = put_all(s, &parent, &generate_checkpoint(), &md).await?;
        c.push(parent.clone());
    }
    let t2 = new_thread_id();
    let copy = {
        let mut p = generate_config(&t2);
        let mut out = Vec::new();
        for (i, k) in ["keep_me", "", ""].iter().enumerate() {
            let mut md = generate_metadata("loop", i as i64);
            if !k.is_empty() {
                md.insert(*k, true);
            }
            p = put_all(s, &p, &generate_checkpoint(), &md).await?;
            out.push(p.clone());
        }
        out
    };
    retain(s, &RetentionPolicy::new().keep_last(1), &[&t]).await?;
    ensure_eq!(left(s, &t).await?, vec![id_of(&c[0]), id_of(&c[4])], "default key");
    retain(s, &RetentionPolicy::new().keep_last(1).mark_key("keep_me"), &[&t2]).await?;
    ensure_eq!(
        left(s, &t2).await?,
        vec![id_of(&copy[0]), id_of(&copy[2])],
        "custom key"
    );
    Ok(())
}

/// The ancestors a kept checkpoint's delta channel needs stay, with their
/// writes, and its delta history reads the same.
pub async fn retain_keeps_delta_history(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, old, chain) = prune::delta_thread(s).await?;
    let head = chain.last().cloned().unwrap_or_else(|| old.clone());
    let channels = ["log".to_owned()];
    let before = if s.capabilities().delta_channel_history {
        Some(s.get_delta_channel_history(&head, &channels).await?)
    } else {
        None
    };
    retain(s, &RetentionPolicy::new().keep_last(1), &[&t]).await?;
    ensure_eq!(left(s, &t).await?, ids(&chain), "left");
    ensure!(
        s.get_tuple(&old).await?.is_none(),
        "the checkpoint before the seed is still there"
    );
    if let Some(before) = before {
        ensure_eq!(
            s.get_delta_channel_history(&head, &channels).await?,
            before,
            "delta history"
        );
    }
    Ok(())
}

/// Values shared by version stay while a kept checkpoint names them.
pub async fn retain_keeps_values_of_kept_checkpoints(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let v1 = ChannelVersion::Int(1);
    let mut parent = generate_config(&t);
    let mut c = Vec::new();
    for step in 0..4i64 {
        // "fixed" is written once and named by every later checkpoint
        let mut values = vec![("step", Value::Int(step))];
        if step == 0 {
            values.push(("fixed", Value::from("kept")));
        }
        let cp = checkpoint_with(
            &values,
            &[("fixed", v1.clone()), ("step", ChannelVersion::Int(step + 1))],
        );
        let new: ChannelVersions = if step == 0 {
            cp.channel_versions.clone()
        } else {
            channel_versions(&[("step", ChannelVersion::Int(step + 1))])
        };
        parent = s.put(&parent, &cp, &generate_metadata("loop", step), &new).await?;
        c.push(parent.clone());
    }
    retain(s, &RetentionPolicy::new().keep_last(1), &[&t]).await?;
    let latest = get(s, &c[3]).await?;
    ensure_eq!(
        latest.checkpoint.channel_values.get("fixed"),
        Some(&Value::from("kept")),
        "shared value"
    );
    ensure_eq!(
        latest.checkpoint.channel_values.get("step"),
        Some(&Value::Int(3)),
        "own value"
    );
    Ok(())
}

/// An idle thread goes whole (opt-in); a live one is untouched.
pub async fn retain_deletes_idle_threads(s: &dyn CheckpointSaver) -> CheckResult {
    let (idle, live) = (new_thread_id(), new_thread_id());
    let now = generate_checkpoint().ts;
    let gone = chain_with_ts(s, &generate_config(&idle), 3, |_| OLD_TS.to_owned()).await?;
    put_writes(s, &gone[2], &[("ch", Value::Int(1))], "task1", "").await?;
    chain_with_ts(s, &generate_config(&idle).with_ns("child:1"), 2, |_| OLD_TS.to_owned()).await?;
    let kept = chain_with_ts(s, &generate_config(&live), 3, |i| {
        if i == 2 {
            now.clone()
        } else {
            OLD_TS.into()
        }
    })
    .await?;
    let policy = RetentionPolicy::new().delete_idle_threads(DAY);
    let report = retain(s, &policy, &[&idle, &live]).await?;
    ensure_eq!(
        (
            report.threads_deleted,
            report.checkpoints_removed,
            report.writes_removed
        ),
        (1, 5, 1),
        "report"
    );
    ensure!(
        delete_thread::snapshot(s, &idle).await?.is_empty(),
        "the idle thread is still there"
    );
    ensure_eq!(left(s, &live).await?, ids(&kept), "the live thread");
    Ok(())
}

/// A policy that contradicts itself, or bad options, are refused before
/// anything is removed.
pub async fn retain_refuses_contradictory_policy(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let c = put_chain(s, &generate_config(&t), 3).await?;
    for policy in [
        RetentionPolicy::new(),
        RetentionPolicy::new().keep_last(0),
        RetentionPolicy::new().keep_newer_than(Duration::ZERO),
        RetentionPolicy::new().keep_newer_than(DAY * 2).delete_idle_threads(DAY),
    ] {
        match retain(s, &policy, &[&t]).await {
            Err(f) if f.to_string().contains("invalid retention policy") => {}
            other => return Err(CheckFailure::new(format!("{policy:?}: {other:?}"))),
        }
        match s.retain(&policy, RetainOptions::default().threads([t.as_str()])).await {
            Err(Error::InvalidPolicy(_)) => {}
            other => return Err(CheckFailure::new(format!("{policy:?}: {other:?}"))),
        }
    }
    let bad = RetainOptions::default().threads([t.as_str()]).batch(0);
    ensure!(
        matches!(
            s.retain(&RetentionPolicy::new().keep_last(1), bad).await,
            Err(Error::InvalidInput { .. })
        ),
        "batch 0 accepted"
    );
    ensure_eq!(left(s, &t).await?, ids(&c), "left");
    Ok(())
}

/// A dry run writes nothing and reports what the run then removes.
pub async fn retain_dry_run_writes_nothing(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let c = put_chain(s, &generate_config(&t), 5).await?;
    put_writes(s, &c[0], &[("ch", Value::Int(0)), ("ch2", Value::Int(0))], "task1", "").await?;
    let policy = RetentionPolicy::new().keep_last(2);
    let before = delete_thread::snapshot(s, &t).await?;
    let options = RetainOptions::default().threads([t.as_str()]).dry_run(true);
    let dry = s.retain(&policy, options).await?;
    ensure_eq!(delete_thread::snapshot(s, &t).await?, before, "thread after a dry run");
    ensure!(dry.dry_run, "the report does not say dry run");
    let real = retain(s, &policy, &[&t]).await?;
    ensure_eq!(
        (dry.checkpoints_removed, dry.writes_removed),
        (real.checkpoints_removed, real.writes_removed),
        "dry run against the run"
    );
    ensure_eq!((real.checkpoints_removed, real.writes_removed), (3, 2), "the run");
    Ok(())
}

/// A fenced saver retains the threads it holds, each batch checked
/// against its lease by the store: a writer fenced out of a thread (another
/// took it after its lease ran out) is refused with `Fenced`, nothing
/// removed; the holder's run removes; over all threads, a fenced run
/// touches only the threads its writer took.
pub async fn fencing_retain_checks_the_lease(s: &dyn CheckpointSaver) -> CheckResult {
    let Some(store) = s.as_fenceable() else {
        return Err(CheckFailure::new("the saver has no fencing (as_fenceable is None)"));
    };
    let (t, other) = (new_thread_id(), new_thread_id());
    let (name_a, name_b) = (format!("{t}-a"), format!("{t}-b"));
    let a = store.fenced_saver(Fence::new(name_a.clone(), Duration::from_millis(100)))?;
    let b = store.fenced_saver(Fence::new(name_b, Duration::from_secs(30)))?;
    ensure!(a.capabilities().retain, "a fenced saver does not declare retain");
    let c = put_chain(a.as_ref(), &generate_config(&t), 4).await?;
    let o = put_chain(s, &generate_config(&other), 3).await?;
    ensure!(
        super::fencing::take_over(b.as_ref(), &t).await?,
        "another writer takes the thread once a 100 ms lease expired"
    );
    let policy = RetentionPolicy::new().keep_last(1);
    let stale = a.retain(&policy, RetainOptions::default().threads([t.as_str()])).await;
    ensure!(
        matches!(&stale, Err(Error::Fenced { writer, .. }) if *writer == name_a),
        "the fenced-out writer's retain: {stale:?}"
    );
    ensure_eq!(left(s, &t).await?, ids(&c), "left after the refused run");
    let run = b.retain(&policy, RetainOptions::default().batch(2)).await?;
    ensure_eq!(run.checkpoints_removed, 3, "the holder's run over its threads");
    ensure_eq!(left(s, &t).await?, ids(&c[3..]), "left after the holder's run");
    ensure_eq!(left(s, &other).await?, ids(&o), "a thread the holder never took");
    Ok(())
}
