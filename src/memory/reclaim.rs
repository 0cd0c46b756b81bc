//! Freeing large removals off the caller's path.
//!
//! Deleting a thread unlinks it in O(1) under the lock, but its memory is a
//! few dozen allocations per checkpoint (skeletons, metadata, values, writes),
//! and freeing them costs far more than the unlink. Like Redis's `lazyfree`
//! (`UNLINK`), large removals are handed to one background thread that drops
//! them; small ones are dropped inline. The queue is bounded: when it is full,
//! or the thread could not be started, the caller drops the removal itself, so
//! memory is never held back for long. Observable state (`storage_bytes`,
//! every read) changes before the call returns either way.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::OnceLock;

use super::store::Garbage;

/// Removals holding fewer allocations than this are dropped inline.
const LAZY_MIN: usize = 64;
/// Removals waiting to be freed before callers free their own.
const QUEUE: usize = 64;
static RECLAIMER: OnceLock<Option<SyncSender<Garbage>>> = OnceLock::new();

fn reclaimer() -> Option<&'static SyncSender<Garbage>> {
    RECLAIMER
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Garbage>(QUEUE);
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
            // Full or disconnected: the error hands the garbage back, and
            // dropping it here frees it inline.
            let _ = tx.try_send(garbage);
        }
        None => drop(garbage),
    }
}
