//! A small super-step runtime on the crate's step calls (which own the protocol): typed state,
//! nodes, static and conditional edges, `Send`s, joins (declared on the thread), interrupts, subgraphs,
//! crash recovery from pending writes. Python LangGraph reads and continues its threads, and back.

use checkpointer::checkpoint::channels::TASKS;
use checkpointer::prelude::*;
use checkpointer::serde::py::{Interrupt, Send as Packet};
use checkpointer::state;
use checkpointer::step::{Resume, Stop};
use checkpointer::thread::{StateUpdate, BRANCH_TO};
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A node: reads the state, returns its writes (`state::writes` of an
/// update); `?` on [`TaskContext::interrupt`] stops it.
pub type NodeFn<S> = fn(&S, &mut TaskContext) -> NodeResult;
pub type NodeResult = std::result::Result<Vec<Write>, Stop>;
/// One write of a task: (channel, value).
pub type Write = (String, Value);

/// What a node does: run a function, or a graph in its own namespace.
pub enum Action<S> {
    Run(NodeFn<S>),
    Subgraph(Box<Graph<S>>),
}

/// Where a node goes next: a node, the end, a choice or `Send`s made on the state its writes give
/// (`None` = end). A node named `START` holds the input's edge (otherwise it goes to `entry`).
pub enum Edge<S> {
    To(&'static str),
    End,
    Route(fn(&S) -> Option<&'static str>),
    Fan(fn(&S) -> Vec<Packet>),
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
    pub reducers: Reducers,
}

/// How a run ended.
#[derive(Debug)]
pub enum End<S> {
    Done(S),
    Interrupted(Vec<Interrupt>),
}

/// A run's outcome and the nodes it executed (not reused from pending writes).
#[derive(Debug)]
pub struct Run<S> {
    pub end: End<S>,
    pub ran: Vec<String>,
}

/// Knobs of a run: "crash" (return an error) right after this node's writes are saved.
#[derive(Default, Clone)]
pub struct Options {
    pub crash_after: Option<&'static str>,
}

impl<S: Serialize + DeserializeOwned + Send + Sync + 'static> Graph<S> {
    /// One `invoke`: stores `input` (state writes) as a new input checkpoint,
    /// or resumes the interrupted step with `resume`, or continues the latest
    /// step; then runs super-steps until no task is left or one interrupts.
    pub async fn invoke(
        &self,
        thread: &Thread,
        input: Option<Vec<Write>>,
        resume: Option<Value>,
        parents: Value,
        opts: &Options,
    ) -> Result<Run<S>> {
        let step = match (input, resume) {
            (Some(input), _) => thread.start(Value::map(input), Some(parents)).await?,
            (None, Some(answer)) => thread.resume(Resume::Value(answer)).await?,
            (None, None) => thread.step().await?.ok_or_else(|| Error::invalid("nothing to run"))?,
        };
        self.run(step, opts).await
    }

    /// Runs super-steps from `step` (e.g. `thread.resume(Resume::ById(…))`)
    /// until no task is left or one interrupts.
    pub fn run<'a>(&'a self, mut step: Step, opts: &'a Options) -> BoxFuture<'a, Result<Run<S>>> {
        Box::pin(async move {
            let (mut ran, mut interrupts) = (Vec::new(), Vec::new());
            while !step.tasks().is_empty() {
                for task in step.to_run() {
                    ran.push(task.name.clone());
                    let mut ctx = step.context(&task)?;
                    match self.run_task(&step, &task, &mut ctx, opts, &mut ran).await {
                        Ok(writes) => step.finish(&task, &ctx, writes).await?,
                        Err(Stop::Interrupt(interrupt)) => {
                            step.interrupt(&task, &ctx, vec![interrupt.clone()]).await?;
                            interrupts.push(interrupt);
                            continue;
                        }
                        Err(Stop::Error(e)) => return Err(e),
                    }
                    if opts.crash_after == Some(task.name.as_str()) {
                        return Err(Error::invalid(format!("crash injected after {}'s writes", task.name)));
                    }
                }
                if !interrupts.is_empty() {
                    return Ok(Run {
                        end: End::Interrupted(interrupts),
                        ran,
                    });
                }
                step = step.close(&self.reducers).await?;
            }
            Ok(Run {
                end: End::Done(step.state()?),
                ran,
            })
        })
    }

    /// Runs one task: its writes, or why it stopped.
    async fn run_task(
        &self,
        step: &Step,
        task: &TaskState,
        ctx: &mut TaskContext,
        opts: &Options,
        ran: &mut Vec<String>,
    ) -> NodeResult {
        let values = &step.parent().checkpoint.channel_values;
        if task.name == START {
            let Some(start) = self.nodes.iter().find(|n| n.name == START) else {
                return Ok(step.input_writes(&[self.entry])?);
            };
            let mut writes = step.input_writes(&[])?;
            writes.extend(self.edge_write(start, values, &writes)?);
            return Ok(writes);
        }
        let node = self.node(&task.name)?;
        // a `Send` task runs on its packet's argument, others on the state
        let state: S = task.input.as_ref().map_or_else(|| step.state(), from_value_ref)?;
        let mut writes = match &node.action {
            Action::Run(f) => f(&state, ctx)?,
            Action::Subgraph(graph) => {
                let (child, parents) = step.subgraph(task)?;
                // A rerun of the same task (after a crash or a resume)
                // continues the child's own checkpoints instead of starting
                // it again.
                let inner = match child.step().await? {
                    Some(inner) => inner,
                    None => {
                        child
                            .start(Value::map(state::to_channels(&state)?), Some(parents))
                            .await?
                    }
                };
                let run = graph.run(inner.within(step), opts).await?;
                ran.extend(run.ran.iter().map(|n| format!("{}/{n}", task.name)));
                match run.end {
                    End::Done(out) => state::to_channels(&out)?,
                    End::Interrupted(mut i) => return Err(Stop::Interrupt(i.remove(0))),
                }
            }
        };
        writes.extend(self.edge_write(node, values, &writes)?);
        Ok(writes)
    }

    fn node(&self, name: &str) -> Result<&Node<S>> {
        let found = self.nodes.iter().find(|n| n.name == name);
        found.ok_or_else(|| Error::invalid(format!("the thread runs node {name:?}, unknown here")))
    }

    /// The writes of `node`'s edge (a trigger, or `Send`s), made on the state its writes give.
    fn edge_write(&self, node: &Node<S>, values: &ChannelValues, writes: &[Write]) -> Result<Vec<Write>> {
        let after = || state::from_channels::<S>(&self.reducers.apply(values, writes)?);
        let to = match node.edge {
            Edge::To(to) => Some(to),
            Edge::End => None,
            Edge::Route(route) => route(&after()?),
            Edge::Fan(fan) => {
                return Ok(fan(&after()?)
                    .iter()
                    .map(|p| (TASKS.to_owned(), p.to_value()))
                    .collect())
            }
        };
        Ok(to
            .map(|to| (format!("{BRANCH_TO}{to}"), Value::Nil))
            .into_iter()
            .collect())
    }

    /// LangGraph's `update_state(values, as_node)`: the update goes through
    /// the reducers and the node's edge, as if the node had returned it.
    pub async fn update_state(
        &self,
        thread: &Thread,
        mut writes: Vec<Write>,
        as_node: &str,
    ) -> Result<CheckpointConfig> {
        let Some(latest) = thread.tuple(None).await? else {
            return Err(Error::invalid("update_state on an empty thread"));
        };
        writes.extend(self.edge_write(self.node(as_node)?, &latest.checkpoint.channel_values, &writes)?);
        let reducer = |channel: &str, old: Option<&Value>, new: Value| self.reducers.reduce(channel, old, new);
        let update = StateUpdate {
            writes,
            as_node,
            reducer: Some(&reducer),
        };
        thread.update_state_with(None, update).await
    }
}
