//! Replaying a sequence on the saver under test and on the oracle, and
//! comparing what each returned.

use std::fmt;

use super::ops::{value_for, ModelOp, PutChannel, WriteTarget, THREADS};
use super::OpCounts;
use crate::checkpoint::{ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple};
use crate::config::CheckpointConfig;
use crate::error::Error;
use crate::saver::{CheckpointSaver, CheckpointSaverExt, ListOptions, ListThreadsOptions, PruneStrategy};
use crate::serde::Value;

/// How [`replay`] names things and reports.
#[derive(Debug, Clone, Default)]
pub struct ReplaySettings {
    /// Prefix of every thread and run id (empty for an exclusive saver).
    pub prefix: String,
    /// Whether the saver under test holds nothing but this case (see
    /// [`ModelConfig::exclusive`](super::ModelConfig::exclusive)).
    pub exclusive: bool,
    /// Whether a difference is described in full (both results) or only
    /// named.
    pub verbose: bool,
    /// Whether metadata is compared with its key order (see
    /// [`ModelConfig::ordered_metadata`](super::ModelConfig::ordered_metadata)).
    pub ordered_metadata: bool,
}

/// Runs `ops` on `saver` and on `oracle` (normally a
/// [`ContractModel`](super::ContractModel)), comparing every result, then the
/// whole state of the case's threads, and counts the operations run and left
/// out in `counts`. Operations `saver` does not declare in its capabilities
/// are left out.
///
/// # Errors
/// The first difference, in words.
pub async fn replay(
    saver: &dyn CheckpointSaver,
    oracle: &dyn CheckpointSaver,
    ops: &[ModelOp],
    settings: &ReplaySettings,
    counts: &mut OpCounts,
) -> Result<(), String> {
    let ReplaySettings {
        prefix,
        exclusive,
        verbose,
        ..
    } = settings;
    let (exclusive, verbose) = (*exclusive, *verbose);
    let canon = Canon {
        sort: !settings.ordered_metadata,
    };
    let names = Names { prefix };
    let mut last_put: Option<CheckpointConfig> = None;
    let caps = saver.capabilities();
    for (step, op) in ops.iter().enumerate() {
        if !caps.supports(op.operation()) {
            continue;
        }
        match op {
            ModelOp::Put {
                thread,
                ns,
                id,
                parent,
                channels,
                metadata,
            } => {
                let config = names.config(thread, ns, parent.as_deref());
                let channels = settle_omitted(oracle, &config, channels).await;
                let (cp, new_versions) = build_put(&channels, id);
                let meta = CheckpointMetadata(names.entries(metadata).into());
                let got = outcome(saver.put(&config, &cp, &meta, &new_versions).await);
                let want = outcome(oracle.put(&config, &cp, &meta, &new_versions).await);
                compare(step, op, &got, &want, verbose)?;
                last_put = want.ok();
            }
            ModelOp::PutWrites {
                thread,
                ns,
                target,
                task_id,
                task_path,
                writes,
            } => {
                let mut config = names.config(thread, ns, None);
                let found = match target {
                    WriteTarget::Missing => Some(None),
                    WriteTarget::LastPut => match &last_put {
                        Some(stored) => {
                            config = stored.clone();
                            // It may have been deleted since.
                            stored_id(oracle, &config).await
                        }
                        None => None,
                    },
                    WriteTarget::Latest => stored_id(oracle, &config).await,
                    WriteTarget::Id(id) => {
                        config.checkpoint_id = Some(id.clone());
                        stored_id(oracle, &config).await
                    }
                };
                let Some(id) = found else {
                    // Writes before their checkpoint: see `ModelOp::PutWrites`.
                    *counts.skipped.entry(op.name()).or_default() += 1;
                    continue;
                };
                config.checkpoint_id = id;
                let got = outcome(saver.put_writes(&config, writes, task_id, task_path).await);
                let want = outcome(oracle.put_writes(&config, writes, task_id, task_path).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::GetTuple { thread, ns, id } => {
                let config = names.config(thread, ns, id.as_deref());
                let got = canon.tuple(outcome(saver.get_tuple(&config).await));
                let want = canon.tuple(outcome(oracle.get_tuple(&config).await));
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::List {
                thread,
                ns,
                id,
                filter,
                before,
                limit,
            } => {
                let config = thread.as_ref().map(|t| CheckpointConfig {
                    thread_id: names.thread(t),
                    checkpoint_ns: ns.clone(),
                    checkpoint_id: id.clone(),
                });
                let options = ListOptions {
                    filter: names.entries(filter),
                    before: before.clone(),
                    limit: *limit,
                };
                let (got, want) = if config.is_none() && !exclusive {
                    let unlimited = ListOptions {
                        limit: None,
                        ..options.clone()
                    };
                    let restrict = |r: Outcome<Vec<CheckpointTuple>>| {
                        r.map(|items| {
                            items
                                .into_iter()
                                .filter(|t| names.owns(&t.config.thread_id))
                                .take(limit.unwrap_or(usize::MAX))
                                .collect::<Vec<_>>()
                        })
                    };
                    (
                        canon.tuples(restrict(collect_list(saver, None, unlimited.clone()).await)),
                        canon.tuples(restrict(collect_list(oracle, None, unlimited).await)),
                    )
                } else {
                    (
                        canon.tuples(collect_list(saver, config.clone(), options.clone()).await),
                        canon.tuples(collect_list(oracle, config, options).await),
                    )
                };
                compare_items(step, op, &got, &want, verbose)?;
            }
            ModelOp::DeleteThread { thread } => {
                let t = names.thread(thread);
                let got = outcome(saver.delete_thread(&t).await);
                let want = outcome(oracle.delete_thread(&t).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::DeleteForRuns { run_ids } => {
                let runs: Vec<String> = run_ids.iter().map(|r| format!("{prefix}{r}")).collect();
                let got = outcome(saver.delete_for_runs(&runs).await);
                let want = outcome(oracle.delete_for_runs(&runs).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::CopyThread { source, target } => {
                let (s, t) = (names.thread(source), names.thread(target));
                let got = outcome(saver.copy_thread(&s, &t).await);
                let want = outcome(oracle.copy_thread(&s, &t).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::Prune { threads, keep_latest } => {
                let threads: Vec<String> = threads.iter().map(|t| names.thread(t)).collect();
                let strategy = if *keep_latest {
                    PruneStrategy::KeepLatest
                } else {
                    PruneStrategy::Delete
                };
                let got = outcome(saver.prune(&threads, strategy).await);
                let want = outcome(oracle.prune(&threads, strategy).await);
                compare(step, op, &got, &want, verbose)?;
            }
            ModelOp::ListThreads { filter, after, limit } => {
                let options = ListThreadsOptions {
                    filter: names.entries(filter),
                    after: match after {
                        Some(a) => Some(names.thread(a)),
                        None if exclusive => None,
                        None => Some(prefix.to_owned()),
                    },
                    limit: *limit,
                };
                let restrict = |r: crate::Result<Vec<crate::saver::ThreadInfo>>| {
                    outcome(r).map(|v| v.into_iter().filter(|t| names.owns(&t.thread_id)).collect::<Vec<_>>())
                };
                let got = canon.threads(restrict(saver.list_threads(options.clone()).await));
                let want = canon.threads(restrict(oracle.list_threads(options).await));
                compare_items(step, op, &got, &want, verbose)?;
            }
            ModelOp::DeltaChannelHistory {
                thread,
                ns,
                id,
                channels,
            } => {
                let config = names.config(thread, ns, id.as_deref());
                let ordered = |r: crate::Result<indexmap::IndexMap<String, crate::saver::DeltaChannelHistory>>| {
                    outcome(r).map(|m| m.into_iter().collect::<Vec<_>>())
                };
                let got = ordered(saver.get_delta_channel_history(&config, channels).await);
                let want = ordered(oracle.get_delta_channel_history(&config, channels).await);
                compare_items(step, op, &got, &want, verbose)?;
            }
        }
        *counts.ran.entry(op.name()).or_default() += 1;
    }
    // The whole state of the case's threads, every namespace.
    let final_op = ModelOp::List {
        thread: None,
        ns: None,
        id: None,
        filter: Vec::new(),
        before: None,
        limit: None,
    };
    for thread in THREADS {
        let config = Some(CheckpointConfig::all_namespaces(names.thread(thread)));
        let got = canon.tuples(collect_list(saver, config.clone(), ListOptions::default()).await);
        let want = canon.tuples(collect_list(oracle, config, ListOptions::default()).await);
        compare_items(ops.len(), &final_op, &got, &want, verbose)
            .map_err(|e| format!("final state of thread {thread}: {e}"))?;
        if caps.thread_keys {
            // the stored keys, writes of checkpoints no longer stored included
            let t = names.thread(thread);
            let got = outcome(saver.thread_keys(&t).await);
            let want = outcome(oracle.thread_keys(&t).await);
            compare(ops.len(), &final_op, &got, &want, verbose)
                .map_err(|e| format!("final keys of thread {thread}: {e}"))?;
        }
    }
    Ok(())
}

fn error_kind(err: &Error) -> &'static str {
    match err {
        Error::Serde { .. } => "Serde",
        Error::InvalidInput { .. } => "InvalidInput",
        Error::Unsupported { .. } => "Unsupported",
        Error::ThreadExists { .. } => "ThreadExists",
        Error::NotFound { .. } => "NotFound",
        Error::BlockingInAsync { .. } => "BlockingInAsync",
        Error::Encryption(_) => "Encryption",
        Error::Step(_) => "Step",
        Error::Fenced { .. } => "Fenced",
        #[cfg(feature = "store")]
        Error::Store(_) => "Store",
        Error::InvalidPolicy(_) => "InvalidPolicy",
        Error::Storage { .. } => "Storage",
    }
}

type Outcome<T> = Result<T, &'static str>;

fn outcome<T>(r: crate::Result<T>) -> Outcome<T> {
    r.map_err(|e| error_kind(&e))
}

/// Applies per-case prefixes to thread and run ids.
struct Names<'a> {
    prefix: &'a str,
}

impl Names<'_> {
    fn thread(&self, t: &str) -> String {
        format!("{}{t}", self.prefix)
    }

    fn value(&self, key: &str, v: &Value) -> Value {
        match (key, v) {
            ("run_id", Value::Str(r)) => Value::from(format!("{}{r}", self.prefix)),
            _ => v.clone(),
        }
    }

    fn entries(&self, entries: &[(String, Value)]) -> indexmap::IndexMap<String, Value> {
        entries.iter().map(|(k, v)| (k.clone(), self.value(k, v))).collect()
    }

    fn owns(&self, thread: &str) -> bool {
        thread.starts_with(self.prefix)
    }

    /// The config of checkpoint `id` (`None`: the latest) of (`thread`, `ns`).
    fn config(&self, thread: &str, ns: &str, id: Option<&str>) -> CheckpointConfig {
        let mut config = CheckpointConfig::new(self.thread(thread)).with_ns(ns);
        config.checkpoint_id = id.map(str::to_owned);
        config
    }
}

fn build_put(op_channels: &[PutChannel], id: &str) -> (Checkpoint, ChannelVersions) {
    let mut cp = Checkpoint::new(0);
    cp.id = id.to_owned();
    cp.ts = "2024-01-01T00:00:00+00:00".to_owned();
    let mut new_versions = ChannelVersions::new();
    for c in op_channels {
        cp.channel_versions.insert(c.channel.clone(), c.version.clone());
        if c.gives_value() {
            if let Some(value) = value_for(&c.channel, &c.version) {
                cp.channel_values.insert(c.channel.clone(), value);
            }
        }
        if c.is_new {
            new_versions.insert(c.channel.clone(), c.version.clone());
        }
    }
    if let Some(first) = op_channels.first() {
        let mut seen = ChannelVersions::new();
        seen.insert(first.channel.clone(), first.version.clone());
        cp.versions_seen.insert("node".to_owned(), seen);
    }
    cp.updated_channels = Some(new_versions.keys().cloned().collect());
    (cp, new_versions)
}

/// A value a put leaves out for the saver to read from the version is, in
/// the model as in the LangGraph runtime (untouched channels keep their
/// parent's version), one the parent holds at that version. Where the parent
/// holds none, the model gives the value: the contract's "read from the
/// version the checkpoint names" is then open, and backends differ (blob
/// stores find a value any checkpoint of the thread stored at that version;
/// SQLite, storing whole checkpoints, copies from the parent only).
/// The id of the checkpoint `config` names, when the oracle stores it.
async fn stored_id(oracle: &dyn CheckpointSaver, config: &CheckpointConfig) -> Option<Option<String>> {
    oracle
        .get_tuple(config)
        .await
        .ok()
        .flatten()
        .map(|t| t.config.checkpoint_id)
}

async fn settle_omitted(
    oracle: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    channels: &[PutChannel],
) -> Vec<PutChannel> {
    let omitted = |c: &PutChannel| c.omit_value && !c.is_new && value_for(&c.channel, &c.version).is_some();
    let mut out = channels.to_vec();
    if !out.iter().any(omitted) {
        return out;
    }
    let parent = match config.checkpoint_id() {
        Some(_) => oracle.get_tuple(config).await.ok().flatten(),
        None => None,
    };
    for c in out.iter_mut().filter(|c| omitted(c)) {
        c.omit_value = parent.as_ref().is_some_and(|p| {
            p.checkpoint.channel_versions.get(&c.channel) == Some(&c.version)
                && p.checkpoint.channel_values.contains_key(&c.channel)
        });
    }
    out
}

/// Puts metadata in a canonical key order when the store does not keep it.
struct Canon {
    sort: bool,
}

impl Canon {
    fn value(v: &mut Value) {
        match v {
            Value::Map(entries) => {
                for (_, v) in entries.iter_mut() {
                    Self::value(v);
                }
                entries.sort_by(|(a, _), (b, _)| format!("{a:?}").cmp(&format!("{b:?}")));
            }
            Value::Array(items) => items.iter_mut().for_each(Self::value),
            _ => {}
        }
    }

    fn metadata(&self, m: &mut CheckpointMetadata) {
        if self.sort {
            m.0.sort_keys();
            m.0.values_mut().for_each(Self::value);
        }
    }

    fn tuple(&self, r: Outcome<Option<CheckpointTuple>>) -> Outcome<Option<CheckpointTuple>> {
        r.map(|t| {
            t.map(|mut t| {
                self.metadata(&mut t.metadata);
                t
            })
        })
    }

    fn tuples(&self, r: Outcome<Vec<CheckpointTuple>>) -> Outcome<Vec<CheckpointTuple>> {
        r.map(|mut ts| {
            ts.iter_mut().for_each(|t| self.metadata(&mut t.metadata));
            ts
        })
    }

    fn threads(&self, r: Outcome<Vec<crate::saver::ThreadInfo>>) -> Outcome<Vec<crate::saver::ThreadInfo>> {
        r.map(|mut ts| {
            ts.iter_mut().for_each(|t| self.metadata(&mut t.metadata));
            ts
        })
    }
}

async fn collect_list(
    saver: &dyn CheckpointSaver,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> Outcome<Vec<CheckpointTuple>> {
    outcome(saver.list_vec(config, options).await)
}

/// Compares one result; the message names the operation only unless
/// `verbose` (shrinking replays thousands of failing cases: only the minimal
/// one is described).
fn compare<T: PartialEq + fmt::Debug>(
    step: usize,
    op: &ModelOp,
    got: &Outcome<T>,
    want: &Outcome<T>,
    verbose: bool,
) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let head = format!("operation {step} ({})", op.name());
    if !verbose {
        return Err(head);
    }
    Err(format!(
        "{head} returned\n    {got:?}\n  the oracle returned\n    {want:?}"
    ))
}

/// [`compare`] for sequences: a verbose message shows the lengths and the
/// first item that differs.
fn compare_items<T: PartialEq + fmt::Debug>(
    step: usize,
    op: &ModelOp,
    got: &Outcome<Vec<T>>,
    want: &Outcome<Vec<T>>,
    verbose: bool,
) -> Result<(), String> {
    match (got, want) {
        (Ok(g), Ok(w)) if verbose && g != w => {
            let i = g.iter().zip(w).take_while(|(a, b)| a == b).count();
            Err(format!(
                "operation {step} ({}) returned {} items, the oracle {}; first difference at item {i}:\n    {:?}\n  the oracle's:\n    {:?}",
                op.name(),
                g.len(),
                w.len(),
                g.get(i),
                w.get(i)
            ))
        }
        _ => compare(step, op, got, want, verbose),
    }
}
