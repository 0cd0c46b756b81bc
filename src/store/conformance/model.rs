//! The model-based test: random batches of puts, deletes, gets, filtered
//! searches and namespace listings, run on a store and on a plain
//! `BTreeMap` oracle that re-states each rule, compared after every batch.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::{fresh_namespace, CheckFailure, CheckResult};
use crate::store::{Filter, GetOp, ListNamespacesOp, Namespace, Op, OpResult, PutOp, SearchOp, Store};

/// One operation of the model, over a small space of names so that ops
/// collide: namespaces `[a|b]` and `[a|b, x|y]`, keys `k0`–`k3`.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // the fields are what each variant's line says
pub enum ModelOp {
    /// Put `{"n": n}` (with `"tag"` when `tag`).
    Put {
        ns: Vec<&'static str>,
        key: u8,
        n: i64,
        tag: bool,
    },
    /// Delete.
    Delete { ns: Vec<&'static str>, key: u8 },
    /// Get.
    Get { ns: Vec<&'static str>, key: u8 },
    /// Search a prefix, optionally `n > min`, paged.
    Search {
        prefix: Vec<&'static str>,
        min: Option<i64>,
        limit: usize,
        offset: usize,
    },
    /// List namespaces, optionally cut to a depth.
    List { max_depth: Option<usize> },
}

fn arb_ns() -> impl Strategy<Value = Vec<&'static str>> {
    (
        prop::sample::select(vec!["a", "b"]),
        prop::option::of(prop::sample::select(vec!["x", "y"])),
    )
        .prop_map(|(a, b)| std::iter::once(a).chain(b).collect())
}

fn arb_op() -> impl Strategy<Value = ModelOp> {
    prop_oneof![
        4 => (arb_ns(), 0u8..4, -3i64..4, any::<bool>()).prop_map(|(ns, key, n, tag)| ModelOp::Put { ns, key, n, tag }),
        1 => (arb_ns(), 0u8..4).prop_map(|(ns, key)| ModelOp::Delete { ns, key }),
        2 => (arb_ns(), 0u8..4).prop_map(|(ns, key)| ModelOp::Get { ns, key }),
        2 => (prop::collection::vec(prop::sample::select(vec!["a", "x"]), 0..2), prop::option::of(-2i64..3), 0usize..6, 0usize..4)
            .prop_map(|(prefix, min, limit, offset)| ModelOp::Search { prefix, min, limit, offset }),
        1 => prop::option::of(1usize..3).prop_map(|max_depth| ModelOp::List { max_depth }),
    ]
}

/// Batches of model ops (1 to 4 ops per batch).
pub fn model_batches() -> impl Strategy<Value = Vec<Vec<ModelOp>>> {
    prop::collection::vec(prop::collection::vec(arb_op(), 1..5), 1..12)
}

type Oracle = BTreeMap<(Vec<String>, String), Map<String, Value>>;

enum Expected {
    Item(Option<Map<String, Value>>),
    Keys { all: BTreeSet<String>, len: usize },
    Namespaces(Vec<Vec<String>>),
    Put,
}

/// Runs `batches` on `store` (under a fresh root) and on the oracle;
/// fails at the first difference.
pub async fn check_against_oracle(store: &dyn Store, batches: &[Vec<ModelOp>]) -> CheckResult {
    let root = fresh_namespace(&[]);
    let full = |labels: &[&str]| -> Vec<String> {
        root.labels()
            .iter()
            .cloned()
            .chain(labels.iter().map(|s| (*s).to_owned()))
            .collect()
    };
    let mut oracle = Oracle::new();
    for batch in batches {
        let mut ops = Vec::new();
        let mut expected = Vec::new();
        let before = oracle.clone();
        for op in batch {
            match op {
                ModelOp::Put { ns, key, n, tag } => {
                    let mut value = json!({"n": n});
                    if *tag {
                        value["tag"] = json!("t");
                    }
                    let labels = full(ns);
                    ops.push(Op::Put(PutOp::new(
                        Namespace::new(labels.clone())?,
                        format!("k{key}"),
                        value.clone(),
                    )));
                    if let Value::Object(map) = value {
                        oracle.insert((labels, format!("k{key}")), map);
                    }
                    expected.push(Expected::Put);
                }
                ModelOp::Delete { ns, key } => {
                    let labels = full(ns);
                    ops.push(Op::Put(PutOp::delete(
                        Namespace::new(labels.clone())?,
                        format!("k{key}"),
                    )));
                    oracle.remove(&(labels, format!("k{key}")));
                    expected.push(Expected::Put);
                }
                ModelOp::Get { ns, key } => {
                    let labels = full(ns);
                    ops.push(Op::Get(GetOp::new(Namespace::new(labels.clone())?, format!("k{key}"))));
                    expected.push(Expected::Item(before.get(&(labels, format!("k{key}"))).cloned()));
                }
                ModelOp::Search {
                    prefix,
                    min,
                    limit,
                    offset,
                } => {
                    let labels = full(prefix);
                    let mut op = SearchOp::new(Namespace::new(labels.clone())?)
                        .limit(*limit)
                        .offset(*offset);
                    if let Some(min) = min {
                        op = op.filter(Filter::from_json(&json!({"n": {"$gt": min}}))?);
                    }
                    ops.push(Op::Search(op));
                    let matching: BTreeSet<String> = before
                        .iter()
                        .filter(|((ns, _), v)| {
                            ns.starts_with(&labels) && min.is_none_or(|m| v["n"].as_i64().is_some_and(|n| n > m))
                        })
                        .map(|((ns, k), _)| format!("{}/{k}", ns.join(".")))
                        .collect();
                    let len = matching.len().saturating_sub(*offset).min(*limit);
                    expected.push(Expected::Keys { all: matching, len });
                }
                ModelOp::List { max_depth } => {
                    let mut op = ListNamespacesOp::default().prefix(root.clone());
                    if let Some(d) = max_depth {
                        op = op.max_depth(root.len() + d);
                    }
                    ops.push(Op::ListNamespaces(op));
                    let mut all: Vec<Vec<String>> = before
                        .keys()
                        .map(|(ns, _)| match max_depth {
                            Some(d) => ns.iter().take(root.len() + d).cloned().collect(),
                            None => ns.clone(),
                        })
                        .collect();
                    all.sort();
                    all.dedup();
                    expected.push(Expected::Namespaces(all));
                }
            }
        }
        let results = store.batch(ops).await?;
        ensure_eq!(results.len(), expected.len(), "one result per op");
        for (i, (got, want)) in results.into_iter().zip(expected).enumerate() {
            match (got, want) {
                (OpResult::Put, Expected::Put) => {}
                (OpResult::Item(item), Expected::Item(value)) => {
                    ensure_eq!(item.map(|i| i.value), value, "op {i} of {batch:?}: get");
                }
                (OpResult::Search(found), Expected::Keys { all, len }) => {
                    let keys: Vec<String> = found
                        .iter()
                        .map(|s| format!("{}/{}", s.item.namespace.dotted(), s.item.key))
                        .collect();
                    let distinct: BTreeSet<String> = keys.iter().cloned().collect();
                    ensure_eq!(keys.len(), len, "op {i} of {batch:?}: search count");
                    ensure_eq!(distinct.len(), len, "op {i} of {batch:?}: duplicates in {keys:?}");
                    ensure!(
                        distinct.is_subset(&all),
                        "op {i} of {batch:?}: {keys:?} not all in {all:?}"
                    );
                }
                (OpResult::Namespaces(ns), Expected::Namespaces(all)) => {
                    let got: Vec<Vec<String>> = ns.iter().map(|n| n.labels().to_vec()).collect();
                    ensure_eq!(got, all, "op {i} of {batch:?}: list_namespaces");
                }
                (got, _) => return Err(CheckFailure::new(format!("op {i}: unexpected result {got:?}"))),
            }
        }
    }
    // the end state, item by item
    for ((ns, key), value) in &oracle {
        let got = store
            .batch(vec![Op::Get(GetOp::new(Namespace::new(ns.clone())?, key.clone()))])
            .await?;
        ensure!(
            matches!(got.first(), Some(OpResult::Item(Some(item))) if &item.value == value),
            "end state of {ns:?}/{key}: {got:?}"
        );
    }
    Ok(())
}
