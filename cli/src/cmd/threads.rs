//! `threads URL`: threads with their checkpoint count, namespaces, latest
//! step and time.

use checkpointer::serde::render;
use checkpointer::ListThreadsOptions;
use serde_json::json;

use super::{finish, open, parse_filter, plain, read_failure, thread_problems};
use crate::args::ThreadsArgs;
use crate::error::{CliError, CliResult, Context, Exit};
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
    // threads that cannot be read are reported and left out; threads whose
    // rows do not hang together are flagged
    let mut unreadable = 0usize;
    let mut inconsistent = 0usize;
    for info in &infos {
        let read = format!("cannot read thread {:?} of {}", info.thread_id, store.name());
        let latest = match store.saver.get_tuple(&info.latest).await.context(&read) {
            Ok(t) => t,
            Err(e) => {
                for line in read_failure(store, &info.thread_id, &e).await {
                    eprintln!("{} {line}", ui.paint_err(Style::Red, "error:"));
                }
                unreadable += 1;
                continue;
            }
        };
        let problems = match thread_problems(store, &info.thread_id).await? {
            Ok(p) => p,
            Err(bad) => {
                for line in bad {
                    eprintln!("{} {line}", ui.paint_err(Style::Red, "error:"));
                }
                unreadable += 1;
                continue;
            }
        };
        let namespaces = store.thread_namespaces(&info.thread_id).await?;
        for p in &problems {
            eprintln!("{} {p}", ui.paint_err(Style::Red, "ERROR:"));
        }
        if !problems.is_empty() {
            inconsistent += 1;
        }
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
            "problems": problems,
        }));
    }
    print_rows(&rows, next_after, ui)?;
    if unreadable > 0 {
        return Err(CliError::store(format!(
            "{unreadable} thread(s) of {} cannot be read (listed above)",
            store.name()
        )));
    }
    if inconsistent > 0 {
        return Err(CliError::new(
            Exit::Inconsistent,
            format!(
                "{inconsistent} thread(s) of {} are inconsistent (listed above)",
                store.name()
            ),
        ));
    }
    Ok(())
}

fn print_rows(rows: &[serde_json::Value], next_after: Option<String>, ui: Ui) -> CliResult {
    if ui.json {
        return emit_json(&json!({"threads": rows, "next_after": next_after}));
    }
    if rows.is_empty() {
        ui.note("no threads");
        return Ok(());
    }
    let mut table = Table::new(&["THREAD", ">CHECKPOINTS", ">NAMESPACES", ">STEP", "SOURCE", "LATEST"]);
    for r in rows {
        let text = |k: &str| r[k].as_str().unwrap_or("").to_owned();
        let flagged = r["problems"].as_array().is_some_and(|p| !p.is_empty());
        table.row(vec![
            (
                text("thread_id") + if flagged { " (!)" } else { "" },
                Some(if flagged { Style::Red } else { Style::Cyan }),
            ),
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
