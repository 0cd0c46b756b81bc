//! `check URL`: the library's row verifier (`checkpointer::verify`) over a
//! store, or some of its threads: every violation on stdout, one a line (a
//! JSON list with `--json`), exit 6 when there is one.

use checkpointer::verify::{verify_store, verify_thread, Report, Violation};
use serde_json::json;

use super::{finish, open, select_threads};
use crate::args::CheckArgs;
use crate::error::{CliError, CliResult, Context, Exit};
use crate::output::{emit, emit_json, Style, Ui};
use crate::store::{Access, Store};

pub async fn run(args: CheckArgs, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Read).await?;
    let out = body(&store, &args).await;
    let report = finish(store, out).await?;
    if ui.json {
        emit_json(&json!({
            "threads": report.threads,
            "checkpoints": report.checkpoints,
            "writes": report.writes,
            "unchecked_task_ids": report.unchecked_task_ids,
            "violations": report.violations.iter().map(violation_json).collect::<Vec<_>>(),
        }))?;
    } else {
        let mut text = String::new();
        for v in &report.violations {
            text.push_str(&format!("{} {v}\n", ui.paint(Style::Red, "violation:")));
        }
        emit(&text)?;
        ui.note(&format!(
            "{} thread(s), {} checkpoint(s), {} write(s) checked ({} task id(s) not recomputed): {} violation(s)",
            report.threads,
            report.checkpoints,
            report.writes,
            report.unchecked_task_ids,
            report.violations.len()
        ));
    }
    if report.is_ok() {
        Ok(())
    } else {
        Err(CliError::new(
            Exit::Inconsistent,
            format!("{} violation(s) of the runtime's invariants", report.violations.len()),
        ))
    }
}

async fn body(store: &Store, args: &CheckArgs) -> CliResult<Report> {
    let what = format!("cannot verify {}", store.name());
    if args.thread.is_empty() {
        return verify_store(store.saver.as_ref()).await.context(&what);
    }
    let mut report = Report::default();
    for thread in select_threads(store, &args.thread).await? {
        report.merge(verify_thread(store.saver.as_ref(), &thread).await.context(&what)?);
    }
    Ok(report)
}

fn violation_json(v: &Violation) -> serde_json::Value {
    json!({
        "kind": v.kind.as_str(),
        "thread_id": v.thread_id,
        "checkpoint_ns": v.checkpoint_ns,
        "checkpoint_id": v.checkpoint_id,
        "channel": v.channel,
        "message": v.message,
    })
}
