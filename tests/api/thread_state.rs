//! The thread handle and the typed state over every backend: the same
//! snapshots, next tasks, histories, updates, forks and typed errors on
//! memory, a SQLite file, PostgreSQL and Redis.

use std::sync::Arc;

use checkpointer::checkpoint::channels::{ERROR, INTERRUPT};
use checkpointer::prelude::*;
use checkpointer::task::pull_task_id;
use checkpointer::thread::{StateUpdate, BRANCH_TO};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct State {
    #[serde(default)]
    messages: Vec<String>,
    #[serde(default)]
    turns: i64,
}

fn uid(prefix: &str) -> String {
    format!("{prefix}-{}", checkpointer::id::checkpoint_id(0))
}

async fn scenario(saver: Arc<dyn CheckpointSaver>) {
    let t = Thread::new(saver.clone(), uid("thread"));
    assert!(t.state::<State>().await.unwrap().is_none());
    assert!(t.history::<State>(ListOptions::default()).await.unwrap().is_empty());

    // The input checkpoint, as a runtime stores it: `__start__` is next.
    let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
    let mut input = StepCheckpoint::first(-1);
    input
        .write(START, Value::map([("messages", Value::from(vec!["hi"]))]), next)
        .unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let first = saver.put_step(&t.config(), &input, &meta).await.unwrap();
    let snap: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(snap.values, State::default(), "`__start__` is not state");
    assert_eq!(snap.next, [START]);
    let task = &snap.tasks[0];
    assert_eq!(
        task.id,
        pull_task_id(&first.checkpoint.id, "", 0, START, &[START]).unwrap()
    );
    assert!(!task.is_done());

    // Its writes, as one type in and out.
    let path = task.path.to_string();
    let writes = [
        PendingWrite::new(&task.id, "messages", Value::from(vec!["hi"])).with_task_path(&path),
        PendingWrite::new(&task.id, format!("{BRANCH_TO}agent"), Value::Nil)
            .with_task_path(&path)
            .with_idx(1),
    ];
    saver.put_pending_writes(&first.config, &writes).await.unwrap();
    let snap: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(snap.tasks[0].writes, writes);
    assert!(snap.tasks[0].is_done());

    // Mixed tasks and wrong indexes are refused whole.
    let mixed = [
        writes[0].clone(),
        PendingWrite::new("other", "messages", Value::Nil).with_idx(1),
    ];
    let err = saver.put_pending_writes(&first.config, &mixed).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let bad_idx = [writes[1].clone().with_idx(7)];
    assert!(matches!(
        saver.put_pending_writes(&first.config, &bad_idx).await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(t.tuple(None).await.unwrap().unwrap().pending_writes, writes);

    // An interrupt and an error stored under a task show on it.
    saver
        .put_writes(
            &first.config,
            &[(INTERRUPT.to_owned(), Value::from(vec!["ask"]))],
            "t-int",
            "",
        )
        .await
        .unwrap();
    let snap: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(snap.other_writes.len(), 1, "writes of no next task are kept apart");

    // A manual update as a node that is not next: a new checkpoint, one step
    // later, its writes stored under LangGraph's update task id.
    let update = State {
        messages: vec!["hi".into(), "there".into()],
        turns: 1,
    };
    let cfg = t.update_state(&update, "agent").await.unwrap();
    let snap: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(snap.config, cfg);
    assert_eq!(snap.values, update);
    assert_eq!(
        (snap.step(), snap.metadata.source()),
        (0, Some(CheckpointSource::Update))
    );
    assert_eq!(snap.parent_config.as_ref(), Some(&first.config));
    assert!(
        snap.next.is_empty(),
        "the one-step channels are cleared: {:?}",
        snap.next
    );
    let on_first = t
        .tuple(first.config.checkpoint_id())
        .await
        .unwrap()
        .unwrap()
        .pending_writes;
    let stored: Vec<_> = on_first
        .iter()
        .filter(|w| w.task_path == "~__interrupt__, 0000000000")
        .collect();
    assert_eq!(stored.len(), 2, "{on_first:?}");
    assert_eq!(stored[0].task_id.len(), 36);

    // A reducer and an update of an older checkpoint (a fork there).
    let append = |channel: &str, old: Option<&Value>, new: Value| -> checkpointer::Result<Value> {
        if channel != "messages" {
            return Ok(new);
        }
        let mut all: Vec<String> = old.map(from_value_ref).transpose()?.unwrap_or_default();
        all.extend(from_value::<Vec<String>>(new)?);
        to_value(&all)
    };
    let upd = StateUpdate {
        writes: checkpointer::state::writes(&Value::map([("messages", Value::from(vec!["again"]))])).unwrap(),
        as_node: "agent",
        reducer: Some(&append),
    };
    let branch = t.update_state_with(cfg.checkpoint_id(), upd).await.unwrap();
    let snap: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(snap.config, branch);
    assert_eq!(snap.values.messages, ["hi", "there", "again"]);

    // Fork: a sibling of the copied checkpoint.
    let fork = t.fork(cfg.checkpoint_id().unwrap()).await.unwrap();
    let forked: StateSnapshot<State> = t.state().await.unwrap().unwrap();
    assert_eq!(forked.config, fork);
    assert_eq!(forked.parent_config.as_ref(), Some(&first.config));
    assert_eq!(
        (forked.step(), forked.metadata.source()),
        (1, Some(CheckpointSource::Fork))
    );
    assert_eq!(forked.values, update);

    // History: newest first, every checkpoint of the namespace.
    let history: Vec<StateSnapshot<State>> = t.history(ListOptions::default()).await.unwrap();
    let ids: Vec<_> = history.iter().map(|s| s.config.clone()).collect();
    assert_eq!(ids, [fork.clone(), branch, cfg.clone(), first.config.clone()]);
    let limited: Vec<StateSnapshot<State>> = t.history(ListOptions::default().limit(1)).await.unwrap();
    assert_eq!(limited[0].config, fork);

    // A subgraph namespace has its own history; NsScope::All sees both.
    let sub = t.in_namespace("tools:1");
    sub.update_state(&State::default(), "lookup").await.unwrap();
    assert_eq!(sub.history::<State>(ListOptions::default()).await.unwrap().len(), 1);
    assert_eq!(t.history::<State>(ListOptions::default()).await.unwrap().len(), 4);
    let all = saver
        .list_vec(
            Some(CheckpointConfig::in_scope(t.thread_id(), NsScope::All)),
            ListOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(all.len(), 5);

    // The same typed errors everywhere.
    let missing = t.fork("1f1edd4a-8e5b-6638-bfff-142d7cdfc441").await.unwrap_err();
    assert!(matches!(missing, Error::InvalidInput { .. }), "{missing:?}");
    let upd = StateUpdate {
        writes: vec![],
        as_node: "",
        reducer: None,
    };
    assert!(matches!(
        t.update_state_with(None, upd).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        t.update_state(&[1, 2], "agent").await,
        Err(Error::InvalidInput { .. })
    ));
    saver
        .put_writes(&fork, &[(ERROR.to_owned(), Value::from("boom"))], "t", "")
        .await
        .unwrap();
    let wrong = t.state::<Vec<String>>().await.unwrap_err();
    assert!(matches!(wrong, Error::Serde { .. }), "{wrong:?}");
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Wrong {
        turns: String,
    }
    let err = t.state::<Wrong>().await.unwrap_err().to_string();
    assert!(err.contains("turns"), "{err}");

    // Deleting the thread removes every namespace's history.
    saver.delete_thread(t.thread_id()).await.unwrap();
    assert!(t.state::<State>().await.unwrap().is_none());
    assert!(sub.state::<State>().await.unwrap().is_none());
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<crate::harness::Trial> {
    crate::every_saver::trials("thread_state::thread_state_", 0, scenario)
}
