//! The step calls: one super-step of a thread, with the protocol owned by
//! the crate (task ids, versions, step numbers, metadata, interrupts,
//! resumes), so that a runtime's loop holds no protocol glue.
//!
//! A [`Step`] is opened on the checkpoint it runs from ([`Thread::step`],
//! [`Thread::start`] with an input, [`Thread::resume`] with an answer). It
//! knows the tasks the checkpoint schedules (with Python's ids) and the ones
//! already finished in a previous attempt (their pending writes are reused).
//! The runtime runs the others, each with a [`TaskContext`] that answers its
//! interrupts from the stored resume values, and reports each outcome:
//! [`Step::finish`] stores a task's writes, [`Step::interrupt`] the
//! interrupts it stopped with. [`Step::close`] then makes, stores and opens
//! the next checkpoint in one call: one version for the step, step number
//! = parent's + 1, metadata, `apply_writes` through the [`Reducers`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! use std::sync::Arc;
//! use checkpointer::prelude::*;
//! use checkpointer::reducer::{append, Reducers};
//! use checkpointer::step::Resume;
//!
//! let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
//! let reducers = Reducers::new().field("log", append::<String>);
//! let mut step = thread.start(Value::map([("log", Value::from(vec!["in"]))]), None).await?;
//! loop {
//!     for task in step.to_run() {
//!         let mut ctx = step.context(&task)?;
//!         let writes = match task.name.as_str() {
//!             START => step.input_writes(&["ask"])?,
//!             _ => match ctx.interrupt("ok?") {
//!                 Ok(answer) => vec![("log".to_owned(), Value::from(vec![answer]))],
//!                 Err(interrupt) => {
//!                     step.interrupt(&task, &ctx, vec![interrupt]).await?;
//!                     continue;
//!                 }
//!             },
//!         };
//!         step.finish(&task, &ctx, writes).await?;
//!     }
//!     if step.is_interrupted() {
//!         // the caller answers: the same step, now with the answer stored
//!         step = thread.resume(Resume::Value(Value::from("yes"))).await?;
//!         continue;
//!     }
//!     if step.tasks().is_empty() {
//!         break;
//!     }
//!     step = step.close(&reducers).await?;
//! }
//! let log: Vec<String> = from_value_ref(&step.parent().checkpoint.channel_values["log"])?;
//! assert_eq!(log, ["in", "yes"]);
//! assert_eq!(step.number(), 2);
//! # Ok(())
//! # }
//! ```

mod close;
mod error;
mod resume;
mod run;
pub(crate) mod schedule;
mod topology;

use std::sync::{Arc, Mutex, MutexGuard};

use ::serde::de::DeserializeOwned;

pub use close::StepClose;
pub use error::StepError;
pub use resume::{Resume, Stop, TaskContext};
pub use run::goto;
pub use topology::{Join, Topology, JOIN};

use crate::checkpoint::channels::{INTERRUPT, RESUME, START};
use crate::checkpoint::{write_idx, CheckpointSource, CheckpointTuple, PendingWrite};
use crate::error::{Error, Result};
use crate::reducer::Reducers;
use crate::serde::py::Interrupt;
use crate::serde::Value;
use crate::task::{task_checkpoint_ns, NULL_TASK_ID};
use crate::thread::{step_after, TaskState, TaskWrites, Thread, BRANCH_TO};

/// The marker write of a task that finished without writing anything
/// (LangGraph's `NO_WRITES`), so that it reads as finished.
pub const NO_WRITES: &str = "__no_writes__";

/// The channels that say what happened to a task rather than what it
/// produced (LangGraph's `CONTROL_WRITES`, plus `__scheduled__`): a task with
/// only these writes has not finished.
pub(crate) fn is_control(channel: &str) -> bool {
    use crate::checkpoint::channels::{ERROR, SCHEDULED};
    matches!(
        channel,
        ERROR | INTERRUPT | RESUME | SCHEDULED | "__error_source_node__"
    )
}

impl CheckpointTuple {
    /// The tasks this checkpoint runs next, with the writes stored under
    /// them: [`next_tasks`](crate::thread::next_tasks) of the tuple's own checkpoint, namespace,
    /// metadata and pending writes.
    ///
    /// # Errors
    /// As [`next_tasks`](crate::thread::next_tasks).
    pub fn next_tasks(&self) -> Result<Vec<TaskState>> {
        self.next_tasks_in(None)
    }

    /// [`CheckpointTuple::next_tasks`] of a runtime's declared graph: its
    /// nodes' exact triggers (joins not yet written included), in its order
    /// of nodes; `Send`s to undeclared nodes are skipped, as Python skips
    /// them.
    ///
    /// # Errors
    /// As [`next_tasks`](crate::thread::next_tasks).
    pub fn next_tasks_in(&self, topology: Option<&Topology>) -> Result<Vec<TaskState>> {
        let (cp, ns, meta) = (&self.checkpoint, self.config.ns(), &self.metadata);
        schedule::next_tasks_in(cp, ns, meta, &self.pending_writes, topology)
    }
}

/// One super-step of a thread: the checkpoint it runs from, the tasks that
/// checkpoint schedules, and what has become of them. See the
/// [module](self) for the loop.
#[derive(Debug)]
pub struct Step {
    thread: Thread,
    parent: CheckpointTuple,
    number: i64,
    tasks: Vec<TaskState>,
    outcomes: Mutex<Vec<Outcome>>,
    null_resume: Arc<Mutex<Option<Value>>>,
    /// The enclosing step's answer without an id, when this is a subgraph's
    /// step ([`Step::within`]): kept for the subgraph's later steps.
    outer_resume: Option<Arc<Mutex<Option<Value>>>>,
    resumed: bool,
}

/// What became of each task, by its index in `tasks`.
#[derive(Debug, Clone)]
enum Outcome {
    Pending,
    Finished(Vec<(String, Value)>),
    /// Finished, its writes not stored yet: [`Step::close`] stores them
    /// with the next checkpoint.
    Deferred(Vec<(String, Value)>),
    Interrupted,
}

impl Thread {
    /// The step that runs from the namespace's latest checkpoint, `None` for
    /// a thread without checkpoints.
    ///
    /// # Errors
    /// As [`CheckpointSaver::get_tuple`](crate::CheckpointSaver::get_tuple)
    /// and [`Step::open`].
    pub async fn step(&self) -> Result<Option<Step>> {
        match self.tuple(None).await? {
            Some(tuple) => Step::open(self, tuple).map(Some),
            None => Ok(None),
        }
    }

    /// Stores `input` (a map of state fields) as a run's input checkpoint
    /// ([`Thread::put_input`], after the latest checkpoint) and opens the
    /// step that runs its `__start__` task. `parents` is a subgraph's map of
    /// enclosing checkpoints (see [`Step::subgraph`]); `None` stores `{}`.
    ///
    /// # Errors
    /// As [`Thread::put_input`] and [`Step::open`].
    pub async fn start(&self, input: Value, parents: Option<Value>) -> Result<Step> {
        let latest = self.tuple(None).await?;
        let parents = parents.unwrap_or_else(|| Value::map::<&str>([]));
        let stored = self.put_input(latest.as_ref(), input, Some(parents)).await?;
        Step::open(self, stored)
    }
}

impl Step {
    /// The step that runs from `parent`, a checkpoint of `thread`'s
    /// namespace: its number is the parent's step + 1, its tasks those the
    /// parent schedules; tasks with stored output count as finished.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `parent` is of another thread or
    /// namespace, or its step has no successor; as [`next_tasks`](crate::thread::next_tasks).
    pub fn open(thread: &Thread, parent: CheckpointTuple) -> Result<Step> {
        if parent.config.thread_id != thread.thread_id() || parent.config.ns() != thread.namespace() {
            return Err(Error::invalid(format!(
                "a step of thread {:?} (namespace {:?}) opened on a checkpoint of thread {:?} (namespace {:?})",
                thread.thread_id(),
                thread.namespace(),
                parent.config.thread_id,
                parent.config.ns()
            )));
        }
        let number = step_after(&parent.metadata)?;
        let tasks = parent.next_tasks_in(thread.topology())?;
        let outcomes = tasks
            .iter()
            .map(|t| {
                if t.is_done() {
                    Outcome::Finished(t.writes.iter().map(|w| (w.channel.clone(), w.value.clone())).collect())
                } else {
                    Outcome::Pending
                }
            })
            .collect();
        let null_resume = parent
            .pending_writes
            .iter()
            .find(|w| w.task_id == NULL_TASK_ID && w.channel == RESUME)
            .map(|w| w.value.clone());
        Ok(Step {
            thread: thread.clone(),
            parent,
            number,
            tasks,
            outcomes: Mutex::new(outcomes),
            null_resume: Arc::new(Mutex::new(null_resume)),
            outer_resume: None,
            resumed: false,
        })
    }

    /// The same step, marked as the first of a resumed run: the checkpoint
    /// it closes with records, as LangGraph's does, the versions the
    /// interrupt saw (`versions_seen["__interrupt__"]`).
    /// [`Thread::resume`] returns its step so marked.
    #[must_use]
    pub fn resuming(self) -> Step {
        Step { resumed: true, ..self }
    }

    /// Whether the step is the first of a resumed run ([`Step::resuming`]).
    pub fn is_resuming(&self) -> bool {
        self.resumed
    }

    /// This step, run by a task of `outer` as its subgraph (a step of the
    /// thread [`Step::subgraph`] gives): it resumes when `outer` does
    /// (unless it starts the subgraph afresh, from its input checkpoint), and
    /// when its own checkpoint holds no answer given without an id, the
    /// answer stored for `outer` serves its tasks and those of the steps
    /// that follow it, taken once by the first that asks (LangGraph's
    /// subgraph tasks fall back to their parent's).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    ///
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
    /// let outer = thread.start(Value::map::<&str>([]), None).await?.resuming();
    /// let task = outer.tasks()[0].clone();
    /// let (child, parents) = outer.subgraph(&task)?;
    /// let inner = child.start(Value::map::<&str>([]), Some(parents)).await?.within(&outer);
    /// assert!(!inner.is_resuming(), "a fresh start");
    /// let start = inner.tasks()[0].clone();
    /// let ctx = inner.context(&start)?;
    /// inner.finish(&start, &ctx, inner.input_writes(&[])?).await?;
    /// inner.close(&Reducers::new()).await?;
    /// let again = child.step().await?.unwrap().within(&outer);
    /// assert!(again.is_resuming(), "a subgraph continued in a resumed step");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn within(self, outer: &Step) -> Step {
        // a subgraph that starts afresh (from its input checkpoint) is not
        // resuming, as in LangGraph
        let fresh = self.parent.metadata.source() == Some(CheckpointSource::Input);
        let resumed = self.resumed || (outer.resumed && !fresh);
        Step {
            resumed,
            ..self.inheriting(outer.null_resume.clone())
        }
    }

    /// The step with `outer`'s answer without an id as its own when it has
    /// none, and kept for the steps that follow it.
    fn inheriting(self, outer: Arc<Mutex<Option<Value>>>) -> Step {
        let own = self.null_resume.lock().unwrap_or_else(|e| e.into_inner()).is_some();
        Step {
            null_resume: if own { self.null_resume } else { outer.clone() },
            outer_resume: Some(outer),
            ..self
        }
    }

    /// The thread.
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// The checkpoint the step runs from.
    pub fn parent(&self) -> &CheckpointTuple {
        &self.parent
    }

    /// The step's number: the parent's step + 1.
    pub fn number(&self) -> i64 {
        self.number
    }

    /// Every task the parent schedules: its `Send` tasks in packet order,
    /// then its nodes (in the declared order, sorted without a
    /// [`Topology`]).
    pub fn tasks(&self) -> &[TaskState] {
        &self.tasks
    }

    /// The tasks still to run: those neither finished (now or in an earlier
    /// attempt, whose writes are reused) nor interrupted in this attempt.
    pub fn to_run(&self) -> Vec<TaskState> {
        let outcomes = self.outcomes();
        self.tasks
            .iter()
            .zip(outcomes.iter())
            .filter(|(_, o)| matches!(o, Outcome::Pending))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Whether a task of this step stopped with an interrupt in this attempt.
    pub fn is_interrupted(&self) -> bool {
        self.outcomes().iter().any(|o| matches!(o, Outcome::Interrupted))
    }

    /// The state, read from the parent's channels
    /// ([`state::from_channels`](crate::state::from_channels)).
    ///
    /// # Errors
    /// As [`state::from_channels`](crate::state::from_channels).
    pub fn state<S: DeserializeOwned>(&self) -> Result<S> {
        crate::state::from_channels(&self.parent.checkpoint.channel_values)
    }

    /// The context `task` runs in: its namespace and the answers to its
    /// interrupts.
    ///
    /// # Errors
    /// [`StepError::Unscheduled`] when the step does not schedule `task`.
    pub fn context(&self, task: &TaskState) -> Result<TaskContext> {
        let at = self.index_of(task)?;
        let task = &self.tasks[at];
        let ns = task_checkpoint_ns(self.thread.namespace(), &task.name, &task.id);
        let topology = self.thread.shared_topology();
        Ok(TaskContext::new(
            ns,
            resume::answers_of(task),
            self.null_resume.clone(),
            topology,
        ))
    }

    /// The writes of the input task (`__start__`): one per field of the
    /// input map waiting in the parent's `__start__` channel, then the
    /// trigger of each node in `then` (`branch:to:<node>`, the edges from
    /// `START`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the parent holds no input map or one
    /// with a key that is not a string.
    pub fn input_writes(&self, then: &[&str]) -> Result<Vec<(String, Value)>> {
        let Some(input) = self.parent.checkpoint.channel_values.get(START) else {
            return Err(Error::invalid("input_writes: the step's checkpoint holds no input"));
        };
        let entries = input
            .as_map()
            .ok_or_else(|| Error::invalid("input_writes: the input is not a map of state fields"))?;
        let mut writes = Vec::with_capacity(entries.len() + then.len());
        for (key, value) in entries.iter() {
            let key = key
                .as_str()
                .ok_or_else(|| Error::invalid("input_writes: an input key is not a string"))?;
            writes.push((key.to_owned(), value.clone()));
        }
        writes.extend(then.iter().map(|n| (format!("{BRANCH_TO}{n}"), Value::Nil)));
        Ok(writes)
    }

    /// Stores the writes of `task`, which ran to the end in `ctx`: under its
    /// task id and path, after the `__resume__` writes of the answers it
    /// used, followed by the node's writes to the barrier of each declared
    /// join it is a source of (unless `writes` has them) and then by its
    /// conditional edge's sends and routes ([`TaskContext::send`],
    /// [`TaskContext::route`]), with LangGraph's `__no_writes__` marker
    /// when it wrote nothing. This is Python's order when `writes` holds
    /// the node's state writes followed by its static edges' triggers.
    ///
    /// # Errors
    /// [`StepError::Unscheduled`] when the step does not schedule `task`;
    /// [`StepError::UnknownNode`] for a `__pregel_tasks` write (a `Send`)
    /// to an undeclared node; the saver's.
    pub async fn finish(&self, task: &TaskState, ctx: &TaskContext, writes: Vec<(String, Value)>) -> Result<()> {
        let (at, all) = self.task_writes(task, ctx, writes)?;
        self.put(at, &all).await?;
        self.outcomes()[at] = Outcome::Finished(all);
        Ok(())
    }

    /// [`Step::finish`], with the task's writes kept for [`Step::close`]
    /// instead of stored now: `close` stores every deferred write and the
    /// next checkpoint in one atomic step of the store
    /// ([`AtomicSteps::put_step_with_writes`](crate::atomic::AtomicSteps::put_step_with_writes)),
    /// so after a crash both are there or neither is. A crash before the
    /// close loses the task's outcome (it runs again on resume), where
    /// `finish` keeps it; use `defer` for the tasks whose writes must not
    /// outlive a step that never closed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    ///
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
    /// let step = thread.start(Value::map([("x", Value::from(1))]), None).await?;
    /// let start = step.tasks()[0].clone();
    /// step.defer(&start, &step.context(&start)?, step.input_writes(&[])?)?;
    /// assert!(step.to_run().is_empty());
    /// // nothing stored yet: a reader sees the task still to run
    /// assert!(!thread.step().await?.unwrap().to_run().is_empty());
    /// let first = step.parent().config.clone();
    /// let next = step.close(&Reducers::new()).await?;
    /// // the close stored the writes against the parent, and the checkpoint
    /// assert!(!thread.saver().get_tuple(&first).await?.unwrap().pending_writes.is_empty());
    /// assert_eq!(next.parent().checkpoint.channel_values["x"], Value::from(1));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Step::finish`], the saver's excepted (they come from `close`).
    pub fn defer(&self, task: &TaskState, ctx: &TaskContext, writes: Vec<(String, Value)>) -> Result<()> {
        let (at, all) = self.task_writes(task, ctx, writes)?;
        self.outcomes()[at] = Outcome::Deferred(all);
        Ok(())
    }

    /// The writes `finish` stores for `task`, in order, and its index.
    fn task_writes(
        &self,
        task: &TaskState,
        ctx: &TaskContext,
        writes: Vec<(String, Value)>,
    ) -> Result<(usize, Vec<(String, Value)>)> {
        let at = self.index_of(task)?;
        schedule::check_sends(&writes, self.thread.topology())?;
        let mut all = ctx.resume_writes();
        all.extend(writes);
        let joins = self
            .thread
            .topology()
            .map(|t| t.joins_from(&task.name))
            .unwrap_or_default();
        if !joins.is_empty() {
            let written: std::collections::BTreeSet<String> = all.iter().map(|(c, _)| c.clone()).collect();
            for channel in joins.into_iter().filter(|c| !written.contains(c)) {
                all.push((channel, Value::from(task.name.as_str())));
            }
        }
        all.extend(ctx.edge_writes());
        if all.iter().all(|(c, _)| is_control(c)) {
            all.push((NO_WRITES.to_owned(), Value::Nil));
        }
        Ok((at, all))
    }

    /// Stores the interrupts `task` stopped with in `ctx` (an
    /// `__interrupt__` write of their list, and the `__resume__` writes of
    /// the answers it had used before, as LangGraph stores them). A task
    /// raising several (a subgraph's) gives them all at once.
    ///
    /// # Errors
    /// As [`Step::finish`].
    pub async fn interrupt(&self, task: &TaskState, ctx: &TaskContext, interrupts: Vec<Interrupt>) -> Result<()> {
        let at = self.index_of(task)?;
        let list = Value::from(interrupts.iter().map(Interrupt::to_value).collect::<Vec<_>>());
        let mut writes = vec![(INTERRUPT.to_owned(), list)];
        writes.extend(ctx.resume_writes());
        self.put(at, &writes).await?;
        self.outcomes()[at] = Outcome::Interrupted;
        Ok(())
    }

    /// The thread and `parents` metadata of the subgraph `task` runs: the
    /// thread in the task's namespace
    /// ([`task_checkpoint_ns`]), and the
    /// parent's `parents` map plus this namespace's checkpoint.
    ///
    /// # Errors
    /// [`StepError::Unscheduled`] when the step does not schedule `task`.
    pub fn subgraph(&self, task: &TaskState) -> Result<(Thread, Value)> {
        let ctx = self.context(task)?;
        let mut parents = self
            .parent
            .metadata
            .get("parents")
            .and_then(Value::as_map)
            .unwrap_or_default()
            .to_vec();
        parents.push((
            Value::from(self.thread.namespace()),
            Value::from(self.parent.checkpoint.id.as_str()),
        ));
        let child = self.thread.without_topology().in_namespace(ctx.namespace());
        Ok((child, Value::Map(parents.into())))
    }

    /// Opens the step of the subgraph `task` runs, inside this one
    /// ([`Step::within`]): the subgraph's latest step when its namespace has
    /// a checkpoint (a rerun after a crash or an interrupt continues it and
    /// does not run its finished tasks again), or else a new run from
    /// `input` (its channel values) with the `parents` map of
    /// [`Step::subgraph`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    ///
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
    /// let outer = thread.start(Value::map([("x", Value::from(1))]), None).await?;
    /// let task = outer.tasks()[0].clone();
    /// let inner = outer.enter(&task, Value::map([("y", Value::from(2))])).await?;
    /// assert_eq!(inner.thread().namespace(), outer.context(&task)?.namespace());
    /// let start = inner.tasks()[0].clone();
    /// inner.finish(&start, &inner.context(&start)?, inner.input_writes(&[])?).await?;
    /// let first = inner.close(&Reducers::new()).await?;
    /// // entered again (the parent's task runs again): the subgraph continues, its input is not stored twice
    /// let again = outer.enter(&task, Value::map([("y", Value::from(3))])).await?;
    /// assert_eq!(again.parent().checkpoint.id, first.parent().checkpoint.id);
    /// assert_eq!(again.parent().checkpoint.channel_values["y"], Value::from(2));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Step::subgraph`], [`Thread::step`] and [`Thread::start`].
    pub async fn enter(&self, task: &TaskState, input: Value) -> Result<Step> {
        let (child, parents) = self.subgraph(task)?;
        let inner = match child.step().await? {
            Some(inner) => inner,
            None => child.start(input, Some(parents)).await?,
        };
        Ok(inner.within(self))
    }

    /// Closes the step once every task has finished: the next checkpoint
    /// ([`apply_writes`](crate::thread::apply_writes) of the finished tasks' writes through `reducers`,
    /// one new version, step number, metadata with the parent's `parents`)
    /// is stored, and the step that runs from it is returned. The writes of
    /// [deferred](Step::defer) tasks are stored with it, in one atomic step
    /// ([`Thread::close_step_with_writes`]).
    ///
    /// # Errors
    /// [`StepError::Unfinished`] naming the tasks that have not finished;
    /// as [`Thread::close_step`].
    pub async fn close(self, reducers: &Reducers) -> Result<Step> {
        let outcomes = self.outcomes().clone();
        let unfinished: Vec<String> = self
            .tasks
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| !matches!(o, Outcome::Finished(_) | Outcome::Deferred(_)))
            .map(|(t, _)| t.name.clone())
            .collect();
        if !unfinished.is_empty() {
            return Err(StepError::Unfinished {
                step: self.number,
                nodes: unfinished,
            }
            .into());
        }
        let mut finished: Vec<(String, TaskWrites<'_>)> = self
            .tasks
            .iter()
            .zip(&outcomes)
            .filter_map(|(t, o)| match o {
                Outcome::Finished(writes) | Outcome::Deferred(writes) => Some((
                    t.path.to_string(),
                    TaskWrites {
                        node: &t.name,
                        triggers: &t.triggers,
                        writes,
                    },
                )),
                _ => None,
            })
            .collect();
        // Python applies a step's writes in task-path order
        finished.sort_by(|a, b| a.0.cmp(&b.0));
        let finished: Vec<TaskWrites<'_>> = finished.into_iter().map(|(_, t)| t).collect();
        let close = StepClose {
            parent: &self.parent,
            step: self.number,
            tasks: &finished,
            reducers,
            resumed: self.resumed,
        };
        let deferred: Vec<PendingWrite> = self
            .tasks
            .iter()
            .zip(&outcomes)
            .filter_map(|(t, o)| match o {
                Outcome::Deferred(writes) => Some((t, writes)),
                _ => None,
            })
            .flat_map(|(t, writes)| {
                let path = t.path.to_string();
                writes
                    .iter()
                    .enumerate()
                    .map(move |(i, (channel, value))| PendingWrite {
                        task_id: t.id.clone(),
                        channel: channel.clone(),
                        value: value.clone(),
                        task_path: path.clone(),
                        idx: write_idx(channel, i),
                    })
            })
            .collect();
        let closed = self.thread.close_step_with_writes(close, &deferred).await?;
        let next = Step::open(&self.thread, closed)?;
        Ok(match self.outer_resume {
            Some(outer) => next.inheriting(outer),
            None => next,
        })
    }

    fn index_of(&self, task: &TaskState) -> Result<usize> {
        self.tasks.iter().position(|t| t.id == task.id).ok_or_else(|| {
            StepError::Unscheduled {
                node: task.name.clone(),
                task: task.id.clone(),
                checkpoint_id: self.parent.checkpoint.id.clone(),
                scheduled: self.tasks.iter().map(|t| t.name.clone()).collect(),
            }
            .into()
        })
    }

    async fn put(&self, at: usize, writes: &[(String, Value)]) -> Result<()> {
        let task = &self.tasks[at];
        self.thread
            .saver()
            .put_writes(&self.parent.config, writes, &task.id, &task.path.to_string())
            .await
    }

    fn outcomes(&self) -> MutexGuard<'_, Vec<Outcome>> {
        // a panic while holding the lock leaves the list whole: keep using it
        self.outcomes.lock().unwrap_or_else(|e| e.into_inner())
    }
}
