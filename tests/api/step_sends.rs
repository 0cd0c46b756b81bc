//! `Send` (push) tasks and join barriers in the step calls, on every backend: the
//! tasks a step schedules, the rows its close leaves, and the typed errors
//! of a `Send` to an undeclared node and of a bad join write. (Row-for-row
//! equality with Python is `tests/python/runtime_send.rs`.)

use checkpointer::checkpoint::channels::TASKS;
use checkpointer::prelude::*;
use checkpointer::reducer::append;
use checkpointer::serde::py::{Send, Set};
use checkpointer::step::{StepClose, StepError, Topology};
use checkpointer::task::{pull_task_id, push_task_id, TaskPath};
use checkpointer::thread::TaskWrites;

use crate::harness;

use crate::every_saver::Saver;

/// A fresh thread of `saver` (shared servers: a unique id).
fn thread(saver: &Saver, topology: Option<Topology>) -> Thread {
    let id = format!("sends-{}", checkpointer::id::checkpoint_id(0));
    let thread = Thread::new(saver.clone(), id);
    match topology {
        Some(t) => thread.with_topology(t),
        None => thread,
    }
}

fn item(i: i64) -> Value {
    Value::map([("item", Value::from(i))])
}

async fn sends_to_undeclared_nodes_are_typed_errors_that_store_nothing(saver: &Saver) {
    // no graph declared: every send is refused
    let bare = thread(saver, None);
    let step = bare.start(Value::map::<&str>([]), None).await.unwrap();
    let task = &step.to_run()[0];
    let mut ctx = step.context(task).unwrap();
    let err = ctx.send("worker", item(1)).unwrap_err();
    assert_eq!(
        err.as_step(),
        Some(&StepError::UnknownNode {
            node: "worker".into(),
            declared: vec![]
        })
    );

    let declared = thread(saver, Some(Topology::new(["worker"])));
    let step = declared.start(Value::map::<&str>([]), None).await.unwrap();
    let task = &step.to_run()[0];
    let mut ctx = step.context(task).unwrap();
    let err = ctx.send("nobody", item(1)).unwrap_err();
    assert!(err.to_string().contains("\"nobody\""), "{err}");
    assert!(err.to_string().contains("[\"worker\"]"), "{err}");
    // a raw write of a Send to an undeclared node, and one that is no Send
    let raw = vec![(TASKS.to_owned(), Send::new("nobody", item(1)).to_value())];
    let err = step.finish(task, &ctx, raw).await.unwrap_err();
    assert!(matches!(err.as_step(), Some(StepError::UnknownNode { node, .. }) if node == "nobody"));
    let not_a_send = vec![(TASKS.to_owned(), Value::from("worker"))];
    let err = step.finish(task, &ctx, not_a_send).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    let stored = declared.tuple(None).await.unwrap().unwrap();
    assert!(stored.pending_writes.is_empty(), "{:?}", stored.pending_writes);

    // close_step checks the writes it is given too
    let writes = vec![(TASKS.to_owned(), Send::new("nobody", item(1)).to_value())];
    let tasks = [TaskWrites {
        node: START,
        triggers: &task.triggers,
        writes: &writes,
    }];
    let close = StepClose {
        parent: step.parent(),
        step: 0,
        tasks: &tasks,
        reducers: &Reducers::new(),
        resumed: false,
    };
    let err = declared.close_step(close).await.unwrap_err();
    assert!(matches!(err.as_step(), Some(StepError::UnknownNode { .. })), "{err}");
    let latest = declared.tuple(None).await.unwrap().unwrap();
    assert_eq!(
        latest.checkpoint.id,
        step.parent().checkpoint.id,
        "no checkpoint stored"
    );
}

async fn push_tasks_run_on_their_packets_and_apply_in_packet_order(saver: &Saver) {
    let t = thread(saver, Some(Topology::new(["worker", "reduce"])));
    let reducers = Reducers::new().field("results", append::<i64>);
    let step = t
        .start(Value::map([("items", Value::from(vec![1, 2, 3]))]), None)
        .await
        .unwrap();
    let task = &step.to_run()[0];
    let mut ctx = step.context(task).unwrap();
    for i in [1, 2, 3] {
        ctx.send("worker", item(i)).unwrap();
    }
    step.finish(task, &ctx, step.input_writes(&[]).unwrap()).await.unwrap();
    let step = step.close(&reducers).await.unwrap();
    let parent = step.parent().clone();
    let sends: Vec<Value> = (1..=3).map(|i| Send::new("worker", item(i)).to_value()).collect();
    assert_eq!(parent.checkpoint.channel_values[TASKS], Value::from(sends));
    assert!(parent
        .checkpoint
        .updated_channels
        .as_deref()
        .unwrap()
        .contains(&TASKS.to_owned()));

    let tasks = step.tasks().to_vec();
    assert_eq!(tasks.len(), 3);
    for (i, task) in tasks.iter().enumerate() {
        let index = i as u64;
        assert_eq!(task.path, TaskPath::Push { index });
        assert_eq!(task.triggers, ["__pregel_push"]);
        assert_eq!(task.input, Some(item(i as i64 + 1)));
        let id = push_task_id(&parent.checkpoint.id, "", 1, "worker", index).unwrap();
        assert_eq!(task.id, id);
    }
    // finished in reverse order, applied in packet order
    for task in tasks.iter().rev() {
        let ctx = step.context(task).unwrap();
        let i = from_value_ref::<i64>(&task.input.as_ref().unwrap().as_map().unwrap()[0].1).unwrap();
        let writes = vec![
            ("results".to_owned(), Value::from(vec![i * 10])),
            ("branch:to:reduce".to_owned(), Value::Nil),
        ];
        step.finish(task, &ctx, writes).await.unwrap();
    }
    let step = step.close(&reducers).await.unwrap();
    let cp = &step.parent().checkpoint;
    assert_eq!(cp.channel_values["results"], Value::from(vec![10, 20, 30]));
    // the handed-out sends empty: a new version, not listed
    assert_eq!(cp.channel_values[TASKS], Value::from(Vec::<Value>::new()));
    assert!(cp.channel_versions[TASKS] > parent.checkpoint.channel_versions[TASKS]);
    assert_eq!(cp.updated_channels.as_deref().unwrap(), ["branch:to:reduce", "results"]);
    assert!(cp.versions_seen["worker"].is_empty(), "push tasks record no trigger");
    assert_eq!(step.tasks().len(), 1);
    assert_eq!(step.tasks()[0].name, "reduce");

    // the step after leaves the empty list alone
    let task = &step.tasks()[0];
    let ctx = step.context(task).unwrap();
    step.finish(task, &ctx, vec![("total".to_owned(), Value::from(60))])
        .await
        .unwrap();
    let version = cp.channel_versions[TASKS].clone();
    let step = step.close(&reducers).await.unwrap();
    assert_eq!(step.parent().checkpoint.channel_versions[TASKS], version);
    assert!(step.tasks().is_empty());
}

fn barrier(names: &[&str]) -> Value {
    Set(names.iter().map(|n| (*n).to_owned()).collect()).to_value().unwrap()
}

async fn a_join_barrier_fills_fires_and_empties(saver: &Saver) {
    let topology = Topology::new(["a", "b", "c"]).join(&["a", "b"], "c").unwrap();
    let t = thread(saver, Some(topology.clone()));
    let reducers = Reducers::new().field("log", append::<String>);
    let join = "join:a+b:c";
    let mut step = t
        .start(Value::map([("log", Value::from(vec!["in"]))]), None)
        .await
        .unwrap();
    let mut seen = Vec::new();
    while !step.tasks().is_empty() {
        let tasks = step.to_run();
        assert_eq!(tasks.len(), 1);
        let task = &tasks[0];
        let ctx = step.context(task).unwrap();
        let mut writes = vec![("log".to_owned(), Value::from(vec![task.name.clone()]))];
        match task.name.as_str() {
            START => writes = step.input_writes(&["a"]).unwrap(),
            "a" => writes.push(("branch:to:b".to_owned(), Value::Nil)),
            _ => {}
        }
        step.finish(task, &ctx, writes).await.unwrap();
        if task.name == "c" {
            // c's id hashes both its triggers, the idle branch:to:c too
            assert_eq!(task.triggers, ["branch:to:c", join]);
            let (parent, _) = (step.parent(), ());
            let id = pull_task_id(&parent.checkpoint.id, "", step.number(), "c", &["branch:to:c", join]).unwrap();
            assert_eq!(task.id, id);
            // and reading the checkpoint without the topology finds the same
            assert_eq!(parent.next_tasks().unwrap()[0].id, id);
        }
        step = step.close(&reducers).await.unwrap();
        let cp = &step.parent().checkpoint;
        let listed = cp.updated_channels.as_deref().unwrap().contains(&join.to_owned());
        seen.push((task.name.clone(), cp.channel_values.get(join).cloned(), listed));
    }
    assert_eq!(
        seen,
        [
            (START.to_owned(), None, false),
            ("a".to_owned(), Some(barrier(&["a"])), false),
            ("b".to_owned(), Some(barrier(&["a", "b"])), true),
            ("c".to_owned(), Some(barrier(&[])), false),
        ]
    );
    // the join write was added by finish, after the task's own writes
    let history = t.history::<Value>(ListOptions::default()).await.unwrap();
    let a_step = history.iter().find(|s| s.step() == 0).unwrap();
    let a_writes = t
        .tuple(a_step.config.checkpoint_id())
        .await
        .unwrap()
        .unwrap()
        .pending_writes;
    let channels: Vec<&str> = a_writes.iter().map(|w| w.channel.as_str()).collect();
    assert_eq!(channels, ["log", "branch:to:b", join]);

    // a join write naming a node that is not a source fails the close
    let t = thread(saver, Some(topology));
    let step = t.start(Value::map::<&str>([]), None).await.unwrap();
    let task = &step.to_run()[0];
    let ctx = step.context(task).unwrap();
    let writes = vec![(join.to_owned(), Value::from("z"))];
    step.finish(task, &ctx, writes).await.unwrap();
    let id = step.parent().checkpoint.id.clone();
    let err = step.close(&reducers).await.unwrap_err();
    assert!(
        matches!(err.as_step(), Some(StepError::Reducer { channel, .. }) if channel == join),
        "{err}"
    );
    assert_eq!(
        t.tuple(None).await.unwrap().unwrap().checkpoint.id,
        id,
        "nothing stored"
    );
}

/// The three walks on one saver.
async fn on(saver: Saver) {
    sends_to_undeclared_nodes_are_typed_errors_that_store_nothing(&saver).await;
    push_tasks_run_on_their_packets_and_apply_in_packet_order(&saver).await;
    a_join_barrier_fills_fires_and_empties(&saver).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    crate::every_saver::trials("step_sends::", 1, on)
}
