//! `copy SRC DST`: threads from one store to another, ids, parents,
//! namespaces, metadata, values and pending writes (with task path and
//! index) preserved.
//!
//! Each thread is read whole with the saver API (every pending write comes
//! with its task path and index, from any source, memory included) and
//! written to a SQLite, PostgreSQL or Redis target with the saver's
//! `import_thread`: one transaction per thread (on Redis: staged keys made
//! live by one script), so after a crash (SIGKILL, power loss) the target
//! has each thread whole or not at all, and `--overwrite` replaces a thread
//! in that same step. `--resume` finishes a copy that was cut short:
//! threads the target has identically are skipped.
//!
//! An in-memory target gets `put` and `put_writes`, every channel version
//! passed as new so each value is stored as it was read and nothing is
//! filled from a parent; `put_writes` numbers a call's writes by position
//! (or a special channel's fixed index): a gap in a task's indexes is
//! filled with a write that cannot survive (a regular index that already
//! exists keeps its first value; a special channel is overwritten by the
//! task's real write to it afterwards). A thread whose copy fails there is
//! deleted again, and `--overwrite` deletes the old thread before writing.
//!
//! A thread that cannot be read (an undecodable row) or written is reported
//! on stderr and left out of the target; the others are copied and the exit
//! code is 4.

use std::collections::HashSet;

use checkpointer::import::{ImportMode, ImportedCheckpoint, ImportedWrite, ThreadImport};
use checkpointer::secret::redact;
use checkpointer::serde::render;
use checkpointer::{CheckpointConfig, CheckpointSaver, ListOptions, PendingWrite};
use futures::StreamExt;
use serde_json::json;

use super::{read_failure, select_threads};
use crate::args::CopyArgs;
use crate::error::{CliError, CliResult, Context, Exit};
use crate::output::{emit, emit_json, Style, Ui};
use crate::store::{self, Access, Store};

pub async fn run(args: CopyArgs, ui: Ui) -> CliResult {
    // both URLs checked before either store is opened
    store::check(&args.src)?;
    store::check(&args.dst)?;
    let src = Store::open(&args.src, Access::Read).await?;
    let dst = match Store::open(&args.dst, Access::Create).await {
        Ok(d) => d,
        Err(e) => return super::finish(src, Err(e)).await,
    };
    // the same store under two names: --overwrite would delete the source
    let same = match (src.identity().await, dst.identity().await) {
        (Ok(a), Ok(b)) => Ok(a.is_some() && a == b),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let same = match same {
        Ok(true) => Err(CliError::usage(format!(
            "{} and {} are the same store",
            src.name(),
            dst.name()
        ))),
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    };
    if let Err(e) = same {
        let out = super::finish(dst, Err(e)).await;
        return super::finish(src, out).await;
    }
    let out = body(&src, &dst, &args, ui).await;
    let out = super::finish(dst, out).await;
    let report = super::finish(src, out).await?;
    for w in &report.warnings {
        ui.note(&format!("warning: {w}"));
    }
    let checkpoints = report.threads.iter().map(|t| t.checkpoints).sum::<usize>();
    let writes = report.threads.iter().map(|t| t.writes).sum::<usize>();
    if ui.json {
        emit_json(&json!({
            "source": redact(&args.src),
            "target": redact(&args.dst),
            "threads": report.threads.iter().map(|t| json!({
                "thread_id": t.thread_id,
                "checkpoints": t.checkpoints,
                "writes": t.writes,
                "replaced": t.replaced,
            })).collect::<Vec<_>>(),
            "skipped": report.skipped,
            "failed": report.failed.iter().map(|(t, e)| json!({"thread_id": t, "error": e})).collect::<Vec<_>>(),
            "checkpoints": checkpoints,
            "writes": writes,
            "warnings": report.warnings,
        }))?;
    } else {
        let replaced = report.threads.iter().filter(|t| t.replaced).count();
        let mut extra = String::new();
        if replaced > 0 {
            extra.push_str(&format!(", {replaced} replaced"));
        }
        if !report.skipped.is_empty() {
            extra.push_str(&format!(
                ", {} skipped (already in the target, identical)",
                report.skipped.len()
            ));
        }
        emit(&format!(
            "copied {} thread(s) ({checkpoints} checkpoints, {writes} writes) from {} to {}{extra}\n",
            report.threads.len(),
            redact(&args.src),
            redact(&args.dst),
        ))?;
    }
    if report.failed.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = report.failed.iter().map(|(t, _)| format!("{t:?}")).collect();
    Err(CliError::store(format!(
        "{} thread(s) could not be copied and are not in the target: {}",
        report.failed.len(),
        list_some(&names)
    )))
}

struct Copied {
    thread_id: String,
    checkpoints: usize,
    writes: usize,
    replaced: bool,
}

struct Report {
    threads: Vec<Copied>,
    /// Threads the target has already, identical (`--resume`).
    skipped: Vec<String>,
    /// Threads that could not be read or written, with the error.
    failed: Vec<(String, String)>,
    warnings: Vec<String>,
}

/// The first five of `names`, and how many more.
fn list_some(names: &[String]) -> String {
    let more = names.len().saturating_sub(5);
    let mut list = names[..names.len().min(5)].join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    list
}

async fn body(src: &Store, dst: &Store, args: &CopyArgs, ui: Ui) -> CliResult<Report> {
    let threads = select_threads(src, &args.thread).await?;
    let mut report = Report {
        threads: Vec::new(),
        skipped: Vec::new(),
        failed: Vec::new(),
        warnings: Vec::new(),
    };
    // what the target has already: with --resume, a thread equal to the
    // source's is done; any other is a conflict unless --overwrite
    let mut existing = HashSet::new();
    let mut identical = HashSet::new();
    let mut conflicts = Vec::new();
    for t in &threads {
        if !dst.thread_exists(t).await? {
            continue;
        }
        existing.insert(t.clone());
        if args.resume && same_thread(src, dst, t).await {
            identical.insert(t.clone());
            continue;
        }
        if !args.overwrite {
            conflicts.push(format!("{t:?}"));
        }
    }
    if !conflicts.is_empty() {
        let message = if args.resume {
            format!(
                "{} has thread(s) {} that differ from the source",
                dst.name(),
                list_some(&conflicts)
            )
        } else {
            format!("{} already has thread(s) {}", dst.name(), list_some(&conflicts))
        };
        return Err(CliError::conflict(message).with_hint(format!(
            "--resume skips the threads the target has identically; --overwrite replaces the others ({})",
            dst.import_note()
        )));
    }
    let bar = ui.progress(Some(threads.len() as u64), "copying");
    for thread in &threads {
        bar.set_message(thread.clone());
        if identical.contains(thread) {
            report.skipped.push(thread.clone());
            bar.inc(1);
            continue;
        }
        let replaced = existing.contains(thread);
        match copy_thread(src, dst, thread, replaced, &mut report.warnings).await {
            Ok((checkpoints, writes)) => report.threads.push(Copied {
                thread_id: thread.clone(),
                checkpoints,
                writes,
                replaced,
            }),
            Err(e) => {
                // the thread is not in the target (see copy_thread); the
                // others go on
                let lines = if e.exit == Exit::Store {
                    read_failure(src, thread, &e).await
                } else {
                    vec![e.message.clone()]
                };
                bar.suspend(|| {
                    for line in &lines {
                        eprintln!("{} {line}", ui.paint_err(Style::Red, "error:"));
                    }
                });
                report.failed.push((thread.clone(), lines.join("; ")));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(report)
}

/// Whether the target holds `thread` exactly as the source does (every
/// checkpoint, value, metadata and write with its key). A thread that
/// cannot be read is not the same.
async fn same_thread(src: &Store, dst: &Store, thread: &str) -> bool {
    let mut ignored = Vec::new();
    match (
        read_thread(src, thread, &mut ignored).await,
        read_thread(dst, thread, &mut ignored).await,
    ) {
        (Ok(a), Ok(b)) => fingerprint(&a) == fingerprint(&b),
        _ => false,
    }
}

/// A thread as JSON, maps compared by content: PostgreSQL's JSONB keeps
/// neither the key order of metadata nor that of checkpoint maps.
fn fingerprint(thread: &ThreadImport) -> Vec<serde_json::Value> {
    let mut out: Vec<(String, String, serde_json::Value)> = thread
        .checkpoints
        .iter()
        .map(|c| {
            let mut writes: Vec<&ImportedWrite> = c.writes.iter().collect();
            writes.sort_by(|a, b| (&a.task_id, a.idx).cmp(&(&b.task_id, b.idx)));
            let v = json!({
                "parent": c.parent_checkpoint_id,
                "checkpoint": render::value(&c.checkpoint.to_value(true)),
                "metadata": render::value(&c.metadata.to_value()),
                "writes": writes.iter().map(|w| json!([
                    w.task_id, w.task_path, w.idx, w.channel, render::value(&w.value)
                ])).collect::<Vec<_>>(),
            });
            (c.checkpoint_ns.clone(), c.checkpoint.id.clone(), v)
        })
        .collect();
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out.into_iter().map(|(ns, id, v)| json!([ns, id, v])).collect()
}

/// Every checkpoint and write of a thread, writes with their stored keys.
///
/// # Errors
/// Exit 4 naming the thread, namespace and checkpoint of a row that cannot
/// be read.
async fn read_thread(store: &Store, thread: &str, warnings: &mut Vec<String>) -> CliResult<ThreadImport> {
    let keys = store.thread_keys(thread).await?;
    let mut out = ThreadImport {
        thread_id: thread.to_owned(),
        checkpoints: Vec::new(),
    };
    let mut stream = store
        .saver
        .list(Some(CheckpointConfig::all_namespaces(thread)), ListOptions::default());
    while let Some(t) = stream.next().await {
        let t = t.context(format!("cannot read thread {thread:?} of {}", store.name()))?;
        out.checkpoints.push(ImportedCheckpoint {
            checkpoint_ns: t.config.ns().to_owned(),
            parent_checkpoint_id: t.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
            writes: t.pending_writes.into_iter().map(imported_write).collect(),
            checkpoint: t.checkpoint,
            metadata: t.metadata,
        });
    }
    let orphans = keys.orphan_writes().count();
    if orphans > 0 {
        warnings.push(format!(
            "thread {thread:?}: {orphans} stored write(s) belong to no checkpoint and were not copied"
        ));
    }
    Ok(out)
}

/// A pending write as `import_thread` takes it.
fn imported_write(w: PendingWrite) -> ImportedWrite {
    ImportedWrite {
        task_id: w.task_id,
        task_path: w.task_path,
        idx: w.idx,
        channel: w.channel,
        value: w.value,
    }
}

/// Copies one thread: read whole, then written at once (a transaction on
/// SQLite and PostgreSQL, a swap of staged keys on Redis), so that the target never holds part of it, even after a
/// crash. `replace`: the target has the thread, which is replaced in the
/// same transaction.
///
/// # Errors
/// Exit 4 (5 when the target gained the thread meanwhile); the target then
/// does not have the thread (or still has its old one).
async fn copy_thread(
    src: &Store,
    dst: &Store,
    thread: &str,
    replace: bool,
    warnings: &mut Vec<String>,
) -> CliResult<(usize, usize)> {
    let imported = read_thread(src, thread, warnings).await?;
    let counts = (
        imported.checkpoints.len(),
        imported.checkpoints.iter().map(|c| c.writes.len()).sum(),
    );
    let mode = if replace {
        ImportMode::Replace
    } else {
        ImportMode::Create
    };
    let written = || format!("cannot write thread {thread:?} to {}", dst.name());
    dst.import_thread(&imported, mode).await.context(written())?;
    Ok(counts)
}
