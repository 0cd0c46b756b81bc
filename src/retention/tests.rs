use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use super::plan::{kept, plan_thread, Skeleton};
use super::{PolicyError, RetentionPolicy};
use crate::engine::prune::KeptAncestry;
use crate::error::Error;

const HOUR: i64 = 3_600_000_000;

fn sk(id: &str, parent: Option<&str>) -> Skeleton {
    Skeleton {
        ns: String::new(),
        id: id.into(),
        parent: parent.map(Into::into),
        ts: Some(0),
        marked: false,
        writes: 0,
        interrupt: false,
        needs: Vec::new(),
        stores: Vec::new(),
        refs: Vec::new(),
    }
}

fn chain(n: usize) -> Vec<Skeleton> {
    (0..n)
        .map(|i| {
            let parent = (i > 0).then(|| format!("{:04}", i - 1));
            sk(&format!("{i:04}"), parent.as_deref())
        })
        .collect()
}

fn kept_ids<'a>(policy: &RetentionPolicy, now: i64, nodes: &'a [Skeleton]) -> Vec<&'a str> {
    let keep = kept(policy, now, nodes);
    nodes
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(s, _)| s.id.as_str())
        .collect()
}

/// The oracle: each rule re-stated plainly, the delta closure by `prune`'s
/// own walk, repeated until nothing changes.
fn oracle(policy: &RetentionPolicy, now: i64, nodes: &[Skeleton]) -> BTreeSet<String> {
    let by_id: HashMap<&str, &Skeleton> = nodes.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut ids: Vec<&str> = nodes.iter().map(|s| s.id.as_str()).collect();
    ids.sort_unstable();
    let mut keep = BTreeSet::new();
    let latest = ids.last().copied();
    let last: HashSet<&str> = ids.iter().rev().take(policy.last().unwrap_or(0)).copied().collect();
    for s in nodes {
        let young = policy.newer_than().is_some_and(|age| {
            s.ts.is_none_or(|ts| ts >= now - i64::try_from(age.as_micros()).unwrap())
        });
        let children: Vec<&Skeleton> = nodes
            .iter()
            .filter(|c| c.parent.as_deref() == Some(s.id.as_str()))
            .collect();
        if Some(s.id.as_str()) == latest || last.contains(s.id.as_str()) || young || s.interrupt || s.marked {
            keep.insert(s.id.clone());
        }
        if children.len() > 1 {
            keep.insert(s.id.clone());
            keep.extend(children.iter().map(|c| c.id.clone()));
        }
    }
    loop {
        let before = keep.len();
        for k in keep.clone() {
            let head = by_id[k.as_str()];
            let mut walk = KeptAncestry::new(&head.needs);
            let mut next = head.parent.clone();
            while let (true, Some(id)) = (walk.wants_more(), next.take()) {
                let Some(rec) = by_id.get(id.as_str()) else { break };
                if walk.step(&rec.id, |ch| rec.stores.iter().any(|s| s == ch)) {
                    next = rec.parent.clone();
                }
            }
            keep.extend(walk.into_kept());
        }
        if keep.len() == before {
            return keep;
        }
    }
}

#[test]
fn policies_that_contradict_themselves_are_refused() {
    let day = Duration::from_secs(86_400);
    let refused = |p: RetentionPolicy| match p.validate() {
        Err(Error::InvalidPolicy(e)) => e,
        other => panic!("{p:?}: {other:?}"),
    };
    assert_eq!(refused(RetentionPolicy::new()), PolicyError::NoRule);
    assert!(matches!(
        refused(RetentionPolicy::new().keep_last(0)),
        PolicyError::KeepsNoLatest(_)
    ));
    assert!(matches!(
        refused(RetentionPolicy::new().keep_newer_than(Duration::ZERO)),
        PolicyError::KeepsNoLatest(_)
    ));
    assert_eq!(
        refused(RetentionPolicy::new().delete_idle_threads(Duration::ZERO)),
        PolicyError::IdleZero
    );
    assert!(matches!(
        refused(
            RetentionPolicy::new()
                .keep_newer_than(day * 30)
                .delete_idle_threads(day)
        ),
        PolicyError::IdleBeforeKept { .. }
    ));
    assert_eq!(
        refused(RetentionPolicy::new().keep_last(3).mark_key("")),
        PolicyError::EmptyMarkKey
    );
    RetentionPolicy::new()
        .keep_last(0)
        .delete_idle_threads(day)
        .validate()
        .unwrap();
    RetentionPolicy::new().delete_idle_threads(day).validate().unwrap();
    RetentionPolicy::new().keep_last(1).validate().unwrap();
}

#[test]
fn keep_last_keeps_the_newest_and_clears_the_oldest_kept_parent() {
    let nodes = chain(6);
    let p = RetentionPolicy::new().keep_last(2);
    assert_eq!(kept_ids(&p, 0, &nodes), ["0004", "0005"]);
    let plan = plan_thread(&p, 0, nodes, 3);
    assert_eq!(plan.batches.len(), 2);
    assert_eq!(plan.batches[0].ids, ["0000", "0001", "0002"]);
    // 0003 survives the first batch: its parent goes there
    assert_eq!(plan.batches[0].clear_parent, ["0003"]);
    assert_eq!(plan.batches[1].ids, ["0003"]);
    assert_eq!(plan.batches[1].clear_parent, ["0004"]);
}

#[test]
fn age_interrupts_marks_and_forks_are_kept() {
    let mut nodes = chain(8);
    for (i, s) in nodes.iter_mut().enumerate() {
        s.ts = Some(i as i64 * HOUR);
    }
    nodes[1].interrupt = true;
    nodes[2].marked = true;
    // 0007 forks from 0003: 0003 has two children
    nodes[7].parent = Some("0003".into());
    let p = RetentionPolicy::new().keep_newer_than(Duration::from_secs(3600));
    // now = 7 h: 0006 and 0007 are at most an hour old
    assert_eq!(
        kept_ids(&p, 7 * HOUR, &nodes),
        ["0001", "0002", "0003", "0004", "0006", "0007"]
    );
}

#[test]
fn delta_history_of_kept_checkpoints_stays() {
    let mut nodes = chain(8);
    nodes[1].stores = vec!["m".into()];
    for s in &mut nodes[2..] {
        s.needs = vec!["m".into()];
    }
    let p = RetentionPolicy::new().keep_last(1);
    assert_eq!(
        kept_ids(&p, 0, &nodes),
        ["0001", "0002", "0003", "0004", "0005", "0006", "0007"]
    );
    // a seed (a value stored, so none needed) ends the walk
    nodes[5].stores = vec!["m".into()];
    nodes[5].needs.clear();
    assert_eq!(kept_ids(&p, 0, &nodes), ["0005", "0006", "0007"]);
}

#[test]
fn idle_threads_go_whole_and_unreadable_ts_counts_as_new() {
    let mut nodes = chain(3);
    let p = RetentionPolicy::new().delete_idle_threads(Duration::from_secs(3600));
    let plan = plan_thread(&p, 2 * HOUR, nodes.clone(), 256);
    assert!(plan.delete_thread);
    assert_eq!(plan.batches.len(), 1);
    assert_eq!(plan.batches[0].ids.len(), 3);
    assert_eq!(plan_thread(&p, HOUR / 2, nodes.clone(), 256).batches, []);
    nodes[0].ts = None;
    let plan = plan_thread(&p, 2 * HOUR, nodes, 256);
    assert!(!plan.delete_thread && plan.batches.is_empty());
}

#[test]
fn shared_values_go_with_their_last_reader() {
    let mut nodes = chain(4);
    nodes[0].refs = vec![1, 2];
    nodes[1].refs = vec![1, 3];
    nodes[2].refs = vec![3, 4];
    nodes[3].refs = vec![4];
    let plan = plan_thread(&RetentionPolicy::new().keep_last(1), 0, nodes, 1);
    let orphans: Vec<Vec<u64>> = plan.batches.iter().map(|b| b.orphan_refs.clone()).collect();
    assert_eq!(orphans, [vec![2], vec![1], vec![3]]);
}

mod properties {
    use super::*;

    /// A random namespace: ids ascending, mostly chains with forks and
    /// cleared parents, random ts, interrupts, marks, delta needs and seeds,
    /// shared values.
    fn graph(seed: u64, n: usize) -> Vec<Skeleton> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m.max(1)
        };
        let channels = ["a", "b", "c"];
        (0..n)
            .map(|i| {
                let parent = match rnd(10) {
                    _ if i == 0 => None,
                    0 => None,
                    1 | 2 => Some(rnd(i as u64) as usize),
                    _ => Some(i - 1),
                };
                let mut s = sk(&format!("{i:04}"), parent.map(|p| format!("{p:04}")).as_deref());
                s.ts = (rnd(20) != 0).then(|| rnd(100) as i64 * HOUR);
                s.interrupt = rnd(15) == 0;
                s.marked = rnd(15) == 0;
                s.writes = rnd(4);
                for ch in channels {
                    match rnd(4) {
                        0 => s.stores.push(ch.into()),
                        1 | 2 => s.needs.push(ch.into()),
                        _ => {}
                    }
                }
                s.refs = (0..rnd(3)).map(|_| rnd(12)).collect();
                s
            })
            .collect()
    }

    fn policy(seed: u64) -> RetentionPolicy {
        let mut p = RetentionPolicy::new();
        if seed % 3 != 0 {
            p = p.keep_last((seed % 7) as usize);
        }
        if seed % 3 != 1 {
            p = p.keep_newer_than(Duration::from_secs(3600 * (seed % 50)));
        }
        if seed % 5 == 0 {
            p = p.delete_idle_threads(Duration::from_secs(3600 * (50 + seed % 80)));
        }
        p
    }

    /// The graph after a plan's batches: removed gone, parents cleared.
    fn apply(mut nodes: Vec<Skeleton>, plan: &super::super::plan::ThreadPlan) -> Vec<Skeleton> {
        for b in &plan.batches {
            let gone: HashSet<&str> = b.ids.iter().map(String::as_str).collect();
            let clear: HashSet<&str> = b.clear_parent.iter().map(String::as_str).collect();
            nodes.retain(|s| !gone.contains(s.id.as_str()));
            for s in &mut nodes {
                if clear.contains(s.id.as_str()) {
                    s.parent = None;
                }
            }
            // between batches no stored checkpoint names a removed parent
            let stored: HashSet<&str> = nodes.iter().map(|s| s.id.as_str()).collect();
            let dangling: Vec<&str> = nodes
                .iter()
                .filter(|s| {
                    s.parent
                        .as_deref()
                        .is_some_and(|p| gone.contains(p) && !stored.contains(p))
                })
                .map(|s| s.id.as_str())
                .collect();
            assert!(dangling.is_empty(), "dangling after a batch: {dangling:?}");
        }
        nodes
    }

    #[test]
    fn the_planner_keeps_what_the_oracle_keeps_and_is_idempotent() {
        for seed in 0..600u64 {
            let n = 1 + (seed % 40) as usize;
            let nodes = graph(seed, n);
            let p = policy(seed);
            if p.validate().is_err() {
                continue;
            }
            let now = 100 * HOUR;
            let plan = plan_thread(&p, now, nodes.clone(), 1 + (seed % 5) as usize);
            let expected: BTreeSet<String> = if plan.delete_thread {
                BTreeSet::new()
            } else if !p.thins() {
                nodes.iter().map(|s| s.id.clone()).collect()
            } else {
                oracle(&p, now, &nodes)
            };
            let removed: Vec<&String> = plan.batches.iter().flat_map(|b| &b.ids).collect();
            let all: BTreeSet<String> = nodes.iter().map(|s| s.id.clone()).collect();
            let left: BTreeSet<String> = all.iter().filter(|id| !removed.contains(id)).cloned().collect();
            assert_eq!(left, expected, "seed {seed}");
            assert_eq!(
                removed.len(),
                all.len() - expected.len(),
                "seed {seed}: removed once each"
            );
            assert!(plan.batches.iter().all(|b| b.ids.len() <= 1 + (seed % 5) as usize));
            if !plan.delete_thread {
                assert!(left.contains(all.last().unwrap()), "seed {seed}: the latest stays");
            }
            // a value goes with the last checkpoint naming it, never earlier
            let mut alive: Vec<Skeleton> = nodes.clone();
            for b in &plan.batches {
                alive.retain(|s| !b.ids.contains(&s.id));
                for r in &b.orphan_refs {
                    assert!(
                        !alive.iter().any(|s| s.refs.contains(r)),
                        "seed {seed}: ref {r} still named"
                    );
                }
            }
            let named: HashSet<u64> = alive.iter().flat_map(|s| s.refs.iter().copied()).collect();
            let freed: HashSet<u64> = plan
                .batches
                .iter()
                .flat_map(|b| b.orphan_refs.iter().copied())
                .collect();
            let all_refs: HashSet<u64> = nodes.iter().flat_map(|s| s.refs.iter().copied()).collect();
            assert_eq!(
                freed,
                all_refs.difference(&named).copied().collect::<HashSet<_>>(),
                "seed {seed}"
            );
            // a second run with the same clock removes nothing
            let after = apply(nodes, &plan);
            let again = plan_thread(&p, now, after, 3);
            assert!(
                again.batches.is_empty() || plan.delete_thread,
                "seed {seed}: second run removes {:?}",
                again.batches
            );
        }
    }
}

mod task {
    use std::time::Duration;

    use crate::retention::RetentionPolicy;
    use crate::saver::{CheckpointSaver, CheckpointSaverExt, ListOptions};
    use crate::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, InMemorySaver};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_background_task_retains_and_stops_with_its_saver() {
        let saver = InMemorySaver::new();
        let mut parent = CheckpointConfig::new("bg");
        for step in 0..6 {
            let cp = Checkpoint::new(step);
            let md = CheckpointMetadata::new(CheckpointSource::Loop, step);
            parent = saver.put(&parent, &cp, &md, &Default::default()).await.unwrap();
        }
        let task = saver
            .spawn_retention(RetentionPolicy::new().keep_last(2), Duration::from_millis(10))
            .unwrap();
        let mut left = usize::MAX;
        for _ in 0..1000 {
            left = saver.list_vec(None, ListOptions::default()).await.unwrap().len();
            if left == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(left, 2, "the task did not retain");
        assert!(!task.is_finished());
        drop(saver);
        for _ in 0..1000 {
            if task.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(task.is_finished(), "the task outlived its saver");
        let bad = InMemorySaver::new().spawn_retention(RetentionPolicy::new(), Duration::from_secs(1));
        assert!(matches!(bad, Err(crate::Error::InvalidPolicy(_))));
    }
}
