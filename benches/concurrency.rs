//! Concurrent writers: 1, 4 and 16 writers, each putting the checkpoints of
//! its own thread (thread `w` of `../shared/peer/WORKLOAD.md`, growing message
//! list included) at the same time into one `SqliteSaver` file or one
//! `PostgresSaver` database; prints the aggregate puts/s as one JSON line per
//! (saver, writers), in the format of `scripts/concurrency_python.py`, which
//! measures the same on Python's savers.
//!
//! ```sh
//! cargo bench -p checkpointer-benches --all-features --bench concurrency
//! CONC_STEPS=50 CONC_WRITERS=1,16 CONC_SAVERS=sqlite cargo bench -p checkpointer-benches --all-features --bench concurrency
//! ```
//!
//! Durability is the default of each saver (SQLite WAL + `synchronous = FULL`,
//! PostgreSQL's `synchronous_commit`), as in Python. Each writer is a tokio
//! task on a multi-thread runtime; the Postgres pool has one connection per
//! writer. Every run starts on fresh storage (a new file, a new database on
//! the server at `CHECKPOINTER_PG_URL`, default
//! `postgresql://postgres@127.0.0.1:5432`). The checkpoints are built before
//! the clock starts; the time is from the start signal to the last put.

#[path = "workload/generator.rs"]
mod generator;
#[path = "../tests/support/postgres.rs"]
mod postgres_support;
mod support;

use std::sync::Arc;
use std::time::Instant;

use checkpointer::postgres::PostgresSaver;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::CheckpointSaver;
use tokio::sync::Barrier;

/// Runs `writers` concurrent writers of `steps` puts each; returns seconds.
async fn run(saver: Arc<dyn CheckpointSaver>, writers: usize, steps: usize) -> f64 {
    let barrier = Arc::new(Barrier::new(writers + 1));
    let mut tasks = Vec::new();
    for w in 0..writers {
        let mut stream = generator::ThreadStream::new(42, w, steps);
        let mut all = Vec::with_capacity(steps);
        while let Some(step) =
            stream.next_step(|v| saver.get_next_version(v).expect("the generator's versions continue"))
        {
            all.push(step);
        }
        let (saver, barrier) = (saver.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            for step in all {
                let cfg = saver
                    .put(&step.config, &step.checkpoint, &step.metadata, &step.new_versions)
                    .await
                    .unwrap();
                assert_eq!(cfg.checkpoint_id.as_deref(), Some(step.op.checkpoint_id.as_str()));
            }
        }));
    }
    barrier.wait().await;
    let start = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes --bench; nothing else is read from the command line
    let steps: usize = std::env::var("CONC_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let writers: Vec<usize> = support::env_list("CONC_WRITERS", "1,4,16")
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect();
    let savers = support::env_list("CONC_SAVERS", "sqlite,postgres");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for kind in &savers {
        for &w in &writers {
            let dir = tempfile::tempdir().unwrap();
            let mut db = None;
            let saver: Arc<dyn CheckpointSaver> = match kind.as_str() {
                "sqlite" => Arc::new(rt.block_on(SqliteSaver::open(dir.path().join("c.sqlite"))).unwrap()),
                "postgres" => {
                    let name = match postgres_support::block_on_thread(postgres_support::create_database()) {
                        Ok(name) => name,
                        Err(reason) => {
                            postgres_support::skip(&reason);
                            continue;
                        }
                    };
                    let saver = rt
                        .block_on(
                            PostgresSaver::builder()
                                .url(postgres_support::url_of(&name))
                                .max_connections(w)
                                .open(),
                        )
                        .unwrap();
                    db = Some(name);
                    Arc::new(saver)
                }
                other => panic!("unknown saver {other} (sqlite, postgres)"),
            };
            let secs = rt.block_on(run(saver.clone(), w, steps));
            let puts = w * steps;
            println!(
                "{}",
                serde_json::json!({"bench": "concurrency", "impl": "rust", "saver": kind, "writers": w,
                    "steps": steps, "puts": puts, "seconds": (secs * 1e4).round() / 1e4,
                    "puts_per_sec": (puts as f64 / secs).round()})
            );
            drop(saver);
            if let Some(name) = db {
                postgres_support::block_on_thread(async move { postgres_support::drop_database(&name).await });
            }
        }
    }
}
