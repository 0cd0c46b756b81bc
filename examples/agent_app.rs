//! An agent app as a newcomer writes it on the step calls (from the README,
//! the rustdoc and docs/runtime.md): typed state with an append reducer and
//! a counter; plan → act → review, with a conditional edge back to plan; a
//! human interrupt and its resume; a crash in the middle of a step and the
//! rerun that reuses the writes saved before it; history and a fork.
//!
//! `cargo run --example agent_app --features sqlite-bundled` runs it on a
//! SQLite file. The store is the one line that names its URL (`url` in
//! `main`): `DATABASE_URL=postgresql://… cargo run --example agent_app
//! --features sqlite-bundled,postgres` runs the same app on PostgreSQL.
//! Lines marked `// glue` are the protocol glue docs/runtime.md counts.

use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::reducer::append;
use checkpointer::state;
use checkpointer::step::{goto, Stop};
use serde::{Deserialize, Serialize};

/// The state: one channel per field.
#[derive(Serialize, Deserialize, Default, Debug, Clone, PartialEq)]
pub struct State {
    /// What happened, appended to by every node.
    #[serde(default)]
    pub log: Vec<String>,
    /// Actions taken: each `act` adds one.
    #[serde(default)]
    pub count: i64,
    /// The current plan (the last one written).
    #[serde(default)]
    pub plan: String,
    /// The reviewer's last answer.
    #[serde(default)]
    pub verdict: String,
}

/// What a node returns: the fields it writes (the others are left alone).
#[derive(Serialize, Default)]
pub struct Update {
    #[serde(skip_serializing_if = "Option::is_none")]
    log: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<String>,
}

impl Update {
    /// An update that only logs `line`.
    fn log(line: impl Into<String>) -> Update {
        Update {
            log: Some(vec![line.into()]),
            ..Update::default()
        }
    }
}

/// `log` appends, `count` adds, the others keep the last value written.
pub fn reducers() -> Reducers {
    Reducers::new()
        .field("log", append::<String>)
        .field("count", |old: i64, add: i64| Ok(old + add))
}

type NodeResult = std::result::Result<Update, Stop>;

fn plan(s: &State, _: &mut TaskContext) -> NodeResult {
    let plan = format!("draft {}", s.count + 1);
    Ok(Update {
        plan: Some(plan.clone()),
        ..Update::log(format!("plan: {plan}"))
    })
}

fn act(s: &State, _: &mut TaskContext) -> NodeResult {
    Ok(Update {
        count: Some(1),
        ..Update::log(format!("act: {}", s.plan))
    })
}

/// Two drafts without asking; from then on a human approves or sends it back.
fn review(s: &State, ctx: &mut TaskContext) -> NodeResult {
    if s.count < 2 {
        return Ok(Update::log("review: too early"));
    }
    let answer = ctx.interrupt(format!("approve {}?", s.plan))?;
    let verdict = answer.as_str().unwrap_or("").to_owned();
    Ok(Update {
        verdict: Some(verdict.clone()),
        ..Update::log(format!("review: {verdict}"))
    })
}

/// The conditional edge after review: back to plan unless approved.
fn after_review(s: &State) -> Option<&'static str> {
    (s.verdict != "yes").then_some("plan")
}

/// Runs one task of `step`: its node, then its edge, on the state its writes give.
fn run_task(step: &Step, task: &TaskState, ctx: &mut TaskContext) -> std::result::Result<Vec<(String, Value)>, Stop> {
    let state: State = step.state()?;
    let (update, next) = match task.name.as_str() {
        START => return Ok(step.input_writes(&["plan"])?), // glue
        "plan" => (plan(&state, ctx)?, Some("act")),
        "act" => (act(&state, ctx)?, Some("review")),
        "review" => (review(&state, ctx)?, None),
        other => return Err(Error::invalid(format!("no node {other:?}")).into()),
    };
    let mut writes = state::writes(&update)?; // glue
    let next = match next {
        Some(next) => Some(next),
        None => after_review(&step.state_after(&writes, &reducers())?), // glue
    };
    writes.extend(next.map(goto)); // glue
    Ok(writes)
}

/// How a run stopped.
#[derive(Debug, PartialEq)]
pub enum End {
    /// The graph ended with this state.
    Done(State),
    /// A node asks the human this.
    Asked(Value),
    /// The process "died" (`crash_after`) right after a node's writes were saved.
    Crashed,
}

/// Runs super-steps from `step` until the graph ends, a node asks, or
/// `crash_after`'s writes are saved (then everything in memory is dropped,
/// as kill -9 would). `ran` collects the nodes that ran.
pub async fn run(mut step: Step, crash_after: Option<&str>, ran: &mut Vec<String>) -> Result<End> {
    let reducers = reducers();
    loop {
        let mut asked = None; // glue
        for task in step.to_run() {
            ran.push(task.name.clone());
            let mut ctx = step.context(&task)?; // glue
            let outcome = run_task(&step, &task, &mut ctx);
            asked = asked.or(step.record(&task, &ctx, outcome).await?); // glue
            if crash_after == Some(task.name.as_str()) {
                return Ok(End::Crashed);
            }
        }
        if let Some(question) = asked {
            return Ok(End::Asked(question.value)); // glue
        }
        if step.tasks().is_empty() {
            return Ok(End::Done(step.state()?));
        }
        step = step.close(&reducers).await?;
    }
}

/// What the scenario saw, for the test that checks it.
#[derive(Debug, Default)]
pub struct Seen {
    pub questions: Vec<Value>,
    pub approved: State,
    pub crashed_ran: Vec<String>,
    pub recovered_ran: Vec<String>,
    pub recovered: State,
    pub history: Vec<(i64, Vec<String>)>,
    pub forked: State,
}

/// The whole scenario on `saver`, threads named `{prefix}-…`.
pub async fn scenario(saver: Arc<dyn CheckpointSaver>, prefix: &str) -> Result<Seen> {
    let mut seen = Seen::default();
    let input = || to_value(&Update::log("goal: a haiku")); // glue

    // 1. A run: plan → act → review twice, then the reviewer is asked.
    let thread = Thread::new(saver.clone(), format!("{prefix}-main"));
    let mut ran = Vec::new();
    let End::Asked(q) = run(thread.start(input()?, None).await?, None, &mut ran).await? else {
        panic!("no question")
    };
    seen.questions.push(q);

    // 2. The human sends it back once, then approves.
    let End::Asked(q) = run(thread.resume(Resume::Value("again".into())).await?, None, &mut ran).await? else {
        panic!("no question")
    };
    seen.questions.push(q);
    let End::Done(done) = run(thread.resume(Resume::Value("yes".into())).await?, None, &mut ran).await? else {
        panic!("not done")
    };
    seen.approved = done;

    // 3. Crash right after `act`'s writes are saved, then run the thread again:
    //    `act` is not run twice, its saved writes are reused.
    let crashing = Thread::new(saver.clone(), format!("{prefix}-crash"));
    let start = crashing.start(input()?, None).await?;
    assert_eq!(run(start, Some("act"), &mut seen.crashed_ran).await?, End::Crashed);
    let again = crashing.step().await?.expect("the crashed step is stored");
    let End::Asked(_) = run(again, None, &mut seen.recovered_ran).await? else {
        panic!("no question")
    };
    seen.recovered = crashing.state().await?.expect("a state").values;

    // 4. History, newest first; fork the checkpoint that first asked the
    //    reviewer and answer "yes" there at once.
    let history: Vec<StateSnapshot<State>> = thread.history(ListOptions::default()).await?;
    seen.history = history.iter().map(|s| (s.step(), s.next.clone())).collect();
    let asked = history
        .iter()
        .rev()
        .find(|s| s.next == ["review"] && s.values.count == 2)
        .expect("the first question");
    thread.fork(asked.config.checkpoint_id().expect("an id")).await?; // glue
    let step = thread.step().await?.expect("the fork");
    let End::Asked(_) = run(step, None, &mut ran).await? else {
        panic!("the fork asks anew")
    };
    let End::Done(forked) = run(thread.resume(Resume::Value("yes".into())).await?, None, &mut ran).await? else {
        panic!("not done")
    };
    seen.forked = forked;
    Ok(seen)
}

#[allow(dead_code)] // the tests include this file for `scenario`
#[tokio::main]
async fn main() -> Result<()> {
    let file = std::env::temp_dir().join(format!("agent_app-{}.sqlite", std::process::id()));
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| format!("sqlite://{}", file.display()));
    let saver = checkpointer::open(&url).await?;
    let seen = scenario(saver, &format!("app-{}", std::process::id())).await?;
    println!("asked: {:?}", seen.questions);
    println!(
        "approved after {} actions: {:?}",
        seen.approved.count, seen.approved.log
    );
    println!(
        "crashed after {:?}; the rerun ran {:?}",
        seen.crashed_ran, seen.recovered_ran
    );
    for (step, next) in &seen.history {
        println!("  step {step:>2}, next {next:?}");
    }
    println!("the fork approved at once: {:?}", seen.forked.log);
    let _ = std::fs::remove_file(&file);
    Ok(())
}
