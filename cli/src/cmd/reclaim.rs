//! `reclaim URL [--rewrite] [--step-pages N]`: give back the space deletes
//! freed (SQLite incremental vacuum in steps and WAL truncate; PostgreSQL
//! `VACUUM`, never `FULL`; Redis: the expired threads' index entries), and
//! show the store's parts before and after. Also the space lines `stats`
//! prints.

use checkpointer::space::{ReclaimOptions, SpaceUsage};
use serde_json::json;

use super::{finish, open};
use crate::args::ReclaimArgs;
use crate::error::CliResult;
use crate::output::{emit, emit_json, human_bytes, Style, Ui};
use crate::store::Access;

pub async fn run(args: ReclaimArgs, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Write).await?;
    let options = ReclaimOptions::new()
        .rewrite(args.rewrite)
        .step_pages(args.step_pages)
        .rest(args.rest);
    let out = store.reclaim_space(options).await;
    let report = finish(store, out).await?;
    if ui.json {
        return emit_json(&json!({
            "store": checkpointer::secret::redact(&args.url),
            "before": report.before.as_ref().map(space_json),
            "after": report.after.as_ref().map(space_json),
            "freed_bytes": report.freed_bytes(),
            "steps": report.steps,
            "actions": report.actions,
        }));
    }
    let mut out = String::new();
    for action in &report.actions {
        out.push_str(&format!("{} {action}\n", ui.paint(Style::Bold, "done  ")));
    }
    for (label, usage) in [("before", &report.before), ("after", &report.after)] {
        if let Some(u) = usage {
            out.push_str(&format!("\n{}\n", ui.paint(Style::Bold, label)));
            out.push_str(&space_text(u, &ui));
        }
    }
    if let Some(freed) = report.freed_bytes() {
        out.push_str(&format!("\nfreed {} in {} step(s)\n", human_bytes(freed), report.steps));
    }
    emit(&out)
}

/// A store's space as JSON: the total, what is reclaimable and each part.
pub fn space_json(u: &SpaceUsage) -> serde_json::Value {
    json!({
        "bytes": u.bytes,
        "in_memory": u.in_memory,
        "reclaimable_bytes": u.reclaimable_bytes,
        "parts": u.parts.iter().map(|p| json!({
            "name": p.name,
            "bytes": p.bytes,
            "table_bytes": p.table_bytes,
            "toast_bytes": p.toast_bytes,
            "index_bytes": p.index_bytes,
            "live_rows": p.live_rows,
            "dead_rows": p.dead_rows,
            "reclaimable_bytes": p.reclaimable_bytes,
        })).collect::<Vec<_>>(),
    })
}

/// A store's space, one line per part and one for what is reclaimable.
pub fn space_text(u: &SpaceUsage, ui: &Ui) -> String {
    let mut out = String::new();
    for p in &u.parts {
        let mut detail = Vec::new();
        if p.toast_bytes > 0 || p.index_bytes > 0 {
            detail.push(format!(
                "heap {}, TOAST {}, indexes {}",
                human_bytes(p.table_bytes),
                human_bytes(p.toast_bytes),
                human_bytes(p.index_bytes)
            ));
        }
        if let Some(dead) = p.dead_rows {
            detail.push(format!("{} live, {dead} dead row(s)", p.live_rows.unwrap_or(0)));
        }
        if let Some(r) = p.reclaimable_bytes.filter(|r| *r > 0) {
            detail.push(format!("{} reclaimable", human_bytes(r)));
        }
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!("  ({})", detail.join("; "))
        };
        out.push_str(&format!(
            "  {:<22} {:>10}{detail}\n",
            ui.paint(Style::Cyan, &p.name),
            human_bytes(p.bytes)
        ));
    }
    if let Some(r) = u.reclaimable_bytes {
        out.push_str(&format!(
            "  {:<22} {:>10}  (free SQLite pages and WAL; PostgreSQL dead rows, estimated: `checkpointer reclaim`)\n",
            "reclaimable",
            human_bytes(r)
        ));
    }
    out
}
