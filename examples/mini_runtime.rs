//! A small graph runtime on the kit, on a SQLite file: typed state with a
//! message list, two nodes and a subgraph, a conditional edge, an interrupt
//! and its resume, crash recovery from pending writes, history and time
//! travel. Python LangGraph reads and continues its threads
//! (`tests/python/mini_runtime.rs` checks both directions).
//!
//! Run it with `cargo run --example mini_runtime --features sqlite-bundled`
//! (optionally `-- path/to/file.sqlite` to keep the database).

#[path = "mini_runtime/graph.rs"]
mod graph;
#[path = "mini_runtime/runtime.rs"]
mod runtime;
#[path = "mini_runtime/send_graphs.rs"]
mod send_graphs;

use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::sqlite::SqliteSaver;
use graph::State;
use runtime::{End, Options};

fn last(state: &State) -> &str {
    state.messages.last().map_or("", |m| m.content.as_str())
}

#[tokio::main]
async fn main() -> checkpointer::Result<()> {
    let keep = std::env::args().nth(1);
    let path = keep.clone().map_or_else(
        || std::env::temp_dir().join(format!("mini_runtime-{}.sqlite", std::process::id())),
        std::path::PathBuf::from,
    );
    let saver: Arc<dyn CheckpointSaver> = Arc::new(SqliteSaver::open(&path).await?);
    let g = graph::graph();
    let (opts, root) = (Options::default(), Value::map::<&str>([]));

    // 1. A turn that calls the tool subgraph, answers, and stops for review.
    let t1 = Thread::new(saver.clone(), "t1");
    let input = graph::user_input(0, "what is the weather?")?;
    let run = g.invoke(&t1, Some(input), None, root.clone(), &opts).await?;
    let End::Interrupted(asks) = &run.end else {
        panic!("expected the review interrupt")
    };
    println!("t1 ran {:?}, then stopped: {:?}", run.ran, asks[0].value);

    // 2. Resume with the reviewer's answer.
    let run = g
        .invoke(&t1, None, Some(Value::from("yes")), root.clone(), &opts)
        .await?;
    let End::Done(done) = &run.end else {
        panic!("expected the end")
    };
    println!("t1 resumed, ran {:?}: {:?}", run.ran, last(done));

    // 3. History, newest first, and the subgraph's own namespace.
    let history: Vec<StateSnapshot<State>> = t1.history(ListOptions::default()).await?;
    for s in &history {
        println!(
            "  step {:>2} {:<6} next {:?}: {:?}",
            s.step(),
            s.metadata.get("source").and_then(Value::as_str).unwrap_or(""),
            s.next,
            last(&s.values)
        );
    }
    let in_tools = saver
        .list_vec(
            Some(CheckpointConfig::in_scope("t1", NsScope::All)),
            ListOptions::default(),
        )
        .await?;
    println!(
        "  {} checkpoints in all namespaces, {} in the root",
        in_tools.len(),
        history.len()
    );

    // 4. Time travel: fork the checkpoint that waited for review and answer "no" there.
    let waiting = history
        .iter()
        .find(|s| s.next == ["review"])
        .expect("the review checkpoint");
    t1.fork(waiting.config.checkpoint_id().unwrap()).await?;
    g.invoke(&t1, None, None, root.clone(), &opts).await?; // the copy's review asks anew
    let run = g
        .invoke(&t1, None, Some(Value::from("no")), root.clone(), &opts)
        .await?;
    let End::Done(forked) = run.end else {
        panic!("expected the end")
    };
    let first: StateSnapshot<State> = t1.state_at(history[0].config.checkpoint_id().unwrap()).await?.unwrap();
    println!(
        "fork answered no: {:?}; the first branch still says {:?}",
        last(&forked),
        last(&first.values)
    );
    // The history lists both branches; the live branch follows parent links only.
    let all: Vec<StateSnapshot<State>> = t1.history(ListOptions::default()).await?;
    let live: Vec<StateSnapshot<State>> = t1.branch(None, 100).await?;
    println!(
        "  {} checkpoints in the history, {} on the live branch",
        all.len(),
        live.len()
    );

    // 5. Crash recovery: the process dies after `agent`'s writes are saved;
    //    the next run reuses them instead of running `agent` again.
    let t2 = Thread::new(saver.clone(), "t2");
    let crash = Options {
        crash_after: Some("agent"),
    };
    let err = g
        .invoke(&t2, Some(graph::user_input(0, "hello")?), None, root.clone(), &crash)
        .await
        .unwrap_err();
    println!("t2 crashed: {err}");
    let run = g.invoke(&t2, None, None, root, &opts).await?;
    let End::Done(done) = run.end else {
        panic!("expected the end")
    };
    println!(
        "t2 recovered, ran {:?} (agent's writes reused): {:?}",
        run.ran,
        last(&done)
    );

    // 6. A manual update, as if `agent` had answered: its edge routes to review.
    let answer = graph::Message {
        id: "ai-2".into(),
        role: "ai".into(),
        content: "answer: rainy".into(),
    };
    g.update_state(
        &t2,
        checkpointer::state::writes(&State { messages: vec![answer] })?,
        "agent",
    )
    .await?;
    let now: StateSnapshot<State> = t2.state().await?.expect("updated");
    println!("t2 updated as agent: {:?}, next {:?}", last(&now.values), now.next);

    // 7. `Send` fan-out (one worker per item, results appended in packet order), and a
    //    join (`c` runs once both `a` and `b` have): graphs declared on their threads.
    let (map_reduce, topology) = send_graphs::map_reduce();
    let t3 = Thread::new(saver.clone(), "t3").with_topology(topology);
    let input = send_graphs::items_input(&[1, 2, 3]);
    let run = map_reduce
        .invoke(&t3, Some(input), None, Value::map::<&str>([]), &opts)
        .await?;
    let End::Done(done) = run.end else {
        panic!("expected the end")
    };
    println!("t3 ran {:?}: {:?}, total {:?}", run.ran, done.results, done.total);
    let (join, topology) = send_graphs::join()?;
    let t4 = Thread::new(saver.clone(), "t4").with_topology(topology);
    let input = checkpointer::state::to_channels(&send_graphs::Log { log: vec!["in".into()] })?;
    let run = join
        .invoke(&t4, Some(input), None, Value::map::<&str>([]), &opts)
        .await?;
    let End::Done(done) = run.end else {
        panic!("expected the end")
    };
    println!("t4 ran {:?}: {:?}", run.ran, done.log);

    if keep.is_none() {
        drop(saver);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    Ok(())
}
