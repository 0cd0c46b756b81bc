//! The op sequence of `testdata/store/sequence.json` run on one of the
//! crate's stores with the test embedding, results in the JSON shape
//! `scripts/store_python_peer.py` prints for Python's stores.
#![allow(dead_code)]

use std::sync::Arc;

use checkpointer::store::{
    Filter, GetOp, HashedNgramEmbeddings, InMemoryStore, IndexChoice, IndexConfig, ListNamespacesOp, Namespace, Op,
    OpResult, PutOp, SearchOp, Store, Ttl,
};
use serde_json::{json, Value};

pub fn sequence_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/store/sequence.json")
}

fn ns(v: &Value) -> Namespace {
    let labels: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| l.as_str().unwrap().to_owned())
        .collect();
    Namespace::new(labels).unwrap()
}

fn op(spec: &Value) -> Op {
    let s = |k: &str| spec[k].as_str().unwrap().to_owned();
    let n = |k: &str| spec[k].as_u64().unwrap() as usize;
    match spec["op"].as_str().unwrap() {
        "put" if spec["value"].is_null() => Op::Put(PutOp::delete(ns(&spec["ns"]), s("key"))),
        "put" => {
            let index = match &spec["index"] {
                Value::Bool(false) => IndexChoice::Off,
                Value::Array(paths) => IndexChoice::Paths(paths.iter().map(|p| p.as_str().unwrap().into()).collect()),
                _ => IndexChoice::Default,
            };
            let ttl = spec["ttl"].as_f64().map_or(Ttl::Never, Ttl::Minutes);
            Op::Put(
                PutOp::new(ns(&spec["ns"]), s("key"), spec["value"].clone())
                    .index(index)
                    .ttl(ttl),
            )
        }
        "get" => Op::Get(GetOp::new(ns(&spec["ns"]), s("key"))),
        "search" => {
            let mut op = SearchOp::new(ns(&spec["prefix"])).limit(n("limit")).offset(n("offset"));
            if let Some(q) = spec["query"].as_str() {
                op = op.query(q);
            }
            if spec["filter"].is_object() {
                op = op.filter(Filter::from_json(&spec["filter"]).unwrap());
            }
            Op::Search(op)
        }
        "list" => {
            let mut op = ListNamespacesOp::default().limit(n("limit")).offset(n("offset"));
            if spec["prefix"].is_array() {
                op = op.prefix(ns(&spec["prefix"]));
            }
            if spec["suffix"].is_array() {
                op = op.suffix(ns(&spec["suffix"]));
            }
            if let Some(d) = spec["max_depth"].as_u64() {
                op = op.max_depth(d as usize);
            }
            Op::ListNamespaces(op)
        }
        other => panic!("unknown op {other}"),
    }
}

fn item_json(item: &checkpointer::store::Item) -> Value {
    json!({"ns": item.namespace.labels(), "key": item.key, "value": item.value})
}

fn load(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The sequence's index: its dims and fields, the test embedding.
pub fn index_config() -> IndexConfig {
    index_config_of(&sequence_path())
}

/// The index of the sequence at `path`.
pub fn index_config_of(path: &std::path::Path) -> IndexConfig {
    let seq = load(path);
    let dims = seq["dims"].as_u64().unwrap() as usize;
    let fields: Vec<String> = seq["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().into())
        .collect();
    IndexConfig::new(dims, Arc::new(HashedNgramEmbeddings::new(dims))).fields(fields)
}

/// Our results on an `InMemoryStore`, in the peer's shape.
pub async fn run() -> Value {
    let store = InMemoryStore::builder().index(index_config()).build().unwrap();
    run_on(&store).await
}

/// Our results on `store` (made with [`index_config`]), in the peer's shape.
pub async fn run_on(store: &dyn Store) -> Value {
    run_path_on(store, &sequence_path()).await
}

/// Our results of the sequence at `path` on `store`, in the peer's shape.
pub async fn run_path_on(store: &dyn Store, path: &std::path::Path) -> Value {
    let seq = load(path);
    let mut out = Vec::new();
    for batch in seq["batches"].as_array().unwrap() {
        let ops: Vec<Op> = batch.as_array().unwrap().iter().map(op).collect();
        let results = store.batch(ops).await.unwrap();
        out.push(Value::Array(
            results
                .into_iter()
                .map(|r| match r {
                    OpResult::Put => Value::Null,
                    OpResult::Item(item) => item.as_ref().map_or(Value::Null, item_json),
                    OpResult::Search(found) => found
                        .iter()
                        .map(|s| {
                            let mut v = item_json(&s.item);
                            v["score"] = s.score.map_or(Value::Null, |f| json!(f));
                            v
                        })
                        .collect(),
                    OpResult::Namespaces(list) => list.iter().map(|n| json!(n.labels())).collect(),
                })
                .collect(),
        ));
    }
    Value::Array(out)
}

/// Panics at the first op whose result differs (scores compared exactly).
pub fn assert_same(ours: &Value, python: &Value) {
    assert_same_as(ours, python, "Python's InMemoryStore");
}

/// [`assert_same`], naming the other side `other`.
pub fn assert_same_as(ours: &Value, python: &Value, other: &str) {
    let (ours, python) = (ours.as_array().unwrap(), python.as_array().unwrap());
    assert_eq!(ours.len(), python.len(), "batches");
    for (b, (o, p)) in ours.iter().zip(python).enumerate() {
        let (o, p) = (o.as_array().unwrap(), p.as_array().unwrap());
        assert_eq!(o.len(), p.len(), "results of batch {b}");
        for (i, (x, y)) in o.iter().zip(p).enumerate() {
            assert_eq!(x, y, "batch {b}, op {i}: ours (left) differs from {other} (right)");
        }
    }
}

/// `v` as JSON text with every object's keys sorted: equal for equal
/// values whatever order a store hands the keys back in (jsonb reorders
/// them).
pub fn canonical(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sort(&map[k]))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

/// Results of the sequence at `path` from two stores that order items put
/// in one batch differently (they tie on `updated_at`): equal but for the
/// ops at `skip`; a search compared as a set when it returned everything
/// it matched (offset 0, fewer items than the limit), else by its length
/// (a page cut out of tied items).
pub fn assert_same_but_ties(path: &std::path::Path, ours: &Value, other: &Value, who: &str, skip: &[(usize, usize)]) {
    let spec = load(path);
    let list = |v: &Value| v.as_array().cloned().unwrap_or_else(|| panic!("not a list: {v}"));
    let sorted = |v: &Value| {
        let mut all: Vec<String> = list(v).iter().map(canonical).collect();
        all.sort();
        all
    };
    let batches = list(other);
    assert_eq!(list(ours).len(), batches.len(), "batches");
    for (b, batch) in batches.iter().enumerate() {
        for (i, theirs) in list(batch).iter().enumerate() {
            if skip.contains(&(b, i)) {
                continue;
            }
            let (op, mine) = (&spec["batches"][b][i], &ours[b][i]);
            if op["op"] != "search" {
                assert_eq!(
                    mine, theirs,
                    "batch {b}, op {i}: ours (left) differs from {who} (right)"
                );
            } else if op["offset"] == 0 && list(mine).len() < op["limit"].as_u64().unwrap_or(0) as usize {
                assert_eq!(
                    sorted(mine),
                    sorted(theirs),
                    "batch {b}, op {i}: ours (left), {who} (right)"
                );
            } else {
                assert_eq!(
                    list(mine).len(),
                    list(theirs).len(),
                    "batch {b}, op {i}: a page of tied items"
                );
            }
        }
    }
}

/// The results of `scripts/store_python_peer.py` run with `args` by the
/// peer venv's Python (`CHECKPOINTER_PYTHON`).
pub fn python_peer<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Value {
    let python = std::env::var("CHECKPOINTER_PYTHON").expect("CHECKPOINTER_PYTHON");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/store_python_peer.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("run the Python peer");
    assert!(
        out.status.success(),
        "peer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the peer's JSON")
}

/// `testdata/store/<name>`.
pub fn testdata(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/store")
        .join(name)
}

/// The peer's results of the sequence at `seq` on Python's store `kind`
/// (`sqlite`, `postgres`) at `place` (given with `flag`: `--db`, `--url`).
pub fn python_store(kind: &str, flag: &str, place: &std::ffi::OsStr, seq: &std::path::Path) -> Value {
    use std::ffi::OsStr;
    python_peer(&[
        OsStr::new("--store"),
        OsStr::new(kind),
        OsStr::new(flag),
        place,
        seq.as_os_str(),
    ])
}

/// Python's results without the expired item and the namespace only it
/// fills (`docs.old`).
pub fn without_expired(python: &Value) -> Value {
    let mut out = python.clone();
    for result in out[0].as_array_mut().into_iter().flatten() {
        if result["key"] == "expired" {
            *result = Value::Null;
        }
        if let Some(entries) = result.as_array_mut() {
            entries.retain(|e| e["key"] != "expired" && *e != serde_json::json!(["docs", "old"]));
        }
    }
    out
}
