//! `copy SRC DST`: threads from one store to another, ids, parents,
//! namespaces, metadata, values and pending writes (with task path and
//! index) preserved.
//!
//! Checkpoints are read with the saver API and written with `put`, every
//! channel version passed as new so each value is stored as it was read
//! and nothing is filled from a parent. The API does not return a write's
//! task path and index; they are read from the source's tables and
//! reproduced with `put_writes`, whose index is the position in the call
//! (or a special channel's fixed index): a gap in a task's indexes is
//! filled with a write that cannot survive (a regular index that already
//! exists keeps its first value; a special channel is overwritten by the
//! task's real write to it afterwards).

use std::collections::{HashMap, HashSet, VecDeque};

use checkpointer::checkpoint::special_write_idx;
use checkpointer::{CheckpointConfig, CheckpointSaver, ListOptions, PendingWrite, Value};
use futures::StreamExt;
use indicatif::ProgressBar;
use serde_json::json;

use super::select_threads;
use crate::args::CopyArgs;
use crate::error::{CliError, CliResult, Context};
use crate::output::{emit, emit_json, Ui};
use crate::store::{Access, Store, StoreUrl, WriteKey};

pub async fn run(args: CopyArgs, ui: Ui) -> CliResult {
    let src_url = StoreUrl::parse(&args.src)?;
    let dst_url = StoreUrl::parse(&args.dst)?;
    let src = Store::open(&src_url, Access::Read).await?;
    let dst = match Store::open(&dst_url, Access::Create).await {
        Ok(d) => d,
        Err(e) => return super::finish(src, Err(e)).await,
    };
    // the same store under two names: --overwrite would delete the source
    let same = match (src.identity().await, dst.identity().await) {
        (Ok(a), Ok(b)) => Ok(a.is_some() && a == b),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let same = match same {
        Ok(true) => Err(CliError::usage(format!(
            "{} and {} are the same store",
            src_url.display(),
            dst_url.display()
        ))),
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    };
    if let Err(e) = same {
        let out = super::finish(dst, Err(e)).await;
        return super::finish(src, out).await;
    }
    let out = body(&src, &dst, &args, ui).await;
    let out = super::finish(dst, out).await;
    let report = super::finish(src, out).await?;
    for w in &report.warnings {
        ui.note(&format!("warning: {w}"));
    }
    if ui.json {
        return emit_json(&json!({
            "source": src_url.display(),
            "target": dst_url.display(),
            "threads": report.threads.iter().map(|t| json!({
                "thread_id": t.thread_id,
                "checkpoints": t.checkpoints,
                "writes": t.writes,
                "replaced": t.replaced,
            })).collect::<Vec<_>>(),
            "checkpoints": report.threads.iter().map(|t| t.checkpoints).sum::<usize>(),
            "writes": report.threads.iter().map(|t| t.writes).sum::<usize>(),
            "warnings": report.warnings,
        }));
    }
    let replaced = report.threads.iter().filter(|t| t.replaced).count();
    emit(&format!(
        "copied {} thread(s) ({} checkpoints, {} writes) from {} to {}{}\n",
        report.threads.len(),
        report.threads.iter().map(|t| t.checkpoints).sum::<usize>(),
        report.threads.iter().map(|t| t.writes).sum::<usize>(),
        src_url.display(),
        dst_url.display(),
        if replaced > 0 {
            format!(", {replaced} replaced")
        } else {
            String::new()
        }
    ))
}

struct Copied {
    thread_id: String,
    checkpoints: usize,
    writes: usize,
    replaced: bool,
}

struct Report {
    threads: Vec<Copied>,
    warnings: Vec<String>,
}

async fn body(src: &Store, dst: &Store, args: &CopyArgs, ui: Ui) -> CliResult<Report> {
    let threads = select_threads(src, &args.thread).await?;
    let mut existing = HashSet::new();
    for t in &threads {
        if dst.thread_exists(t).await? {
            existing.insert(t.clone());
        }
    }
    if !existing.is_empty() && !args.overwrite {
        let mut names: Vec<String> = threads
            .iter()
            .filter(|t| existing.contains(*t))
            .map(|t| format!("{t:?}"))
            .collect();
        let more = names.len().saturating_sub(5);
        names.truncate(5);
        let list = names.join(", ")
            + &if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
        return Err(
            CliError::conflict(format!("{} already has thread(s) {list}", dst.name()))
                .with_hint("--overwrite replaces them (their checkpoints in the target are deleted first)"),
        );
    }
    let bar = ui.progress(Some(threads.len() as u64), "copying");
    let mut report = Report {
        threads: Vec::new(),
        warnings: Vec::new(),
    };
    for thread in &threads {
        bar.set_message(thread.clone());
        let replaced = existing.contains(thread);
        if replaced {
            dst.saver
                .delete_thread(thread)
                .await
                .context(format!("cannot delete thread {thread:?} of {}", dst.name()))?;
        }
        match copy_thread(src, dst, thread, &bar, &mut report.warnings).await {
            Ok((checkpoints, writes)) => report.threads.push(Copied {
                thread_id: thread.clone(),
                checkpoints,
                writes,
                replaced,
            }),
            Err(mut e) => {
                bar.abandon();
                // leave no half-copied thread behind
                let cleaned = dst.saver.delete_thread(thread).await.is_ok();
                e.message.push_str(if cleaned {
                    " (the partial copy of the thread was removed from the target)"
                } else {
                    " (a partial copy of the thread may remain in the target)"
                });
                return Err(e);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(report)
}

async fn copy_thread(
    src: &Store,
    dst: &Store,
    thread: &str,
    bar: &ProgressBar,
    warnings: &mut Vec<String>,
) -> CliResult<(usize, usize)> {
    let keys = src.write_keys(thread).await?;
    let stored_writes: usize = keys.as_ref().map_or(0, |k| k.values().map(Vec::len).sum());
    let (mut checkpoints, mut writes) = (0, 0);
    let read = || format!("cannot read thread {thread:?} of {}", src.name());
    let written = || format!("cannot write thread {thread:?} to {}", dst.name());
    let mut stream = src
        .saver
        .list(Some(CheckpointConfig::all_namespaces(thread)), ListOptions::default());
    while let Some(t) = stream.next().await {
        let t = t.context(read())?;
        let ns = t.config.ns().to_owned();
        let id = t.config.checkpoint_id.clone().unwrap_or_default();
        let mut config = CheckpointConfig::new(thread).with_ns(&ns);
        if let Some(parent) = t.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()) {
            config = config.with_checkpoint_id(parent);
        }
        let saved = dst
            .saver
            .put(&config, &t.checkpoint, &t.metadata, &t.checkpoint.channel_versions)
            .await
            .context(written())?;
        let row_keys = keys
            .as_ref()
            .map(|k| k.get(&(ns.clone(), id.clone())).map_or(&[][..], Vec::as_slice));
        let plan = plan_writes(&t.pending_writes, row_keys);
        if let Some(w) = plan.warning {
            warnings.push(format!("thread {thread:?}, checkpoint {id}: {w}"));
        }
        put_calls(dst.saver.as_ref(), &saved, plan.calls)
            .await
            .context(written())?;
        checkpoints += 1;
        writes += t.pending_writes.len();
        if checkpoints % 16 == 0 {
            bar.set_message(format!("{thread} ({checkpoints} checkpoints)"));
        }
    }
    if keys.is_some() && stored_writes > writes {
        warnings.push(format!(
            "thread {thread:?}: {} stored write(s) belong to no checkpoint and were not copied",
            stored_writes - writes
        ));
    }
    Ok((checkpoints, writes))
}

async fn put_calls(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    calls: Vec<Call>,
) -> checkpointer::Result<()> {
    for call in calls {
        saver
            .put_writes(config, &call.writes, &call.task_id, &call.task_path)
            .await?;
    }
    Ok(())
}

/// One `put_writes` call.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    task_id: String,
    task_path: String,
    writes: Vec<(String, Value)>,
}

#[derive(Debug)]
struct Plan {
    calls: Vec<Call>,
    warning: Option<String>,
}

/// A write with its stored key.
struct Row<'a> {
    key: WriteKey,
    value: &'a Value,
}

/// The `put_writes` calls that store `pending` with the task paths and
/// indexes of `keys` (the source's rows of this checkpoint; `None` when the
/// source cannot tell, then paths are empty and indexes the positions).
fn plan_writes(pending: &[PendingWrite], keys: Option<&[WriteKey]>) -> Plan {
    let mut warning = None;
    // pair each write with its row: the saver returns them in
    // (task_path, task_id, idx) order, so the n-th write of a (task, channel)
    // is its n-th row in that order
    let mut queues: HashMap<(&str, &str), VecDeque<&WriteKey>> = HashMap::new();
    if let Some(keys) = keys {
        let mut sorted: Vec<&WriteKey> = keys.iter().collect();
        sorted.sort_by(|a, b| (&a.task_path, &a.task_id, a.idx).cmp(&(&b.task_path, &b.task_id, b.idx)));
        for k in sorted {
            queues.entry((&k.task_id, &k.channel)).or_default().push_back(k);
        }
    }
    let mut next_position: HashMap<&str, i64> = HashMap::new();
    let mut rows: Vec<Row<'_>> = Vec::with_capacity(pending.len());
    for w in pending {
        let found = queues
            .get_mut(&(w.task_id.as_str(), w.channel.as_str()))
            .and_then(VecDeque::pop_front);
        let key = match found {
            Some(k) => k.clone(),
            None => {
                if keys.is_some() {
                    warning = Some("a write has no stored row; its task path and index are guessed".to_owned());
                }
                let position = next_position.entry(&w.task_id).or_insert(0);
                let idx = special_write_idx(&w.channel).unwrap_or(*position);
                if idx >= 0 {
                    *position += 1;
                }
                WriteKey {
                    task_id: w.task_id.clone(),
                    task_path: String::new(),
                    idx,
                    channel: w.channel.clone(),
                }
            }
        };
        rows.push(Row { key, value: &w.value });
    }
    let mut tasks: Vec<&str> = Vec::new();
    for r in &rows {
        if !tasks.contains(&r.key.task_id.as_str()) {
            tasks.push(&r.key.task_id);
        }
    }
    let mut calls = Vec::new();
    for task in tasks {
        let task_rows: Vec<&Row<'_>> = rows.iter().filter(|r| r.key.task_id == task).collect();
        match task_calls(task, &task_rows) {
            Some(c) => calls.extend(c),
            None => {
                warning = Some(format!(
                    "the write indexes of task {task} cannot be reproduced; its writes keep their order"
                ));
                calls.extend(compact_calls(task, &task_rows));
            }
        }
    }
    Plan { calls, warning }
}

/// The calls that reproduce one task's rows exactly, or `None`.
fn task_calls(task: &str, rows: &[&Row<'_>]) -> Option<Vec<Call>> {
    let (mut regular, special): (Vec<&Row<'_>>, Vec<&Row<'_>>) = rows.iter().partition(|r| r.key.idx >= 0);
    regular.sort_by_key(|r| r.key.idx);
    if special
        .iter()
        .any(|r| special_write_idx(&r.key.channel) != Some(r.key.idx))
        || regular.iter().any(|r| special_write_idx(&r.key.channel).is_some())
    {
        return None;
    }
    let filler_special = special.first().map(|r| r.key.channel.clone());
    // regular rows by task path, paths in the order of their first index
    let mut paths: Vec<&str> = Vec::new();
    for r in &regular {
        if !paths.contains(&r.key.task_path.as_str()) {
            paths.push(&r.key.task_path);
        }
    }
    let mut written: HashMap<i64, String> = HashMap::new();
    let mut calls = Vec::new();
    for path in paths {
        let group: HashMap<i64, &Row<'_>> = regular
            .iter()
            .filter(|r| r.key.task_path == path)
            .map(|r| (r.key.idx, *r))
            .collect();
        let max = group.keys().copied().max()?;
        let mut writes = Vec::new();
        for p in 0..=max {
            if let Some(r) = group.get(&p) {
                writes.push((r.key.channel.clone(), r.value.clone()));
            } else if let Some(channel) = written.get(&p) {
                // the index exists: this write is ignored (first value kept)
                writes.push((channel.clone(), Value::Nil));
            } else {
                // overwritten by the task's real write to that special channel
                writes.push((filler_special.clone()?, Value::Nil));
            }
        }
        for (idx, r) in group {
            written.insert(idx, r.key.channel.clone());
        }
        calls.push(Call {
            task_id: task.to_owned(),
            task_path: path.to_owned(),
            writes,
        });
    }
    for r in special {
        calls.push(Call {
            task_id: task.to_owned(),
            task_path: r.key.task_path.clone(),
            writes: vec![(r.key.channel.clone(), r.value.clone())],
        });
    }
    Some(calls)
}

/// One call per task path with the regular writes in index order, then one
/// per special write: order kept, indexes compacted.
fn compact_calls(task: &str, rows: &[&Row<'_>]) -> Vec<Call> {
    let mut sorted: Vec<&Row<'_>> = rows.to_vec();
    sorted.sort_by_key(|r| (r.key.idx < 0, r.key.idx));
    let mut calls: Vec<Call> = Vec::new();
    for r in sorted {
        let special = special_write_idx(&r.key.channel).is_some();
        match calls.last_mut() {
            Some(c)
                if !special
                    && c.task_path == r.key.task_path
                    && !c.writes.iter().any(|(ch, _)| special_write_idx(ch).is_some()) =>
            {
                c.writes.push((r.key.channel.clone(), r.value.clone()))
            }
            _ => calls.push(Call {
                task_id: task.to_owned(),
                task_path: r.key.task_path.clone(),
                writes: vec![(r.key.channel.clone(), r.value.clone())],
            }),
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(task: &str, path: &str, idx: i64, channel: &str) -> WriteKey {
        WriteKey {
            task_id: task.into(),
            task_path: path.into(),
            idx,
            channel: channel.into(),
        }
    }

    fn write(task: &str, channel: &str, v: i64) -> PendingWrite {
        PendingWrite::new(task, channel, Value::Int(v))
    }

    /// Replays calls as the contract stores them: idx = position or the
    /// special index; regular keep-first, special overwrite.
    fn replay(calls: &[Call]) -> Vec<(String, String, i64, String, Value)> {
        let mut rows: Vec<(String, String, i64, String, Value)> = Vec::new();
        for c in calls {
            for (pos, (ch, v)) in c.writes.iter().enumerate() {
                let idx = special_write_idx(ch).unwrap_or(pos as i64);
                let at = rows.iter().position(|r| r.1 == c.task_id && r.2 == idx);
                let row = (c.task_path.clone(), c.task_id.clone(), idx, ch.clone(), v.clone());
                match at {
                    Some(i) if special_write_idx(ch).is_some() => rows[i] = row,
                    Some(_) => {}
                    None => rows.push(row),
                }
            }
        }
        rows.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
        rows
    }

    #[test]
    fn contiguous_writes_are_one_call() {
        let pending = [write("t", "a", 1), write("t", "b", 2)];
        let keys = [key("t", "p", 0, "a"), key("t", "p", 1, "b")];
        let plan = plan_writes(&pending, Some(&keys));
        assert_eq!(plan.calls.len(), 1);
        assert_eq!(plan.calls[0].task_path, "p");
        assert!(plan.warning.is_none());
    }

    #[test]
    fn gaps_and_special_writes_are_reproduced() {
        // one original call [a, __interrupt__, b]: idx 0, -3, 2
        let pending = [write("t", "__interrupt__", 9), write("t", "a", 1), write("t", "b", 2)];
        let keys = [
            key("t", "p", -3, "__interrupt__"),
            key("t", "p", 0, "a"),
            key("t", "p", 2, "b"),
        ];
        let plan = plan_writes(&pending, Some(&keys));
        assert!(plan.warning.is_none(), "{:?}", plan.warning);
        let rows = replay(&plan.calls);
        let got: Vec<(i64, &str, &Value)> = rows.iter().map(|r| (r.2, r.3.as_str(), &r.4)).collect();
        assert_eq!(
            got,
            vec![
                (-3, "__interrupt__", &Value::Int(9)),
                (0, "a", &Value::Int(1)),
                (2, "b", &Value::Int(2))
            ]
        );
    }

    #[test]
    fn a_task_with_two_paths_keeps_both() {
        let pending = [write("t", "a", 1), write("t", "b", 2)];
        let keys = [key("t", "p1", 0, "a"), key("t", "p2", 1, "b")];
        let plan = plan_writes(&pending, Some(&keys));
        let rows = replay(&plan.calls);
        let got: Vec<(&str, i64, &str)> = rows.iter().map(|r| (r.0.as_str(), r.2, r.3.as_str())).collect();
        assert_eq!(got, vec![("p1", 0, "a"), ("p2", 1, "b")]);
    }

    #[test]
    fn an_unfillable_gap_keeps_the_order_and_warns() {
        let pending = [write("t", "a", 1), write("t", "b", 2)];
        let keys = [key("t", "", 0, "a"), key("t", "", 5, "b")];
        let plan = plan_writes(&pending, Some(&keys));
        assert!(plan.warning.is_some());
        let rows = replay(&plan.calls);
        let got: Vec<(i64, &str)> = rows.iter().map(|r| (r.2, r.3.as_str())).collect();
        assert_eq!(got, vec![(0, "a"), (1, "b")]);
    }

    #[test]
    fn without_keys_positions_are_used() {
        let pending = [write("t", "a", 1), write("t", "__error__", 3), write("u", "b", 2)];
        let plan = plan_writes(&pending, None);
        assert!(plan.warning.is_none());
        let rows = replay(&plan.calls);
        let got: Vec<(&str, i64, &str)> = rows.iter().map(|r| (r.1.as_str(), r.2, r.3.as_str())).collect();
        assert_eq!(got, vec![("t", -1, "__error__"), ("t", 0, "a"), ("u", 0, "b")]);
    }
}
