//! Test utilities (feature `conformance`): [`FaultySaver`], a wrapper saver
//! that injects failures and delays, to test how callers handle a store that
//! misbehaves (retry loops, timeouts, ambiguous outcomes).
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::sync::Arc;
//! use checkpointer::testing::{Fault, FaultySaver, InjectedError, Op};
//! use checkpointer::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, InMemorySaver};
//!
//! let saver = FaultySaver::new(Arc::new(InMemorySaver::new()));
//! // The first put fails with a transient (retryable) storage error.
//! saver.inject(Fault::on(Op::Put).nth(1).fail(InjectedError::Retryable));
//!
//! let cp = Checkpoint::new(0);
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let cfg = CheckpointConfig::new("t");
//! let err = saver.put(&cfg, &cp, &meta, &Default::default()).await.unwrap_err();
//! assert!(err.is_retryable());
//! saver.put(&cfg, &cp, &meta, &Default::default()).await?; // the retry succeeds
//! assert_eq!(saver.calls(Op::Put), 2);
//! assert_eq!(saver.inner().checkpoint_count(), 1);
//! # Ok::<(), checkpointer::Error>(())
//! # }).unwrap();
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use indexmap::IndexMap;
use parking_lot::Mutex;

use crate::checkpoint::{ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple};
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::saver::{
    Capabilities, CheckpointSaver, CheckpointStream, DeltaChannelHistory, ListOptions, ListThreadsOptions,
    PruneStrategy, ThreadInfo, ThreadKeys,
};
use crate::serde::Value;
use crate::setters::setters;
use crate::version::ChannelVersion;

/// A saver operation, as faults select them: the crate's one
/// [`Operation`](crate::saver::Operation) enum, named for brevity. A fault on
/// [`Op::List`] applies when the stream is created.
pub use crate::saver::Operation as Op;

/// One call through a [`FaultySaver`], as a fault's predicate sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The operation.
    pub op: Op,
    /// Which call of this operation it is, counting from 1 (every call
    /// counts, failed ones included).
    pub n: u64,
    /// The thread addressed, if the operation names one (the source of
    /// `copy_thread`, the first thread of `prune`).
    pub thread_id: Option<String>,
    /// The namespace addressed, if any.
    pub checkpoint_ns: Option<String>,
    /// The checkpoint id addressed: the config's for reads and `put_writes`,
    /// the stored checkpoint's for `put`.
    pub checkpoint_id: Option<String>,
}

/// The error an injected failure returns.
#[derive(Clone)]
pub enum InjectedError {
    /// [`Error::Storage`] with `retryable: true`: a transient failure after
    /// which nothing of the call is visible.
    Retryable,
    /// [`Error::Storage`] with `retryable: false`.
    Fatal,
    /// Any error, built afresh for each failure.
    Custom(Arc<dyn Fn(&Call) -> Error + Send + Sync>),
}

impl InjectedError {
    /// An error built by `make` for each failure.
    pub fn custom(make: impl Fn(&Call) -> Error + Send + Sync + 'static) -> Self {
        InjectedError::Custom(Arc::new(make))
    }

    fn build(&self, call: &Call) -> Error {
        let what = || format!("injected fault in {} call #{}", call.op.name(), call.n);
        match self {
            InjectedError::Retryable => Error::storage("faulty", true, what()),
            InjectedError::Fatal => Error::storage("faulty", false, what()),
            InjectedError::Custom(make) => make(call),
        }
    }
}

impl fmt::Debug for InjectedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InjectedError::Retryable => f.write_str("Retryable"),
            InjectedError::Fatal => f.write_str("Fatal"),
            InjectedError::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

#[derive(Debug, Clone)]
enum Action {
    /// Fail without reaching the inner saver.
    Fail(InjectedError),
    /// Run the call on the inner saver, then report an error anyway (the
    /// ambiguous outcome of a connection lost after commit).
    FailAfter(InjectedError),
    /// Wait before running the call.
    Delay(Duration),
}

type Predicate = Arc<dyn Fn(&Call) -> bool + Send + Sync>;

/// Where a call on `config` lands: its thread, namespace and checkpoint id.
fn at_config(config: &CheckpointConfig) -> (Option<&str>, Option<&str>, Option<&str>) {
    (
        Some(config.thread_id.as_str()),
        Some(config.ns()),
        config.checkpoint_id(),
    )
}

/// A rule of a [`FaultySaver`]: which calls it hits and what it does.
///
/// Built as `Fault::on(op)` or `Fault::any()`, narrowed with
/// [`nth`](Self::nth), [`times`](Self::times) and [`when`](Self::when), and
/// finished with [`fail`](Self::fail), [`fail_after`](Self::fail_after) or
/// [`delay`](Self::delay).
#[derive(Clone)]
pub struct Fault {
    op: Option<Op>,
    nth: Option<u64>,
    times: Option<u64>,
    when: Option<Predicate>,
    action: Action,
}

impl fmt::Debug for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fault")
            .field("op", &self.op)
            .field("nth", &self.nth)
            .field("times", &self.times)
            .field("when", &self.when.as_ref().map(|_| ".."))
            .field("action", &self.action)
            .finish()
    }
}

impl Fault {
    /// A rule for every call of `op` (until narrowed).
    pub fn on(op: Op) -> Self {
        Fault {
            op: Some(op),
            nth: None,
            times: None,
            when: None,
            action: Action::Delay(Duration::ZERO),
        }
    }

    /// A rule for every call of every operation (until narrowed).
    pub fn any() -> Self {
        Fault {
            op: None,
            ..Fault::on(Op::Put)
        }
    }

    setters! {
        /// Only the `n`th call of the operation (counting from 1, every call
        /// through the wrapper counts).
        pub fn nth(n: u64) => nth = Some(n);

        /// At most `k` hits, then the rule is spent.
        pub fn times(k: u64) => times = Some(k);
    }

    /// Only calls for which `predicate` holds.
    pub fn when(mut self, predicate: impl Fn(&Call) -> bool + Send + Sync + 'static) -> Self {
        self.when = Some(Arc::new(predicate));
        self
    }

    setters! {
        /// Hit calls fail with `error` before reaching the inner saver: nothing
        /// is stored or read.
        pub fn fail(error: InjectedError) => action = Action::Fail(error);

        /// Hit calls run on the inner saver, then report `error` anyway: the
        /// outcome a caller sees when the connection drops after the commit.
        /// For `list` the stream's items are yielded, then the error.
        pub fn fail_after(error: InjectedError) => action = Action::FailAfter(error);

        /// Hit calls wait `delay` before running (with `tokio::time::sleep`, so
        /// a caller's `tokio::time::timeout` can cut them short).
        pub fn delay(delay: Duration) => action = Action::Delay(delay);
    }

    fn matches(&self, call: &Call) -> bool {
        self.op.is_none_or(|op| op == call.op)
            && self.nth.is_none_or(|n| n == call.n)
            && self.times != Some(0)
            && self.when.as_ref().is_none_or(|p| p(call))
    }
}

/// What the rules decided for one call.
#[derive(Default)]
struct Plan {
    delay: Duration,
    fail: Option<Error>,
    fail_after: Option<Error>,
}

/// A saver that forwards to `inner` except where a [`Fault`] says to fail or
/// wait: fail the Nth call of an operation, every call matching a predicate,
/// with a retryable or fatal storage error or any error, before or after the
/// inner saver ran; delay calls.
///
/// Rules are checked in the order they were injected; delays of every hit
/// rule add up, and the first hit failing rule decides the error. The
/// wrapper declares the inner saver's [`Capabilities`].
pub struct FaultySaver<S: ?Sized = dyn CheckpointSaver> {
    inner: Arc<S>,
    faults: Mutex<Vec<Fault>>,
    calls: [AtomicU64; Op::ALL.len()],
    injected: AtomicU64,
}

impl<S: CheckpointSaver + ?Sized> FaultySaver<S> {
    /// Wraps `inner`, with no fault yet.
    pub fn new(inner: Arc<S>) -> Self {
        FaultySaver {
            inner,
            faults: Mutex::new(Vec::new()),
            calls: Default::default(),
            injected: AtomicU64::new(0),
        }
    }

    /// Adds a rule.
    pub fn inject(&self, fault: Fault) -> &Self {
        self.faults.lock().push(fault);
        self
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.faults.lock().clear();
    }

    /// The wrapped saver, to inspect what it really holds.
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    /// How many calls of `op` went through the wrapper (failed ones included).
    pub fn calls(&self, op: Op) -> u64 {
        self.calls[op.index()].load(Ordering::SeqCst)
    }

    /// How many failures were injected so far (delays not counted).
    pub fn injected_failures(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    fn plan(&self, op: Op, thread_id: Option<&str>, ns: Option<&str>, checkpoint_id: Option<&str>) -> (Call, Plan) {
        let n = self.calls[op.index()].fetch_add(1, Ordering::SeqCst) + 1;
        let call = Call {
            op,
            n,
            thread_id: thread_id.map(str::to_owned),
            checkpoint_ns: ns.map(str::to_owned),
            checkpoint_id: checkpoint_id.map(str::to_owned),
        };
        let mut plan = Plan::default();
        let mut faults = self.faults.lock();
        for fault in faults.iter_mut() {
            if !fault.matches(&call) {
                continue;
            }
            let fires = match &fault.action {
                Action::Delay(d) => {
                    plan.delay += *d;
                    true
                }
                Action::Fail(e) if plan.fail.is_none() && plan.fail_after.is_none() => {
                    plan.fail = Some(e.build(&call));
                    true
                }
                Action::FailAfter(e) if plan.fail.is_none() && plan.fail_after.is_none() => {
                    plan.fail_after = Some(e.build(&call));
                    true
                }
                _ => false,
            };
            if fires {
                if let Some(k) = fault.times.as_mut() {
                    *k -= 1;
                }
            }
        }
        if plan.fail.is_some() || plan.fail_after.is_some() {
            self.injected.fetch_add(1, Ordering::SeqCst);
        }
        (call, plan)
    }

    async fn run<T>(
        &self,
        op: Op,
        at: (Option<&str>, Option<&str>, Option<&str>),
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let (_, plan) = self.plan(op, at.0, at.1, at.2);
        if !plan.delay.is_zero() {
            tokio::time::sleep(plan.delay).await;
        }
        if let Some(err) = plan.fail {
            return Err(err);
        }
        let out = fut.await;
        match plan.fail_after {
            Some(err) => Err(err),
            None => out,
        }
    }
}

impl<S: CheckpointSaver + ?Sized> fmt::Debug for FaultySaver<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultySaver")
            .field("inner", &self.inner)
            .field("faults", &*self.faults.lock())
            .field("injected_failures", &self.injected_failures())
            .finish()
    }
}

// Every method, defaulted ones included, goes through the fault plan to the
// inner saver; forgetting one would silently skip both.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<S: CheckpointSaver + ?Sized> CheckpointSaver for FaultySaver<S> {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let at = at_config(config);
        self.run(Op::GetTuple, at, self.inner.get_tuple(config)).await
    }

    fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> CheckpointStream {
        let (_, plan) = self.plan(
            Op::List,
            config.as_ref().map(|c| c.thread_id.as_str()),
            config.as_ref().and_then(|c| c.checkpoint_ns.as_deref()),
            config.as_ref().and_then(|c| c.checkpoint_id()),
        );
        let delay = futures::stream::once(async move {
            if !plan.delay.is_zero() {
                tokio::time::sleep(plan.delay).await;
            }
        })
        .filter_map(|()| async { None::<Result<CheckpointTuple>> });
        if let Some(err) = plan.fail {
            return delay.chain(futures::stream::iter([Err(err)])).boxed();
        }
        let items = self.inner.list(config, options);
        let tail = futures::stream::iter(plan.fail_after.map(Err));
        delay.chain(items).chain(tail).boxed()
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let at = (
            Some(config.thread_id.as_str()),
            Some(config.ns()),
            Some(checkpoint.id.as_str()),
        );
        self.run(Op::Put, at, self.inner.put(config, checkpoint, metadata, new_versions))
            .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let at = at_config(config);
        self.run(
            Op::PutWrites,
            at,
            self.inner.put_writes(config, writes, task_id, task_path),
        )
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.run(
            Op::DeleteThread,
            (Some(thread_id), None, None),
            self.inner.delete_thread(thread_id),
        )
        .await
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    /// `None`: the encoded calls would bypass the fault plan.
    fn as_encoded(&self) -> Option<&dyn crate::encoded::EncodedSaver> {
        None
    }

    /// `None`: a fenced saver's calls would bypass the fault plan.
    fn as_fenceable(&self) -> Option<&dyn crate::fence::Fenceable> {
        None
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.run(
            Op::DeleteForRuns,
            (None, None, None),
            self.inner.delete_for_runs(run_ids),
        )
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.run(
            Op::CopyThread,
            (Some(source), None, None),
            self.inner.copy_thread(source, target),
        )
        .await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let first = thread_ids.first().map(String::as_str);
        self.run(Op::Prune, (first, None, None), self.inner.prune(thread_ids, strategy))
            .await
    }

    /// Forwarded without faults (retention has no [`Op`] of its own).
    async fn retain(
        &self,
        policy: &crate::retention::RetentionPolicy,
        options: crate::retention::RetainOptions,
    ) -> Result<crate::retention::RetentionReport> {
        self.inner.retain(policy, options).await
    }

    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<IndexMap<String, DeltaChannelHistory>> {
        let at = at_config(config);
        self.run(
            Op::DeltaChannelHistory,
            at,
            self.inner.get_delta_channel_history(config, channels),
        )
        .await
    }

    async fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
        self.run(Op::ListThreads, (None, None, None), self.inner.list_threads(options))
            .await
    }

    async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        self.run(
            Op::ThreadKeys,
            (Some(thread_id), None, None),
            self.inner.thread_keys(thread_id),
        )
        .await
    }

    fn get_next_version(&self, current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
        self.inner.get_next_version(current)
    }
}
