//! An interrupt raised two subgraphs deep, answered from the root by its id
//! (`Thread::resume(Resume::ById)`), on memory, a SQLite file, PostgreSQL
//! and Redis: the answer lands under the raising task in the innermost
//! namespace and nowhere else, the task reads it back, and bad answers are
//! typed errors that store nothing.

use std::sync::Arc;

use checkpointer::checkpoint::channels::RESUME;
use checkpointer::prelude::*;
use checkpointer::serde::py::Interrupt;
use checkpointer::step::{Resume, StepError};

fn uid(prefix: &str) -> String {
    format!("{prefix}-{}", checkpointer::id::checkpoint_id(0))
}

/// Runs the `__start__` task of `step` (edges to `entry`) and closes it.
async fn through_start(step: Step, entry: &str) -> Step {
    let task = step.tasks()[0].clone();
    assert_eq!(task.name, START);
    let ctx = step.context(&task).unwrap();
    step.finish(&task, &ctx, step.input_writes(&[entry]).unwrap())
        .await
        .unwrap();
    step.close(&Reducers::new()).await.unwrap()
}

fn input() -> Value {
    Value::map([("n", Value::from(1))])
}

/// Every `__resume__` write of a namespace's latest checkpoint.
async fn resumes(thread: &Thread) -> Vec<(String, Value)> {
    let latest = thread.tuple(None).await.unwrap().unwrap();
    latest
        .pending_writes
        .iter()
        .filter(|w| w.channel == RESUME)
        .map(|w| (w.task_id.clone(), w.value.clone()))
        .collect()
}

async fn scenario(saver: Arc<dyn CheckpointSaver>) {
    // root: START → outer (a subgraph: START → inner, a subgraph: START → ask)
    let root = Thread::new(saver.clone(), uid("nested"));
    let top = through_start(root.start(input(), None).await.unwrap(), "outer").await;
    let outer = top.tasks()[0].clone();
    let (mid_thread, parents) = top.subgraph(&outer).unwrap();
    let mid = mid_thread.start(input(), Some(parents)).await.unwrap().within(&top);
    let mid = through_start(mid, "inner").await;
    let inner = mid.tasks()[0].clone();
    let (leaf_thread, parents) = mid.subgraph(&inner).unwrap();
    let leaf = leaf_thread.start(input(), Some(parents)).await.unwrap().within(&mid);
    let leaf = through_start(leaf, "ask").await;
    let ask = leaf.tasks()[0].clone();
    let mut ctx = leaf.context(&ask).unwrap();
    let asked: Interrupt = ctx.interrupt("ok?").unwrap_err();
    // stored under the raising task, and relayed by each enclosing one
    leaf.interrupt(&ask, &ctx, vec![asked.clone()]).await.unwrap();
    mid.interrupt(&inner, &mid.context(&inner).unwrap(), vec![asked.clone()])
        .await
        .unwrap();
    top.interrupt(&outer, &top.context(&outer).unwrap(), vec![asked.clone()])
        .await
        .unwrap();
    let waiting: StateSnapshot<Value> = root.state().await.unwrap().unwrap();
    assert_eq!(
        waiting.interrupts().count(),
        1,
        "the root shows the innermost interrupt"
    );

    // An id nobody raised: typed, nothing stored.
    let unknown = "0123456789abcdef0123456789abcdef";
    let err = root
        .resume(Resume::ById(vec![(unknown.into(), Value::from("x"))]))
        .await
        .unwrap_err();
    assert!(
        matches!(err.as_step(), Some(StepError::UnknownInterrupt { ids, .. }) if ids == &[unknown.to_owned()]),
        "{err:?}"
    );
    for t in [&root, &mid_thread, &leaf_thread] {
        assert!(resumes(t).await.is_empty());
    }

    // The real id: the answer goes two namespaces down, under `ask`.
    let step = root
        .resume(Resume::ById(vec![(asked.id.clone(), Value::from("yes"))]))
        .await
        .unwrap();
    assert!(step.is_resuming());
    assert_eq!(step.to_run().len(), 1, "the root's task runs again");
    assert!(resumes(&root).await.is_empty(), "no answer at the root");
    assert!(resumes(&mid_thread).await.is_empty(), "none in the middle");
    assert_eq!(
        resumes(&leaf_thread).await,
        [(ask.id.clone(), Value::from(vec!["yes"]))],
        "the raising task's answers"
    );
    // The raising task reads it when its step runs again.
    let again = leaf_thread.step().await.unwrap().unwrap().within(&step);
    assert!(again.is_resuming());
    let mut ctx = again.context(&again.tasks()[0]).unwrap();
    assert_eq!(ctx.interrupt("ok?").unwrap(), Value::from("yes"));
    // Answered: the id is no longer pending.
    again
        .finish(&again.tasks()[0], &ctx, vec![("n".into(), Value::from(2))])
        .await
        .unwrap();
    let err = leaf_thread
        .resume(Resume::ById(vec![(asked.id.clone(), Value::from("again"))]))
        .await
        .unwrap_err();
    assert!(
        matches!(err.as_step(), Some(StepError::NoPendingInterrupt { .. })),
        "{err:?}"
    );

    // A task that relays an id while its subgraph's namespace is empty.
    let lone = Thread::new(saver.clone(), uid("lone"));
    let top = through_start(lone.start(input(), None).await.unwrap(), "outer").await;
    let outer = top.tasks()[0].clone();
    let relayed = Interrupt::new("ok?", unknown.to_owned());
    top.interrupt(&outer, &top.context(&outer).unwrap(), vec![relayed])
        .await
        .unwrap();
    let err = lone
        .resume(Resume::ById(vec![(unknown.into(), Value::from("x"))]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert!(err.to_string().contains("stores no checkpoint"), "{err}");
    assert!(resumes(&lone).await.is_empty());

    for t in [root.thread_id(), lone.thread_id()] {
        saver.delete_thread(t).await.unwrap();
    }
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<crate::harness::Trial> {
    crate::every_saver::trials("subgraph_resume::", 0, scenario)
}
