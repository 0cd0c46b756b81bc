//! Freeing large removals off the caller's path.
//!
//! Deleting a thread unlinks it in O(1) under the lock, but its memory is a
//! few dozen allocations per checkpoint (skeletons, metadata, values, writes),
//! and freeing them costs far more than the unlink. Like Redis's `lazyfree`
//! (`UNLINK`), large removals are handed to one background thread that drops
//! them; small ones are dropped inline. The queue is unbounded: a burst of
//! deletions is never freed on the caller's path (what waits in the queue was
//! already allocated, so the peak is what it was before the deletions); when
//! the thread could not be started, the caller drops the removal itself. Observable state (`storage_bytes`,
//! every read) changes before the call returns either way.

use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use super::store::Garbage;

/// Removals holding fewer allocations than this are dropped inline.
const LAZY_MIN: usize = 64;
static RECLAIMER: OnceLock<Option<Sender<Garbage>>> = OnceLock::new();

fn reclaimer() -> Option<&'static Sender<Garbage>> {
    RECLAIMER
        .get_or_init(|| {
            let (tx, rx) = channel::<Garbage>();
            std::thread::Builder::new()
                .name("checkpointer-reclaim".to_owned())
                .spawn(move || rx.into_iter().for_each(drop))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Drops `garbage`, in the background when it is large.
pub(super) fn dispose(garbage: Garbage) {
    if garbage.items.is_empty() {
        return;
    }
    if garbage.weight < LAZY_MIN {
        drop(garbage);
        return;
    }
    match reclaimer() {
        Some(tx) => {
            // Disconnected (the thread died): the error hands the garbage
            // back, and dropping it here frees it inline.
            let _ = tx.send(garbage);
        }
        None => drop(garbage),
    }
}
