//! Checks of the rules in the `# Contract` of [`CheckpointSaver`] and in
//! DESIGN §4 that spec §9.2 does not already check under the same name.

use super::*;
use crate::checkpoint::channels;
use crate::saver::{json_eq, ListThreadsOptions, PruneStrategy};
use crate::Error;

/// Putting a checkpoint id again replaces its checkpoint, its metadata (no
/// key of the first survives) and its parent.
pub async fn put_overwrites_same_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let p1 = put_all(
        s,
        &generate_config(&t),
        &generate_checkpoint(),
        &generate_metadata("input", -1),
    )
    .await?;
    let p2 = put_all(
        s,
        &generate_config(&t),
        &generate_checkpoint(),
        &generate_metadata("input", -1),
    )
    .await?;
    let first = checkpoint_with(&[("x", Value::from("one"))], &[("x", str_version(1))]);
    let mut md1 = generate_metadata("loop", 1);
    md1.insert("old_key", 1);
    put_all(s, &p1, &first, &md1).await?;

    let mut second = checkpoint_with(&[("x", Value::from("two"))], &[("x", str_version(2))]);
    second.id = first.id.clone();
    let mut md2 = generate_metadata("update", 2);
    md2.insert("new_key", "yes");
    let stored = put_all(s, &p2, &second, &md2).await?;

    let tuple = get(s, &stored).await?;
    ensure_eq!(tuple.checkpoint, second, "checkpoint after re-put");
    ensure!(
        metadata_eq(&tuple.metadata, &md2),
        "metadata after re-put: got {:?}, expected {:?}",
        tuple.metadata,
        md2
    );
    ensure_eq!(tuple.parent_config, Some(p2.clone()), "parent after re-put");
    let listed = list_ids(s, Some(generate_config(&t)), ListOptions::default()).await?;
    ensure_eq!(
        listed.iter().filter(|id| **id == first.id).count(),
        1,
        "listings of the re-put id"
    );
    ensure_eq!(listed.len(), 3, "checkpoints in the thread");
    Ok(())
}

/// A value present in `channel_values` is stored even when its channel is not
/// in `new_versions` (InMemory in Python drops it; we never do).
pub async fn put_keeps_values_outside_new_versions(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let (a1, b1) = (str_version(1), str_version(1));
    let cp = checkpoint_with(
        &[("a", Value::from("A")), ("b", Value::from("B"))],
        &[("a", a1.clone()), ("b", b1)],
    );
    let stored = s
        .put(
            &generate_config(&t),
            &cp,
            &generate_metadata("loop", 0),
            &channel_versions(&[("a", a1)]),
        )
        .await?;
    let tuple = get(s, &stored).await?;
    ensure_eq!(
        tuple.checkpoint.channel_values.get("a"),
        Some(&Value::from("A")),
        "a (in new_versions)"
    );
    ensure_eq!(
        tuple.checkpoint.channel_values.get("b"),
        Some(&Value::from("B")),
        "b (not in new_versions)"
    );

    // With an empty new_versions too.
    let cp2 = checkpoint_with(&[("c", Value::Int(3))], &[("c", ChannelVersion::Int(1))]);
    let stored = s
        .put(&stored, &cp2, &generate_metadata("loop", 1), &ChannelVersions::new())
        .await?;
    ensure_eq!(
        get(s, &stored).await?.checkpoint.channel_values.get("c"),
        Some(&Value::Int(3)),
        "c (empty new_versions)"
    );
    Ok(())
}

/// A channel in `new_versions` but absent from `channel_values` has no value,
/// at that checkpoint and at later ones naming the same version.
pub async fn put_versioned_channel_without_value(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let v = str_version(1);
    let cp1 = checkpoint_with(
        &[("other", Value::Int(1))],
        &[("other", ChannelVersion::Int(1)), ("c", v.clone())],
    );
    let c1 = put_all(s, &generate_config(&t), &cp1, &generate_metadata("loop", 0)).await?;
    let got = get(s, &c1).await?.checkpoint;
    ensure_eq!(got.channel_values.get("c"), None, "value of c");
    ensure_eq!(got.channel_versions.get("c"), Some(&v), "version of c");
    ensure_eq!(got.channel_values.get("other"), Some(&Value::Int(1)), "other");

    let cp2 = checkpoint_with(&[], &[("c", v)]);
    let c2 = s
        .put(&c1, &cp2, &generate_metadata("loop", 1), &ChannelVersions::new())
        .await?;
    ensure_eq!(
        get(s, &c2).await?.checkpoint.channel_values.get("c"),
        None,
        "c at the next checkpoint"
    );
    Ok(())
}

fn is_nan(v: &Value) -> bool {
    match v {
        Value::Float(f) => f.is_nan(),
        Value::F32(f) => f.is_nan(),
        _ => false,
    }
}

/// Exact equality where NaN equals NaN.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q)),
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k1, v1), (k2, v2))| same_value(k1, k2) && same_value(v1, v2))
        }
        _ => (is_nan(a) && is_nan(b)) || a == b,
    }
}

/// JSON equality where NaN equals NaN.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q)),
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.iter()
                        .find(|(k2, _)| json_eq(k, k2))
                        .is_some_and(|(_, v2)| same_json(v, v2))
                })
        }
        _ => (is_nan(a) && is_nan(b)) || json_eq(a, b),
    }
}

fn is_clear_refusal(err: &Error) -> bool {
    matches!(err, Error::InvalidInput { .. } | Error::Serde { .. })
}

/// Values Python's Postgres saver cannot hold (NaN, strings with U+0000), in
/// channel values and in metadata, are either stored and read back exactly,
/// or refused with [`Error::InvalidInput`]/[`Error::Serde`] leaving nothing
/// stored. Never silently changed.
pub async fn put_nan_and_nul_never_lost(s: &dyn CheckpointSaver) -> CheckResult {
    let hostile = Value::map([
        ("nan", Value::Float(f64::NAN)),
        ("nul", Value::from("a\0b")),
        ("list", Value::from(vec![Value::from("\0"), Value::Float(f64::NAN)])),
    ]);

    // Channel values.
    let t = new_thread_id();
    let cp = checkpoint_with(
        &[
            ("nan", Value::Float(f64::NAN)),
            ("nul", Value::from("x\0y")),
            ("nested", hostile.clone()),
        ],
        &[
            ("nan", ChannelVersion::Int(1)),
            ("nul", ChannelVersion::Int(1)),
            ("nested", ChannelVersion::Int(1)),
        ],
    );
    let md = generate_metadata("loop", 0);
    match s.put(&generate_config(&t), &cp, &md, &cp.channel_versions).await {
        Ok(cfg) => {
            let got = get(s, &cfg).await?.checkpoint;
            for (ch, want) in &cp.channel_values {
                let have = got.channel_values.get(ch);
                ensure!(
                    have.is_some_and(|h| same_value(h, want)),
                    "channel {ch:?} changed: got {have:?}, put {want:?}"
                );
            }
        }
        Err(e) if is_clear_refusal(&e) => {
            let cfg = generate_config(&t).with_checkpoint_id(cp.id.clone());
            ensure!(
                s.get_tuple(&cfg).await?.is_none(),
                "refused put left a checkpoint behind"
            );
        }
        Err(e) => return Err(CheckFailure::new(format!("put of NaN/NUL values: unclear error {e:?}"))),
    }

    // Metadata.
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let mut md = generate_metadata("loop", 0);
    md.insert("note", "a\0b");
    md.insert("nan", Value::Float(f64::NAN));
    md.insert("nested", hostile);
    match s.put(&generate_config(&t), &cp, &md, &cp.channel_versions).await {
        Ok(cfg) => {
            let got = get(s, &cfg).await?.metadata;
            for (k, want) in &md.0 {
                let have = got.get(k);
                ensure!(
                    have.is_some_and(|h| same_json(h, want)),
                    "metadata {k:?} changed: got {have:?}, put {want:?}"
                );
            }
        }
        Err(e) if is_clear_refusal(&e) => {
            let cfg = generate_config(&t).with_checkpoint_id(cp.id.clone());
            ensure!(
                s.get_tuple(&cfg).await?.is_none(),
                "refused put left a checkpoint behind"
            );
        }
        Err(e) => {
            return Err(CheckFailure::new(format!(
                "put of NaN/NUL metadata: unclear error {e:?}"
            )))
        }
    }
    Ok(())
}

/// A special-channel write replaces an earlier one of the same task, for each
/// of `__error__`, `__scheduled__`, `__interrupt__`, `__resume__`.
pub async fn put_writes_special_channels_overwrite(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    let specials = [
        channels::RESUME,
        channels::INTERRUPT,
        channels::SCHEDULED,
        channels::ERROR,
    ];
    for ch in specials {
        put_writes(s, &cfg, &[(ch, Value::from("first"))], "task1", "").await?;
    }
    for ch in specials {
        put_writes(s, &cfg, &[(ch, Value::from("second"))], "task1", "").await?;
    }
    // Fixed indexes -4, -3, -2, -1: the order of `specials`.
    let expected: Vec<PendingWrite> = specials.iter().map(|ch| pw("task1", ch, "second")).collect();
    ensure_eq!(get(s, &cfg).await?.pending_writes, expected, "pending writes");
    Ok(())
}

/// The conflict rule is decided per write: in a batch mixing regular and
/// special writes, the special write still replaces and the regular one still
/// keeps the first value.
pub async fn put_writes_mixed_batch_per_write(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    put_writes(s, &cfg, &[(channels::ERROR, Value::from("e2"))], "task1", "").await?;
    put_writes(
        s,
        &cfg,
        &[("a", Value::Int(1)), (channels::ERROR, Value::from("e3"))],
        "task1",
        "",
    )
    .await?;
    ensure_eq!(
        get(s, &cfg).await?.pending_writes,
        vec![pw("task1", channels::ERROR, "e3"), pw("task1", "a", 1)],
        "after the first mixed batch"
    );
    put_writes(
        s,
        &cfg,
        &[("a", Value::Int(99)), (channels::ERROR, Value::from("e4"))],
        "task1",
        "",
    )
    .await?;
    ensure_eq!(
        get(s, &cfg).await?.pending_writes,
        vec![pw("task1", channels::ERROR, "e4"), pw("task1", "a", 1)],
        "after the second mixed batch"
    );
    Ok(())
}

/// Writes may be stored before their checkpoint; they show once it is put.
pub async fn put_writes_before_checkpoint(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let target = generate_config(&t).with_checkpoint_id(cp.id.clone());
    put_writes(s, &target, &[("ch", Value::from("early"))], "task1", "").await?;
    let stored = put_all(s, &generate_config(&t), &cp, &generate_metadata("loop", 0)).await?;
    ensure_eq!(
        get(s, &stored).await?.pending_writes,
        vec![pw("task1", "ch", "early")],
        "writes stored before the checkpoint"
    );
    Ok(())
}

/// `put_writes` without a checkpoint id is [`Error::InvalidInput`].
pub async fn put_writes_requires_checkpoint_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    for cfg in [generate_config(&t), generate_config(&t).with_checkpoint_id("")] {
        let writes = [("ch".to_owned(), Value::Int(1))];
        match s.put_writes(&cfg, &writes, "task1", "").await {
            Err(Error::InvalidInput { .. }) => {}
            other => {
                return Err(CheckFailure::new(format!(
                    "put_writes({cfg:?}) without a checkpoint id: got {other:?}, expected InvalidInput"
                )))
            }
        }
    }
    Ok(())
}

/// NaN and NUL in write values are stored exactly or refused with a clear
/// error leaving nothing stored.
pub async fn put_writes_nan_and_nul_never_lost(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    let values = [
        ("nan", Value::Float(f64::NAN)),
        ("nul", Value::from("a\0b")),
        (
            "nested",
            Value::map([("k", Value::from("\0")), ("f", Value::Float(f64::NAN))]),
        ),
    ];
    let writes: Vec<(String, Value)> = values.iter().map(|(c, v)| ((*c).to_owned(), v.clone())).collect();
    match s.put_writes(&cfg, &writes, "task1", "").await {
        Ok(()) => {
            let got = get(s, &cfg).await?.pending_writes;
            ensure_eq!(got.len(), values.len(), "number of writes");
            for (w, (ch, v)) in got.iter().zip(&values) {
                ensure!(
                    w.channel == *ch && same_value(&w.value, v),
                    "write changed: got {w:?}, put ({ch:?}, {v:?})"
                );
            }
        }
        Err(e) if is_clear_refusal(&e) => {
            ensure_eq!(
                get(s, &cfg).await?.pending_writes,
                vec![],
                "writes after a refused put_writes"
            );
        }
        Err(e) => return Err(CheckFailure::new(format!("put_writes of NaN/NUL: unclear error {e:?}"))),
    }
    Ok(())
}

/// Pending writes come back sorted by (task_path, task_id, idx): paths and ids
/// by code point, idx numerically with special (negative) indexes first, from
/// `get_tuple` by id, latest, and `list`.
pub async fn pending_writes_sorted(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    // (task_path, task_id, writes)
    type Call<'a> = (&'a str, &'a str, Vec<(&'a str, Value)>);
    let calls: Vec<Call<'_>> = vec![
        (
            "~__pregel_pull, a",
            "t-b",
            vec![
                ("x", Value::Int(1)),
                (channels::ERROR, Value::from("e")),
                ("y", Value::Int(2)),
            ],
        ),
        (
            "~__pregel_push, 0000000000, 0000000000",
            "t-0",
            vec![("z", Value::Int(3))],
        ),
        ("", "t-z", vec![("w", Value::Int(4))]),
        ("~__pregel_pull, a", "t-a", vec![("v", Value::Int(5))]),
        ("~__pregel_pull, é", "t-c", vec![("u", Value::Int(6))]),
        ("~__pregel_pull, z", "t-d", vec![("s", Value::Int(7))]),
        ("~__pregel_pull, Z", "t-e", vec![("q", Value::Int(8))]),
        (
            "~__pregel_pull, b",
            "t-f",
            (0..11)
                .map(|i| {
                    (
                        ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10"][i],
                        Value::from(i),
                    )
                })
                .collect(),
        ),
    ];
    for (path, task, writes) in &calls {
        put_writes(s, &cfg, writes, task, path).await?;
    }
    let mut expected = vec![
        pw("t-z", "w", 4),
        pw("t-e", "q", 8),
        pw("t-a", "v", 5),
        pw("t-b", channels::ERROR, "e"),
        pw("t-b", "x", 1),
        pw("t-b", "y", 2),
    ];
    expected.extend((0..11usize).map(|i| pw("t-f", &format!("c{i}"), i)));
    expected.extend([pw("t-d", "s", 7), pw("t-c", "u", 6), pw("t-0", "z", 3)]);

    ensure_eq!(get(s, &cfg).await?.pending_writes, expected, "get_tuple by id");
    let latest = get(s, &generate_config(&cfg.thread_id)).await?;
    ensure_eq!(latest.pending_writes, expected, "get_tuple latest");
    let listed = list(s, Some(generate_config(&cfg.thread_id)), ListOptions::default()).await?;
    ensure_eq!(listed.len(), 1, "listed checkpoints");
    ensure_eq!(listed[0].pending_writes, expected, "list");
    Ok(())
}

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

/// `checkpoint_ns: None` lists every namespace of the thread, newest first.
pub async fn list_all_namespaces(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut expected = Vec::new();
    for ns in ["child:1", "", "outer:1|inner:2"] {
        let cp = generate_checkpoint();
        put_all(s, &generate_config(&t).with_ns(ns), &cp, &generate_metadata("loop", 0)).await?;
        expected.push(stored_config(&t, ns, &cp.id));
    }
    expected.reverse();
    let got: Vec<CheckpointConfig> = list(s, Some(CheckpointConfig::all_namespaces(&t)), ListOptions::default())
        .await?
        .into_iter()
        .map(|x| x.config)
        .collect();
    ensure_eq!(got, expected, "all namespaces");
    Ok(())
}

/// `before` keeps strictly smaller ids, whether or not a checkpoint has the
/// boundary id, in one thread or over the store.
pub async fn list_before_excludes_boundary(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let marker = new_thread_id();
    let a = generate_checkpoint();
    let missing = generate_checkpoint().id;
    let c = generate_checkpoint();
    let d = generate_checkpoint();
    for cp in [&a, &c, &d] {
        put_all(s, &generate_config(&t), cp, &marked_metadata("loop", 0, &marker)).await?;
    }
    let beyond = generate_checkpoint().id;
    let cases: [(&str, Vec<&str>); 5] = [
        (&c.id, vec![&a.id]),
        (&missing, vec![&a.id]),
        (&a.id, vec![]),
        (&d.id, vec![&c.id, &a.id]),
        (&beyond, vec![&d.id, &c.id, &a.id]),
    ];
    for (before, want) in cases {
        let got = list_ids(s, Some(generate_config(&t)), ListOptions::default().before(before)).await?;
        ensure_eq!(got, want, "thread, before {before}");
        let got = list_ids(s, None, marker_filter(&marker).before(before)).await?;
        ensure_eq!(got, want, "store, before {before}");
    }
    Ok(())
}

/// `limit` counts matching checkpoints only; `limit` 0 yields nothing.
pub async fn list_limit_after_filter(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let marker = new_thread_id();
    let mut parent = generate_config(&t);
    let mut matching = Vec::new();
    for step in 0..5 {
        let source = if step < 2 { "input" } else { "loop" };
        parent = put_all(
            s,
            &parent,
            &generate_checkpoint(),
            &marked_metadata(source, step, &marker),
        )
        .await?;
        if step < 2 {
            matching.push(id_of(&parent));
        }
    }
    matching.reverse();
    for n in [1, 2, 3] {
        let opts = ListOptions::default().filter("source", "input").limit(n);
        let got = list_ids(s, Some(generate_config(&t)), opts).await?;
        ensure_eq!(got, matching[..n.min(2)].to_vec(), "thread, limit {n}");
        let got = list_ids(s, None, marker_filter(&marker).filter("source", "input").limit(n)).await?;
        ensure_eq!(got, matching[..n.min(2)].to_vec(), "store, limit {n}");
    }
    let got = list_ids(s, Some(generate_config(&t)), ListOptions::default().limit(0)).await?;
    ensure_eq!(got, Vec::<String>::new(), "limit 0");
    Ok(())
}

/// A checkpoint id in the config restricts the listing to that checkpoint.
pub async fn list_checkpoint_id_restricts(s: &dyn CheckpointSaver) -> CheckResult {
    let f = list::fixture(s).await?;
    let id = f.ids()[1].clone();
    let got = list_ids(
        s,
        Some(f.thread_config().with_checkpoint_id(id.clone())),
        ListOptions::default(),
    )
    .await?;
    ensure_eq!(got, vec![id.clone()], "root namespace");
    let got = list_ids(
        s,
        Some(CheckpointConfig::all_namespaces(&f.thread).with_checkpoint_id(id.clone())),
        ListOptions::default(),
    )
    .await?;
    ensure_eq!(got, vec![id], "all namespaces");
    let got = list_ids(
        s,
        Some(f.thread_config().with_checkpoint_id(generate_checkpoint().id)),
        ListOptions::default(),
    )
    .await?;
    ensure_eq!(got, Vec::<String>::new(), "unknown id");
    Ok(())
}

/// Puts one checkpoint with `md` (plus a fresh marker) in a fresh thread;
/// returns the marker and the stored config.
async fn filter_target(
    s: &dyn CheckpointSaver,
    mut md: CheckpointMetadata,
) -> Result<(String, CheckpointConfig), CheckFailure> {
    let marker = new_thread_id();
    md.insert(MARKER_KEY, marker.clone());
    let t = new_thread_id();
    let cfg = put_all(s, &generate_config(&t), &generate_checkpoint(), &md).await?;
    Ok((marker, cfg))
}

/// Whether `filter` matches the target, asking both its thread and the whole
/// store (restricted by the marker), which must agree.
async fn matches(
    s: &dyn CheckpointSaver,
    target: &(String, CheckpointConfig),
    filter: &[(&str, Value)],
) -> Result<bool, CheckFailure> {
    let mut opts = ListOptions::default();
    for (k, v) in filter {
        opts = opts.filter(*k, v.clone());
    }
    let in_thread = list_ids(s, Some(generate_config(&target.1.thread_id)), opts.clone()).await?;
    let over_store = list_ids(s, None, opts.filter(MARKER_KEY, target.0.clone())).await?;
    ensure_eq!(in_thread, over_store, "thread and store listings of filter {filter:?}");
    ensure!(
        in_thread.len() <= 1,
        "filter {filter:?} matched {} checkpoints",
        in_thread.len()
    );
    Ok(in_thread.len() == 1)
}

/// Runs `cases` of (filter, expected match) against `target`.
async fn expect_matches(
    s: &dyn CheckpointSaver,
    target: &(String, CheckpointConfig),
    cases: Vec<(Vec<(&str, Value)>, bool)>,
) -> CheckResult {
    for (filter, want) in cases {
        let got = matches(s, target, &filter).await?;
        ensure_eq!(got, want, "match of filter {filter:?}");
    }
    Ok(())
}

/// Nested maps compare by content, not key order; no containment; arrays by
/// element order.
pub async fn list_filter_nested_key_order(s: &dyn CheckpointSaver) -> CheckResult {
    let mut md = generate_metadata("loop", 1);
    md.insert("user", Value::map([("a", Value::Int(1)), ("b", Value::Int(2))]));
    md.insert("tags", Value::from(vec!["a", "b"]));
    md.insert(
        "deep",
        Value::map([(
            "x",
            Value::map([
                ("p", Value::Int(1)),
                (
                    "q",
                    Value::from(vec![
                        Value::Int(1),
                        Value::map([("r", Value::Int(2)), ("s", Value::Int(3))]),
                    ]),
                ),
            ]),
        )]),
    );
    let target = filter_target(s, md).await?;
    let user = |pairs: &[(&str, i64)]| Value::map(pairs.iter().map(|(k, v)| (*k, Value::Int(*v))));
    let deep_reordered = Value::map([(
        "x",
        Value::map([
            (
                "q",
                Value::from(vec![
                    Value::Int(1),
                    Value::map([("s", Value::Int(3)), ("r", Value::Int(2))]),
                ]),
            ),
            ("p", Value::Int(1)),
        ]),
    )]);
    expect_matches(
        s,
        &target,
        vec![
            (vec![("user", user(&[("a", 1), ("b", 2)]))], true),
            (vec![("user", user(&[("b", 2), ("a", 1)]))], true),
            (vec![("user", user(&[("a", 1)]))], false),
            (vec![("user", user(&[("a", 1), ("b", 2), ("c", 3)]))], false),
            (vec![("tags", Value::from(vec!["a", "b"]))], true),
            (vec![("tags", Value::from(vec!["b", "a"]))], false),
            (vec![("tags", Value::from(vec!["a"]))], false),
            (vec![("parents", Value::Map(Vec::new().into()))], true),
            (vec![("deep", deep_reordered)], true),
            (
                vec![("user", user(&[("b", 2), ("a", 1)])), ("step", Value::Int(1))],
                true,
            ),
        ],
    )
    .await
}

/// A `null` filter value matches a missing key and a stored `null`, nothing
/// else.
pub async fn list_filter_null_matches_missing(s: &dyn CheckpointSaver) -> CheckResult {
    let mut md = generate_metadata("loop", 1);
    md.insert("none", Value::Nil);
    md.insert("present", 1);
    let target = filter_target(s, md).await?;
    expect_matches(
        s,
        &target,
        vec![
            (vec![("missing", Value::Nil)], true),
            (vec![("none", Value::Nil)], true),
            (vec![("present", Value::Nil)], false),
            (vec![("none", Value::Int(0))], false),
            (vec![("missing", Value::Int(1))], false),
            (vec![("missing", Value::Nil), ("present", Value::Int(1))], true),
        ],
    )
    .await
}

/// Numbers compare by value (1 = 1.0) and never equal booleans; strings never
/// equal numbers.
pub async fn list_filter_bool_is_not_int(s: &dyn CheckpointSaver) -> CheckResult {
    let mut md = generate_metadata("loop", 1);
    md.insert("flag", true);
    md.insert("off", false);
    md.insert("one", 1);
    md.insert("zero", 0);
    md.insert("fl", 1.0);
    let target = filter_target(s, md).await?;
    expect_matches(
        s,
        &target,
        vec![
            (vec![("flag", Value::Bool(true))], true),
            (vec![("flag", Value::Int(1))], false),
            (vec![("off", Value::Bool(false))], true),
            (vec![("off", Value::Int(0))], false),
            (vec![("one", Value::Bool(true))], false),
            (vec![("zero", Value::Bool(false))], false),
            (vec![("one", Value::Float(1.0))], true),
            (vec![("fl", Value::Int(1))], true),
            (vec![("step", Value::from("1"))], false),
            (vec![("step", Value::Int(1))], true),
        ],
    )
    .await
}

/// Any key string is data: quotes, SQL, JSON-path syntax, dots, unicode,
/// whitespace, the empty string. A dotted key is never a path into a nested map.
pub async fn list_filter_hostile_keys(s: &dyn CheckpointSaver) -> CheckResult {
    let keys = [
        "a'b",
        "x\") OR 1=1 --",
        "'; DROP TABLE checkpoints; --",
        "user.a",
        "$.x",
        "$[0]",
        "日本語",
        "key with space",
        "%_*",
        "",
        "back\\slash",
        "new\nline",
        "{\"json\":1}",
        "@>",
    ];
    let mut md = generate_metadata("loop", 1);
    for (i, k) in keys.iter().enumerate() {
        md.insert(*k, format!("value-{i}"));
    }
    md.insert("user", Value::map([("a", Value::from("nested"))]));
    let target = filter_target(s, md).await?;
    let mut cases = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        cases.push((vec![(*k, Value::from(format!("value-{i}")))], true));
        cases.push((vec![(*k, Value::from("other"))], false));
    }
    cases.push((vec![("user.a", Value::from("nested"))], false));
    expect_matches(s, &target, cases).await
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
        ensure_eq!(
            get(s, &cfg).await?.checkpoint.channel_values.get("x"),
            None,
            "value of x in {ns:?} after delete_thread"
        );
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
    ensure!(problems.is_empty(), "capabilities {caps:?}: {}", problems.join("; "));
    Ok(())
}
