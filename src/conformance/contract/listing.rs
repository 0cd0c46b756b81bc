//! The `list` rules: every namespace, `before`, `limit` after the filter, a
//! checkpoint id in the config, and the metadata filter's equality.

use super::*;

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
