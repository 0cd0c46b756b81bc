//! Checks of [`CheckpointSaver::put`]: LangGraph's 17 tests (see
//! `docs/design.md`, *Conformance suite*).

use bytes::Bytes;

use super::*;
use crate::serde::{Ext, ExtKind};

/// `put` returns a config naming the stored checkpoint: the thread, the
/// namespace and the checkpoint's own id (not the parent's).
pub async fn put_returns_config(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let got = put_all(s, &generate_config(&t), &cp, &generate_metadata("input", -1)).await?;
    ensure_eq!(got, stored_config(&t, "", &cp.id), "config returned by put");

    let child = generate_checkpoint();
    let got2 = put_all(s, &got, &child, &generate_metadata("loop", 0)).await?;
    ensure_eq!(
        got2,
        stored_config(&t, "", &child.id),
        "config returned by a put with a parent"
    );

    let sub = generate_checkpoint();
    let got3 = put_all(
        s,
        &generate_config(&t).with_ns("child:abc"),
        &sub,
        &generate_metadata("loop", 0),
    )
    .await?;
    ensure_eq!(
        got3,
        stored_config(&t, "child:abc", &sub.id),
        "config returned by a child-namespace put"
    );
    ensure_eq!(
        get(s, &got3).await?.checkpoint.id,
        sub.id,
        "stored under the returned config"
    );
    Ok(())
}

/// A put checkpoint reads back whole from the returned config.
pub async fn put_roundtrip(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut cp = checkpoint_with(&[("msg", Value::from("hello"))], &[("msg", str_version(1))]);
    cp.versions_seen
        .insert("node".into(), channel_versions(&[("msg", str_version(1))]));
    cp.updated_channels = Some(["msg".to_owned()].into());
    let stored = put_all(s, &generate_config(&t), &cp, &generate_metadata("input", -1)).await?;
    let tuple = get(s, &stored).await?;
    ensure_eq!(tuple.checkpoint.id, cp.id, "id");
    has_value(&tuple, "msg", Some("hello"), "channel value")?;
    ensure_eq!(tuple.checkpoint, cp, "the whole checkpoint");
    Ok(())
}

/// Channel values of every kind round-trip unchanged: strings, integers,
/// floats, booleans, nil, bytes, lists, maps (order kept), extension values.
pub async fn put_preserves_channel_values(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let values = vec![
        ("str", Value::from("a string ✓")),
        ("int", Value::Int(42)),
        ("neg", Value::Int(-7)),
        ("big", Value::UInt(u64::MAX)),
        ("float", Value::Float(1.5)),
        ("bool", Value::Bool(false)),
        ("nil", Value::Nil),
        ("bin", Value::Bin(Bytes::from_static(b"\x00\x01\xff"))),
        ("list", Value::from(vec![1, 2, 3])),
        ("dict", Value::map([("nested", Value::Bool(true))])),
        (
            "ordered",
            Value::map([
                ("b", Value::Int(1)),
                ("a", Value::Int(2)),
                ("c", Value::from(vec!["x"])),
            ]),
        ),
        (
            "int_keys",
            Value::Map((vec![(Value::Int(2), Value::from("two")), (Value::Int(1), Value::from("one"))]).into()),
        ),
        ("snapshot", Value::delta_snapshot(Value::from(vec!["a", "b"]))),
        (
            "object",
            Value::Ext(Box::new(Ext::object(
                ExtKind::ConstructorSingleArg,
                "uuid",
                "UUID",
                Value::from("5f4c1f4e-9c3b-4a8e-8a51-3d1f2b7c9e10"),
            )?)),
        ),
        (
            "unknown_ext",
            Value::Ext(Box::new(Ext::raw(42, Bytes::from_static(b"\x01\x02\x03")))),
        ),
    ];
    let versions: Vec<(&str, ChannelVersion)> = values.iter().map(|(c, _)| (*c, ChannelVersion::Int(1))).collect();
    let cp = checkpoint_with(&values, &versions);
    let stored = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    let tuple = get(s, &stored).await?;
    for (ch, v) in &values {
        ensure_eq!(tuple.checkpoint.channel_values.get(*ch), Some(v), "channel {ch:?}");
    }
    ensure_eq!(
        tuple.checkpoint.channel_values.len(),
        values.len(),
        "number of channel values"
    );
    Ok(())
}

/// Channel versions round-trip exactly, integers and LangGraph strings alike.
pub async fn put_preserves_channel_versions(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let versions = [
        ("a", ChannelVersion::Int(1)),
        ("b", ChannelVersion::Int(2)),
        ("c", str_version(7)),
    ];
    let cp = checkpoint_with(
        &[
            ("a", Value::from("A")),
            ("b", Value::from("B")),
            ("c", Value::from("C")),
        ],
        &versions,
    );
    let stored = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    let tuple = get(s, &stored).await?;
    ensure_eq!(
        tuple.checkpoint.channel_versions,
        channel_versions(&versions),
        "channel_versions"
    );
    Ok(())
}

/// The node keys of `versions_seen` survive a put.
pub async fn put_preserves_versions_seen(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut cp = generate_checkpoint();
    cp.versions_seen.insert("__input__".into(), ChannelVersions::new());
    cp.versions_seen
        .insert("node1".into(), channel_versions(&[("a", ChannelVersion::Int(1))]));
    cp.versions_seen.insert("node2".into(), ChannelVersions::new());
    let stored = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    let tuple = get(s, &stored).await?;
    for node in ["__input__", "node1", "node2"] {
        ensure!(
            tuple.checkpoint.versions_seen.contains_key(node),
            "versions_seen lost node {node:?}: {:?}",
            tuple.checkpoint.versions_seen
        );
    }
    Ok(())
}

/// Metadata round-trips: source, step, parents, custom keys of every JSON kind.
pub async fn put_preserves_metadata(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut md = generate_metadata("loop", 3);
    md.insert("parents", Value::map([("", Value::from("1ef0-parent"))]));
    md.insert("user", "ada");
    md.insert("score", 4.5);
    md.insert("count", 12);
    md.insert("flag", true);
    md.insert("none", Value::Nil);
    md.insert("tags", Value::from(vec!["a", "b"]));
    md.insert(
        "nested",
        Value::map([("k", Value::from(vec![Value::Int(1), Value::map([("x", Value::Nil)])]))]),
    );
    let stored = put_all(s, &generate_config(&t), &generate_checkpoint(), &md).await?;
    let tuple = get(s, &stored).await?;
    ensure_eq!(tuple.metadata.get("source"), Some(&Value::from("loop")), "source");
    ensure_eq!(tuple.metadata.step(), Some(3), "step");
    ensure!(
        metadata_eq(&tuple.metadata, &md),
        "metadata changed: got {:?}, put {:?}",
        tuple.metadata,
        md
    );
    Ok(())
}

/// A checkpoint of the root namespace `""` reads back in namespace `""`.
pub async fn put_root_namespace(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let stored = put_all(s, &generate_config(&t).with_ns(""), &cp, &generate_metadata("loop", 0)).await?;
    ensure_eq!(stored.checkpoint_ns.as_deref(), Some(""), "returned namespace");
    let tuple = get(s, &generate_config(&t)).await?;
    ensure_eq!(tuple.config, stored_config(&t, "", &cp.id), "tuple.config");
    Ok(())
}

/// A checkpoint of namespace `child:abc` reads back in that namespace.
pub async fn put_child_namespace(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let cfg = generate_config(&t).with_ns("child:abc");
    let stored = put_all(s, &cfg, &cp, &generate_metadata("loop", 0)).await?;
    ensure_eq!(stored.checkpoint_ns.as_deref(), Some("child:abc"), "returned namespace");
    let tuple = get(s, &cfg).await?;
    ensure_eq!(tuple.config, stored_config(&t, "child:abc", &cp.id), "tuple.config");
    Ok(())
}

/// A put whose config has no namespace stores in the root namespace.
pub async fn put_default_namespace(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let cfg = CheckpointConfig {
        thread_id: t.clone(),
        checkpoint_ns: None,
        checkpoint_id: None,
    };
    let stored = put_all(s, &cfg, &cp, &generate_metadata("loop", 0)).await?;
    ensure_eq!(stored, stored_config(&t, "", &cp.id), "returned config");
    let tuple = get(s, &generate_config(&t)).await?;
    ensure_eq!(tuple.checkpoint.id, cp.id, "root-namespace get");
    let tuple = get(s, &cfg).await?;
    ensure_eq!(tuple.checkpoint.id, cp.id, "get without namespace");
    Ok(())
}

/// Three chained checkpoints of one thread are each retrievable by id.
pub async fn put_multiple_checkpoints_same_thread(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 3).await?;
    for (i, cfg) in configs.iter().enumerate() {
        let tuple = get(s, cfg).await?;
        ensure_eq!(Some(tuple.checkpoint.id), cfg.checkpoint_id, "checkpoint {i}");
        ensure_eq!(tuple.metadata.step(), Some(i as i64), "step of checkpoint {i}");
        ensure_eq!(
            tuple.checkpoint.channel_values.get("step"),
            Some(&Value::Int(i as i64)),
            "value of checkpoint {i}"
        );
    }
    Ok(())
}

/// The same channel in two threads keeps a value per thread.
pub async fn put_multiple_threads_isolated(s: &dyn CheckpointSaver) -> CheckResult {
    let (t1, t2) = (new_thread_id(), new_thread_id());
    let v = ChannelVersion::Int(1);
    let cp1 = checkpoint_with(&[("x", Value::from("one"))], &[("x", v.clone())]);
    let cp2 = checkpoint_with(&[("x", Value::from("two"))], &[("x", v)]);
    put_all(s, &generate_config(&t1), &cp1, &generate_metadata("loop", 0)).await?;
    put_all(s, &generate_config(&t2), &cp2, &generate_metadata("loop", 0)).await?;
    let a = get(s, &generate_config(&t1)).await?;
    let b = get(s, &generate_config(&t2)).await?;
    has_value(&a, "x", Some("one"), "thread 1")?;
    has_value(&b, "x", Some("two"), "thread 2")?;
    ensure_eq!(a.checkpoint.id, cp1.id, "thread 1 id");
    ensure_eq!(b.checkpoint.id, cp2.id, "thread 2 id");
    Ok(())
}

/// The config's checkpoint id becomes the parent: the second checkpoint's
/// `parent_config` names the first; the first has none.
pub async fn put_parent_config(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 2).await?;
    let first = get(s, &configs[0]).await?;
    let second = get(s, &configs[1]).await?;
    ensure_eq!(first.parent_config, None, "parent of the first checkpoint");
    ensure_eq!(
        second.parent_config,
        Some(stored_config(&t, "", &id_of(&configs[0]))),
        "parent of the second checkpoint"
    );
    Ok(())
}

/// Puts `a` = "a1" and `b` = "b1" (both new) as the first checkpoint of a
/// fresh thread; returns its config and the version of `b`.
async fn put_a1_b1(s: &dyn CheckpointSaver) -> Result<(CheckpointConfig, ChannelVersion), CheckFailure> {
    let (a1, b1) = (str_version(1), str_version(1));
    let cp1 = checkpoint_with(
        &[("a", Value::from("a1")), ("b", Value::from("b1"))],
        &[("a", a1), ("b", b1.clone())],
    );
    let c1 = put_all(
        s,
        &generate_config(&new_thread_id()),
        &cp1,
        &generate_metadata("loop", 0),
    )
    .await?;
    Ok((c1, b1))
}

/// A put naming only `a` as new reads `a` new and `b` from the version stored
/// by the first checkpoint; the first checkpoint keeps its values.
pub async fn put_incremental_channel_update(s: &dyn CheckpointSaver) -> CheckResult {
    let (c1, b1) = put_a1_b1(s).await?;
    let a2 = str_version(2);
    let cp2 = checkpoint_with(&[("a", Value::from("a2"))], &[("a", a2.clone()), ("b", b1)]);
    let c2 = put_new(s, &c1, &cp2, &generate_metadata("loop", 1), &[("a", a2)]).await?;
    let second = get(s, &c2).await?;
    has_value(&second, "a", Some("a2"), "new a")?;
    has_value(&second, "b", Some("b1"), "unchanged b")?;
    let first = get(s, &c1).await?;
    has_value(&first, "a", Some("a1"), "old a")?;
    has_value(&first, "b", Some("b1"), "old b")?;
    Ok(())
}

/// A channel added by the second put reads back, next to the first put's.
pub async fn put_new_channel_added(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let a1 = ChannelVersion::Int(1);
    let cp1 = checkpoint_with(&[("a", Value::from("a1"))], &[("a", a1.clone())]);
    let c1 = put_all(s, &generate_config(&t), &cp1, &generate_metadata("loop", 0)).await?;
    let b1 = ChannelVersion::Int(1);
    let cp2 = checkpoint_with(&[("b", Value::from("b1"))], &[("a", a1), ("b", b1.clone())]);
    let c2 = put_new(s, &c1, &cp2, &generate_metadata("loop", 1), &[("b", b1)]).await?;
    let second = get(s, &c2).await?;
    has_value(&second, "a", Some("a1"), "a")?;
    has_value(&second, "b", Some("b1"), "b")?;
    let first = get(s, &c1).await?;
    has_value(&first, "b", None, "b in the first checkpoint")?;
    Ok(())
}

/// A channel absent from the second checkpoint's versions has no value there.
pub async fn put_channel_removed(s: &dyn CheckpointSaver) -> CheckResult {
    let (c1, _) = put_a1_b1(s).await?;
    let cp2 = checkpoint_with(&[("a", Value::from("a2"))], &[("a", str_version(2))]);
    let c2 = put_all(s, &c1, &cp2, &generate_metadata("loop", 1)).await?;
    let second = get(s, &c2).await?;
    has_value(&second, "b", None, "removed channel b")?;
    ensure_eq!(second.checkpoint.channel_versions.get("b"), None, "version of b");
    has_value(&second, "a", Some("a2"), "a")?;
    let first = get(s, &c1).await?;
    has_value(&first, "b", Some("b1"), "b at cp1")?;
    Ok(())
}

/// Metadata `run_id` round-trips.
pub async fn put_preserves_run_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut md = generate_metadata("loop", 0);
    md.insert("run_id", "run-1f0e2c4a");
    let stored = put_all(s, &generate_config(&t), &generate_checkpoint(), &md).await?;
    let tuple = get(s, &stored).await?;
    ensure_eq!(tuple.metadata.run_id(), Some("run-1f0e2c4a"), "run_id");
    Ok(())
}

/// Nested `versions_seen` values round-trip exactly.
pub async fn put_preserves_versions_seen_values(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut cp = generate_checkpoint();
    cp.versions_seen.insert("__input__".into(), ChannelVersions::new());
    cp.versions_seen.insert(
        "node1".into(),
        channel_versions(&[("a", ChannelVersion::Int(1)), ("b", ChannelVersion::Int(2))]),
    );
    cp.versions_seen
        .insert("node2".into(), channel_versions(&[("c", str_version(3))]));
    let stored = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    let tuple = get(s, &stored).await?;
    ensure_eq!(tuple.checkpoint.versions_seen, cp.versions_seen, "versions_seen");
    Ok(())
}
