//! `history URL THREAD`: the checkpoint chain, newest first.

use checkpointer::{CheckpointConfig, CheckpointSource, ListOptions};
use futures::StreamExt;
use serde_json::json;

use super::{finish, ns_suffix, open, plain};
use crate::args::HistoryArgs;
use crate::error::{CliError, CliResult, Context};
use crate::output::{emit, emit_json, Style, Table, Ui};
use crate::store::{Access, Store};

pub async fn run(args: HistoryArgs, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Read).await?;
    let out = body(&store, &args, ui).await;
    finish(store, out).await
}

async fn body(store: &Store, args: &HistoryArgs, ui: Ui) -> CliResult {
    let ns = args.ns.clone().unwrap_or_default();
    let config = if args.all_ns {
        CheckpointConfig::all_namespaces(&args.thread)
    } else {
        CheckpointConfig::new(&args.thread).with_ns(&ns)
    };
    let options = ListOptions {
        limit: args.limit,
        ..ListOptions::default()
    };
    let mut rows = Vec::new();
    let mut stream = store.saver.list(Some(config), options);
    while let Some(t) = stream.next().await {
        let t = t.context(format!("cannot read thread {:?} of {}", args.thread, store.name()))?;
        rows.push(json!({
            "checkpoint_id": t.config.checkpoint_id,
            "checkpoint_ns": t.config.ns(),
            "parent_checkpoint_id": t.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
            "step": t.metadata.step(),
            "source": plain(t.metadata.get("source")),
            "ts": t.checkpoint.ts,
            "updated_channels": t.checkpoint.updated_channels.as_deref(),
            "pending_writes": t.pending_writes.len(),
        }));
    }
    drop(stream);
    if rows.is_empty() && args.limit != Some(0) {
        if !store.thread_exists(&args.thread).await? {
            return Err(CliError::not_found(format!(
                "no thread {:?} in {}",
                args.thread,
                store.name()
            )));
        }
        return Err(
            CliError::not_found(format!("thread {:?} has no checkpoint{}", args.thread, ns_suffix(&ns)))
                .with_hint("--all-ns lists every namespace"),
        );
    }
    if ui.json {
        return emit_json(&json!(rows));
    }
    let mut headers = vec!["CHECKPOINT", "PARENT", ">STEP", "SOURCE", ">WRITES", "UPDATED"];
    if args.all_ns {
        headers.insert(0, "NS");
    }
    let mut table = Table::new(&headers);
    for r in &rows {
        let text = |k: &str| r[k].as_str().unwrap_or("").to_owned();
        let source = text("source");
        let source_style = match CheckpointSource::parse(&source) {
            Some(CheckpointSource::Input) => Style::Green,
            Some(CheckpointSource::Update) | Some(CheckpointSource::Fork) => Style::Yellow,
            _ => Style::Dim,
        };
        let updated = match r["updated_channels"].as_array() {
            Some(list) => list.iter().filter_map(|c| c.as_str()).collect::<Vec<_>>().join(", "),
            None => "-".to_owned(),
        };
        let mut cells = vec![
            (text("checkpoint_id"), Some(Style::Cyan)),
            (
                r["parent_checkpoint_id"].as_str().unwrap_or("-").to_owned(),
                Some(Style::Dim),
            ),
            (r["step"].as_i64().map_or(String::new(), |s| s.to_string()), None),
            (source, Some(source_style)),
            (r["pending_writes"].to_string(), None),
            (updated, None),
        ];
        if args.all_ns {
            let ns = text("checkpoint_ns");
            cells.insert(0, (if ns.is_empty() { "\"\"".to_owned() } else { ns }, None));
        }
        table.row(cells);
    }
    emit(&table.render(&ui))
}
