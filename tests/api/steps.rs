//! The step calls (`checkpointer::step`) on memory and a SQLite file: a loop
//! with two interrupts in one task answered by value and by id, the rows
//! they leave, and the typed error of each protocol mistake.

use std::sync::Arc;

use checkpointer::checkpoint::channels::{INTERRUPT, RESUME};
use checkpointer::prelude::*;
use checkpointer::reducer::append;
use checkpointer::serde::py::Interrupt;
use checkpointer::step::{StepClose, StepError};
use checkpointer::task::interrupt_id;
use checkpointer::thread::TaskWrites;

use crate::harness;

fn uid(prefix: &str) -> String {
    format!("{prefix}-{}", checkpointer::id::checkpoint_id(0))
}

fn log(values: &[&str]) -> Value {
    Value::from(values.to_vec())
}

fn reducers() -> Reducers {
    Reducers::new().field("log", append::<String>)
}

/// Runs every task to run: `START` writes the input and triggers `ask`;
/// `ask` asks twice and logs both answers. Returns the interrupts raised.
async fn run(step: &Step) -> Vec<Interrupt> {
    let mut raised = Vec::new();
    for task in step.to_run() {
        let mut ctx = step.context(&task).unwrap();
        let writes = if task.name == START {
            step.input_writes(&["ask"]).unwrap()
        } else {
            let asked = ctx.interrupt("first?").and_then(|a| Ok((a, ctx.interrupt("second?")?)));
            match asked {
                Ok((a, b)) => vec![("log".to_owned(), Value::from(vec![a, b]))],
                Err(i) => {
                    step.interrupt(&task, &ctx, vec![i.clone()]).await.unwrap();
                    raised.push(i);
                    continue;
                }
            }
        };
        step.finish(&task, &ctx, writes).await.unwrap();
    }
    raised
}

async fn two_interrupts_in_one_task(saver: Arc<dyn CheckpointSaver>) {
    let thread = Thread::new(saver.clone(), uid("steps"));
    let step = thread.start(Value::map([("log", log(&["in"]))]), None).await.unwrap();
    assert_eq!((step.number(), step.tasks()[0].name.as_str()), (0, START));
    assert!(run(&step).await.is_empty());
    let step = step.close(&reducers()).await.unwrap();
    assert_eq!(step.number(), 1);
    assert_eq!(step.parent().metadata.step(), Some(0));
    assert_eq!(step.parent().metadata.get("parents"), Some(&Value::map::<&str>([])));
    let ask = step.tasks()[0].clone();
    let ns = format!("ask:{}", ask.id);

    // first run: the first question, with Python's id
    let raised = run(&step).await;
    assert_eq!(raised[0].id, interrupt_id(&ns, 0));
    assert!(step.is_interrupted());
    let err = step.close(&reducers()).await.unwrap_err();
    assert!(matches!(err.as_step(), Some(StepError::Unfinished { .. })), "{err}");

    // answered by value: the task takes it, then asks the second question
    let step = thread.resume(Resume::Value(Value::from("a"))).await.unwrap();
    let raised = run(&step).await;
    assert_eq!(raised[0].id, interrupt_id(&ns, 1));
    let stored = thread.tuple(None).await.unwrap().unwrap();
    let resume: Vec<&PendingWrite> = stored.pending_writes.iter().filter(|w| w.channel == RESUME).collect();
    assert_eq!(resume.len(), 2, "the resume under the null task and the task's answers");
    let own = resume.iter().find(|w| w.task_id == ask.id).unwrap();
    assert_eq!(own.value, log(&["a"]));
    let waiting: StateSnapshot<Value> = thread.state().await.unwrap().unwrap();
    assert!(
        !waiting.tasks[0].is_done(),
        "an answered first interrupt does not finish the task"
    );

    // the old id is answered: unknown now; the pending one is taken
    let old = Resume::ById(vec![(interrupt_id(&ns, 0), Value::from("x"))]);
    let err = thread.resume(old).await.unwrap_err();
    match err.as_step() {
        Some(StepError::UnknownInterrupt { ids, pending }) => {
            assert_eq!(
                (ids, pending),
                (&vec![interrupt_id(&ns, 0)], &vec![interrupt_id(&ns, 1)])
            );
        }
        _ => panic!("{err}"),
    }
    let by_id = Resume::ById(vec![(interrupt_id(&ns, 1), Value::from("b"))]);
    let step = thread.resume(by_id).await.unwrap();
    let stored = &step.tasks()[0].writes;
    assert!(stored
        .iter()
        .any(|w| w.channel == RESUME && w.value == log(&["a", "b"])));
    assert!(run(&step).await.is_empty());
    let step = step.close(&reducers()).await.unwrap();
    let values = &step.parent().checkpoint.channel_values;
    assert_eq!(values["log"], log(&["in", "a", "b"]));
    assert!(step.parent().checkpoint.versions_seen.contains_key(INTERRUPT));
    assert!(step.tasks().is_empty());

    // nothing waits any more
    let err = thread.resume(Resume::Value(Value::from("c"))).await.unwrap_err();
    assert!(
        matches!(err.as_step(), Some(StepError::NoPendingInterrupt { .. })),
        "{err}"
    );
}

async fn protocol_mistakes_are_typed_errors(saver: Arc<dyn CheckpointSaver>) {
    let thread = Thread::new(saver.clone(), uid("mistakes"));
    let other = Thread::new(saver.clone(), uid("other"));
    let step = thread.start(Value::map([("log", log(&["in"]))]), None).await.unwrap();
    let foreign = other.start(Value::map::<&str>([]), None).await.unwrap();

    // a task the step does not schedule
    let stranger = foreign.tasks()[0].clone();
    let ctx = foreign.context(&stranger).unwrap();
    let err = step.finish(&stranger, &ctx, vec![]).await.unwrap_err();
    assert!(matches!(err.as_step(), Some(StepError::Unscheduled { .. })), "{err}");
    assert!(step.context(&stranger).is_err());

    // a step number that does not follow the parent, writes of an unscheduled node
    let (triggers, writes) = (vec![START.to_owned()], vec![("log".to_owned(), log(&["x"]))]);
    let start = [TaskWrites {
        node: START,
        triggers: &triggers,
        writes: &writes,
    }];
    let r = reducers();
    let parent = step.parent().clone();
    let err = thread
        .close_step(StepClose {
            parent: &parent,
            step: 1,
            tasks: &start,
            reducers: &r,
            resumed: false,
        })
        .await
        .unwrap_err();
    match err.as_step() {
        Some(StepError::NotAfterParent { step, expected, .. }) => assert_eq!((*step, *expected), (1, 0)),
        _ => panic!("{err}"),
    }
    let nobody = [TaskWrites {
        node: "nobody",
        triggers: &triggers,
        writes: &writes,
    }];
    let err = thread
        .close_step(StepClose {
            parent: &parent,
            step: 0,
            tasks: &nobody,
            reducers: &r,
            resumed: false,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err.as_step(), Some(StepError::Unscheduled { node, .. }) if node == "nobody"),
        "{err}"
    );

    // a reducer that fails names its channel; nothing is stored
    let before = saver
        .list_vec(Some(thread.config()), ListOptions::default())
        .await
        .unwrap()
        .len();
    let bad = [TaskWrites {
        node: START,
        triggers: &triggers,
        writes: &[("log".to_owned(), Value::from(3))],
    }];
    let err = thread
        .close_step(StepClose {
            parent: &parent,
            step: 0,
            tasks: &bad,
            reducers: &r,
            resumed: false,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err.as_step(), Some(StepError::Reducer { channel, .. }) if channel == "log"),
        "{err}"
    );
    let after = saver
        .list_vec(Some(thread.config()), ListOptions::default())
        .await
        .unwrap()
        .len();
    assert_eq!(before, after);

    // a step opened on another thread's checkpoint
    assert!(Step::open(&thread, foreign.parent().clone()).is_err());

    // two interrupts pending: a resume without an id is ambiguous
    run_two_askers(&thread, step).await;
    let err = thread.resume(Resume::Value(Value::from("?"))).await.unwrap_err();
    match err.as_step() {
        Some(StepError::AmbiguousResume { pending }) => assert_eq!(pending.len(), 2),
        _ => panic!("{err}"),
    }
    let err = thread.resume(Resume::ById(vec![])).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
}

/// Closes the input step with triggers for two nodes, each of which asks.
async fn run_two_askers(thread: &Thread, step: Step) {
    for task in step.to_run() {
        let ctx = step.context(&task).unwrap();
        step.finish(&task, &ctx, step.input_writes(&["p", "q"]).unwrap())
            .await
            .unwrap();
    }
    let step = step.close(&reducers()).await.unwrap();
    assert_eq!(step.tasks().len(), 2);
    for task in step.to_run() {
        let mut ctx = step.context(&task).unwrap();
        let i = ctx.interrupt("?").unwrap_err();
        step.interrupt(&task, &ctx, vec![i]).await.unwrap();
    }
    assert_eq!(thread.state::<Value>().await.unwrap().unwrap().interrupts().count(), 2);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    let memory = || Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>;
    vec![
        harness::tokio("steps::two_interrupts_in_one_task", &[], 1, move || {
            two_interrupts_in_one_task(memory())
        }),
        harness::tokio("steps::protocol_mistakes_are_typed_errors", &[], 1, move || {
            protocol_mistakes_are_typed_errors(memory())
        }),
    ]
}
