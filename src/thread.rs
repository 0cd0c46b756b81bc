//! A thread's state as a graph runtime shows it: typed snapshots, history,
//! manual updates and forks ([`Thread`]).
//!
//! What LangGraph's `get_state`, `get_state_history`, `update_state` and a
//! `__copy__` update do, over any [`CheckpointSaver`], for runtimes that
//! follow `StateGraph`'s channel conventions: one channel per state field
//! (see [`state`](crate::state)), the input channel `__start__` waking the
//! `__start__` node, and an edge to node `n` writing the trigger channel
//! `branch:to:n`. [`next_tasks`] says which nodes a checkpoint runs next under
//! those conventions and gives their task ids as Python computes them, so a
//! snapshot's tasks carry the pending writes, interrupts and errors stored
//! under them, whichever language stored them.
//!
//! `Send` (push) tasks and `join:` barriers are scheduled as Python does
//! (see [`step`](crate::step) and [`Thread::with_topology`]).
//! [`Thread::history`] lists every checkpoint of the namespace newest first
//! (after a fork, both branches interleaved by id, as LangGraph's
//! `get_state_history`); [`Thread::ancestors`] and [`Thread::branch`] follow
//! one branch's parent links instead.
//!
//! Not covered: reducers in [`Thread::update_state`] (a channel takes the
//! update's value; use [`Thread::update_state_with`] to combine it with the
//! old one).

mod branch;

use std::sync::Arc;

use ::serde::de::DeserializeOwned;
use ::serde::Serialize;

use crate::checkpoint::channels::{INTERRUPT, START};
use crate::checkpoint::{
    Checkpoint, CheckpointMetadata, CheckpointSource, CheckpointTuple, PendingWrite, StepCheckpoint,
};
use crate::config::{CheckpointConfig, NsScope};
use crate::error::{Error, Result};
use crate::saver::{CheckpointSaver, CheckpointSaverExt, ListOptions};
use crate::serde::Value;
use crate::step::Topology;
use crate::task::TaskPath;
use crate::version::ChannelVersion;

pub use branch::Ancestors;

/// The pseudo-node whose entry in `versions_seen` LangGraph's input
/// checkpoints carry (always empty).
pub const INPUT_NODE: &str = "__input__";

/// The prefix of the channel an edge to a node writes: `branch:to:<node>`.
pub const BRANCH_TO: &str = "branch:to:";

/// The node a trigger channel wakes under `StateGraph`'s conventions:
/// `__start__` for the input channel, `n` for `branch:to:n`.
///
/// ```
/// use checkpointer::thread::triggered_node;
/// assert_eq!(triggered_node("branch:to:agent"), Some("agent"));
/// assert_eq!(triggered_node("__start__"), Some("__start__"));
/// assert_eq!(triggered_node("messages"), None);
/// ```
pub fn triggered_node(channel: &str) -> Option<&str> {
    if channel == START {
        Some(START)
    } else {
        channel.strip_prefix(BRANCH_TO).filter(|n| !n.is_empty())
    }
}

/// Whether `channel` holds a value for one step only (LangGraph's
/// `EphemeralValue`): the input channel and the edge triggers. A step that
/// does not write such a channel clears it.
pub fn is_ephemeral(channel: &str) -> bool {
    triggered_node(channel).is_some()
}

/// A task a checkpoint runs next, with what is stored under it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    /// The task id, as Python's runtime computes it
    /// ([`pull_task_id`](crate::task::pull_task_id), or
    /// [`push_task_id`](crate::task::push_task_id) for a `Send`).
    pub id: String,
    /// The node.
    pub name: String,
    /// The task's path: a pull task of `name`, or the
    /// [`TaskPath::Push`] of its `Send` packet.
    pub path: TaskPath,
    /// The node's trigger channels, sorted: all those it is declared to be
    /// triggered by (the task id hashes them), `["__pregel_push"]` for a
    /// `Send`.
    pub triggers: Vec<String>,
    /// A `Send` task's input: its packet's `arg` (the node runs on it
    /// instead of the state); `None` for a pull task.
    pub input: Option<Value>,
    /// The interrupts it raised (the values of its `__interrupt__` writes,
    /// lists flattened), oldest first.
    pub interrupts: Vec<Value>,
    /// The error it failed with (its `__error__` write), if any.
    pub error: Option<Value>,
    /// Every write stored under its id against the checkpoint.
    pub writes: Vec<PendingWrite>,
}

impl TaskState {
    /// Whether the task finished, so a resumed run reuses its writes instead
    /// of running it again: as LangGraph decides it, the task has a write to
    /// a channel other than `__error__`, `__error_source_node__`,
    /// `__interrupt__`, `__resume__` and `__scheduled__` (a task waiting on
    /// its second interrupt holds the answer to its first, and has not
    /// finished).
    pub fn is_done(&self) -> bool {
        self.writes.iter().any(|w| !crate::step::is_control(&w.channel))
    }
}

/// The tasks `checkpoint` (of namespace `ns`, stored with `metadata`) runs
/// next, under `StateGraph`'s conventions: first one push task per `Send`
/// waiting in `__pregel_tasks` (in packet order), then the nodes, sorted:
/// node `n` runs when one of its trigger channels holds something to read (a
/// value for `__start__` and `branch:to:n`, a full set for a join barrier
/// `join:<a>+<b>:n`) and a version newer than `versions_seen[n]` records for
/// it. A node's triggers are `branch:to:n` and the join barriers into it the
/// checkpoint has (a runtime that declares its graph with
/// [`Thread::with_topology`] gets Python's exact triggers, and its order of
/// nodes, through [`CheckpointTuple::next_tasks`] and the step calls). Each
/// task carries the writes of `pending_writes` stored under its id.
///
/// ```
/// use checkpointer::prelude::*;
/// use checkpointer::thread::next_tasks;
/// let mut step = StepCheckpoint::first(-1);
/// step.write(START, Value::map([("messages", Value::from(vec!["hi"]))]), checkpointer::version::next_version)?;
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let tasks = next_tasks(step.checkpoint(), "", &meta, &[])?;
/// assert_eq!(tasks[0].name, START);
/// assert_eq!(tasks[0].triggers, [START]);
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// The tasks run at the step after the checkpoint's (`metadata.step` + 1,
/// exactly, even past `i64::MAX`, as Python computes it; −1 + 1 when the
/// metadata has no integer step).
///
/// # Errors
/// [`Error::InvalidInput`] when the checkpoint id is not a UUID (task ids
/// hash its bytes).
pub fn next_tasks(
    checkpoint: &Checkpoint,
    ns: &str,
    metadata: &CheckpointMetadata,
    pending_writes: &[PendingWrite],
) -> Result<Vec<TaskState>> {
    crate::step::schedule::next_tasks_in(checkpoint, ns, metadata, pending_writes, None)
}

/// One finished task's writes, as [`apply_writes`] takes them.
#[derive(Debug, Clone, Copy)]
pub struct TaskWrites<'a> {
    /// The node that ran.
    pub node: &'a str,
    /// The trigger channels that woke it ([`TaskState::triggers`]).
    pub triggers: &'a [String],
    /// Its writes, in order (special channels such as `__resume__` are
    /// skipped: they are not state).
    pub writes: &'a [(String, Value)],
}

/// The checkpoint a super-step makes from `parent` once its tasks are done,
/// as LangGraph's `apply_writes` makes it: each task's node records the
/// versions of its triggers in `versions_seen`; the triggers are consumed
/// (bumped, value dropped; a full join barrier emptied); the writes are
/// applied in order, through `reducer` when given (the written value
/// replaces the old one otherwise), `Send`s (writes to `__pregel_tasks`)
/// gathered into that channel's list and join writes (the source's name)
/// added to their barrier's set; the one-step channels ([`is_ephemeral`])
/// nobody wrote are cleared, and so is a list of `Send`s the step did not
/// write. Pass the tasks in Python's order (sorted by task path: pull tasks
/// by node, then `Send` tasks by index), as [`Thread::close_step`] does.
/// Every channel the step changes gets `version` (LangGraph's one version per
/// step: the saver's `get_next_version` of [`Checkpoint::max_version`]).
/// It costs O(n log n) in the writes and triggers, whatever their number.
///
/// ```
/// use checkpointer::prelude::*;
/// use checkpointer::thread::{apply_writes, next_tasks, TaskWrites};
/// use checkpointer::version::next_version;
/// let mut input = StepCheckpoint::first(-1);
/// input.write(START, Value::map([("n", Value::from(1))]), next_version)?;
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let task = &next_tasks(input.checkpoint(), "", &meta, &[])?[0];
/// let writes = [("n".to_owned(), Value::from(1)), ("branch:to:double".to_owned(), Value::Nil)];
/// let done = TaskWrites { node: &task.name, triggers: &task.triggers, writes: &writes };
/// let v = next_version(input.checkpoint().max_version())?;
/// let step = apply_writes(input.checkpoint(), 0, &[done], &v, None)?;
/// let cp = step.checkpoint();
/// assert!(!cp.channel_values.contains_key(START)); // consumed
/// assert_eq!(cp.channel_values["n"], Value::from(1));
/// assert_eq!(cp.versions_seen[START][START], input.checkpoint().channel_versions[START]);
/// assert!(cp.channel_versions.values().all(|x| *x == v));
/// assert_eq!(cp.updated_channels.as_deref().unwrap(), ["branch:to:double", "n"]);
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// # Errors
/// The reducer's.
pub fn apply_writes(
    parent: &Checkpoint,
    step: i64,
    tasks: &[TaskWrites<'_>],
    version: &ChannelVersion,
    reducer: Option<&ChannelReducer<'_>>,
) -> Result<StepCheckpoint> {
    crate::step::schedule::apply_writes_in(parent, step, tasks, version, reducer, None)
}

/// A thread's state at one checkpoint, as a runtime shows it (LangGraph's
/// `StateSnapshot`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use checkpointer::prelude::*;
/// use checkpointer::checkpoint::channels::INTERRUPT;
/// let saver = InMemorySaver::new();
/// let mut step = StepCheckpoint::first(-1);
/// step.write(START, Value::map([("topic", Value::from("cats"))]), |v| saver.get_next_version(v))?;
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let stored = saver.put_step(&CheckpointConfig::new("t"), &step, &meta).await?;
///
/// let snap: StateSnapshot<Value> = StateSnapshot::from_tuple(stored.clone())?;
/// assert_eq!(snap.next, [START]);
/// assert_eq!(snap.step(), -1);
/// // an interrupt stored under the next task shows on it
/// let task = &snap.tasks[0];
/// saver.put_writes(&stored.config, &[(INTERRUPT.to_owned(), Value::from(vec!["ok?"]))], &task.id, "").await?;
/// let snap: StateSnapshot<Value> = StateSnapshot::from_tuple(saver.get_tuple(&stored.config).await?.unwrap())?;
/// assert_eq!(snap.interrupts().collect::<Vec<_>>(), [&Value::from("ok?")]);
/// assert!(!snap.tasks[0].is_done());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StateSnapshot<S> {
    /// The state, read from the checkpoint's channels
    /// ([`state::from_channels`](crate::state::from_channels)).
    pub values: S,
    /// The nodes that run next ([`next_tasks`]), sorted.
    pub next: Vec<String>,
    /// Where the checkpoint is stored.
    pub config: CheckpointConfig,
    /// Its metadata (`source`, `step`, `parents`, …).
    pub metadata: CheckpointMetadata,
    /// When it was made (the checkpoint's `ts`).
    pub created_at: String,
    /// The checkpoint it follows, if any.
    pub parent_config: Option<CheckpointConfig>,
    /// The next tasks with their stored writes, interrupts and errors.
    pub tasks: Vec<TaskState>,
    /// Writes stored against the checkpoint under no next task (for example
    /// a resume value under [`NULL_TASK_ID`](crate::task::NULL_TASK_ID)).
    pub other_writes: Vec<PendingWrite>,
    /// The checkpoint itself (shared with the tuple it was read from).
    pub checkpoint: Checkpoint,
}

impl<S: DeserializeOwned> StateSnapshot<S> {
    /// The snapshot of a stored tuple (from `get_tuple`, `list` or
    /// [`CheckpointSaverExt::put_step`]).
    ///
    /// # Errors
    /// As [`state::from_channels`](crate::state::from_channels) and
    /// [`next_tasks`].
    pub fn from_tuple(tuple: CheckpointTuple) -> Result<Self> {
        Self::from_tuple_in(tuple, None)
    }

    /// [`StateSnapshot::from_tuple`] with a runtime's declared graph.
    pub(crate) fn from_tuple_in(tuple: CheckpointTuple, topology: Option<&Topology>) -> Result<Self> {
        let values = crate::state::from_channels(&tuple.checkpoint.channel_values)?;
        let tasks = crate::step::schedule::next_tasks_in(
            &tuple.checkpoint,
            tuple.config.ns(),
            &tuple.metadata,
            &tuple.pending_writes,
            topology,
        )?;
        let mut ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        ids.sort_unstable();
        let other_writes = tuple
            .pending_writes
            .into_iter()
            .filter(|w| ids.binary_search(&w.task_id.as_str()).is_err())
            .collect();
        Ok(StateSnapshot {
            values,
            next: tasks.iter().map(|t| t.name.clone()).collect(),
            created_at: tuple.checkpoint.ts.clone(),
            config: tuple.config,
            metadata: tuple.metadata,
            parent_config: tuple.parent_config,
            tasks,
            other_writes,
            checkpoint: tuple.checkpoint,
        })
    }
}

impl<S> StateSnapshot<S> {
    /// Every interrupt raised by a next task, in task order.
    pub fn interrupts(&self) -> impl Iterator<Item = &Value> {
        self.tasks.iter().flat_map(|t| t.interrupts.iter())
    }

    /// The step of the checkpoint (`metadata.step`, −1 when absent).
    pub fn step(&self) -> i64 {
        self.metadata.step().unwrap_or(-1)
    }
}

/// Combines a channel's current value (if any) with a value written to it:
/// `(channel, old, written) -> new`.
pub type ChannelReducer<'a> = dyn Fn(&str, Option<&Value>, Value) -> Result<Value> + Send + Sync + 'a;

/// A manual state update: the writes of a partial update, made as if node
/// `as_node` had returned them ([`Thread::update_state_with`]).
pub struct StateUpdate<'a> {
    /// The channel writes (see [`state::writes`](crate::state::writes)), plus
    /// any edge triggers (`branch:to:<node>`) the node would have written.
    pub writes: Vec<(String, Value)>,
    /// The node the update is made as.
    pub as_node: &'a str,
    /// Combines a channel's current value (if any) with the written one; the
    /// written one replaces it when `None`.
    pub reducer: Option<&'a ChannelReducer<'a>>,
}

/// One thread (and namespace) of a saver, seen as a graph runtime sees it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use std::sync::Arc;
/// use checkpointer::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// struct State { messages: Vec<String> }
///
/// let saver: Arc<dyn CheckpointSaver> = Arc::new(InMemorySaver::new());
/// let thread = Thread::new(saver.clone(), "t1");
/// // a manual update on a fresh thread, then one more on top of it
/// thread.update_state(&State { messages: vec!["hi".into()] }, "agent").await?;
/// let second = thread.update_state(&State { messages: vec!["hi".into(), "there".into()] }, "agent").await?;
///
/// let now: StateSnapshot<State> = thread.state().await?.expect("updated");
/// assert_eq!(now.values.messages, ["hi", "there"]);
/// assert_eq!(now.metadata.source(), Some(CheckpointSource::Update));
/// assert_eq!(now.config, second);
///
/// let history: Vec<StateSnapshot<State>> = thread.history(ListOptions::default()).await?;
/// assert_eq!(history.len(), 2); // newest first
/// assert_eq!(history[1].values.messages, ["hi"]);
///
/// // a fork of the first checkpoint: a sibling of the second
/// let fork = thread.fork(history[1].config.checkpoint_id().unwrap()).await?;
/// let forked: StateSnapshot<State> = thread.state().await?.unwrap();
/// assert_eq!(forked.config, fork);
/// assert_eq!(forked.values.messages, ["hi"]);
/// assert_eq!(forked.metadata.source(), Some(CheckpointSource::Fork));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Thread {
    saver: Arc<dyn CheckpointSaver>,
    thread_id: String,
    ns: String,
    topology: Option<Arc<Topology>>,
}

impl Thread {
    /// The root namespace of `thread_id` in `saver`.
    pub fn new(saver: Arc<dyn CheckpointSaver>, thread_id: impl Into<String>) -> Self {
        Thread {
            saver,
            thread_id: thread_id.into(),
            ns: String::new(),
            topology: None,
        }
    }

    /// The same thread, run by a graph of `topology`: its nodes (the
    /// targets a `Send` may name) and join edges, which the step calls and
    /// the snapshots use (see [`Topology`]). A subgraph's thread
    /// ([`Step::subgraph`](crate::step::Step::subgraph)) has none until
    /// given its own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    /// use checkpointer::step::Topology;
    ///
    /// let graph = Topology::new(["a", "b", "c"]).join(&["a", "b"], "c")?;
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t").with_topology(graph);
    /// assert_eq!(thread.topology().unwrap().joins().len(), 1);
    /// # Ok::<(), checkpointer::Error>(())
    /// ```
    #[must_use]
    pub fn with_topology(self, topology: Topology) -> Self {
        Thread {
            topology: Some(Arc::new(topology)),
            ..self
        }
    }

    /// The graph declared with [`Thread::with_topology`], if any.
    pub fn topology(&self) -> Option<&Topology> {
        self.topology.as_deref()
    }

    /// The declared graph, shared.
    pub(crate) fn shared_topology(&self) -> Option<Arc<Topology>> {
        self.topology.clone()
    }

    /// The same thread with no declared graph (a subgraph's thread, until
    /// given its own).
    pub(crate) fn without_topology(&self) -> Thread {
        Thread {
            topology: None,
            ..self.clone()
        }
    }

    /// The same thread in namespace `ns` (a subgraph's; `""` is the root).
    #[must_use]
    pub fn in_namespace(&self, ns: impl Into<String>) -> Self {
        Thread {
            saver: self.saver.clone(),
            thread_id: self.thread_id.clone(),
            ns: ns.into(),
            topology: self.topology.clone(),
        }
    }

    /// The saver.
    pub fn saver(&self) -> &Arc<dyn CheckpointSaver> {
        &self.saver
    }

    /// The thread id.
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// The namespace (`""` for the root graph).
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// The config of the thread's namespace (no checkpoint: the latest).
    pub fn config(&self) -> CheckpointConfig {
        CheckpointConfig::in_scope(self.thread_id.clone(), NsScope::namespace(self.ns.clone()))
    }

    /// The config of one checkpoint of the namespace.
    pub fn at(&self, checkpoint_id: &str) -> CheckpointConfig {
        self.config().with_checkpoint_id(checkpoint_id)
    }

    /// The latest checkpoint of the namespace, or the one named.
    ///
    /// # Errors
    /// As [`CheckpointSaver::get_tuple`].
    pub async fn tuple(&self, checkpoint_id: Option<&str>) -> Result<Option<CheckpointTuple>> {
        let config = match checkpoint_id {
            Some(id) => self.at(id),
            None => self.config(),
        };
        self.saver.get_tuple(&config).await
    }

    /// The latest state, `None` for a thread without checkpoints.
    ///
    /// # Errors
    /// As [`CheckpointSaver::get_tuple`] and [`StateSnapshot::from_tuple`].
    pub async fn state<S: DeserializeOwned>(&self) -> Result<Option<StateSnapshot<S>>> {
        let tuple = self.tuple(None).await?;
        tuple
            .map(|t| StateSnapshot::from_tuple_in(t, self.topology()))
            .transpose()
    }

    /// The state at one checkpoint.
    ///
    /// # Errors
    /// As [`Thread::state`].
    pub async fn state_at<S: DeserializeOwned>(&self, checkpoint_id: &str) -> Result<Option<StateSnapshot<S>>> {
        let tuple = self.tuple(Some(checkpoint_id)).await?;
        tuple
            .map(|t| StateSnapshot::from_tuple_in(t, self.topology()))
            .transpose()
    }

    /// Every state of the namespace, newest first (`options` filters, pages
    /// with `before` and limits, as for [`CheckpointSaver::list`]): after a
    /// fork, the checkpoints of every branch, interleaved by checkpoint id,
    /// as LangGraph's `get_state_history` lists them. One branch alone is
    /// [`Thread::ancestors`].
    ///
    /// # Errors
    /// As [`CheckpointSaver::list`] and [`StateSnapshot::from_tuple`].
    pub async fn history<S: DeserializeOwned>(&self, options: ListOptions) -> Result<Vec<StateSnapshot<S>>> {
        let tuples = self.saver.list_vec(Some(self.config()), options).await?;
        let topology = self.topology();
        tuples
            .into_iter()
            .map(|t| StateSnapshot::from_tuple_in(t, topology))
            .collect()
    }

    /// Stores the input checkpoint of a run, as LangGraph's runtime does:
    /// `input` (a map of state fields) waits in `__start__` for the
    /// `__start__` task, in a checkpoint one step after `latest` (step −1
    /// on a fresh thread) that keeps everything else, records the input
    /// pseudo-node `__input__` in `versions_seen`, and gives `__start__` the
    /// step's one new version. Its metadata is source `input` with the given
    /// `parents` (a subgraph's enclosing checkpoints; `{}` when `None`).
    /// `latest` is the namespace's latest checkpoint, as the caller read it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
    /// let input = Value::map([("topic", Value::from("cats"))]);
    /// let first = thread.put_input(None, input.clone(), None).await?;
    /// assert_eq!((first.metadata.step(), first.checkpoint.channel_values[START].clone()), (Some(-1), input));
    /// let snap: StateSnapshot<Value> = StateSnapshot::from_tuple(first.clone())?;
    /// assert_eq!(snap.next, [START]);
    /// let second = thread.put_input(Some(&first), Value::map::<&str>([]), None).await?;
    /// assert_eq!(second.parent_config.as_ref(), Some(&first.config));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `latest`'s step is the greatest an `i64`
    /// holds, or its versions cannot be continued
    /// ([`CheckpointSaver::get_next_version`]); as
    /// [`CheckpointSaverExt::put_step`].
    pub async fn put_input(
        &self,
        latest: Option<&CheckpointTuple>,
        input: Value,
        parents: Option<Value>,
    ) -> Result<CheckpointTuple> {
        let step = match latest {
            Some(t) => step_after(&t.metadata)?,
            None => -1,
        };
        let mut next = latest.map_or_else(|| StepCheckpoint::first(step), |t| t.checkpoint.successor(step));
        let version = self.saver.get_next_version(next.checkpoint().max_version())?;
        let seen = &mut next.checkpoint_mut().versions_seen;
        if !seen.contains_key(INPUT_NODE) {
            seen.insert(INPUT_NODE.to_owned(), Default::default());
        }
        next.write(START, input, |_| Ok(version.clone()))?;
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Input, step);
        if let Some(parents) = parents {
            metadata.insert("parents", parents);
        }
        let parent = latest.map_or_else(|| self.config(), |t| t.config.clone());
        self.saver.put_step(&parent, &next, &metadata).await
    }

    /// Updates the latest state as if `as_node` had returned `values`: the
    /// writes ([`state::writes`](crate::state::writes)) are stored against the
    /// latest checkpoint under `as_node`'s next task id (or, when `as_node`
    /// is not next, the UUID v5 of the checkpoint id and `__interrupt__`, as
    /// LangGraph does) with the task path of the first update of a call
    /// (`~__interrupt__, 0000000000`), and a new checkpoint (source `update`, one step
    /// later) takes each written channel's new value. Returns its config.
    ///
    /// # Errors
    /// As [`Thread::update_state_with`].
    pub async fn update_state<U: Serialize + ?Sized>(&self, values: &U, as_node: &str) -> Result<CheckpointConfig> {
        let update = StateUpdate {
            writes: crate::state::writes(values)?,
            as_node,
            reducer: None,
        };
        self.update_state_with(None, update).await
    }

    /// [`Thread::update_state`] with raw writes, an optional reducer, and an
    /// optional checkpoint to update instead of the latest (updating an old
    /// checkpoint forks the thread there: the new checkpoint is its child).
    ///
    /// The new checkpoint also clears the one-step channels
    /// ([`is_ephemeral`]) the update does not write, as LangGraph's step
    /// does, and, as Python's, has no `updated_channels`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty node name, a named checkpoint
    /// that does not exist, one at the greatest step an `i64` holds, or
    /// versions that cannot be continued; the reducer's errors; the saver's.
    pub async fn update_state_with(
        &self,
        checkpoint_id: Option<&str>,
        update: StateUpdate<'_>,
    ) -> Result<CheckpointConfig> {
        if update.as_node.is_empty() {
            return Err(Error::invalid("update_state: as_node must name a node"));
        }
        let saved = self.tuple(checkpoint_id).await?;
        if let (Some(id), None) = (checkpoint_id, &saved) {
            return Err(Error::invalid(format!(
                "update_state: no checkpoint {id:?} in this thread"
            )));
        }
        let new_step = match &saved {
            Some(t) => step_after(&t.metadata)?,
            None => 0,
        };
        let version = match &saved {
            Some(t) => self.saver.get_next_version(t.checkpoint.max_version())?,
            None => self.saver.get_next_version(None)?,
        };
        let (parent, parent_config, parents) = match &saved {
            Some(t) => (
                t.checkpoint.clone(),
                t.config.clone(),
                t.metadata.get("parents").cloned(),
            ),
            None => (Checkpoint::new(new_step), self.config(), None),
        };
        if let Some(saved) = &saved {
            let (cp, ns, meta) = (&saved.checkpoint, saved.config.ns(), &saved.metadata);
            let tasks = crate::step::schedule::next_tasks_in(cp, ns, meta, &[], self.topology())?;
            let task_id = match tasks.iter().find(|t| t.name == update.as_node) {
                Some(t) => t.id.clone(),
                None => update_task_id(&saved.checkpoint.id)?,
            };
            if !update.writes.is_empty() {
                let path = TaskPath::Interrupt { index: 0 }.to_string();
                self.saver
                    .put_writes(&saved.config, &update.writes, &task_id, &path)
                    .await?;
            }
        }
        let task = TaskWrites {
            node: update.as_node,
            triggers: &[],
            writes: &update.writes,
        };
        let mut step = apply_writes(&parent, new_step, &[task], &version, update.reducer)?;
        // Python's update_state checkpoint names no updated channels (it
        // lists them only when it snapshots delta channels)
        step.checkpoint_mut().updated_channels = None;
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Update, new_step);
        if let Some(parents) = parents {
            metadata.insert("parents", parents);
        }
        Ok(self.saver.put_step(&parent_config, &step, &metadata).await?.config)
    }

    /// Copies checkpoint `checkpoint_id` into a new one (source `fork`, one
    /// step later, same values and versions) beside it: its parent is the
    /// copied checkpoint's parent, so the copy starts a new branch of the
    /// history that a runner can continue (LangGraph's `__copy__` update).
    /// Returns the copy's config.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the checkpoint does not exist or is at
    /// the greatest step an `i64` holds; the saver's.
    pub async fn fork(&self, checkpoint_id: &str) -> Result<CheckpointConfig> {
        let saved = self
            .tuple(Some(checkpoint_id))
            .await?
            .ok_or_else(|| Error::invalid(format!("fork: no checkpoint {checkpoint_id:?} in this thread")))?;
        let step = step_after(&saved.metadata)?;
        let copy = saved.checkpoint.successor(step);
        let mut metadata = CheckpointMetadata::new(CheckpointSource::Fork, step);
        if let Some(parents) = saved.metadata.get("parents") {
            metadata.insert("parents", parents.clone());
        }
        let parent = saved.parent_config.unwrap_or_else(|| self.config());
        Ok(self.saver.put_step(&parent, &copy, &metadata).await?.config)
    }
}

/// The step after the one `metadata` stores (−1 when it stores none, as
/// Python's `metadata.get("step", -1)`): a typed error, never a wrap or a
/// restart, when the stored step is not a 64-bit integer or is the greatest
/// one (metadata is the caller's or Python's data).
pub(crate) fn step_after(metadata: &CheckpointMetadata) -> Result<i64> {
    let step = match metadata.get("step") {
        None => -1,
        Some(value) => value.as_i64().ok_or_else(|| {
            Error::invalid(format!(
                "checkpoint metadata step {} is not a 64-bit integer: no step follows it",
                step_shown(value)
            ))
        })?,
    };
    step.checked_add(1).ok_or_else(|| {
        Error::invalid(format!(
            "checkpoint metadata step {step} is the greatest an i64 holds: no step follows it"
        ))
    })
}

/// A stored step as an error names it: integers in full, anything else by kind.
fn step_shown(value: &Value) -> String {
    match value {
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Nil => "nil".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Float(f) => crate::serde::py_float_repr(*f),
        Value::Str(_) => "(a string)".to_owned(),
        _ => "(not an integer)".to_owned(),
    }
}

/// LangGraph's task id for an update made as a node that is not next:
/// UUID v5 in the namespace of the checkpoint's id, of `__interrupt__`.
fn update_task_id(checkpoint_id: &str) -> Result<String> {
    let ns = uuid::Uuid::parse_str(checkpoint_id)
        .map_err(|_| Error::invalid(format!("checkpoint id {checkpoint_id:?} is not a UUID")))?;
    Ok(uuid::Uuid::new_v5(&ns, INTERRUPT.as_bytes()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_task_id_is_uuid5_of_the_checkpoint() {
        // Python: str(uuid5(UUID("1f1ebff3-b847-6cad-bfff-1a83a14bb72b"), "__interrupt__"))
        let id = update_task_id("1f1ebff3-b847-6cad-bfff-1a83a14bb72b").unwrap();
        assert_eq!(id, "5b2e3333-aecf-5843-88af-245ed6ff553a");
        assert!(matches!(update_task_id("nope"), Err(Error::InvalidInput { .. })));
    }
}
