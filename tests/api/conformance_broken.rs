//! Proof that the conformance checks can fail: wrappers around
//! [`InMemorySaver`] that each break one rule on purpose, and the checks that
//! must catch them. Every named check must also pass against the honest
//! wrapper, so a failure is the flaw's doing, not the wrapper's.

use crate::harness;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use indexmap::IndexMap;

use checkpointer::conformance::{self, Outcome};
use checkpointer::saver::json_eq;
use checkpointer::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointStream, CheckpointTuple, DeltaChannelHistory, Error, InMemorySaver, ListOptions,
    ListThreadsOptions, PruneStrategy, Result, ThreadInfo, ThreadKeys, Value,
};

/// The one rule a [`Broken`] saver breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// None: the wrapper only delegates.
    Honest,
    /// Pending writes come back in reverse order.
    WritesUnsorted,
    /// Pending writes sorted by (task_id, idx), ignoring task_path (LangGraph
    /// before 4.3).
    WritesIgnoreTaskPath,
    /// `list` yields oldest first.
    ListAscending,
    /// `list` breaks id ties by thread and namespace ascending.
    ListTiesAscending,
    /// `list` ignores `before`.
    IgnoresBefore,
    /// "Latest" is the checkpoint put last, not the greatest id.
    LatestIsLastInserted,
    /// `get_tuple` with an unknown id falls back to the latest.
    MissingIdFallsBackToLatest,
    /// A regular write replaces an earlier one of the same task and channel.
    RegularWritesOverwrite,
    /// In a batch mixing regular and special writes, special writes keep the
    /// first value (SQLite's per-call rule).
    SpecialWritesKeepFirstInMixedBatch,
    /// The metadata filter compares nested maps by key order.
    FilterMapsByKeyOrder,
    /// The metadata filter finds `true == 1` (Python's `==`).
    FilterBoolIsInt,
    /// A `null` filter value requires the key to exist (Postgres `@>`).
    NullFilterNeedsKey,
    /// `limit` is applied before the filter.
    LimitBeforeFilter,
    /// `put` drops values whose channel is not in `new_versions` (Python's
    /// InMemorySaver).
    DropsValuesOutsideNewVersions,
    /// `delete_thread` removes only the root namespace.
    DeleteThreadRootOnly,
    /// Declares every extended operation but `copy_thread` is unsupported.
    CapabilitiesOverclaim,
    /// Declares no extended operation but performs them all.
    CapabilitiesUnderclaim,
    /// Declares no extended operation and supports none (honestly).
    NoExtended,
    /// Delta history includes the target's own writes.
    DeltaIncludesTargetWrites,
    /// `copy_thread` onto a thread with checkpoints silently succeeds.
    CopyIgnoresExistingTarget,
    /// Keep-latest prune keeps only the latest checkpoint of each namespace,
    /// dropping the ancestors a delta channel needs.
    PruneDropsDeltaAncestors,
    /// Keep-latest prune leaves a kept checkpoint naming its pruned parent.
    PruneKeepsPrunedParents,
}

type WriteKey = (String, String, String, String, String);

/// The saver under test; `list` streams hold a share of its state.
#[derive(Debug, Clone)]
struct Broken(Arc<State>);

impl std::ops::Deref for Broken {
    type Target = State;

    fn deref(&self) -> &State {
        &self.0
    }
}

#[derive(Debug)]
struct State {
    inner: InMemorySaver,
    flaw: Flaw,
    /// (thread, ns) -> id of the checkpoint put last.
    last_put: Mutex<HashMap<(String, String), String>>,
    /// (thread, ns, checkpoint, task, channel) -> last regular value written.
    overrides: Mutex<HashMap<WriteKey, Value>>,
}

impl Broken {
    fn new(flaw: Flaw) -> Self {
        Broken(Arc::new(State {
            inner: InMemorySaver::new(),
            flaw,
            last_put: Mutex::new(HashMap::new()),
            overrides: Mutex::new(HashMap::new()),
        }))
    }
}

impl State {
    fn unsupported(operation: &'static str) -> Error {
        Error::Unsupported {
            operation,
            implementer: "Broken",
        }
    }

    fn extended_off(&self) -> bool {
        self.flaw == Flaw::NoExtended
    }

    /// Applies the flaws that show in every returned tuple.
    fn disfigure(&self, mut t: CheckpointTuple) -> CheckpointTuple {
        match self.flaw {
            Flaw::WritesUnsorted => t.pending_writes.reverse(),
            // Stable: within a task the (correct) idx order is kept.
            Flaw::WritesIgnoreTaskPath => t.pending_writes.sort_by(|a, b| a.task_id.cmp(&b.task_id)),
            Flaw::RegularWritesOverwrite => {
                let overrides = self.overrides.lock().unwrap();
                for w in &mut t.pending_writes {
                    let key = (
                        t.config.thread_id.clone(),
                        t.config.ns().to_owned(),
                        t.config.checkpoint_id.clone().unwrap_or_default(),
                        w.task_id.clone(),
                        w.channel.clone(),
                    );
                    if let Some(v) = overrides.get(&key) {
                        w.value = v.clone();
                    }
                }
            }
            _ => {}
        }
        t
    }

    fn filters_locally(&self) -> bool {
        matches!(
            self.flaw,
            Flaw::FilterMapsByKeyOrder | Flaw::FilterBoolIsInt | Flaw::NullFilterNeedsKey | Flaw::LimitBeforeFilter
        )
    }

    fn value_matches(&self, have: &Value, want: &Value) -> bool {
        match self.flaw {
            Flaw::FilterMapsByKeyOrder => ordered_eq(have, want),
            Flaw::FilterBoolIsInt => match (have, want) {
                (Value::Bool(b), n) | (n, Value::Bool(b)) if n.as_number().is_some() => {
                    n.as_number() == Some(f64::from(u8::from(*b)))
                }
                _ => json_eq(have, want),
            },
            _ => json_eq(have, want),
        }
    }

    fn metadata_matches(&self, md: &CheckpointMetadata, filter: &IndexMap<String, Value>) -> bool {
        filter.iter().all(|(k, want)| match md.get(k) {
            Some(have) => self.value_matches(have, want),
            None => self.flaw != Flaw::NullFilterNeedsKey && want.is_nil(),
        })
    }

    async fn list_impl(&self, config: Option<CheckpointConfig>, options: ListOptions) -> Result<Vec<CheckpointTuple>> {
        let mut inner_opts = options.clone();
        let local = self.filters_locally();
        if local {
            inner_opts.filter.clear();
        }
        if self.flaw == Flaw::IgnoresBefore {
            inner_opts.before = None;
        }
        let truncate_here = (local && self.flaw != Flaw::LimitBeforeFilter) || self.flaw == Flaw::ListAscending;
        if truncate_here {
            inner_opts.limit = None;
        }
        let mut tuples = self.inner.list_vec(config, inner_opts).await?;
        if local {
            tuples.retain(|t| self.metadata_matches(&t.metadata, &options.filter));
        }
        if self.flaw == Flaw::ListAscending {
            tuples.reverse();
        }
        if self.flaw == Flaw::ListTiesAscending {
            tuples.sort_by(|a, b| {
                b.checkpoint
                    .id
                    .cmp(&a.checkpoint.id)
                    .then_with(|| a.config.thread_id.cmp(&b.config.thread_id))
                    .then_with(|| a.config.ns().cmp(b.config.ns()))
            });
        }
        if truncate_here {
            if let Some(n) = options.limit {
                tuples.truncate(n);
            }
        }
        Ok(tuples.into_iter().map(|t| self.disfigure(t)).collect())
    }

    /// Every tuple of a thread, all namespaces, newest first.
    async fn all_of(&self, thread_id: &str) -> Result<Vec<CheckpointTuple>> {
        self.inner
            .list_vec(
                Some(CheckpointConfig::all_namespaces(thread_id)),
                ListOptions::default(),
            )
            .await
    }

    /// Puts tuples (oldest first) back with their parents and writes.
    async fn restore(&self, tuples: impl IntoIterator<Item = CheckpointTuple>) -> Result<()> {
        for t in tuples {
            let parent = CheckpointConfig {
                thread_id: t.config.thread_id.clone(),
                checkpoint_ns: t.config.checkpoint_ns.clone(),
                checkpoint_id: t.parent_config.and_then(|p| p.checkpoint_id),
            };
            self.inner
                .put(&parent, &t.checkpoint, &t.metadata, &t.checkpoint.channel_versions)
                .await?;
            for w in t.pending_writes {
                self.inner
                    .put_writes(&t.config, &[(w.channel, w.value)], &w.task_id, "")
                    .await?;
            }
        }
        Ok(())
    }
}

/// Equality comparing maps entry by entry in order (and numbers by value).
fn ordered_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k1, v1), (k2, v2))| ordered_eq(k1, k2) && ordered_eq(v1, v2))
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| ordered_eq(p, q)),
        _ => json_eq(a, b),
    }
}

// every method forwarded, so a new one cannot silently answer Unsupported
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl CheckpointSaver for Broken {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let mut config = config.clone();
        if self.flaw == Flaw::LatestIsLastInserted && config.checkpoint_id().is_none() {
            let key = (config.thread_id.clone(), config.ns().to_owned());
            if let Some(id) = self.last_put.lock().unwrap().get(&key) {
                config.checkpoint_id = Some(id.clone());
            }
        }
        let mut found = self.inner.get_tuple(&config).await?;
        if found.is_none() && self.flaw == Flaw::MissingIdFallsBackToLatest {
            config.checkpoint_id = None;
            found = self.inner.get_tuple(&config).await?;
        }
        Ok(found.map(|t| self.disfigure(t)))
    }

    fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> CheckpointStream {
        let state = self.0.clone();
        futures::stream::once(async move { state.list_impl(config, options).await })
            .map_ok(|tuples| futures::stream::iter(tuples.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let mut checkpoint = checkpoint.clone();
        if self.flaw == Flaw::DropsValuesOutsideNewVersions {
            checkpoint.channel_values.retain(|ch, _| new_versions.contains_key(ch));
        }
        let stored = self.inner.put(config, &checkpoint, metadata, new_versions).await?;
        self.last_put.lock().unwrap().insert(
            (config.thread_id.clone(), config.ns().to_owned()),
            checkpoint.id.clone(),
        );
        Ok(stored)
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let is_special = |ch: &str| checkpointer::checkpoint::special_write_idx(ch).is_some();
        let mut writes = writes.to_vec();
        if self.flaw == Flaw::SpecialWritesKeepFirstInMixedBatch
            && writes.iter().any(|(ch, _)| is_special(ch))
            && writes.iter().any(|(ch, _)| !is_special(ch))
        {
            let existing = match self.inner.get_tuple(config).await? {
                Some(t) => t.pending_writes,
                None => Vec::new(),
            };
            writes.retain(|(ch, _)| {
                !is_special(ch) || !existing.iter().any(|w| w.task_id == task_id && w.channel == *ch)
            });
        }
        self.inner.put_writes(config, &writes, task_id, task_path).await?;
        if self.flaw == Flaw::RegularWritesOverwrite {
            let mut overrides = self.overrides.lock().unwrap();
            for (ch, v) in writes.iter().filter(|(ch, _)| !is_special(ch)) {
                let key = (
                    config.thread_id.clone(),
                    config.ns().to_owned(),
                    config.checkpoint_id.clone().unwrap_or_default(),
                    task_id.to_owned(),
                    ch.clone(),
                );
                overrides.insert(key, v.clone());
            }
        }
        Ok(())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        if self.flaw != Flaw::DeleteThreadRootOnly {
            return self.inner.delete_thread(thread_id).await;
        }
        let others: Vec<CheckpointTuple> = self
            .all_of(thread_id)
            .await?
            .into_iter()
            .filter(|t| t.config.ns() != "")
            .collect();
        self.inner.delete_thread(thread_id).await?;
        self.restore(others.into_iter().rev()).await
    }

    fn capabilities(&self) -> Capabilities {
        match self.flaw {
            Flaw::CapabilitiesOverclaim => Capabilities::all(),
            Flaw::CapabilitiesUnderclaim | Flaw::NoExtended => Capabilities::none(),
            _ => self.inner.capabilities(),
        }
    }

    /// No encoded I/O: its flaws are in the decoded calls.
    fn as_encoded(&self) -> Option<&dyn checkpointer::encoded::EncodedSaver> {
        None
    }

    /// No fencing: its flaws are in the unfenced calls.
    fn as_fenceable(&self) -> Option<&dyn checkpointer::fence::Fenceable> {
        None
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if self.extended_off() {
            return Err(State::unsupported("delete_for_runs"));
        }
        self.inner.delete_for_runs(run_ids).await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        match self.flaw {
            Flaw::NoExtended | Flaw::CapabilitiesOverclaim => Err(State::unsupported("copy_thread")),
            Flaw::CopyIgnoresExistingTarget => match self.inner.copy_thread(source, target).await {
                Err(Error::ThreadExists { .. }) => Ok(()),
                other => other,
            },
            _ => self.inner.copy_thread(source, target).await,
        }
    }

    async fn retain(
        &self,
        policy: &checkpointer::retention::RetentionPolicy,
        options: checkpointer::retention::RetainOptions,
    ) -> Result<checkpointer::retention::RetentionReport> {
        if self.extended_off() {
            return Err(State::unsupported("retain"));
        }
        self.inner.retain(policy, options).await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        if self.extended_off() {
            return Err(State::unsupported("prune"));
        }
        if strategy != PruneStrategy::KeepLatest {
            return self.inner.prune(thread_ids, strategy).await;
        }
        match self.flaw {
            Flaw::PruneDropsDeltaAncestors => {
                for thread_id in thread_ids {
                    let mut latest: Vec<CheckpointTuple> = Vec::new();
                    for t in self.all_of(thread_id).await? {
                        if !latest.iter().any(|l| l.config.checkpoint_ns == t.config.checkpoint_ns) {
                            // its parent is gone
                            latest.push(CheckpointTuple {
                                parent_config: None,
                                ..t
                            });
                        }
                    }
                    self.inner.delete_thread(thread_id).await?;
                    self.restore(latest.into_iter().rev()).await?;
                }
                Ok(())
            }
            Flaw::PruneKeepsPrunedParents => {
                for thread_id in thread_ids {
                    let parents: HashMap<CheckpointConfig, Option<CheckpointConfig>> = self
                        .all_of(thread_id)
                        .await?
                        .into_iter()
                        .map(|t| (t.config, t.parent_config))
                        .collect();
                    self.inner.prune(std::slice::from_ref(thread_id), strategy).await?;
                    // the forgotten parents put back (a put of the same id
                    // replaces the parent; the writes stay)
                    for t in self.all_of(thread_id).await? {
                        if let (None, Some(Some(parent))) = (&t.parent_config, parents.get(&t.config)) {
                            self.inner
                                .put(parent, &t.checkpoint, &t.metadata, &t.checkpoint.channel_versions)
                                .await?;
                        }
                    }
                }
                Ok(())
            }
            _ => self.inner.prune(thread_ids, strategy).await,
        }
    }

    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<IndexMap<String, DeltaChannelHistory>> {
        if self.extended_off() {
            return Err(State::unsupported("get_delta_channel_history"));
        }
        let mut out = self.inner.get_delta_channel_history(config, channels).await?;
        if self.flaw == Flaw::DeltaIncludesTargetWrites {
            if let Some(target) = self.inner.get_tuple(config).await? {
                for w in target.pending_writes {
                    if let Some(h) = out.get_mut(&w.channel) {
                        h.writes.push(w);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
        if self.extended_off() {
            return Err(State::unsupported("list_threads"));
        }
        self.inner.list_threads(options).await
    }

    async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        if self.extended_off() {
            return Err(State::unsupported("thread_keys"));
        }
        self.inner.thread_keys(thread_id).await
    }

    fn get_next_version(
        &self,
        current: Option<&checkpointer::ChannelVersion>,
    ) -> checkpointer::Result<checkpointer::ChannelVersion> {
        self.inner.get_next_version(current)
    }
}

async fn outcome(saver: &dyn CheckpointSaver, name: &str) -> Outcome {
    let check = conformance::check(name).unwrap_or_else(|| panic!("no conformance check named {name}"));
    check.run(saver).await
}

/// Each of `checks` fails against a saver with `flaw`, and passes against the
/// honest wrapper.
async fn assert_caught(flaw: Flaw, checks: &[&str]) {
    let broken = Broken::new(flaw);
    let honest = Broken::new(Flaw::Honest);
    for name in checks {
        let got = outcome(&broken, name).await;
        assert!(got.is_failed(), "{name} did not catch {flaw:?}: {got:?}");
        assert_eq!(
            outcome(&honest, name).await,
            Outcome::Passed,
            "{name} against the honest wrapper"
        );
    }
}

async fn honest_wrapper_passes_everything() {
    let report = conformance::run_all(&Broken::new(Flaw::Honest)).await;
    assert!(report.is_success(), "{report}");
    assert_eq!(report.results.len(), conformance::checks().len());
}

async fn undeclared_operations_are_skipped_not_passed() {
    let report = conformance::run_all(&Broken::new(Flaw::NoExtended)).await;
    assert!(report.is_success(), "{report}");
    let extended = conformance::checks()
        .iter()
        .filter(|c| c.capability().is_extended())
        .count();
    assert!(extended > 0);
    // and encoded I/O, which the wrapper does not have
    let encoded = conformance::checks()
        .iter()
        .filter(|c| c.capability() == conformance::Capability::Encoded)
        .count();
    assert!(encoded > 0);
    // and fencing, which it does not have either
    let fencing = conformance::checks()
        .iter()
        .filter(|c| c.capability() == conformance::Capability::Fencing)
        .count();
    assert!(fencing > 0);
    assert_eq!(report.skipped().count(), extended + encoded + fencing, "{report}");
    for r in report.skipped() {
        let Outcome::Skipped(reason) = &r.outcome else {
            unreachable!()
        };
        assert!(reason.contains(r.capability.name()), "{}: {reason}", r.name);
    }
}

async fn catches_unsorted_writes() {
    assert_caught(
        Flaw::WritesUnsorted,
        &["pending_writes_sorted", "put_writes_multiple_writes_same_task"],
    )
    .await;
}

async fn catches_writes_sorted_without_task_path() {
    assert_caught(Flaw::WritesIgnoreTaskPath, &["pending_writes_sorted"]).await;
}

async fn catches_ascending_ties_in_list() {
    assert_caught(Flaw::ListTiesAscending, &["list_ordering"]).await;
    // Within one thread and namespace ids never tie: the spec's part passes.
    let broken = Broken::new(Flaw::ListTiesAscending);
    assert_eq!(outcome(&broken, "list_all").await, Outcome::Passed);
}

async fn catches_ascending_list() {
    assert_caught(
        Flaw::ListAscending,
        &["list_ordering", "list_all", "list_limit", "list_all_namespaces"],
    )
    .await;
}

async fn catches_ignored_before() {
    assert_caught(
        Flaw::IgnoresBefore,
        &["list_before", "list_before_excludes_boundary", "list_limit_plus_before"],
    )
    .await;
}

async fn catches_latest_by_insertion_order() {
    assert_caught(Flaw::LatestIsLastInserted, &["get_tuple_latest_is_max_id"]).await;
    // The spec's own check inserts in id order and cannot see this flaw.
    let broken = Broken::new(Flaw::LatestIsLastInserted);
    assert_eq!(
        outcome(&broken, "get_tuple_latest_when_no_checkpoint_id").await,
        Outcome::Passed
    );
}

async fn catches_fallback_to_latest() {
    assert_caught(
        Flaw::MissingIdFallsBackToLatest,
        &["get_tuple_nonexistent_checkpoint_id"],
    )
    .await;
}

async fn catches_overwritten_regular_writes() {
    assert_caught(
        Flaw::RegularWritesOverwrite,
        &["put_writes_idempotent", "put_writes_mixed_batch_per_write"],
    )
    .await;
}

async fn catches_per_call_conflict_rule() {
    assert_caught(
        Flaw::SpecialWritesKeepFirstInMixedBatch,
        &["put_writes_mixed_batch_per_write"],
    )
    .await;
}

async fn catches_filter_by_key_order() {
    assert_caught(Flaw::FilterMapsByKeyOrder, &["list_filter_nested_key_order"]).await;
}

async fn catches_filter_bool_equal_to_int() {
    assert_caught(Flaw::FilterBoolIsInt, &["list_filter_bool_is_not_int"]).await;
}

async fn catches_null_filter_requiring_key() {
    assert_caught(Flaw::NullFilterNeedsKey, &["list_filter_null_matches_missing"]).await;
}

async fn catches_limit_before_filter() {
    assert_caught(Flaw::LimitBeforeFilter, &["list_limit_after_filter"]).await;
}

async fn catches_dropped_values() {
    assert_caught(
        Flaw::DropsValuesOutsideNewVersions,
        &["put_keeps_values_outside_new_versions"],
    )
    .await;
}

async fn catches_delete_thread_leaving_namespaces() {
    assert_caught(
        Flaw::DeleteThreadRootOnly,
        &["delete_thread_removes_all_namespaces", "delete_thread_removes_values"],
    )
    .await;
}

async fn catches_overclaimed_capabilities() {
    assert_caught(
        Flaw::CapabilitiesOverclaim,
        &["capabilities_match_behaviour", "copy_thread_basic"],
    )
    .await;
}

async fn catches_underclaimed_capabilities() {
    assert_caught(Flaw::CapabilitiesUnderclaim, &["capabilities_match_behaviour"]).await;
}

async fn catches_target_writes_in_delta_history() {
    assert_caught(
        Flaw::DeltaIncludesTargetWrites,
        &["delta_channel_history_excludes_target_pending_writes"],
    )
    .await;
}

async fn catches_copy_onto_existing_thread() {
    assert_caught(Flaw::CopyIgnoresExistingTarget, &["copy_thread_existing_target_errors"]).await;
}

async fn catches_prune_dropping_delta_ancestors() {
    assert_caught(
        Flaw::PruneDropsDeltaAncestors,
        &["prune_keep_latest_keeps_delta_ancestors"],
    )
    .await;
    // A thread without delta channels prunes the same either way.
    let broken = Broken::new(Flaw::PruneDropsDeltaAncestors);
    assert_eq!(
        outcome(&broken, "prune_keep_latest_single_thread").await,
        Outcome::Passed
    );
}

async fn catches_prune_keeping_pruned_parents() {
    assert_caught(
        Flaw::PruneKeepsPrunedParents,
        &["prune_keep_latest_forgets_pruned_parents"],
    )
    .await;
}

/// The body of every `conformance_tests!` test: a skip passes (and prints
/// `skipped: ...`), a failure panics.
fn generated_test_skips_undeclared_operation() {
    conformance::run_test("copy_thread_basic", || async {
        std::sync::Arc::new(Broken::new(Flaw::NoExtended)) as std::sync::Arc<dyn CheckpointSaver>
    });
}

fn generated_test_fails_on_broken_rule() {
    conformance::run_test("list_ordering", || async {
        std::sync::Arc::new(Broken::new(Flaw::ListAscending)) as std::sync::Arc<dyn CheckpointSaver>
    });
}

/// A factory that cannot make a saver (no server outside CI) skips every
/// check with its reason instead of failing it.
fn factory_skip_skips_the_check() {
    use checkpointer::conformance::{run_test, Skip};
    run_test("put_returns_config", || async {
        Err::<std::sync::Arc<dyn CheckpointSaver>, Skip>(Skip("no server here".to_owned()))
    });
}

/// The model-based harness (`conformance::model`) catches every flaw a
/// random sequence can show, each shrunk to a handful of operations; the
/// honest wrapper passes it.
fn model_harness_catches_flaws() {
    use checkpointer::conformance::model::{check_against_oracle, ModelConfig};
    use std::sync::Arc;

    let factory = |flaw: Flaw| move || async move { Arc::new(Broken::new(flaw)) as Arc<dyn CheckpointSaver> };
    // A fixed seed: which random sequences run decides what is caught.
    let config = ModelConfig::default().cases(1024).max_ops(40).seed(7);
    check_against_oracle(factory(Flaw::Honest), config.clone().cases(128)).unwrap_or_else(|f| panic!("{f}"));
    let flaws = [
        Flaw::WritesUnsorted,
        Flaw::WritesIgnoreTaskPath,
        Flaw::ListAscending,
        Flaw::ListTiesAscending,
        Flaw::IgnoresBefore,
        Flaw::LatestIsLastInserted,
        Flaw::MissingIdFallsBackToLatest,
        Flaw::RegularWritesOverwrite,
        Flaw::SpecialWritesKeepFirstInMixedBatch,
        Flaw::FilterMapsByKeyOrder,
        Flaw::FilterBoolIsInt,
        Flaw::NullFilterNeedsKey,
        Flaw::LimitBeforeFilter,
        Flaw::DropsValuesOutsideNewVersions,
        Flaw::DeleteThreadRootOnly,
        Flaw::CapabilitiesOverclaim,
        Flaw::DeltaIncludesTargetWrites,
        Flaw::CopyIgnoresExistingTarget,
        Flaw::PruneDropsDeltaAncestors,
        Flaw::PruneKeepsPrunedParents,
    ];
    for flaw in flaws {
        match check_against_oracle(factory(flaw), config.clone()) {
            Ok(stats) => panic!("{flaw:?} not caught in {} cases", stats.cases),
            Err(failure) => {
                println!("caught {flaw:?} in {} operations", failure.ops.len());
                assert!(failure.ops.len() <= 5, "{flaw:?} shrunk poorly:\n{failure}");
            }
        }
    }
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "conformance_broken::honest_wrapper_passes_everything",
            &[],
            0,
            honest_wrapper_passes_everything,
        ),
        harness::tokio(
            "conformance_broken::undeclared_operations_are_skipped_not_passed",
            &[],
            0,
            undeclared_operations_are_skipped_not_passed,
        ),
        harness::tokio(
            "conformance_broken::catches_unsorted_writes",
            &[],
            0,
            catches_unsorted_writes,
        ),
        harness::tokio(
            "conformance_broken::catches_writes_sorted_without_task_path",
            &[],
            0,
            catches_writes_sorted_without_task_path,
        ),
        harness::tokio(
            "conformance_broken::catches_ascending_ties_in_list",
            &[],
            0,
            catches_ascending_ties_in_list,
        ),
        harness::tokio(
            "conformance_broken::catches_ascending_list",
            &[],
            0,
            catches_ascending_list,
        ),
        harness::tokio(
            "conformance_broken::catches_ignored_before",
            &[],
            0,
            catches_ignored_before,
        ),
        harness::tokio(
            "conformance_broken::catches_latest_by_insertion_order",
            &[],
            0,
            catches_latest_by_insertion_order,
        ),
        harness::tokio(
            "conformance_broken::catches_fallback_to_latest",
            &[],
            0,
            catches_fallback_to_latest,
        ),
        harness::tokio(
            "conformance_broken::catches_overwritten_regular_writes",
            &[],
            0,
            catches_overwritten_regular_writes,
        ),
        harness::tokio(
            "conformance_broken::catches_per_call_conflict_rule",
            &[],
            0,
            catches_per_call_conflict_rule,
        ),
        harness::tokio(
            "conformance_broken::catches_filter_by_key_order",
            &[],
            0,
            catches_filter_by_key_order,
        ),
        harness::tokio(
            "conformance_broken::catches_filter_bool_equal_to_int",
            &[],
            0,
            catches_filter_bool_equal_to_int,
        ),
        harness::tokio(
            "conformance_broken::catches_null_filter_requiring_key",
            &[],
            0,
            catches_null_filter_requiring_key,
        ),
        harness::tokio(
            "conformance_broken::catches_limit_before_filter",
            &[],
            0,
            catches_limit_before_filter,
        ),
        harness::tokio(
            "conformance_broken::catches_dropped_values",
            &[],
            0,
            catches_dropped_values,
        ),
        harness::tokio(
            "conformance_broken::catches_delete_thread_leaving_namespaces",
            &[],
            0,
            catches_delete_thread_leaving_namespaces,
        ),
        harness::tokio(
            "conformance_broken::catches_overclaimed_capabilities",
            &[],
            0,
            catches_overclaimed_capabilities,
        ),
        harness::tokio(
            "conformance_broken::catches_underclaimed_capabilities",
            &[],
            0,
            catches_underclaimed_capabilities,
        ),
        harness::tokio(
            "conformance_broken::catches_target_writes_in_delta_history",
            &[],
            0,
            catches_target_writes_in_delta_history,
        ),
        harness::tokio(
            "conformance_broken::catches_copy_onto_existing_thread",
            &[],
            0,
            catches_copy_onto_existing_thread,
        ),
        harness::tokio(
            "conformance_broken::catches_prune_dropping_delta_ancestors",
            &[],
            0,
            catches_prune_dropping_delta_ancestors,
        ),
        harness::tokio(
            "conformance_broken::catches_prune_keeping_pruned_parents",
            &[],
            0,
            catches_prune_keeping_pruned_parents,
        ),
        harness::test(
            "conformance_broken::generated_test_skips_undeclared_operation",
            &[],
            generated_test_skips_undeclared_operation,
        ),
        harness::should_panic(
            "conformance_broken::generated_test_fails_on_broken_rule",
            &[],
            "conformance check `list_ordering` failed",
            generated_test_fails_on_broken_rule,
        ),
        harness::test(
            "conformance_broken::factory_skip_skips_the_check",
            &[],
            factory_skip_skips_the_check,
        ),
        harness::test(
            "conformance_broken::model_harness_catches_flaws",
            &[],
            model_harness_catches_flaws,
        ),
    ]
}
