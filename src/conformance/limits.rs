//! Checks of the input limits ([`crate::limits`]): the same typed error for
//! the same bad input on every backend, nothing stored, and no input deep or
//! wide enough to crash or stall a saver.

use std::fmt;

use super::*;
use crate::limits::MAX_NESTING;
use crate::saver::ListThreadsOptions;
use crate::Error;

/// A value nested `levels` deep: lists and maps in turn around a string.
pub(crate) fn nested(levels: usize) -> Value {
    (0..levels).fold(Value::from("leaf"), |v, i| {
        if i % 2 == 0 {
            Value::Array(vec![v].into())
        } else {
            Value::map([("k", v)])
        }
    })
}

/// A value nested `levels` deep that is never freed: freeing a value nested
/// this deep recurses once per level in `Drop` (the caller's value, not the
/// saver's business), more than a test thread's stack holds. Its clones
/// share it, so dropping them frees nothing.
fn leaked_nested(levels: usize) -> &'static Value {
    Box::leak(Box::new(nested(levels)))
}

fn is_serde(result: &Result<impl fmt::Debug, Error>) -> bool {
    matches!(result, Err(Error::Serde { .. }))
}

/// `put` refuses an empty `checkpoint.id` with `InvalidInput` and stores
/// nothing: a config naming no checkpoint could not take writes.
pub async fn put_empty_checkpoint_id_refused(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let mut cp = generate_checkpoint();
    cp.id = String::new();
    let got = s
        .put(
            &generate_config(&t),
            &cp,
            &generate_metadata("input", -1),
            &ChannelVersions::new(),
        )
        .await;
    ensure!(
        matches!(got, Err(Error::InvalidInput { .. })),
        "put with an empty checkpoint id: got {got:?}, expected InvalidInput"
    );
    ensure!(
        s.get_tuple(&generate_config(&t)).await?.is_none(),
        "a refused put stored a checkpoint"
    );
    ensure!(
        list(s, Some(CheckpointConfig::all_namespaces(&t)), ListOptions::default())
            .await?
            .is_empty(),
        "a refused put listed a checkpoint"
    );
    Ok(())
}

/// Channel values and metadata values nested exactly [`MAX_NESTING`] levels
/// are stored and read back unchanged.
pub async fn put_nesting_at_limit_round_trips(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let value = nested(MAX_NESTING);
    let cp = checkpoint_with(&[("deep", value.clone())], &[("deep", str_version(1))]);
    let mut md = generate_metadata("input", -1);
    md.insert("deep", value.clone());
    let stored = put_all(s, &generate_config(&t), &cp, &md).await?;
    put_writes(s, &stored, &[("w", value.clone())], "task", "").await?;
    let tuple = get(s, &stored).await?;
    ensure!(
        tuple.checkpoint.channel_values.get("deep") == Some(&value),
        "channel value at the limit"
    );
    ensure!(
        tuple.metadata.get("deep") == Some(&value),
        "metadata value at the limit"
    );
    ensure!(
        tuple.pending_writes.first().map(|w| &w.value) == Some(&value),
        "write value at the limit"
    );
    Ok(())
}

/// A channel value or metadata value one level deeper than [`MAX_NESTING`],
/// or 200 000 levels deeper (metadata: 400 000), is refused with `Serde`
/// naming the limit, and nothing is stored; so are channel values 200 000
/// levels deep made of lists, of maps, or of map keys.
pub async fn put_nesting_beyond_limit_refused(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let cp = checkpoint_with(&[("deep", Value::Nil)], &[("deep", str_version(1))]);
    for levels in [MAX_NESTING + 1, 200_000, 400_000] {
        let mut md = generate_metadata("input", -1);
        md.insert("deep", leaked_nested(levels).clone());
        let got = s.put(&generate_config(&t), &cp, &md, &cp.channel_versions).await;
        ensure!(
            matches!(&got, Err(e @ Error::Serde { .. }) if e.to_string().contains("deeper than the limit")),
            "metadata value {levels} deep: got {got:?}, expected Serde naming the limit"
        );
    }
    for deep in deep_channel_values() {
        let mut with_value = cp.clone();
        with_value.channel_values.insert("deep".into(), deep.clone());
        let got = s
            .put(
                &generate_config(&t),
                &with_value,
                &generate_metadata("input", -1),
                &cp.channel_versions,
            )
            .await;
        ensure!(is_serde(&got), "a deep channel value: got {got:?}, expected Serde");
    }
    ensure!(
        s.get_tuple(&generate_config(&t)).await?.is_none(),
        "a refused put stored a checkpoint"
    );
    Ok(())
}

/// Values beyond [`MAX_NESTING`], never freed (see [`leaked_nested`]): one
/// level beyond, and 200 000 levels of lists, of maps, of map keys.
fn deep_channel_values() -> [&'static Value; 4] {
    let leak = |v: Value| -> &'static Value { Box::leak(Box::new(v)) };
    [
        leaked_nested(MAX_NESTING + 1),
        leak((0..200_000).fold(Value::Nil, |v, _| Value::Array(vec![v].into()))),
        leak((0..200_000).fold(Value::Nil, |v, _| Value::map([("k", v)]))),
        leak((0..200_000).fold(Value::Nil, |v, _| Value::Map(vec![(v, Value::Nil)].into()))),
    ]
}

/// A channel value of 100 000 nested extension values (`m.n(m.n(…))`), and
/// pending sends nested 200 000 levels, are refused with `Serde` by the
/// input check; nothing is stored.
pub async fn put_deep_extension_chains_and_pending_sends_refused(s: &dyn CheckpointSaver) -> CheckResult {
    use crate::serde::{Ext, ExtKind};
    let t = new_thread_id();
    let mut chain = Value::Nil;
    for _ in 0..100_000 {
        let ext = Ext::object(ExtKind::ConstructorSingleArg, "m", "n", chain)
            .map_err(|e| CheckFailure::new(format!("building an extension value: {e}")))?;
        chain = Value::Ext(Box::new(ext));
    }
    let mut cp = checkpoint_with(&[], &[("chain", str_version(1))]);
    cp.channel_values.insert("chain".into(), chain);
    let got = s
        .put(
            &generate_config(&t),
            &cp,
            &generate_metadata("loop", 0),
            &cp.channel_versions,
        )
        .await;
    // Freeing a chain this long recurses in `Drop` (the caller's value).
    std::mem::forget(cp);
    ensure!(
        is_serde(&got),
        "an extension chain 100 000 deep: got {got:?}, expected Serde"
    );
    let mut sends = generate_checkpoint();
    sends.pending_sends = Some(vec![leaked_nested(200_000).clone()]);
    let got = s
        .put(
            &generate_config(&t),
            &sends,
            &generate_metadata("loop", 0),
            &ChannelVersions::new(),
        )
        .await;
    ensure!(
        is_serde(&got),
        "pending sends 200 000 deep: got {got:?}, expected Serde"
    );
    ensure!(
        s.get_tuple(&generate_config(&t)).await?.is_none(),
        "a refused put stored a checkpoint"
    );
    Ok(())
}

/// A write value deeper than [`MAX_NESTING`] (one level, or 200 000) is
/// refused with `Serde`, and none of the call's writes is stored.
pub async fn put_writes_nesting_beyond_limit_refused(s: &dyn CheckpointSaver) -> CheckResult {
    let cfg = put_writes::stored_checkpoint(s, "").await?;
    for levels in [MAX_NESTING + 1, 200_000] {
        let writes = vec![
            ("ok".to_owned(), Value::Int(1)),
            ("deep".to_owned(), leaked_nested(levels).clone()),
        ];
        let got = s.put_writes(&cfg, &writes, "task", "").await;
        ensure!(is_serde(&got), "write value {levels} deep: got {got:?}, expected Serde");
    }
    for deep in deep_channel_values() {
        let got = s.put_writes(&cfg, &[("w".to_owned(), deep.clone())], "task", "").await;
        ensure!(is_serde(&got), "a deep write value: got {got:?}, expected Serde");
    }
    ensure!(
        get(s, &cfg).await?.pending_writes.is_empty(),
        "a refused put_writes stored writes"
    );
    Ok(())
}

/// A metadata filter value deeper than [`MAX_NESTING`] (one level, or
/// 200 000) makes `list` (and `list_threads`, where supported) fail with
/// `InvalidInput`: no stored metadata is that deep, and no saver walks it.
pub async fn list_filter_nesting_beyond_limit_refused(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    put_all(
        s,
        &generate_config(&t),
        &generate_checkpoint(),
        &marked_metadata("input", -1, &t),
    )
    .await?;
    for levels in [MAX_NESTING + 1, 200_000] {
        let options = marker_filter(&t).filter("deep", leaked_nested(levels).clone());
        for config in [
            Some(generate_config(&t)),
            Some(CheckpointConfig::all_namespaces(&t)),
            None,
        ] {
            let got = s.list_vec(config.clone(), options.clone()).await;
            ensure!(
                matches!(got, Err(Error::InvalidInput { .. })),
                "list({config:?}) with a filter {levels} deep: got {got:?}, expected InvalidInput"
            );
        }
        if s.capabilities().list_threads {
            let threads = ListThreadsOptions {
                filter: options.filter.clone(),
                ..ListThreadsOptions::default()
            };
            let got = s.list_threads(threads.clone()).await;
            ensure!(
                matches!(got, Err(Error::InvalidInput { .. })),
                "list_threads with a filter {levels} deep: got {got:?}, expected InvalidInput"
            );
        }
    }
    Ok(())
}

/// Metadata holding a map of 200 000 keys matches a filter with the same map
/// in another key order, and not one differing in a single value; with the
/// map's keys as 200 000 top-level metadata keys too. Equality of maps is not
/// a search per key: this finishes as fast as reading the row.
pub async fn list_filter_wide_maps_compare_by_content(s: &dyn CheckpointSaver) -> CheckResult {
    const KEYS: usize = 200_000;
    let t = new_thread_id();
    let wide = |reverse: bool, changed: Option<usize>| {
        let mut entries: Vec<(Value, Value)> = (0..KEYS)
            .map(|i| {
                let v = if changed == Some(i) { -1 } else { i as i64 };
                (Value::from(format!("key-{i}")), Value::Int(v))
            })
            .collect();
        if reverse {
            entries.reverse();
        }
        Value::Map(entries.into())
    };
    let mut md = marked_metadata("input", -1, &t);
    md.insert("wide", wide(false, None));
    for i in 0..KEYS {
        md.insert(format!("top-{i}"), i as i64);
    }
    put_all(s, &generate_config(&t), &generate_checkpoint(), &md).await?;
    let thread = Some(generate_config(&t));
    let found = list(s, thread.clone(), marker_filter(&t).filter("wide", wide(true, None))).await?;
    ensure_eq!(found.len(), 1, "wide map in another key order");
    let found = list(
        s,
        thread.clone(),
        marker_filter(&t).filter("wide", wide(true, Some(KEYS / 2))),
    )
    .await?;
    ensure_eq!(found.len(), 0, "wide map with one value changed");
    let mut top = marker_filter(&t);
    for i in (0..KEYS).rev() {
        top = top.filter(format!("top-{i}"), i as i64);
    }
    ensure_eq!(
        list(s, thread.clone(), top.clone()).await?.len(),
        1,
        "200 000 top-level filter keys"
    );
    top = top.filter(format!("top-{}", KEYS / 2), -1);
    ensure_eq!(
        list(s, thread, top).await?.len(),
        0,
        "200 000 top-level keys, one changed"
    );
    Ok(())
}
