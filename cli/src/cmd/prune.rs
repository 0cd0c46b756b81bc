//! `prune URL --keep-latest|--delete`: thin or remove threads.

use checkpointer::PruneStrategy;
use serde_json::json;

use super::{finish, open, select_threads};
use crate::args::PruneArgs;
use crate::error::{CliResult, Context};
use crate::output::{emit, emit_json, Ui};
use crate::store::{Access, Store};

/// Threads pruned per call.
const BATCH: usize = 32;

struct Pruned {
    thread_id: String,
    before: u64,
    after: u64,
}

pub async fn run(args: PruneArgs, ui: Ui) -> CliResult {
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
