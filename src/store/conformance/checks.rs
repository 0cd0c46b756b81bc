//! The key-value, batch, filter, namespace and TTL checks.

use serde_json::{json, Value};

use super::{fresh_namespace, CheckFailure, CheckResult};
use crate::store::{
    Filter, FilterOp, GetOp, ListNamespacesOp, Namespace, Op, OpResult, PutOp, SearchOp, Store, StoreError, StoreExt,
    Ttl,
};
use crate::Error;

fn keys(items: &[crate::store::SearchItem]) -> Vec<String> {
    let mut keys: Vec<String> = items.iter().map(|s| s.item.key.clone()).collect();
    keys.sort();
    keys
}

fn is_store_error(result: &crate::Result<impl std::fmt::Debug>, want: fn(&StoreError) -> bool) -> bool {
    matches!(result, Err(Error::Store(e)) if want(e))
}

async fn put_all(store: &dyn Store, ns: &Namespace, items: &[(&str, Value)]) -> Result<(), CheckFailure> {
    let ops = items
        .iter()
        .map(|(k, v)| Op::Put(PutOp::new(ns.clone(), *k, v.clone())))
        .collect();
    store.batch(ops).await?;
    Ok(())
}

fn ns(root: &Namespace, labels: &[&str]) -> Namespace {
    let all: Vec<String> = root
        .labels()
        .iter()
        .cloned()
        .chain(labels.iter().map(|s| (*s).to_owned()))
        .collect();
    Namespace::new(all).unwrap_or_default()
}

async fn filtered(store: &dyn Store, ns: &Namespace, filter: Value) -> Result<Vec<String>, CheckFailure> {
    let filter = Filter::from_json(&filter)?;
    Ok(keys(
        &store
            .search(SearchOp::new(ns.clone()).filter(filter).limit(100))
            .await?,
    ))
}

async fn numbers(store: &dyn Store) -> Result<Namespace, CheckFailure> {
    let ns = fresh_namespace(&["n"]);
    put_all(
        store,
        &ns,
        &[
            ("a", json!({"n": 1})),
            ("b", json!({"n": 2.5})),
            ("c", json!({"n": 4})),
            ("d", json!({"m": 4})),
        ],
    )
    .await?;
    Ok(ns)
}

pub async fn put_get_round_trip(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&["users"]);
    let value = json!({"name": "Ada", "tags": ["x", {"y": null}], "n": 1.5, "ok": true});
    store.put(&ns, "k", value.clone()).await?;
    let item = store
        .get(&ns, "k")
        .await?
        .ok_or_else(|| CheckFailure::new("the item just put is missing"))?;
    ensure_eq!(Value::Object(item.value.clone()), value, "value");
    ensure_eq!(item.namespace, ns, "namespace");
    ensure_eq!(item.key, "k", "key");
    ensure!(item.created_at <= item.updated_at, "created_at after updated_at");
    Ok(())
}

pub async fn get_missing_is_none(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    ensure!(store.get(&ns, "nothing").await?.is_none(), "a missing item was found");
    let reserved = Namespace::new(["langgraph", "x"])?;
    ensure!(
        store.get(&reserved, "k").await?.is_none(),
        "an item under langgraph was found"
    );
    Ok(())
}

pub async fn put_overwrites(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    store.put(&ns, "k", json!({"v": 1, "old": true})).await?;
    let first = store
        .get(&ns, "k")
        .await?
        .ok_or_else(|| CheckFailure::new("first put missing"))?;
    store.put(&ns, "k", json!({"v": 2})).await?;
    let second = store
        .get(&ns, "k")
        .await?
        .ok_or_else(|| CheckFailure::new("second put missing"))?;
    ensure_eq!(
        Value::Object(second.value),
        json!({"v": 2}),
        "the value is replaced, not merged"
    );
    ensure!(second.updated_at >= first.updated_at, "updated_at went back");
    let found = store.search(SearchOp::new(ns)).await?;
    ensure_eq!(found.len(), 1, "one item after two puts");
    Ok(())
}

pub async fn delete_removes(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    store.put(&ns, "k", json!({"v": 1})).await?;
    store.put(&ns, "other", json!({"v": 2})).await?;
    store.delete(&ns, "k").await?;
    ensure!(store.get(&ns, "k").await?.is_none(), "deleted item still read");
    ensure!(store.get(&ns, "other").await?.is_some(), "the other item went too");
    ensure_eq!(
        keys(&store.search(SearchOp::new(ns)).await?),
        ["other"],
        "search after delete"
    );
    Ok(())
}

pub async fn delete_missing_is_noop(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    store.delete(&ns, "never").await?;
    store.delete(&Namespace::root(), "never").await?;
    ensure!(
        store.get(&ns, "never").await?.is_none(),
        "a deleted missing item appeared"
    );
    Ok(())
}

pub async fn put_empty_namespace_refused(store: &dyn Store) -> CheckResult {
    let r = store.put(&Namespace::root(), "k", json!({})).await;
    ensure!(
        is_store_error(&r, |e| matches!(e, StoreError::InvalidNamespace { .. })),
        "got {r:?}"
    );
    Ok(())
}

pub async fn put_reserved_root_refused(store: &dyn Store) -> CheckResult {
    let ns = Namespace::new(["langgraph", "x"])?;
    let r = store.put(&ns, "k", json!({})).await;
    ensure!(
        is_store_error(&r, |e| matches!(e, StoreError::InvalidNamespace { .. })),
        "got {r:?}"
    );
    ensure!(store.get(&ns, "k").await?.is_none(), "the refused item was stored");
    Ok(())
}

pub async fn put_non_object_value_refused(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    for value in [json!([1]), json!("s"), json!(1), json!(null), json!(true)] {
        let r = store.put(&ns, "k", value.clone()).await;
        ensure!(
            is_store_error(&r, |e| matches!(e, StoreError::NonObjectValue { .. })),
            "{value}: got {r:?}"
        );
    }
    ensure!(store.get(&ns, "k").await?.is_none(), "a refused value was stored");
    Ok(())
}

pub async fn put_invalid_ttl_refused(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    for minutes in [f64::NAN, f64::INFINITY, -1.0, 1e300] {
        let r = store
            .put_op(PutOp::new(ns.clone(), "k", json!({})).ttl(Ttl::Minutes(minutes)))
            .await;
        ensure!(
            is_store_error(&r, |e| matches!(e, StoreError::InvalidTtl { .. })),
            "{minutes}: got {r:?}"
        );
    }
    ensure!(store.get(&ns, "k").await?.is_none(), "a refused item was stored");
    Ok(())
}

pub async fn batch_results_in_op_order(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    store.put(&ns, "a", json!({"v": 1})).await?;
    let results = store
        .batch(vec![
            Op::Search(SearchOp::new(ns.clone())),
            Op::Put(PutOp::new(ns.clone(), "b", json!({"v": 2}))),
            Op::Get(GetOp::new(ns.clone(), "a")),
            Op::ListNamespaces(ListNamespacesOp::default().prefix(ns.clone())),
            Op::Get(GetOp::new(ns.clone(), "missing")),
        ])
        .await?;
    ensure_eq!(results.len(), 5, "one result per op");
    ensure!(
        matches!(&results[0], OpResult::Search(s) if s.len() == 1),
        "0: {:?}",
        results[0]
    );
    ensure!(matches!(results[1], OpResult::Put), "1: {:?}", results[1]);
    ensure!(
        matches!(&results[2], OpResult::Item(Some(i)) if i.key == "a"),
        "2: {:?}",
        results[2]
    );
    ensure!(
        matches!(&results[3], OpResult::Namespaces(n) if n == std::slice::from_ref(&ns)),
        "3: {:?}",
        results[3]
    );
    ensure!(matches!(results[4], OpResult::Item(None)), "4: {:?}", results[4]);
    Ok(())
}

pub async fn batch_reads_see_state_before_puts(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    store.put(&ns, "old", json!({"v": 1})).await?;
    let results = store
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "new", json!({"v": 2}))),
            Op::Put(PutOp::new(ns.clone(), "old", json!({"v": 3}))),
            Op::Get(GetOp::new(ns.clone(), "new")),
            Op::Get(GetOp::new(ns.clone(), "old")),
            Op::Search(SearchOp::new(ns.clone())),
        ])
        .await?;
    ensure!(
        matches!(results[2], OpResult::Item(None)),
        "a get saw a put of its batch"
    );
    ensure!(
        matches!(&results[3], OpResult::Item(Some(i)) if i.value["v"] == 1),
        "a get saw an overwrite of its batch: {:?}",
        results[3]
    );
    ensure!(
        matches!(&results[4], OpResult::Search(s) if s.len() == 1),
        "search: {:?}",
        results[4]
    );
    ensure!(
        store.get(&ns, "new").await?.is_some(),
        "the batch's put was not applied"
    );
    Ok(())
}

pub async fn batch_last_put_wins(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    store
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "k", json!({"v": 1}))),
            Op::Put(PutOp::delete(ns.clone(), "k")),
            Op::Put(PutOp::new(ns.clone(), "k", json!({"v": 3}))),
            Op::Put(PutOp::new(ns.clone(), "gone", json!({"v": 1}))),
            Op::Put(PutOp::delete(ns.clone(), "gone")),
        ])
        .await?;
    let item = store.get(&ns, "k").await?;
    ensure!(matches!(&item, Some(i) if i.value["v"] == 3), "got {item:?}");
    ensure!(
        store.get(&ns, "gone").await?.is_none(),
        "a put deleted later in the batch is stored"
    );
    Ok(())
}

pub async fn batch_refused_stores_nothing(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    let r = store
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "good", json!({"v": 1}))),
            Op::Put(PutOp::new(ns.clone(), "bad", json!([1]))),
        ])
        .await;
    ensure!(r.is_err(), "a batch with a non-object value was accepted");
    ensure!(
        store.get(&ns, "good").await?.is_none(),
        "the valid put of a refused batch was stored"
    );
    Ok(())
}

pub async fn search_prefix_matches_whole_labels(store: &dyn Store) -> CheckResult {
    let root = fresh_namespace(&[]);
    put_all(store, &ns(&root, &["a"]), &[("1", json!({}))]).await?;
    put_all(store, &ns(&root, &["a", "b"]), &[("2", json!({}))]).await?;
    put_all(store, &ns(&root, &["ab"]), &[("3", json!({}))]).await?;
    let found = store.search(SearchOp::new(ns(&root, &["a"]))).await?;
    ensure_eq!(keys(&found), ["1", "2"], "prefix (a)");
    let all = store.search(SearchOp::new(root.clone())).await?;
    ensure_eq!(keys(&all), ["1", "2", "3"], "prefix (root)");
    for s in &found {
        ensure!(s.score.is_none(), "a search without query has a score");
    }
    Ok(())
}

pub async fn search_filter_implicit_eq(store: &dyn Store) -> CheckResult {
    let ns = numbers(store).await?;
    ensure_eq!(filtered(store, &ns, json!({"n": 1})).await?, ["a"], "n = 1");
    ensure_eq!(filtered(store, &ns, json!({"n": 2.5})).await?, ["b"], "n = 2.5");
    ensure_eq!(
        filtered(store, &ns, json!({"n": 4, "m": 4})).await?,
        Vec::<String>::new(),
        "n = 4 and m = 4"
    );
    Ok(())
}

pub async fn search_filter_string_and_null_eq(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&["s"]);
    put_all(
        store,
        &ns,
        &[
            ("a", json!({"kind": "x"})),
            ("b", json!({"kind": "X"})),
            ("c", json!({"kind": ["x"]})),
            ("d", json!({"kind": {"x": "x"}})),
            ("e", json!({"kind": 1})),
            ("f", json!({"kind": null})),
            ("g", json!({"other": "x"})),
            ("h", json!({"kind": "x", "other": "y"})),
            ("i", json!({"kind": "1"})),
        ],
    )
    .await?;
    ensure_eq!(
        filtered(store, &ns, json!({"kind": "x"})).await?,
        ["a", "h"],
        "kind = x"
    );
    ensure_eq!(filtered(store, &ns, json!({"kind": "1"})).await?, ["i"], "kind = \"1\"");
    ensure_eq!(filtered(store, &ns, json!({"kind": 1})).await?, ["e"], "kind = 1");
    ensure_eq!(
        filtered(store, &ns, json!({"kind": null})).await?,
        ["f", "g"],
        "kind = null"
    );
    ensure_eq!(
        filtered(store, &ns, json!({"kind": "x", "other": null})).await?,
        ["a"],
        "kind = x and other = null"
    );
    ensure_eq!(
        filtered(store, &ns, json!({"kind": {"$eq": "x"}, "other": {"$ne": "y"}})).await?,
        ["a"],
        "$eq x and $ne y"
    );
    let mut paged = Vec::new();
    for offset in 0..3 {
        let filter = Filter::from_json(&json!({"kind": null}))?;
        let page = store
            .search(SearchOp::new(ns.clone()).filter(filter).limit(1).offset(offset))
            .await?;
        paged.extend(page.into_iter().map(|s| s.item.key));
    }
    paged.sort();
    ensure_eq!(paged, ["f", "g"], "filtered pages of 1");
    Ok(())
}

pub async fn search_filter_eq(store: &dyn Store) -> CheckResult {
    let ns = numbers(store).await?;
    ensure_eq!(filtered(store, &ns, json!({"n": {"$eq": 4}})).await?, ["c"], "$eq");
    Ok(())
}

pub async fn search_filter_ne(store: &dyn Store) -> CheckResult {
    let ns = numbers(store).await?;
    ensure_eq!(
        filtered(store, &ns, json!({"n": {"$ne": 4}})).await?,
        ["a", "b", "d"],
        "$ne (a missing field differs)"
    );
    Ok(())
}

pub async fn search_filter_gt(store: &dyn Store) -> CheckResult {
    let ns = numbers(store).await?;
    ensure_eq!(filtered(store, &ns, json!({"n": {"$gt": 2.5}})).await?, ["c"], "$gt");
    Ok(())
}

pub async fn search_filter_gte(store: &dyn Store) -> CheckResult {
    let ns = numbers(store).await?;
    ensure_eq!(
        filtered(store, &ns, json!({"n": {"$gte": 2.5}})).await?,
        ["b", "c"],
        "$gte"
    );
    Ok(())
}

pub async fn search_filter_lt(store: &dyn Store) -> CheckResult {
    let ns = numbers(store).await?;
    ensure_eq!(filtered(store, &ns, json!({"n": {"$lt": 2.5}})).await?, ["a"], "$lt");
    Ok(())
}

pub async fn search_filter_lte(store: &dyn Store) -> CheckResult {
    let ns = numbers(store).await?;
    ensure_eq!(
        filtered(store, &ns, json!({"n": {"$lte": 2.5, "$gt": 1}})).await?,
        ["b"],
        "$lte and $gt"
    );
    let typed = Filter::new().compare("n", FilterOp::Lte, 1);
    ensure_eq!(
        keys(&store.search(SearchOp::new(ns).filter(typed)).await?),
        ["a"],
        "typed $lte"
    );
    Ok(())
}

pub async fn search_filter_nested_object(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    put_all(
        store,
        &ns,
        &[
            ("a", json!({"user": {"name": "ada", "age": 36}})),
            ("b", json!({"user": {"name": "bob", "age": 20}})),
            ("c", json!({"user": "ada"})),
        ],
    )
    .await?;
    ensure_eq!(
        filtered(store, &ns, json!({"user": {"name": "ada"}})).await?,
        ["a"],
        "nested field"
    );
    Ok(())
}

pub async fn search_filter_unknown_operator_refused(_store: &dyn Store) -> CheckResult {
    for bad in [json!({"n": {"$regex": "a"}}), json!({"n": {"$gt": 1, "x": 2}})] {
        let r = Filter::from_json(&bad);
        ensure!(
            is_store_error(&r, |e| matches!(e, StoreError::UnknownFilterOperator { .. })),
            "{bad}: got {r:?}"
        );
    }
    Ok(())
}

pub async fn search_pages_partition_results(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    let items: Vec<(String, Value)> = (0..7).map(|i| (format!("k{i}"), json!({"i": i}))).collect();
    let refs: Vec<(&str, Value)> = items.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    put_all(store, &ns, &refs).await?;
    let all = store.search(SearchOp::new(ns.clone()).limit(100)).await?;
    ensure_eq!(all.len(), 7, "all items");
    let mut paged = Vec::new();
    for page in 0..4 {
        let got = store
            .search(SearchOp::new(ns.clone()).limit(2).offset(page * 2))
            .await?;
        ensure!(got.len() <= 2, "a page longer than its limit");
        paged.extend(got.into_iter().map(|s| s.item.key));
    }
    let full: Vec<String> = all.into_iter().map(|s| s.item.key).collect();
    ensure_eq!(paged, full, "pages of 2 concatenated");
    ensure!(store.search(SearchOp::new(ns).limit(0)).await?.is_empty(), "limit 0");
    Ok(())
}

pub async fn list_namespaces_prefix(store: &dyn Store) -> CheckResult {
    let root = fresh_namespace(&[]);
    for path in [&["a", "x"][..], &["a", "y"], &["b"]] {
        put_all(store, &ns(&root, path), &[("k", json!({}))]).await?;
    }
    let got = store
        .list_namespaces(ListNamespacesOp::default().prefix(ns(&root, &["a"])))
        .await?;
    ensure_eq!(got, [ns(&root, &["a", "x"]), ns(&root, &["a", "y"])], "prefix a");
    Ok(())
}

pub async fn list_namespaces_suffix_and_wildcard(store: &dyn Store) -> CheckResult {
    let root = fresh_namespace(&[]);
    for path in [&["a", "x", "mem"][..], &["b", "y", "mem"], &["a", "x", "doc"]] {
        put_all(store, &ns(&root, path), &[("k", json!({}))]).await?;
    }
    let mem = Namespace::new(["mem"])?;
    let got = store
        .list_namespaces(ListNamespacesOp::default().prefix(root.clone()).suffix(mem))
        .await?;
    ensure_eq!(
        got,
        [ns(&root, &["a", "x", "mem"]), ns(&root, &["b", "y", "mem"])],
        "suffix mem"
    );
    let got = store
        .list_namespaces(
            ListNamespacesOp::default()
                .prefix(Namespace::new(["*", "x"])?)
                .prefix(root.clone()),
        )
        .await?;
    ensure_eq!(got, Vec::<Namespace>::new(), "a wildcard stands for one label");
    let wildcard = Namespace::new(root.labels().iter().map(String::as_str).chain(["*", "x"]))?;
    let got = store
        .list_namespaces(ListNamespacesOp::default().prefix(wildcard))
        .await?;
    ensure_eq!(
        got,
        [ns(&root, &["a", "x", "doc"]), ns(&root, &["a", "x", "mem"])],
        "wildcard prefix"
    );
    Ok(())
}

pub async fn list_namespaces_max_depth(store: &dyn Store) -> CheckResult {
    let root = fresh_namespace(&[]);
    for path in [&["a", "x", "1"][..], &["a", "y"], &["b"]] {
        put_all(store, &ns(&root, path), &[("k", json!({}))]).await?;
    }
    let op = ListNamespacesOp::default().prefix(root.clone()).max_depth(2);
    ensure_eq!(
        store.list_namespaces(op).await?,
        [ns(&root, &["a"]), ns(&root, &["b"])],
        "max_depth 2, deduplicated"
    );
    let op = ListNamespacesOp::default().prefix(root.clone()).max_depth(3);
    ensure_eq!(
        store.list_namespaces(op).await?,
        [ns(&root, &["a", "x"]), ns(&root, &["a", "y"]), ns(&root, &["b"])],
        "max_depth 3 keeps shorter namespaces whole"
    );
    Ok(())
}

pub async fn list_namespaces_sorted_and_paged(store: &dyn Store) -> CheckResult {
    let root = fresh_namespace(&[]);
    for label in ["d", "b", "a", "c", "a"] {
        put_all(store, &ns(&root, &[label, "z"]), &[("k", json!({}))]).await?;
    }
    let all = store
        .list_namespaces(ListNamespacesOp::default().prefix(root.clone()))
        .await?;
    let mut sorted = all.clone();
    sorted.sort();
    ensure_eq!(all.len(), 4, "four namespaces");
    ensure_eq!(all, sorted, "sorted");
    let page = store
        .list_namespaces(ListNamespacesOp::default().prefix(root.clone()).limit(2).offset(1))
        .await?;
    ensure_eq!(page, all[1..3].to_vec(), "limit 2 offset 1");
    Ok(())
}

pub async fn list_namespaces_max_depth_zero_refused(store: &dyn Store) -> CheckResult {
    let r = store.list_namespaces(ListNamespacesOp::default().max_depth(0)).await;
    ensure!(
        is_store_error(&r, |e| matches!(e, StoreError::InvalidArgument { .. })),
        "got {r:?}"
    );
    Ok(())
}

pub async fn ttl_expired_never_read(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&["ttl"]);
    store
        .put_op(PutOp::new(ns.clone(), "gone", json!({"v": 1})).ttl(Ttl::Minutes(0.0)))
        .await?;
    ensure!(store.get(&ns, "gone").await?.is_none(), "an expired item was read");
    ensure!(
        store.search(SearchOp::new(ns.clone())).await?.is_empty(),
        "an expired item was found"
    );
    let listed = store
        .list_namespaces(ListNamespacesOp::default().prefix(ns.clone()))
        .await?;
    ensure!(listed.is_empty(), "a namespace of expired items was listed: {listed:?}");
    Ok(())
}

pub async fn ttl_long_is_kept(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    store
        .put_op(PutOp::new(ns.clone(), "k", json!({"v": 1})).ttl(Ttl::Minutes(600.0)))
        .await?;
    ensure!(
        store.get(&ns, "k").await?.is_some(),
        "an item with 10 hours left was not read"
    );
    ensure_eq!(
        store.search(SearchOp::new(ns)).await?.len(),
        1,
        "an item with 10 hours left"
    );
    Ok(())
}

pub async fn ttl_sweep_removes_expired(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    store
        .put_op(PutOp::new(ns.clone(), "gone", json!({})).ttl(Ttl::Minutes(0.0)))
        .await?;
    store.put(&ns, "kept", json!({})).await?;
    let swept = store.sweep_ttl().await?;
    ensure!(swept >= 1, "the sweep removed {swept} items");
    ensure!(store.get(&ns, "kept").await?.is_some(), "the sweep removed a live item");
    // a put after the sweep starts afresh: the expired item left no trace
    store.put(&ns, "gone", json!({"v": 2})).await?;
    ensure_eq!(store.search(SearchOp::new(ns)).await?.len(), 2, "after the sweep");
    Ok(())
}
