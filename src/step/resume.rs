//! Interrupts and resumes, as LangGraph 1.x stores them.
//!
//! A task that stops for input stores an `__interrupt__` write of its
//! `Interrupt`s. The id of a task's interrupt is
//! [`interrupt_id`](crate::task::interrupt_id)`(task namespace, n)`, `n`
//! being how many answers the task already has. The answers live in the
//! task's own `__resume__` write (the list of answers, oldest first); a
//! resume without an id (`Command(resume=value)`) is stored once, under
//! [`NULL_TASK_ID`], and taken by the first task of the step that asks for
//! an answer it does not have. A resume by id (`Command(resume={id:
//! value})`) goes to the task whose pending interrupt has that id: LangGraph
//! keeps it in memory until the task runs and then stores the task's grown
//! `__resume__` list; [`Thread::resume`] stores that same list at once, so a
//! crash in between loses nothing and Python reads the same row.
//!
//! An interrupt raised inside a subgraph is stored twice: under the
//! subgraph's task, in the subgraph's namespace, and under the task that ran
//! the subgraph, in the enclosing one (its `__interrupt__` write, with the
//! same id). A resume by that id from the enclosing thread goes down to the
//! subgraph's task: its `__resume__` list grows in the subgraph's namespace,
//! and the enclosing task stores no answer, as LangGraph passes a resume map
//! down. A resume without an id is stored in the enclosing namespace and the
//! subgraph's tasks take it from there ([`Step::within`]).

use std::sync::{Arc, Mutex};

use super::{Step, StepError, Topology};
use crate::checkpoint::channels::{RESUME, TASKS};
use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::serde::py::{Interrupt, Send};
use crate::serde::Value;
use crate::task::{interrupt_id, task_checkpoint_ns, NULL_TASK_ID};
use crate::thread::{TaskState, Thread};

/// An answer to pending interrupts.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// `Command(resume=value)`: answers the one pending interrupt.
    Value(Value),
    /// `Command(resume={interrupt_id: value, …})`: answers interrupts by id,
    /// those raised inside a subgraph too.
    ById(Vec<(String, Value)>),
}

/// The answers a task has received: its `__resume__` write (a list, or one
/// value as older runtimes stored it).
pub(super) fn answers_of(task: &TaskState) -> Vec<Value> {
    match task.writes.iter().rev().find(|w| w.channel == RESUME).map(|w| &w.value) {
        Some(Value::Array(items)) => items.to_vec(),
        Some(one) => vec![one.clone()],
        None => Vec::new(),
    }
}

/// A task's interrupts still waiting for an answer: the latest it raised,
/// when it has not finished.
fn pending_of(task: &TaskState) -> Vec<String> {
    if task.is_done() {
        return Vec::new();
    }
    task.interrupts
        .iter()
        .filter_map(|i| Interrupt::from_value(i).ok().map(|i| i.id))
        .collect()
}

impl Thread {
    /// Resumes the thread's interrupted step with `resume`, and opens that
    /// step again (marked [`Step::resuming`]): the tasks that ask for the
    /// answers get them from their [`TaskContext`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    /// use checkpointer::step::{Resume, StepError};
    ///
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
    /// let step = thread.start(Value::map::<&str>([]), None).await?;
    /// let err = thread.resume(Resume::Value(Value::from("yes"))).await.unwrap_err();
    /// assert!(matches!(err.as_step(), Some(StepError::NoPendingInterrupt { .. })));
    /// # let _ = step;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`StepError::NoPendingInterrupt`] when no interrupt waits;
    /// [`StepError::AmbiguousResume`] for a [`Resume::Value`] while several
    /// wait; [`StepError::UnknownInterrupt`] for ids that are not pending
    /// (here or, for a subgraph's, in its namespace);
    /// [`Error::InvalidInput`] for an empty [`Resume::ById`], or two answers
    /// for interrupts one task raised at once; the saver's.
    pub async fn resume(&self, resume: Resume) -> Result<Step> {
        let latest = self.tuple(None).await?.ok_or_else(|| StepError::NoPendingInterrupt {
            thread_id: self.thread_id().to_owned(),
        })?;
        let tasks = latest.next_tasks_in(self.topology())?;
        let pending: Vec<(usize, String)> = tasks
            .iter()
            .enumerate()
            .flat_map(|(i, t)| pending_of(t).into_iter().map(move |id| (i, id)))
            .collect();
        let pending_ids = || pending.iter().map(|(_, id)| id.clone()).collect::<Vec<_>>();
        if pending.is_empty() {
            return Err(StepError::NoPendingInterrupt {
                thread_id: self.thread_id().to_owned(),
            }
            .into());
        }
        let saver = self.saver();
        match resume {
            Resume::Value(answer) => {
                if pending.len() > 1 {
                    return Err(StepError::AmbiguousResume { pending: pending_ids() }.into());
                }
                let write = [(RESUME.to_owned(), answer)];
                saver.put_writes(&latest.config, &write, NULL_TASK_ID, "").await?;
            }
            Resume::ById(answers) => {
                if answers.is_empty() {
                    return Err(Error::invalid("a resume by id names no interrupt"));
                }
                let unknown: Vec<String> = answers
                    .iter()
                    .filter(|(id, _)| !pending.iter().any(|(_, p)| p == id))
                    .map(|(id, _)| id.clone())
                    .collect();
                if !unknown.is_empty() {
                    return Err(StepError::UnknownInterrupt {
                        ids: unknown,
                        pending: pending_ids(),
                    }
                    .into());
                }
                // Find every answer's task first (in a subgraph's namespace
                // when a subgraph raised it), then store: nothing is stored
                // when one cannot be placed.
                let mut stores: Vec<(CheckpointConfig, TaskState, Vec<Value>)> = Vec::new();
                for (id, answer) in &answers {
                    let (config, task) = self.asker_of(&latest, &tasks, id).await?;
                    if let Some((_, _, _)) = stores.iter().find(|(c, t, _)| *c == config && t.id == task.id) {
                        return Err(Error::invalid(format!(
                            "interrupt {id} and another answered interrupt were raised by one task at once: answer one at a time"
                        )));
                    }
                    let mut list = answers_of(&task);
                    list.push(answer.clone());
                    stores.push((config, task, list));
                }
                for (config, task, list) in stores {
                    let write = [(RESUME.to_owned(), Value::from(list))];
                    saver
                        .put_writes(&config, &write, &task.id, &task.path.to_string())
                        .await?;
                }
            }
        }
        let reread = self.tuple(latest.config.checkpoint_id()).await?;
        let reread = reread.ok_or_else(|| Error::invalid("the resumed checkpoint disappeared"))?;
        Ok(Step::open(self, reread)?.resuming())
    }
}

impl Thread {
    /// The task that raised pending interrupt `id`, and the checkpoint it
    /// runs from: a task of `latest` (this namespace) when `id` is its own
    /// next interrupt, else, when the task ran a subgraph that stopped with
    /// it, the task of the subgraph's namespace that raised it, one
    /// namespace down at a time (no recursion; as deep as the stored
    /// namespaces go). LangGraph passes a by-id answer down to the
    /// subgraph's task the same way (its resume map).
    async fn asker_of(
        &self,
        latest: &CheckpointTuple,
        tasks: &[TaskState],
        id: &str,
    ) -> Result<(CheckpointConfig, TaskState)> {
        let mut thread = self.clone();
        let mut config = latest.config.clone();
        let mut tasks = tasks.to_vec();
        loop {
            let Some(task) = tasks.iter().find(|t| pending_of(t).iter().any(|p| p == id)) else {
                return Err(StepError::UnknownInterrupt {
                    ids: vec![id.to_owned()],
                    pending: tasks.iter().flat_map(pending_of).collect(),
                }
                .into());
            };
            let ns = task_checkpoint_ns(thread.namespace(), &task.name, &task.id);
            let own = [interrupt_id(&ns, answers_of(task).len()), interrupt_id(&ns, 0)];
            if own.iter().any(|o| o == id) {
                return Ok((config, task.clone()));
            }
            thread = thread.in_namespace(ns);
            let Some(inner) = thread.tuple(None).await? else {
                return Err(Error::invalid(format!(
                    "interrupt {id} was raised in the subgraph of task {:?} ({}), whose namespace stores no checkpoint",
                    task.name, task.id
                )));
            };
            tasks = inner.next_tasks()?;
            config = inner.config;
        }
    }
}

/// Why a task stopped without writes: what a runtime's node returns as its
/// error, so that `?` on [`TaskContext::interrupt`] (and on the crate's
/// calls) stops it.
#[derive(Debug)]
pub enum Stop {
    /// It asked for input: store it with [`Step::interrupt`].
    Interrupt(Interrupt),
    /// It failed.
    Error(Error),
}

impl From<Interrupt> for Stop {
    fn from(interrupt: Interrupt) -> Self {
        Stop::Interrupt(interrupt)
    }
}

impl From<Error> for Stop {
    fn from(error: Error) -> Self {
        Stop::Error(error)
    }
}

/// Where a task runs: its namespace and the answers to its interrupts, as
/// LangGraph's `interrupt()` reads them.
#[derive(Debug)]
pub struct TaskContext {
    ns: String,
    answers: Vec<Value>,
    asked: usize,
    null_resume: Arc<Mutex<Option<Value>>>,
    resume_sends: Vec<Value>,
    topology: Option<Arc<Topology>>,
    sends: Vec<Send>,
}

impl TaskContext {
    pub(super) fn new(
        ns: String,
        answers: Vec<Value>,
        null_resume: Arc<Mutex<Option<Value>>>,
        topology: Option<Arc<Topology>>,
    ) -> Self {
        TaskContext {
            ns,
            answers,
            asked: 0,
            null_resume,
            resume_sends: Vec::new(),
            topology,
            sends: Vec::new(),
        }
    }

    /// LangGraph's `Send(node, arg)` from this task: the next step runs
    /// `node` once on `arg` (a push task, see
    /// [`TaskState::input`](crate::thread::TaskState::input)).
    /// [`Step::finish`] stores the task's sends after its other writes, as
    /// Python stores a conditional edge's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    /// use checkpointer::step::{StepError, Topology};
    ///
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t").with_topology(Topology::new(["worker"]));
    /// let step = thread.start(Value::map([("items", Value::from(vec![1, 2]))]), None).await?;
    /// let task = &step.to_run()[0];
    /// let mut ctx = step.context(task)?;
    /// for item in [1, 2] {
    ///     ctx.send("worker", Value::map([("item", Value::from(item))]))?;
    /// }
    /// let err = ctx.send("nobody", Value::Nil).unwrap_err();
    /// assert!(matches!(err.as_step(), Some(StepError::UnknownNode { .. })));
    /// step.finish(task, &ctx, step.input_writes(&[])?).await?;
    ///
    /// let step = step.close(&Reducers::new()).await?;
    /// let inputs: Vec<_> = step.tasks().iter().map(|t| (t.name.as_str(), t.input.clone())).collect();
    /// assert_eq!(inputs, [
    ///     ("worker", Some(Value::map([("item", Value::from(1))]))),
    ///     ("worker", Some(Value::map([("item", Value::from(2))]))),
    /// ]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`StepError::UnknownNode`] when the thread's graph does not declare
    /// `node` (or no graph is declared).
    pub fn send(&mut self, node: &str, arg: impl Into<Value>) -> Result<()> {
        if !self.topology.as_deref().is_some_and(|t| t.has_node(node)) {
            return Err(StepError::UnknownNode {
                node: node.to_owned(),
                declared: self.topology.as_deref().map(|t| t.nodes().to_vec()).unwrap_or_default(),
            }
            .into());
        }
        self.sends.push(Send::new(node, arg));
        Ok(())
    }

    /// The `__pregel_tasks` writes of the task's sends, in order.
    pub fn send_writes(&self) -> Vec<(String, Value)> {
        self.sends.iter().map(|s| (TASKS.to_owned(), s.to_value())).collect()
    }

    /// The namespace the task runs in (`node:task_id`, under the step's):
    /// its subgraph's namespace and the base of its interrupt ids.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// The answer to the task's next interrupt (counting the calls, as
    /// LangGraph's `interrupt()` does), `None` when it has none: the task
    /// then stops with [`TaskContext::interrupt`]'s interrupt. Answers come
    /// from the task's stored `__resume__` list, then from a resume stored
    /// without an id (taken once per step, by the first task that asks).
    pub fn resume_value(&mut self) -> Option<Value> {
        let asked = self.asked;
        self.asked = self.asked.saturating_add(1);
        if let Some(answer) = self.answers.get(asked) {
            self.resume_sends.push(Value::from(self.answers[..=asked].to_vec()));
            return Some(answer.clone());
        }
        if asked != self.answers.len() {
            return None;
        }
        let answer = self.null_resume.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        self.answers.push(answer.clone());
        self.resume_sends.push(Value::from(self.answers.clone()));
        Some(answer)
    }

    /// LangGraph's `interrupt(value)`: the answer when the task has one
    /// ([`TaskContext::resume_value`]), or the [`Interrupt`] to stop with,
    /// with the id Python gives it. Store it with [`Step::interrupt`].
    ///
    /// # Errors
    /// The interrupt, when there is no answer.
    pub fn interrupt(&mut self, value: impl Into<Value>) -> std::result::Result<Value, Interrupt> {
        match self.resume_value() {
            Some(answer) => Ok(answer),
            None => Err(Interrupt::new(value, interrupt_id(&self.ns, self.answers.len()))),
        }
    }

    /// The `__resume__` writes of the answers the task used: one per
    /// answered interrupt, each the list of answers up to it, as LangGraph's
    /// `interrupt()` sends them. [`Step::finish`] and [`Step::interrupt`]
    /// store them first among the task's writes (the saver keeps the last;
    /// they also give the task's other writes Python's indexes).
    pub fn resume_writes(&self) -> Vec<(String, Value)> {
        self.resume_sends
            .iter()
            .map(|v| (RESUME.to_owned(), v.clone()))
            .collect()
    }
}
