//! `prune URL --keep-latest|--delete|POLICY [--dry-run]`: thin or remove
//! threads, or apply a retention policy (a dry run prints what would go
//! and the bytes it frees, and opens the store read-only).

use checkpointer::retention::{RetentionPolicy, RetentionReport};
use checkpointer::PruneStrategy;
use serde_json::json;

use super::{finish, open, retention, select_threads, stats};
use crate::args::PruneArgs;
use crate::error::{CliResult, Context};
use crate::output::{emit, emit_json, human_bytes, Ui};
use crate::store::{Access, Store};

/// Threads pruned per call.
const BATCH: usize = 32;

struct Pruned {
    thread_id: String,
    before: u64,
    after: u64,
}

pub async fn run(args: PruneArgs, ui: Ui) -> CliResult {
    if let Some(policy) = retention::policy_of(&args.policy)? {
        return if args.dry_run {
            dry_run(&args, &policy, ui).await
        } else {
            retain(&args, &policy, ui).await
        };
    }
    let strategy = if args.delete {
        PruneStrategy::Delete
    } else {
        PruneStrategy::KeepLatest
    };
    let store = open(&args.url, Access::Write).await?;
    let out = body(&store, &args, strategy, ui).await;
    let pruned = finish(store, out).await?;
    let removed: u64 = pruned.iter().map(|p| p.before - p.after.min(p.before)).sum();
    let name = match strategy {
        PruneStrategy::KeepLatest => "keep-latest",
        PruneStrategy::Delete => "delete",
    };
    if ui.json {
        return emit_json(&json!({
            "strategy": name,
            "threads": pruned.iter().map(|p| json!({
                "thread_id": p.thread_id,
                "checkpoints_before": p.before,
                "checkpoints_after": p.after,
            })).collect::<Vec<_>>(),
            "checkpoints_removed": removed,
        }));
    }
    emit(&format!(
        "pruned {} thread(s) ({name}): {removed} checkpoint(s) removed, {} kept\n",
        pruned.len(),
        pruned.iter().map(|p| p.after).sum::<u64>()
    ))
}

async fn count(store: &Store, thread: &str) -> CliResult<u64> {
    Ok(store.thread_namespaces(thread).await?.iter().map(|(_, n)| n).sum())
}

async fn body(store: &Store, args: &PruneArgs, strategy: PruneStrategy, ui: Ui) -> CliResult<Vec<Pruned>> {
    let threads = select_threads(store, &args.thread).await?;
    let bar = ui.progress(Some(threads.len() as u64), "pruning");
    let mut out = Vec::new();
    for batch in threads.chunks(BATCH) {
        let mut before = Vec::new();
        for t in batch {
            before.push(count(store, t).await?);
        }
        store
            .saver
            .prune(batch, strategy)
            .await
            .context(format!("cannot prune {}", store.name()))?;
        for (t, b) in batch.iter().zip(before) {
            out.push(Pruned {
                thread_id: t.clone(),
                before: b,
                after: count(store, t).await?,
            });
        }
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    Ok(out)
}

/// `--dry-run` with a policy: what would go from each thread and the bytes
/// that frees; the store is opened read-only.
async fn dry_run(args: &PruneArgs, policy: &RetentionPolicy, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Read).await?;
    let out = dry_run_body(&store, args, policy, ui).await;
    let freed = finish(store, out).await?;
    if ui.json {
        let mut v = freed.to_json(true);
        if let Some(m) = v.as_object_mut() {
            m.insert("dry_run".into(), json!(true));
        }
        return emit_json(&v);
    }
    let mut out = String::new();
    for t in &freed.threads {
        let whole = if t.whole { " (the whole thread)" } else { "" };
        out.push_str(&format!(
            "{}: {} checkpoint(s), {} write(s), {}{whole}\n",
            t.thread_id,
            t.checkpoints.len(),
            t.writes,
            human_bytes(t.bytes)
        ));
        for (ns, id) in &t.checkpoints {
            let ns = if ns.is_empty() { String::new() } else { format!("{ns} ") };
            out.push_str(&format!("  {ns}{id}\n"));
        }
    }
    out.push_str(&format!("dry run: {}; nothing was removed\n", freed.summary()));
    emit(&out)
}

async fn dry_run_body(
    store: &Store,
    args: &PruneArgs,
    policy: &RetentionPolicy,
    ui: Ui,
) -> CliResult<retention::Freed> {
    let threads = select_threads(store, &args.thread).await?;
    let bar = ui.progress(Some(threads.len() as u64), "planning");
    let mut freed = retention::Freed::default();
    for thread in &threads {
        let options = retention::options(&args.policy);
        let sizes = stats::checkpoint_sizes(store, thread).await?;
        freed.add(retention::would_free(store, thread, policy, options, &sizes).await?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(freed)
}

/// A policy applied: every thread in bounded batches, or the ones named.
async fn retain(args: &PruneArgs, policy: &RetentionPolicy, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Write).await?;
    let out = retain_body(&store, args, policy).await;
    let report = finish(store, out).await?;
    if ui.json {
        return emit_json(&json!({
            "dry_run": false,
            "threads_scanned": report.threads_scanned,
            "threads_deleted": report.threads_deleted,
            "checkpoints_scanned": report.checkpoints_scanned,
            "checkpoints_removed": report.checkpoints_removed,
            "writes_removed": report.writes_removed,
            "parents_cleared": report.parents_cleared,
            "batches": report.batches,
        }));
    }
    emit(&format!(
        "retained {} thread(s): {} checkpoint(s) and {} write(s) removed in {} batch(es), {} whole thread(s) deleted\n",
        report.threads_scanned,
        report.checkpoints_removed,
        report.writes_removed,
        report.batches,
        report.threads_deleted
    ))
}

async fn retain_body(store: &Store, args: &PruneArgs, policy: &RetentionPolicy) -> CliResult<RetentionReport> {
    let mut options = retention::options(&args.policy);
    if !args.all_threads {
        store.require_threads(&args.thread).await?;
        options = options.threads(args.thread.iter().cloned());
    }
    store
        .saver
        .retain(policy, options)
        .await
        .context(format!("cannot apply the policy to {}", store.name()))
}
