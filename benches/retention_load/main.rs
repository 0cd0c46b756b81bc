//! Retention beside a steady write load on a filled store (issue 33):
//! `cargo bench -p checkpointer-benches --all-features --bench
//! retention_load -- --url URL [--writers 4] [--rate 20] [--phase 60]
//! [--keep-last 20] [--idle-fraction 0.3] [--batch 256] [--floor-threads 8]
//! [--rest 4] [--step-pages 256] [--reclaim 1] [--retain-max S]
//! [--alternate S]`.
//!
//! Fill the store first (`--bench fill`). Then, in one run:
//!
//! 1. **Floor** (no load): on `--floor-threads` threads spread over the
//!    store, alternately, the raw `DELETE` statements of the checkpoints
//!    the policy removes (a dry run names them; in its batches, each batch
//!    one transaction: SQLite's two `DELETE`s, PostgreSQL's three pipelined
//!    with the orphan blobs computed beforehand, no parent cleared) and
//!    `retain` of the thread (scan, plan and batches, no rest), each after
//!    an untimed dry run of its thread (both timed on a warm cache):
//!    checkpoints removed per second of each. SQLite and PostgreSQL only.
//! 2. **Load**: `--writers` tasks each put one checkpoint (a 20-message
//!    window, about 4 KB) every `1 / --rate` s on fresh threads of their own
//!    (every put timed), through four phases: `before` (`--phase` s, load
//!    alone), `retain` (the policy run over the filled threads with
//!    `RetainOptions::rest(--rest)`, one `retain` call per thread, until
//!    done or, with `--retain-max`, stopped between threads; with
//!    `--alternate S`, S seconds of retention, then S of the load alone,
//!    and again, the puts of those pauses forming the phase `between`, in
//!    the same minutes as `retain`), `after`
//!    (`--phase` s), `reclaim` (`reclaim_space`: SQLite's bounded
//!    incremental vacuum, `--step-pages` a step, resting as retention
//!    does, and WAL truncation; PostgreSQL's plain `VACUUM` of each table,
//!    as autovacuum would; `--reclaim 0` skips it).
//!
//! The policy: `keep_last(--keep-last)` (the latest, interrupts, pending
//! writes a resume needs, fork points, marks and delta history always stay)
//! and `delete_idle_threads(age)`, the age that makes the `--idle-fraction`
//! longest-idle threads idle. Prints one JSON line: each phase's put p50,
//! p99, max and missed ticks, the p99 ratios, the retention report with
//! checkpoints removed per second, the floor, and the store's space (parts:
//! PostgreSQL table, TOAST and index bytes, live and dead rows) before
//! retention, after it and after the reclaim step.

#[path = "../support/cli.rs"]
mod cli;
#[path = "run.rs"]
mod measure;

use std::time::Duration;

use measure::{run, Options};

fn args() -> Result<Options, String> {
    let mut o = Options {
        url: String::new(),
        writers: 4,
        rate: 20.0,
        thread_steps: 50,
        phase: Duration::from_secs(60),
        keep_last: 20,
        idle_fraction: 0.3,
        batch: 256,
        floor_threads: 8,
        rest: checkpointer::retention::DEFAULT_REST,
        step_pages: 256,
        reclaim: true,
        retain_max: None,
        alternate: None,
    };
    let mut it = std::env::args().skip(1).filter(|x| x != "--bench");
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<f64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--url" => o.url = value,
            "--writers" => o.writers = num(&value)? as usize,
            "--rate" => o.rate = num(&value)?,
            "--thread-steps" => o.thread_steps = num(&value)? as usize,
            "--phase" => o.phase = Duration::from_secs_f64(num(&value)?),
            "--keep-last" => o.keep_last = num(&value)? as usize,
            "--idle-fraction" => o.idle_fraction = num(&value)?.clamp(0.0, 1.0),
            "--batch" => o.batch = num(&value)? as usize,
            "--floor-threads" => o.floor_threads = num(&value)? as usize,
            "--rest" => o.rest = num(&value)? as u32,
            "--step-pages" => o.step_pages = num(&value)? as u32,
            "--reclaim" => o.reclaim = value != "0",
            "--retain-max" => o.retain_max = Some(Duration::from_secs_f64(num(&value)?)),
            "--alternate" => o.alternate = Some(Duration::from_secs_f64(num(&value)?)),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if o.url.is_empty() || o.writers == 0 || o.rate.is_nan() || o.rate <= 0.0 || o.keep_last == 0 {
        return Err(
            "usage: retention_load --url URL [--writers N] [--rate PUTS_PER_S] [--phase S] \
                    [--keep-last N] [--idle-fraction F] [--batch N] [--floor-threads N] [--thread-steps N] \
                    [--rest N] [--step-pages N] [--reclaim 0|1] [--retain-max S] [--alternate S]"
                .into(),
        );
    }
    Ok(o)
}

#[tokio::main]
async fn main() {
    let o = cli::args_or_exit(args());
    let store = cli::open_or_exit(&o.url).await;
    println!("{}", cli::or_exit(run(&store, &o, true).await));
    cli::close_or_exit(&store).await;
}
