//! The keep-latest prune rule, decided once for every backend.
//!
//! Per namespace of a thread the latest checkpoint (the head) stays, with
//! the ancestry its delta channels need: for each delta channel (named by
//! the head's metadata) that the head versions but stores no value for, the
//! parent chain up to and including the nearest ancestor that stores one.
//! Other channels without a value (consumed triggers) need no history. A
//! per-call namespace (one with `:` in its name) whose head was written
//! under a root checkpoint that is saved but is no longer the root head
//! belongs to a finished call and goes whole. Writes older than a kept head
//! go unless their checkpoint is kept; newer ones may belong to a put still
//! in flight and stay. A kept checkpoint whose parent is no longer stored
//! forgets it (its parent id is cleared, so `parent_config` is `None`), as
//! Python's `PostgresSaver.prune` does: only the oldest kept checkpoint of a
//! chain loses its parent; one whose parent is kept keeps it.
//!
//! A backend reads the heads, asks [`plan`] what to do with each namespace,
//! walks the ancestry [`Keep::walk`] names (stopping as [`KeptAncestry`]
//! says) and applies the plan, the parents it forgets included, in one
//! transaction of its own.

use std::collections::HashSet;

use crate::checkpoint::{delta_channels, CheckpointMetadata};

/// The head of one namespace, as [`plan`] needs it.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub(crate) ns: String,
    pub(crate) id: String,
    /// The root checkpoint the head's metadata names as its parent (`""`
    /// entry of `parents`).
    pub(crate) call_root: Option<String>,
    /// The head's delta channels that it versions but stores no value for.
    pub(crate) unstored_delta: Vec<String>,
}

impl Head {
    /// A head from its metadata and the channels it versions without a
    /// stored value.
    pub(crate) fn new<'a>(
        ns: impl Into<String>,
        id: impl Into<String>,
        metadata: &CheckpointMetadata,
        unstored: impl IntoIterator<Item = &'a str>,
    ) -> Head {
        let delta = delta_channels(metadata);
        Head {
            ns: ns.into(),
            id: id.into(),
            call_root: metadata
                .parents()
                .into_iter()
                .find(|(k, _)| k.is_empty())
                .map(|(_, v)| v.to_owned()),
            unstored_delta: unstored
                .into_iter()
                .filter(|ch| delta.contains(ch))
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// What happens to one namespace.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Action<'a> {
    /// The namespace of a finished call: every checkpoint and write goes.
    Drop(&'a str),
    /// The head stays, with the ancestry its delta channels need.
    Keep(Keep<'a>),
}

/// A namespace that keeps its head.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Keep<'a> {
    pub(crate) ns: &'a str,
    pub(crate) head: &'a str,
    /// The delta channels to walk the parent chain for (none: only the head
    /// stays).
    pub(crate) walk: &'a [String],
}

/// The root checkpoints a plan needs to know about: the per-call heads'
/// roots other than the root head. The caller answers which are saved.
pub(crate) fn roots_to_check(heads: &[Head]) -> Vec<&str> {
    let root_head = root_head(heads);
    let mut out: Vec<&str> = heads
        .iter()
        .filter(|h| h.ns.contains(':'))
        .filter_map(|h| h.call_root.as_deref())
        .filter(|r| Some(*r) != root_head)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn root_head(heads: &[Head]) -> Option<&str> {
    heads.iter().find(|h| h.ns.is_empty()).map(|h| h.id.as_str())
}

/// The action for each namespace of a thread, given its heads and which of
/// [`roots_to_check`] are saved checkpoints of the root namespace.
pub(crate) fn plan<'a>(heads: &'a [Head], saved_roots: &HashSet<&str>) -> Vec<Action<'a>> {
    let root_head = root_head(heads);
    heads
        .iter()
        .map(|h| {
            let finished_call = h.ns.contains(':')
                && h.call_root
                    .as_deref()
                    .is_some_and(|r| Some(r) != root_head && saved_roots.contains(r));
            if finished_call {
                Action::Drop(&h.ns)
            } else {
                Action::Keep(Keep {
                    ns: &h.ns,
                    head: &h.id,
                    walk: &h.unstored_delta,
                })
            }
        })
        .collect()
}

/// The walk of one kept head's parent chain: feed it the ancestors nearest
/// first; it says which to keep and when the walk is over (every walked
/// channel found stored, or an id seen twice).
#[derive(Debug)]
pub(crate) struct KeptAncestry<'a> {
    open: HashSet<&'a str>,
    seen: HashSet<String>,
    kept: Vec<String>,
}

impl<'a> KeptAncestry<'a> {
    pub(crate) fn new(walk: &'a [String]) -> Self {
        KeptAncestry {
            open: walk.iter().map(String::as_str).collect(),
            seen: HashSet::new(),
            kept: Vec::new(),
        }
    }

    /// Whether the walk needs more ancestors.
    pub(crate) fn wants_more(&self) -> bool {
        !self.open.is_empty()
    }

    /// Takes the next ancestor: kept while any walked channel is still
    /// open, and closing those it stores. Returns whether to go on.
    pub(crate) fn step(&mut self, id: &str, stores: impl Fn(&str) -> bool) -> bool {
        if self.open.is_empty() || !self.seen.insert(id.to_owned()) {
            self.open.clear();
            return false;
        }
        self.kept.push(id.to_owned());
        self.open.retain(|ch| !stores(ch));
        !self.open.is_empty()
    }

    /// The ancestors to keep besides the head.
    pub(crate) fn into_kept(self) -> Vec<String> {
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(ns: &str, id: &str, root: Option<&str>, unstored: &[&str]) -> Head {
        Head {
            ns: ns.into(),
            id: id.into(),
            call_root: root.map(str::to_owned),
            unstored_delta: unstored.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn finished_calls_go_whole_and_others_keep_their_head() {
        let heads = vec![
            head("", "9", None, &["messages"]),
            head("sub:1", "5", Some("4"), &[]),
            head("sub:2", "8", Some("9"), &[]),
            head("sub:3", "3", Some("2"), &[]),
        ];
        assert_eq!(roots_to_check(&heads), ["2", "4"]);
        let saved = HashSet::from(["4"]);
        let actions = plan(&heads, &saved);
        assert_eq!(
            actions,
            [
                Action::Keep(Keep {
                    ns: "",
                    head: "9",
                    walk: &["messages".to_owned()]
                }),
                Action::Drop("sub:1"),
                Action::Keep(Keep {
                    ns: "sub:2",
                    head: "8",
                    walk: &[]
                }),
                Action::Keep(Keep {
                    ns: "sub:3",
                    head: "3",
                    walk: &[]
                }),
            ]
        );
    }

    #[test]
    fn ancestry_stops_at_the_last_seed_or_a_cycle() {
        let walk = ["a".to_owned(), "b".to_owned()];
        let mut k = KeptAncestry::new(&walk);
        assert!(k.step("8", |ch| ch == "a"));
        assert!(k.step("7", |_| false));
        assert!(!k.step("6", |ch| ch == "b"));
        assert_eq!(k.into_kept(), ["8", "7", "6"]);

        let mut k = KeptAncestry::new(&walk);
        assert!(k.step("8", |_| false));
        assert!(!k.step("8", |_| false));
        assert_eq!(k.into_kept(), ["8"]);
    }
}
