//! Delta channel history, assembled once from the ancestors a backend reads.

use indexmap::IndexMap;

use super::sort_writes;
use crate::checkpoint::PendingWrite;
use crate::saver::DeltaChannelHistory;
use crate::serde::Value;

/// One ancestor of the target checkpoint, as [`super::Backend::ancestors`]
/// reads it: only the requested channels matter.
#[derive(Debug, Default)]
pub(crate) struct Link {
    /// Values this checkpoint stores, by channel.
    pub(crate) seeds: Vec<(String, Value)>,
    /// Writes saved against this checkpoint (any order).
    pub(crate) writes: Vec<PendingWrite>,
}

/// Fills `out` (one empty history per requested channel) from the ancestors,
/// nearest first: a channel's history takes the writes of every ancestor up
/// to and including the nearest one that stores a value for it (the seed),
/// oldest first, each ancestor's writes in the contract's order. Writes and
/// values on channels not asked for, or already seeded, are ignored.
pub(crate) fn assemble(out: &mut IndexMap<String, DeltaChannelHistory>, links: Vec<Link>) {
    let mut open = vec![true; out.len()];
    let mut left = out.len();
    // per channel, the writes of each ancestor, nearest first
    let mut groups: Vec<Vec<Vec<PendingWrite>>> = (0..out.len()).map(|_| Vec::new()).collect();
    for mut link in links {
        if left == 0 {
            break;
        }
        sort_writes(&mut link.writes);
        let mut fresh: Vec<Option<Vec<PendingWrite>>> = Vec::new();
        for w in link.writes {
            let Some(i) = out.get_index_of(&w.channel) else {
                continue;
            };
            if !open[i] {
                continue;
            }
            if fresh.is_empty() {
                fresh = (0..out.len()).map(|_| None).collect();
            }
            fresh[i].get_or_insert_with(Vec::new).push(w);
        }
        for (i, ws) in fresh.into_iter().enumerate() {
            if let Some(ws) = ws {
                groups[i].push(ws);
            }
        }
        for (channel, value) in link.seeds {
            let Some(i) = out.get_index_of(&channel) else {
                continue;
            };
            if open[i] {
                open[i] = false;
                left -= 1;
                if let Some((_, history)) = out.get_index_mut(i) {
                    history.seed = Some(value);
                }
            }
        }
    }
    for (i, per_link) in groups.into_iter().enumerate() {
        if let Some((_, history)) = out.get_index_mut(i) {
            history.writes = per_link.into_iter().rev().flatten().collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(task: &str, path: &str, idx: i64, channel: &str, v: i64) -> PendingWrite {
        PendingWrite::new(task, channel, v).with_task_path(path).with_idx(idx)
    }

    fn histories(names: &[&str]) -> IndexMap<String, DeltaChannelHistory> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), DeltaChannelHistory::default()))
            .collect()
    }

    #[test]
    fn writes_oldest_link_first_up_to_the_seed() {
        let mut out = histories(&["a", "b"]);
        let links = vec![
            Link {
                seeds: vec![],
                writes: vec![
                    write("t2", "", 1, "a", 3),
                    write("t1", "", 0, "a", 2),
                    write("t", "", 0, "x", 9),
                ],
            },
            Link {
                seeds: vec![("a".into(), Value::from(1))],
                writes: vec![write("t", "", 0, "a", 1), write("t", "", 0, "b", 7)],
            },
            Link {
                seeds: vec![("a".into(), Value::from(0)), ("b".into(), Value::from(5))],
                writes: vec![write("t", "", 0, "a", 0), write("t", "", 0, "b", 6)],
            },
        ];
        assemble(&mut out, links);
        let a: Vec<_> = out["a"].writes.iter().map(|w| w.value.clone()).collect();
        assert_eq!(a, [Value::from(1), Value::from(2), Value::from(3)]);
        assert_eq!(out["a"].seed, Some(Value::from(1)));
        let b: Vec<_> = out["b"].writes.iter().map(|w| w.value.clone()).collect();
        assert_eq!(b, [Value::from(6), Value::from(7)]);
        assert_eq!(out["b"].seed, Some(Value::from(5)));
    }

    #[test]
    fn no_links_leave_empty_histories() {
        let mut out = histories(&["a"]);
        assemble(&mut out, Vec::new());
        assert!(out["a"].writes.is_empty());
        assert_eq!(out["a"].seed, None);
    }
}
