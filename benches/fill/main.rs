//! Fills a store with realistic threads to a target size, for the retention
//! and space measurements (issue 33): `cargo bench -p checkpointer-benches
//! --all-features --bench fill -- --url URL --bytes 5G [--seed 1]
//! [--writers 16] [--steps 200..2000]`.
//!
//! Each thread is a chat agent run by the crate's step calls
//! ([`checkpointer::step`]), so its rows are the ones LangGraph's runtime
//! writes and [`checkpointer::verify`] checks: turns of an input checkpoint,
//! `agent` and `tools` steps with their pending writes, a message window of
//! the last 30 messages (an agent that summarises), a `review` node that
//! interrupts (answered, or left pending at a thread's end), `tools` run as a
//! subgraph in its own namespace now and then, and forks of earlier
//! checkpoints (`Thread::fork`). Threads are `--steps` checkpoints long
//! (uniform in the range), `--writers` of them written at once (bounded
//! memory: one thread's state each; SQLite and PostgreSQL commit concurrent
//! writes in groups). Everything but the checkpoint ids and timestamps is
//! drawn from `--seed`. Not generated: delta channels (the step calls do
//! not write them).
//!
//! It stops starting threads once the store's size
//! ([`checkpointer::SaverAdmin::storage_size`]) reaches `--bytes`, finishes the ones
//! running, and prints one JSON line: time, threads, checkpoints, writes,
//! bytes, and the row counts of a SQLite or PostgreSQL store.

#[path = "../support/cli.rs"]
mod cli;
#[path = "gen.rs"]
mod generator;

use std::sync::atomic::Ordering;

use generator::{fill, Fill};

struct Args {
    url: String,
    bytes: u64,
    seed: u64,
    writers: usize,
    steps: (usize, usize),
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let n: f64 = num.parse().map_err(|_| format!("bad size {s:?} (e.g. 5M, 5G)"))?;
    Ok((n * mult as f64) as u64)
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        url: String::new(),
        bytes: 5 << 20,
        seed: 1,
        writers: 16,
        steps: (200, 2000),
    };
    let mut it = std::env::args().skip(1).filter(|x| x != "--bench");
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => a.url = value()?,
            "--bytes" => a.bytes = parse_bytes(&value()?)?,
            "--seed" => a.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--writers" => a.writers = value()?.parse().map_err(|e| format!("--writers: {e}"))?,
            "--steps" => {
                let v = value()?;
                let (lo, hi) = v.split_once("..").ok_or("--steps MIN..MAX")?;
                a.steps = (
                    lo.parse().map_err(|e| format!("--steps: {e}"))?,
                    hi.parse().map_err(|e| format!("--steps: {e}"))?,
                );
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if a.url.is_empty() || a.writers == 0 || a.steps.0 == 0 || a.steps.0 > a.steps.1 {
        return Err("usage: fill --url URL [--bytes 5G] [--seed N] [--writers N] [--steps MIN..MAX]".into());
    }
    Ok(a)
}

/// Row counts of a SQLite or PostgreSQL store.
async fn rows(url: &str) -> serde_json::Value {
    if let Some(path) = url.strip_prefix("sqlite://") {
        let Ok(conn) = rusqlite::Connection::open(path) else {
            return serde_json::Value::Null;
        };
        let count = |t: &str| {
            conn.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get::<_, i64>(0))
                .ok()
        };
        return serde_json::json!({"checkpoints": count("checkpoints"), "writes": count("writes")});
    }
    if url.starts_with("postgres") {
        let Ok((client, conn)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await else {
            return serde_json::Value::Null;
        };
        tokio::spawn(conn);
        let mut out = serde_json::Map::new();
        for t in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
            let n = client
                .query_one(&format!("SELECT count(*) FROM {t}"), &[])
                .await
                .ok()
                .and_then(|r| r.try_get::<_, i64>(0).ok());
            out.insert(t.to_owned(), serde_json::json!(n));
        }
        return out.into();
    }
    serde_json::Value::Null
}

#[tokio::main]
async fn main() {
    let a = cli::args_or_exit(args());
    let store = cli::open_or_exit(&a.url).await;
    let options = Fill {
        bytes: a.bytes,
        seed: a.seed,
        writers: a.writers,
        steps: a.steps,
        progress: true,
    };
    let (counts, elapsed, mut bytes) = cli::or_exit(fill(&store, &options).await);
    cli::close_or_exit(&store).await;
    let reopened = checkpointer::OpenOptions::new().read_only(true).open(&a.url).await;
    if let Ok(s) = &reopened {
        bytes = s.storage_size().await.ok().flatten().map_or(bytes, |s| s.bytes);
    }
    let c = &counts;
    println!(
        "{}",
        serde_json::json!({
            "store": checkpointer::secret::redact(&a.url),
            "seconds": elapsed.as_secs_f64(),
            "bytes": bytes,
            "threads": c.threads.load(Ordering::Relaxed),
            "checkpoints": c.checkpoints.load(Ordering::Relaxed),
            "interrupts": c.interrupts.load(Ordering::Relaxed),
            "forks": c.forks.load(Ordering::Relaxed),
            "subgraph_runs": c.subgraphs.load(Ordering::Relaxed),
            "rows": rows(&a.url).await,
        })
    );
}
