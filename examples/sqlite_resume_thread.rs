//! A thread survives a process crash and resumes from its last checkpoint.
//!
//! The "graph" counts to 3, one super-step per increment: each step's task
//! writes the new count (a pending write), then the runner saves the next
//! checkpoint. The example starts a second copy of itself that runs the graph
//! and dies abruptly (`process::exit`, no cleanup) right after a task's write
//! was saved and before the next checkpoint. This process then opens the same
//! SQLite file, finds the thread's latest checkpoint and the write the dead
//! process left, applies that write instead of running the task again, and
//! finishes the run.
//!
//! ```sh
//! cargo run --example sqlite_resume_thread --features sqlite-bundled [DB_PATH]
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, CheckpointTuple, ListOptions, Value,
};

const THREAD: &str = "counter-thread";
const GOAL: i64 = 3;
/// Set in the child process: crash after saving this step's write.
const CRASH_AT_STEP: &str = "SQLITE_RESUME_CRASH_AT_STEP";

fn count_of(t: &CheckpointTuple) -> i64 {
    t.checkpoint
        .channel_values
        .get("count")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Saves the checkpoint after `step` with `count`, child of `parent`.
async fn save(
    saver: &SqliteSaver,
    parent: &CheckpointConfig,
    prev: Option<&Checkpoint>,
    step: i64,
    count: i64,
) -> checkpointer::Result<(CheckpointConfig, Checkpoint)> {
    let mut cp = Checkpoint::new(step);
    cp.channel_values.insert("count".into(), Value::from(count));
    let version = saver.get_next_version(prev.and_then(|p| p.channel_versions.get("count")))?;
    cp.channel_versions.insert("count".into(), version.clone());
    cp.updated_channels = Some(vec!["count".into()].into());
    let source = if step < 0 {
        CheckpointSource::Input
    } else {
        CheckpointSource::Loop
    };
    let new_versions = ChannelVersions::from([("count".to_owned(), version)]);
    let config = saver
        .put(parent, &cp, &CheckpointMetadata::new(source, step), &new_versions)
        .await?;
    Ok((config, cp))
}

/// Runs (or resumes) the graph on the thread until the count reaches the goal.
async fn run(saver: &SqliteSaver, crash_at: Option<i64>) -> checkpointer::Result<()> {
    let (mut config, mut checkpoint, mut step) = match saver.latest(THREAD).await? {
        Some(t) => {
            println!(
                "  resuming from checkpoint {} (step {}, count {})",
                t.config.checkpoint_id.as_deref().unwrap_or("?"),
                t.metadata.step().unwrap_or(-1),
                count_of(&t)
            );
            let step = t.metadata.step().unwrap_or(-1);
            // A write saved after the latest checkpoint is a finished task:
            // apply it rather than running the task again.
            if let Some(w) = t.pending_writes.iter().find(|w| w.channel == "count") {
                let count = w.value.as_i64().unwrap_or(0);
                println!("  found the write of the interrupted step: count = {count}; not recomputing it");
                let (c, cp) = save(saver, &t.config, Some(&t.checkpoint), step + 1, count).await?;
                (c, cp, step + 1)
            } else {
                (t.config, t.checkpoint, step)
            }
        }
        None => {
            let (c, cp) = save(saver, &CheckpointConfig::new(THREAD), None, -1, 0).await?;
            println!("  new thread: input checkpoint saved");
            (c, cp, -1)
        }
    };
    loop {
        let count = checkpoint
            .channel_values
            .get("count")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if count >= GOAL {
            return Ok(());
        }
        // the task of this step: increment, saved as a pending write
        let next = count + 1;
        saver
            .put_writes(
                &config,
                &[("count".into(), Value::from(next))],
                "increment",
                "~__pregel_pull, increment",
            )
            .await?;
        println!("  step {}: task wrote count = {next}", step + 1);
        if crash_at == Some(step + 1) {
            println!("  crashing before the checkpoint of step {} is saved", step + 1);
            std::process::exit(3);
        }
        let (c, cp) = save(saver, &config, Some(&checkpoint), step + 1, next).await?;
        (config, checkpoint, step) = (c, cp, step + 1);
    }
}

fn db_path() -> (Option<tempfile_dir::Dir>, PathBuf) {
    match std::env::args().nth(1) {
        Some(p) => (None, PathBuf::from(p)),
        None => {
            let dir = tempfile_dir::Dir::new();
            let path = dir.path().join("resume.sqlite");
            (Some(dir), path)
        }
    }
}

/// A temporary directory removed on drop (std only, to keep the example's
/// dependencies to the crate itself).
mod tempfile_dir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let path = std::env::temp_dir().join(format!("checkpointer-resume-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&path).expect("a temporary directory");
            Dir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn crash_in_child(db: &Path) {
    let exe = std::env::current_exe().expect("the example's own path");
    let status = Command::new(exe)
        .arg(db)
        .env(CRASH_AT_STEP, "1")
        .status()
        .expect("start the child process");
    println!("child process exited with {status} (a crash)\n");
}

#[tokio::main]
async fn main() -> checkpointer::Result<()> {
    if let Ok(step) = std::env::var(CRASH_AT_STEP) {
        // the child: run until the crash
        let db = PathBuf::from(std::env::args().nth(1).expect("db path"));
        println!("child process {}: running the graph", std::process::id());
        let saver = SqliteSaver::open(&db).await?;
        return run(&saver, step.parse().ok()).await;
    }

    let (_dir, db) = db_path();
    println!("database: {}\n", db.display());
    crash_in_child(&db);

    println!("process {}: reopening the file", std::process::id());
    let saver = SqliteSaver::open(&db).await?;
    run(&saver, None).await?;

    println!("\nhistory of {THREAD}, newest first:");
    let history = saver
        .list_vec(Some(CheckpointConfig::new(THREAD)), ListOptions::default())
        .await?;
    for t in &history {
        println!(
            "  step {:>2}  count {}  {}",
            t.metadata.step().unwrap_or(0),
            count_of(t),
            t.config.checkpoint_id.as_deref().unwrap_or("")
        );
    }
    let latest = &history[0];
    assert_eq!(count_of(latest), GOAL, "the run finished");
    assert_eq!(
        history.len() as i64,
        GOAL + 1,
        "input + one checkpoint per step, none twice"
    );
    saver.close().await?;
    Ok(())
}
