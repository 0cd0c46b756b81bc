//! Lock holds and concurrent callers, plus the callgrind workload.

#[allow(unused_imports)]
use super::*;

#[tokio::test]
async fn put_writes_of_100_000_writes_in_one_call_is_correct() {
    let n = 100_000;
    let s = InMemorySaver::new();
    put_bare(&s, "t", "", "1", None, 0).await;
    let at = cfg("t", "", Some("1"));
    let before = s.storage_bytes();
    s.put_writes(&at, &many_writes(n), "task-b", "~p").await.unwrap();
    let added = s.storage_bytes() - before;
    // Same task again: regular writes keep their first value, the special one
    // is replaced; another task's writes sort before ("task-a" < "task-b").
    let again: Vec<(String, Value)> = many_writes(n)
        .into_iter()
        .map(|(ch, _)| {
            let v = if ch == "__error__" {
                Value::from("last")
            } else {
                Value::Int(-1)
            };
            (ch, v)
        })
        .collect();
    s.put_writes(&at, &again, "task-b", "~p").await.unwrap();
    s.put_writes(&at, &many_writes(n), "task-a", "~p").await.unwrap();
    let t = s.get_tuple(&at).await.unwrap().unwrap();
    let specials = n / 1000;
    assert_eq!(t.pending_writes.len(), 2 * (n - specials + 1));
    let (a, b) = t.pending_writes.split_at(n - specials + 1);
    let check = |ws: &[PendingWrite], task: &str, error: Value| {
        assert!(ws.iter().all(|w| w.task_id == task));
        // (task_path, task_id, idx) order: the special write (idx -1) first,
        // then the regular ones by position.
        assert_eq!((ws[0].channel.as_str(), &ws[0].value), ("__error__", &error));
        let regular: Vec<i64> = ws[1..]
            .iter()
            .map(|w| match w.value {
                Value::Int(i) => {
                    assert_eq!(w.channel, format!("c{i}"));
                    i
                }
                ref other => panic!("{other:?}"),
            })
            .collect();
        let want: Vec<i64> = (0..n as i64).filter(|i| i % 1000 != 0).collect();
        assert_eq!(regular, want);
    };
    check(a, "task-a", Value::Int((n - 1000) as i64));
    check(b, "task-b", Value::from("last"));
    // The byte count follows the replacements: task-a's set equals task-b's
    // first one, and the second call only replaced the special write.
    let last = JsonPlusSerializer.dumps_typed(&Value::from("last")).unwrap().data.len();
    let first = JsonPlusSerializer
        .dumps_typed(&Value::Int((n - 1000) as i64))
        .unwrap()
        .data
        .len();
    assert_eq!(s.storage_bytes() - before, 2 * added - first + last);
}

#[tokio::test]
async fn a_special_write_under_another_task_path_moves_the_write() {
    let s = InMemorySaver::new();
    let at = cfg("t", "", Some("1"));
    let w = |ch: &str, v: i64| (ch.to_owned(), Value::Int(v));
    s.put_writes(&at, &[w("a", 1), w("__interrupt__", 1)], "task", "~b")
        .await
        .unwrap();
    s.put_writes(&at, &[w("z", 0)], "other", "~a~").await.unwrap();
    // The identity is (task_id, idx) whatever the path: "a" (idx 0) is kept
    // under ~b, the interrupt (idx -3) moves to ~a.
    s.put_writes(&at, &[w("a", 2), w("__interrupt__", 2)], "task", "~a")
        .await
        .unwrap();
    s.put_writes(&at, &[w("__interrupt__", 3)], "task", "~a").await.unwrap();
    let want = [
        ("task", "__interrupt__", Value::Int(3)),
        ("other", "z", Value::Int(0)),
        ("task", "a", Value::Int(1)),
    ];
    assert_pending_once_put(&s, &at, &want).await;
    let sizes: usize = [1i64, 0, 3]
        .iter()
        .map(|v| JsonPlusSerializer.dumps_typed(&Value::Int(*v)).unwrap().data.len())
        .sum();
    assert_eq!(
        s.storage_bytes(),
        sizes + size::skeleton_len(&cp("1", &[], &[])).unwrap() + size::metadata_len(&meta(0)).unwrap()
    );
}

/// [`JsonPlusSerializer`]'s bytes, counting the values it encoded. It answers
/// `preserves_values` false (always safe) rather than forwarding it, so the
/// saver encodes every value through it.
#[derive(Debug, Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl Serializer for Counting {
    fn dumps_typed(&self, value: &Value) -> Result<TypedBytes> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        JsonPlusSerializer.dumps_typed(value)
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> Result<Value> {
        JsonPlusSerializer.loads_typed(tag, data)
    }
}

#[test]
fn a_big_put_writes_does_not_block_an_unrelated_get_tuple() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let n = 100_000;
    let counting = Arc::new(Counting::default());
    let s = InMemorySaver::with_serializer(counting.clone());
    let rt = || tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt().block_on(put_bare(&s, "other", "", "1", None, 0));
    rt().block_on(put_bare(&s, "t", "", "1", None, 0));
    let writes = many_writes(n);
    let encoded = counting.0.load(Ordering::SeqCst) + n;
    let done = AtomicBool::new(false);
    let gets_during = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let rt = rt();
            // Once every write is encoded, put_writes only builds and
            // installs the new set; before the fix it held the store lock
            // for all of that.
            while counting.0.load(Ordering::SeqCst) < encoded {
                std::thread::yield_now();
            }
            while !done.load(Ordering::SeqCst) {
                let got = rt.block_on(s.get_tuple(&cfg("other", "", None))).unwrap();
                assert!(got.is_some());
                if !done.load(Ordering::SeqCst) {
                    gets_during.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        rt().block_on(s.put_writes(&cfg("t", "", Some("1")), &writes, "task", ""))
            .unwrap();
        done.store(true, Ordering::SeqCst);
    });
    // Many gets: with the store lock held until just before put_writes
    // returns, at most the one or two in that last instant could complete.
    let gets = gets_during.load(Ordering::SeqCst);
    assert!(gets >= 10, "only {gets} get_tuple calls completed during put_writes");
    let t = rt().block_on(s.get_tuple(&cfg("t", "", Some("1")))).unwrap().unwrap();
    assert_eq!(t.pending_writes.len(), n - n / 1000 + 1);
}

#[test]
fn metadata_nested_beyond_the_encoder_limit_is_refused_without_deep_recursion() {
    // A large stack only for building and dropping the 40 000-level value
    // (both recursive in `Value`); the saver's own walk stops at MAX_DEPTH.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let s = InMemorySaver::new();
            let limit = crate::serde::msgpack::MAX_DEPTH;
            for levels in [limit - 1, limit, 200, 40_000] {
                let mut m = meta(0);
                m.0.insert("deep".to_owned(), nested(levels));
                let fits = crate::serde::msgpack::encode(&Value::Map(
                    m.0.iter()
                        .map(|(k, v)| (Value::from(k.as_str()), v.clone()))
                        .collect::<Vec<_>>()
                        .into(),
                ))
                .is_ok();
                assert_eq!(fits, levels < limit, "{levels}");
                // Every saver refuses a little earlier than the encoder: the
                // input limit leaves room for what a store wraps around a value.
                let fits = levels <= crate::limits::MAX_NESTING;
                let id = format!("{levels:06}");
                let got = rt.block_on(s.put(&cfg("t", "", None), &cp(&id, &[], &[]), &m, &nv(&[])));
                let stored = rt.block_on(s.get_tuple(&cfg("t", "", Some(&id)))).unwrap();
                if fits {
                    got.unwrap();
                    assert_eq!(stored.unwrap().metadata, m);
                } else {
                    assert!(matches!(got, Err(Error::Serde { .. })), "{levels}: {got:?}");
                    assert!(stored.is_none(), "{levels}: nothing stored");
                }
                // A send nested too deep is refused the same way.
                let mut c = cp(&format!("s{id}"), &[], &[]);
                c.pending_sends = Some(vec![nested(levels)]);
                let got = rt.block_on(s.put(&cfg("t", "", None), &c, &meta(0), &nv(&[])));
                assert_eq!(got.is_ok(), levels < limit - 1, "{levels}: {got:?}");
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn a_list_with_a_large_filter_does_not_block_writers() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // 150-key metadata on 2 048 checkpoints, a filter that matches one in
    // 256 (the last key differs), built separately (no shared map to
    // short-cut the comparison): 2 048 comparisons, outside the lock. Before,
    // each lock hold ran 1 024 of them and a writer got in between holds only.
    let keys = 150;
    let big = |last: i64| {
        let mut entries: Vec<(String, Value)> = (0..keys).map(|i| (format!("k{i}"), Value::Int(i))).collect();
        entries.push(("last".to_owned(), Value::Int(last)));
        Value::map(entries)
    };
    let rows = 2_048;
    let s = InMemorySaver::new();
    let rt = || tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (hit, miss) = (meta(0), meta(0));
    let (mut hit, mut miss) = (hit, miss);
    hit.0.insert("big".to_owned(), big(1));
    miss.0.insert("big".to_owned(), big(0));
    rt().block_on(async {
        for i in 0..rows {
            let m = if i % 256 == 0 { &hit } else { &miss };
            s.put(&cfg("t", "", None), &cp(&format!("{i:06}"), &[], &[]), m, &nv(&[]))
                .await
                .unwrap();
        }
    });
    let started = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let puts_during = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let rt = rt();
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let mut i = 0;
            while !done.load(Ordering::SeqCst) {
                i += 1;
                rt.block_on(s.put(
                    &cfg("w", "", None),
                    &cp(&format!("{i:06}"), &[], &[]),
                    &meta(0),
                    &nv(&[]),
                ))
                .unwrap();
                if !done.load(Ordering::SeqCst) {
                    puts_during.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        let lister = rt();
        started.store(true, Ordering::SeqCst);
        let got = lister.block_on(s.list_vec(Some(cfg("t", "", None)), ListOptions::default().filter("big", big(1))));
        done.store(true, Ordering::SeqCst);
        assert_eq!(got.unwrap().len(), rows / 256);
    });
    let puts = puts_during.load(Ordering::SeqCst);
    assert!(puts >= 10, "only {puts} puts completed during the list");
}

#[tokio::test]
async fn totals_are_summed_in_slices_over_many_threads() {
    let s = InMemorySaver::new();
    let one = size::skeleton_len(&cp("1", &[], &[])).unwrap() + size::metadata_len(&meta(0)).unwrap();
    let threads = 2 * store::SCAN_BUDGET + 5;
    for t in 0..threads {
        put_bare(&s, &format!("t{t:05}"), "", "1", None, 0).await;
    }
    assert_eq!(s.checkpoint_count(), threads);
    assert_eq!(s.storage_bytes(), threads * one);
}

/// A new thread's runtime.
fn current_thread_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

/// A saver holding `big_thread(thread, n)` and a thread "other" of one
/// checkpoint.
fn big_and_other(thread: &str, n: usize) -> InMemorySaver {
    let s = InMemorySaver::new();
    big_thread(&s, thread, n);
    current_thread_rt().block_on(put_bare(&s, "other", "", "1", None, 0));
    s
}

/// Runs `op` while another thread reads in rounds until it ends: each
/// round gets "other" (always there), then runs `probe`. How many rounds
/// `probe` counted (returned `true`).
fn rounds_during(
    s: &InMemorySaver,
    op: impl FnOnce(&tokio::runtime::Runtime),
    probe: impl Fn(&tokio::runtime::Runtime) -> bool + Sync,
) -> usize {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let done = AtomicBool::new(false);
    let counted = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let rt = current_thread_rt();
            while !done.load(Ordering::SeqCst) {
                let got = rt.block_on(s.get_tuple(&cfg("other", "", None))).unwrap();
                assert!(got.is_some());
                if probe(&rt) {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        op(&current_thread_rt());
        done.store(true, Ordering::SeqCst);
    });
    counted.load(Ordering::SeqCst)
}

#[test]
fn a_big_copy_thread_does_not_block_an_unrelated_get_tuple_and_appears_whole() {
    let n = 50_000;
    let s = big_and_other("src", n);
    let base = s.mem().store.read().global_len();
    let copy = |rt: &tokio::runtime::Runtime| rt.block_on(s.copy_thread("src", "dst")).unwrap();
    let mid = rounds_during(&s, copy, |rt| {
        let (len, visible) = {
            let store = s.mem().store.read();
            (store.global_len(), store.has_checkpoints("dst"))
        };
        // The copy appears whole or not at all.
        assert!(!visible || len == base + n, "{len} entries with the copy visible");
        let latest = rt.block_on(s.get_tuple(&cfg("dst", "", None))).unwrap();
        // Once visible, it stays so; and the target's latest is found only once visible.
        let after = s.mem().store.read().has_checkpoints("dst");
        assert!(!visible || latest.is_some());
        assert!(latest.is_none() || after);
        // A get that completed while the copy's global entries were
        // partly in place: impossible when one lock hold installs them.
        len > base && len < base + n
    });
    assert!(mid >= 1, "no get_tuple completed while the copy was being installed");
    assert_eq!(s.checkpoint_count(), 2 * n + 1);
    let rt = current_thread_rt();
    for id in ["0000000", "0025000", "0049999"] {
        let a = rt.block_on(s.get_tuple(&cfg("src", "", Some(id)))).unwrap().unwrap();
        let b = rt.block_on(s.get_tuple(&cfg("dst", "", Some(id)))).unwrap().unwrap();
        assert_eq!(a.checkpoint, b.checkpoint);
        assert_eq!(a.pending_writes, b.pending_writes);
        assert_eq!(
            b.parent_config.map(|p| p.thread_id),
            a.parent_config.map(|_| "dst".to_owned())
        );
    }
    let listed = rt.block_on(s.list_vec(None, ListOptions::default())).unwrap();
    assert_eq!(listed.len(), 2 * n + 1);
}

#[tokio::test]
async fn deleting_a_thread_of_many_slices_leaves_no_global_entry() {
    let s = InMemorySaver::new();
    put_bare(&s, "other", "", "1", None, 0).await;
    for i in 0..3 * store::SCAN_BUDGET + 7 {
        put_bare(&s, "t", "", &format!("{i:06}"), None, 0).await;
    }
    s.copy_thread("t", "copy").await.unwrap();
    s.delete_thread("t").await.unwrap();
    s.delete_thread("copy").await.unwrap();
    // Each slice used to skip the entry at its boundary (left behind, dead).
    assert_eq!(s.mem().store.read().global_len(), 1);
}

#[test]
fn a_big_prune_does_not_block_an_unrelated_get_tuple_and_keeps_the_head_readable() {
    let n = 50_000;
    let s = big_and_other("t", n);
    let base = s.mem().store.read().global_len() - n;
    let head = format!("{:07}", n - 1);
    let prune = |rt: &tokio::runtime::Runtime| {
        rt.block_on(s.prune(&["t".to_owned()], PruneStrategy::KeepLatest))
            .unwrap();
    };
    let mid = rounds_during(&s, prune, |rt| {
        // The kept head is the latest throughout, with its writes.
        let latest = rt.block_on(s.get_tuple(&cfg("t", "", None))).unwrap().unwrap();
        assert_eq!(latest.checkpoint.id, head);
        let len = s.mem().store.read().global_len();
        // A get that completed while the prune was part done:
        // impossible when one lock hold removes everything.
        len > base + 1 && len < base + n
    });
    assert!(mid >= 1, "no get_tuple completed while the prune ran");
    let rt = current_thread_rt();
    let left = rt.block_on(s.list_vec(None, ListOptions::default())).unwrap();
    // Newest id first: "1" sorts after "0049999".
    assert_eq!(
        keys(&left),
        [
            ("1".into(), "other".into(), String::new()),
            (head.clone(), "t".into(), String::new())
        ]
    );
    assert_eq!(s.checkpoint_count(), 2);
    assert_eq!(s.mem().store.read().global_len(), base + 1);
    // The writes of pruned checkpoints went with them.
    assert!(rt
        .block_on(s.get_tuple(&cfg("t", "", Some("0049900"))))
        .unwrap()
        .is_none());
}

/// A put + get loop on a 100-message checkpoint, to compare instruction
/// counts: `valgrind --tool=callgrind <test binary> --ignored --exact
/// memory::tests::put_get_loop_of_a_100_message_checkpoint`.
#[tokio::test]
#[ignore = "a workload for callgrind, not a check"]
async fn put_get_loop_of_a_100_message_checkpoint() {
    let s = InMemorySaver::new();
    let messages: Vec<Value> = (0..100)
        .map(|i| {
            Value::map([
                ("type", Value::from("human")),
                ("content", Value::from(format!("message {i}"))),
            ])
        })
        .collect();
    let mut parent = cfg("t", "", None);
    for i in 0..2_000i64 {
        let c = cp(
            &format!("{i:06}"),
            &[("messages", i + 1), ("step", i + 1)],
            &[
                ("messages", Value::Array(messages.clone().into())),
                ("step", Value::Int(i)),
            ],
        );
        parent = s
            .put(&parent, &c, &meta(i), &nv(&[("messages", i + 1), ("step", i + 1)]))
            .await
            .unwrap();
        let got = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
        assert_eq!(got.checkpoint.id, c.id);
    }
}

#[test]
fn a_put_of_many_channels_does_not_block_an_unrelated_get_tuple() {
    let c = 20_000;
    let s = InMemorySaver::new();
    let rt = current_thread_rt;
    rt().block_on(put_bare(&s, "other", "", "1", None, 0));
    let names: Vec<String> = (0..c).map(|i| format!("ch{i:06}")).collect();
    let versions: Vec<(&str, i64)> = names.iter().map(|n| (n.as_str(), 1)).collect();
    let values: Vec<(&str, Value)> = names.iter().map(|n| (n.as_str(), Value::from(n.as_str()))).collect();
    let wide = cp("1", &versions, &values);
    let new = nv(&versions);
    let before = s.storage_bytes();
    let put = |rt: &tokio::runtime::Runtime| {
        rt.block_on(s.put(&cfg("t", "", None), &wide, &meta(0), &new)).unwrap();
    };
    let mid = rounds_during(&s, put, |_| {
        // Values of the put stored, its checkpoint not yet: the put
        // is part done, which one lock hold never shows.
        let (count, bytes) = (s.checkpoint_count(), s.storage_bytes());
        count == 1 && bytes > before
    });
    assert!(mid >= 1, "no get_tuple completed while the put ran");
    let got = rt().block_on(s.get_tuple(&cfg("t", "", None))).unwrap().unwrap();
    assert_eq!(got.checkpoint.channel_values.len(), c);
    assert_eq!(
        got.checkpoint.channel_values.get("ch012345"),
        Some(&Value::from("ch012345"))
    );
    // A second checkpoint reads every value through the versions (Lookup).
    let next = cp("2", &versions, &[]);
    rt().block_on(s.put(&cfg("t", "", Some("1")), &next, &meta(1), &nv(&[])))
        .unwrap();
    let got = rt().block_on(s.get_tuple(&cfg("t", "", None))).unwrap().unwrap();
    assert_eq!(got.checkpoint.channel_values.len(), c);
    assert_eq!(
        got.checkpoint.channel_values.get("ch000007"),
        Some(&Value::from("ch000007"))
    );
}
