//! Puts and writes: what is stored, shared and counted.

#[allow(unused_imports)]
use super::*;

#[tokio::test]
async fn values_go_through_the_serializer_and_are_isolated() {
    let s = InMemorySaver::with_serializer(Arc::new(Xor));
    let mut value = Value::Array((vec![Value::from("x")]).into());
    let c = cp("1", &[("a", 1)], &[("a", value.clone())]);
    s.put(&cfg("t", "", None), &c, &meta(0), &nv(&[("a", 1)]))
        .await
        .unwrap();
    s.put_writes(&cfg("t", "", Some("1")), &[("a".into(), value.clone())], "task", "")
        .await
        .unwrap();
    if let Value::Array(items) = &mut value {
        items.push(Value::Nil);
    }
    let tag = s.mem().store.read().blob_tag("t", "", "a", "1").unwrap();
    assert!(
        matches!(&tag, Stored::Encoded { tag, .. } if tag.as_str() == "msgpack+xor"),
        "{tag:?}"
    );
    let t = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
    let want = Value::Array((vec![Value::from("x")]).into());
    assert_eq!(t.checkpoint.channel_values.get("a"), Some(&want));
    assert_eq!(t.pending_writes[0].value, want);
}

#[tokio::test]
async fn copy_thread_refuses_and_shares() {
    let s = InMemorySaver::new();
    let c = cp("1", &[("a", 1)], &[("a", Value::from("v"))]);
    s.put(&cfg("src", "", None), &c, &meta(0), &nv(&[("a", 1)]))
        .await
        .unwrap();
    put_bare(&s, "src", "sub:1", "2", None, 1).await;
    s.put_writes(&cfg("src", "", Some("1")), &[("w".into(), Value::Int(1))], "task", "~p")
        .await
        .unwrap();
    put_bare(&s, "busy", "other", "0", None, 0).await;

    let err = s.copy_thread("src", "busy").await.unwrap_err();
    assert!(
        matches!(&err, Error::ThreadExists { thread_id } if thread_id == "busy"),
        "{err}"
    );
    assert_eq!(s.checkpoint_count(), 3);
    let err = s.copy_thread("src", "src").await.unwrap_err();
    assert!(matches!(err, Error::ThreadExists { .. }));
    s.copy_thread("nope", "dst0").await.unwrap();
    assert!(!s.thread_ids().contains(&"dst0".to_owned()));

    // A target holding only writes is not "existing".
    s.put_writes(&cfg("dst", "", Some("x")), &[("w".into(), Value::Int(9))], "task", "")
        .await
        .unwrap();
    s.copy_thread("src", "dst").await.unwrap();
    let src = list_all(
        &s,
        Some(CheckpointConfig::all_namespaces("src")),
        ListOptions::default(),
    )
    .await;
    let dst = list_all(
        &s,
        Some(CheckpointConfig::all_namespaces("dst")),
        ListOptions::default(),
    )
    .await;
    assert_eq!(src.len(), 2);
    for (a, b) in src.iter().zip(&dst) {
        assert_eq!(a.checkpoint, b.checkpoint);
        assert_eq!(a.metadata, b.metadata);
        assert_eq!(a.pending_writes, b.pending_writes);
        assert_eq!(a.config.checkpoint_ns, b.config.checkpoint_ns);
        assert_eq!(b.config.thread_id, "dst");
    }
    // The copy lives on when the source goes, in every index.
    s.delete_thread("src").await.unwrap();
    let global = list_all(&s, None, ListOptions::default()).await;
    assert_eq!(
        keys(&global),
        [
            ("2".into(), "dst".into(), "sub:1".into()),
            ("1".into(), "dst".into(), String::new()),
            ("0".into(), "busy".into(), "other".into()),
        ]
    );
    let t = s.get_tuple(&cfg("dst", "", None)).await.unwrap().unwrap();
    assert_eq!(t.checkpoint.channel_values.get("a"), Some(&Value::from("v")));
    assert_eq!(t.pending_writes.len(), 1);
    // And the source's global entries do not come back with it.
    s.delete_thread("dst").await.unwrap();
    assert_eq!(list_all(&s, None, ListOptions::default()).await.len(), 1);
}

#[tokio::test]
async fn prune_keeps_delta_ancestry_and_collects_the_rest() {
    let s = InMemorySaver::new();
    delta_chain(&s, "t", 8, &[3]).await;
    delta_chain(&s, "u", 4, &[4]).await;
    let before = s
        .get_delta_channel_history(&cfg("t", "", None), &["d".to_owned()])
        .await
        .unwrap();
    let bytes_before = s.storage_bytes();

    s.prune(&["t".to_owned(), "u".to_owned()], PruneStrategy::KeepLatest)
        .await
        .unwrap();
    // t: head 08 has no value for d (walk to the snapshot at 03) nor for... s
    // has a value (version 1 blob), so only d's chain is kept.
    let left = list_all(&s, Some(cfg("t", "", None)), ListOptions::default()).await;
    assert_eq!(ids(&left), ["08", "07", "06", "05", "04", "03"]);
    // u: the head holds a snapshot: nothing else is needed.
    let left = list_all(&s, Some(cfg("u", "", None)), ListOptions::default()).await;
    assert_eq!(ids(&left), ["04"]);
    assert_eq!(left[0].pending_writes.len(), 1);

    let after = s
        .get_delta_channel_history(&cfg("t", "", None), &["d".to_owned()])
        .await
        .unwrap();
    assert_eq!(before, after);
    assert_eq!(after["d"].writes.len(), 5);
    // The plain value at version 1 was written by a removed checkpoint and is
    // still named by the kept ones: kept. Removed writes and skeletons freed.
    let head = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
    assert_eq!(head.checkpoint.channel_values.get("s"), Some(&Value::from("plain")));
    assert!(s.storage_bytes() < bytes_before);
    assert!(s.mem().store.read().blob_tag("t", "", "d", "1").is_none());
    assert!(s.mem().store.read().blob_tag("t", "", "d", "3").is_some());
}

#[tokio::test]
async fn prune_keeps_no_history_for_consumed_triggers() {
    // A trigger channel consumed at the head has a version and no value; it is
    // not a delta channel, so keep_latest keeps the head alone.
    let s = InMemorySaver::new();
    for i in 1..=4i64 {
        let id = format!("{i:02}");
        let values = if i == 1 {
            vec![("branch:to:a", Value::Nil)]
        } else {
            vec![]
        };
        let c = cp(&id, &[("branch:to:a", i)], &values);
        let parent = (i > 1).then(|| format!("{:02}", i - 1));
        s.put(
            &cfg("t", "", parent.as_deref()),
            &c,
            &meta(i),
            &nv(&[("branch:to:a", i)]),
        )
        .await
        .unwrap();
    }
    s.prune(&["t".to_owned()], PruneStrategy::KeepLatest).await.unwrap();
    let left = list_all(&s, Some(cfg("t", "", None)), ListOptions::default()).await;
    assert_eq!(ids(&left), ["04"]);
}

#[tokio::test]
async fn prune_removes_call_namespaces_of_older_roots() {
    let s = InMemorySaver::new();
    put_bare(&s, "t", "", "01", None, 0).await;
    put_bare(&s, "t", "", "02", Some("01"), 1).await;
    for (ns, root) in [("child:a", "01"), ("child:b", "02"), ("child:c", "zz"), ("child", "01")] {
        let mut m = meta(0);
        m.insert("parents", Value::map([("", Value::from(root))]));
        s.put(&cfg("t", ns, None), &cp("05", &[], &[]), &m, &ChannelVersions::new())
            .await
            .unwrap();
        s.put(
            &cfg("t", ns, Some("05")),
            &cp("06", &[], &[]),
            &m,
            &ChannelVersions::new(),
        )
        .await
        .unwrap();
    }
    s.prune(&["t".to_owned()], PruneStrategy::KeepLatest).await.unwrap();
    let left = list_all(&s, Some(CheckpointConfig::all_namespaces("t")), ListOptions::default()).await;
    // child:a belongs to an older root run: gone. child:b belongs to the kept
    // root; child:c names no saved root; "child" has no task id: kept.
    assert_eq!(
        keys(&left),
        [
            ("06".into(), "t".into(), "child:c".into()),
            ("06".into(), "t".into(), "child:b".into()),
            ("06".into(), "t".into(), "child".into()),
            ("02".into(), "t".into(), String::new()),
        ]
    );
    // Kept checkpoints forget their deleted parent, in the listing and by id.
    assert!(left.iter().all(|t| t.parent_config.is_none()));
    let root = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
    assert_eq!(root.parent_config, None);

    s.prune(&["t".to_owned()], PruneStrategy::Delete).await.unwrap();
    assert!(s.thread_ids().is_empty());
    assert_eq!(s.storage_bytes(), 0);
    assert!(list_all(&s, None, ListOptions::default()).await.is_empty());
}

#[tokio::test]
async fn delta_history_follows_parents_across_forks() {
    let s = InMemorySaver::new();
    delta_chain(&s, "t", 4, &[1]).await;
    // A fork from 02: 10 (parent 02) and 11 (parent 10). Ids sort after the
    // main chain, so id order would walk through 03/04; parents must not.
    let c = cp("10", &[("d", 10), ("s", 1)], &[]);
    s.put(&cfg("t", "", Some("02")), &c, &meta(3), &nv(&[("d", 10)]))
        .await
        .unwrap();
    s.put_writes(&cfg("t", "", Some("10")), &[("d".into(), Value::Int(10))], "task10", "")
        .await
        .unwrap();
    let c = cp("11", &[("d", 11), ("s", 1)], &[]);
    s.put(&cfg("t", "", Some("10")), &c, &meta(4), &nv(&[("d", 11)]))
        .await
        .unwrap();
    s.put_writes(&cfg("t", "", Some("11")), &[("d".into(), Value::Int(11))], "task11", "")
        .await
        .unwrap();

    let chans = ["d".to_owned(), "s".to_owned(), "none".to_owned()];
    let h = s.get_delta_channel_history(&cfg("t", "", None), &chans).await.unwrap();
    let values = |h: &DeltaChannelHistory| h.writes.iter().map(|w| w.value.clone()).collect::<Vec<_>>();
    // From 11: parent 10, then 02, then 01 (the snapshot, whose writes count).
    assert_eq!(values(&h["d"]), [Value::Int(1), Value::Int(2), Value::Int(10)]);
    assert_eq!(
        h["d"].seed,
        Some(Value::Ext(Box::new(ext(
            7,
            ExtPayload::Decoded(Box::new(Value::Int(1)))
        ))))
    );
    // s: stored at version 1 by every checkpoint: the parent is the seed.
    assert_eq!(h["s"].seed, Some(Value::from("plain")));
    assert!(h["s"].writes.is_empty());
    assert_eq!(h["none"], DeltaChannelHistory::default());
    // The main chain from 04.
    let h = s
        .get_delta_channel_history(&cfg("t", "", Some("04")), &["d".to_owned()])
        .await
        .unwrap();
    assert_eq!(values(&h["d"]), [Value::Int(1), Value::Int(2), Value::Int(3)]);
    // Missing target, empty request.
    let h = s
        .get_delta_channel_history(&cfg("t", "", Some("99")), &["d".to_owned()])
        .await
        .unwrap();
    assert_eq!(h["d"], DeltaChannelHistory::default());
    assert!(s
        .get_delta_channel_history(&cfg("t", "", None), &[])
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn delta_history_stops_on_parent_cycles() {
    let s = InMemorySaver::new();
    put_bare(&s, "t", "", "a", Some("b"), 0).await;
    put_bare(&s, "t", "", "b", Some("a"), 1).await;
    put_bare(&s, "t", "", "c", Some("b"), 2).await;
    let h = s
        .get_delta_channel_history(&cfg("t", "", None), &["x".to_owned()])
        .await
        .unwrap();
    assert_eq!(h["x"], DeltaChannelHistory::default());
}

#[tokio::test]
async fn list_threads_pages_with_a_cursor() {
    let s = InMemorySaver::new();
    for t in ["d", "a", "c", "b", "e"] {
        put_bare(&s, t, "", "05", None, 0).await;
        let mut m = meta(1);
        m.insert("user", if t == "c" { "x" } else { "y" });
        s.put(&cfg(t, "zz", None), &cp("07", &[], &[]), &m, &ChannelVersions::new())
            .await
            .unwrap();
        s.put(&cfg(t, "aa", None), &cp("07", &[], &[]), &m, &ChannelVersions::new())
            .await
            .unwrap();
    }
    // writes only: not listed
    s.put_writes(&cfg("bb", "", Some("1")), &[("w".into(), Value::Nil)], "task", "")
        .await
        .unwrap();
    let all = s.list_threads(ListThreadsOptions::default()).await.unwrap();
    let names: Vec<_> = all.iter().map(|t| t.thread_id.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "d", "e"]);
    // latest: greatest id, ties by ns DESC
    assert_eq!(all[0].latest, cfg("a", "zz", Some("07")));
    assert_eq!(all[0].metadata.step(), Some(1));

    let page = s
        .list_threads(ListThreadsOptions {
            after: Some("b".into()),
            limit: Some(2),
            ..Default::default()
        })
        .await
        .unwrap();
    let names: Vec<_> = page.iter().map(|t| t.thread_id.as_str()).collect();
    assert_eq!(names, ["c", "d"]);
    let page = s
        .list_threads(ListThreadsOptions {
            after: Some("bb".into()),
            filter: [("user".to_owned(), Value::from("y"))].into_iter().collect(),
            limit: Some(1),
        })
        .await
        .unwrap();
    let names: Vec<_> = page.iter().map(|t| t.thread_id.as_str()).collect();
    assert_eq!(names, ["d"]);
    assert!(s
        .list_threads(ListThreadsOptions {
            limit: Some(0),
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn list_threads_spans_many_scan_slices() {
    let s = InMemorySaver::new();
    let n = 2 * store::SCAN_BUDGET + 5;
    for t in 0..n {
        put_bare(&s, &format!("t{t:05}"), "", "1", None, 0).await;
    }
    let all = s.list_threads(ListThreadsOptions::default()).await.unwrap();
    assert_eq!(all.len(), n);
    assert!(all.windows(2).all(|w| w[0].thread_id < w[1].thread_id));
    let page = s
        .list_threads(ListThreadsOptions {
            after: Some(format!("t{:05}", store::SCAN_BUDGET - 1)),
            limit: Some(3),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page[0].thread_id, format!("t{:05}", store::SCAN_BUDGET));
    assert_eq!(page.len(), 3);
}

#[tokio::test]
async fn delete_for_runs_removes_checkpoints_writes_and_unreferenced_values() {
    let s = InMemorySaver::new();
    for (t, ns) in [("t1", ""), ("t1", "sub:1"), ("t2", "")] {
        for (i, run) in ["r1", "r2", "r1"].iter().enumerate() {
            let id = format!("{i}");
            let mut m = meta(i as i64);
            m.insert("run_id", *run);
            let c = cp(&id, &[("a", i as i64)], &[("a", Value::from(format!("{t}{ns}{i}")))]);
            let parent = i.checked_sub(1).map(|p| p.to_string());
            s.put(&cfg(t, ns, parent.as_deref()), &c, &m, &nv(&[("a", i as i64)]))
                .await
                .unwrap();
            s.put_writes(&cfg(t, ns, Some(&id)), &[("w".into(), Value::Int(1))], "task", "")
                .await
                .unwrap();
        }
    }
    s.delete_for_runs(&[]).await.unwrap();
    s.delete_for_runs(&["nope".to_owned()]).await.unwrap();
    assert_eq!(s.checkpoint_count(), 9);
    s.delete_for_runs(&["r1".to_owned()]).await.unwrap();
    let left = list_all(&s, None, ListOptions::default()).await;
    assert_eq!(
        keys(&left),
        [
            ("1".into(), "t2".into(), String::new()),
            ("1".into(), "t1".into(), "sub:1".into()),
            ("1".into(), "t1".into(), String::new()),
        ]
    );
    assert!(s.mem().store.read().blob_tag("t1", "", "a", "0").is_none());
    assert!(s.mem().store.read().blob_tag("t1", "", "a", "1").is_some());
    s.delete_for_runs(&["r2".to_owned()]).await.unwrap();
    assert_eq!(s.checkpoint_count(), 0);
    assert!(s.thread_ids().is_empty(), "{:?}", s.thread_ids());
    assert_eq!(s.storage_bytes(), 0);
}
