//! One racing writer of the multi-process fencing harness
//! (`python/tests/test_race.py`, `docs/reliability.md`): a fenced writer
//! that takes a thread whenever it can and appends steps to it until it is
//! refused, logging every acknowledged write and every refusal to its own
//! log file, one fsync'd line each. The harness runs several of these and
//! Python LangGraph workers on one thread and kills the owner with SIGKILL.
//!
//! ```sh
//! cargo run --example race_worker --features sqlite-bundled,postgres,redis -- \
//!     URL THREAD WRITER LEASE_MS LOG
//! ```
//!
//! URL is any `checkpointer::open` URL (`sqlite:///path`, `postgresql://…`,
//! `redis://…?prefix=…`, a cluster's node list). Each turn:
//! `acquire` (polled every 20 ms until it succeeds), read the latest
//! checkpoint, then steps until refused, alternately one atomic step
//! (`put_step_with_writes`) and a `put_writes` followed by a `put`, each
//! step's one write a token naming the writer. Log lines, after the time in
//! microseconds since the Unix epoch:
//!
//! - `READY`: the store is open;
//! - `OWN <epoch>`: the lease was taken;
//! - `PUT <checkpoint id> <parent id>` / `REFUSED_PUT <checkpoint id>`;
//! - `WRITES <checkpoint id> <task id> <channel>=<token>` /
//!   `REFUSED_WRITES …`: the same fields;
//! - `ERROR <message>`: any error but `Error::Fenced`; the worker exits 1.

use std::fs::File;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use checkpointer::fence::{Fence, Fenceable};
use checkpointer::prelude::*;
use checkpointer::OpenOptions;

struct Log(File);

impl Log {
    fn line(&mut self, text: &str) {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        // an unlogged ack would be a false "lost write": every line is on disk before the worker goes on
        writeln!(self.0, "{t} {text}").expect("log");
        self.0.sync_data().expect("fsync the log");
    }
}

fn fenced(e: &Error) -> bool {
    matches!(e, Error::Fenced { .. })
}

/// Takes the thread, polling; returns the epoch.
async fn acquire(saver: &dyn Fenceable, thread: &str) -> Result<u64> {
    loop {
        match saver.acquire(thread).await {
            Ok(lease) => return Ok(lease.epoch),
            Err(e) if fenced(&e) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => return Err(e),
        }
    }
}

/// Steps while the writer owns the thread; `Ok` when refused.
async fn own(saver: &dyn Fenceable, thread: &str, writer: &str, n: &mut u64, log: &mut Log) -> Result<()> {
    let mut parent = saver.latest(thread).await?;
    loop {
        *n += 1;
        let token = format!("tok:{writer}:{n}");
        let task = format!("{writer}-task-{n}");
        let step_no = parent.as_ref().and_then(|t| t.metadata.step()).unwrap_or(-2) + 1;
        let (config, mut step) = match &parent {
            Some(t) => (t.config.clone(), t.checkpoint.successor(step_no)),
            None => (CheckpointConfig::new(thread), StepCheckpoint::first(step_no)),
        };
        step.write("last", token.as_str(), |v| saver.get_next_version(v))?;
        let id = step.checkpoint().id.clone();
        let parent_id = config.checkpoint_id.clone().unwrap_or_else(|| "-".into());
        let writes = match &parent {
            Some(_) => vec![PendingWrite::new(task.as_str(), "last", token.as_str())],
            None => Vec::new(),
        };
        let written = format!("{parent_id} {task} last={token}");
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step_no);
        let result = if *n % 2 == 0 {
            // one atomic step: both or neither
            match saver.put_step_with_writes(&config, &step, &meta, &writes).await {
                Ok(t) => {
                    if !writes.is_empty() {
                        log.line(&format!("WRITES {written}"));
                    }
                    log.line(&format!("PUT {id} {parent_id}"));
                    Ok(t)
                }
                Err(e) => {
                    if fenced(&e) {
                        if !writes.is_empty() {
                            log.line(&format!("REFUSED_WRITES {written}"));
                        }
                        log.line(&format!("REFUSED_PUT {id}"));
                    }
                    Err(e)
                }
            }
        } else {
            let mut r = Ok(());
            if !writes.is_empty() {
                r = saver.put_pending_writes(&config, &writes).await;
                match &r {
                    Ok(()) => log.line(&format!("WRITES {written}")),
                    Err(e) if fenced(e) => log.line(&format!("REFUSED_WRITES {written}")),
                    Err(_) => {}
                }
            }
            match r {
                Ok(()) => match saver.put_step(&config, &step, &meta).await {
                    Ok(t) => {
                        log.line(&format!("PUT {id} {parent_id}"));
                        Ok(t)
                    }
                    Err(e) => {
                        if fenced(&e) {
                            log.line(&format!("REFUSED_PUT {id}"));
                        }
                        Err(e)
                    }
                },
                Err(e) => Err(e),
            }
        };
        match result {
            Ok(t) => parent = Some(t),
            Err(e) if fenced(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
        // a few ms between steps, as a node's work would take
        tokio::time::sleep(Duration::from_millis(rand::random_range(0..20))).await;
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, thread, writer, lease_ms, log] = &args[..] else {
        eprintln!("usage: race_worker URL THREAD WRITER LEASE_MS LOG");
        std::process::exit(2);
    };
    let mut log = Log(File::options()
        .create(true)
        .append(true)
        .open(log)
        .expect("open the log"));
    let run = async {
        let lease = Duration::from_millis(lease_ms.parse().expect("LEASE_MS: milliseconds"));
        let (_encoded, saver) = OpenOptions::new()
            .open(url)
            .await?
            .fenced(Fence::new(writer.as_str(), lease))?;
        log.line("READY");
        let mut n = 0;
        loop {
            let epoch = acquire(saver.as_ref(), thread).await?;
            log.line(&format!("OWN {epoch}"));
            own(saver.as_ref(), thread, writer, &mut n, &mut log).await?;
        }
    };
    let result: Result<()> = run.await;
    if let Err(e) = result {
        log.line(&format!("ERROR {}", e.to_string().replace('\n', " ")));
        std::process::exit(1);
    }
}
