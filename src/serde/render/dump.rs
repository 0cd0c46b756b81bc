//! `read_fixtures.py`'s dump of a whole store.

use std::fmt::Write as _;

use futures::StreamExt;
use serde_json::{json, Map};

use super::value;
use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::error::Result;
use crate::saver::{CheckpointSaver, ListOptions};
use crate::serde::Value;
use crate::version::ChannelVersion;

fn versions(vs: &indexmap::IndexMap<String, ChannelVersion>) -> serde_json::Value {
    serde_json::Value::Object(vs.iter().map(|(k, v)| (k.clone(), value(&v.to_value()))).collect())
}

/// A checkpoint tuple as `read_fixtures.py` prints it (`tuple_view`): ids,
/// the rendered checkpoint, metadata and pending writes in the saver's order.
pub fn tuple(t: &CheckpointTuple) -> serde_json::Value {
    let cp = &t.checkpoint;
    let mut checkpoint = Map::new();
    checkpoint.insert("v".into(), json!(cp.v));
    checkpoint.insert("id".into(), json!(cp.id));
    checkpoint.insert("ts".into(), json!(cp.ts));
    checkpoint.insert(
        "channel_values".into(),
        serde_json::Value::Object(cp.channel_values.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
    );
    checkpoint.insert("channel_versions".into(), versions(&cp.channel_versions));
    checkpoint.insert(
        "versions_seen".into(),
        serde_json::Value::Object(cp.versions_seen.iter().map(|(k, v)| (k.clone(), versions(v))).collect()),
    );
    checkpoint.insert("updated_channels".into(), json!(cp.updated_channels.as_deref()));
    if let Some(sends) = &cp.pending_sends {
        checkpoint.insert("pending_sends".into(), value(&Value::Array(sends.clone().into())));
    }
    json!({
        "checkpoint_id": t.config.checkpoint_id,
        "parent_checkpoint_id": t.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
        "checkpoint": checkpoint,
        "metadata": serde_json::Value::Object(t.metadata.0.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
        "pending_writes": t
            .pending_writes
            .iter()
            .map(|w| json!([w.task_id, w.channel, value(&w.value)]))
            .collect::<Vec<_>>(),
    })
}

/// What [`dump_with`] covers, and whom it tells about its progress.
#[derive(Clone, Copy, Default)]
pub struct DumpOptions<'a> {
    /// Only these threads (every namespace of each); `None` is the whole
    /// store, listed with `list(None)` as Python does.
    pub threads: Option<&'a [String]>,
    /// Called once for every checkpoint read.
    pub on_checkpoint: Option<&'a (dyn Fn() + Send + Sync)>,
}

impl std::fmt::Debug for DumpOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DumpOptions")
            .field("threads", &self.threads)
            .field("on_checkpoint", &self.on_checkpoint.is_some())
            .finish()
    }
}

/// Everything a saver holds, as `read_fixtures.py` prints it: every
/// checkpoint of every thread and namespace (listed with `list(None)`, each
/// read again with `get_tuple` and compared), the latest checkpoint of each
/// (thread, namespace), a summary, and the disagreements found under
/// `"errors"`. `source` fills the `"source"` field (Python prints the file
/// name).
///
/// Two dumps of stores holding the same checkpoints are equal as JSON values
/// whichever implementation wrote or read them; printed with
/// [`python_json_indented`](super::python_json_indented) (indent 1) and a final newline they are the bytes
/// `read_fixtures.py` prints, and after [`normalize`](super::normalize) those of its
/// `--normalize` output.
///
/// # Errors
/// A failing `get_tuple`; failures of single rows while listing are reported
/// under `"errors"` instead.
pub async fn dump(saver: &dyn CheckpointSaver, source: &str) -> Result<serde_json::Value> {
    dump_with(saver, source, DumpOptions::default()).await
}

/// [`dump`] of some threads only, or with a progress callback.
///
/// # Errors
/// As [`dump`].
pub async fn dump_with(
    saver: &dyn CheckpointSaver,
    source: &str,
    options: DumpOptions<'_>,
) -> Result<serde_json::Value> {
    use std::collections::BTreeMap;

    let mut errors: Vec<String> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<serde_json::Value>> = BTreeMap::new();
    let mut ids: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut n_writes = 0usize;
    let scopes: Vec<Option<CheckpointConfig>> = match options.threads {
        None => vec![None],
        Some(threads) => threads
            .iter()
            .map(|t| Some(CheckpointConfig::all_namespaces(t.clone())))
            .collect(),
    };
    for scope in scopes {
        let mut listed = saver.list(scope, ListOptions::default());
        while let Some(item) = listed.next().await {
            let lt = match item {
                Ok(t) => t,
                Err(e) => {
                    errors.push(format!("list failed on a row: {e}"));
                    continue;
                }
            };
            let key = (lt.config.thread_id.clone(), lt.config.ns().to_owned());
            let id = lt.config.checkpoint_id.clone().unwrap_or_default();
            let lv = tuple(&lt);
            let by_id = CheckpointConfig::new(key.0.clone())
                .with_ns(key.1.clone())
                .with_checkpoint_id(id.clone());
            ids.entry(key.clone()).or_default().push(id.clone());
            match saver.get_tuple(&by_id).await? {
                None => {
                    errors.push(format!("get_tuple returned None for {} {id}", py_key(&key)));
                    groups.entry(key).or_default().push(lv);
                }
                Some(gt) => {
                    let gv = tuple(&gt);
                    if gv != lv {
                        errors.push(format!("list() and get_tuple() disagree for {} {id}", py_key(&key)));
                    }
                    n_writes += gt.pending_writes.len();
                    groups.entry(key).or_default().push(gv);
                }
            }
            if let Some(tick) = options.on_checkpoint {
                tick();
            }
        }
    }
    let mut threads: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    let n_namespaces = groups.len();
    let mut n_checkpoints = 0;
    for ((thread, ns), mut cps) in groups {
        let latest = saver
            .get_tuple(&CheckpointConfig::new(thread.clone()).with_ns(ns.clone()))
            .await?
            .and_then(|t| t.config.checkpoint_id);
        let newest = ids
            .get(&(thread.clone(), ns.clone()))
            .and_then(|v| v.iter().max().cloned());
        if latest != newest {
            let py = |id: &Option<String>| id.clone().unwrap_or_else(|| "None".to_owned());
            errors.push(format!(
                "latest get_tuple for {} is {}, newest listed is {}",
                py_key(&(thread.clone(), ns.clone())),
                py(&latest),
                py(&newest)
            ));
        }
        cps.sort_by(|a, b| {
            let id = |v: &serde_json::Value| v["checkpoint_id"].as_str().unwrap_or("").to_owned();
            id(a).cmp(&id(b))
        });
        n_checkpoints += cps.len();
        threads.entry(thread).or_default().push(json!({
            "checkpoint_ns": ns,
            "latest_checkpoint_id": latest,
            "checkpoints": cps,
        }));
    }
    Ok(json!({
        "source": source,
        "summary": {
            "threads": threads.len(),
            "namespaces": n_namespaces,
            "checkpoints": n_checkpoints,
            "pending_writes": n_writes,
        },
        "threads": threads
            .into_iter()
            .map(|(thread_id, namespaces)| json!({"thread_id": thread_id, "namespaces": namespaces}))
            .collect::<Vec<_>>(),
        "errors": errors,
    }))
}

/// A (thread, namespace) key as Python prints the tuple: `('t', '')`.
fn py_key(key: &(String, String)) -> String {
    format!("({}, {})", py_repr(&key.0), py_repr(&key.1))
}

/// Python's `repr` of a string (printable characters kept, quotes chosen as
/// Python chooses them).
fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
