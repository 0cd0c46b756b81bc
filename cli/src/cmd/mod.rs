//! The subcommands, one module each, and what they share.

pub mod check;
pub mod copy;
pub mod delete;
pub mod diff;
pub mod export;
pub mod history;
pub mod prune;
pub mod reclaim;
pub mod retention;
pub mod show;
pub mod stats;
pub mod store;
pub mod threads;

use checkpointer::verify::{ThreadVerifier, ViolationKind};
use checkpointer::{CheckpointConfig, CheckpointTuple, Value};
use indexmap::IndexMap;

use crate::error::{CliError, CliResult, Context};
use crate::store::{Access, Store};

/// Opens a store.
///
/// # Errors
/// See [`Store::open`].
pub async fn open(url: &str, access: Access) -> CliResult<Store> {
    Store::open(url, access).await
}

/// Runs `body` on an open store and closes it, whatever `body` returned;
/// the error of `body` wins.
pub async fn finish<T>(store: Store, out: CliResult<T>) -> CliResult<T> {
    let closed = store.close().await;
    match (out, closed) {
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e),
        (Ok(v), Ok(())) => Ok(v),
    }
}

/// `KEY=JSON` options as a metadata filter.
///
/// # Errors
/// Exit 2 for a missing `=` or a value that is not JSON.
pub fn parse_filter(items: &[String]) -> CliResult<IndexMap<String, Value>> {
    let mut filter = IndexMap::new();
    for item in items {
        let Some((key, json)) = item.split_once('=') else {
            return Err(CliError::usage(format!("bad --filter {item:?}: expected KEY=JSON")));
        };
        let value = checkpointer::serde::json::from_json(json.as_bytes()).map_err(|e| {
            let shown = short_text(item, 80);
            if e.to_string().contains("deeper than") {
                let limit = checkpointer::serde::msgpack::MAX_DEPTH;
                CliError::usage(format!(
                    "bad --filter {shown:?}: the value nests deeper than {limit} levels, the limit of stored values"
                ))
            } else {
                CliError::usage(format!("bad --filter {shown:?}: the value is not JSON ({e})")).with_hint(format!(
                    "quote strings as JSON: --filter '{}=\"{}\"'",
                    short_text(key, 40),
                    short_text(json, 40)
                ))
            }
        })?;
        filter.insert(key.to_owned(), value);
    }
    Ok(filter)
}

/// `text` cut to `max` characters (`…` marks the cut).
fn short_text(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// One checkpoint: `id`, or the latest of (thread, namespace).
///
/// # Errors
/// Exit 3 naming what is missing (thread, namespace, checkpoint); exit 4
/// on storage failures.
pub async fn checkpoint(store: &Store, thread: &str, ns: &str, id: Option<&str>) -> CliResult<CheckpointTuple> {
    let mut config = CheckpointConfig::new(thread).with_ns(ns);
    if let Some(id) = id {
        config = config.with_checkpoint_id(id);
    }
    let found = store
        .saver
        .get_tuple(&config)
        .await
        .context(format!("cannot read thread {thread:?} of {}", store.name()))?;
    if let Some(t) = found {
        return Ok(t);
    }
    if !store.thread_exists(thread).await? {
        return Err(CliError::not_found(format!("no thread {thread:?} in {}", store.name())));
    }
    match id {
        Some(id) => Err(CliError::not_found(format!(
            "no checkpoint {id:?} in thread {thread:?}{}",
            ns_suffix(ns)
        ))),
        None => Err(
            CliError::not_found(format!("thread {thread:?} has no checkpoint{}", ns_suffix(ns)))
                .with_hint("`checkpointer history URL THREAD --all-ns` lists its namespaces"),
        ),
    }
}

/// ` in namespace "x"` for a non-root namespace.
pub fn ns_suffix(ns: &str) -> String {
    if ns.is_empty() {
        String::new()
    } else {
        format!(" in namespace {ns:?}")
    }
}

/// The threads a command works on: those named (which must exist), or all.
///
/// # Errors
/// Exit 3 for a named thread that does not exist; exit 4 on storage failures.
pub async fn select_threads(store: &Store, named: &[String]) -> CliResult<Vec<String>> {
    if named.is_empty() {
        store.thread_ids().await
    } else {
        store.require_threads(named).await?;
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<String> = Vec::new();
        for t in named {
            if seen.insert(t) {
                out.push(t.clone());
            }
        }
        Ok(out)
    }
}

/// What to report when reading `thread` failed with `e`: each checkpoint
/// row that cannot be read, by namespace and id, or `e` itself when no
/// single row is to blame.
pub async fn read_failure(store: &Store, thread: &str, e: &CliError) -> Vec<String> {
    let rows = store.bad_rows(thread).await;
    if rows.is_empty() {
        vec![e.message.clone()]
    } else {
        rows
    }
}

/// The violations of the library's verifier (`checkpointer::verify`) that
/// leave rows missing, which `export` and `threads` flag: a parent that is
/// not stored, a step's pending writes gone, writes of a checkpoint that is
/// not stored. `check` reports every kind.
pub const MISSING_ROWS: [ViolationKind; 3] = [
    ViolationKind::MissingParent,
    ViolationKind::MissingWrites,
    ViolationKind::OrphanWrites,
];

/// The problems of a thread's rows: its [`MISSING_ROWS`] violations as the
/// verifier words them, reading every checkpoint; `Err` names the rows that
/// cannot be read.
///
/// # Errors
/// Exit 4 when the store cannot be read at all.
pub async fn thread_problems(store: &Store, thread: &str) -> CliResult<Result<Vec<String>, Vec<String>>> {
    let keys = store.thread_keys(thread).await?;
    let mut verifier = ThreadVerifier::new(thread);
    let mut failed = None;
    let mut stream = store.saver.list(
        Some(CheckpointConfig::all_namespaces(thread)),
        checkpointer::ListOptions::default(),
    );
    while let Some(t) = futures::StreamExt::next(&mut stream).await {
        match t {
            Ok(t) => verifier.push(&t),
            Err(e) => {
                // the rows that cannot be read are then named one by one
                failed = Some(CliError::from_lib(
                    &format!("cannot read thread {thread:?} of {}", store.name()),
                    e,
                ));
                break;
            }
        }
    }
    drop(stream);
    if let Some(e) = failed {
        return Ok(Err(read_failure(store, thread, &e).await));
    }
    verifier.check_orphans(&keys);
    let report = verifier.finish();
    Ok(Ok(report
        .violations
        .iter()
        .filter(|v| MISSING_ROWS.contains(&v.kind))
        .map(ToString::to_string)
        .collect()))
}

/// A short text for a metadata value: strings bare, the rest as JSON.
pub fn plain(v: Option<&Value>) -> String {
    match v {
        None => String::new(),
        Some(Value::Str(s)) => s.as_str().to_owned(),
        Some(v) => checkpointer::serde::render::value(v).to_string(),
    }
}
