//! What a runtime declares about its graph that the rows alone do not say:
//! its nodes (the targets a `Send` may name) and its join edges.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::thread::BRANCH_TO;

/// The prefix of a join edge's barrier channel: `join:<a>+<b>:<node>`.
pub const JOIN: &str = "join:";

/// The nodes of a graph and its join edges, declared by the runtime
/// ([`Thread::with_topology`](crate::thread::Thread::with_topology)).
///
/// With it, the step calls
/// * give each node the triggers Python gives it (`branch:to:<node>` and the
///   barrier of every join into it, whether written yet or not), so task ids
///   of a join's target are Python's, and list pull tasks in declaration
///   order, as Python's `next` does;
/// * refuse a `Send` to an undeclared node
///   ([`StepError::UnknownNode`](super::StepError::UnknownNode));
/// * add a finished task's write to the barrier of each join it is a source
///   of ([`Step::finish`](super::Step::finish)).
///
/// ```
/// use checkpointer::step::Topology;
///
/// let graph = Topology::new(["a", "b", "c"]).join(&["a", "b"], "c")?;
/// assert_eq!(graph.joins()[0].channel(), "join:a+b:c");
/// assert_eq!(graph.triggers("c"), ["branch:to:c", "join:a+b:c"]);
/// assert!(graph.has_node("a") && !graph.has_node("z"));
/// assert!(Topology::new(["a"]).join(&["a", "z"], "a").is_err());
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<String>,
    joins: Vec<Join>,
    /// The nodes, sorted, for lookups in O(log n).
    sorted: Vec<String>,
    /// Each join's barrier channel and its index in `joins`, sorted.
    barriers: BTreeMap<String, usize>,
    /// Each node's join barriers, in and out, in declaration order.
    into: BTreeMap<String, Vec<String>>,
    out_of: BTreeMap<String, Vec<String>>,
}

/// A join edge: `target` runs once every node of `sources` has finished
/// (LangGraph's `add_edge([a, b], c)`, a `NamedBarrierValue` channel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Join {
    /// The nodes waited for, in the order the edge names them.
    pub sources: Vec<String>,
    /// The node that runs once all have written.
    pub target: String,
}

impl Join {
    /// The barrier channel: `join:` + the sources joined by `+` + `:` +
    /// the target, as Python names it.
    ///
    /// ```
    /// use checkpointer::step::Join;
    /// let join = Join { sources: vec!["a".into(), "b".into()], target: "c".into() };
    /// assert_eq!(join.channel(), "join:a+b:c");
    /// ```
    pub fn channel(&self) -> String {
        format!("{JOIN}{}:{}", self.sources.join("+"), self.target)
    }

    /// The join a barrier channel's name describes, `None` for other
    /// channels: the target after the last `:` (node names hold no `:`),
    /// the sources split on `+`.
    ///
    /// ```
    /// use checkpointer::step::Join;
    /// let join = Join::parse("join:a+b:c").unwrap();
    /// assert_eq!((join.sources, join.target), (vec!["a".to_owned(), "b".to_owned()], "c".to_owned()));
    /// assert!(Join::parse("branch:to:c").is_none());
    /// ```
    pub fn parse(channel: &str) -> Option<Join> {
        let (sources, target) = channel.strip_prefix(JOIN)?.rsplit_once(':')?;
        if sources.is_empty() || target.is_empty() {
            return None;
        }
        Some(Join {
            sources: sources.split('+').map(str::to_owned).collect(),
            target: target.to_owned(),
        })
    }
}

impl Topology {
    /// A graph of `nodes` (without `__start__`), in declaration order, and
    /// no join edges.
    pub fn new<I, N>(nodes: I) -> Topology
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(Into::into).collect();
        let mut sorted = nodes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        Topology {
            nodes,
            sorted,
            ..Topology::default()
        }
    }

    /// The same graph with the join edge `sources → target`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `sources` is empty or a node is not
    /// declared.
    pub fn join(mut self, sources: &[&str], target: &str) -> Result<Topology> {
        if sources.is_empty() {
            return Err(Error::invalid(format!("a join into {target:?} waits for no node")));
        }
        if let Some(unknown) = sources.iter().chain([&target]).find(|n| !self.has_node(n)) {
            return Err(Error::invalid(format!(
                "the join into {target:?} names node {unknown:?}, which is not declared"
            )));
        }
        let join = Join {
            sources: sources.iter().map(|s| (*s).to_owned()).collect(),
            target: target.to_owned(),
        };
        let channel = join.channel();
        if self.barriers.contains_key(&channel) {
            return Ok(self);
        }
        self.barriers.insert(channel.clone(), self.joins.len());
        self.into.entry(target.to_owned()).or_default().push(channel.clone());
        let mut distinct = sources.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        for source in distinct {
            self.out_of.entry(source.to_owned()).or_default().push(channel.clone());
        }
        self.joins.push(join);
        Ok(self)
    }

    /// The declared nodes, in declaration order.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// The declared join edges.
    pub fn joins(&self) -> &[Join] {
        &self.joins
    }

    /// Whether `node` is declared.
    pub fn has_node(&self, node: &str) -> bool {
        self.sorted.binary_search_by(|n| n.as_str().cmp(node)).is_ok()
    }

    /// The channels that trigger `node`, sorted, as Python's `StateGraph`
    /// declares them: `branch:to:<node>` and the barrier of every join into
    /// it.
    pub fn triggers(&self, node: &str) -> Vec<String> {
        let mut triggers = vec![format!("{BRANCH_TO}{node}")];
        triggers.extend(self.into.get(node).into_iter().flatten().cloned());
        triggers.sort_unstable();
        triggers
    }

    /// The barrier channels `node` writes when it finishes: one per join it
    /// is a source of, in declaration order.
    pub fn joins_from(&self, node: &str) -> Vec<String> {
        self.out_of.get(node).cloned().unwrap_or_default()
    }

    /// The declared join whose barrier is `channel`.
    pub(crate) fn join_of(&self, channel: &str) -> Option<&Join> {
        self.barriers.get(channel).map(|&at| &self.joins[at])
    }
}
