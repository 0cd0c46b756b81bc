//! The conformance suite: one async check per rule every [`CheckpointSaver`]
//! must follow (spec §9 plus the trait's `# Contract` and this crate's own
//! rules).
//!
//! Every check is an `async fn(&dyn CheckpointSaver) -> CheckResult` named
//! `<op>_<property>`, listed once in [`checks`]. Checks isolate themselves with
//! fresh random thread ids, so they can share one database and never assume an
//! empty store. A check of an extended operation is skipped, and reported as
//! such, when the saver's [`CheckpointSaver::capabilities`] does not declare it.
//!
//! Three ways to run the suite:
//!
//! - [`conformance_tests!`](crate::conformance_tests) expands into one
//!   `#[test]` per check for a saver factory (the usual way for a backend);
//! - [`run_all`] runs every check against one saver and returns a [`Report`];
//! - [`checks`] and [`check`] give single checks to run with [`Check::run`].
//!
//! ```
//! use std::sync::Arc;
//! use checkpointer::{CheckpointSaver, InMemorySaver};
//!
//! checkpointer::conformance_tests!(|| async {
//!     Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>
//! });
//! # fn main() {}
//! ```

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::checkpoint::{ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::saver::{Capabilities, CheckpointSaver, CheckpointSaverExt, ListOptions, Operation};
use crate::serde::Value;
use crate::version::{next_version, ChannelVersion};

/// Returns a [`CheckFailure`] from the enclosing check unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::conformance::CheckFailure::new(format!(
                "{} [{}:{}]",
                format_args!($($fmt)+),
                file!(),
                line!()
            )));
        }
    };
}

/// Returns a [`CheckFailure`] from the enclosing check unless `got == expected`.
macro_rules! ensure_eq {
    ($got:expr, $expected:expr, $($fmt:tt)+) => {
        // A match keeps temporaries of both expressions alive, as assert_eq! does.
        match (&$got, &$expected) {
            (got, expected) => {
                if got != expected {
                    return Err($crate::conformance::CheckFailure::new(format!(
                        "{}: got {:?}, expected {:?} [{}:{}]",
                        format_args!($($fmt)+),
                        got,
                        expected,
                        file!(),
                        line!()
                    )));
                }
            }
        }
    };
}

pub mod contract;
pub mod copy_thread;
pub mod delete_for_runs;
pub mod delete_thread;
pub mod delta_channel_history;
pub mod get_tuple;
pub mod limits;
pub mod list;
pub mod list_threads;
pub mod model;
pub mod prune;
pub mod put;
pub mod put_writes;

/// What a check returns: `Ok(())` when the saver behaved as required.
pub type CheckResult = Result<(), CheckFailure>;

/// Why a check failed: what was expected and what the saver did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFailure {
    message: String,
}

impl CheckFailure {
    /// A failure with a message.
    pub fn new(message: impl Into<String>) -> Self {
        CheckFailure {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CheckFailure {}

impl From<crate::Error> for CheckFailure {
    fn from(err: crate::Error) -> Self {
        CheckFailure::new(format!("unexpected error from the saver: {err} ({err:?})"))
    }
}

/// The operation a check exercises; checks of extended operations run only
/// when the saver declares them in [`Capabilities`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// [`CheckpointSaver::put`] (required).
    Put,
    /// [`CheckpointSaver::put_writes`] (required).
    PutWrites,
    /// [`CheckpointSaver::get_tuple`] (required).
    GetTuple,
    /// [`CheckpointSaver::list`] (required).
    List,
    /// [`CheckpointSaver::delete_thread`] (required).
    DeleteThread,
    /// [`CheckpointSaver::delete_for_runs`] (extended).
    DeleteForRuns,
    /// [`CheckpointSaver::copy_thread`] (extended).
    CopyThread,
    /// [`CheckpointSaver::prune`] (extended).
    Prune,
    /// [`CheckpointSaver::get_delta_channel_history`] (extended).
    DeltaChannelHistory,
    /// [`CheckpointSaver::list_threads`] (extended).
    ListThreads,
    /// [`CheckpointSaver::capabilities`] itself: always checked.
    Capabilities,
}

impl Capability {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Put => "put",
            Capability::PutWrites => "put_writes",
            Capability::GetTuple => "get_tuple",
            Capability::List => "list",
            Capability::DeleteThread => "delete_thread",
            Capability::DeleteForRuns => "delete_for_runs",
            Capability::CopyThread => "copy_thread",
            Capability::Prune => "prune",
            Capability::DeltaChannelHistory => "delta_channel_history",
            Capability::ListThreads => "list_threads",
            Capability::Capabilities => "capabilities",
        }
    }

    /// Whether the operation is optional (declared in [`Capabilities`]).
    pub fn is_extended(self) -> bool {
        self.operation().is_some_and(Operation::is_extended)
    }

    /// The saver operation the checks exercise; `None` for the check of
    /// [`CheckpointSaver::capabilities`] itself.
    pub fn operation(self) -> Option<Operation> {
        Some(match self {
            Capability::Put => Operation::Put,
            Capability::PutWrites => Operation::PutWrites,
            Capability::GetTuple => Operation::GetTuple,
            Capability::List => Operation::List,
            Capability::DeleteThread => Operation::DeleteThread,
            Capability::DeleteForRuns => Operation::DeleteForRuns,
            Capability::CopyThread => Operation::CopyThread,
            Capability::Prune => Operation::Prune,
            Capability::DeltaChannelHistory => Operation::DeltaChannelHistory,
            Capability::ListThreads => Operation::ListThreads,
            Capability::Capabilities => return None,
        })
    }

    /// Whether a saver declaring `caps` must pass checks of this operation.
    pub fn is_declared(self, caps: &Capabilities) -> bool {
        self.operation().is_none_or(|op| caps.supports(op))
    }
}

/// The function of a check.
pub type CheckFn = for<'a> fn(&'a dyn CheckpointSaver) -> BoxFuture<'a, CheckResult>;

/// One named check of the suite.
#[derive(Clone, Copy)]
pub struct Check {
    name: &'static str,
    capability: Capability,
    func: CheckFn,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Check")
            .field("name", &self.name)
            .field("capability", &self.capability)
            .finish_non_exhaustive()
    }
}

impl Check {
    /// The check's name, `<op>_<property>`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The operation it exercises.
    pub fn capability(&self) -> Capability {
        self.capability
    }

    /// Runs the check against `saver`: skipped when the saver does not declare
    /// the capability; a panic inside the saver or the check is a failure.
    pub async fn run(&self, saver: &dyn CheckpointSaver) -> Outcome {
        if !self.capability.is_declared(&saver.capabilities()) {
            return Outcome::Skipped(format!(
                "the saver does not declare capability `{}`",
                self.capability.name()
            ));
        }
        match AssertUnwindSafe((self.func)(saver)).catch_unwind().await {
            Ok(Ok(())) => Outcome::Passed,
            Ok(Err(failure)) => Outcome::Failed(failure),
            Err(panic) => Outcome::Failed(CheckFailure::new(format!("panicked: {}", panic_message(&*panic)))),
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// The result of running one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The saver behaved as required.
    Passed,
    /// Not run: the saver does not declare the operation (the reason says so).
    Skipped(String),
    /// The saver broke the rule.
    Failed(CheckFailure),
}

impl Outcome {
    /// Whether the check failed.
    pub fn is_failed(&self) -> bool {
        matches!(self, Outcome::Failed(_))
    }
}

/// Every check of the suite, in a fixed order.
pub fn checks() -> &'static [Check] {
    CHECKS
}

/// The check named `name`.
pub fn check(name: &str) -> Option<&'static Check> {
    CHECKS.iter().find(|c| c.name == name)
}

/// One line of a [`Report`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The check's name.
    pub name: &'static str,
    /// The operation it exercises.
    pub capability: Capability,
    /// What happened.
    pub outcome: Outcome,
}

/// The outcome of every check against one saver.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// One entry per check, in [`checks`] order.
    pub results: Vec<CheckReport>,
}

impl Report {
    /// Checks that passed.
    pub fn passed(&self) -> impl Iterator<Item = &CheckReport> {
        self.results.iter().filter(|r| r.outcome == Outcome::Passed)
    }

    /// Checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &CheckReport> {
        self.results.iter().filter(|r| r.outcome.is_failed())
    }

    /// Checks that were skipped.
    pub fn skipped(&self) -> impl Iterator<Item = &CheckReport> {
        self.results.iter().filter(|r| matches!(r.outcome, Outcome::Skipped(_)))
    }

    /// Whether no check failed.
    pub fn is_success(&self) -> bool {
        self.failed().next().is_none()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.results {
            match &r.outcome {
                Outcome::Passed => writeln!(f, "ok       {}", r.name)?,
                Outcome::Skipped(reason) => writeln!(f, "skipped  {} ({reason})", r.name)?,
                Outcome::Failed(failure) => writeln!(f, "FAILED   {}: {failure}", r.name)?,
            }
        }
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed().count(),
            self.failed().count(),
            self.skipped().count()
        )
    }
}

/// Runs every check, one after the other, against `saver`.
///
/// ```
/// # async fn demo() {
/// let saver = checkpointer::InMemorySaver::new();
/// let report = checkpointer::conformance::run_all(&saver).await;
/// assert!(report.is_success(), "{report}");
/// # }
/// ```
pub async fn run_all(saver: &dyn CheckpointSaver) -> Report {
    let mut results = Vec::with_capacity(CHECKS.len());
    for check in CHECKS {
        results.push(CheckReport {
            name: check.name,
            capability: check.capability,
            outcome: check.run(saver).await,
        });
    }
    Report { results }
}

/// Runs the check `name` against a saver made by `factory`, on a fresh
/// multi-thread tokio runtime: the body of each test that
/// [`conformance_tests!`](crate::conformance_tests) generates. A skipped
/// check prints `skipped: <reason>`.
///
/// # Panics
/// When the check fails, when no check is named `name`, or when the runtime
/// cannot be built: this is a test harness.
pub fn run_test<F, Fut>(name: &str, factory: F)
where
    F: FnOnce() -> Fut,
    Fut: Future,
    Fut::Output: SaverOrSkip,
{
    let Some(check) = check(name) else {
        panic!("no conformance check is named `{name}`");
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|err| panic!("cannot build a tokio runtime: {err}"));
    let outcome = runtime.block_on(async {
        match factory().await.saver_or_skip() {
            Ok(saver) => check.run(&*saver).await,
            Err(Skip(reason)) => Outcome::Skipped(reason),
        }
    });
    match outcome {
        Outcome::Passed => {}
        Outcome::Skipped(reason) => println!("skipped: {reason}"),
        Outcome::Failed(failure) => panic!("conformance check `{name}` failed: {failure}"),
    }
}

/// Why a test factory could not make a saver (say, no database server outside
/// CI). The generated test prints `skipped: <reason>`; a factory must return
/// it only where skipping is legitimate and fail (panic) otherwise, e.g. in CI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

/// What a [`conformance_tests!`](crate::conformance_tests) factory may
/// return: a saver, or `Result<saver, Skip>`.
pub trait SaverOrSkip {
    /// The saver, or why there is none.
    ///
    /// # Errors
    /// The [`Skip`] the factory returned.
    fn saver_or_skip(self) -> Result<Arc<dyn CheckpointSaver>, Skip>;
}

impl SaverOrSkip for Arc<dyn CheckpointSaver> {
    fn saver_or_skip(self) -> Result<Arc<dyn CheckpointSaver>, Skip> {
        Ok(self)
    }
}

impl SaverOrSkip for Result<Arc<dyn CheckpointSaver>, Skip> {
    fn saver_or_skip(self) -> Result<Arc<dyn CheckpointSaver>, Skip> {
        self
    }
}

/// Expands into one `#[test] fn <check_name>()` per conformance check, each
/// running that check against a saver made by `factory`.
///
/// `factory` is an expression evaluated once per test: a closure (or
/// function) taking no argument and returning a future of
/// `Arc<dyn CheckpointSaver>`, or of `Result<Arc<dyn CheckpointSaver>, Skip>`
/// for backends that need a server (see [`Skip`]). Each test builds its own multi-thread tokio
/// runtime, so the calling crate needs no tokio macros. Checks of extended
/// operations the saver does not declare pass and print `skipped: <reason>`.
///
/// Savers of a shared database may be returned by every call: checks isolate
/// themselves with fresh thread ids.
///
/// ```
/// use std::sync::Arc;
/// use checkpointer::{CheckpointSaver, InMemorySaver};
///
/// mod in_memory {
///     use super::*;
///     checkpointer::conformance_tests!(|| async {
///         Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>
///     });
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr $(,)?) => {
        $crate::__conformance_each_check!(@tests ($factory));
    };
}

/// The single list of checks, fed to `__conformance_emit` in one of its modes.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_each_check {
    ($($mode:tt)*) => {
        $crate::__conformance_emit! {
            [$($mode)*]
            put::put_returns_config: Put,
            put::put_roundtrip: Put,
            put::put_preserves_channel_values: Put,
            put::put_preserves_channel_versions: Put,
            put::put_preserves_versions_seen: Put,
            put::put_preserves_metadata: Put,
            put::put_root_namespace: Put,
            put::put_child_namespace: Put,
            put::put_default_namespace: Put,
            put::put_multiple_checkpoints_same_thread: Put,
            put::put_multiple_threads_isolated: Put,
            put::put_parent_config: Put,
            put::put_incremental_channel_update: Put,
            put::put_new_channel_added: Put,
            put::put_channel_removed: Put,
            put::put_preserves_run_id: Put,
            put::put_preserves_versions_seen_values: Put,
            put_writes::put_writes_basic: PutWrites,
            put_writes::put_writes_multiple_writes_same_task: PutWrites,
            put_writes::put_writes_multiple_tasks: PutWrites,
            put_writes::put_writes_preserves_task_id: PutWrites,
            put_writes::put_writes_preserves_channel_and_value: PutWrites,
            put_writes::put_writes_task_path: PutWrites,
            put_writes::put_writes_idempotent: PutWrites,
            put_writes::put_writes_special_channels: PutWrites,
            put_writes::put_writes_across_namespaces: PutWrites,
            put_writes::put_writes_cleared_on_next_checkpoint: PutWrites,
            get_tuple::get_tuple_nonexistent_returns_none: GetTuple,
            get_tuple::get_tuple_latest_when_no_checkpoint_id: GetTuple,
            get_tuple::get_tuple_specific_checkpoint_id: GetTuple,
            get_tuple::get_tuple_config_structure: GetTuple,
            get_tuple::get_tuple_checkpoint_fields: GetTuple,
            get_tuple::get_tuple_metadata: GetTuple,
            get_tuple::get_tuple_parent_config: GetTuple,
            get_tuple::get_tuple_pending_writes: GetTuple,
            get_tuple::get_tuple_respects_namespace: GetTuple,
            get_tuple::get_tuple_nonexistent_checkpoint_id: GetTuple,
            list::list_all: List,
            list::list_by_thread: List,
            list::list_by_namespace: List,
            list::list_ordering: List,
            list::list_metadata_filter_single_key: List,
            list::list_metadata_filter_step: List,
            list::list_metadata_filter_multiple_keys: List,
            list::list_metadata_filter_no_match: List,
            list::list_metadata_custom_keys: List,
            list::list_before: List,
            list::list_limit: List,
            list::list_limit_plus_before: List,
            list::list_combined_thread_and_filter: List,
            list::list_empty_result: List,
            list::list_includes_pending_writes: List,
            list::list_multiple_namespaces: List,
            delete_thread::delete_thread_removes_checkpoints: DeleteThread,
            delete_thread::delete_thread_removes_writes: DeleteThread,
            delete_thread::delete_thread_removes_all_namespaces: DeleteThread,
            delete_thread::delete_thread_preserves_other_threads: DeleteThread,
            delete_thread::delete_thread_nonexistent_noop: DeleteThread,
            contract::put_overwrites_same_id: Put,
            contract::put_keeps_values_outside_new_versions: Put,
            contract::put_versioned_channel_without_value: Put,
            contract::put_nan_and_nul_never_lost: Put,
            contract::put_writes_special_channels_overwrite: PutWrites,
            contract::put_writes_mixed_batch_per_write: PutWrites,
            contract::put_writes_before_checkpoint: PutWrites,
            contract::put_writes_requires_checkpoint_id: PutWrites,
            contract::put_writes_nan_and_nul_never_lost: PutWrites,
            contract::pending_writes_sorted: PutWrites,
            contract::get_tuple_latest_is_max_id: GetTuple,
            contract::list_all_namespaces: List,
            contract::list_before_excludes_boundary: List,
            contract::list_limit_after_filter: List,
            contract::list_checkpoint_id_restricts: List,
            contract::list_filter_nested_key_order: List,
            contract::list_filter_null_matches_missing: List,
            contract::list_filter_bool_is_not_int: List,
            contract::list_filter_hostile_keys: List,
            contract::delete_thread_removes_values: DeleteThread,
            contract::capabilities_match_behaviour: Capabilities,
            limits::put_empty_checkpoint_id_refused: Put,
            limits::put_nesting_at_limit_round_trips: Put,
            limits::put_nesting_beyond_limit_refused: Put,
            limits::put_writes_nesting_beyond_limit_refused: PutWrites,
            limits::list_filter_nesting_beyond_limit_refused: List,
            limits::list_filter_wide_maps_compare_by_content: List,
            delete_for_runs::delete_for_runs_single: DeleteForRuns,
            delete_for_runs::delete_for_runs_multiple: DeleteForRuns,
            delete_for_runs::delete_for_runs_preserves_other_runs: DeleteForRuns,
            delete_for_runs::delete_for_runs_removes_writes: DeleteForRuns,
            delete_for_runs::delete_for_runs_empty_list_noop: DeleteForRuns,
            delete_for_runs::delete_for_runs_nonexistent_noop: DeleteForRuns,
            delete_for_runs::delete_for_runs_across_namespaces: DeleteForRuns,
            delete_for_runs::delete_for_runs_across_threads: DeleteForRuns,
            delete_for_runs::delete_for_runs_keeps_values_of_remaining: DeleteForRuns,
            copy_thread::copy_thread_basic: CopyThread,
            copy_thread::copy_thread_all_checkpoints: CopyThread,
            copy_thread::copy_thread_preserves_metadata: CopyThread,
            copy_thread::copy_thread_preserves_namespaces: CopyThread,
            copy_thread::copy_thread_preserves_writes: CopyThread,
            copy_thread::copy_thread_preserves_ordering: CopyThread,
            copy_thread::copy_thread_source_unchanged: CopyThread,
            copy_thread::copy_thread_nonexistent_source: CopyThread,
            copy_thread::copy_thread_existing_target_errors: CopyThread,
            copy_thread::copy_thread_preserves_parents_and_task_paths: CopyThread,
            prune::prune_keep_latest_single_thread: Prune,
            prune::prune_keep_latest_multiple_threads: Prune,
            prune::prune_keep_latest_across_namespaces: Prune,
            prune::prune_keep_latest_preserves_writes: Prune,
            prune::prune_delete_all: Prune,
            prune::prune_preserves_other_threads: Prune,
            prune::prune_empty_list_noop: Prune,
            prune::prune_nonexistent_noop: Prune,
            prune::prune_keep_latest_keeps_referenced_values: Prune,
            prune::prune_keep_latest_keeps_parent_id: Prune,
            prune::prune_keep_latest_keeps_delta_ancestors: Prune,
            prune::prune_keep_latest_removes_call_namespaces: Prune,
            delta_channel_history::delta_channel_history_returns_writes_oldest_first: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_seed_is_nearest_snapshot: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_excludes_target_pending_writes: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_multi_channel: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_empty_channels_returns_empty: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_walk_to_root_no_seed: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_migration_plain_value_as_seed: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_seed_ancestor_own_writes_are_replayed: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_missing_target: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_nil_value_is_seed: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_follows_parents: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_target_is_config_id_or_latest: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_writes_sorted_within_checkpoint: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_parent_cycle_terminates: DeltaChannelHistory,
            list_threads::list_threads_ordering: ListThreads,
            list_threads::list_threads_after_cursor: ListThreads,
            list_threads::list_threads_limit: ListThreads,
            list_threads::list_threads_filter: ListThreads,
            list_threads::list_threads_filter_applies_to_latest: ListThreads,
            list_threads::list_threads_latest_across_namespaces: ListThreads,
        }
    };
}

/// Expands the check list in one mode: `@tests (factory)` for
/// [`conformance_tests!`](crate::conformance_tests), `@registry` for
/// [`checks`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_emit {
    ([@tests ($factory:expr)] $($module:ident :: $name:ident : $cap:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::conformance::run_test(::std::stringify!($name), $factory);
            }
        )*
    };
    ([@registry] $($module:ident :: $name:ident : $cap:ident),* $(,)?) => {
        static CHECKS: &[$crate::conformance::Check] = &[
            $(
                $crate::conformance::Check {
                    name: ::std::stringify!($name),
                    capability: $crate::conformance::Capability::$cap,
                    func: |saver| ::std::boxed::Box::pin($crate::conformance::$module::$name(saver)),
                },
            )*
        ];
    };
}

crate::__conformance_each_check!(@registry);

// ---------------------------------------------------------------------------
// Builders, as LangGraph's conformance suite has them.

/// The metadata key checks use to find their own checkpoints in listings over
/// the whole store.
pub const MARKER_KEY: &str = "conformance_marker";

/// A fresh random thread id (uuid v4).
pub fn new_thread_id() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string()
}

/// A config for the root namespace of `thread_id`, without a checkpoint id.
pub fn generate_config(thread_id: &str) -> CheckpointConfig {
    CheckpointConfig::new(thread_id)
}

/// An empty v4 checkpoint with a fresh, increasing id and the current time.
pub fn generate_checkpoint() -> Checkpoint {
    Checkpoint::new(-1)
}

/// `{"source": source, "step": step, "parents": {}}`.
pub fn generate_metadata(source: &str, step: i64) -> CheckpointMetadata {
    let mut m = CheckpointMetadata::default();
    m.insert("source", source);
    m.insert("step", step);
    m.insert("parents", Value::Map(Vec::new().into()));
    m
}

/// A checkpoint holding `values`, with channel versions `versions`.
pub(crate) fn checkpoint_with(values: &[(&str, Value)], versions: &[(&str, ChannelVersion)]) -> Checkpoint {
    let mut cp = generate_checkpoint();
    for (ch, v) in values {
        cp.channel_values.insert((*ch).to_owned(), v.clone());
    }
    cp.channel_versions = channel_versions(versions);
    cp
}

/// A version map.
pub(crate) fn channel_versions(pairs: &[(&str, ChannelVersion)]) -> ChannelVersions {
    pairs.iter().map(|(ch, v)| ((*ch).to_owned(), v.clone())).collect()
}

/// A LangGraph string version whose counter is `n` (random fraction).
pub(crate) fn str_version(n: i64) -> ChannelVersion {
    next_version(Some(&ChannelVersion::Int(n - 1)))
}

/// Metadata carrying the marker `marker`.
pub(crate) fn marked_metadata(source: &str, step: i64, marker: &str) -> CheckpointMetadata {
    let mut m = generate_metadata(source, step);
    m.insert(MARKER_KEY, marker);
    m
}

/// List options filtering on the marker `marker`.
pub(crate) fn marker_filter(marker: &str) -> ListOptions {
    ListOptions::default().filter(MARKER_KEY, marker)
}

/// Puts `checkpoint` with every channel of its `channel_versions` as new.
pub(crate) async fn put_all(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    checkpoint: &Checkpoint,
    metadata: &CheckpointMetadata,
) -> Result<CheckpointConfig, CheckFailure> {
    Ok(saver
        .put(config, checkpoint, metadata, &checkpoint.channel_versions)
        .await?)
}

/// Puts `n` checkpoints chained by parent in (thread, namespace of `config`),
/// checkpoint `i` with metadata `("loop", i)` and channel `"step"` = `i`;
/// returns the configs `put` returned, oldest first.
pub(crate) async fn put_chain(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    n: i64,
) -> Result<Vec<CheckpointConfig>, CheckFailure> {
    let mut out = Vec::new();
    let mut parent = config.clone();
    for i in 0..n {
        let cp = checkpoint_with(&[("step", Value::Int(i))], &[("step", ChannelVersion::Int(i + 1))]);
        let md = generate_metadata("loop", i);
        let stored = put_all(saver, &parent, &cp, &md).await?;
        out.push(stored.clone());
        parent = stored;
    }
    Ok(out)
}

/// Stores `writes` of `task_id` against `config`'s checkpoint.
pub(crate) async fn put_writes(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    writes: &[(&str, Value)],
    task_id: &str,
    task_path: &str,
) -> Result<(), CheckFailure> {
    let writes: Vec<(String, Value)> = writes.iter().map(|(c, v)| ((*c).to_owned(), v.clone())).collect();
    saver.put_writes(config, &writes, task_id, task_path).await?;
    Ok(())
}

/// The tuple `config` names, failing the check when there is none.
pub(crate) async fn get(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
) -> Result<CheckpointTuple, CheckFailure> {
    match saver.get_tuple(config).await? {
        Some(t) => Ok(t),
        None => Err(CheckFailure::new(format!("get_tuple({config:?}) returned None"))),
    }
}

/// `list` collected.
pub(crate) async fn list(
    saver: &dyn CheckpointSaver,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> Result<Vec<CheckpointTuple>, CheckFailure> {
    Ok(saver.list_vec(config, options).await?)
}

/// The checkpoint ids `list` yields, in order.
pub(crate) async fn list_ids(
    saver: &dyn CheckpointSaver,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> Result<Vec<String>, CheckFailure> {
    Ok(list(saver, config, options)
        .await?
        .into_iter()
        .map(|t| t.checkpoint.id)
        .collect())
}

/// The checkpoint ids of configs.
pub(crate) fn ids(configs: &[CheckpointConfig]) -> Vec<String> {
    configs
        .iter()
        .map(|c| c.checkpoint_id.clone().unwrap_or_default())
        .collect()
}

/// The id a config returned by `put` names.
pub(crate) fn id_of(config: &CheckpointConfig) -> String {
    config.checkpoint_id.clone().unwrap_or_default()
}

/// A pending write.
pub(crate) fn pw(task_id: &str, channel: &str, value: impl Into<Value>) -> PendingWrite {
    PendingWrite::new(task_id, channel, value)
}

/// A config naming one stored checkpoint, as savers return them.
pub(crate) fn stored_config(thread_id: &str, ns: &str, checkpoint_id: &str) -> CheckpointConfig {
    CheckpointConfig {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: Some(ns.to_owned()),
        checkpoint_id: Some(checkpoint_id.to_owned()),
    }
}

/// Whether two metadata maps hold the same keys with JSON-equal values.
pub(crate) fn metadata_eq(a: &CheckpointMetadata, b: &CheckpointMetadata) -> bool {
    a.0.len() == b.0.len()
        && a.0
            .iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| crate::saver::json_eq(v, w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec §9.2: every test of LangGraph's suite, under our `<op>_` names.
    const SPEC_9_2: &[(&str, usize, &[&str])] = &[
        (
            "put_",
            17,
            &[
                "returns_config",
                "roundtrip",
                "preserves_channel_values",
                "preserves_channel_versions",
                "preserves_versions_seen",
                "preserves_metadata",
                "root_namespace",
                "child_namespace",
                "default_namespace",
                "multiple_checkpoints_same_thread",
                "multiple_threads_isolated",
                "parent_config",
                "incremental_channel_update",
                "new_channel_added",
                "channel_removed",
                "preserves_run_id",
                "preserves_versions_seen_values",
            ],
        ),
        (
            "put_writes_",
            10,
            &[
                "basic",
                "multiple_writes_same_task",
                "multiple_tasks",
                "preserves_task_id",
                "preserves_channel_and_value",
                "task_path",
                "idempotent",
                "special_channels",
                "across_namespaces",
                "cleared_on_next_checkpoint",
            ],
        ),
        (
            "get_tuple_",
            10,
            &[
                "nonexistent_returns_none",
                "latest_when_no_checkpoint_id",
                "specific_checkpoint_id",
                "config_structure",
                "checkpoint_fields",
                "metadata",
                "parent_config",
                "pending_writes",
                "respects_namespace",
                "nonexistent_checkpoint_id",
            ],
        ),
        (
            "list_",
            16,
            &[
                "all",
                "by_thread",
                "by_namespace",
                "ordering",
                "metadata_filter_single_key",
                "metadata_filter_step",
                "metadata_filter_multiple_keys",
                "metadata_filter_no_match",
                "metadata_custom_keys",
                "before",
                "limit",
                "limit_plus_before",
                "combined_thread_and_filter",
                "empty_result",
                "includes_pending_writes",
                "multiple_namespaces",
            ],
        ),
        (
            "delete_thread_",
            5,
            &[
                "removes_checkpoints",
                "removes_writes",
                "removes_all_namespaces",
                "preserves_other_threads",
                "nonexistent_noop",
            ],
        ),
        (
            "delete_for_runs_",
            7,
            &[
                "single",
                "multiple",
                "preserves_other_runs",
                "removes_writes",
                "empty_list_noop",
                "nonexistent_noop",
                "across_namespaces",
            ],
        ),
        (
            "copy_thread_",
            8,
            &[
                "basic",
                "all_checkpoints",
                "preserves_metadata",
                "preserves_namespaces",
                "preserves_writes",
                "preserves_ordering",
                "source_unchanged",
                "nonexistent_source",
            ],
        ),
        (
            "prune_",
            8,
            &[
                "keep_latest_single_thread",
                "keep_latest_multiple_threads",
                "keep_latest_across_namespaces",
                "keep_latest_preserves_writes",
                "delete_all",
                "preserves_other_threads",
                "empty_list_noop",
                "nonexistent_noop",
            ],
        ),
        (
            "delta_channel_history_",
            8,
            &[
                "returns_writes_oldest_first",
                "seed_is_nearest_snapshot",
                "excludes_target_pending_writes",
                "multi_channel",
                "empty_channels_returns_empty",
                "walk_to_root_no_seed",
                "migration_plain_value_as_seed",
                "seed_ancestor_own_writes_are_replayed",
            ],
        ),
    ];

    #[test]
    fn every_spec_test_is_a_check() {
        for (prefix, count, names) in SPEC_9_2 {
            assert_eq!(names.len(), *count, "{prefix}");
            for name in *names {
                let full = format!("{prefix}{name}");
                assert!(check(&full).is_some(), "spec §9.2 test {full} has no check");
            }
        }
    }

    #[test]
    fn every_contract_name_is_a_check() {
        let source = include_str!("../saver.rs");
        let start = source.find("/// # Contract").expect("contract section");
        let end = start + source[start..].find("#[async_trait]").expect("end of the trait docs");
        // Groups "(check `a`)" / "(checks `a`, `b`)", possibly across lines.
        let mut names = Vec::new();
        let mut rest = &source[start..end];
        while let Some(open) = rest.find("(check") {
            let close = open + rest[open..].find(')').expect("closing )");
            let group = &rest[open..close];
            if group.starts_with("(check ") || group.starts_with("(checks ") {
                names.extend(group.split('`').skip(1).step_by(2).map(str::to_owned));
            }
            rest = &rest[close..];
        }
        assert!(names.len() >= 26, "parsed {names:?}");
        for name in &names {
            assert!(check(name).is_some(), "contract name {name} has no check");
        }
    }

    #[test]
    fn names_are_unique_and_prefixed_by_their_operation() {
        let mut seen = std::collections::HashSet::new();
        for c in checks() {
            assert!(seen.insert(c.name()), "duplicate check {}", c.name());
            let op = c.capability().name();
            let prefixed = c.name().starts_with(op)
                || (c.capability() == Capability::PutWrites && c.name().starts_with("pending_writes"))
                || c.capability() == Capability::Capabilities;
            assert!(prefixed, "{} is not named after {op}", c.name());
        }
    }
}
