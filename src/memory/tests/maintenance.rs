//! Deletes, copies, prunes and runs.

#[allow(unused_imports)]
use super::*;

#[tokio::test]
async fn storage_bytes_counts_encoded_payloads() {
    let s = InMemorySaver::new();
    let mut c = cp(
        "1",
        &[("a", 1), ("b", 2)],
        &[("a", Value::from("hello")), ("b", Value::Nil)],
    );
    c.versions_seen.insert("node".into(), nv(&[("a", 1)]));
    c.updated_channels = Some(vec!["a".into()].into());
    c.extra.push(("x".into(), Value::Float(1.5)));
    let m = meta(3);
    s.put(&cfg("t", "", None), &c, &m, &nv(&[("a", 1), ("b", 2)]))
        .await
        .unwrap();
    s.put_writes(&cfg("t", "", Some("1")), &[("w".into(), Value::Int(300))], "task", "")
        .await
        .unwrap();
    let skeleton = crate::serde::msgpack::encode(&c.to_value(false)).unwrap().len();
    assert_eq!(size::skeleton_len(&c).unwrap(), skeleton);
    let metadata = crate::serde::msgpack::encode(&m.to_value()).unwrap().len();
    assert_eq!(size::metadata_len(&m).unwrap(), metadata);
    // "hello" = 6 bytes, Nil = 0 ("null"), 300 = 3 bytes
    assert_eq!(s.storage_bytes(), skeleton + metadata + 6 + 3);
    s.delete_thread("t").await.unwrap();
    assert_eq!(s.storage_bytes(), 0);
}

#[test]
fn value_len_matches_the_encoder() {
    let values = [
        Value::Nil,
        Value::Int(-33),
        Value::Int(70000),
        Value::UInt(u64::MAX),
        Value::F32(1.5),
        Value::from("x".repeat(40)),
        Value::from("y".repeat(300)),
        Value::Bin(bytes::Bytes::from(vec![0u8; 70000])),
        Value::Array((0..20).map(Value::from).collect()),
        Value::map((0..17).map(|i| (format!("k{i}"), Value::Bool(true)))),
        Value::Ext(Box::new(ext(7, ExtPayload::Decoded(Box::new(Value::Int(1)))))),
        Value::Ext(Box::new(ext(5, ExtPayload::Decoded(Box::new(Value::from("abc")))))),
        Value::Ext(Box::new(ext(42, ExtPayload::Raw(bytes::Bytes::from(vec![1u8; 300]))))),
    ];
    for v in values {
        assert_eq!(
            size::value_len(&v).unwrap(),
            crate::serde::msgpack::encode(&v).unwrap().len(),
            "{v:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// The a_one_node fixture: Python's InMemorySaver storage, put back through the
// public API as Python's runtime did, reads the values of the expected dump.

#[tokio::test]
async fn a_one_node_fixture_reads_back_python_values() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/fixtures");
    let raw = std::fs::read_to_string(dir.join("a_one_node.memory.json")).unwrap();
    let expected = std::fs::read_to_string(dir.join("a_one_node.expected.json")).unwrap();
    let dump: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&expected).unwrap();
    let s = InMemorySaver::new();

    let mut previous = ChannelVersions::new();
    for entry in dump["storage"].as_array().unwrap() {
        let (thread, ns) = (
            entry["thread_id"].as_str().unwrap(),
            entry["checkpoint_ns"].as_str().unwrap(),
        );
        let mut c = Checkpoint::from_value(&typed(&entry["checkpoint"])).unwrap();
        let m = CheckpointMetadata::from_value(&typed(&entry["metadata"])).unwrap();
        // The runtime's put: the channels whose version moved are new, and
        // channel_values holds the current value of every channel.
        let new_versions: ChannelVersions = c
            .channel_versions
            .iter()
            .filter(|(ch, v)| previous.get(*ch) != Some(*v))
            .map(|(ch, v)| (ch.clone(), v.clone()))
            .collect();
        for blob in dump["blobs"].as_array().unwrap() {
            let ch = blob["channel"].as_str().unwrap();
            if c.channel_versions.get(ch).map(|v| v.to_string()).as_deref() == blob["version"].as_str()
                && blob["value"]["type"] != "empty"
            {
                c.channel_values.insert(ch.to_owned(), typed(&blob["value"]));
            }
        }
        previous = c.channel_versions.clone();
        let parent = entry["parent_checkpoint_id"].as_str();
        s.put(&cfg(thread, ns, parent), &c, &m, &new_versions).await.unwrap();
    }
    // One put_writes call per (checkpoint, task), the writes at their indexes.
    type Call = (String, String, String, String, String);
    let mut calls: IndexMap<Call, Vec<(u64, String, Value)>> = IndexMap::new();
    for w in dump["writes"].as_array().unwrap() {
        let key = ["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path"]
            .map(|k| w[k].as_str().unwrap().to_owned());
        let [a, b, c, d, e] = key;
        calls.entry((a, b, c, d, e)).or_default().push((
            w["idx"].as_u64().unwrap(),
            w["channel"].as_str().unwrap().to_owned(),
            typed(&w["value"]),
        ));
    }
    for ((thread, ns, id, task, path), mut writes) in calls {
        writes.sort_by_key(|w| w.0);
        assert!(writes.iter().enumerate().all(|(i, w)| w.0 == i as u64));
        let batch: Vec<(String, Value)> = writes.into_iter().map(|(_, ch, v)| (ch, v)).collect();
        s.put_writes(&cfg(&thread, &ns, Some(&id)), &batch, &task, &path)
            .await
            .unwrap();
    }

    let got = list_all(&s, Some(cfg("12345", "", None)), ListOptions::default()).await;
    let want = expected["threads"][0]["namespaces"][0]["checkpoints"]
        .as_array()
        .unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().rev().zip(want) {
        let values: serde_json::Map<_, _> = g
            .checkpoint
            .channel_values
            .iter()
            .map(|(k, v)| (k.clone(), to_json(v)))
            .collect();
        assert_eq!(serde_json::Value::from(values), w["checkpoint"]["channel_values"]);
        assert_eq!(to_json(&g.metadata.to_value()), w["metadata"]);
        let writes: Vec<_> = g
            .pending_writes
            .iter()
            .map(|pw| (pw.channel.clone(), to_json(&pw.value)))
            .collect();
        let want_writes: Vec<_> = w["pending_writes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pw| (pw[1].as_str().unwrap().to_owned(), pw[2].clone()))
            .collect();
        assert_eq!(writes, want_writes);
    }
}

#[tokio::test]
async fn a_recreated_thread_does_not_resurrect_deleted_checkpoints() {
    let s = InMemorySaver::new();
    for id in ["1", "2", "3"] {
        put_bare(&s, "t", "", id, None, 0).await;
    }
    put_bare(&s, "u", "", "2", None, 0).await;
    s.delete_thread("t").await.unwrap();
    put_bare(&s, "t", "", "2", None, 5).await;
    let got = list_all(&s, None, ListOptions::default()).await;
    assert_eq!(
        keys(&got),
        [
            ("2".into(), "u".into(), String::new()),
            ("2".into(), "t".into(), String::new())
        ]
    );
    assert_eq!(got[1].metadata.step(), Some(5));
}

#[test]
fn filter_matches_is_metadata_matches() {
    let mut small = meta(1);
    small.insert("user", Value::map([("a", Value::Int(1)), ("b", Value::Int(2))]));
    small.insert("none", Value::Nil);
    let mut large = small.clone();
    for i in 0..10 {
        large.insert(format!("k{i}"), Value::Int(i));
    }
    let filters: Vec<IndexMap<String, Value>> = vec![
        IndexMap::new(),
        [("step".to_owned(), Value::Float(1.0))].into_iter().collect(),
        [("step".to_owned(), Value::Bool(true))].into_iter().collect(),
        [("missing".to_owned(), Value::Nil)].into_iter().collect(),
        [("missing".to_owned(), Value::Int(0))].into_iter().collect(),
        [("none".to_owned(), Value::Nil)].into_iter().collect(),
        [(
            "user".to_owned(),
            Value::map([("b", Value::Int(2)), ("a", Value::Int(1))]),
        )]
        .into_iter()
        .collect(),
        [
            ("k9".to_owned(), Value::Int(9)),
            ("source".to_owned(), Value::from("loop")),
        ]
        .into_iter()
        .collect(),
        [
            ("k9".to_owned(), Value::Int(9)),
            ("source".to_owned(), Value::from("input")),
        ]
        .into_iter()
        .collect(),
    ];
    let mut hits = 0;
    for m in [&small, &large] {
        for f in &filters {
            let want = crate::saver::metadata_matches(m, f);
            assert_eq!(store::filter_matches(m, f), want, "{f:?}");
            hits += usize::from(want);
        }
    }
    assert_eq!(hits, 11); // both outcomes exercised
}

#[tokio::test]
async fn large_deletes_are_complete_before_returning() {
    let s = InMemorySaver::new();
    for i in 0..200 {
        let c = cp(&format!("{i:04}"), &[("a", i)], &[("a", Value::Int(i))]);
        s.put(&cfg("big", "", None), &c, &meta(i), &nv(&[("a", i)]))
            .await
            .unwrap();
    }
    put_bare(&s, "small", "", "0001", None, 0).await;
    let small = s.storage_bytes();
    s.delete_thread("big").await.unwrap();
    // freed in the background, but gone from every read and from the count now
    assert_eq!(s.thread_ids(), ["small"]);
    assert!(s.storage_bytes() < small);
    assert_eq!(list_all(&s, None, ListOptions::default()).await.len(), 1);
    assert!(s.get_tuple(&cfg("big", "", None)).await.unwrap().is_none());
}

#[tokio::test]
async fn live_values_are_shared_not_copied_and_callers_cannot_change_them() {
    let s = InMemorySaver::new();
    let mut value = Value::from(vec!["x"]);
    let c = cp("1", &[("a", 1)], &[("a", value.clone())]);
    s.put(&cfg("t", "", None), &c, &meta(0), &nv(&[("a", 1)]))
        .await
        .unwrap();
    let t = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
    let (Some(Value::Array(got)), Value::Array(given)) = (t.checkpoint.channel_values.get("a"), &value) else {
        panic!("not arrays");
    };
    assert!(got.ptr_eq(given), "the stored list is the caller's, shared");
    if let Value::Array(items) = &mut value {
        items.push(Value::Nil); // copy-on-write: the saver's copy is untouched
    }
    let again = s.get_tuple(&cfg("t", "", None)).await.unwrap().unwrap();
    assert_eq!(again.checkpoint.channel_values.get("a"), Some(&Value::from(vec!["x"])));
    assert_eq!(value.as_array().map(<[Value]>::len), Some(2));
}

#[tokio::test]
async fn live_values_refuse_what_msgpack_refuses_even_when_memoised_shallower() {
    let s = InMemorySaver::new();
    // Fits: the input limit every saver shares (the decoder's 128 levels
    // less the two a store may wrap around a value).
    let ok = nested(crate::limits::MAX_NESTING);
    let c = cp("1", &[("a", 1)], &[("a", ok.clone())]);
    s.put(&cfg("t", "", None), &c, &meta(0), &nv(&[("a", 1)]))
        .await
        .unwrap();
    assert!(crate::serde::msgpack::encode(&ok).is_ok());
    // The same (now memoised) list one level deeper no longer fits.
    let deep = Value::Array(vec![ok].into());
    assert!(crate::limits::nests_deeper(&deep, crate::limits::MAX_NESTING));
    let c2 = cp("2", &[("a", 2)], &[("a", deep.clone())]);
    let before = s.storage_bytes();
    let err = s
        .put(&cfg("t", "", Some("1")), &c2, &meta(1), &nv(&[("a", 2)]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Serde { .. }), "{err:?}");
    let err = s
        .put_writes(&cfg("t", "", Some("1")), &[("w".into(), deep)], "task", "")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Serde { .. }), "{err:?}");
    assert_eq!(s.checkpoint_count(), 1, "nothing written");
    assert_eq!(s.storage_bytes(), before);
    assert!(s
        .get_tuple(&cfg("t", "", Some("1")))
        .await
        .unwrap()
        .unwrap()
        .pending_writes
        .is_empty());
}

#[tokio::test]
async fn live_storage_bytes_are_the_encoded_lengths() {
    let s = InMemorySaver::new();
    let shared = Value::map([("k", Value::from("v".repeat(40)))]);
    let values = [
        Value::Array(vec![shared.clone(), shared.clone(), Value::Float(0.5)].into()),
        Value::Ext(Box::new(Ext::raw(5, bytes::Bytes::from_static(b"\x91\x01")))),
        Value::Ext(Box::new(Ext::raw(42, bytes::Bytes::from_static(b"opaque")))),
        Value::Bin(bytes::Bytes::from_static(b"raw")),
        Value::Nil,
    ];
    for (i, v) in values.iter().enumerate() {
        let id = format!("{i}");
        let c = cp(&id, &[("a", i as i64 + 1)], &[("a", v.clone())]);
        let parent = (i > 0).then(|| format!("{}", i - 1));
        let before = s.storage_bytes();
        s.put(
            &cfg("t", "", parent.as_deref()),
            &c,
            &meta(i as i64),
            &nv(&[("a", i as i64 + 1)]),
        )
        .await
        .unwrap();
        let expected = JsonPlusSerializer.dumps_typed(v).unwrap().data.len()
            + size::skeleton_len(&c).unwrap()
            + size::metadata_len(&meta(i as i64)).unwrap();
        assert_eq!(s.storage_bytes() - before, expected, "{v:?}");
    }
}
