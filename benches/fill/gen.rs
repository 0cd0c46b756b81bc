//! The fill's threads (see `main.rs`): a chat agent on the step calls.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::SaverAdmin;

use checkpointer::prelude::*;
use checkpointer::reducer::Reducers;
use checkpointer::step::goto;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What to fill.
pub struct Fill {
    /// Stop starting threads at this store size.
    pub bytes: u64,
    /// Everything but ids and timestamps follows from it.
    pub seed: u64,
    /// Threads written at once.
    pub writers: usize,
    /// Checkpoints per thread, uniform in this range.
    pub steps: (usize, usize),
    /// Print the size every 2 s on stderr.
    pub progress: bool,
}

/// Fills `store` as `options` say: the counts, the time it took and the
/// last size seen.
pub async fn fill(store: &Arc<dyn SaverAdmin>, options: &Fill) -> Result<(Arc<Counts>, Duration, u64), String> {
    let started = Instant::now();
    let counts = Arc::new(Counts::default());
    let full = Arc::new(AtomicBool::new(false));
    let mut seeds = StdRng::seed_from_u64(options.seed);
    let mut running = tokio::task::JoinSet::new();
    let mut next = 0u64;
    let mut last_check = Instant::now();
    let mut bytes = 0u64;
    loop {
        while running.len() < options.writers && !full.load(Ordering::Relaxed) {
            let (seed, length) = (
                seeds.random::<u64>(),
                seeds.random_range(options.steps.0..=options.steps.1),
            );
            let (saver, counts) = (store.saver(), counts.clone());
            let id = format!("fill-{:016x}-{next:06}", options.seed);
            next += 1;
            running.spawn(async move {
                let out = thread(saver, id.clone(), seed, length, &counts).await;
                counts.threads.fetch_add(1, Ordering::Relaxed);
                out.map_err(|e| format!("thread {id}: {e}"))
            });
        }
        match tokio::time::timeout(Duration::from_millis(500), running.join_next()).await {
            Ok(Some(Ok(Ok(())))) => {}
            Ok(Some(Ok(Err(e)))) => return Err(e),
            Ok(Some(Err(e))) => return Err(format!("a writer failed: {e}")),
            Ok(None) => break,
            Err(_) => {}
        }
        if last_check.elapsed() > Duration::from_secs(2) && !full.load(Ordering::Relaxed) {
            last_check = Instant::now();
            bytes = store.storage_size().await.ok().flatten().map_or(0, |s| s.bytes);
            if options.progress {
                eprintln!(
                    "{:>6.0} s  {} MiB  {} threads  {} checkpoints",
                    started.elapsed().as_secs_f64(),
                    bytes >> 20,
                    counts.threads.load(Ordering::Relaxed),
                    counts.checkpoints.load(Ordering::Relaxed)
                );
            }
            if bytes >= options.bytes {
                full.store(true, Ordering::Relaxed);
            }
        }
    }
    Ok((counts, started.elapsed(), bytes))
}

/// Messages a checkpoint keeps.
const WINDOW: usize = 30;

/// Counters of the whole fill.
#[derive(Default)]
pub struct Counts {
    pub threads: AtomicU64,
    pub checkpoints: AtomicU64,
    pub interrupts: AtomicU64,
    pub forks: AtomicU64,
    pub subgraphs: AtomicU64,
}

fn text(rng: &mut StdRng, min: usize, max: usize) -> String {
    const WORDS: [&str; 16] = [
        "the", "agent", "calls", "a", "tool", "with", "weather", "for", "paris", "result", "is", "sunny", "and",
        "user", "asks", "again",
    ];
    let n = rng.random_range(min..=max);
    let mut s = String::with_capacity(n + 12);
    while s.len() < n {
        if rng.random_bool(0.2) {
            s.push_str(&format!("{:x} ", rng.random::<u32>()));
        } else {
            s.push_str(WORDS[rng.random_range(0..WORDS.len())]);
            s.push(' ');
        }
    }
    s
}

fn message(rng: &mut StdRng, role: &str, id: u64) -> Value {
    let content = text(rng, 100, 1500);
    Value::map([
        ("role", Value::from(role)),
        ("content", Value::from(content)),
        ("id", Value::from(format!("msg-{id}"))),
    ])
}

fn reducers() -> Reducers {
    Reducers::new().field("messages", |mut current: Vec<Value>, written: Vec<Value>| {
        current.extend(written);
        let extra = current.len().saturating_sub(WINDOW);
        current.drain(..extra);
        Ok(current)
    })
}

/// One thread of about `length` checkpoints (see the module docs).
pub async fn thread(
    saver: Arc<dyn CheckpointSaver>,
    id: String,
    seed: u64,
    length: usize,
    counts: &Counts,
) -> Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let reducers = reducers();
    let thread = Thread::new(saver, id);
    let mut written = 0usize;
    let mut msg = 0u64;
    let mut ids: Vec<String> = Vec::new();
    while written < length {
        msg += 1;
        let input = Value::map([("messages", Value::from(vec![message(&mut rng, "user", msg)]))]);
        let mut step = thread.start(input, None).await?;
        let last_turn = written + 20 >= length;
        let mut tool_calls = rng.random_range(0..4usize);
        loop {
            for task in step.to_run() {
                let mut ctx = step.context(&task)?;
                let writes = match task.name.as_str() {
                    START => step.input_writes(&["agent"])?,
                    "agent" => {
                        msg += 1;
                        let mut w = vec![("messages".to_owned(), Value::from(vec![message(&mut rng, "ai", msg)]))];
                        if tool_calls > 0 {
                            tool_calls -= 1;
                            w.push(goto("tools"));
                        } else if rng.random_bool(0.3) {
                            w.push(goto("review"));
                        }
                        w
                    }
                    "tools" => {
                        if rng.random_bool(0.15) {
                            counts.subgraphs.fetch_add(1, Ordering::Relaxed);
                            subgraph(&step, &task, &mut rng).await?;
                        }
                        msg += 1;
                        vec![
                            ("messages".to_owned(), Value::from(vec![message(&mut rng, "tool", msg)])),
                            goto("agent"),
                        ]
                    }
                    _ => match ctx.interrupt("approve the answer?") {
                        Ok(answer) => vec![(
                            "summary".to_owned(),
                            Value::from(format!(
                                "{}: {}",
                                answer.as_str().unwrap_or("?"),
                                text(&mut rng, 50, 300)
                            )),
                        )],
                        Err(interrupt) => {
                            counts.interrupts.fetch_add(1, Ordering::Relaxed);
                            step.interrupt(&task, &ctx, vec![interrupt]).await?;
                            continue;
                        }
                    },
                };
                step.finish(&task, &ctx, writes).await?;
            }
            if step.is_interrupted() {
                if last_turn && rng.random_bool(0.5) {
                    // left waiting for its answer
                    written = length;
                    break;
                }
                step = thread.resume(Resume::Value(Value::from("yes"))).await?;
                continue;
            }
            if step.tasks().is_empty() {
                break;
            }
            step = step.close(&reducers).await?;
            written += 1;
            counts.checkpoints.fetch_add(1, Ordering::Relaxed);
            if ids.len() < 64 {
                ids.push(step.parent().checkpoint.id.clone());
            } else {
                let at = rng.random_range(0..ids.len());
                ids[at] = step.parent().checkpoint.id.clone();
            }
        }
        written += 1;
        counts.checkpoints.fetch_add(1, Ordering::Relaxed);
        if written < length && !ids.is_empty() && rng.random_bool(0.03) {
            let at = ids[rng.random_range(0..ids.len())].clone();
            thread.fork(&at).await?;
            written += 1;
            counts.forks.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// `tools` as a subgraph: a `search` node in the task's namespace.
async fn subgraph(step: &Step, task: &TaskState, rng: &mut StdRng) -> Result<()> {
    let query = Value::from(text(rng, 20, 80));
    let mut inner = step.enter(task, Value::map([("query", query)])).await?;
    while !inner.tasks().is_empty() {
        for t in inner.to_run() {
            let ctx = inner.context(&t)?;
            let writes = match t.name.as_str() {
                START => inner.input_writes(&["search"])?,
                _ => vec![("result".to_owned(), Value::from(text(rng, 200, 2000)))],
            };
            inner.finish(&t, &ctx, writes).await?;
        }
        inner = inner.close(&Reducers::new()).await?;
    }
    Ok(())
}
