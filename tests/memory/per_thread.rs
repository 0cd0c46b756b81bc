//! What one thread of one small checkpoint costs `InMemorySaver`, counted by
//! the allocator: the bytes the saver still holds after `put`, divided by the
//! threads. Deterministic (no timing): the bound below fails the test when a
//! change makes a thread cost more. `benches/memory_per_thread.rs` runs the
//! same workload at 200 000 threads beside Python's `InMemorySaver`.
//!
//! The workload: thread `thread-{i}`, one checkpoint whose one channel
//! `name` holds `"Alice"` at a version from `get_next_version(None)`, with
//! input metadata (`source`, `step`, `parents`), as `scripts/memory_per_thread.py`
//! does in Python.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    InMemorySaver, Value,
};

/// The system allocator, counting live bytes and allocations: for the whole
/// process and for the thread that allocates (a test measures on a thread
/// of its own, so other tests running meanwhile do not count).
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_LIVE: Cell<isize> = const { Cell::new(0) };
    static THREAD_ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: isize, allocs: usize) {
    LIVE.fetch_add(bytes, Ordering::Relaxed);
    ALLOCS.fetch_add(allocs, Ordering::Relaxed);
    let _ = THREAD_LIVE.try_with(|c| c.set(c.get() + bytes));
    let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + allocs));
}

// SAFETY: every call is passed on to `System` unchanged; the counters are
// atomics and const thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize, 1);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize, 1);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize), 0);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize, 1);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// (live bytes, allocations) so far: the process's, or this thread's.
pub fn counters(this_thread: bool) -> (isize, usize) {
    if this_thread {
        (THREAD_LIVE.get(), THREAD_ALLOCS.get())
    } else {
        (LIVE.load(Ordering::Relaxed), ALLOCS.load(Ordering::Relaxed))
    }
}

/// What `threads` threads of the workload cost a fresh saver, per thread.
#[derive(Debug, Clone, Copy)]
pub struct PerThread {
    /// Bytes the saver holds, per thread.
    pub bytes: f64,
    /// Allocations made while storing (including those freed since), per thread.
    pub allocations: f64,
}

/// Stores `threads` threads of the workload in a fresh `InMemorySaver` and
/// returns what it holds per thread, counted on this thread (`this_thread`)
/// or for the whole process, with the saver still alive. The caller's
/// checkpoint, metadata and configs are dropped after each `put`, so only
/// what the saver keeps is counted.
pub fn measure(threads: usize, this_thread: bool) -> (PerThread, InMemorySaver) {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (bytes0, allocs0) = counters(this_thread);
    let saver = InMemorySaver::new();
    rt.block_on(async {
        for i in 0..threads {
            // Each step's metadata is a map of its own, as a graph's are.
            let metadata = CheckpointMetadata::new(CheckpointSource::Input, -1);
            let mut checkpoint = Checkpoint::new(-1);
            let version = saver.get_next_version(None).unwrap();
            checkpoint
                .channel_values
                .insert("name".to_owned(), Value::from("Alice"));
            checkpoint.channel_versions.insert("name".to_owned(), version.clone());
            let mut new_versions = ChannelVersions::new();
            new_versions.insert("name".to_owned(), version);
            let config = CheckpointConfig::new(format!("thread-{i}"));
            let stored = saver.put(&config, &checkpoint, &metadata, &new_versions).await.unwrap();
            drop((stored, config, checkpoint, metadata, new_versions));
        }
    });
    let (bytes1, allocs1) = counters(this_thread);
    let per = PerThread {
        bytes: (bytes1 - bytes0) as f64 / threads as f64,
        allocations: (allocs1 - allocs0) as f64 / threads as f64,
    };
    (per, saver)
}

/// The bound (not compiled into the bench, which shares this file).
#[cfg(test)]
mod bound {
    use super::measure;

    /// Bytes one thread of the workload may cost: Python's `InMemorySaver`
    /// holds 1 358 bytes per thread in the same workload
    /// (`benches/memory_per_thread.rs`), and ours may not hold more. 1 322
    /// measured at 20 000 threads (2 894 before checkpoint records were
    /// kept compact until read, and a thread's namespaces and a namespace's
    /// channels were sorted vectors while small; 4 669 before the checkpoint
    /// indexes and version maps of a thread became vectors while small).
    const MAX_BYTES_PER_THREAD: f64 = 1_358.0;

    /// Allocations one thread's `put` may make (kept or freed).
    const MAX_ALLOCATIONS_PER_THREAD: f64 = 53.0;

    #[test]
    fn a_thread_of_one_small_checkpoint_costs_at_most_the_bound() {
        // On a thread of its own: the counters of this thread only.
        let per = std::thread::spawn(|| measure(20_000, true).0).join().unwrap();
        eprintln!("{per:?}");
        assert!(
            per.bytes <= MAX_BYTES_PER_THREAD,
            "{:.0} bytes per thread, bound {MAX_BYTES_PER_THREAD}",
            per.bytes
        );
        assert!(
            per.allocations <= MAX_ALLOCATIONS_PER_THREAD,
            "{:.1} allocations per thread, bound {MAX_ALLOCATIONS_PER_THREAD}",
            per.allocations
        );
    }
}
