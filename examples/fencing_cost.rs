//! What fencing and atomic steps cost, per backend: a chain of puts by an
//! unfenced saver against the same by a fenced one (which holds the
//! thread's lease), and `put_writes` + `put` against one
//! `put_step_with_writes`. Rounds alternate, each prints its median per
//! call; the last line per backend is the median of the rounds' medians.
//!
//! ```sh
//! cargo run --release --example fencing_cost --features sqlite-bundled,postgres,redis -- \
//!     postgresql://postgres@127.0.0.1:5432/ckpt_fence redis://127.0.0.1:6379
//! ```
//!
//! Without URLs, memory and SQLite (a temporary file) only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::fence::{Fence, Fenceable};
use checkpointer::prelude::*;

const CALLS: usize = 200;
const ROUNDS: usize = 5;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// The median time of one call of `CALLS` puts in a chain on a new thread;
/// with `atomic`, each step's write goes with it in one call, else as a
/// `put_writes` before the `put`.
async fn chain(saver: &dyn Fenceable, thread: &str, atomic: Option<bool>) -> Result<Duration> {
    let mut parent = CheckpointConfig::new(thread);
    let mut times = Vec::with_capacity(CALLS);
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    for i in 0..CALLS {
        let mut step = StepCheckpoint::first(i as i64);
        step.write(
            "messages",
            Value::from(format!("message {i} {}", "x".repeat(200))),
            |v| saver.get_next_version(v),
        )?;
        let writes = [PendingWrite::new("task", "messages", format!("write {i}"))];
        let start = Instant::now();
        parent = match (atomic, parent.checkpoint_id.is_some()) {
            (Some(true), true) => saver.put_step_with_writes(&parent, &step, &meta, &writes).await?.config,
            (Some(false), true) => {
                saver.put_pending_writes(&parent, &writes).await?;
                saver.put_step(&parent, &step, &meta).await?.config
            }
            _ => saver.put_step(&parent, &step, &meta).await?.config,
        };
        times.push(start.elapsed());
    }
    Ok(median(times))
}

async fn measure(name: &str, store: Arc<dyn Fenceable>) -> Result<()> {
    let fenced = store.fenced_saver(Fence::new(
        format!("cost-{}", std::process::id()),
        Duration::from_secs(60),
    ))?;
    let tag = rand::random::<u32>();
    let (mut plain, mut fence, mut separate, mut atomic) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let p = chain(store.as_ref(), &format!("cost-{tag}-{round}-plain"), None).await?;
        let f = chain(fenced.as_ref(), &format!("cost-{tag}-{round}-fenced"), None).await?;
        let s = chain(store.as_ref(), &format!("cost-{tag}-{round}-separate"), Some(false)).await?;
        let a = chain(store.as_ref(), &format!("cost-{tag}-{round}-atomic"), Some(true)).await?;
        println!("{name} round {round}: put {p:?}, fenced put {f:?}, put_writes+put {s:?}, atomic step {a:?}");
        plain.push(p);
        fence.push(f);
        separate.push(s);
        atomic.push(a);
    }
    let (p, f, s, a) = (median(plain), median(fence), median(separate), median(atomic));
    println!(
        "{name}: put {p:?}, fenced put {f:?} ({:.2}x); put_writes+put {s:?}, atomic step {a:?} ({:.2}x)",
        f.as_secs_f64() / p.as_secs_f64(),
        a.as_secs_f64() / s.as_secs_f64()
    );
    for round in 0..ROUNDS {
        for kind in ["plain", "fenced", "separate", "atomic"] {
            store.delete_thread(&format!("cost-{tag}-{round}-{kind}")).await.ok();
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    measure("memory", Arc::new(InMemorySaver::new())).await?;
    let dir = std::env::temp_dir().join(format!("fencing-cost-{}.db", std::process::id()));
    let sqlite = checkpointer::sqlite::SqliteSaver::open(&dir).await?;
    measure("sqlite", Arc::new(sqlite)).await?;
    let _ = std::fs::remove_file(&dir);
    if let Some(url) = args.first() {
        let pg = checkpointer::postgres::PostgresSaver::open(url).await?;
        measure("postgres", Arc::new(pg)).await?;
    }
    if let Some(url) = args.get(1) {
        let redis = checkpointer::redis::RedisSaver::builder()
            .url(url)
            .key_prefix(format!("fencing-cost-{}", std::process::id()))
            .open()
            .await?;
        measure("redis", Arc::new(redis)).await?;
    }
    Ok(())
}
