//! Which checkpoint an operation addresses, and checkpoint-namespace helpers.

use std::fmt;

/// Addresses a thread, a namespace within it and optionally one checkpoint.
///
/// The Rust form of LangGraph's `config["configurable"]` as savers see it
/// (see `docs/design.md`, *Configs and namespaces*). `checkpoint_ns` is `None`
/// only where "every namespace" makes sense (`list`); everywhere else `None`
/// means the root namespace `""`. There is deliberately no `Default`: an
/// empty config would mean "every namespace" to `list` and "the root" to
/// everything else; build one with [`CheckpointConfig::new`] (the root),
/// [`CheckpointConfig::all_namespaces`] or [`CheckpointConfig::in_scope`].
///
/// ```
/// use checkpointer::CheckpointConfig;
/// let cfg = CheckpointConfig::new("thread-1").with_checkpoint_id("1ef09e01-c354-6e08-8001-8a1503f9b875");
/// assert_eq!(cfg.ns(), "");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CheckpointConfig {
    /// The conversation or run the checkpoints belong to.
    pub thread_id: String,
    /// The namespace (`""` = root graph; see [`CheckpointNs`]).
    pub checkpoint_ns: Option<String>,
    /// One checkpoint. In `put` it names the parent; in `put_writes` the
    /// checkpoint the writes belong to; in `get_tuple` the exact checkpoint
    /// (absent = latest).
    pub checkpoint_id: Option<String>,
}

impl CheckpointConfig {
    /// A config for the root namespace of `thread_id`.
    pub fn new(thread_id: impl Into<String>) -> Self {
        CheckpointConfig {
            thread_id: thread_id.into(),
            checkpoint_ns: Some(String::new()),
            checkpoint_id: None,
        }
    }

    /// A config naming every namespace of `thread_id` (for `list`).
    pub fn all_namespaces(thread_id: impl Into<String>) -> Self {
        CheckpointConfig {
            thread_id: thread_id.into(),
            checkpoint_ns: None,
            checkpoint_id: None,
        }
    }

    /// Sets the namespace.
    pub fn with_ns(mut self, ns: impl Into<String>) -> Self {
        self.checkpoint_ns = Some(ns.into());
        self
    }

    /// Sets the checkpoint id.
    pub fn with_checkpoint_id(mut self, id: impl Into<String>) -> Self {
        self.checkpoint_id = Some(id.into());
        self
    }

    /// The namespace, `""` when unset.
    pub fn ns(&self) -> &str {
        self.checkpoint_ns.as_deref().unwrap_or("")
    }

    /// The checkpoint id, treating an empty string as unset (as Python does).
    pub fn checkpoint_id(&self) -> Option<&str> {
        self.checkpoint_id.as_deref().filter(|id| !id.is_empty())
    }
}

/// Which namespaces of a thread an operation covers, said explicitly.
///
/// [`CheckpointConfig::checkpoint_ns`] is an `Option` because it mirrors
/// LangGraph's config, where an absent namespace means "every namespace" to
/// `list` and "the root graph" to everything else. Code that chooses a scope
/// says which it means with this type and converts with
/// [`CheckpointConfig::in_scope`] and [`CheckpointConfig::scope`].
///
/// ```
/// use checkpointer::{CheckpointConfig, NsScope};
/// let all = CheckpointConfig::in_scope("t", NsScope::All);
/// assert_eq!(all.checkpoint_ns, None);
/// assert_eq!(all.scope(), NsScope::All);
/// let sub = CheckpointConfig::in_scope("t", NsScope::namespace("tools:1f0"));
/// assert_eq!(sub.ns(), "tools:1f0");
/// assert_eq!(CheckpointConfig::new("t").scope(), NsScope::Root);
/// assert_eq!(NsScope::namespace(""), NsScope::Root);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NsScope {
    /// The root graph's namespace, `""`.
    Root,
    /// One subgraph namespace (never `""`: that is [`NsScope::Root`]).
    Namespace(String),
    /// Every namespace of the thread (meaningful to `list` only).
    All,
}

impl NsScope {
    /// One namespace: [`NsScope::Root`] for `""`, else [`NsScope::Namespace`].
    pub fn namespace(ns: impl Into<String>) -> Self {
        let ns = ns.into();
        if ns.is_empty() {
            NsScope::Root
        } else {
            NsScope::Namespace(ns)
        }
    }

    /// The one namespace this scope names, `None` for [`NsScope::All`].
    pub fn as_ns(&self) -> Option<&str> {
        match self {
            NsScope::Root => Some(""),
            NsScope::Namespace(ns) => Some(ns),
            NsScope::All => None,
        }
    }
}

impl CheckpointConfig {
    /// A config for `thread_id` covering `scope`.
    pub fn in_scope(thread_id: impl Into<String>, scope: NsScope) -> Self {
        CheckpointConfig {
            thread_id: thread_id.into(),
            checkpoint_ns: scope.as_ns().map(str::to_owned),
            checkpoint_id: None,
        }
    }

    /// The scope `list` gives this config: [`NsScope::All`] when the
    /// namespace is unset. (Every other operation reads an unset namespace
    /// as the root; see [`CheckpointConfig::ns`].)
    pub fn scope(&self) -> NsScope {
        match &self.checkpoint_ns {
            None => NsScope::All,
            Some(ns) => NsScope::namespace(ns.as_str()),
        }
    }
}

/// Separator between the levels of a nested namespace.
pub const NS_SEP: char = '|';
/// Separator between a node name and a task id within one level.
pub const NS_END: char = ':';

/// One level of a checkpoint namespace: `node` or `node:task_id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NsLevel {
    /// The node that runs the subgraph.
    pub node: String,
    /// The task that ran it; absent for subgraphs with a per-thread history.
    pub task_id: Option<String>,
}

/// A parsed checkpoint namespace (see `docs/design.md`, *Configs and
/// namespaces*).
///
/// `""` is the root graph; `outer:<task>|inner:<task>` is a subgraph two levels
/// down.
///
/// ```
/// use checkpointer::CheckpointNs;
/// let ns = CheckpointNs::parse("outer:3dad|inner:77ab");
/// assert_eq!(ns.levels().len(), 2);
/// assert_eq!(ns.levels()[1].node, "inner");
/// assert_eq!(ns.to_string(), "outer:3dad|inner:77ab");
/// assert_eq!(ns.without_task_ids().to_string(), "outer|inner");
/// assert_eq!(ns.parent().unwrap().to_string(), "outer:3dad");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CheckpointNs {
    levels: Vec<NsLevel>,
}

impl CheckpointNs {
    /// The root namespace.
    pub fn root() -> Self {
        CheckpointNs::default()
    }

    /// Parses a namespace string. Every string parses: a level without `:` has
    /// no task id; only the first `:` of a level separates node and task.
    pub fn parse(ns: &str) -> Self {
        if ns.is_empty() {
            return CheckpointNs::root();
        }
        let levels = ns
            .split(NS_SEP)
            .map(|level| match level.split_once(NS_END) {
                Some((node, task)) => NsLevel {
                    node: node.to_owned(),
                    task_id: Some(task.to_owned()),
                },
                None => NsLevel {
                    node: level.to_owned(),
                    task_id: None,
                },
            })
            .collect();
        CheckpointNs { levels }
    }

    /// The levels, outermost first.
    pub fn levels(&self) -> &[NsLevel] {
        &self.levels
    }

    /// Whether this is the root namespace.
    pub fn is_root(&self) -> bool {
        self.levels.is_empty()
    }

    /// A namespace one level deeper.
    pub fn child(&self, node: impl Into<String>, task_id: Option<&str>) -> Self {
        let mut levels = self.levels.clone();
        levels.push(NsLevel {
            node: node.into(),
            task_id: task_id.map(str::to_owned),
        });
        CheckpointNs { levels }
    }

    /// The enclosing namespace, `None` for the root.
    pub fn parent(&self) -> Option<Self> {
        if self.levels.is_empty() {
            return None;
        }
        Some(CheckpointNs {
            levels: self.levels[..self.levels.len() - 1].to_vec(),
        })
    }

    /// The namespace with every task id removed, as LangGraph keys subgraphs
    /// that keep one history per thread.
    pub fn without_task_ids(&self) -> Self {
        CheckpointNs {
            levels: self
                .levels
                .iter()
                .map(|l| NsLevel {
                    node: l.node.clone(),
                    task_id: None,
                })
                .collect(),
        }
    }

    /// Whether any level carries a task id (a per-call subgraph namespace).
    pub fn is_per_call(&self) -> bool {
        self.levels.iter().any(|l| l.task_id.is_some())
    }
}

impl fmt::Display for CheckpointNs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, level) in self.levels.iter().enumerate() {
            if i > 0 {
                write!(f, "{NS_SEP}")?;
            }
            f.write_str(&level.node)?;
            if let Some(task) = &level.task_id {
                write!(f, "{NS_END}{task}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build_round_trip() {
        for s in [
            "",
            "a",
            "a:1",
            "outer:3dad8c10-2692-f41f-69ba-4ffb93f90bd7|inner:x",
            "a|b|c:d:e",
        ] {
            assert_eq!(CheckpointNs::parse(s).to_string(), s);
        }
        let ns = CheckpointNs::root().child("outer", Some("t1")).child("inner", None);
        assert_eq!(ns.to_string(), "outer:t1|inner");
        assert!(ns.is_per_call());
        assert!(!CheckpointNs::parse("outer|inner").is_per_call());
        assert_eq!(CheckpointNs::parse("a:b:c").levels()[0].task_id.as_deref(), Some("b:c"));
    }

    #[test]
    fn empty_checkpoint_id_is_unset() {
        let cfg = CheckpointConfig::new("t").with_checkpoint_id("");
        assert_eq!(cfg.checkpoint_id(), None);
    }
}
