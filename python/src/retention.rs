//! Retention for Python: the policy of `Core.retain`'s keywords (ages in
//! seconds), the report as a tuple, and the task of a saver's `retention=`
//! option, which runs the policy through the crate's engine every period.

use std::sync::Weak;
use std::time::Duration;

use checkpointer::encoded::EncodedSaver;
use checkpointer::retention::{RetainOptions, RetentionPolicy, RetentionReport};
use checkpointer::Error;

use crate::runtime::Result;

/// `value` seconds as a duration: a finite number, not negative.
pub(crate) fn seconds(name: &str, value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| Error::invalid(format!("{name} must be a number of seconds, 0 or more, got {value}")))
}

/// The policy of Python's keywords (`keep_last`, then the ages of
/// `keep_newer_than` and `delete_idle_threads` in seconds, `mark_key`),
/// checked (`InvalidPolicy` when it contradicts itself).
pub(crate) fn policy(
    keep_last: Option<usize>,
    keep_newer_than: Option<f64>,
    delete_idle_threads: Option<f64>,
    mark_key: Option<String>,
) -> Result<RetentionPolicy> {
    let mut policy = RetentionPolicy::new();
    if let Some(n) = keep_last {
        policy = policy.keep_last(n);
    }
    if let Some(s) = keep_newer_than {
        policy = policy.keep_newer_than(seconds("keep_newer_than", s)?);
    }
    if let Some(s) = delete_idle_threads {
        policy = policy.delete_idle_threads(seconds("delete_idle_threads", s)?);
    }
    if let Some(key) = mark_key {
        policy = policy.mark_key(key);
    }
    policy.validate()?;
    Ok(policy)
}

/// The run's options.
pub(crate) fn options(threads: Option<Vec<String>>, batch: Option<usize>, dry_run: bool) -> RetainOptions {
    let mut options = RetainOptions::default().dry_run(dry_run);
    if let Some(threads) = threads {
        options = options.threads(threads);
    }
    if let Some(batch) = batch {
        options = options.batch(batch);
    }
    options
}

/// A report as `(dry_run, threads_scanned, threads_deleted,
/// checkpoints_scanned, checkpoints_removed, writes_removed,
/// parents_cleared, batches)`.
pub(crate) type ReportRow = (bool, u64, u64, u64, u64, u64, u64, u64);

pub(crate) fn row(r: &RetentionReport) -> ReportRow {
    (
        r.dry_run,
        r.threads_scanned,
        r.threads_deleted,
        r.checkpoints_scanned,
        r.checkpoints_removed,
        r.writes_removed,
        r.parents_cleared,
        r.batches,
    )
}

/// Runs `policy` over every thread every `every` (a second at the least)
/// on `rt` while the saver lives; a failed run is retried at the next tick
/// (a run finishes what an interrupted one left).
pub(crate) fn spawn(
    rt: &tokio::runtime::Runtime,
    saver: Weak<dyn EncodedSaver>,
    policy: RetentionPolicy,
    every: Duration,
) -> tokio::task::AbortHandle {
    let every = every.max(Duration::from_secs(1));
    rt.spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(saver) = saver.upgrade() else { return };
            let _ = saver.retain(&policy, RetainOptions::default()).await;
        }
    })
    .abort_handle()
}
