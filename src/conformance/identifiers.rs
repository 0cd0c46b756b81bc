//! Hostile identifiers through the public API (`docs/reliability.md`, rows
//! B01–B11): empty, huge, U+0000, SQL, wildcards, ids that are not uuids.
//! Every saver stores them exactly or refuses them whole with one typed
//! error; what a saver refuses is summed up by [`refusals`], which each
//! backend's tests pin.

use super::*;
use crate::checkpoint::Checkpoint;
use crate::saver::{ListThreadsOptions, PruneStrategy};
use crate::Error;

/// What a store cannot hold and refuses whole, with a typed error and
/// nothing stored, where other stores keep it exactly (PostgreSQL's text and
/// JSONB and its btree index entries, Redis's index members separated by
/// U+0000, are the known cases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Refusals {
    /// U+0000 in thread ids, namespaces or checkpoint ids: `InvalidInput`
    /// naming U+0000 (row B03).
    pub nul_in_ids: bool,
    /// U+0000 in channel names, task ids or metadata: `InvalidInput` naming
    /// U+0000 (rows B08, B09, B11).
    pub nul_in_names_and_metadata: bool,
    /// NaN or infinity in metadata: `InvalidInput` naming NaN (row B17).
    pub non_finite_metadata: bool,
    /// A 1 MiB thread id or a 64 KiB checkpoint id: `Error::Storage`, not
    /// retryable (rows B02, B07).
    pub oversized_ids: bool,
}

/// Which of the [`Refusals`] `s` makes, each answer checked as its row says;
/// fails when the answers to U+0000 outside ids differ between rows, or
/// to the two oversized ids.
///
/// # Errors
/// The first row the saver answers wrongly.
pub async fn refusals(s: &dyn CheckpointSaver) -> Result<Refusals, CheckFailure> {
    let nul = [
        nul_in_channel_names(s).await?,
        nul_in_task_ids(s).await?,
        nul_in_metadata_values(s).await?,
    ];
    ensure!(
        nul.iter().all(|r| *r == nul[0]),
        "U+0000 refused in some places only (channels, task ids, metadata): {nul:?}"
    );
    let oversized = [huge_thread_id(s).await?, huge_checkpoint_id(s).await?];
    ensure!(
        oversized[0] == oversized[1],
        "oversized ids refused in one place only (thread, checkpoint): {oversized:?}"
    );
    Ok(Refusals {
        nul_in_ids: nul_in_identifiers(s).await?,
        nul_in_names_and_metadata: nul[0],
        non_finite_metadata: non_finite_metadata(s).await?,
        oversized_ids: oversized[0],
    })
}

/// Whether `result` refused the input as `InvalidInput` whose reason names
/// `what`; any other error fails the check.
fn refused_naming<T: std::fmt::Debug>(result: &Result<T, Error>, what: &str, row: &str) -> Result<bool, CheckFailure> {
    match result {
        Ok(_) => Ok(false),
        Err(Error::InvalidInput { reason }) if reason.contains(what) => Ok(true),
        Err(e) => Err(CheckFailure::new(format!(
            "{row}: got {e:?}, expected success or InvalidInput naming {what}"
        ))),
    }
}

/// How a store may refuse a row's input.
#[derive(Clone, Copy)]
enum Refusal {
    /// `InvalidInput` whose reason names this.
    Naming(&'static str),
    /// A storage error that is not retryable.
    Storage,
}

/// What a put of a row's input did: the config it returned, or `None` when
/// refused whole as `refusal` says (checked: `thread` holds nothing); any
/// other error fails the check.
async fn kept_or_refused(
    s: &dyn CheckpointSaver,
    thread: &str,
    result: Result<CheckpointConfig, Error>,
    refusal: Refusal,
    row: &str,
) -> Result<Option<CheckpointConfig>, CheckFailure> {
    let refused = match (&result, refusal) {
        (Ok(_), _) => false,
        (Err(Error::InvalidInput { reason }), Refusal::Naming(what)) => reason.contains(what),
        (Err(Error::Storage { retryable: false, .. }), Refusal::Storage) => true,
        (Err(_), _) => false,
    };
    match result {
        Ok(stored) => Ok(Some(stored)),
        Err(_) if refused => {
            nothing_in(s, thread, row).await?;
            Ok(None)
        }
        Err(e) => Err(CheckFailure::new(format!(
            "{row}: got {e:?}, expected success or a refusal as {}",
            match refusal {
                Refusal::Naming(what) => format!("InvalidInput naming {what}"),
                Refusal::Storage => "a storage error that is not retryable".to_owned(),
            }
        ))),
    }
}

/// A checkpoint with fixed id `id` and `values`, every channel at version 1.
pub(crate) fn checkpoint_of(id: &str, values: &[(&str, Value)]) -> Checkpoint {
    let mut cp = generate_checkpoint();
    cp.id = id.to_owned();
    for (ch, v) in values {
        cp.channel_values.insert((*ch).to_owned(), v.clone());
        cp.channel_versions.insert((*ch).to_owned(), ChannelVersion::Int(1));
    }
    cp
}

/// Puts checkpoint `id` holding `values` (all new) below `config`.
pub(crate) async fn put_values(
    s: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    id: &str,
    values: &[(&str, Value)],
) -> Result<CheckpointConfig, Error> {
    let cp = checkpoint_of(id, values);
    s.put(config, &cp, &generate_metadata("loop", 0), &cp.channel_versions)
        .await
}

/// Puts checkpoint `id` without values but with `metadata`.
async fn put_metadata(
    s: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    id: &str,
    metadata: &CheckpointMetadata,
) -> Result<CheckpointConfig, Error> {
    s.put(config, &checkpoint_of(id, &[]), metadata, &ChannelVersions::new())
        .await
}

/// The value of channel `ch` in a tuple.
pub(crate) fn value_of(t: &CheckpointTuple, ch: &str) -> Result<Value, CheckFailure> {
    t.checkpoint
        .channel_values
        .get(ch)
        .cloned()
        .ok_or_else(|| CheckFailure::new(format!("no value for channel {ch:?}")))
}

/// Fails unless `thread` holds no checkpoint.
async fn nothing_in(s: &dyn CheckpointSaver, thread: &str, row: &str) -> CheckResult {
    ensure!(
        list(
            s,
            Some(CheckpointConfig::all_namespaces(thread)),
            ListOptions::default()
        )
        .await?
        .is_empty(),
        "{row}: a refused put stored something"
    );
    Ok(())
}

/// A fixed checkpoint id, the first of three ascending ones.
pub(crate) const ID1: &str = "1ef00000-0000-6000-8000-000000000001";
/// The second fixed checkpoint id.
pub(crate) const ID2: &str = "1ef00000-0000-6000-8000-000000000002";
/// The third fixed checkpoint id.
pub(crate) const ID3: &str = "1ef00000-0000-6000-8000-000000000003";

/// B01: the empty thread id is a thread like any other: stored, read back,
/// listed, and first among `list_threads`.
pub async fn put_empty_thread_id_round_trips(s: &dyn CheckpointSaver) -> CheckResult {
    let marker = new_thread_id();
    let cp = checkpoint_of(&format!("{ID1}-{marker}"), &[("x", Value::from(marker.as_str()))]);
    let stored = put_all(s, &generate_config(""), &cp, &marked_metadata("loop", 0, &marker)).await?;
    ensure_eq!(stored.thread_id, "", "thread id put returns");
    let got = get(s, &stored).await?;
    ensure_eq!(value_of(&got, "x")?, Value::from(marker.as_str()), "value read back");
    let listed = list(s, Some(CheckpointConfig::all_namespaces("")), marker_filter(&marker)).await?;
    ensure_eq!(listed.len(), 1, "checkpoints listed in thread \"\"");
    if s.capabilities().list_threads {
        let threads = s.list_threads(ListThreadsOptions::default()).await?;
        ensure_eq!(
            threads.first().map(|t| t.thread_id.as_str()),
            Some(""),
            "the first thread of list_threads"
        );
    }
    Ok(())
}

/// B02: a 1 MiB thread id, or `None` when refused whole.
async fn huge_thread_id(s: &dyn CheckpointSaver) -> Result<bool, CheckFailure> {
    let thread = format!("{}{}", new_thread_id(), "t".repeat(1 << 20));
    let result = put_values(s, &generate_config(&thread), ID1, &[("x", Value::Int(1))]).await;
    if kept_or_refused(s, &thread, result, Refusal::Storage, "1 MiB thread id")
        .await?
        .is_none()
    {
        return Ok(true);
    }
    ensure_eq!(
        get(s, &generate_config(&thread)).await?.config.thread_id.len(),
        thread.len(),
        "length of the thread id read back"
    );
    Ok(false)
}

/// B03: U+0000 in thread id, namespace and checkpoint id.
async fn nul_in_identifiers(s: &dyn CheckpointSaver) -> Result<bool, CheckFailure> {
    let t = new_thread_id();
    let thread = format!("{t}\0b");
    let config = generate_config(&thread).with_ns("n\0s");
    let result = put_values(s, &config, "id\0x", &[("x", Value::Int(1))]).await;
    let nul = Refusal::Naming("U+0000");
    let Some(stored) = kept_or_refused(s, &thread, result, nul, "U+0000 in identifiers").await? else {
        return Ok(true);
    };
    let got = get(s, &stored).await?;
    ensure_eq!(got.config, stored, "config read back");
    ensure_eq!(got.config.thread_id, thread, "thread id read back");
    ensure!(
        s.get_tuple(&generate_config(&t)).await?.is_none(),
        "the thread id cut at U+0000 names the thread"
    );
    Ok(false)
}

/// B04: SQL in every string (thread id, namespace, checkpoint id, channel,
/// version, metadata key and value, run id, task id and path) through every
/// operation the saver declares is data, and the store stays usable.
pub async fn put_sql_in_every_string_is_data(s: &dyn CheckpointSaver) -> CheckResult {
    let evil = "'; DROP TABLE checkpoints; --\" OR 1=1 /*";
    // Unique per run: the thread, its copy and the run id are deleted below.
    let own = format!("{evil}{}", new_thread_id());
    let caps = s.capabilities();
    let config = generate_config(&own).with_ns(evil);
    let mut cp = checkpoint_of(&format!("{ID1}{evil}"), &[(evil, Value::from(evil))]);
    cp.channel_versions
        .insert(evil.to_owned(), ChannelVersion::Str(evil.to_owned()));
    let mut meta = generate_metadata("loop", 0);
    meta.insert(evil, own.as_str());
    meta.insert("run_id", own.as_str());
    let stored = put_all(s, &config, &cp, &meta).await?;
    put_writes(s, &stored, &[(evil, Value::from(evil))], evil, evil).await?;
    let got = get(s, &stored).await?;
    ensure_eq!(
        got.checkpoint.channel_values.get(evil),
        Some(&Value::from(evil)),
        "value"
    );
    ensure_eq!(got.metadata.get(evil), Some(&Value::from(own.as_str())), "metadata");
    ensure_eq!(
        got.pending_writes.first().map(|w| w.task_id.as_str()),
        Some(evil),
        "task id"
    );
    let hits = list(s, None, ListOptions::default().filter(evil, own.as_str())).await?;
    ensure_eq!(hits.len(), 1, "filtered on the SQL key");
    if caps.delta_channel_history {
        let history = s.get_delta_channel_history(&stored, &[evil.to_owned()]).await?;
        ensure_eq!(history.get(evil).map(|h| h.writes.len()), Some(0), "delta history");
    }
    let copy_id = format!("{own}2");
    let copy = CheckpointConfig::all_namespaces(&copy_id);
    if caps.copy_thread {
        s.copy_thread(&own, &copy_id).await?;
        ensure_eq!(
            list(s, Some(copy.clone()), ListOptions::default()).await?.len(),
            1,
            "copy"
        );
    }
    if caps.prune {
        s.prune(std::slice::from_ref(&own), PruneStrategy::KeepLatest).await?;
    }
    if caps.delete_for_runs {
        // Both copies carry the run id.
        s.delete_for_runs(std::slice::from_ref(&own)).await?;
        ensure!(
            list(s, Some(copy), ListOptions::default()).await?.is_empty(),
            "the copy deleted by run id"
        );
    }
    s.delete_thread(&own).await?;
    let after = put_values(s, &generate_config(&new_thread_id()), ID1, &[("x", Value::Int(1))]).await?;
    ensure!(s.get_tuple(&after).await?.is_some(), "the store is usable after SQL");
    Ok(())
}

/// B05: LIKE and glob wildcards in namespaces match exactly, never as
/// patterns.
pub async fn list_wildcards_in_namespace_match_exactly(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    for ns in ["%", "_", "a%", "abc", "a_c", "[a]", "*"] {
        put_values(s, &generate_config(&t).with_ns(ns), ID1, &[("x", Value::from(ns))]).await?;
    }
    for ns in ["%", "_", "a%", "[a]", "*"] {
        let listed = list(s, Some(generate_config(&t).with_ns(ns)), ListOptions::default()).await?;
        ensure_eq!(listed.len(), 1, "checkpoints in namespace {ns:?}");
        ensure_eq!(value_of(&listed[0], "x")?, Value::from(ns), "value in namespace {ns:?}");
    }
    Ok(())
}

/// B06: checkpoint ids that are not uuids are stored and ordered as strings
/// (the latest is the greatest).
pub async fn put_non_uuid_checkpoint_ids_order_as_strings(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    for id in ["not-a-uuid", "0", "zzzz", "1ef0"] {
        put_values(s, &generate_config(&t), id, &[("x", Value::from(id))]).await?;
    }
    let ids = list_ids(s, Some(generate_config(&t)), ListOptions::default()).await?;
    ensure_eq!(
        ids,
        ["zzzz", "not-a-uuid", "1ef0", "0"],
        "ordered as strings, descending"
    );
    ensure_eq!(get(s, &generate_config(&t)).await?.checkpoint.id, "zzzz", "latest");
    Ok(())
}

/// B07: a 64 KiB random checkpoint id, or `true` when refused whole.
async fn huge_checkpoint_id(s: &dyn CheckpointSaver) -> Result<bool, CheckFailure> {
    let t = new_thread_id();
    // Random, so that no storage compresses it under a size limit.
    let id: String = (0..64 << 10)
        .map(|_| char::from(b"0123456789abcdef"[usize::from(rand::random::<u8>() % 16)]))
        .collect();
    let result = put_values(s, &generate_config(&t), &id, &[("x", Value::Int(1))]).await;
    let Some(stored) = kept_or_refused(s, &t, result, Refusal::Storage, "64 KiB checkpoint id").await? else {
        return Ok(true);
    };
    ensure!(
        get(s, &stored).await?.checkpoint.id == id,
        "the 64 KiB id read back differs"
    );
    Ok(false)
}

/// B08: hostile channel names.
async fn nul_in_channel_names(s: &dyn CheckpointSaver) -> Result<bool, CheckFailure> {
    let t = new_thread_id();
    let long = "c".repeat(10_000);
    let names = ["", "ch\u{0}x", "日本語 🚀", "__error__", long.as_str(), "a.b", "$x"];
    let values: Vec<(&str, Value)> = names
        .iter()
        .map(|n| (*n, Value::from(format!("v-{}", n.len()))))
        .collect();
    let result = put_values(s, &generate_config(&t), ID1, &values).await;
    let refused = refused_naming(&result, "U+0000", "a channel name with U+0000")?;
    let kept: Vec<_> = if refused {
        nothing_in(s, &t, "a channel name with U+0000").await?;
        let without_nul: Vec<_> = values.iter().filter(|(n, _)| !n.contains('\0')).cloned().collect();
        put_values(s, &generate_config(&t), ID1, &without_nul).await?;
        without_nul
    } else {
        values
    };
    let got = get(s, &generate_config(&t)).await?;
    ensure_eq!(got.checkpoint.channel_values.len(), kept.len(), "channels read back");
    for (n, v) in &kept {
        ensure_eq!(got.checkpoint.channel_values.get(*n), Some(v), "channel {n:?}");
    }
    Ok(refused)
}

/// B09: hostile task ids and task paths.
async fn nul_in_task_ids(s: &dyn CheckpointSaver) -> Result<bool, CheckFailure> {
    let stored = put_values(s, &generate_config(&new_thread_id()), ID1, &[]).await?;
    let long = "k".repeat(10_000);
    let mut refused = false;
    for (task, path) in [
        ("", ""),
        ("t\u{0}", "p\u{0}"),
        (long.as_str(), long.as_str()),
        ("日本", "~é"),
    ] {
        let result = s
            .put_writes(&stored, &[("x".to_owned(), Value::Int(1))], task, path)
            .await;
        let this = refused_naming(&result, "U+0000", "a task id")?;
        ensure!(!this || task.contains('\0'), "task id {task:?} refused: {result:?}");
        refused |= this;
    }
    let mut tasks: Vec<_> = get(s, &stored)
        .await?
        .pending_writes
        .iter()
        .map(|w| w.task_id.len())
        .collect();
    tasks.sort_unstable();
    let expected: &[usize] = if refused { &[0, 6, 10_000] } else { &[0, 2, 6, 10_000] };
    ensure_eq!(tasks, expected, "lengths of the task ids stored");
    Ok(refused)
}

/// B10: metadata keys made of SQL, JSON paths, quotes, `""`, `{}` and emoji
/// are matched by filters as the exact key only.
pub async fn list_hostile_metadata_keys_match_exactly(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let (hit, miss) = (format!("hit-{t}"), format!("miss-{t}"));
    let keys = ["tag') OR 1=1 --", "$.tag", "tag\"", "a.b", "", "{}", "🚀"];
    for (i, key) in keys.iter().enumerate() {
        let mut meta = generate_metadata("loop", 0);
        meta.insert(*key, hit.as_str());
        put_metadata(s, &generate_config(&format!("{t}-{i}")), &format!("{ID1}-{i}"), &meta).await?;
    }
    for (i, key) in keys.iter().enumerate() {
        let hits = list(s, None, ListOptions::default().filter(*key, hit.as_str())).await?;
        ensure_eq!(hits.len(), 1, "hits of key {key:?}");
        ensure_eq!(hits[0].config.thread_id, format!("{t}-{i}"), "thread of key {key:?}");
        ensure!(
            list(s, None, ListOptions::default().filter(*key, miss.as_str()))
                .await?
                .is_empty(),
            "key {key:?} matched another value"
        );
    }
    Ok(())
}

/// B11: U+0000 in metadata values.
async fn nul_in_metadata_values(s: &dyn CheckpointSaver) -> Result<bool, CheckFailure> {
    let t = new_thread_id();
    let mut meta = marked_metadata("loop", 0, &t);
    meta.insert("top", "a\0b");
    meta.insert("nested", Value::map([("k", Value::from("c\0d"))]));
    let result = put_metadata(s, &generate_config(&t), ID1, &meta).await;
    let nul = Refusal::Naming("U+0000");
    let Some(stored) = kept_or_refused(s, &t, result, nul, "U+0000 in metadata").await? else {
        return Ok(true);
    };
    let got = get(s, &stored).await?;
    ensure_eq!(got.metadata.get("top"), Some(&Value::from("a\0b")), "top-level value");
    ensure_eq!(got.metadata.get("nested"), meta.get("nested"), "nested value");
    let hits = list(s, None, marker_filter(&t).filter("top", "a\0b")).await?;
    ensure_eq!(hits.len(), 1, "filtered on a value with U+0000");
    Ok(false)
}

/// B17: NaN and infinity in metadata.
async fn non_finite_metadata(s: &dyn CheckpointSaver) -> Result<bool, CheckFailure> {
    let t = new_thread_id();
    let mut meta = generate_metadata("loop", 0);
    meta.insert("score", Value::Float(f64::NAN));
    meta.insert("inf", Value::Float(f64::INFINITY));
    let result = put_metadata(s, &generate_config(&t), ID1, &meta).await;
    let Some(stored) = kept_or_refused(s, &t, result, Refusal::Naming("NaN"), "NaN in metadata").await? else {
        return Ok(true);
    };
    let got = get(s, &stored).await?;
    for (key, want) in [("score", f64::NAN), ("inf", f64::INFINITY)] {
        let read = got.metadata.get(key);
        ensure!(
            read.is_some_and(|v| same(v, &Value::Float(want))),
            "{key} read back as {read:?}"
        );
    }
    Ok(false)
}

/// Bit-exact comparison of values (NaN included).
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    matches!(
        (crate::serde::msgpack::encode(a), crate::serde::msgpack::encode(b)),
        (Ok(x), Ok(y)) if x == y
    )
}

/// The checks of rows a store may refuse whole: each runs its row and
/// accepts either answer (which one a backend gives, [`refusals`] says).
macro_rules! kept_or_refused_checks {
    ($($(#[$doc:meta])* $name:ident => $row:ident;)*) => {
        $(
            $(#[$doc])*
            pub async fn $name(s: &dyn CheckpointSaver) -> CheckResult {
                $row(s).await.map(drop)
            }
        )*
    };
}

kept_or_refused_checks! {
    /// B02: a 1 MiB thread id is stored and read back, or refused whole as a
    /// storage error that is not retryable.
    put_huge_thread_id_kept_or_refused => huge_thread_id;
    /// B03: U+0000 in thread id, namespace and checkpoint id is stored and read
    /// back exactly (distinct from the id cut at the NUL), or refused whole with
    /// `InvalidInput`.
    put_nul_in_identifiers_kept_or_refused => nul_in_identifiers;
    /// B07: a 64 KiB random checkpoint id is stored and read back, or refused
    /// whole as a storage error that is not retryable.
    put_huge_checkpoint_id_kept_or_refused => huge_checkpoint_id;
    /// B08: channel names `""`, with U+0000, 10 kB long, emoji, `__error__`,
    /// `a.b`, `$x` are stored and read back; or the U+0000 name is refused with
    /// `InvalidInput`, the put storing nothing, and the others are stored.
    put_hostile_channel_names_kept_or_refused => nul_in_channel_names;
    /// B09: task ids and task paths `""`, with U+0000, 10 kB long and non-ASCII
    /// are stored; or U+0000 is refused with `InvalidInput` and the others
    /// stored.
    put_writes_hostile_task_ids_kept_or_refused => nul_in_task_ids;
    /// B11: U+0000 in metadata values (top level and nested) is stored, read
    /// back and filterable, or refused whole with `InvalidInput`.
    put_nul_in_metadata_kept_or_refused => nul_in_metadata_values;
    /// B17: NaN and infinity in metadata are stored and read back, or refused
    /// whole with `InvalidInput`.
    put_non_finite_metadata_kept_or_refused => non_finite_metadata;
}
