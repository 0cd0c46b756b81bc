//! Options and operations at the edges (`docs/reliability.md`, rows
//! B21–B30 and B81): limits of 0 and `usize::MAX`, `before` ids from elsewhere,
//! empty checkpoint ids, many writes, hostile id lists.

use super::identifiers::{checkpoint_of, put_values, ID1, ID2, ID3};
use super::*;
use crate::saver::{ListThreadsOptions, PruneStrategy};
use crate::Error;

/// Three chained checkpoints `ID1`–`ID3` in a fresh thread carrying a marker
/// (its thread id); each holds `x` = its id, at versions 1, 2, 3 (a
/// version names one value: what a saver answers to one version put with
/// several values is not this catalogue's business). Returns the thread id.
async fn three(s: &dyn CheckpointSaver) -> Result<String, CheckFailure> {
    let t = new_thread_id();
    let mut parent = generate_config(&t);
    for (v, id) in (1..).zip([ID1, ID2, ID3]) {
        let mut cp = checkpoint_of(id, &[("x", Value::from(id))]);
        cp.channel_versions.insert("x".into(), ChannelVersion::Int(v));
        parent = put_all(s, &parent, &cp, &marked_metadata("loop", 0, &t)).await?;
    }
    Ok(t)
}

/// B21: `limit` 0 lists nothing, `usize::MAX` everything; `list_threads`
/// with limit 0 lists nothing.
pub async fn list_limit_zero_and_max(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    ensure!(
        list(s, None, marker_filter(&t).limit(0)).await?.is_empty(),
        "limit 0 listed checkpoints"
    );
    ensure!(
        list(s, None, ListOptions::default().limit(0)).await?.is_empty(),
        "limit 0 over the store listed checkpoints"
    );
    ensure_eq!(
        list(s, None, marker_filter(&t).limit(usize::MAX)).await?.len(),
        3,
        "limit usize::MAX"
    );
    if s.capabilities().list_threads {
        let threads = s
            .list_threads(ListThreadsOptions {
                limit: Some(0),
                ..Default::default()
            })
            .await?;
        ensure!(threads.is_empty(), "list_threads with limit 0: {threads:?}");
    }
    Ok(())
}

/// B22: `before` an id that exists only in another thread compares ids as
/// strings, whatever their thread: this thread's smaller ids.
pub async fn list_before_id_of_another_thread(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    let other = format!("{ID2}x");
    put_values(s, &generate_config(&new_thread_id()), &other, &[]).await?;
    let ids = list_ids(s, Some(generate_config(&t)), ListOptions::default().before(&other)).await?;
    ensure_eq!(ids, [ID2, ID1], "ids before {other:?}");
    Ok(())
}

/// B23: `before` `""` lists nothing, `"\u{10FFFF}"` everything, `"'; --"`
/// nothing (`'` sorts before every id).
pub async fn list_before_extremes(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    ensure!(
        list(s, None, ListOptions::default().before("")).await?.is_empty(),
        "before \"\" listed checkpoints"
    );
    ensure_eq!(
        list(s, None, marker_filter(&t).before("\u{10FFFF}")).await?.len(),
        3,
        "before U+10FFFF"
    );
    ensure!(
        list(s, None, marker_filter(&t).before("'; --")).await?.is_empty(),
        "\"'\" sorts before every id"
    );
    Ok(())
}

/// B24: a checkpoint id `""` is no id: `get_tuple` reads the latest, `put`
/// stores without parent, `put_writes` refuses with `InvalidInput`.
pub async fn get_tuple_empty_checkpoint_id_means_none(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    let got = get(s, &generate_config(&t).with_checkpoint_id("")).await?;
    ensure_eq!(got.checkpoint.id, ID3, "an empty id is no id: the latest");
    let stored = put_values(s, &generate_config(&new_thread_id()).with_checkpoint_id(""), ID1, &[]).await?;
    ensure!(
        get(s, &stored).await?.parent_config.is_none(),
        "a parent from an empty id"
    );
    let got = s
        .put_writes(
            &generate_config(&t).with_checkpoint_id(""),
            &[("x".to_owned(), Value::Nil)],
            "task",
            "",
        )
        .await;
    ensure!(
        matches!(got, Err(Error::InvalidInput { .. })),
        "put_writes with an empty checkpoint id: {got:?}"
    );
    Ok(())
}

/// B25: `put_writes` without a checkpoint id is `InvalidInput` and stores
/// nothing.
pub async fn put_writes_without_checkpoint_id_refused(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let got = s
        .put_writes(&generate_config(&t), &[("x".to_owned(), Value::Int(1))], "task", "")
        .await;
    ensure!(
        matches!(got, Err(Error::InvalidInput { .. })),
        "put_writes without checkpoint id: {got:?}"
    );
    let stored = put_values(s, &generate_config(&t), ID1, &[]).await?;
    ensure!(
        get(s, &stored).await?.pending_writes.is_empty(),
        "a refused write was stored"
    );
    Ok(())
}

/// B26: 10 000 writes in one `put_writes` are all stored, in index order.
pub async fn put_writes_ten_thousand_in_one_call(s: &dyn CheckpointSaver) -> CheckResult {
    let stored = put_values(s, &generate_config(&new_thread_id()), ID1, &[]).await?;
    let writes: Vec<(String, Value)> = (0..10_000).map(|i| (format!("ch{i}"), Value::Int(i))).collect();
    s.put_writes(&stored, &writes, "task", "").await?;
    let got = get(s, &stored).await?;
    ensure_eq!(got.pending_writes.len(), 10_000, "writes stored");
    for (i, w) in (0i64..).zip(&got.pending_writes) {
        ensure_eq!(w.value, Value::Int(i), "write {i} in index order");
    }
    Ok(())
}

/// B27: `copy_thread(t, t)` is `ThreadExists` and changes nothing.
pub async fn copy_thread_onto_itself_refused(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    let got = s.copy_thread(&t, &t).await;
    ensure!(
        matches!(&got, Err(Error::ThreadExists { thread_id }) if *thread_id == t),
        "copy_thread onto itself: {got:?}"
    );
    ensure_eq!(list(s, None, marker_filter(&t)).await?.len(), 3, "checkpoints after");
    Ok(())
}

/// B81: a source id with U+0000 (which some stores cannot hold) is a
/// thread nobody stored: copying it onto a thread that holds checkpoints is
/// `ThreadExists`, onto an empty one `Ok`; nothing changes either way.
pub async fn copy_thread_unstorable_source_is_unknown(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    let source = format!("{}\0x", new_thread_id());
    let got = s.copy_thread(&source, &t).await;
    ensure!(
        matches!(&got, Err(Error::ThreadExists { thread_id }) if *thread_id == t),
        "copy_thread from {source:?} onto a thread with checkpoints: {got:?}"
    );
    ensure_eq!(list(s, None, marker_filter(&t)).await?.len(), 3, "checkpoints after");
    let empty = new_thread_id();
    s.copy_thread(&source, &empty).await?;
    ensure!(
        list(
            s,
            Some(CheckpointConfig::all_namespaces(&empty)),
            ListOptions::default()
        )
        .await?
        .is_empty(),
        "checkpoints of the empty target after the copy"
    );
    Ok(())
}

/// B28: `prune` and `delete_for_runs` with empty lists, SQL, `%`, U+0000
/// and 10 000 run ids that match nothing delete nothing. (`""` is passed
/// as a run id only: the empty thread is a thread like any other, B01.)
pub async fn delete_for_runs_hostile_id_lists_delete_nothing(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    let hostile = ["' OR 1=1 --", "%", "\u{0}"].map(str::to_owned);
    let with_empty: Vec<String> = hostile.iter().cloned().chain([String::new()]).collect();
    let caps = s.capabilities();
    if caps.prune {
        s.prune(&[], PruneStrategy::Delete).await?;
        // Ids nothing can match (U+0000 included, which no PostgreSQL text holds).
        s.prune(&hostile, PruneStrategy::Delete).await?;
    }
    if caps.delete_for_runs {
        s.delete_for_runs(&[]).await?;
        s.delete_for_runs(&with_empty).await?;
        let many: Vec<String> = (0..10_000).map(|i| format!("run-{i}")).collect();
        s.delete_for_runs(&many).await?;
    }
    ensure_eq!(list(s, None, marker_filter(&t)).await?.len(), 3, "nothing deleted");
    Ok(())
}

/// B29: delta history of 1 003 channels, `""` and SQL among them, answers
/// every channel; unknown ones are empty.
pub async fn delta_channel_history_many_hostile_channels(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    let mut channels: Vec<String> = (0..1000).map(|i| format!("ch-{i}")).collect();
    channels.extend(["'; --".to_owned(), String::new(), "x".to_owned()]);
    let history = s.get_delta_channel_history(&generate_config(&t), &channels).await?;
    ensure_eq!(history.len(), channels.len(), "channels answered");
    ensure!(
        history
            .get("ch-0")
            .is_some_and(|h| h.seed.is_none() && h.writes.is_empty()),
        "an unknown channel has history {:?}",
        history.get("ch-0")
    );
    ensure_eq!(
        history.get("x").and_then(|h| h.seed.clone()),
        Some(Value::from(ID2)),
        "the parent's value seeds x"
    );
    Ok(())
}

/// B30: `list_threads` after `"\u{10FFFF}"` is empty; after SQL with a
/// `null` filter on a SQL key, the `null` matches the missing key.
pub async fn list_threads_extremes(s: &dyn CheckpointSaver) -> CheckResult {
    let t = three(s).await?;
    let after_all = s
        .list_threads(ListThreadsOptions {
            after: Some("\u{10FFFF}".to_owned()),
            ..Default::default()
        })
        .await?;
    ensure!(after_all.is_empty(), "threads after U+10FFFF: {after_all:?}");
    let hostile = s
        .list_threads(ListThreadsOptions {
            after: Some("' OR 1=1 --".to_owned()),
            filter: [
                ("'; --".to_owned(), Value::Nil),
                (MARKER_KEY.to_owned(), Value::from(t.as_str())),
            ]
            .into_iter()
            .collect(),
            limit: Some(usize::MAX),
        })
        .await?;
    ensure_eq!(hostile.len(), 1, "a null filter matches the missing key");
    Ok(())
}
