//! Reads: lookups, listings, filters, delta history, list_threads.

#[allow(unused_imports)]
use super::*;

#[tokio::test]
async fn global_list_orders_by_id_then_thread_then_ns_desc() {
    let s = InMemorySaver::new();
    let mut expected = Vec::new();
    // The same ids in several threads and namespaces, put in a scrambled order.
    for (i, thread) in ["t-b", "t-a", "t-c"].iter().enumerate() {
        for ns in ["", "sub:1", "a"] {
            for id in ["03", "01", "02", "10"] {
                if (id == "10" && ns == "a") || (i == 2 && id == "01") {
                    continue;
                }
                put_bare(&s, thread, ns, id, None, 0).await;
                expected.push((id.to_owned(), thread.to_string(), ns.to_owned()));
            }
        }
    }
    expected.sort();
    expected.reverse();
    assert_eq!(keys(&list_all(&s, None, ListOptions::default()).await), expected);

    // Every namespace of one thread: id DESC then ns DESC.
    let thread: Vec<_> = expected.iter().filter(|k| k.1 == "t-a").cloned().collect();
    let got = list_all(
        &s,
        Some(CheckpointConfig::all_namespaces("t-a")),
        ListOptions::default(),
    )
    .await;
    assert_eq!(keys(&got), thread);

    // One id in every namespace of a thread.
    let got = list_all(
        &s,
        Some(CheckpointConfig::all_namespaces("t-a").with_checkpoint_id("02")),
        ListOptions::default(),
    )
    .await;
    let want: Vec<_> = thread.iter().filter(|k| k.0 == "02").cloned().collect();
    assert_eq!(keys(&got), want);
    assert_eq!(want.len(), 3);

    // `before` with ties: strictly smaller ids only, in every scope.
    let got = list_all(&s, None, ListOptions::default().before("03")).await;
    let want: Vec<_> = expected.iter().filter(|k| k.0.as_str() < "03").cloned().collect();
    assert_eq!(keys(&got), want);
    let got = list_all(
        &s,
        Some(CheckpointConfig::all_namespaces("t-a")),
        ListOptions::default().before("03"),
    )
    .await;
    let want: Vec<_> = thread.iter().filter(|k| k.0.as_str() < "03").cloned().collect();
    assert_eq!(keys(&got), want);
}

#[tokio::test]
async fn list_pages_end_mid_way_without_loss_or_duplicates() {
    let s = InMemorySaver::new();
    let n = 3 * store::SCAN_BUDGET + 17;
    let mut all: Vec<(String, String, String, bool)> = (0..n)
        .map(|i| {
            let thread = format!("t{}", i % 3);
            let ns = if i % 5 == 0 { "sub" } else { "" };
            (format!("{:06}", i / 2), thread, ns.to_owned(), false) // pairs of equal ids
        })
        .collect();
    all.sort();
    all.reverse();
    // Sparse matches, some exactly at the edges of the scan budget (a sparse
    // filter ends every page on the budget, not on the page size).
    let budget = store::SCAN_BUDGET;
    for pos in [
        0,
        5,
        budget - 1,
        budget,
        2 * budget - 1,
        2 * budget,
        2 * budget + 1,
        n - 1,
    ] {
        all[pos].3 = true;
    }
    for i in (0..n).step_by(97) {
        all[i].3 = true;
    }
    for (step, (id, thread, ns, pick)) in all.iter().rev().enumerate() {
        let mut m = meta(step as i64);
        m.insert("pick", Value::Bool(*pick));
        s.put(&cfg(thread, ns, None), &cp(id, &[], &[]), &m, &ChannelVersions::new())
            .await
            .unwrap();
    }
    let strip =
        |v: Vec<(String, String, String, bool)>| -> Vec<_> { v.into_iter().map(|(a, b, c, _)| (a, b, c)).collect() };

    // Unfiltered, limits around the page size.
    for limit in [1, PAGE - 1, PAGE, PAGE + 1, 2 * PAGE, n, n + 5] {
        let got = list_all(&s, None, ListOptions::default().limit(limit)).await;
        assert_eq!(
            keys(&got),
            strip(all.iter().take(limit).cloned().collect()),
            "limit {limit}"
        );
    }
    // A sparse filter: pages end because of the scan budget, not the page size.
    let picked: Vec<_> = all.iter().filter(|k| k.3).cloned().collect();
    let got = list_all(&s, None, ListOptions::default().filter("pick", true)).await;
    assert_eq!(keys(&got), strip(picked.clone()));
    let got = list_all(&s, None, ListOptions::default().filter("pick", true).limit(7)).await;
    assert_eq!(keys(&got), strip(picked.iter().take(7).cloned().collect()));
    // Thread scope and namespace scope, with `before` in the middle.
    let before = all[all.len() / 2].0.clone();
    let got = list_all(
        &s,
        Some(CheckpointConfig::all_namespaces("t1")),
        ListOptions::default().before(before.clone()),
    )
    .await;
    let want: Vec<_> = all.iter().filter(|k| k.1 == "t1" && k.0 < before).cloned().collect();
    assert_eq!(keys(&got), strip(want));
    let got = list_all(&s, Some(cfg("t2", "", None)), ListOptions::default()).await;
    let want: Vec<_> = all.iter().filter(|k| k.1 == "t2" && k.2.is_empty()).cloned().collect();
    assert_eq!(keys(&got), strip(want));
}

#[tokio::test]
async fn list_stream_survives_writers_between_pages() {
    let s = InMemorySaver::new();
    for i in 0..(3 * PAGE) {
        put_bare(&s, "t", "", &format!("{i:04}"), None, i as i64).await;
    }
    let mut stream = s.list(Some(cfg("t", "", None)), ListOptions::default());
    let mut seen = Vec::new();
    while let Some(t) = stream.next().await {
        let t = t.unwrap();
        if seen.len() == PAGE / 2 {
            // newer ids than the cursor are not seen; older ones removed are not either
            put_bare(&s, "t", "", "9999", None, 0).await;
            s.prune(&["x".to_owned()], PruneStrategy::Delete).await.unwrap();
        }
        seen.push(t.checkpoint.id);
    }
    let want: Vec<String> = (0..(3 * PAGE)).rev().map(|i| format!("{i:04}")).collect();
    assert_eq!(seen, want);

    // A thread deleted mid-stream ends the stream after the buffered page.
    let mut stream = s.list(Some(cfg("t", "", None)), ListOptions::default());
    assert!(stream.next().await.unwrap().is_ok());
    s.delete_thread("t").await.unwrap();
    let rest: Vec<_> = stream.collect().await;
    assert!(rest.len() < PAGE, "{}", rest.len());
}

#[tokio::test]
async fn deleted_threads_vanish_from_the_global_index_and_compaction_keeps_order() {
    let s = InMemorySaver::new();
    let threads = 40;
    let per = 60; // 2400 entries: deleting most of them triggers a rebuild
    for t in 0..threads {
        for i in 0..per {
            put_bare(&s, &format!("t{t:02}"), "", &format!("{:05}", i * threads + t), None, 0).await;
        }
    }
    for t in 0..threads - 3 {
        s.delete_thread(&format!("t{t:02}")).await.unwrap();
        if t == 5 {
            // re-create a deleted thread with some of its old ids
            put_bare(&s, "t05", "", &format!("{:05}", 5), None, 0).await;
            put_bare(&s, "t05", "", "99999", None, 0).await;
        }
    }
    let got = list_all(&s, None, ListOptions::default()).await;
    let mut want: Vec<(String, String, String)> = (threads - 3..threads)
        .flat_map(|t| (0..per).map(move |i| (format!("{:05}", i * threads + t), format!("t{t:02}"), String::new())))
        .collect();
    want.push(("00005".into(), "t05".into(), String::new()));
    want.push(("99999".into(), "t05".into(), String::new()));
    want.sort();
    want.reverse();
    assert_eq!(keys(&got), want);
    assert_eq!(s.checkpoint_count(), want.len());
    let store = s.mem().store.read();
    assert!(store.global_len() < 2 * want.len() + 1100, "{}", store.global_len());
}

#[tokio::test]
async fn put_never_drops_a_given_value() {
    let s = InMemorySaver::new();
    // a: in new_versions with a value; b: value but not in new_versions, no blob
    // yet; c: in new_versions without a value (empty marker); d: a value
    // without any version.
    let c1 = cp(
        "1",
        &[("a", 1), ("b", 1), ("c", 1)],
        &[
            ("a", Value::from("a1")),
            ("b", Value::from("b1")),
            ("d", Value::from("d1")),
        ],
    );
    s.put(&cfg("t", "", None), &c1, &meta(0), &nv(&[("a", 1), ("c", 1)]))
        .await
        .unwrap();
    let got = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
    let values: Vec<_> = got
        .checkpoint
        .channel_values
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    assert_eq!(
        values,
        [
            ("a", Value::from("a1")),
            ("b", Value::from("b1")),
            ("d", Value::from("d1"))
        ]
    );
    assert!(s
        .mem()
        .store
        .read()
        .blob_tag("t", "", "c", "1")
        .unwrap()
        .is_empty_marker());

    // An `empty` marker never replaces a stored value at the same version.
    let c2 = cp("2", &[("a", 1)], &[]);
    s.put(&cfg("t", "", Some("1")), &c2, &meta(1), &nv(&[("a", 1)]))
        .await
        .unwrap();
    let first = s.get_tuple(&cfg("t", "", Some("1"))).await.unwrap().unwrap();
    assert_eq!(first.checkpoint.channel_values.get("a"), Some(&Value::from("a1")));
    let second = s.get_tuple(&cfg("t", "", Some("2"))).await.unwrap().unwrap();
    assert_eq!(second.checkpoint.channel_values.get("a"), None);

    // A channel not written by a put reads the value at its version.
    let c3 = cp("3", &[("a", 1), ("b", 1)], &[]);
    s.put(&cfg("t", "", Some("2")), &c3, &meta(2), &ChannelVersions::new())
        .await
        .unwrap();
    let third = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
    assert_eq!(third.checkpoint.channel_values.get("a"), Some(&Value::from("a1")));
    assert_eq!(third.checkpoint.channel_values.get("b"), Some(&Value::from("b1")));

    // A re-put replaces checkpoint, metadata and parent.
    s.put(&cfg("t", "", Some("1")), &c3, &meta(7), &ChannelVersions::new())
        .await
        .unwrap();
    let again = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
    assert_eq!(again.metadata.step(), Some(7));
    assert_eq!(again.parent_config.unwrap().checkpoint_id.as_deref(), Some("1"));
    assert_eq!(s.checkpoint_count(), 3);
}

#[tokio::test]
async fn put_writes_rules() {
    let s = InMemorySaver::new();
    let err = s
        .put_writes(&cfg("t", "", None), &[("a".into(), Value::Int(1))], "task", "")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");

    let at = cfg("t", "", Some("1"));
    // `a` and `__error__` written by task t2 (path "~p, b").
    let (saver, target) = (&s, &at);
    let t2_writes = |a: i64, error: &'static str| async move {
        let writes = [("a".into(), Value::Int(a)), ("__error__".into(), Value::from(error))];
        saver.put_writes(target, &writes, "t2", "~p, b").await.unwrap();
    };
    // Writes may precede their checkpoint.
    t2_writes(1, "e1").await;
    s.put_writes(&at, &[("x".into(), Value::Int(0))], "t9", "")
        .await
        .unwrap();
    s.put_writes(&at, &[("z".into(), Value::Int(5))], "t1", "~p, b")
        .await
        .unwrap();
    // Mixed batch: the regular write keeps the first value, the special one replaces.
    t2_writes(2, "e2").await;
    let want = [
        ("t9", "x", Value::Int(0)),
        ("t1", "z", Value::Int(5)),
        ("t2", "__error__", Value::from("e2")),
        ("t2", "a", Value::Int(1)),
    ];
    assert_pending_once_put(&s, &at, &want).await;
}
