//! `diff URL THREAD A B`: what changed between two checkpoints, channel by
//! channel.

use checkpointer::serde::render;
use checkpointer::{CheckpointTuple, Value};
use serde_json::json;

use super::{checkpoint, finish, open};
use crate::args::DiffArgs;
use crate::error::CliResult;
use crate::output::{emit, emit_json, readable_json, short_json, short_version, Style, Ui};
use crate::store::Access;

pub async fn run(args: DiffArgs, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Read).await?;
    let out = async {
        let a = checkpoint(&store, &args.thread, &args.ns, Some(&args.from)).await?;
        let b = checkpoint(&store, &args.thread, &args.ns, Some(&args.to)).await?;
        Ok((a, b))
    }
    .await;
    let (a, b) = finish(store, out).await?;
    let changes = channel_changes(&a, &b, args.all);
    let metadata = metadata_changes(&a, &b);
    if ui.json {
        return emit_json(&json!({
            "thread_id": args.thread,
            "checkpoint_ns": args.ns,
            "from": args.from,
            "to": args.to,
            "channels": changes.iter().map(Change::to_json).collect::<Vec<_>>(),
            "metadata": metadata,
            "updated_channels": b.checkpoint.updated_channels.as_deref(),
        }));
    }
    emit(&text(&args, &changes, &metadata, ui))
}

/// How a channel differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A value in B only.
    Added,
    /// A value in A only.
    Removed,
    /// Different values.
    Changed,
    /// The same value (or none) under another version.
    Version,
    /// Nothing differs.
    Same,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Added => "added",
            Kind::Removed => "removed",
            Kind::Changed => "changed",
            Kind::Version => "version",
            Kind::Same => "unchanged",
        }
    }
}

struct Change {
    channel: String,
    kind: Kind,
    from_version: Option<String>,
    to_version: Option<String>,
    from: Option<Value>,
    to: Option<Value>,
}

impl Change {
    /// The change as JSON; `from`/`to` are absent when there is no value.
    fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("channel".into(), json!(self.channel));
        m.insert("change".into(), json!(self.kind.name()));
        m.insert("from_version".into(), json!(self.from_version));
        m.insert("to_version".into(), json!(self.to_version));
        if let Some(v) = &self.from {
            m.insert("from".into(), render::value(v));
        }
        if let Some(v) = &self.to {
            m.insert("to".into(), render::value(v));
        }
        serde_json::Value::Object(m)
    }
}

fn channel_changes(a: &CheckpointTuple, b: &CheckpointTuple, all: bool) -> Vec<Change> {
    let (ca, cb) = (&a.checkpoint, &b.checkpoint);
    let mut channels: Vec<&String> = Vec::new();
    let mut seen: std::collections::HashSet<&String> = std::collections::HashSet::new();
    for k in ca
        .channel_versions
        .keys()
        .chain(ca.channel_values.keys())
        .chain(cb.channel_versions.keys())
        .chain(cb.channel_values.keys())
    {
        if seen.insert(k) {
            channels.push(k);
        }
    }
    let mut out = Vec::new();
    for channel in channels {
        let (va, vb) = (ca.channel_values.get(channel), cb.channel_values.get(channel));
        let (fa, fb) = (
            ca.channel_versions.get(channel).map(|v| v.to_string()),
            cb.channel_versions.get(channel).map(|v| v.to_string()),
        );
        let kind = match (va, vb) {
            (None, Some(_)) => Kind::Added,
            (Some(_), None) => Kind::Removed,
            (Some(x), Some(y)) if x != y => Kind::Changed,
            _ if fa != fb => Kind::Version,
            _ => Kind::Same,
        };
        if kind == Kind::Same && !all {
            continue;
        }
        out.push(Change {
            channel: channel.clone(),
            kind,
            from_version: fa,
            to_version: fb,
            from: va.cloned(),
            to: vb.cloned(),
        });
    }
    out
}

/// Metadata keys whose values differ: `{key: {"from", "to"}}`.
fn metadata_changes(a: &CheckpointTuple, b: &CheckpointTuple) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    let keys = a
        .metadata
        .keys()
        .chain(b.metadata.keys().filter(|k| a.metadata.get(k).is_none()));
    for k in keys {
        let (x, y) = (a.metadata.get(k), b.metadata.get(k));
        if x != y {
            out.insert(
                k.to_owned(),
                json!({"from": x.map(render::value), "to": y.map(render::value)}),
            );
        }
    }
    serde_json::Value::Object(out)
}

fn version_text(v: &Option<String>) -> String {
    v.as_ref().map_or("-".to_owned(), short_version)
}

fn text(args: &DiffArgs, changes: &[Change], metadata: &serde_json::Value, ui: Ui) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{} {} {} {}\n",
        ui.paint(Style::Bold, "diff"),
        ui.paint(Style::Cyan, &args.from),
        ui.paint(Style::Dim, "->"),
        ui.paint(Style::Cyan, &args.to)
    ));
    if changes.is_empty() {
        out.push_str("  no channel changed\n");
    }
    for c in changes {
        let (mark, style) = match c.kind {
            Kind::Added => ("+", Style::Green),
            Kind::Removed => ("-", Style::Red),
            Kind::Changed => ("~", Style::Yellow),
            Kind::Version => ("~", Style::Dim),
            Kind::Same => ("=", Style::Dim),
        };
        let versions = match (&c.from_version, &c.to_version) {
            (a, b) if a == b => version_text(b),
            (None, b) => version_text(b),
            (a, b) => format!("{} -> {}", version_text(a), version_text(b)),
        };
        out.push_str(&format!(
            "{} {}  {}  {}\n",
            ui.paint(style, mark),
            ui.paint(Style::Bold, &c.channel),
            ui.paint(Style::Dim, &versions),
            ui.paint(Style::Dim, c.kind.name())
        ));
        match c.kind {
            Kind::Added => value_lines(&mut out, "+", Style::Green, c.to.as_ref(), ui),
            Kind::Removed => value_lines(&mut out, "-", Style::Red, c.from.as_ref(), ui),
            Kind::Changed => changed_lines(&mut out, c, ui),
            Kind::Version | Kind::Same => {}
        }
    }
    if let Some(m) = metadata.as_object() {
        if !m.is_empty() {
            out.push_str(&format!("{}\n", ui.paint(Style::Bold, "metadata")));
            for (k, v) in m {
                out.push_str(&format!(
                    "  {k}: {} -> {}\n",
                    short_json(&v["from"], 60),
                    short_json(&v["to"], 60)
                ));
            }
        }
    }
    out
}

fn value_lines(out: &mut String, mark: &str, style: Style, v: Option<&Value>, ui: Ui) {
    let Some(v) = v else { return };
    for line in readable_json(&render::value(v), 0, 96).lines() {
        out.push_str(&format!("    {}\n", ui.paint(style, &format!("{mark} {line}"))));
    }
}

/// A list that grew at its end (a reducer such as `operator.add` or
/// `add_messages`) shows only the new items; anything else shows both values.
fn changed_lines(out: &mut String, c: &Change, ui: Ui) {
    if let (Some(Value::Array(a)), Some(Value::Array(b))) = (&c.from, &c.to) {
        if b.len() > a.len() && b[..a.len()] == a[..] {
            out.push_str(&format!(
                "    {}\n",
                ui.paint(
                    Style::Dim,
                    &format!("{} item(s) appended after the {} there", b.len() - a.len(), a.len())
                )
            ));
            for item in &b[a.len()..] {
                value_lines(out, "+", Style::Green, Some(item), ui);
            }
            return;
        }
    }
    value_lines(out, "-", Style::Red, c.from.as_ref(), ui);
    value_lines(out, "+", Style::Green, c.to.as_ref(), ui);
}
