//! The `list` stream: one pager for every backend.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;

use super::{Backend, ListQuery};
use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::error::Result;
use crate::limits;
use crate::saver::{metadata_matches, traced, CheckpointStream, ListOptions, Operation};

/// How many rows a backend reads for one page of a listing (checkpoints or
/// threads) when `want` more are wanted: `want`, at least 1 and at most the
/// backend's `max`; but a whole `max` when the engine filters the rows
/// after decoding (`filter_after`: a metadata filter the backend's query
/// does not apply), since some of them will be dropped.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
pub(crate) fn page_size(want: usize, max: usize, filter_after: bool) -> usize {
    if filter_after {
        max
    } else {
        want.clamp(1, max)
    }
}

/// The state of one stream; it owns an `Arc` of the backend, so the stream
/// outlives the borrow of the saver.
struct State<B: Backend> {
    backend: Arc<B>,
    query: B::Query,
    /// The span fields: (thread, ns, id).
    scope: (String, String, Option<String>),
    cursor: Option<B::Cursor>,
    /// Rows read and not yet decoded, and whether they satisfy the filter.
    buffer: VecDeque<(B::Row, bool)>,
    filter: indexmap::IndexMap<String, crate::serde::Value>,
    remaining: usize,
    exhausted: bool,
}

pub(super) fn stream<B: Backend>(
    backend: Arc<B>,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> CheckpointStream {
    match state(backend, config, options) {
        // boxed: `unfold` moves its state in and out of every step, and a
        // pointer is cheaper to move than the state
        Ok(state) => futures::stream::unfold(state, State::next).boxed(),
        Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
    }
}

/// The rows of a listing as the backend read them, not decoded, for a
/// backend whose pages apply the filter exactly (a page that does not,
/// under a filter, ends the stream with [`Error::Unsupported`](crate::Error::Unsupported)).
#[cfg(feature = "sqlite")]
pub(super) fn row_stream<B: Backend>(
    backend: Arc<B>,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> futures::stream::BoxStream<'static, Result<B::Row>> {
    let state = match state(backend, config, options) {
        Ok(state) => state,
        Err(e) => return futures::stream::once(async move { Err(e) }).boxed(),
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.remaining == 0 {
                return None;
            }
            if let Some((row, filtered)) = st.buffer.pop_front() {
                if !filtered && !st.filter.is_empty() {
                    st.remaining = 0;
                    let e = crate::error::Error::Unsupported {
                        operation: "a listing of undecoded rows under a metadata filter",
                        implementer: std::any::type_name::<B>(),
                    };
                    return Some((Err(e), st));
                }
                st.remaining -= 1;
                return Some((Ok(row), st));
            }
            if st.exhausted {
                return None;
            }
            if let Err(e) = st.fetch().await {
                st.exhausted = true;
                return Some((Err(e), st));
            }
        }
    })
    .boxed()
}

fn state<B: Backend>(backend: Arc<B>, config: Option<CheckpointConfig>, options: ListOptions) -> Result<Box<State<B>>> {
    limits::check_filter(&options.filter)?;
    let scope = match &config {
        Some(c) => (
            c.thread_id.clone(),
            c.checkpoint_ns.clone().unwrap_or_default(),
            c.checkpoint_id().map(str::to_owned),
        ),
        None => Default::default(),
    };
    let filter = options.filter.clone();
    let query = ListQuery {
        thread_id: config.as_ref().map(|c| c.thread_id.clone()),
        checkpoint_ns: config.as_ref().and_then(|c| c.checkpoint_ns.clone()),
        checkpoint_id: config.as_ref().and_then(|c| c.checkpoint_id().map(str::to_owned)),
        before: options.before,
        filter: options.filter,
    };
    let query = backend.prepare(query)?;
    let remaining = options.limit.unwrap_or(usize::MAX);
    Ok(Box::new(State {
        backend,
        query,
        scope,
        cursor: None,
        buffer: VecDeque::new(),
        filter,
        remaining,
        exhausted: remaining == 0,
    }))
}

impl<B: Backend> State<B> {
    async fn next(mut self: Box<Self>) -> Option<(Result<CheckpointTuple>, Box<Self>)> {
        loop {
            if self.remaining == 0 {
                return None;
            }
            if let Some((row, filtered)) = self.buffer.pop_front() {
                // one decode is one unit of work: a long listing yields
                tokio::task::coop::consume_budget().await;
                let item = super::decode(&*self.backend, row);
                match &item {
                    Ok(t) if !filtered && !self.filter.is_empty() && !metadata_matches(&t.metadata, &self.filter) => {
                        continue
                    }
                    Ok(_) => self.remaining -= 1,
                    Err(_) => {}
                }
                return Some((item, self));
            }
            if self.exhausted {
                return None;
            }
            match self.fetch().await {
                Ok(()) => {}
                Err(e) => {
                    self.exhausted = true;
                    return Some((Err(e), self));
                }
            }
        }
    }

    async fn fetch(&mut self) -> Result<()> {
        let cursor = self.cursor.take();
        let (thread, ns, id) = &self.scope;
        let span = super::span(Operation::List, thread, ns, id.as_deref());
        let page = traced(span, self.backend.page(&self.query, cursor, self.remaining)).await?;
        self.exhausted = page.next.is_none();
        self.cursor = page.next;
        let filtered = page.filtered;
        self.buffer.extend(page.rows.into_iter().map(|r| (r, filtered)));
        Ok(())
    }
}
