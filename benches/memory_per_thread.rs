//! Memory per thread of `InMemorySaver` against Python's:
//! 200 000 threads, each one checkpoint of one small channel
//! (`"name" = "Alice"`), stored in a fresh saver; the bytes it holds
//! afterwards, counted by a counting global allocator (requested sizes,
//! without the allocator's own overhead), divided by the threads. Then the
//! same workload in Python's `InMemorySaver` measured with `tracemalloc`
//! (`scripts/memory_per_thread.py`, the peer venv of `scripts/python-venv.sh`),
//! in the same run.
//!
//! ```sh
//! cargo bench -p checkpointer-benches --all-features --bench memory_per_thread
//! MEM_THREADS=20000 PYTHON=target/peer-venv/bin/python cargo bench -p checkpointer-benches --all-features --bench memory_per_thread
//! ```
//!
//! The bound that `tests/memory/per_thread.rs` asserts comes from this
//! workload, which both share.

// (The bound and its test in that file are the test binary's.)
#[allow(dead_code, unused_imports)]
#[path = "../tests/memory/per_thread.rs"]
mod per_thread;

use std::process::Command;

fn main() {
    let threads: usize = std::env::var("MEM_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let (per, saver) = per_thread::measure(threads, false);
    println!(
        "rust InMemorySaver: {threads} threads, {:.0} bytes per thread ({:.1} MB in all), {:.1} allocations per thread",
        per.bytes,
        per.bytes * threads as f64 / 1e6,
        per.allocations
    );
    drop(saver);
    let python = std::env::var("PYTHON").ok().or_else(|| {
        let out = Command::new("scripts/python-venv.sh").output().ok()?;
        String::from_utf8(out.stdout).ok()?.lines().last().map(str::to_owned)
    });
    let Some(python) = python else {
        println!("python: no peer venv (set PYTHON or see scripts/python-venv.sh)");
        return;
    };
    let out = Command::new(&python)
        .arg("scripts/memory_per_thread.py")
        .arg(threads.to_string())
        .output();
    match out {
        Ok(out) if out.status.success() => print!("{}", String::from_utf8_lossy(&out.stdout)),
        Ok(out) => println!("python failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => println!("python {python}: {e}"),
    }
}
