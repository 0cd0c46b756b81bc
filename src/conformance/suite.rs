//! What a check is and how the suite runs and reports: [`Check`],
//! [`Capability`], [`Outcome`], [`Report`], [`run_all`], [`run_test`] and the
//! registry behind [`checks`].

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::saver::{Capabilities, CheckpointSaver, Operation};

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
    /// [`CheckpointSaver::thread_keys`] (extended).
    ThreadKeys,
    /// [`CheckpointSaver::capabilities`] itself: always checked.
    Capabilities,
    /// Encoded I/O ([`crate::encoded::EncodedSaver`]): checked when
    /// [`CheckpointSaver::as_encoded`] gives it.
    Encoded,
    /// Write ownership ([`crate::fence`]) and atomic steps: checked when
    /// [`CheckpointSaver::as_fenceable`] gives them.
    Fencing,
    /// [`CheckpointSaver::retain`] (extended, [`Capabilities::retain`]).
    Retain,
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
            Capability::ThreadKeys => "thread_keys",
            Capability::Capabilities => "capabilities",
            Capability::Encoded => "encoded",
            Capability::Fencing => "fencing",
            Capability::Retain => "retain",
        }
    }

    /// Whether the operation is optional (declared in [`Capabilities`]).
    pub fn is_extended(self) -> bool {
        self == Capability::Retain || self.operation().is_some_and(Operation::is_extended)
    }

    /// The saver operation the checks exercise; `None` for the check of
    /// [`CheckpointSaver::capabilities`] itself and for encoded I/O.
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
            Capability::ThreadKeys => Operation::ThreadKeys,
            Capability::Capabilities | Capability::Encoded | Capability::Fencing | Capability::Retain => return None,
        })
    }

    /// Whether a saver declaring `caps` must pass checks of this operation.
    pub fn is_declared(self, caps: &Capabilities) -> bool {
        if self == Capability::Retain {
            return caps.retain;
        }
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
        if self.capability == Capability::Encoded && saver.as_encoded().is_none() {
            return Outcome::Skipped("the saver has no encoded I/O (`as_encoded` is `None`)".to_owned());
        }
        if self.capability == Capability::Fencing && saver.as_fenceable().is_none() {
            return Outcome::Skipped("the saver has no fencing (`as_fenceable` is `None`)".to_owned());
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
    let outcome = runtime().block_on(async {
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

/// The multi-thread runtime a harness runs savers on (two workers).
///
/// # Panics
/// When the runtime cannot be built: this is a test harness.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|err| panic!("cannot build a tokio runtime: {err}"))
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

crate::__conformance_each_check!(@registry);
