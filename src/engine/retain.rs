//! Retention through the engine: the policy checked, each thread's
//! skeletons read a page at a time, the plan made by
//! [`crate::retention::plan`], and its batches handed to the backend one
//! atomic step each.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indexmap::IndexMap;

use super::{Backend, Engine, FenceToken, Fences, ThreadsQuery};
use crate::error::{Error, Result};
use crate::retention::plan::{plan_thread, Batch, Skeleton};
use crate::retention::{rest, RemovedCheckpoint, RetainOptions, RetainThreads, RetentionPolicy, RetentionReport};
use crate::saver::{op_span, traced};

/// Skeletons read per backend call.
const SKELETON_PAGE: usize = 512;
/// Threads listed per backend call.
const THREAD_PAGE: usize = 256;

/// What one batch removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Removed {
    pub(crate) checkpoints: u64,
    pub(crate) writes: u64,
}

/// Which skeletons a [`RetainRows::skeletons`] call reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SkeletonQuery<'a> {
    pub(crate) thread_id: &'a str,
    /// The (ns, id) to start after (`None`: from the first).
    pub(crate) after: Option<(&'a str, &'a str)>,
    pub(crate) limit: usize,
    /// The metadata key that marks a checkpoint kept.
    pub(crate) mark_key: &'a str,
}

impl<'a> SkeletonQuery<'a> {
    /// A SQL backend's statement, of its two (`first`, or `after` a
    /// cursor), and its (ns, id, limit) parameters.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn statement<'s>(
        &self,
        first: &'s str,
        after: &'s str,
    ) -> (&'s str, Option<&'a str>, Option<&'a str>, i64) {
        let sql = if self.after.is_some() { after } else { first };
        let (ns, id) = self.after.unzip();
        (sql, ns, id, i64::try_from(self.limit).unwrap_or(i64::MAX))
    }
}

/// The retention side of every [`Backend`]: read a thread's skeletons,
/// remove a batch the plan made.
pub(crate) trait RetainRows {
    /// The most checkpoints one batch removes on this backend, whatever
    /// [`RetainOptions::batch`] asks: a store that runs a batch as one
    /// uninterruptible step keeps it short for the writes beside it.
    const MOST_PER_BATCH: usize = usize::MAX;

    /// Up to `query.limit` skeletons of the thread after `query.after`, in
    /// (ns, id) order; fewer than `limit`: the end.
    fn skeletons(&self, query: SkeletonQuery<'_>) -> impl Future<Output = Result<Vec<Skeleton>>> + Send;

    /// Removes one retention batch atomically (one transaction or script,
    /// bounded by the batch): its checkpoints with their writes, the parent
    /// of its `clear_parent` checkpoints when among them, and its
    /// `orphan_refs` values no checkpoint put since the scan names.
    /// Fenced (`fence`), the thread's lease is checked in that same
    /// transaction or script: not held, [`Error::Fenced`] and nothing removed.
    fn remove_batch(
        &self,
        thread_id: &str,
        batch: &Batch,
        fence: Option<&FenceToken>,
    ) -> impl Future<Output = Result<Removed>> + Send;
}

/// A builder's background retention (`.retention(policy, every)`):
/// checked before the saver opens, started once it is open.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
#[derive(Debug, Clone, Default)]
pub(crate) struct RetentionSchedule(Option<(RetentionPolicy, Duration)>);

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
impl RetentionSchedule {
    pub(crate) fn set(&mut self, policy: RetentionPolicy, every: Duration) {
        self.0 = Some((policy, every));
    }

    /// Refuses a policy that does not validate, before anything opens.
    pub(crate) fn check(&self) -> Result<()> {
        self.0.as_ref().map_or(Ok(()), |(policy, _)| policy.validate())
    }

    /// Starts the task, detached: it ends once the saver is dropped.
    pub(crate) fn start<B: Backend>(self, engine: &Engine<B>) -> Result<()> {
        if let Some((policy, every)) = self.0 {
            drop(engine.spawn_retention(policy, every)?);
        }
        Ok(())
    }
}

/// A builder's `retention` option, stored in its `retention:
/// RetentionSchedule` field.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
macro_rules! retention_option {
    () => {
        /// Runs a retention policy every `every` in the background once the
        /// saver is open (see [`crate::retention`]), until every clone of the
        /// saver is dropped. A policy that does not validate fails `open`.
        pub fn retention(mut self, policy: $crate::retention::RetentionPolicy, every: std::time::Duration) -> Self {
            self.retention.set(policy, every);
            self
        }
    };
}
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
pub(crate) use retention_option;

/// A saver's `spawn_retention`, over its engine field.
macro_rules! retention_over_engine {
    ($saver:ty, $field:ident) => {
        impl $saver {
            /// Runs `policy` over every thread every `every` on the current
            /// tokio runtime until the handle or every clone of this saver is
            /// dropped (see [`crate::retention`]); a failed run is retried.
            ///
            /// # Errors
            /// `InvalidPolicy`, `Unsupported` (fenced), `InvalidInput` (no runtime).
            pub fn spawn_retention(
                &self,
                policy: $crate::retention::RetentionPolicy,
                every: std::time::Duration,
            ) -> $crate::error::Result<$crate::retention::RetentionTask> {
                let task = self.$field.spawn_retention(policy, every)?;
                Ok($crate::retention::RetentionTask::new(task.abort_handle()))
            }
        }
    };
}
pub(crate) use retention_over_engine;

/// Now, in µs since the epoch.
fn now_micros() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

impl<B: Backend> Engine<B> {
    pub(crate) async fn retain(&self, policy: &RetentionPolicy, options: RetainOptions) -> Result<RetentionReport> {
        traced(op_span("retain", "", "", None), async {
            policy.validate()?;
            options.check()?;
            if !self.backend.capabilities().retain {
                return Err(Error::Unsupported {
                    operation: "retain",
                    implementer: std::any::type_name::<B>(),
                });
            }
            if !options.dry_run {
                self.backend.check_writable("retain")?;
            }
            // fenced: the listed threads taken first (as `prune` takes
            // them), or every thread the writer took; each batch's removal
            // checked against the thread's token by the store
            let fences = match &options.threads {
                RetainThreads::List(ids) if !options.dry_run => self.fences_taking(ids).await?,
                _ => self.fences(),
            };
            retain_all(&*self.backend, policy, &options, fences.as_ref()).await
        })
        .await
    }

    /// Runs `policy` every `every` while a saver holding this engine's
    /// backend is alive (the task holds it weakly and ends at the first tick
    /// after the last one is dropped). Dropping the handle detaches it.
    pub(crate) fn spawn_retention(
        &self,
        policy: RetentionPolicy,
        every: Duration,
    ) -> Result<tokio::task::JoinHandle<()>> {
        policy.validate()?;
        self.refuse_fenced("retain")?;
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("a retention task needs a tokio runtime: open the saver inside one"))?;
        let policy = Arc::new(policy);
        Ok(self.every(&handle, every, move |backend| {
            let policy = policy.clone();
            // a failed run is retried at the next tick: re-running a
            // policy finishes what the last run left
            async move {
                let options = RetainOptions::default();
                let run = retain_all(&*backend, &policy, &options, None);
                let _ = traced(op_span("retain", "", "", None), run).await;
            }
        }))
    }

    /// Runs `run` on `handle` every `every` (10 ms at the least) while a
    /// saver holding this engine's backend is alive: the task holds it
    /// weakly and ends at the first tick after the last one is dropped.
    pub(crate) fn every<F, Fut>(
        &self,
        handle: &tokio::runtime::Handle,
        every: Duration,
        mut run: F,
    ) -> tokio::task::JoinHandle<()>
    where
        F: FnMut(Arc<B>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let weak = Arc::downgrade(&self.backend);
        let every = every.max(Duration::from_millis(10));
        handle.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(backend) = weak.upgrade() else { return };
                run(backend).await;
            }
        })
    }
}

async fn retain_all<B: Backend>(
    backend: &B,
    policy: &RetentionPolicy,
    options: &RetainOptions,
    fences: Option<&Fences>,
) -> Result<RetentionReport> {
    let mut report = RetentionReport {
        dry_run: options.dry_run,
        ..RetentionReport::default()
    };
    let now = now_micros();
    let run = Run {
        backend,
        policy,
        options,
        now,
        fences,
    };
    match (&options.threads, fences) {
        (RetainThreads::List(ids), _) => {
            for thread in ids {
                run.thread(thread, &mut report).await?;
            }
        }
        (RetainThreads::All, Some(fences)) => {
            for thread in fences.threads() {
                run.thread(&thread, &mut report).await?;
            }
        }
        (RetainThreads::All, None) => {
            let no_filter = IndexMap::new();
            let mut after: Option<String> = None;
            loop {
                let page = backend
                    .threads_page(ThreadsQuery {
                        after: after.as_deref(),
                        want: THREAD_PAGE,
                        filter: &no_filter,
                    })
                    .await?;
                for info in &page.threads {
                    run.thread(&info.thread_id, &mut report).await?;
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
    }
    Ok(report)
}

/// One run of a policy, what each thread's step needs.
struct Run<'a, B> {
    backend: &'a B,
    policy: &'a RetentionPolicy,
    options: &'a RetainOptions,
    now: i64,
    fences: Option<&'a Fences>,
}

impl<B: Backend> Run<'_, B> {
    async fn thread(&self, thread: &str, report: &mut RetentionReport) -> Result<()> {
        let Run {
            backend,
            policy,
            options,
            now,
            fences,
        } = *self;
        let mut skeletons: Vec<Skeleton> = Vec::new();
        loop {
            let after = skeletons.last().map(|s| (s.ns.as_str(), s.id.as_str()));
            let query = SkeletonQuery {
                thread_id: thread,
                after,
                limit: SKELETON_PAGE,
                mark_key: policy.marked_by(),
            };
            let started = std::time::Instant::now();
            let page = backend.skeletons(query).await?;
            rest(started, options.rest).await;
            let done = page.len() < SKELETON_PAGE;
            skeletons.extend(page);
            if done {
                break;
            }
        }
        if skeletons.is_empty() {
            return Ok(());
        }
        report.threads_scanned += 1;
        let plan = plan_thread(policy, now, skeletons, options.batch.min(B::MOST_PER_BATCH));
        report.checkpoints_scanned += plan.scanned;
        if plan.delete_thread {
            report.threads_deleted += 1;
        }
        for batch in &plan.batches {
            report.batches += 1;
            report.parents_cleared += batch.clear_parent.len() as u64;
            if options.list_removed {
                report.removed.extend(batch.ids.iter().map(|id| RemovedCheckpoint {
                    thread_id: thread.to_owned(),
                    checkpoint_ns: batch.ns.clone(),
                    checkpoint_id: id.clone(),
                }));
            }
            if options.dry_run {
                report.checkpoints_removed += batch.ids.len() as u64;
                report.writes_removed += batch.writes;
                continue;
            }
            let token: Option<FenceToken> = fences.map(|f| f.token(thread)).transpose()?;
            let started = std::time::Instant::now();
            let removed = backend.remove_batch(thread, batch, token.as_ref()).await?;
            rest(started, options.rest).await;
            report.checkpoints_removed += removed.checkpoints;
            report.writes_removed += removed.writes;
        }
        Ok(())
    }
}
