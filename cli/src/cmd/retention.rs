//! Retention from the command line: a policy from its options, and what it
//! would remove from a thread with the bytes that frees (counted as `stats`
//! counts them: the serialized bytes of each checkpoint, its writes and the
//! values stored with it).

use std::collections::HashMap;

use checkpointer::retention::{RetainOptions, RetentionPolicy};
use serde_json::json;

use crate::args::PolicyArgs;
use crate::error::{CliError, CliResult, Context};
use crate::output::human_bytes;
use crate::store::Store;

/// The policy the options give (`None`: no rule given).
///
/// # Errors
/// Exit 2 for `--mark-key` or `--batch` without a rule, and for a policy
/// the library refuses (it says why).
pub fn policy_of(args: &PolicyArgs) -> CliResult<Option<RetentionPolicy>> {
    if !args.is_set() {
        if args.mark_key.is_some() || args.batch.is_some() {
            return Err(CliError::usage(
                "--mark-key and --batch go with a policy: --keep-last, --keep-newer-than or --delete-idle",
            ));
        }
        return Ok(None);
    }
    let mut policy = RetentionPolicy::new();
    if let Some(n) = args.keep_last {
        policy = policy.keep_last(n);
    }
    if let Some(age) = args.keep_newer_than {
        policy = policy.keep_newer_than(age);
    }
    if let Some(age) = args.delete_idle {
        policy = policy.delete_idle_threads(age);
    }
    if let Some(key) = &args.mark_key {
        policy = policy.mark_key(key.clone());
    }
    policy
        .validate()
        .map_err(|e| CliError::usage(format!("bad retention policy: {e}")))?;
    if args
        .batch
        .is_some_and(|b| b == 0 || b > checkpointer::retention::MAX_BATCH)
    {
        return Err(CliError::usage(format!(
            "--batch is 1 to {}",
            checkpointer::retention::MAX_BATCH
        )));
    }
    Ok(Some(policy))
}

/// The run options the policy options give (every thread).
pub fn options(args: &PolicyArgs) -> RetainOptions {
    RetainOptions::default()
        .batch(args.batch.unwrap_or(checkpointer::retention::DEFAULT_BATCH))
        .rest(args.rest)
}

/// What a policy would remove from one thread.
#[derive(Debug, Default)]
pub struct ThreadFreed {
    pub thread_id: String,
    /// (namespace, id) of each checkpoint that would go.
    pub checkpoints: Vec<(String, String)>,
    pub writes: u64,
    pub bytes: u64,
    /// The whole thread would go (idle).
    pub whole: bool,
}

/// What a policy would remove from the threads looked at.
#[derive(Debug, Default)]
pub struct Freed {
    pub threads: Vec<ThreadFreed>,
    pub threads_scanned: u64,
}

impl Freed {
    pub fn add(&mut self, thread: ThreadFreed) {
        self.threads_scanned += 1;
        if !thread.checkpoints.is_empty() {
            self.threads.push(thread);
        }
    }

    pub fn checkpoints(&self) -> u64 {
        self.threads.iter().map(|t| t.checkpoints.len() as u64).sum()
    }

    pub fn writes(&self) -> u64 {
        self.threads.iter().map(|t| t.writes).sum()
    }

    pub fn bytes(&self) -> u64 {
        self.threads.iter().fold(0u64, |a, t| a.saturating_add(t.bytes))
    }

    pub fn whole(&self) -> usize {
        self.threads.iter().filter(|t| t.whole).count()
    }

    /// One line: what would go and the bytes it frees.
    pub fn summary(&self) -> String {
        format!(
            "would remove {} checkpoint(s) and {} write(s) from {} of {} thread(s) ({} whole), freeing {}",
            self.checkpoints(),
            self.writes(),
            self.threads.len(),
            self.threads_scanned,
            self.whole(),
            human_bytes(self.bytes())
        )
    }

    /// As JSON; each checkpoint named when `ids`.
    pub fn to_json(&self, ids: bool) -> serde_json::Value {
        json!({
            "threads_scanned": self.threads_scanned,
            "checkpoints_removed": self.checkpoints(),
            "writes_removed": self.writes(),
            "threads_deleted": self.whole(),
            "bytes": self.bytes(),
            "threads": self.threads.iter().map(|t| {
                let mut v = json!({
                    "thread_id": t.thread_id,
                    "checkpoints_removed": t.checkpoints.len(),
                    "writes_removed": t.writes,
                    "deleted": t.whole,
                    "bytes": t.bytes,
                });
                if let (true, Some(m)) = (ids, v.as_object_mut()) {
                    m.insert("checkpoints".into(), t.checkpoints.iter().map(|(ns, id)| {
                        json!({"checkpoint_ns": ns, "checkpoint_id": id})
                    }).collect());
                }
                v
            }).collect::<Vec<_>>(),
        })
    }
}

/// What `policy` would remove from `thread` (a dry run: nothing is
/// written), its bytes summed from `sizes` (see `stats::checkpoint_sizes`).
///
/// # Errors
/// The store's, with the thread named.
pub async fn would_free(
    store: &Store,
    thread: &str,
    policy: &RetentionPolicy,
    options: RetainOptions,
    sizes: &HashMap<(String, String), u64>,
) -> CliResult<ThreadFreed> {
    let options = options.dry_run(true).list_removed(true).threads([thread]);
    let report = store.saver.retain(policy, options).await.context(format!(
        "cannot apply the policy to thread {thread:?} of {}",
        store.name()
    ))?;
    let checkpoints: Vec<(String, String)> = report
        .removed
        .into_iter()
        .map(|r| (r.checkpoint_ns, r.checkpoint_id))
        .collect();
    let bytes = checkpoints
        .iter()
        .fold(0u64, |a, key| a.saturating_add(sizes.get(key).copied().unwrap_or(0)));
    Ok(ThreadFreed {
        thread_id: thread.to_owned(),
        checkpoints,
        writes: report.writes_removed,
        bytes,
        whole: report.threads_deleted > 0,
    })
}
