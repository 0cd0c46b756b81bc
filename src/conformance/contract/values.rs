//! What `put` stores: a re-put replaces, values outside `new_versions` are
//! kept, a version without a value has none, and values Python's Postgres
//! saver cannot hold (NaN, U+0000) are never silently changed, in checkpoints
//! or in writes.

use super::*;
use crate::saver::json_eq;
use crate::Error;

/// Putting a checkpoint id again replaces its checkpoint, its metadata (no
/// key of the first survives) and its parent.
pub async fn put_overwrites_same_id(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let p1 = put_empty(s, &generate_config(&t), "input", -1).await?;
    let p2 = put_empty(s, &generate_config(&t), "input", -1).await?;
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
    has_value(&tuple, "a", Some("A"), "a (in new_versions)")?;
    has_value(&tuple, "b", Some("B"), "b (not in new_versions)")?;

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
    has_value(&get(s, &c2).await?, "c", None, "c at the next checkpoint")?;
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
    if let Some(stored) = stored_or_refused(s, &t, &cp, &md, "values").await? {
        for (ch, want) in &cp.channel_values {
            let have = stored.checkpoint.channel_values.get(ch);
            ensure!(
                have.is_some_and(|h| same_value(h, want)),
                "channel {ch:?} changed: got {have:?}, put {want:?}"
            );
        }
    }

    // Metadata.
    let t = new_thread_id();
    let cp = generate_checkpoint();
    let mut md = generate_metadata("loop", 0);
    md.insert("note", "a\0b");
    md.insert("nan", Value::Float(f64::NAN));
    md.insert("nested", hostile);
    if let Some(stored) = stored_or_refused(s, &t, &cp, &md, "metadata").await? {
        for (k, want) in &md.0 {
            let have = stored.metadata.get(k);
            ensure!(
                have.is_some_and(|h| same_json(h, want)),
                "metadata {k:?} changed: got {have:?}, put {want:?}"
            );
        }
    }
    Ok(())
}

/// Puts `cp` in a new thread `t`: the tuple stored, or `None` when the put
/// was refused clearly ([`is_clear_refusal`]) and left nothing behind.
async fn stored_or_refused(
    s: &dyn CheckpointSaver,
    t: &str,
    cp: &crate::Checkpoint,
    md: &crate::CheckpointMetadata,
    what: &str,
) -> Result<Option<crate::CheckpointTuple>, CheckFailure> {
    match s.put(&generate_config(t), cp, md, &cp.channel_versions).await {
        Ok(cfg) => Ok(Some(get(s, &cfg).await?)),
        Err(e) if is_clear_refusal(&e) => {
            let cfg = generate_config(t).with_checkpoint_id(cp.id.clone());
            ensure!(
                s.get_tuple(&cfg).await?.is_none(),
                "refused put left a checkpoint behind"
            );
            Ok(None)
        }
        Err(e) => Err(CheckFailure::new(format!("put of NaN/NUL {what}: unclear error {e:?}"))),
    }
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
