//! Checks of the rules in the `# Contract` of [`CheckpointSaver`] and of
//! the behaviour every backend shares (see `docs/design.md`, *Behaviour every
//! backend shares*) that LangGraph's suite does not already check under the
//! same name.

use super::*;
use crate::saver::{ListThreadsOptions, PruneStrategy};
use crate::Error;

mod listing;
mod values;
mod writes;

pub use listing::{
    list_all_namespaces, list_before_excludes_boundary, list_checkpoint_id_restricts, list_filter_bool_is_not_int,
    list_filter_hostile_keys, list_filter_nested_key_order, list_filter_null_matches_missing, list_limit_after_filter,
};
pub use values::{
    put_keeps_values_outside_new_versions, put_nan_and_nul_never_lost, put_overwrites_same_id,
    put_versioned_channel_without_value, put_writes_nan_and_nul_never_lost,
};
pub use writes::{
    pending_writes_sorted, put_writes_before_checkpoint, put_writes_mixed_batch_per_write,
    put_writes_requires_checkpoint_id, put_writes_special_channels_overwrite,
};

/// The latest checkpoint is the one with the greatest id, whatever the
/// insertion order, in every namespace; its config names exactly it.
pub async fn get_tuple_latest_is_max_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let older = generate_checkpoint();
    let newer = generate_checkpoint();
    for ns in ["", "child:1"] {
        let cfg = generate_config(&t).with_ns(ns);
        put_all(s, &cfg, &newer, &generate_metadata("loop", 1)).await?;
        put_all(s, &cfg, &older, &generate_metadata("loop", 0)).await?;
        let tuple = get(s, &cfg).await?;
        ensure_eq!(
            tuple.config,
            stored_config(&t, ns, &newer.id),
            "latest of namespace {ns:?}"
        );
        ensure_eq!(tuple.metadata.step(), Some(1), "step of the latest in {ns:?}");
    }
    Ok(())
}

/// `delete_thread` removes stored values: a checkpoint put again after the
/// delete, naming the old version without a value, reads no value.
pub async fn delete_thread_removes_values(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let v = str_version(1);
    let cp = checkpoint_with(&[("x", Value::from("secret"))], &[("x", v.clone())]);
    put_all(
        s,
        &generate_config(&t).with_ns("child:1"),
        &cp,
        &generate_metadata("loop", 0),
    )
    .await?;
    put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    s.delete_thread(&t).await?;
    for ns in ["", "child:1"] {
        let again = checkpoint_with(&[], &[("x", v.clone())]);
        let cfg = s
            .put(
                &generate_config(&t).with_ns(ns),
                &again,
                &generate_metadata("loop", 0),
                &ChannelVersions::new(),
            )
            .await?;
        let what = format!("value of x in {ns:?} after delete_thread");
        has_value(&get(s, &cfg).await?, "x", None, &what)?;
    }
    Ok(())
}

/// Each extended operation works when [`Capabilities`](crate::saver::Capabilities) declares it and returns
/// [`Error::Unsupported`] when it does not.
pub async fn capabilities_match_behaviour(s: &dyn CheckpointSaver) -> CheckResult {
    let caps = s.capabilities();
    let mut problems = Vec::new();
    let mut judge = |name: &str, declared: bool, result: crate::Result<()>| match (declared, result) {
        (true, Ok(())) | (false, Err(Error::Unsupported { .. })) => {}
        (true, Err(e)) => problems.push(format!("{name} is declared but failed: {e:?}")),
        (false, Ok(())) => problems.push(format!("{name} is not declared but worked")),
        (false, Err(e)) => problems.push(format!("{name} is not declared but failed with {e:?}, not Unsupported")),
    };
    judge(
        "delete_for_runs",
        caps.delete_for_runs,
        s.delete_for_runs(&[new_thread_id()]).await,
    );
    judge(
        "copy_thread",
        caps.copy_thread,
        s.copy_thread(&new_thread_id(), &new_thread_id()).await,
    );
    judge(
        "prune",
        caps.prune,
        s.prune(&[new_thread_id()], PruneStrategy::KeepLatest).await,
    );
    judge(
        "get_delta_channel_history",
        caps.delta_channel_history,
        s.get_delta_channel_history(&generate_config(&new_thread_id()), &["ch".to_owned()])
            .await
            .map(drop),
    );
    let opts = ListThreadsOptions {
        filter: [(MARKER_KEY.to_owned(), Value::from(new_thread_id()))]
            .into_iter()
            .collect(),
        after: None,
        limit: Some(1),
    };
    judge("list_threads", caps.list_threads, s.list_threads(opts).await.map(drop));
    let policy = crate::retention::RetentionPolicy::new().keep_last(1);
    let options = crate::retention::RetainOptions::default().threads([new_thread_id()]);
    judge("retain", caps.retain, s.retain(&policy, options).await.map(drop));
    ensure!(problems.is_empty(), "capabilities {caps:?}: {}", problems.join("; "));
    Ok(())
}
