//! Retention through the engine: the policy checked, each thread's
//! skeletons read a page at a time, the plan made by
//! [`crate::retention::plan`], and its batches handed to the backend one
//! atomic step each.

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indexmap::IndexMap;

use super::{Backend, Engine, ThreadsQuery};
use crate::error::{Error, Result};
use crate::retention::plan::{plan_thread, Skeleton};
use crate::retention::{RetainOptions, RetainThreads, RetentionPolicy, RetentionReport};
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
            self.refuse_fenced("retain")?;
            if !self.backend.capabilities().retain {
                return Err(Error::Unsupported {
                    operation: "retain",
                    implementer: std::any::type_name::<B>(),
                });
            }
            if !options.dry_run {
                self.backend.check_writable("retain")?;
            }
            retain_all(&*self.backend, policy, &options).await
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
        let weak: Weak<B> = Arc::downgrade(&self.backend);
        let every = every.max(Duration::from_millis(10));
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("a retention task needs a tokio runtime: open the saver inside one"))?;
        let task = handle.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(backend) = weak.upgrade() else { return };
                // a failed run is retried at the next tick: re-running a
                // policy finishes what the last run left
                let options = RetainOptions::default();
                let run = retain_all(&*backend, &policy, &options);
                let _ = traced(op_span("retain", "", "", None), run).await;
            }
        });
        Ok(task)
    }
}

async fn retain_all<B: Backend>(
    backend: &B,
    policy: &RetentionPolicy,
    options: &RetainOptions,
) -> Result<RetentionReport> {
    let mut report = RetentionReport {
        dry_run: options.dry_run,
        ..RetentionReport::default()
    };
    let now = now_micros();
    match &options.threads {
        RetainThreads::List(ids) => {
            for thread in ids {
                retain_thread(backend, policy, options, now, thread, &mut report).await?;
            }
        }
        RetainThreads::All => {
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
                    retain_thread(backend, policy, options, now, &info.thread_id, &mut report).await?;
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

async fn retain_thread<B: Backend>(
    backend: &B,
    policy: &RetentionPolicy,
    options: &RetainOptions,
    now: i64,
    thread: &str,
    report: &mut RetentionReport,
) -> Result<()> {
    let mut skeletons: Vec<Skeleton> = Vec::new();
    loop {
        let after = skeletons.last().map(|s| (s.ns.as_str(), s.id.as_str()));
        let page = backend
            .skeletons(thread, after, SKELETON_PAGE, policy.marked_by())
            .await?;
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
    let plan = plan_thread(policy, now, skeletons, options.batch);
    report.checkpoints_scanned += plan.scanned;
    if plan.delete_thread {
        report.threads_deleted += 1;
    }
    for batch in &plan.batches {
        report.batches += 1;
        report.parents_cleared += batch.clear_parent.len() as u64;
        if options.dry_run {
            report.checkpoints_removed += batch.ids.len() as u64;
            report.writes_removed += batch.writes;
            continue;
        }
        let removed = backend.remove_batch(thread, batch).await?;
        report.checkpoints_removed += removed.checkpoints;
        report.writes_removed += removed.writes;
    }
    Ok(())
}
