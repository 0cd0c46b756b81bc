//! A small super-step runtime on the crate's step calls (which own the protocol): typed state,
//! nodes, static and conditional edges, `Send`s, joins (declared on the thread), interrupts, subgraphs,
//! crash recovery from pending writes. Python LangGraph reads and continues its threads, and back.

use checkpointer::checkpoint::channels::TASKS;
use checkpointer::prelude::*;
use checkpointer::serde::py::{Interrupt, Send as Packet};
use checkpointer::state;
use checkpointer::step::{goto, Resume, Stop};
use checkpointer::thread::StateUpdate;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A node's writes (channel, value), or why it stopped.
pub type NodeResult = std::result::Result<Vec<(String, Value)>, Stop>;

/// What a node does: run a function, or a graph in its own namespace.
pub enum Action<S> {
    /// Reads the state, returns its writes (`state::writes` of an update); `?` on [`TaskContext::interrupt`] stops it.
    Run(fn(&S, &mut TaskContext) -> NodeResult),
    Subgraph(Box<Graph<S>>),
}

/// Where a node or the input goes: a node, the end, a choice (`None` = end) or `Send`s on the state its writes give.
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

/// A graph over the typed state `S` (one channel per field); `start` is the input's edge.
pub struct Graph<S> {
    pub start: Edge<S>,
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
    /// One `invoke`: stores `input` (state writes) as a new input checkpoint, or resumes the interrupted step with
    /// `resume`, or continues the latest step; then runs super-steps until no task is left or one interrupts.
    pub async fn invoke(
        &self,
        thread: &Thread,
        input: Option<Vec<(String, Value)>>,
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

    /// Runs super-steps from `step` (e.g. `thread.resume(Resume::ById(…))`) until no task is left or one interrupts.
    pub fn run<'a>(&'a self, mut step: Step, opts: &'a Options) -> BoxFuture<'a, Result<Run<S>>> {
        Box::pin(async move {
            let (mut ran, mut interrupts) = (Vec::new(), Vec::new());
            while !step.tasks().is_empty() {
                for task in step.to_run() {
                    ran.push(task.name.clone());
                    let mut ctx = step.context(&task)?;
                    let outcome = self.run_task(&step, &task, &mut ctx, opts, &mut ran).await;
                    if let Some(interrupt) = step.record(&task, &ctx, outcome).await? {
                        interrupts.push(interrupt);
                    } else if opts.crash_after == Some(task.name.as_str()) {
                        return Err(Error::invalid(format!("crash injected after {}'s writes", task.name)));
                    }
                }
                if !interrupts.is_empty() {
                    let end = End::Interrupted(interrupts);
                    return Ok(Run { end, ran });
                }
                step = step.close(&self.reducers).await?;
            }
            let end = End::Done(step.state()?);
            Ok(Run { end, ran })
        })
    }

    /// Runs one task: its writes and its edge's, or why it stopped.
    async fn run_task(
        &self,
        step: &Step,
        task: &TaskState,
        ctx: &mut TaskContext,
        opts: &Options,
        ran: &mut Vec<String>,
    ) -> NodeResult {
        let (mut writes, edge) = if task.name == START {
            (step.input_writes(&[])?, &self.start)
        } else {
            let node = self.node(&task.name)?;
            // a `Send` task runs on its packet's argument, others on the state
            let state: S = task.input.as_ref().map_or_else(|| step.state(), from_value_ref)?;
            let writes = match &node.action {
                Action::Run(f) => f(&state, ctx)?,
                Action::Subgraph(graph) => {
                    // a rerun (after a crash or a resume) continues the subgraph
                    let inner = step.enter(task, Value::map(state::to_channels(&state)?)).await?;
                    let run = graph.run(inner, opts).await?;
                    ran.extend(run.ran.iter().map(|n| format!("{}/{n}", task.name)));
                    match run.end {
                        End::Done(out) => state::to_channels(&out)?,
                        End::Interrupted(mut i) => return Err(Stop::Interrupt(i.remove(0))),
                    }
                }
            };
            (writes, &node.edge)
        };
        let (to, sends) = Self::follow(edge, || step.state_after(&writes, &self.reducers))?;
        match (edge, to) {
            // a conditional edge's choice is stored with its sends, after the node's join writes (Python's order)
            (Edge::Route(_), Some(to)) => ctx.route(to)?,
            _ => writes.extend(to.map(goto)),
        }
        sends.into_iter().try_for_each(|s| ctx.send(&s.node, s.arg))?;
        Ok(writes)
    }

    /// The node `edge` triggers and the `Send`s it makes, routed on the state `after` gives.
    fn follow(edge: &Edge<S>, after: impl FnOnce() -> Result<S>) -> Result<(Option<&'static str>, Vec<Packet>)> {
        Ok(match *edge {
            Edge::To(to) => (Some(to), Vec::new()),
            Edge::End => (None, Vec::new()),
            Edge::Route(route) => (route(&after()?), Vec::new()),
            Edge::Fan(fan) => (None, fan(&after()?)),
        })
    }

    fn node(&self, name: &str) -> Result<&Node<S>> {
        let found = self.nodes.iter().find(|n| n.name == name);
        found.ok_or_else(|| Error::invalid(format!("the thread runs node {name:?}, unknown here")))
    }

    /// LangGraph's `update_state(values, as_node)`: the update goes through the reducers and the node's edge, as if the
    /// node had returned it (its `Send`s written as stored: no task runs, so no task context makes them).
    pub async fn update_state(
        &self,
        thread: &Thread,
        mut writes: Vec<(String, Value)>,
        as_node: &str,
    ) -> Result<CheckpointConfig> {
        let latest = thread.step().await?.ok_or(Error::invalid("no state to update"))?;
        let edge = &self.node(as_node)?.edge;
        let (to, sends) = Self::follow(edge, || latest.state_after(&writes, &self.reducers))?;
        writes.extend(to.map(goto));
        writes.extend(sends.iter().map(|s| (TASKS.to_owned(), s.to_value())));
        let reducer = |channel: &str, old: Option<&Value>, new: Value| self.reducers.reduce(channel, old, new);
        let update = StateUpdate {
            writes,
            as_node,
            reducer: Some(&reducer),
        };
        thread.update_state_with(None, update).await
    }
}
