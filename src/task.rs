//! LangGraph's task ids and task paths, computed as the Python runtime
//! (langgraph 1.2) computes them, so that pending writes a Rust program stores
//! carry the ids and paths a Python graph expects (and the other way round).
//!
//! # Task ids
//!
//! A task id is a hash of the checkpoint the task was prepared from and of
//! what the task is, rendered as 32 lowercase hex digits in UUID groups
//! (8-4-4-4-12; not an RFC 4122 UUID: no version or variant bits are set).
//! The hash is XXH3-128 over these bytes, concatenated without separators:
//!
//! 1. the checkpoint id's bytes: its hex digits with the dashes removed,
//!    decoded (a UUID's 16 raw bytes);
//! 2. the task's namespace: the node's name, prefixed by the checkpoint's
//!    namespace and `|` when that namespace is not empty;
//! 3. the step, in decimal;
//! 4. the node's name;
//! 5. `__pregel_pull` for a node triggered by its channels, `__pregel_push`
//!    for a `Send` or a functional-API call (a call's namespace is that of
//!    the task making it, see [`task_checkpoint_ns`]);
//! 6. for a pull task, the node's trigger channels, sorted; for a `Send`, the
//!    index of the packet in decimal; for a call, the parent task's path
//!    (rendered as [`TaskPath`] renders it) and the call's index in decimal.
//!
//! Tasks prepared from checkpoint `C` run at step `C.metadata.step + 1`, and
//! their writes are stored under `C`'s id and namespace.
//!
//! Only checkpoints of format version 2 and later (every checkpoint
//! langgraph-checkpoint 2.0 and later writes) hash with XXH3. Version 1
//! checkpoints hash with SHA-1 instead; this module does not compute those
//! ids.
//!
//! # Task paths
//!
//! The `task_path` stored beside each pending write is Python's rendering of
//! the task's path tuple: `~` and the elements joined by `", "`, integers
//! (and booleans) zero-padded to ten digits, strings as they are, nested
//! tuples rendered the same way. [`TaskPath`] holds the shapes the runtime
//! produces and renders and parses them.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The task id of writes no task produced (a `Command(resume=...)` value, a
/// caller's own writes): `00000000-0000-0000-0000-000000000000`.
///
/// ```
/// assert_eq!(checkpointer::task::NULL_TASK_ID, "00000000-0000-0000-0000-000000000000");
/// ```
pub use crate::checkpoint::NULL_TASK_ID;

/// The id of the `answered`-th interrupt (counting from 0) a task raises, as
/// LangGraph's `interrupt()` computes it: XXH3-128 of the task's namespace
/// ([`task_checkpoint_ns`]), followed by `|answered` after the first, as
/// 32 lowercase hex digits. A resume value addressed by interrupt id
/// (`Command(resume={id: value})`) names this id.
///
/// ```
/// use checkpointer::task::interrupt_id;
/// // Python: the review node's task 3be46995-… raising its first interrupt
/// let id = interrupt_id("review:3be46995-4f12-d177-d09e-8c6abf42e1e7", 0);
/// assert_eq!(id, "79725d807cdd46cae297ca9699c084ed");
/// assert_eq!(interrupt_id("review:3be46995-4f12-d177-d09e-8c6abf42e1e7", 1), "b25850c38987b9e6fdfa3912129e46a5");
/// ```
pub fn interrupt_id(task_ns: &str, answered: usize) -> String {
    let hash = if answered == 0 {
        xxhash_rust::xxh3::xxh3_128(task_ns.as_bytes())
    } else {
        xxhash_rust::xxh3::xxh3_128(format!("{task_ns}|{answered}").as_bytes())
    };
    format!("{hash:032x}")
}

/// The first element of a pull task's path (and a part of its id hash).
///
/// ```
/// use checkpointer::task::{TaskPath, PULL};
///
/// assert_eq!(TaskPath::pull("a").to_string(), format!("~{PULL}, a"));
/// ```
pub const PULL: &str = "__pregel_pull";
/// The first element of a push task's path (and a part of its id hash).
///
/// ```
/// use checkpointer::task::{TaskPath, PUSH};
///
/// assert!(TaskPath::Push { index: 0 }.to_string().starts_with(&format!("~{PUSH}, ")));
/// ```
pub const PUSH: &str = "__pregel_push";
/// The first element of the path of the synthetic task `update_state` runs.
///
/// ```
/// use checkpointer::task::{TaskPath, INTERRUPT};
///
/// assert_eq!(TaskPath::Interrupt { index: 0 }.to_string(), format!("~{INTERRUPT}, 0000000000"));
/// ```
pub const INTERRUPT: &str = "__interrupt__";

/// The id of the pull task that runs `node` at `step`, prepared from the
/// checkpoint `checkpoint_id` in namespace `checkpoint_ns` (`""` for the root
/// graph).
///
/// `triggers` are the node's trigger channels, in any order (they are sorted
/// before hashing): all the channels the node is declared to be triggered by,
/// not only those that changed. In a `StateGraph` these are `__start__` for
/// the `__start__` node and `branch:to:<node>` for the others (plus a
/// `join:<a>+<b>:<node>` channel per edge waiting for several nodes).
///
/// Fails with [`Error::InvalidInput`] when `checkpoint_id` is not hex digits
/// (dashes aside) of even length.
///
/// ```
/// use checkpointer::task::pull_task_id;
///
/// let id = pull_task_id(
///     "1f1ebff3-b562-633c-8000-6a20b254e3ba",
///     "",
///     1,
///     "get_address",
///     &["branch:to:get_address"],
/// )?;
/// assert_eq!(id, "573d123f-4a5b-deac-fdc4-85f7cc915fec");
/// # Ok::<(), checkpointer::Error>(())
/// ```
pub fn pull_task_id(
    checkpoint_id: &str,
    checkpoint_ns: &str,
    step: i64,
    node: &str,
    triggers: &[&str],
) -> Result<String> {
    pull_task_id_at(checkpoint_id, checkpoint_ns, &step.to_string(), node, triggers)
}

/// [`pull_task_id`] with the step given as its decimal digits (Python's
/// `str(step)`), so that a step beyond `i64` keeps Python's id.
pub(crate) fn pull_task_id_at(
    checkpoint_id: &str,
    checkpoint_ns: &str,
    step: &str,
    node: &str,
    triggers: &[&str],
) -> Result<String> {
    let mut sorted = triggers.to_vec();
    sorted.sort_unstable();
    let ns = task_ns(checkpoint_ns, node);
    let mut parts: Vec<&str> = vec![&ns, step, node, PULL];
    parts.extend(sorted);
    task_id_from_parts(checkpoint_id, &parts)
}

/// The id of the push task that runs the `index`-th `Send` packet (addressed
/// to `node`) at `step`, prepared from checkpoint `checkpoint_id` in namespace
/// `checkpoint_ns`. Its path is [`TaskPath::Push`] with the same index.
///
/// Fails with [`Error::InvalidInput`] as [`pull_task_id`] does.
///
/// ```
/// use checkpointer::task::push_task_id;
///
/// // The second `Send("worker", ...)` of a step-0 checkpoint, run at step 1.
/// let id = push_task_id("1f1edcac-1501-6edf-8000-2a79aed397ad", "", 1, "worker", 1)?;
/// assert_eq!(id, "931736c2-ddc3-07a5-437e-46f3747f0e6f");
/// # Ok::<(), checkpointer::Error>(())
/// ```
pub fn push_task_id(checkpoint_id: &str, checkpoint_ns: &str, step: i64, node: &str, index: u64) -> Result<String> {
    push_task_id_at(checkpoint_id, checkpoint_ns, &step.to_string(), node, index)
}

/// [`push_task_id`] with the step given as its decimal digits, as
/// [`pull_task_id_at`].
pub(crate) fn push_task_id_at(
    checkpoint_id: &str,
    checkpoint_ns: &str,
    step: &str,
    node: &str,
    index: u64,
) -> Result<String> {
    let index = index.to_string();
    let ns = task_ns(checkpoint_ns, node);
    task_id_from_parts(checkpoint_id, &[&ns, step, node, PUSH, &index])
}

/// The id of the push task a functional-API call creates: the `index`-th call
/// made by the task at `parent` (a pull task, or a call itself), running the
/// function `name` at `step`, prepared from checkpoint `checkpoint_id`. Its
/// path is [`TaskPath::Call`] with the same parent and index.
///
/// `parent_task_ns` is the namespace the calling task runs in, made by
/// [`task_checkpoint_ns`] from the checkpoint's namespace, the parent's node
/// (or function) name and the parent's task id: a call is namespaced under the
/// task that made it, not under the checkpoint.
///
/// Fails with [`Error::InvalidInput`] as [`pull_task_id`] does.
///
/// ```
/// use checkpointer::task::{call_task_id, pull_task_id, task_checkpoint_ns, TaskPath};
///
/// // The second call of the task `add_one` made by the entrypoint `wf`.
/// let checkpoint_id = "1f1edcac-1511-6ef7-bfff-3cf75d6070c0";
/// let wf_id = pull_task_id(checkpoint_id, "", 0, "wf", &["__start__"])?;
/// let wf_ns = task_checkpoint_ns("", "wf", &wf_id);
/// let id = call_task_id(checkpoint_id, &wf_ns, 0, "add_one", &TaskPath::pull("wf"), 1)?;
/// assert_eq!(id, "1e5be427-1a38-0a14-8d67-e76b3e3e458b");
/// # Ok::<(), checkpointer::Error>(())
/// ```
pub fn call_task_id(
    checkpoint_id: &str,
    parent_task_ns: &str,
    step: i64,
    name: &str,
    parent: &TaskPath,
    index: u64,
) -> Result<String> {
    let step = step.to_string();
    let index = index.to_string();
    let parent = parent.to_string();
    let ns = task_ns(parent_task_ns, name);
    task_id_from_parts(checkpoint_id, &[&ns, &step, name, PUSH, &parent, &index])
}

/// The namespace a task runs in: `node:task_id`, under the checkpoint's
/// namespace and `|` when that is not empty. It is the `checkpoint_ns` of the
/// checkpoints a subgraph run by the task stores, and the namespace the
/// task's own calls are made in (see [`call_task_id`]).
///
/// ```
/// use checkpointer::task::{pull_task_id, task_checkpoint_ns};
///
/// let id = pull_task_id("1f1ebff3-b6f9-6bed-8001-6e2c04e6d6a5", "", 2, "child", &["branch:to:child"])?;
/// assert_eq!(task_checkpoint_ns("", "child", &id), "child:181bf3e5-de47-cfe8-9c87-907ad7b644b9");
/// assert_eq!(task_checkpoint_ns("parent:1", "child", "2"), "parent:1|child:2");
/// # Ok::<(), checkpointer::Error>(())
/// ```
pub fn task_checkpoint_ns(checkpoint_ns: &str, node: &str, task_id: &str) -> String {
    format!("{}:{task_id}", task_ns(checkpoint_ns, node))
}

/// The raw hash behind every task id: XXH3-128 of the checkpoint id's bytes
/// followed by `parts` (UTF-8, no separators), as 8-4-4-4-12 lowercase hex.
/// For task kinds the other functions do not cover.
///
/// Fails with [`Error::InvalidInput`] when `checkpoint_id` is not hex digits
/// (dashes aside) of even length.
///
/// ```
/// use checkpointer::task::{pull_task_id, task_id_from_parts};
///
/// let cid = "1f1ebff3-b559-65a1-bfff-fc3005e54c8f";
/// assert_eq!(
///     task_id_from_parts(cid, &["__start__", "0", "__start__", "__pregel_pull", "__start__"])?,
///     pull_task_id(cid, "", 0, "__start__", &["__start__"])?,
/// );
/// assert!(task_id_from_parts("not hex", &[]).is_err());
/// # Ok::<(), checkpointer::Error>(())
/// ```
pub fn task_id_from_parts(checkpoint_id: &str, parts: &[&str]) -> Result<String> {
    let mut input = checkpoint_id_bytes(checkpoint_id)?;
    for part in parts {
        input.extend_from_slice(part.as_bytes());
    }
    let hex = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&input));
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// The namespace a task of `node` runs in, from its checkpoint's namespace.
fn task_ns(checkpoint_ns: &str, node: &str) -> String {
    if checkpoint_ns.is_empty() {
        node.to_owned()
    } else {
        format!("{checkpoint_ns}|{node}")
    }
}

/// The checkpoint id's hex digits (dashes removed) decoded to bytes.
fn checkpoint_id_bytes(checkpoint_id: &str) -> Result<Vec<u8>> {
    let digits: Vec<u8> = checkpoint_id
        .bytes()
        .filter(|&b| b != b'-')
        .map(|b| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        })
        .collect::<Option<_>>()
        .ok_or_else(|| Error::invalid(format!("checkpoint id {checkpoint_id:?} is not hex")))?;
    if digits.len() % 2 != 0 {
        return Err(Error::invalid(format!(
            "checkpoint id {checkpoint_id:?} has an odd number of hex digits"
        )));
    }
    Ok(digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect())
}

/// The path of a task, as the runtime stores it beside the task's writes
/// (`task_path`).
///
/// [`Display`](fmt::Display) renders Python's string and [`FromStr`] parses
/// it back; a string parses only when it renders back to itself.
///
/// ```
/// use checkpointer::task::TaskPath;
///
/// let pull = TaskPath::pull("agent");
/// assert_eq!(pull.to_string(), "~__pregel_pull, agent");
/// assert_eq!(TaskPath::Push { index: 0 }.to_string(), "~__pregel_push, 0000000000, 0000000000");
/// assert_eq!(TaskPath::Interrupt { index: 0 }.to_string(), "~__interrupt__, 0000000000");
/// let call = TaskPath::Call { parent: Box::new(pull.clone()), index: 2 };
/// assert_eq!(call.to_string(), "~__pregel_push, ~__pregel_pull, agent, 0000000002, 0000000001");
///
/// for path in [pull, call] {
///     assert_eq!(path.to_string().parse::<TaskPath>()?, path);
/// }
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TaskPath {
    /// A node triggered by its channels: `~__pregel_pull, <node>`.
    Pull {
        /// The node's name.
        node: String,
    },
    /// The `index`-th pending `Send` packet:
    /// `~__pregel_push, <index>, 0000000000` (the last element is Python's
    /// `False`: no call).
    Push {
        /// The packet's index among the step's pending sends.
        index: u64,
    },
    /// The `index`-th functional-API call made by the task at `parent`:
    /// `~__pregel_push, <parent>, <index>, 0000000001` (the last element is
    /// Python's `True`: a call).
    Call {
        /// The path of the task that made the call.
        parent: Box<TaskPath>,
        /// The call's index among the parent's calls.
        index: u64,
    },
    /// The synthetic task of the `index`-th update of an `update_state` call:
    /// `~__interrupt__, <index>`.
    Interrupt {
        /// The update's index in the call.
        index: u64,
    },
}

impl TaskPath {
    /// The path of the pull task of `node`.
    ///
    /// ```
    /// use checkpointer::task::TaskPath;
    ///
    /// assert_eq!(TaskPath::pull("__start__").to_string(), "~__pregel_pull, __start__");
    /// ```
    pub fn pull(node: impl Into<String>) -> Self {
        TaskPath::Pull { node: node.into() }
    }

    /// The node of a pull task, `None` for other tasks.
    ///
    /// ```
    /// use checkpointer::task::TaskPath;
    ///
    /// assert_eq!(TaskPath::pull("agent").node(), Some("agent"));
    /// assert_eq!(TaskPath::Push { index: 0 }.node(), None);
    /// ```
    pub fn node(&self) -> Option<&str> {
        match self {
            TaskPath::Pull { node } => Some(node),
            _ => None,
        }
    }
}

impl fmt::Display for TaskPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskPath::Pull { node } => write!(f, "~{PULL}, {node}"),
            TaskPath::Push { index } => write!(f, "~{PUSH}, {index:010}, {:010}", 0),
            TaskPath::Call { parent, index } => {
                write!(f, "~{PUSH}, {parent}, {index:010}, {:010}", 1)
            }
            TaskPath::Interrupt { index } => write!(f, "~{INTERRUPT}, {index:010}"),
        }
    }
}

impl FromStr for TaskPath {
    type Err = Error;

    /// Parses a stored `task_path`. Fails with [`Error::InvalidInput`] for
    /// strings the runtime does not produce for these task kinds (among them
    /// `""`, the path of writes stored without one, and the paths of node
    /// error handlers). A node name containing `", "` renders but does not
    /// parse back: the string alone cannot tell it from a longer path.
    ///
    /// ```
    /// use checkpointer::task::TaskPath;
    ///
    /// assert_eq!("~__pregel_pull, tools".parse::<TaskPath>()?, TaskPath::pull("tools"));
    /// assert!("".parse::<TaskPath>().is_err());
    /// # Ok::<(), checkpointer::Error>(())
    /// ```
    fn from_str(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split(", ").collect();
        let invalid = || {
            let shown: String = s.chars().take(120).collect();
            let more = if shown.len() < s.len() { "…" } else { "" };
            Error::invalid(format!("not a task path LangGraph writes: {shown:?}{more}"))
        };
        // parsing, rendering and dropping recurse once per nested call:
        // bounded before any of them runs
        if parts.iter().filter(|p| p.starts_with('~')).count() > MAX_PATH_NESTING {
            return Err(Error::invalid(format!(
                "a task path of calls nested more than {MAX_PATH_NESTING} deep"
            )));
        }
        let (path, rest) = parse(&parts).ok_or_else(invalid)?;
        if !rest.is_empty() || path.to_string() != s {
            return Err(invalid());
        }
        Ok(path)
    }
}

/// How many tasks deep a parsed task path may be (a call inside a call …):
/// the nesting limit of values ([`MAX_NESTING`](crate::limits::MAX_NESTING)).
pub const MAX_PATH_NESTING: usize = crate::limits::MAX_NESTING;

/// Parses one path from the front of `parts`, returning the rest.
fn parse<'a, 'b>(parts: &'b [&'a str]) -> Option<(TaskPath, &'b [&'a str])> {
    let (head, rest) = parts.split_first()?;
    match head.strip_prefix('~')? {
        PULL => {
            let (node, rest) = rest.split_first()?;
            Some((TaskPath::pull(*node), rest))
        }
        INTERRUPT => {
            let (index, rest) = rest.split_first()?;
            Some((TaskPath::Interrupt { index: int(index)? }, rest))
        }
        PUSH if rest.first()?.starts_with('~') => {
            let (parent, rest) = parse(rest)?;
            match rest {
                [index, "0000000001", rest @ ..] => Some((
                    TaskPath::Call {
                        parent: Box::new(parent),
                        index: int(index)?,
                    },
                    rest,
                )),
                _ => None,
            }
        }
        PUSH => match rest {
            [index, "0000000000", rest @ ..] => Some((TaskPath::Push { index: int(index)? }, rest)),
            _ => None,
        },
        _ => None,
    }
}

/// A zero-padded decimal index.
fn int(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "1f1ebff3-b559-65a1-bfff-fc3005e54c8f";

    #[test]
    fn pull_ids_of_python_runs() {
        // Ids Python's runtime stored in the shared fixtures.
        assert_eq!(
            pull_task_id(CID, "", 0, "__start__", &["__start__"]).unwrap(),
            "ef1a8e62-803d-1b56-cd07-53f45a3a8b3e"
        );
        assert_eq!(
            pull_task_id(
                "1f1ebff3-b721-6bf2-8000-25492b1d83da",
                "child:181bf3e5-de47-cfe8-9c87-907ad7b644b9",
                1,
                "sub_draft",
                &["branch:to:sub_draft"],
            )
            .unwrap(),
            "de3f9e92-ef72-ec49-b8f2-c054038192f3"
        );
    }

    #[test]
    fn push_and_call_ids_of_python_runs() {
        // Observed from langgraph 1.2.24 with an InMemorySaver: a graph whose
        // START edge sends two packets to `worker`, and an entrypoint `wf`
        // calling the task `add_one` twice.
        let send_ckpt = "1f1edcac-1501-6edf-8000-2a79aed397ad";
        assert_eq!(
            push_task_id(send_ckpt, "", 1, "worker", 0).unwrap(),
            "3c296b7b-c86d-47f7-e84f-96dbacd17295"
        );
        assert_eq!(
            push_task_id(send_ckpt, "", 1, "worker", 1).unwrap(),
            "931736c2-ddc3-07a5-437e-46f3747f0e6f"
        );
        let call_ckpt = "1f1edcac-1511-6ef7-bfff-3cf75d6070c0";
        let wf = TaskPath::pull("wf");
        assert_eq!(
            pull_task_id(call_ckpt, "", 0, "wf", &["__start__"]).unwrap(),
            "5f87bf5d-a19b-cb50-ba2c-9219118f1fad"
        );
        let wf_ns = task_checkpoint_ns("", "wf", "5f87bf5d-a19b-cb50-ba2c-9219118f1fad");
        assert_eq!(
            call_task_id(call_ckpt, &wf_ns, 0, "add_one", &wf, 0).unwrap(),
            "d37c768a-900a-f580-98c9-a351d78d8e9e"
        );
        assert_eq!(
            call_task_id(call_ckpt, &wf_ns, 0, "add_one", &wf, 1).unwrap(),
            "1e5be427-1a38-0a14-8d67-e76b3e3e458b"
        );
        let call = TaskPath::Call {
            parent: Box::new(wf),
            index: 1,
        };
        assert_eq!(
            call.to_string(),
            "~__pregel_push, ~__pregel_pull, wf, 0000000001, 0000000001"
        );
        assert_eq!(
            TaskPath::Push { index: 1 }.to_string(),
            "~__pregel_push, 0000000001, 0000000000"
        );
    }

    #[test]
    fn triggers_are_sorted_before_hashing() {
        assert_eq!(
            pull_task_id(CID, "", 3, "n", &["join:a+b:n", "branch:to:n"]).unwrap(),
            pull_task_id(CID, "", 3, "n", &["branch:to:n", "join:a+b:n"]).unwrap()
        );
    }

    #[test]
    fn push_and_call_ids_hash_their_parts() {
        assert_eq!(
            push_task_id(CID, "p", 2, "w", 7).unwrap(),
            task_id_from_parts(CID, &["p|w", "2", "w", PUSH, "7"]).unwrap()
        );
        let parent = TaskPath::pull("wf");
        assert_eq!(
            call_task_id(CID, "", -1, "f", &parent, 3).unwrap(),
            task_id_from_parts(CID, &["f", "-1", "f", PUSH, "~__pregel_pull, wf", "3"]).unwrap()
        );
    }

    #[test]
    fn checkpoint_ids_must_be_hex() {
        assert!(checkpoint_id_bytes("abc").is_err());
        assert!(checkpoint_id_bytes("zz").is_err());
        assert_eq!(checkpoint_id_bytes("0a-Ff").unwrap(), vec![0x0a, 0xff]);
        assert_eq!(checkpoint_id_bytes(CID).unwrap().len(), 16);
    }

    #[test]
    fn paths_render_and_parse() {
        let nested = TaskPath::Call {
            parent: Box::new(TaskPath::Call {
                parent: Box::new(TaskPath::pull("wf")),
                index: 0,
            }),
            index: 12,
        };
        let cases = [
            (TaskPath::Push { index: 3 }, "~__pregel_push, 0000000003, 0000000000"),
            (TaskPath::Interrupt { index: 1 }, "~__interrupt__, 0000000001"),
            (
                nested,
                "~__pregel_push, ~__pregel_push, ~__pregel_pull, wf, 0000000000, 0000000001, 0000000012, 0000000001",
            ),
        ];
        for (path, text) in cases {
            assert_eq!(path.to_string(), text);
            assert_eq!(text.parse::<TaskPath>().unwrap(), path, "{text}");
        }
        for bad in [
            "",
            "~__pregel_pull",
            "~__pregel_pull, a, b",
            "~__pregel_push, 3, 0000000000",
            "~__pregel_push, 0000000003, 0000000001",
            "~__interrupt__, 0000000000, x",
            "__pregel_pull, a",
            "~__pregel_pull, a, node_error_handler, 0000000000",
        ] {
            assert!(bad.parse::<TaskPath>().is_err(), "{bad:?}");
        }
    }

    /// A path of calls nested 100 000 deep is refused with a typed error
    /// (it overflowed the stack); one at the limit parses and renders back.
    #[test]
    fn deeply_nested_paths_are_refused_not_recursed() {
        let nested = |depth: usize| {
            format!(
                "{}~{PULL}, a{}",
                format!("~{PUSH}, ").repeat(depth),
                ", 0000000000, 0000000001".repeat(depth)
            )
        };
        let err = nested(100_000).parse::<TaskPath>().unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        assert!(err.to_string().len() < 200, "{err}");
        let deepest = nested(MAX_PATH_NESTING - 1);
        assert_eq!(deepest.parse::<TaskPath>().unwrap().to_string(), deepest);
        assert!(nested(MAX_PATH_NESTING).parse::<TaskPath>().is_err());
    }
}
