//! What the engine hands a [`Backend`](super::Backend) and what it gets
//! back: the questions of one call, already checked, and the pages that
//! answer them.

use indexmap::IndexMap;

use super::page_size;
use super::values::Values;
use super::FenceToken;
use crate::checkpoint::{write_idx, ChannelVersions, Checkpoint, CheckpointMetadata};
use crate::config::CheckpointConfig;
use crate::saver::ThreadInfo;
use crate::serde::Value;

/// What `list` asks for, fixed for the whole stream.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListQuery {
    pub(crate) thread_id: Option<String>,
    /// `None`: every namespace.
    pub(crate) checkpoint_ns: Option<String>,
    pub(crate) checkpoint_id: Option<String>,
    /// Only ids strictly smaller.
    pub(crate) before: Option<String>,
    /// The metadata filter, already checked against [`crate::limits`].
    pub(crate) filter: IndexMap<String, Value>,
}

/// One page of rows from [`Backend::page`](super::Backend::page).
pub(crate) struct Page<R, C> {
    /// Newest first.
    pub(crate) rows: Vec<R>,
    /// Where the next page starts; `None` when storage holds no more rows.
    /// A page may be short (even empty) and still have a next one.
    pub(crate) next: Option<C>,
    /// Whether every row already satisfies the query's filter exactly; when
    /// not, the engine checks each decoded tuple.
    pub(crate) filtered: bool,
}

/// One page of threads from [`Backend::threads_page`](super::Backend::threads_page).
pub(crate) struct ThreadPage {
    /// In thread id order.
    pub(crate) threads: Vec<ThreadInfo>,
    /// The last thread id examined, when storage may hold more after it.
    pub(crate) next: Option<String>,
    /// Whether every thread already satisfies the filter exactly.
    pub(crate) filtered: bool,
}

/// One request of [`Backend::threads_page`](super::Backend::threads_page): threads after `after` (`None`:
/// from the first) in id order, at most `want` that satisfy `filter` (a
/// backend may return fewer).
#[derive(Clone, Copy)]
pub(crate) struct ThreadsQuery<'a> {
    pub(crate) after: Option<&'a str>,
    pub(crate) want: usize,
    pub(crate) filter: &'a IndexMap<String, Value>,
}

impl ThreadsQuery<'_> {
    /// How many threads to read for the page, `max` at most, when the
    /// backend's read does not apply the filter (see [`page_size`]).
    pub(crate) fn page_size(&self, max: usize) -> usize {
        page_size(self.want, max, !self.filter.is_empty())
    }
}

/// What one `put` stores. The input checks have passed.
pub(crate) struct Put<'a> {
    pub(crate) thread_id: &'a str,
    pub(crate) checkpoint_ns: &'a str,
    /// The parent: the id the caller's config named.
    pub(crate) parent_id: Option<&'a str>,
    pub(crate) checkpoint: &'a Checkpoint,
    pub(crate) metadata: &'a CheckpointMetadata,
    pub(crate) new_versions: &'a ChannelVersions,
    /// A fenced saver's token, checked with the write.
    pub(crate) fence: Option<&'a FenceToken>,
}

impl<'a> Put<'a> {
    /// The put of `checkpoint` at the thread and namespace `config` names,
    /// its parent the checkpoint `config` names.
    pub(crate) fn new(
        config: &'a CheckpointConfig,
        checkpoint: &'a Checkpoint,
        metadata: &'a CheckpointMetadata,
        new_versions: &'a ChannelVersions,
    ) -> Self {
        Put {
            thread_id: &config.thread_id,
            checkpoint_ns: config.ns(),
            parent_id: config.checkpoint_id(),
            checkpoint,
            metadata,
            new_versions,
            fence: None,
        }
    }

    /// The checkpoint's own channel values, for a backend that stores
    /// them as [`Backend::put_split`](super::Backend::put_split) does its split ones.
    #[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))] // their puts and imports
    pub(crate) fn values(&self) -> Values<'a> {
        Values::Decoded(&self.checkpoint.channel_values)
    }

    /// The put taken apart, in the order of its fields, for a backend that
    /// names each part.
    pub(crate) fn parts(self) -> PutParts<'a> {
        let Put {
            thread_id,
            checkpoint_ns,
            parent_id,
            checkpoint,
            metadata,
            new_versions,
            fence: _,
        } = self;
        (thread_id, checkpoint_ns, parent_id, checkpoint, metadata, new_versions)
    }
}

/// [`Put::parts`]: (thread_id, checkpoint_ns, parent_id, checkpoint,
/// metadata, new_versions).
pub(crate) type PutParts<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    &'a Checkpoint,
    &'a CheckpointMetadata,
    &'a ChannelVersions,
);

/// The arguments of one `put_writes` call: the writes (values, or their
/// serializer's bytes) of a task against the checkpoint `config` names.
pub(crate) struct WritesCall<'a, W> {
    pub(crate) config: &'a CheckpointConfig,
    pub(crate) writes: W,
    pub(crate) task_id: &'a str,
    pub(crate) task_path: &'a str,
}

impl<'a, W> WritesCall<'a, W> {
    /// The batch of `writes` (this call's, encoded) against `checkpoint_id`:
    /// each indexed, a special channel repeated in the call reduced to its
    /// last value.
    pub(super) fn batch<E>(&self, checkpoint_id: &'a str, writes: Vec<(String, E)>) -> WriteBatch<'a, E> {
        let mut out: Vec<BatchWrite<E>> = Vec::with_capacity(writes.len());
        // (idx, position in `out`) of the special channels: there are four.
        let mut specials: Vec<(i64, usize)> = Vec::new();
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let idx = write_idx(&channel, position);
            let special = idx < 0;
            let write = BatchWrite {
                idx,
                channel,
                special,
                value,
            };
            match specials.iter().find(|(i, _)| *i == idx) {
                Some(&(_, at)) if special => out[at] = write,
                _ => {
                    if special {
                        specials.push((idx, out.len()));
                    }
                    out.push(write);
                }
            }
        }
        WriteBatch {
            thread_id: &self.config.thread_id,
            checkpoint_ns: self.config.ns(),
            checkpoint_id,
            task_id: self.task_id,
            task_path: self.task_path,
            writes: out,
            fence: None,
        }
    }
}

/// One write of a batch: its index decided by the contract and its value
/// encoded by the backend.
pub(crate) struct BatchWrite<E> {
    pub(crate) idx: i64,
    pub(crate) channel: String,
    /// A special channel: the write replaces the one stored at
    /// (task_id, idx); a regular one keeps what is stored.
    pub(crate) special: bool,
    pub(crate) value: E,
}

/// The writes of one `put_writes` call, indexed, encoded and with special
/// channels repeated in the call reduced to their last value. Never empty.
pub(crate) struct WriteBatch<'a, E> {
    pub(crate) thread_id: &'a str,
    pub(crate) checkpoint_ns: &'a str,
    pub(crate) checkpoint_id: &'a str,
    pub(crate) task_id: &'a str,
    pub(crate) task_path: &'a str,
    pub(crate) writes: Vec<BatchWrite<E>>,
    /// A fenced saver's token, checked with the write.
    pub(crate) fence: Option<&'a FenceToken>,
}
