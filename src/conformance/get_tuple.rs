//! Checks of [`CheckpointSaver::get_tuple`]: LangGraph's 10 tests (see
//! `docs/design.md`, *Conformance suite*).

use super::*;

/// An unknown thread has no checkpoint.
pub async fn get_tuple_nonexistent_returns_none(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    ensure!(
        s.get_tuple(&generate_config(&t)).await?.is_none(),
        "unknown thread: got a tuple"
    );
    let with_id = generate_config(&t).with_checkpoint_id(generate_checkpoint().id);
    ensure!(
        s.get_tuple(&with_id).await?.is_none(),
        "unknown thread and id: got a tuple"
    );
    Ok(())
}

/// Without a checkpoint id, the newest of three chained checkpoints.
pub async fn get_tuple_latest_when_no_checkpoint_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 3).await?;
    let tuple = get(s, &generate_config(&t)).await?;
    ensure_eq!(tuple.checkpoint.id, id_of(&configs[2]), "latest id");
    ensure_eq!(tuple.metadata.step(), Some(2), "latest step");
    ensure_eq!(tuple.config, configs[2], "latest config");
    Ok(())
}

/// With a checkpoint id, exactly that (older) checkpoint.
pub async fn get_tuple_specific_checkpoint_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 3).await?;
    let tuple = get(s, &configs[1]).await?;
    ensure_eq!(tuple.checkpoint.id, id_of(&configs[1]), "id");
    ensure_eq!(tuple.metadata.step(), Some(1), "step");
    ensure_eq!(tuple.config, configs[1], "config");
    ensure_eq!(tuple.parent_config, Some(configs[0].clone()), "parent");
    Ok(())
}

/// `tuple.config` names thread, namespace `""` and the checkpoint id, whether
/// or not the request named the id.
pub async fn get_tuple_config_structure(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = generate_checkpoint();
    put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    let expected = stored_config(&t, "", &cp.id);
    ensure_eq!(get(s, &generate_config(&t)).await?.config, expected, "config of latest");
    ensure_eq!(get(s, &expected).await?.config, expected, "config by id");
    let no_ns = CheckpointConfig {
        checkpoint_ns: None,
        ..expected.clone()
    };
    ensure_eq!(get(s, &no_ns).await?.config, expected, "config by id without namespace");
    Ok(())
}

/// The checkpoint's fields come back as written, including format version 1
/// with its `pending_sends` (as LangGraph's own suite writes it).
pub async fn get_tuple_checkpoint_fields(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut cp = checkpoint_with(&[("ch", Value::from("v"))], &[("ch", ChannelVersion::Int(1))]);
    cp.v = 1;
    cp.pending_sends = Some(Vec::new());
    cp.versions_seen
        .insert("node".into(), channel_versions(&[("ch", ChannelVersion::Int(1))]));
    let stored = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    let got = get(s, &stored).await?.checkpoint;
    ensure_eq!(got.id, cp.id, "id");
    ensure_eq!(got.v, 1, "v");
    ensure!(!got.ts.is_empty(), "empty ts");
    ensure_eq!(got.ts, cp.ts, "ts");
    ensure_eq!(got.channel_values, cp.channel_values, "channel_values");
    ensure_eq!(got.channel_versions, cp.channel_versions, "channel_versions");
    ensure_eq!(got.versions_seen, cp.versions_seen, "versions_seen");
    ensure_eq!(got.pending_sends, cp.pending_sends, "pending_sends");
    Ok(())
}

/// Metadata of an input checkpoint: source `"input"`, step -1.
pub async fn get_tuple_metadata(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let stored = put_empty(s, &generate_config(&t), "input", -1).await?;
    let tuple = get(s, &stored).await?;
    ensure_eq!(tuple.metadata.get("source"), Some(&Value::from("input")), "source");
    ensure_eq!(tuple.metadata.step(), Some(-1), "step");
    Ok(())
}

/// `parent_config` is `None` for a first checkpoint and names the parent for
/// the next one.
pub async fn get_tuple_parent_config(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 2).await?;
    ensure_eq!(get(s, &configs[0]).await?.parent_config, None, "parent of the first");
    ensure_eq!(
        get(s, &generate_config(&t)).await?.parent_config,
        Some(configs[0].clone()),
        "parent of the latest"
    );
    Ok(())
}

/// Pending writes come with the tuple.
pub async fn get_tuple_pending_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    put_writes(s, &cfg, &[("ch", Value::from("val"))], "task1", "").await?;
    let latest = get(s, &CheckpointConfig::new(cfg.thread_id.clone())).await?;
    ensure_eq!(
        latest.pending_writes,
        vec![pw("task1", "ch", "val")],
        "writes of latest"
    );
    ensure_eq!(
        get(s, &cfg).await?.pending_writes,
        latest.pending_writes,
        "writes by id"
    );
    Ok(())
}

/// Namespaces and threads are isolated: a root lookup never returns a
/// child-namespace checkpoint, nor an id of another thread.
pub async fn get_tuple_respects_namespace(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let root = checkpoint_with(&[("who", Value::from("root"))], &[("who", ChannelVersion::Int(1))]);
    put_all(s, &generate_config(&t), &root, &generate_metadata("loop", 0)).await?;
    let child = checkpoint_with(&[("who", Value::from("child"))], &[("who", ChannelVersion::Int(1))]);
    let child_cfg = generate_config(&t).with_ns("child:1");
    put_all(s, &child_cfg, &child, &generate_metadata("loop", 0)).await?;

    let got = get(s, &generate_config(&t)).await?;
    ensure_eq!(got.checkpoint.id, root.id, "latest of the root namespace");
    has_value(&got, "who", Some("root"), "root value")?;
    let got = get(s, &child_cfg).await?;
    ensure_eq!(got.checkpoint.id, child.id, "latest of child:1");
    has_value(&got, "who", Some("child"), "child value")?;
    ensure_eq!(got.config.checkpoint_ns.as_deref(), Some("child:1"), "child namespace");

    let cross = generate_config(&t).with_checkpoint_id(child.id.clone());
    ensure!(
        s.get_tuple(&cross).await?.is_none(),
        "child checkpoint found in the root namespace"
    );
    let other = generate_config(&new_thread_id()).with_checkpoint_id(root.id.clone());
    ensure!(
        s.get_tuple(&other).await?.is_none(),
        "checkpoint found in another thread"
    );
    ensure!(
        s.get_tuple(&generate_config(&t).with_ns("child:2")).await?.is_none(),
        "an empty namespace returned a checkpoint"
    );
    Ok(())
}

/// An unknown id in an existing thread gives `None`, never the latest.
pub async fn get_tuple_nonexistent_checkpoint_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let older = generate_checkpoint().id;
    put_chain(s, &generate_config(&t), 2).await?;
    let newer = generate_checkpoint().id;
    for id in [older, newer] {
        let cfg = generate_config(&t).with_checkpoint_id(id.clone());
        ensure!(s.get_tuple(&cfg).await?.is_none(), "unknown id {id} returned a tuple");
    }
    Ok(())
}
