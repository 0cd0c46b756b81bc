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
    saver: Arc<dyn CheckpointSaver>,
    /// When set, the runner "crashes" after the node's writes are saved and
    /// before the next checkpoint is.
    crash_after_node: bool,
}

impl Runner {
    /// The checkpoint of `step`, built from the previous one (or from
    /// nothing): a new id and timestamp, everything else shared until changed.
    fn next(prev: Option<&Checkpoint>, step: i64) -> StepCheckpoint {
        prev.map_or_else(|| StepCheckpoint::first(step), |p| p.successor(step))
    }

    /// Saves a step's checkpoint as the child of `parent`, with the versions
    /// the step bumped.
    async fn save(
        &self,
        parent: &CheckpointConfig,
        step: StepCheckpoint,
        source: CheckpointSource,
        n: i64,
    ) -> checkpointer::Result<(CheckpointConfig, Checkpoint)> {
        let metadata = CheckpointMetadata::new(source, n);
        let config = self
            .saver
            .put(parent, &step.checkpoint, &metadata, &step.new_versions)
            .await?;
        Ok((config, step.checkpoint))
    }

    /// One `invoke(input)` on a thread: resumes from the latest checkpoint and
    /// from any writes saved after it.
    async fn invoke(&self, thread: &str, name: Option<&str>) -> checkpointer::Result<()> {
        // Versions come from the saver, as LangGraph's runtime takes them.
        let bump = |v: Option<&ChannelVersion>| self.saver.get_next_version(v);
        let latest = self.saver.latest(thread).await?;
        let (mut config, mut prev, mut step) = match &latest {
            Some(t) => (
                t.config.clone(),
                Some(t.checkpoint.clone()),
                t.metadata.step().unwrap_or(-1),
            ),
            None => (CheckpointConfig::new(thread), None, -2),
        };

        // Crash recovery: the latest checkpoint has the node's writes but no
        // successor, so apply them instead of running the node again.
        if let Some(t) = latest
            .as_ref()
            .filter(|t| t.pending_writes.iter().any(|w| w.channel == "address"))
        {
            println!("  resuming: {NODE}'s writes were saved before the crash; the node is skipped");
            let mut next = t.checkpoint.successor(step + 1);
            next.checkpoint
                .versions_seen
                .insert(NODE.to_owned(), t.checkpoint.channel_versions.clone());
            next.bump(BRANCH, bump);
            for w in &t.pending_writes {
                next.write(&w.channel, w.value.clone(), bump);
            }
            self.save(&t.config, next, CheckpointSource::Loop, step + 1).await?;
            return Ok(());
        }
        let Some(name) = name else { return Ok(()) };

        // 1. The input checkpoint: the input waits in the `__start__` channel.
        step += 1;
        let mut cp = Self::next(prev.as_ref(), step);
        cp.checkpoint.versions_seen.entry("__input__".to_owned()).or_default();
        cp.write(START, Value::map([("name", Value::from(name))]), bump);
        let (cfg, saved) = self.save(&config, cp, CheckpointSource::Input, step).await?;
        // The `__start__` task writes the state and triggers the node.
        let writes = [("name".to_owned(), Value::from(name)), (BRANCH.to_owned(), Value::Nil)];
        let start_task = format!("start-{}", &saved.id[..8]);
        self.saver
            .put_writes(&cfg, &writes, &start_task, "~__pregel_pull, __start__")
            .await?;
        (config, prev) = (cfg, Some(saved));

        // 2. Loop step: writes applied, the node is due.
        step += 1;
        let mut cp = Self::next(prev.as_ref(), step);
        cp.bump(START, bump)
            .write("name", name, bump)
            .write(BRANCH, Value::Nil, bump);
        let (cfg, saved) = self.save(&config, cp, CheckpointSource::Loop, step).await?;
        let address = get_address(name);
        let node_task = format!("node-{}", &saved.id[..8]);
        self.saver
            .put_writes(
                &cfg,
                &[("address".to_owned(), address.clone())],
                &node_task,
                "~__pregel_pull, get_address",
            )
            .await?;
        if self.crash_after_node {
            println!("  !! simulated crash after {NODE} saved its writes");
            return Ok(());
        }
        (config, prev) = (cfg, Some(saved));

        // 3. Loop step: the node's write applied; nothing is due: END.
        step += 1;
        let mut cp = Self::next(prev.as_ref(), step);
        let seen = cp.checkpoint.channel_versions.clone();
        cp.checkpoint.versions_seen.insert(NODE.to_owned(), seen);
        // The trigger was consumed: its version moves on with no value.
        cp.bump(BRANCH, bump).write("address", address, bump);
        self.save(&config, cp, CheckpointSource::Loop, step).await?;
        Ok(())
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
        saver: saver.clone(),
        crash_after_node: false,
    };
    let thread = "12345";

    println!("1. invoke({{name: Alice}}) on thread {thread}: one checkpoint per super-step");
    runner.invoke(thread, Some("Alice")).await?;
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
    runner.invoke(thread, Some("Bob")).await?;
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
    let mut forked = old.checkpoint.clone();
    forked.id = checkpointer::id::checkpoint_id(old.metadata.step().unwrap_or(0) + 1);
    forked.ts = checkpointer::id::now_iso();
    forked.channel_values.insert("name".to_owned(), Value::from("Carol"));
    let mut new_versions = ChannelVersions::new();
    let v = saver.get_next_version(old.checkpoint.channel_versions.get("name"));
    forked.channel_versions.insert("name".to_owned(), v.clone());
    new_versions.insert("name".to_owned(), v);
    let meta = CheckpointMetadata::new(CheckpointSource::Update, old.metadata.step().unwrap_or(0) + 1);
    saver.put(&old.config, &forked, &meta, &new_versions).await?;
    let latest = saver.latest(thread).await?.expect("thread exists");
    show(&latest);
    println!("  its parent is the old step-0 checkpoint; the original branch is still in history.");

    println!("\n5. Crash and resume on a new thread");
    let crashing = Runner {
        saver: saver.clone(),
        crash_after_node: true,
    };
    let before = NODE_CALLS.load(Ordering::SeqCst);
    crashing.invoke("crash-demo", Some("Dora")).await?;
    runner.invoke("crash-demo", None).await?;
    let done = saver.latest("crash-demo").await?.expect("thread exists");
    show(&done);
    println!(
        "  {NODE} ran {} time(s) for this thread: its saved writes were reused.",
        NODE_CALLS.load(Ordering::SeqCst) - before
    );
    Ok(())
}
