//! `export URL`: the canonical JSON dump `read_fixtures.py` prints, byte for
//! byte (`--normalize` as its `--normalize`).

use checkpointer::serde::render::{self, DumpOptions};

use super::{finish, open, thread_problems};
use crate::args::ExportArgs;
use crate::error::{CliError, CliResult, Context, Exit};
use crate::output::{emit, Style, Ui};
use crate::store::{Access, Store};

pub async fn run(args: ExportArgs, ui: Ui) -> CliResult {
    let store = open(&args.url, Access::Read).await?;
    let out = body(&store, &args, ui).await;
    let (dump, problems) = finish(store, out).await?;
    let mut dump = if args.normalize {
        render::normalize(&dump).map_err(|e| CliError::failure(format!("cannot normalize the dump: {e}")))?
    } else {
        dump
    };
    if args.no_source {
        if let Some(fields) = dump.as_object_mut() {
            fields.remove("source");
        }
    }
    let text = render::python_json_indented(&dump, 1) + "\n";
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| CliError::failure(format!("cannot write {}: {e}", path.display())))?,
        None => emit(&text)?,
    }
    // the dump's errors are those read_fixtures.py reports; what the CLI
    // checks beyond them is on stderr only, so the dump stays Python's
    let errors = dump["errors"].as_array().map_or(&[][..], Vec::as_slice);
    if errors.is_empty() && problems.is_empty() {
        return Ok(());
    }
    for e in errors {
        eprintln!("{} {}", ui.paint_err(Style::Red, "ERROR:"), e.as_str().unwrap_or(""));
    }
    for p in &problems {
        eprintln!("{} {p}", ui.paint_err(Style::Red, "ERROR:"));
    }
    Err(CliError::new(
        Exit::Inconsistent,
        format!(
            "the store reads inconsistently ({} error(s) listed in the dump, {} more above)",
            errors.len(),
            problems.len()
        ),
    ))
}

/// The dump, and the problems it does not list (see [`problems_of`]).
async fn body(store: &Store, args: &ExportArgs, ui: Ui) -> CliResult<(serde_json::Value, Vec<String>)> {
    let threads = if args.thread.is_empty() {
        None
    } else {
        store.require_threads(&args.thread).await?;
        Some(args.thread.clone())
    };
    let bar = ui.progress(None, "reading checkpoints");
    let tick = || bar.inc(1);
    let options = DumpOptions {
        threads: threads.as_deref(),
        on_checkpoint: Some(&tick),
    };
    let dump = render::dump_with(store.saver.as_ref(), &store.source_name(), options)
        .await
        .context(format!("cannot read {}", store.name()));
    let (dump, mut problems) = match dump {
        Ok(d) => (d, Vec::new()),
        Err(e) => {
            // a row that cannot be read: name it and dump the other threads
            let all = match &threads {
                Some(t) => t.clone(),
                None => store.thread_ids().await?,
            };
            let (mut good, mut bad) = (Vec::new(), Vec::new());
            for t in all {
                let rows = store.bad_rows(&t).await;
                if rows.is_empty() {
                    good.push(t);
                } else {
                    bad.extend(rows);
                }
            }
            if bad.is_empty() {
                bar.finish_and_clear();
                return Err(e);
            }
            let options = DumpOptions {
                threads: Some(&good),
                on_checkpoint: Some(&tick),
            };
            let dump = render::dump_with(store.saver.as_ref(), &store.source_name(), options)
                .await
                .context(format!("cannot read {}", store.name()))?;
            (dump, bad)
        }
    };
    bar.finish_and_clear();
    problems.extend(problems_of(store, &dump).await?);
    Ok((dump, problems))
}

/// What the dump does not show: rows that could not be read (named by
/// thread, namespace and checkpoint), and the verifier's missing rows
/// (missing parents and writes, writes of checkpoints that do not exist:
/// [`super::MISSING_ROWS`]).
async fn problems_of(store: &Store, dump: &serde_json::Value) -> CliResult<Vec<String>> {
    let listed = dump["threads"].as_array().map_or(&[][..], Vec::as_slice);
    let mut out = Vec::new();
    let unreadable = dump["errors"].as_array().is_some_and(|e| {
        e.iter()
            .any(|e| e.as_str().is_some_and(|e| e.starts_with("list failed")))
    });
    // threads with a row that cannot be read: the row is named, and what its
    // absence makes look missing (its children's parent, its writes) is not
    let mut broken = std::collections::HashSet::new();
    if unreadable {
        // the dump cannot say which thread a failed row belongs to
        let threads = store.thread_ids().await?;
        for t in threads {
            let rows = store.bad_rows(&t).await;
            if !rows.is_empty() {
                out.extend(rows);
                broken.insert(t);
            }
        }
    }
    for th in listed {
        let thread = th["thread_id"].as_str().unwrap_or("");
        if broken.contains(thread) {
            continue;
        }
        match thread_problems(store, thread).await? {
            Ok(problems) | Err(problems) => out.extend(problems),
        }
    }
    Ok(out)
}
