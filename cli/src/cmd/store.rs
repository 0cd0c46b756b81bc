//! `store namespaces|items|get URL …`: a long-term memory store (LangGraph's
//! `BaseStore`: Python's `SqliteStore` file, or ours) read as it is. The
//! store is opened read-only: nothing is created or migrated, and reads
//! restart no TTL; expired items are never shown.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use checkpointer::store::{
    Filter, GetOp, Item, ListNamespacesOp, Namespace, Op, OpResult, SearchOp, Store, StoreExt, StoreOptions,
};
use serde_json::{json, Value};

use crate::args::{StoreArgs, StoreCommand, StoreGetArgs, StoreItemsArgs, StoreNamespacesArgs};
use crate::error::{CliError, CliResult};
use crate::output::{emit, emit_json, readable_json, short_json, Style, Table, Ui};

/// Where pretty-printed values wrap.
const WIDTH: usize = 100;

/// The widest value shown in a row of `store items`.
const VALUE_COLUMN: usize = 60;

pub async fn run(args: StoreArgs, ui: Ui) -> CliResult {
    match args.command {
        StoreCommand::Namespaces(a) => namespaces(a, ui).await,
        StoreCommand::Items(a) => items(a, ui).await,
        StoreCommand::Get(a) => get(a, ui).await,
    }
}

/// Opens the store behind `url` read-only: nothing is created or migrated,
/// and reads restart no TTL.
async fn open(url: &str) -> CliResult<Arc<dyn Store>> {
    crate::store::check(url)?;
    match StoreOptions::new().read_only(true).open(url).await {
        Ok(store) => Ok(store),
        Err(e @ checkpointer::Error::Unsupported { .. }) => Err(CliError::usage(e.to_string()).with_hint(
            "the store commands read memory:, sqlite:// (Python's SqliteStore files) and PostgreSQL stores",
        )),
        Err(e) => Err(crate::store::open_error(url, crate::store::Access::Read, e)),
    }
}

/// A namespace as labels joined by `.` (`""`: the root, every namespace).
fn namespace(text: &str, what: &str) -> CliResult<Namespace> {
    let labels: Vec<&str> = if text.is_empty() {
        Vec::new()
    } else {
        text.split('.').collect()
    };
    Namespace::new(labels).map_err(|e| {
        CliError::usage(format!("bad {what} {text:?}: {e}"))
            .with_hint("write a namespace as its labels joined by '.': users.42")
    })
}

/// A library error of a read: a refused argument is a usage error.
fn failed(what: String, e: checkpointer::Error) -> CliError {
    match e {
        checkpointer::Error::Store(_) => CliError::usage(format!("{what}: {e}")),
        e => CliError::from_lib(&what, e),
    }
}

/// The name of the store for messages.
fn shown(url: &str) -> String {
    checkpointer::secret::redact(url)
}

async fn namespaces(args: StoreNamespacesArgs, ui: Ui) -> CliResult {
    let mut op = ListNamespacesOp::default()
        .limit(args.limit.saturating_add(1))
        .offset(args.offset);
    if let Some(prefix) = &args.prefix {
        op = op.prefix(namespace(prefix, "--prefix")?);
    }
    if let Some(suffix) = &args.suffix {
        op = op.suffix(namespace(suffix, "--suffix")?);
    }
    if let Some(depth) = args.max_depth {
        op = op.max_depth(depth);
    }
    let store = open(&args.url).await?;
    let mut found = store
        .list_namespaces(op)
        .await
        .map_err(|e| failed(format!("cannot list the namespaces of {}", shown(&args.url)), e))?;
    let next = next_offset(&mut found, args.limit, args.offset);
    if ui.json {
        let listed: Vec<&[String]> = found.iter().map(Namespace::labels).collect();
        return emit_json(&json!({"namespaces": listed, "next_offset": next}));
    }
    if found.is_empty() {
        ui.note("no namespaces");
        return Ok(());
    }
    let text: String = found.iter().map(|ns| ns.dotted() + "\n").collect();
    emit(&text)?;
    more_follow(ui, "namespaces", next);
    Ok(())
}

async fn items(args: StoreItemsArgs, ui: Ui) -> CliResult {
    let prefix = namespace(&args.namespace, "namespace")?;
    let mut op = SearchOp::new(prefix)
        .limit(args.limit.saturating_add(1))
        .offset(args.offset)
        .refresh_ttl(false);
    if let Some(filter) = &args.filter {
        let json: Value = serde_json::from_str(filter).map_err(|e| {
            CliError::usage(format!("bad --filter: not JSON ({e})")).with_hint(r#"--filter '{"kind": "note"}'"#)
        })?;
        op = op.filter(Filter::from_json(&json).map_err(|e| CliError::usage(format!("bad --filter: {e}")))?);
    }
    let store = open(&args.url).await?;
    let found = store
        .search(op)
        .await
        .map_err(|e| failed(format!("cannot search {}", shown(&args.url)), e))?;
    let mut found: Vec<Item> = found.into_iter().map(|s| s.item).collect();
    let next = next_offset(&mut found, args.limit, args.offset);
    if ui.json {
        let rows: Vec<Value> = found.iter().map(item_json).collect();
        return emit_json(&json!({"items": rows, "next_offset": next}));
    }
    if found.is_empty() {
        ui.note("no items");
        return Ok(());
    }
    let mut table = Table::new(&["NAMESPACE", "KEY", "UPDATED", "VALUE"]);
    for item in &found {
        table.row(vec![
            (item.namespace.dotted(), Some(Style::Cyan)),
            (item.key.clone(), None),
            (iso(item.updated_at), Some(Style::Dim)),
            (short_json(&Value::Object(item.value.clone()), VALUE_COLUMN), None),
        ]);
    }
    emit(&table.render(&ui))?;
    more_follow(ui, "items", next);
    Ok(())
}

async fn get(args: StoreGetArgs, ui: Ui) -> CliResult {
    let ns = namespace(&args.namespace, "namespace")?;
    let store = open(&args.url).await?;
    let op = GetOp {
        refresh_ttl: Some(false),
        ..GetOp::new(ns.clone(), args.key.clone())
    };
    let read = store
        .batch(vec![Op::Get(op)])
        .await
        .map_err(|e| failed(format!("cannot read {}", shown(&args.url)), e))?;
    let item = read.into_iter().next().and_then(OpResult::into_item).ok_or_else(|| {
        CliError::not_found(format!(
            "no item {:?} in namespace {:?} of {}",
            args.key,
            ns.dotted(),
            shown(&args.url)
        ))
    })?;
    if ui.json {
        return emit_json(&item_json(&item));
    }
    let head = |s: &str| ui.paint(Style::Bold, s);
    let mut out = format!("{} {}\n", head("item"), ui.paint(Style::Cyan, &item.key));
    out.push_str(&format!("  namespace  {}\n", item.namespace.dotted()));
    out.push_str(&format!("  created    {}\n", iso(item.created_at)));
    out.push_str(&format!("  updated    {}\n", iso(item.updated_at)));
    out.push_str(&format!("\n{}\n", head("value")));
    out.push_str(&readable_json(&Value::Object(item.value), 2, WIDTH));
    emit(&out)
}

/// Cuts `found` (fetched one longer than `limit`) to `limit`; the offset of
/// the next page when more follow.
fn next_offset<T>(found: &mut Vec<T>, limit: usize, offset: usize) -> Option<usize> {
    (found.len() > limit).then(|| {
        found.truncate(limit);
        offset.saturating_add(limit)
    })
}

fn more_follow(ui: Ui, what: &str, next: Option<usize>) {
    if let Some(offset) = next {
        ui.note(&format!("more {what} follow: --offset {offset}"));
    }
}

fn item_json(item: &Item) -> Value {
    json!({
        "namespace": item.namespace.labels(),
        "key": item.key,
        "value": item.value,
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
    })
}

/// A time as Python's UTC `isoformat()`.
fn iso(t: SystemTime) -> String {
    let micros = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_micros()).map_or(i64::MIN, |m| -m),
    };
    checkpointer::id::iso_from_unix_micros(micros)
}
