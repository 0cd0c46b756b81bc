//! The `list` stream: one pager for every backend, of decoded tuples or of
//! encoded ones ([`Output`]).

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;

use super::{Backend, ListQuery};
use futures::stream::BoxStream;
use indexmap::IndexMap;

use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::encoded::EncodedTuple;
use crate::error::Result;
use crate::limits;
use crate::saver::{metadata_matches, traced, ListOptions, Operation};
use crate::serde::Value;

/// How many rows a backend reads for one page of a listing (checkpoints or
/// threads) when `want` more are wanted: `want`, at least 1 and at most the
/// backend's `max`; but a whole `max` when the engine filters the rows
/// after decoding (`filter_after`: a metadata filter the backend's query
/// does not apply), since some of them will be dropped.
pub(crate) fn page_size(want: usize, max: usize, filter_after: bool) -> usize {
    if filter_after {
        max
    } else {
        want.clamp(1, max)
    }
}

/// What a listing yields for each row.
pub(super) trait Output: Send + 'static + Sized {
    /// The item of `row`, or `None` when `filter` (a filter the page did not
    /// apply) rejects it.
    fn read<B: Backend>(backend: &B, row: B::Row, filter: Option<&IndexMap<String, Value>>) -> Option<Result<Self>>;
}

impl Output for CheckpointTuple {
    fn read<B: Backend>(backend: &B, row: B::Row, filter: Option<&IndexMap<String, Value>>) -> Option<Result<Self>> {
        match super::decode(backend, row) {
            Ok(t) if filter.is_some_and(|f| !metadata_matches(&t.metadata, f)) => None,
            other => Some(other),
        }
    }
}

impl Output for EncodedTuple {
    fn read<B: Backend>(backend: &B, row: B::Row, filter: Option<&IndexMap<String, Value>>) -> Option<Result<Self>> {
        // a filter the page did not apply reads the metadata; the row is
        // decoded only where the backend cannot read that alone
        match filter.map(|f| backend.row_matches(&row, f)) {
            None | Some(Some(true)) => Some(backend.encoded_row(row)),
            Some(Some(false)) => None,
            Some(None) => {
                CheckpointTuple::read(backend, row, filter).map(|t| t.and_then(|t| EncodedTuple::from_tuple(&t)))
            }
        }
    }
}

/// The state of one stream; it owns an `Arc` of the backend, so the stream
/// outlives the borrow of the saver.
struct State<B: Backend, T> {
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
    out: std::marker::PhantomData<fn() -> T>,
}

pub(super) fn stream<B: Backend, T: Output>(
    backend: Arc<B>,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> BoxStream<'static, Result<T>> {
    match state(backend, config, options) {
        // boxed: `unfold` moves its state in and out of every step, and a
        // pointer is cheaper to move than the state
        Ok(state) => futures::stream::unfold(state, State::next).boxed(),
        Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
    }
}

fn state<B: Backend, T>(
    backend: Arc<B>,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> Result<Box<State<B, T>>> {
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
        out: std::marker::PhantomData,
    }))
}

impl<B: Backend, T: Output> State<B, T> {
    async fn next(mut self: Box<Self>) -> Option<(Result<T>, Box<Self>)> {
        loop {
            if self.remaining == 0 {
                return None;
            }
            if let Some((row, filtered)) = self.buffer.pop_front() {
                // one decode is one unit of work: a long listing yields
                tokio::task::coop::consume_budget().await;
                let filter = (!filtered && !self.filter.is_empty()).then_some(&self.filter);
                let Some(item) = T::read(&*self.backend, row, filter) else {
                    continue;
                };
                if item.is_ok() {
                    self.remaining -= 1;
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
