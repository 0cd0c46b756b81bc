//! A small super-step runtime on the checkpointer kit: typed state, nodes,
//! static and conditional edges, interrupts and resume, subgraphs, crash
//! recovery from pending writes. It stores what LangGraph's `StateGraph`
//! stores (channels per state field, `branch:to:<node>` triggers, one version
//! per step, Python's task ids), so Python LangGraph reads and continues its
//! threads and the other way round.

use checkpointer::checkpoint::channels::{INTERRUPT, RESUME};
use checkpointer::prelude::*;
use checkpointer::serde::py::Interrupt;
use checkpointer::state;
use checkpointer::task::{interrupt_id, task_checkpoint_ns};
use checkpointer::thread::{apply_writes, next_tasks, StateUpdate, TaskWrites, BRANCH_TO};
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Combines a channel's value with a write to it.
pub type Reducer = fn(Option<&Value>, Value) -> Result<Value>;
/// A node: reads the state, returns its writes (`state::writes` of an update).
pub type NodeFn<S> = fn(&S, &mut Ctx) -> NodeResult;
/// What a node returns; `?` on [`Ctx::interrupt`] stops it with an interrupt.
pub type NodeResult = std::result::Result<Vec<(String, Value)>, Stop>;

/// Why a node stopped without writes.
#[derive(Debug)]
pub enum Stop {
    /// It asked for input.
    Interrupt(Interrupt),
    /// It failed.
    Error(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Error(e)
    }
}

/// What a running node can ask of the runtime.
pub struct Ctx {
    resume: Option<Value>,
    used_resume: bool,
    task_ns: String,
}

impl Ctx {
    /// The resume value when the run was resumed, or an interrupt carrying
    /// `question` (the node then stops; it runs again on resume).
    pub fn interrupt(&mut self, question: Value) -> std::result::Result<Value, Stop> {
        match &self.resume {
            Some(answer) => {
                self.used_resume = true;
                Ok(answer.clone())
            }
            None => Err(Stop::Interrupt(Interrupt::new(
                question,
                interrupt_id(&self.task_ns, 0),
            ))),
        }
    }
}

/// What a node does.
pub enum Action<S> {
    /// Runs a function.
    Run(NodeFn<S>),
    /// Runs a graph in its own namespace, on the current state.
    Subgraph(Box<Graph<S>>),
}

/// Where a node goes next.
pub enum Edge<S> {
    /// Always to this node.
    To(&'static str),
    /// Nowhere.
    End,
    /// Decided on the state the node's writes give (`None` = end).
    Route(fn(&S) -> Option<&'static str>),
}

/// A node of a graph.
pub struct Node<S> {
    pub name: &'static str,
    pub action: Action<S>,
    pub edge: Edge<S>,
}

/// A graph over the typed state `S` (one channel per field).
pub struct Graph<S> {
    pub entry: &'static str,
    pub nodes: Vec<Node<S>>,
    /// Channels with a reducer; others keep the last value written.
    pub reducers: Vec<(&'static str, Reducer)>,
}

/// How a run ended.
#[derive(Debug)]
pub enum End<S> {
    Done(S),
    Interrupted(Vec<Interrupt>),
}

/// A run's outcome and the nodes it actually executed (not reused from
/// pending writes).
#[derive(Debug)]
pub struct Run<S> {
    pub end: End<S>,
    pub ran: Vec<String>,
}

/// Knobs of a run.
#[derive(Default, Clone)]
pub struct Options {
    /// "Crash" (return an error) right after this node's writes are saved.
    pub crash_after: Option<&'static str>,
}

impl<S: Serialize + DeserializeOwned + Send + Sync + 'static> Graph<S> {
    /// One `invoke`: stores `input` (state writes) as a new input checkpoint
    /// when given, resumes interrupted tasks with `resume` when given, then
    /// runs super-steps until no task is left or one interrupts.
    pub fn invoke<'a>(
        &'a self,
        thread: &'a Thread,
        input: Option<Vec<(String, Value)>>,
        resume: Option<Value>,
        parents: Value,
        opts: &'a Options,
    ) -> BoxFuture<'a, Result<Run<S>>> {
        Box::pin(async move {
            let saver = thread.saver();
            let mut latest = thread.tuple(None).await?;
            if let Some(input) = input {
                let stored = thread.put_input(latest.as_ref(), Value::map(input), Some(parents.clone()));
                latest = Some(stored.await?);
            }
            let mut latest = latest.ok_or_else(|| Error::invalid("nothing to run: no input and no checkpoint"))?;
            let (mut resume, mut ran) = (resume, Vec::new());
            loop {
                let tasks = next_tasks(
                    &latest.checkpoint,
                    thread.namespace(),
                    &latest.metadata,
                    &latest.pending_writes,
                )?;
                if tasks.is_empty() {
                    let values = state::from_channels(&latest.checkpoint.channel_values)?;
                    return Ok(Run {
                        end: End::Done(values),
                        ran,
                    });
                }
                if let Some(answer) = &resume {
                    saver
                        .put_writes(&latest.config, &[(RESUME.to_owned(), answer.clone())], NULL_TASK_ID, "")
                        .await?;
                }
                let (mut done, mut interrupts) = (Vec::new(), Vec::new());
                for task in tasks {
                    if task.is_done() {
                        let writes = task
                            .writes
                            .iter()
                            .map(|w| (w.channel.clone(), w.value.clone()))
                            .collect();
                        done.push((task, writes));
                        continue;
                    }
                    ran.push(task.name.clone());
                    match self
                        .run_task(thread, &latest, &task, resume.clone(), &parents, opts, &mut ran)
                        .await?
                    {
                        Ok(writes) => {
                            saver
                                .put_writes(&latest.config, &writes, &task.id, &task.path.to_string())
                                .await?;
                            if opts.crash_after == Some(task.name.as_str()) {
                                return Err(Error::invalid(format!("crash injected after {}'s writes", task.name)));
                            }
                            done.push((task, writes));
                        }
                        Err(interrupt) => {
                            let write = [(INTERRUPT.to_owned(), Value::from(vec![interrupt.to_value()]))];
                            saver
                                .put_writes(&latest.config, &write, &task.id, &task.path.to_string())
                                .await?;
                            interrupts.push(interrupt);
                        }
                    }
                }
                if !interrupts.is_empty() {
                    return Ok(Run {
                        end: End::Interrupted(interrupts),
                        ran,
                    });
                }
                let n = latest.metadata.step().unwrap_or(-1) + 1;
                let step = self.apply(saver.as_ref(), &latest.checkpoint, n, &done, resume.take().is_some())?;
                latest = saver
                    .put_step(&latest.config, &step, &meta(CheckpointSource::Loop, n, &parents))
                    .await?;
            }
        })
    }

    /// Runs one task: its writes, or the interrupt it stopped with.
    #[allow(clippy::too_many_arguments)]
    async fn run_task(
        &self,
        thread: &Thread,
        latest: &CheckpointTuple,
        task: &TaskState,
        resume: Option<Value>,
        parents: &Value,
        opts: &Options,
        ran: &mut Vec<String>,
    ) -> Result<std::result::Result<Vec<(String, Value)>, Interrupt>> {
        let values = &latest.checkpoint.channel_values;
        if task.name == START {
            // the input node: the input's fields, then the entry edge
            let input = values.get(START).and_then(Value::as_map).unwrap_or_default();
            let mut writes: Vec<(String, Value)> = input
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.clone())))
                .collect();
            writes.push((format!("{BRANCH_TO}{}", self.entry), Value::Nil));
            return Ok(Ok(writes));
        }
        let node = self
            .nodes
            .iter()
            .find(|n| n.name == task.name)
            .ok_or_else(|| Error::invalid(format!("the stored thread runs node {:?}, unknown here", task.name)))?;
        let task_ns = task_checkpoint_ns(thread.namespace(), &task.name, &task.id);
        let state: S = state::from_channels(values)?;
        let mut writes = match &node.action {
            Action::Run(f) => {
                let mut ctx = Ctx {
                    resume,
                    used_resume: false,
                    task_ns,
                };
                match f(&state, &mut ctx) {
                    Ok(mut writes) => {
                        if ctx.used_resume {
                            let answer = ctx.resume.take().unwrap_or_default();
                            writes.insert(0, (RESUME.to_owned(), Value::from(vec![answer])));
                        }
                        writes
                    }
                    Err(Stop::Interrupt(i)) => return Ok(Err(i)),
                    Err(Stop::Error(e)) => return Err(e),
                }
            }
            Action::Subgraph(graph) => {
                let mut parents = parents.as_map().unwrap_or_default().to_vec();
                parents.push((
                    Value::from(thread.namespace()),
                    Value::from(latest.checkpoint.id.as_str()),
                ));
                let child = thread.in_namespace(task_ns);
                // A rerun of the same task (after a crash) continues the
                // child's own checkpoints instead of starting it again.
                let started = child.tuple(None).await?.is_some();
                let input = if started {
                    None
                } else {
                    Some(state::to_channels(&state)?)
                };
                let run = graph
                    .invoke(&child, input, None, Value::Map(parents.into()), opts)
                    .await?;
                ran.extend(run.ran.iter().map(|n| format!("{}/{n}", task.name)));
                match run.end {
                    End::Done(out) => state::to_channels(&out)?,
                    End::Interrupted(mut i) => return Ok(Err(i.remove(0))),
                }
            }
        };
        if let Some(edge) = self.edge_write(node, values, &writes)? {
            writes.push(edge);
        }
        Ok(Ok(writes))
    }

    /// The trigger write of `node`'s edge, routed on the state its writes give.
    fn edge_write(
        &self,
        node: &Node<S>,
        values: &ChannelValues,
        writes: &[(String, Value)],
    ) -> Result<Option<(String, Value)>> {
        let to = match node.edge {
            Edge::To(to) => Some(to),
            Edge::End => None,
            Edge::Route(route) => {
                let mut after = values.clone();
                for (channel, value) in writes.iter().filter(|(c, _)| !c.starts_with("__")) {
                    let new = self.reduce(channel, after.get(channel), value.clone())?;
                    after.insert(channel.clone(), new);
                }
                route(&state::from_channels(&after)?)
            }
        };
        Ok(to.map(|to| (format!("{BRANCH_TO}{to}"), Value::Nil)))
    }

    /// LangGraph's `update_state(values, as_node)`: the update goes through
    /// the reducers and the node's edge, as if the node had returned it.
    pub async fn update_state(
        &self,
        thread: &Thread,
        values: Vec<(String, Value)>,
        as_node: &str,
    ) -> Result<CheckpointConfig> {
        let node = self
            .nodes
            .iter()
            .find(|n| n.name == as_node)
            .ok_or_else(|| Error::invalid(format!("no node {as_node:?}")))?;
        let latest = thread
            .tuple(None)
            .await?
            .ok_or_else(|| Error::invalid("update_state on an empty thread"))?;
        let mut writes = values;
        if let Some(edge) = self.edge_write(node, &latest.checkpoint.channel_values, &writes)? {
            writes.push(edge);
        }
        let reduce = |channel: &str, old: Option<&Value>, new: Value| self.reduce(channel, old, new);
        let update = StateUpdate {
            writes,
            as_node,
            reducer: Some(&reduce),
        };
        thread.update_state_with(None, update).await
    }

    fn reduce(&self, channel: &str, old: Option<&Value>, new: Value) -> Result<Value> {
        match self.reducers.iter().find(|(c, _)| *c == channel) {
            Some((_, reducer)) => reducer(old, new),
            None => Ok(new),
        }
    }

    /// The next checkpoint (the kit's `apply_writes`, with this graph's
    /// reducers); a resumed step records what the interrupt saw, as Python.
    fn apply(
        &self,
        saver: &dyn CheckpointSaver,
        parent: &Checkpoint,
        n: i64,
        done: &[(TaskState, Vec<(String, Value)>)],
        resumed: bool,
    ) -> Result<StepCheckpoint> {
        let tasks: Vec<TaskWrites> = done
            .iter()
            .map(|(t, w)| TaskWrites {
                node: &t.name,
                triggers: &t.triggers,
                writes: w,
            })
            .collect();
        let version = saver.get_next_version(parent.max_version())?;
        let reduce = |channel: &str, old: Option<&Value>, new: Value| self.reduce(channel, old, new);
        let mut step = apply_writes(parent, n, &tasks, &version, Some(&reduce))?;
        if resumed {
            let seen = parent.channel_versions.clone();
            step.checkpoint_mut().versions_seen.insert(INTERRUPT.to_owned(), seen);
        }
        Ok(step)
    }
}

fn meta(source: CheckpointSource, step: i64, parents: &Value) -> CheckpointMetadata {
    let mut m = CheckpointMetadata::new(source, step);
    m.insert("parents", parents.clone());
    m
}
