//! `show URL THREAD [CHECKPOINT]`: one checkpoint in full.

use checkpointer::serde::render;
use checkpointer::CheckpointTuple;
use serde_json::json;

use super::{checkpoint, finish, open, plain};
use crate::args::ShowArgs;
use crate::error::CliResult;
use crate::output::{emit, emit_json, readable_json, short_json, short_version, visible_len, Style, Ui};
use crate::store::Access;

/// Values longer than this on one line are printed pretty, below their name.
const INLINE: usize = 72;

/// Where pretty-printed values wrap.
const WIDTH: usize = 100;

pub async fn run(args: ShowArgs, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Read).await?;
    let out = checkpoint(&store, &args.thread, &args.ns, args.checkpoint.as_deref()).await;
    let t = finish(store, out).await?;
    if ui.json {
        let mut v = render::tuple(&t);
        if let Some(m) = v.as_object_mut() {
            m.insert("thread_id".into(), json!(t.config.thread_id));
            m.insert("checkpoint_ns".into(), json!(t.config.ns()));
        }
        return emit_json(&v);
    }
    emit(&text(&t, ui))
}

fn value_line(out: &mut String, label: &str, v: &serde_json::Value) {
    let line = short_json(v, usize::MAX);
    if line.chars().count() + visible_len(label) <= INLINE {
        out.push_str(&format!("{label}  {line}\n"));
    } else {
        out.push_str(&format!("{label}\n"));
        out.push_str(&readable_json(v, 6, WIDTH));
    }
}

fn text(t: &CheckpointTuple, ui: Ui) -> String {
    let cp = &t.checkpoint;
    let mut out = String::new();
    let head = |s: &str| ui.paint(Style::Bold, s);
    out.push_str(&format!(
        "{} {}\n",
        head("checkpoint"),
        ui.paint(Style::Cyan, t.config.checkpoint_id().unwrap_or(""))
    ));
    out.push_str(&format!("  thread   {}\n", t.config.thread_id));
    out.push_str(&format!("  ns       {:?}\n", t.config.ns()));
    let parent = t.parent_config.as_ref().and_then(|p| p.checkpoint_id()).unwrap_or("-");
    out.push_str(&format!("  parent   {parent}\n"));
    out.push_str(&format!("  ts       {}\n", cp.ts));
    out.push_str(&format!(
        "  step     {}   source {}\n",
        t.metadata.step().map_or("-".to_owned(), |s| s.to_string()),
        plain(t.metadata.get("source"))
    ));
    match &cp.updated_channels {
        Some(list) => out.push_str(&format!("  updated  {}\n", list.join(", "))),
        None => out.push_str("  updated  -\n"),
    }

    out.push_str(&format!("\n{} ({})\n", head("channels"), cp.channel_versions.len()));
    let width = cp
        .channel_versions
        .keys()
        .chain(cp.channel_values.keys())
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(0);
    for (channel, version) in &cp.channel_versions {
        let label = format!("  {channel:<width$}  {}", ui.paint(Style::Dim, &short_version(version)));
        match cp.channel_values.get(channel) {
            Some(v) => value_line(&mut out, &label, &render::value(v)),
            None => out.push_str(&format!("{label}  {}\n", ui.paint(Style::Dim, "(no value)"))),
        }
    }
    for (channel, v) in &cp.channel_values {
        if !cp.channel_versions.contains_key(channel) {
            let label = format!("  {channel:<width$}  {}", ui.paint(Style::Dim, "(no version)"));
            value_line(&mut out, &label, &render::value(v));
        }
    }

    if !cp.versions_seen.is_empty() {
        out.push_str(&format!("\n{}\n", head("versions seen")));
        for (node, seen) in &cp.versions_seen {
            let seen: Vec<String> = seen.iter().map(|(c, v)| format!("{c}={}", short_version(v))).collect();
            let seen = if seen.is_empty() {
                "-".to_owned()
            } else {
                seen.join(", ")
            };
            out.push_str(&format!("  {node}: {seen}\n"));
        }
    }

    out.push_str(&format!("\n{}\n", head("metadata")));
    out.push_str(&readable_json(&render::value(&t.metadata.to_value()), 2, WIDTH));

    out.push_str(&format!("\n{} ({})\n", head("pending writes"), t.pending_writes.len()));
    for w in &t.pending_writes {
        let label = format!("  {}  {}", ui.paint(Style::Dim, &w.task_id), w.channel);
        value_line(&mut out, &label, &render::value(&w.value));
    }
    out
}
