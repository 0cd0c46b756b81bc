//! A synchronous facade over any [`CheckpointSaver`], for callers without an
//! async runtime.
//!
//! Outside a runtime, calls run on a small runtime the facade owns (one worker
//! thread, created on first use), so backends' background tasks keep running
//! between calls. Inside a multi-thread tokio runtime, calls run on the
//! current worker through `block_in_place`. Inside a current-thread runtime a
//! blocking call would stall the runtime itself, so it returns
//! [`Error::BlockingInAsync`] instead of panicking or deadlocking.
//!
//! The facade wraps a saver that already exists. Without a runtime, make it
//! with the builder's sync `build()` (the async `open` constructors need
//! one): `SqliteSaver::builder(path).build()` opens the file and creates the
//! tables on the calling thread; `PostgresSaver::builder().url(url).build()`
//! does no I/O, so run `setup()` once (from async code, or through another
//! process) before using it on a fresh database.
//!
//! ```
//! use std::sync::Arc;
//! use checkpointer::blocking::BlockingSaver;
//! use checkpointer::{CheckpointConfig, InMemorySaver};
//!
//! let saver = BlockingSaver::new(Arc::new(InMemorySaver::new()));
//! assert!(saver.get_tuple(&CheckpointConfig::new("t1")).unwrap().is_none());
//! ```

use std::future::Future;
use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use indexmap::IndexMap;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use crate::checkpoint::{ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple};
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::saver::{
    Capabilities, CheckpointSaver, DeltaChannelHistory, ListOptions, ListThreadsOptions, PruneStrategy, ThreadInfo,
    ThreadKeys,
};
use crate::serde::Value;

/// Synchronous access to an async [`CheckpointSaver`].
#[derive(Debug)]
pub struct BlockingSaver {
    inner: Arc<dyn CheckpointSaver>,
    runtime: OnceLock<Runtime>,
}

impl BlockingSaver {
    /// Wraps a saver.
    pub fn new(inner: Arc<dyn CheckpointSaver>) -> Self {
        BlockingSaver {
            inner,
            runtime: OnceLock::new(),
        }
    }

    /// The wrapped saver, for async callers.
    pub fn inner(&self) -> &Arc<dyn CheckpointSaver> {
        &self.inner
    }

    fn block_on<T>(&self, fut: impl Future<Output = Result<T>>) -> Result<T> {
        match Handle::try_current() {
            Ok(handle) => match handle.runtime_flavor() {
                RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| handle.block_on(fut)),
                _ => Err(Error::BlockingInAsync {
                    reason: "a blocking checkpointer call inside a current-thread tokio runtime would stall it; \
                             call the async saver (`BlockingSaver::inner`) instead"
                        .to_owned(),
                }),
            },
            Err(_) => {
                if self.runtime.get().is_none() {
                    let rt = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(1)
                        .thread_name("checkpointer-blocking")
                        .enable_all()
                        .build()
                        .map_err(|e| Error::storage("runtime", false, e))?;
                    // Another thread may have won the race; its runtime is as good.
                    let _ = self.runtime.set(rt);
                }
                match self.runtime.get() {
                    Some(rt) => rt.block_on(fut),
                    None => Err(Error::invalid("blocking runtime unavailable")),
                }
            }
        }
    }

    /// See [`CheckpointSaver::get_tuple`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.block_on(self.inner.get_tuple(config))
    }

    /// The checkpoint alone (see [`CheckpointSaver::get_tuple`]).
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn get(&self, config: &CheckpointConfig) -> Result<Option<Checkpoint>> {
        Ok(self.get_tuple(config)?.map(|t| t.checkpoint))
    }

    /// [`CheckpointSaver::list`], collected. Use `options.limit` to bound it.
    ///
    /// # Errors
    /// The first error of the stream, plus [`Error::BlockingInAsync`].
    pub fn list(&self, config: Option<CheckpointConfig>, options: ListOptions) -> Result<Vec<CheckpointTuple>> {
        self.block_on(async {
            let mut out = Vec::new();
            let mut stream = self.inner.list(config, options);
            while let Some(item) = stream.next().await {
                out.push(item?);
            }
            Ok(out)
        })
    }

    /// See [`CheckpointSaver::put`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        self.block_on(self.inner.put(config, checkpoint, metadata, new_versions))
    }

    /// See [`CheckpointSaver::put_writes`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.block_on(self.inner.put_writes(config, writes, task_id, task_path))
    }

    /// See [`CheckpointSaver::delete_thread`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.block_on(self.inner.delete_thread(thread_id))
    }

    /// See [`CheckpointSaver::capabilities`].
    pub fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    /// See [`CheckpointSaver::delete_for_runs`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.block_on(self.inner.delete_for_runs(run_ids))
    }

    /// See [`CheckpointSaver::copy_thread`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.block_on(self.inner.copy_thread(source, target))
    }

    /// See [`CheckpointSaver::prune`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        self.block_on(self.inner.prune(thread_ids, strategy))
    }

    /// See [`CheckpointSaver::get_delta_channel_history`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<IndexMap<String, DeltaChannelHistory>> {
        self.block_on(self.inner.get_delta_channel_history(config, channels))
    }

    /// See [`CheckpointSaver::list_threads`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn list_threads(&self, options: ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
        self.block_on(self.inner.list_threads(options))
    }

    /// See [`CheckpointSaver::thread_keys`].
    ///
    /// # Errors
    /// As the async call, plus [`Error::BlockingInAsync`].
    pub fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        self.block_on(self.inner.thread_keys(thread_id))
    }
}
