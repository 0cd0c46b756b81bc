//! The calls that take the last glue out of a runtime's task loop: a task's
//! outcome recorded in one call, the edge to a node as a write, and the
//! state a conditional edge routes on.

use ::serde::de::DeserializeOwned;

use super::{Step, Stop};
use crate::error::Result;
use crate::reducer::Reducers;
use crate::serde::py::Interrupt;
use crate::serde::Value;
use crate::thread::{TaskState, BRANCH_TO};

/// The write that runs `node` in the next step: an edge to it (the value
/// `None` on its trigger channel `branch:to:<node>`, as LangGraph writes it).
///
/// ```
/// use checkpointer::prelude::*;
/// assert_eq!(checkpointer::step::goto("review"), ("branch:to:review".to_owned(), Value::Nil));
/// ```
pub fn goto(node: &str) -> (String, Value) {
    (format!("{BRANCH_TO}{node}"), Value::Nil)
}

impl Step {
    /// Records what became of `task`, run in `ctx`: its writes
    /// ([`Step::finish`]), or the interrupt it stopped with
    /// ([`Step::interrupt`], returned so that the caller can show it), or
    /// its error (returned, nothing stored: the task runs again next time).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    /// use checkpointer::step::{goto, Stop};
    ///
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
    /// let step = thread.start(Value::map::<&str>([]), None).await?;
    /// let task = &step.to_run()[0];
    /// let ctx = step.context(task)?;
    /// assert!(step.record(task, &ctx, Ok(vec![goto("ask")])).await?.is_none());
    /// let step = step.close(&Reducers::new()).await?;
    /// let task = &step.to_run()[0];
    /// let mut ctx = step.context(task)?;
    /// let outcome = ctx.interrupt("ok?").map(|_| Vec::new()).map_err(Stop::from);
    /// let asked = step.record(task, &ctx, outcome).await?.expect("it asked");
    /// assert_eq!(asked.value, Value::from("ok?"));
    /// assert!(step.is_interrupted());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// The task's own error for [`Stop::Error`]; as [`Step::finish`] and
    /// [`Step::interrupt`].
    pub async fn record(
        &self,
        task: &TaskState,
        ctx: &super::TaskContext,
        outcome: std::result::Result<Vec<(String, Value)>, Stop>,
    ) -> Result<Option<Interrupt>> {
        match outcome {
            Ok(writes) => self.finish(task, ctx, writes).await.map(|()| None),
            Err(Stop::Interrupt(interrupt)) => {
                self.interrupt(task, ctx, vec![interrupt.clone()]).await?;
                Ok(Some(interrupt))
            }
            Err(Stop::Error(e)) => Err(e),
        }
    }

    /// The state after `writes` (a task's own, the runtime's channels
    /// skipped) go through `reducers` onto the parent's channels: what a
    /// conditional edge routes on.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use std::sync::Arc;
    /// use checkpointer::prelude::*;
    /// use checkpointer::reducer::append;
    ///
    /// #[derive(serde::Deserialize)]
    /// struct State { log: Vec<String> }
    ///
    /// let thread = Thread::new(Arc::new(InMemorySaver::new()), "t");
    /// let step = thread.start(Value::map([("log", Value::from(vec!["a"]))]), None).await?;
    /// let reducers = Reducers::new().field("log", append::<String>);
    /// let writes = step.input_writes(&[])?;
    /// let after: State = step.state_after(&writes, &reducers)?;
    /// assert_eq!(after.log, ["a"]); // appended to the empty list the parent holds
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Reducers::apply`] and
    /// [`state::from_channels`](crate::state::from_channels).
    pub fn state_after<S: DeserializeOwned>(&self, writes: &[(String, Value)], reducers: &Reducers) -> Result<S> {
        crate::state::from_channels(&reducers.apply(&self.parent().checkpoint.channel_values, writes)?)
    }
}
