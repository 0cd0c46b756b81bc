//! One branch of a thread's history: a checkpoint and its ancestors, newest
//! first ([`Thread::ancestors`], [`Thread::branch`]), beside the whole
//! history ([`Thread::history`]), which after a fork interleaves every
//! branch by checkpoint id, as LangGraph's `get_state_history` does.

use ::serde::de::DeserializeOwned;

use super::{StateSnapshot, Thread};
use crate::checkpoint::CheckpointTuple;
use crate::error::{Error, Result};

/// A walk up one branch of a thread's history: from a checkpoint through
/// its parent, its parent's parent, … to the first checkpoint of the
/// namespace, newest first. Made by [`Thread::ancestors`].
///
/// Each checkpoint is one [`get_tuple`](crate::CheckpointSaver::get_tuple)
/// on the thread's namespace (with its pending writes, so a snapshot shows
/// its tasks), read when asked for: the walk holds one checkpoint id and
/// two counters, whatever the branch's length. A checkpoint whose parent is
/// not stored (a pruned thread, a copy cut short) ends the branch without an
/// error. Parent links that loop back on themselves (a corrupt store) end
/// the walk with [`Error::InvalidInput`] after at most three times as many
/// reads as the branch up to and around the loop holds (Brent's cycle
/// detection), never an endless walk.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use std::sync::Arc;
/// use checkpointer::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct State { n: i64 }
///
/// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
/// let one = thread.update_state(&State { n: 1 }, "count").await?;
/// let two = thread.update_state(&State { n: 2 }, "count").await?;
/// // a fork of `one`: a sibling of `two`, then one more on top of it
/// let fork = thread.fork(one.checkpoint_id().unwrap()).await?;
/// let three = thread.update_state(&State { n: 3 }, "count").await?;
///
/// // the whole history interleaves both branches, newest first
/// assert_eq!(thread.history::<Value>(ListOptions::default()).await?.len(), 4);
/// // the branch of the latest checkpoint skips `two`, the abandoned one
/// let mut walk = thread.ancestors(None);
/// let mut ids = Vec::new();
/// while let Some(tuple) = walk.next_tuple().await? {
///     ids.push(tuple.config);
/// }
/// assert_eq!(ids, [three, fork.clone()]); // the fork's parent is `one`'s (none here)
/// // the branch of `two`, as snapshots, one page of at most 10
/// let old: Vec<StateSnapshot<State>> = thread.branch(two.checkpoint_id(), 10).await?;
/// let ns: Vec<i64> = old.iter().map(|s| s.values.n).collect();
/// assert_eq!(ns, [2, 1]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Ancestors {
    thread: Thread,
    /// The id read next; `None` once the walk has ended.
    next: Option<String>,
    /// Whether the next read is the first (a missing first checkpoint is an
    /// error, a missing parent the branch's end).
    first: bool,
    /// Brent's cycle detection: the id the walk compares each new one with,
    /// the length of the current window, and how far into it the walk is.
    mark: Option<String>,
    power: u64,
    lam: u64,
}

impl Thread {
    /// The branch that ends at checkpoint `from` (the namespace's latest
    /// when `None`): that checkpoint and its ancestors by parent links,
    /// newest first, read one at a time ([`Ancestors`]).
    pub fn ancestors(&self, from: Option<&str>) -> Ancestors {
        Ancestors {
            thread: self.clone(),
            next: from.map(str::to_owned),
            first: true,
            mark: None,
            power: 1,
            lam: 1,
        }
    }

    /// The first `limit` states of the branch that ends at `from` (the
    /// namespace's latest when `None`), newest first: one page of
    /// [`Thread::ancestors`]. The next page starts at the parent of the last
    /// one returned (its `parent_config`).
    ///
    /// # Errors
    /// As [`Ancestors::next_tuple`] and [`StateSnapshot::from_tuple`].
    pub async fn branch<S: DeserializeOwned>(&self, from: Option<&str>, limit: usize) -> Result<Vec<StateSnapshot<S>>> {
        self.ancestors(from).page(limit).await
    }
}

impl Ancestors {
    /// The next checkpoint of the branch, `None` at its end (the first
    /// checkpoint of the namespace, a parent that is not stored, or an empty
    /// namespace when the walk started from the latest).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the checkpoint the walk started from is
    /// not stored, or the parent links loop; the saver's.
    pub async fn next_tuple(&mut self) -> Result<Option<CheckpointTuple>> {
        if !self.first && self.next.is_none() {
            return Ok(None);
        }
        let first = std::mem::replace(&mut self.first, false);
        let wanted = self.next.take();
        let Some(tuple) = self.thread.tuple(wanted.as_deref()).await? else {
            return match (first, wanted) {
                (true, Some(id)) => Err(Error::invalid(format!(
                    "ancestors: no checkpoint {id:?} in thread {:?} (namespace {:?})",
                    self.thread.thread_id(),
                    self.thread.namespace()
                ))),
                _ => Ok(None), // an empty namespace, or a parent pruned away
            };
        };
        let id = tuple.checkpoint.id.clone();
        self.check_cycle(&id)?;
        self.next = tuple
            .parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id())
            .map(str::to_owned);
        Ok(Some(tuple))
    }

    /// The next state of the branch ([`Ancestors::next_tuple`] as a
    /// [`StateSnapshot`]).
    ///
    /// # Errors
    /// As [`Ancestors::next_tuple`] and [`StateSnapshot::from_tuple`].
    pub async fn next_state<S: DeserializeOwned>(&mut self) -> Result<Option<StateSnapshot<S>>> {
        self.next_tuple().await?.map(StateSnapshot::from_tuple).transpose()
    }

    /// The next `limit` states of the branch (fewer at its end).
    ///
    /// # Errors
    /// As [`Ancestors::next_state`].
    pub async fn page<S: DeserializeOwned>(&mut self, limit: usize) -> Result<Vec<StateSnapshot<S>>> {
        let mut out = Vec::with_capacity(limit.min(64));
        while out.len() < limit {
            match self.next_state().await? {
                Some(state) => out.push(state),
                None => break,
            }
        }
        Ok(out)
    }

    /// The id of the checkpoint the walk reads next (`None` at the end, or
    /// before the first read of a walk from the latest checkpoint): a later
    /// walk continues from it with [`Thread::ancestors`].
    pub fn next_id(&self) -> Option<&str> {
        self.next.as_deref()
    }

    /// Brent's cycle detection over the ids read so far: O(1) memory, a
    /// loop found within three times the reads up to and around it.
    fn check_cycle(&mut self, id: &str) -> Result<()> {
        let Some(mark) = &self.mark else {
            self.mark = Some(id.to_owned());
            return Ok(());
        };
        if mark == id {
            return Err(Error::invalid(format!(
                "ancestors: the parent links of thread {:?} (namespace {:?}) loop back to checkpoint {id}",
                self.thread.thread_id(),
                self.thread.namespace()
            )));
        }
        if self.power == self.lam {
            self.mark = Some(id.to_owned());
            self.power = self.power.saturating_mul(2);
            self.lam = 0;
        }
        self.lam = self.lam.saturating_add(1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The cycle check over a made-up sequence of ids: the first repeat of
    /// a loop is found within three times the length of the walk to and
    /// around it (never before the first repeat).
    #[test]
    fn brent_finds_every_loop_soon_and_never_a_false_one() {
        let thread = Thread::new(Arc::new(crate::memory::InMemorySaver::new()), "t");
        for tail in 0..6usize {
            for cycle in 1..9usize {
                let mut walk = thread.ancestors(None);
                let ids = (0..).map(|k| if k < tail { k } else { tail + (k - tail) % cycle });
                let mut found = None;
                for (read, id) in ids.take(10 * (tail + cycle)).enumerate() {
                    if walk.check_cycle(&id.to_string()).is_err() {
                        found = Some(read);
                        break;
                    }
                }
                let found = found.unwrap_or_else(|| panic!("tail {tail}, cycle {cycle}: not found"));
                assert!(
                    found >= tail + cycle,
                    "tail {tail}, cycle {cycle}: found at {found}, too early"
                );
                assert!(
                    found <= 3 * (tail + cycle),
                    "tail {tail}, cycle {cycle}: found at {found}"
                );
            }
        }
        let mut walk = thread.ancestors(None);
        for k in 0..10_000 {
            walk.check_cycle(&k.to_string()).unwrap();
        }
    }
}
