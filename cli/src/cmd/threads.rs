//! `threads URL`: threads with their checkpoint count, namespaces, latest
//! step and time.

use checkpointer::serde::render;
use checkpointer::ListThreadsOptions;
use serde_json::json;

use super::{finish, open, parse_filter, plain};
use crate::args::ThreadsArgs;
use crate::error::{CliResult, Context};
use crate::output::{emit, emit_json, Style, Table, Ui};
use crate::store::{Access, Store};

pub async fn run(args: ThreadsArgs, ui: Ui) -> CliResult {
    let filter = parse_filter(&args.filter)?;
    let store = open(&args.url, Access::Read).await?;
    let out = body(&store, &args, filter, ui).await;
    finish(store, out).await
}

async fn body(
    store: &Store,
    args: &ThreadsArgs,
    filter: indexmap::IndexMap<String, checkpointer::Value>,
    ui: Ui,
) -> CliResult {
    // one more than asked tells whether another page follows
    let mut infos = store
        .saver
        .list_threads(ListThreadsOptions {
            filter,
            after: args.after.clone(),
            limit: args.limit.map(|n| n.saturating_add(1)),
        })
        .await
        .context(format!("cannot list the threads of {}", store.name()))?;
    let next_after = match args.limit {
        Some(n) if infos.len() > n => {
            infos.truncate(n);
            Some(
                infos
                    .last()
                    .map_or_else(|| args.after.clone().unwrap_or_default(), |t| t.thread_id.clone()),
            )
        }
        _ => None,
    };
    let mut rows = Vec::new();
    for info in &infos {
        let namespaces = store.thread_namespaces(&info.thread_id).await?;
        let latest = store.saver.get_tuple(&info.latest).await.context(format!(
            "cannot read thread {:?} of {}",
            info.thread_id,
            store.name()
        ))?;
        let ts = latest.as_ref().map(|t| t.checkpoint.ts.clone());
        rows.push(json!({
            "thread_id": info.thread_id,
            "checkpoints": namespaces.iter().map(|(_, n)| n).sum::<u64>(),
            "namespaces": namespaces.iter().map(|(ns, _)| ns).collect::<Vec<_>>(),
            "latest_checkpoint_id": info.latest.checkpoint_id,
            "latest_checkpoint_ns": info.latest.ns(),
            "step": info.metadata.step(),
            "source": plain(info.metadata.get("source")),
            "ts": ts,
            "metadata": render::value(&info.metadata.to_value()),
        }));
    }
    if ui.json {
        return emit_json(&json!({"threads": rows, "next_after": next_after}));
    }
    if rows.is_empty() {
        ui.note("no threads");
        return Ok(());
    }
    let mut table = Table::new(&["THREAD", ">CHECKPOINTS", ">NAMESPACES", ">STEP", "SOURCE", "LATEST"]);
    for r in &rows {
        let text = |k: &str| r[k].as_str().unwrap_or("").to_owned();
        table.row(vec![
            (text("thread_id"), Some(Style::Cyan)),
            (r["checkpoints"].to_string(), None),
            (r["namespaces"].as_array().map_or(0, Vec::len).to_string(), None),
            (r["step"].as_i64().map_or(String::new(), |s| s.to_string()), None),
            (text("source"), None),
            (text("ts"), Some(Style::Dim)),
        ]);
    }
    emit(&table.render(&ui))?;
    if let Some(after) = next_after {
        ui.note(&format!("more threads follow: --after {after:?}"));
    }
    Ok(())
}
