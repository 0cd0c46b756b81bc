//! Checks of [`CheckpointSaver::list_threads`] (ours).

use super::*;
use crate::saver::{ListThreadsOptions, ThreadInfo};

fn options(marker: &str) -> ListThreadsOptions {
    ListThreadsOptions {
        filter: [(MARKER_KEY.to_owned(), Value::from(marker))].into_iter().collect(),
        after: None,
        limit: None,
    }
}

async fn thread_ids(s: &dyn CheckpointSaver, opts: ListThreadsOptions) -> Result<Vec<String>, CheckFailure> {
    Ok(s.list_threads(opts).await?.into_iter().map(|t| t.thread_id).collect())
}

/// Three threads carrying `marker`, sorted by id, each with two chained
/// checkpoints; returns (sorted thread ids, config of each latest).
async fn threads(s: &dyn CheckpointSaver, marker: &str) -> Result<(Vec<String>, Vec<CheckpointConfig>), CheckFailure> {
    let mut ts = vec![new_thread_id(), new_thread_id(), new_thread_id()];
    ts.sort();
    let mut latest = Vec::new();
    for t in &ts {
        let first = put_all(
            s,
            &generate_config(t),
            &generate_checkpoint(),
            &marked_metadata("input", -1, marker),
        )
        .await?;
        latest.push(put_all(s, &first, &generate_checkpoint(), &marked_metadata("loop", 0, marker)).await?);
    }
    Ok((ts, latest))
}

/// Threads come in ascending id order, each with its latest checkpoint and
/// that checkpoint's metadata.
pub async fn list_threads_ordering(s: &dyn CheckpointSaver) -> CheckResult {
    let marker = new_thread_id();
    let (ts, latest) = threads(s, &marker).await?;
    let got = s.list_threads(options(&marker)).await?;
    let want: Vec<ThreadInfo> = ts
        .iter()
        .zip(&latest)
        .map(|(t, cfg)| ThreadInfo {
            thread_id: t.clone(),
            latest: cfg.clone(),
            metadata: marked_metadata("loop", 0, &marker),
        })
        .collect();
    ensure_eq!(got.len(), want.len(), "number of threads: {got:?}");
    for (g, w) in got.iter().zip(&want) {
        ensure_eq!(g.thread_id, w.thread_id, "thread order");
        ensure_eq!(g.latest, w.latest, "latest of {}", w.thread_id);
        ensure!(
            metadata_eq(&g.metadata, &w.metadata),
            "metadata of {}: got {:?}, expected {:?}",
            w.thread_id,
            g.metadata,
            w.metadata
        );
    }
    Ok(())
}

/// `after` is an exclusive cursor on thread ids.
pub async fn list_threads_after_cursor(s: &dyn CheckpointSaver) -> CheckResult {
    let marker = new_thread_id();
    let (ts, _) = threads(s, &marker).await?;
    let cases: [(&str, &[String]); 4] = [("", &ts[..]), (&ts[0], &ts[1..]), (&ts[1], &ts[2..]), (&ts[2], &[])];
    for (after, want) in cases {
        let opts = ListThreadsOptions {
            after: Some(after.to_owned()),
            ..options(&marker)
        };
        ensure_eq!(thread_ids(s, opts).await?, want.to_vec(), "after {after:?}");
    }
    Ok(())
}

/// `limit` caps the page (after the filter); pages chained by `after` cover
/// every thread once.
pub async fn list_threads_limit(s: &dyn CheckpointSaver) -> CheckResult {
    let marker = new_thread_id();
    let (ts, _) = threads(s, &marker).await?;
    let opts = ListThreadsOptions {
        limit: Some(2),
        ..options(&marker)
    };
    ensure_eq!(thread_ids(s, opts).await?, ts[..2].to_vec(), "limit 2");
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let opts = ListThreadsOptions {
            limit: Some(1),
            after: after.clone(),
            ..options(&marker)
        };
        let page = thread_ids(s, opts).await?;
        ensure!(page.len() <= 1, "a page of limit 1 held {page:?}");
        let Some(last) = page.last().cloned() else { break };
        ensure!(paged.len() < ts.len(), "paging does not end: {paged:?}");
        paged.push(last.clone());
        after = Some(last);
    }
    ensure_eq!(paged, ts, "threads paged one by one");
    let opts = ListThreadsOptions {
        limit: Some(0),
        ..options(&marker)
    };
    ensure_eq!(thread_ids(s, opts).await?, Vec::<String>::new(), "limit 0");
    Ok(())
}

/// The filter selects threads by their latest checkpoint's metadata.
pub async fn list_threads_filter(s: &dyn CheckpointSaver) -> CheckResult {
    let marker = new_thread_id();
    let mut matching = Vec::new();
    for (i, kind) in ["x", "y", "x", "y"].into_iter().enumerate() {
        let t = new_thread_id();
        let mut md = marked_metadata("loop", i as i64, &marker);
        md.insert("kind", kind);
        put_all(s, &generate_config(&t), &generate_checkpoint(), &md).await?;
        if kind == "x" {
            matching.push(t);
        }
    }
    matching.sort();
    let mut opts = options(&marker);
    opts.filter.insert("kind".to_owned(), Value::from("x"));
    ensure_eq!(thread_ids(s, opts).await?, matching, "kind = x");
    let mut opts = options(&marker);
    opts.filter.insert("kind".to_owned(), Value::from("z"));
    ensure_eq!(thread_ids(s, opts).await?, Vec::<String>::new(), "kind = z");
    Ok(())
}

/// A thread whose older checkpoint matches but whose latest does not is not
/// listed.
pub async fn list_threads_filter_applies_to_latest(s: &dyn CheckpointSaver) -> CheckResult {
    let marker = new_thread_id();
    let t = new_thread_id();
    let mut old = marked_metadata("input", -1, &marker);
    old.insert("kind", "x");
    let first = put_all(s, &generate_config(&t), &generate_checkpoint(), &old).await?;
    let mut new = marked_metadata("loop", 0, &marker);
    new.insert("kind", "y");
    put_all(s, &first, &generate_checkpoint(), &new).await?;
    for (kind, want) in [("x", vec![]), ("y", vec![t.clone()])] {
        let mut opts = options(&marker);
        opts.filter.insert("kind".to_owned(), Value::from(kind));
        ensure_eq!(thread_ids(s, opts).await?, want, "kind = {kind}");
    }
    Ok(())
}

/// The latest checkpoint is the greatest id across all namespaces (ties: the
/// greatest namespace), with that checkpoint's metadata.
pub async fn list_threads_latest_across_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let marker = new_thread_id();
    let t = new_thread_id();
    put_all(
        s,
        &generate_config(&t),
        &generate_checkpoint(),
        &marked_metadata("loop", 0, &marker),
    )
    .await?;
    let newest = generate_checkpoint();
    let mut md = marked_metadata("loop", 5, &marker);
    md.insert("which", "child");
    let child = put_all(s, &generate_config(&t).with_ns("child:1"), &newest, &md).await?;
    let got = s.list_threads(options(&marker)).await?;
    ensure_eq!(got.len(), 1, "threads: {got:?}");
    ensure_eq!(got[0].latest, child, "latest across namespaces");
    ensure_eq!(
        got[0].metadata.get("which"),
        Some(&Value::from("child")),
        "metadata of the latest"
    );

    // One id in several namespaces: the greatest namespace wins.
    let marker = new_thread_id();
    let t = new_thread_id();
    let shared = generate_checkpoint();
    for ns in ["child:1", "", "child:2", "a"] {
        let mut md = marked_metadata("loop", 0, &marker);
        md.insert("ns", ns);
        put_all(s, &generate_config(&t).with_ns(ns), &shared, &md).await?;
    }
    let got = s.list_threads(options(&marker)).await?;
    ensure_eq!(got.len(), 1, "threads: {got:?}");
    ensure_eq!(
        got[0].latest,
        stored_config(&t, "child:2", &shared.id),
        "latest on an id tie"
    );
    ensure_eq!(
        got[0].metadata.get("ns"),
        Some(&Value::from("child:2")),
        "metadata on an id tie"
    );
    Ok(())
}
