//! Quickstart: what a graph runtime stores in a checkpoint saver, run by hand.
//!
//! The graph is LangGraph's smallest story: `START → get_address → END` over a
//! state `{name, address}`. A tiny runner below plays the part of the graph
//! runtime: it saves a checkpoint per super-step and each task's writes in
//! between, exactly as LangGraph does, so you can see what a saver holds and
//! how history, forks and crash recovery fall out of it.
//!
//! Run it with `cargo run --example quickstart`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::thread::{apply_writes, next_tasks, StateUpdate, TaskWrites};

/// The graph's state: one channel per field.
#[derive(serde::Deserialize, Default)]
struct State {
    #[serde(default)]
    name: String,
}

const NODE: &str = "get_address";
const BRANCH: &str = "branch:to:get_address";

/// How often the (pretend) expensive node really ran.
static NODE_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The node: looks up an address for a name.
fn get_address(name: &str) -> Value {
    NODE_CALLS.fetch_add(1, Ordering::SeqCst);
    Value::from(format!("123 Main St, home of {name}"))
}

/// A minimal graph runtime over any saver.
struct Runner {
    /// When set, the runner "crashes" after the node's writes are saved and
    /// before the next checkpoint is.
    crash_after_node: bool,
}

fn meta(source: CheckpointSource, step: i64) -> CheckpointMetadata {
    CheckpointMetadata::new(source, step)
}

impl Runner {
    /// One `invoke(input)` on a thread: resumes from the latest checkpoint and
    /// from any writes saved after it.
    async fn invoke(&self, thread: &Thread, name: Option<&str>) -> checkpointer::Result<()> {
        let saver = thread.saver();
        let mut latest = thread.tuple(None).await?;
        if let Some(name) = name {
            // The input checkpoint: the input waits in the `__start__` channel.
            let input = Value::map([("name", Value::from(name))]);
            latest = Some(thread.put_input(latest.as_ref(), input, None).await?);
        }
        let Some(mut latest) = latest else { return Ok(()) };
        loop {
            // The tasks due, with Python's task ids and the writes saved under them.
            let tasks = next_tasks(&latest.checkpoint, "", &latest.metadata, &latest.pending_writes)?;
            if tasks.is_empty() {
                return Ok(()); // END
            }
            let mut done = Vec::new();
            for task in tasks {
                if task.is_done() {
                    // Crash recovery: the writes were saved before the crash.
                    println!(
                        "  resuming: {}'s writes were saved before the crash; the node is skipped",
                        task.name
                    );
                    done.push((
                        task.writes
                            .iter()
                            .map(|w| (w.channel.clone(), w.value.clone()))
                            .collect(),
                        task,
                    ));
                    continue;
                }
                let state: State = checkpointer::state::from_channels(&latest.checkpoint.channel_values)?;
                let writes = match task.name.as_str() {
                    // the `__start__` task writes the input's fields and triggers the node
                    START => vec![
                        ("name".to_owned(), Value::from(name.unwrap_or(&state.name))),
                        (BRANCH.to_owned(), Value::Nil),
                    ],
                    _ => vec![("address".to_owned(), get_address(&state.name))],
                };
                saver
                    .put_writes(&latest.config, &writes, &task.id, &task.path.to_string())
                    .await?;
                if self.crash_after_node && task.name == NODE {
                    println!("  !! simulated crash after {NODE} saved its writes");
                    return Ok(());
                }
                done.push((writes, task));
            }
            // The next checkpoint: triggers consumed, writes applied, one version.
            let n = latest.metadata.step().unwrap_or(-1) + 1;
            let v = saver.get_next_version(latest.checkpoint.max_version())?;
            let tasks: Vec<TaskWrites> = done
                .iter()
                .map(|(w, t)| TaskWrites {
                    node: &t.name,
                    triggers: &t.triggers,
                    writes: w,
                })
                .collect();
            let step = apply_writes(&latest.checkpoint, n, &tasks, &v, None)?;
            latest = saver
                .put_step(&latest.config, &step, &meta(CheckpointSource::Loop, n))
                .await?;
        }
    }
}

/// The last characters of an id: enough to tell checkpoints apart here
/// (uuid6 ids of one process share their time prefix).
fn short(id: &str) -> &str {
    &id[id.len().saturating_sub(6)..]
}

fn show(t: &CheckpointTuple) {
    let values: Vec<String> = t
        .checkpoint
        .channel_values
        .iter()
        .map(|(k, v)| format!("{k}={}", serde_json::to_string(v).unwrap_or_default()))
        .collect();
    println!(
        "  …{} step {:>2} {:<6} parent {} | {} | {} pending write(s)",
        short(&t.checkpoint.id),
        t.metadata.step().unwrap_or_default(),
        t.metadata.source().map_or("-", |s| s.as_str()),
        t.parent_config
            .as_ref()
            .and_then(|p| p.checkpoint_id.as_deref())
            .map_or("none".to_owned(), |id| format!("…{}", short(id))),
        values.join(", "),
        t.pending_writes.len(),
    );
}

#[tokio::main]
async fn main() -> checkpointer::Result<()> {
    let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
    let runner = Runner {
        crash_after_node: false,
    };
    let thread = "12345";
    let t = Thread::new(saver.clone(), thread);

    println!("1. invoke({{name: Alice}}) on thread {thread}: one checkpoint per super-step");
    runner.invoke(&t, Some("Alice")).await?;
    let history = saver
        .list_vec(Some(CheckpointConfig::new(thread)), ListOptions::default())
        .await?;
    history.iter().for_each(show);
    println!(
        "   {} checkpoints, newest first. Pending writes are what each step's tasks wrote",
        history.len()
    );
    println!("   before the next checkpoint existed: they make a crashed step resumable.");

    println!("\n2. A second turn on the same thread continues from the latest checkpoint");
    runner.invoke(&t, Some("Bob")).await?;
    let latest = saver.latest(thread).await?.expect("thread exists");
    show(&latest);

    println!("\n3. History: list with a filter and a limit (time travel)");
    let inputs = saver
        .list_vec(
            Some(CheckpointConfig::new(thread)),
            ListOptions::default().filter("source", "input"),
        )
        .await?;
    println!("  {} input checkpoints; the last two checkpoints:", inputs.len());
    saver
        .list_vec(Some(CheckpointConfig::new(thread)), ListOptions::default().limit(2))
        .await?
        .iter()
        .for_each(show);

    println!("\n4. Fork: update the state at an older checkpoint; the branch becomes the latest");
    let old = &history[1]; // the step-0 checkpoint of the first turn
    let update = StateUpdate {
        writes: vec![("name".to_owned(), Value::from("Carol"))],
        as_node: NODE,
        reducer: None,
    };
    t.update_state_with(old.config.checkpoint_id(), update).await?;
    let latest = saver.latest(thread).await?.expect("thread exists");
    show(&latest);
    println!("  its parent is the old step-0 checkpoint; the original branch is still in history.");

    println!("\n5. Crash and resume on a new thread");
    let crashing = Runner { crash_after_node: true };
    let before = NODE_CALLS.load(Ordering::SeqCst);
    let demo = Thread::new(saver.clone(), "crash-demo");
    crashing.invoke(&demo, Some("Dora")).await?;
    runner.invoke(&demo, None).await?;
    let done = saver.latest("crash-demo").await?.expect("thread exists");
    show(&done);
    println!(
        "  {NODE} ran {} time(s) for this thread: its saved writes were reused.",
        NODE_CALLS.load(Ordering::SeqCst) - before
    );
    Ok(())
}
