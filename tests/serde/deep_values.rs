//! Values nested far beyond the limit through every public entry point that
//! walks caller data: each answers `Error::Serde` ("nests deeper than the
//! limit of 128") or works without recursion, never a stack overflow; and
//! values exactly at the limit still work.
//!
//! The deep inputs are 200 000 levels deep, and every call into the library
//! runs on a thread with a 1 MiB stack ([`on_small_stack`]), half of what
//! test threads, tokio workers and blocking-pool threads get. (These tests
//! leak their deep inputs ([`leak`]): they were written when dropping such a
//! value recursed once per level. Values a program builds half a million and
//! a million levels deep are dropped, cloned, compared, printed and handed to
//! savers by the tests at the end, on a 2 MiB stack.)

use checkpointer::serde::json::to_python_json;
use checkpointer::serde::msgpack::{self, MAX_DEPTH};
use checkpointer::serde::{from_value, from_value_ref, render, to_value, Value};
use checkpointer::Error;
use serde::{Deserialize, Serialize};

/// Far beyond the limit: ten times the depth that aborted the process.
const DEEP: usize = 200_000;

/// Runs `f` on a thread with a 1 MiB stack and returns its result.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// Forgets a value too deep to drop on a normal stack (see the module docs).
fn leak<T>(v: T) {
    std::mem::forget(v);
}

fn lists(levels: usize) -> Value {
    (0..levels).fold(Value::Nil, |v, _| Value::Array(vec![v].into()))
}

fn maps(levels: usize) -> Value {
    (0..levels).fold(Value::Nil, |v, _| Value::map([("k", v)]))
}

/// Nested through map keys: `{{{nil: nil}: nil}: nil}`.
fn keys(levels: usize) -> Value {
    (0..levels).fold(Value::Nil, |v, _| Value::Map(vec![(v, Value::Nil)].into()))
}

/// A delta snapshot of a delta snapshot of…
fn snapshots(levels: usize) -> Value {
    (0..levels).fold(Value::Nil, |v, _| Value::delta_snapshot(v))
}

/// The reason of an `Error::Serde`, checked to name the depth limit.
#[track_caller]
fn too_deep<T: std::fmt::Debug>(r: checkpointer::Result<T>) -> String {
    match r {
        Err(Error::Serde { reason }) => {
            assert!(reason.contains("nests deeper than the limit of"), "{reason}");
            reason
        }
        other => panic!("expected Error::Serde, got {other:?}"),
    }
}

/// A user's recursive type: two levels (a map and a list) per node.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Tree {
    children: Vec<Tree>,
}

impl Tree {
    /// `nodes` nodes, each the only child of the one above.
    fn chain(nodes: usize) -> Tree {
        (0..nodes).fold(Tree { children: Vec::new() }, |t, _| Tree { children: vec![t] })
    }
}

/// A recursive type without containers: `Some(Box(Some(Box(…))))` adds no
/// msgpack level at all.
#[derive(Debug, Serialize, Deserialize)]
struct Chain(Option<Box<Chain>>);

fn chain(links: usize) -> Chain {
    (0..links).fold(Chain(None), |c, _| Chain(Some(Box::new(c))))
}

#[test]
fn to_value_of_a_deep_type_is_refused() {
    on_small_stack(|| {
        let deep = Tree::chain(DEEP);
        too_deep(to_value(&deep));
        leak(deep);
        let deep = chain(DEEP);
        too_deep(to_value(&deep));
        leak(deep);
        // A node is a map holding a list: 64 nodes, the outer map and the last
        // empty list nest 128 levels, the limit; one more node is refused.
        let at_limit = Tree::chain(MAX_DEPTH / 2 - 1);
        let v = to_value(&at_limit).unwrap();
        let bytes = msgpack::encode(&v).unwrap();
        assert_eq!(from_value::<Tree>(msgpack::decode(&bytes).unwrap()).unwrap(), at_limit);
        too_deep(to_value(&Tree::chain(MAX_DEPTH / 2)));
        // Options and newtypes alone are bounded too, far above any real type.
        to_value(&chain(MAX_DEPTH)).unwrap();
    });
}

#[test]
fn to_value_of_a_deep_value_is_refused() {
    on_small_stack(|| {
        for deep in [lists(DEEP), maps(DEEP), keys(DEEP)] {
            too_deep(to_value(&deep));
            // inside a struct of the caller's
            too_deep(to_value(&vec![deep.clone()]));
            leak(deep);
        }
        for at_limit in [lists(MAX_DEPTH), maps(MAX_DEPTH), keys(MAX_DEPTH)] {
            assert_eq!(to_value(&at_limit).unwrap(), at_limit);
            too_deep(to_value(&vec![at_limit]));
        }
        // An extension value is taken whole, without a walk (and without
        // recursion: the copy is made in a loop); encoding refuses it.
        let deep = snapshots(DEEP);
        let copy = to_value(&deep).unwrap();
        too_deep(msgpack::encode(&copy));
        leak(copy);
        leak(deep);
        assert_eq!(to_value(&snapshots(MAX_DEPTH)).unwrap(), snapshots(MAX_DEPTH));
    });
}

#[test]
fn serializing_a_deep_value_in_another_format_is_refused() {
    on_small_stack(|| {
        for deep in [lists(DEEP), maps(DEEP), snapshots(DEEP)] {
            let err = serde_json::to_string(&deep).unwrap_err().to_string();
            assert!(err.contains("nests deeper than the limit of 128"), "{err}");
            leak(deep);
        }
        let text = serde_json::to_string(&lists(MAX_DEPTH)).unwrap();
        assert_eq!(text.len(), 2 * MAX_DEPTH + 4);
    });
}

/// `serde_json::Value` 200 000 levels deep: a deserializer that recurses as
/// deep as the data goes.
fn deep_json(levels: usize) -> serde_json::Value {
    (0..levels).fold(serde_json::Value::Null, |v, _| serde_json::Value::Array(vec![v]))
}

#[test]
fn deserializing_a_value_from_a_deep_format_is_refused() {
    on_small_stack(|| {
        let deep = deep_json(DEEP);
        let err = Value::deserialize(&deep).unwrap_err().to_string();
        assert!(err.contains("nests deeper than the limit of 128"), "{err}");
        leak(deep);
        let v = Value::deserialize(&deep_json(MAX_DEPTH)).unwrap();
        assert_eq!(v, lists(MAX_DEPTH));
        assert!(Value::deserialize(&deep_json(MAX_DEPTH + 1)).is_err());
    });
}

#[test]
fn from_value_of_a_deep_value_is_refused() {
    on_small_stack(|| {
        for deep in [lists(DEEP), maps(DEEP), keys(DEEP), snapshots(DEEP)] {
            too_deep(from_value_ref::<Value>(&deep));
            leak(deep);
        }
        for deep in [lists(DEEP), maps(DEEP)] {
            too_deep(from_value_ref::<serde_json::Value>(&deep));
            // Owned: a clone shares the lists and maps, so the library drops
            // no more than a reference count here. (A chain of extensions is
            // copied, and dropping the copy would recurse.)
            too_deep(from_value::<Value>(deep.clone()));
            too_deep(from_value::<serde_json::Value>(deep.clone()));
            leak(deep);
        }
        let deep = to_deep_tree_value(DEEP);
        too_deep(from_value_ref::<Tree>(&deep));
        too_deep(from_value::<Tree>(deep.clone()));
        leak(deep);
        // Exactly at the limit: read.
        for at_limit in [lists(MAX_DEPTH), maps(MAX_DEPTH), keys(MAX_DEPTH), snapshots(MAX_DEPTH)] {
            assert_eq!(from_value_ref::<Value>(&at_limit).unwrap(), at_limit);
            assert_eq!(from_value::<Value>(at_limit.clone()).unwrap(), at_limit);
        }
        let tree = to_deep_tree_value(MAX_DEPTH / 2 - 1);
        assert_eq!(from_value_ref::<Tree>(&tree).unwrap(), Tree::chain(MAX_DEPTH / 2 - 1));
        too_deep(from_value_ref::<Tree>(&to_deep_tree_value(MAX_DEPTH / 2)));
    });
}

/// The value `to_value(&Tree::chain(nodes))` gives, built without recursion.
fn to_deep_tree_value(nodes: usize) -> Value {
    let leaf = Value::map([("children", Value::Array(Vec::new().into()))]);
    (0..nodes).fold(leaf, |t, _| Value::map([("children", Value::Array(vec![t].into()))]))
}

#[test]
fn msgpack_encode_of_a_deep_value_is_refused() {
    on_small_stack(|| {
        for deep in [lists(DEEP), maps(DEEP), keys(DEEP), snapshots(DEEP)] {
            too_deep(msgpack::encode(&deep));
            leak(deep);
        }
        for at_limit in [lists(MAX_DEPTH), maps(MAX_DEPTH), keys(MAX_DEPTH), snapshots(MAX_DEPTH)] {
            let bytes = msgpack::encode(&at_limit).unwrap();
            assert_eq!(msgpack::decode(&bytes).unwrap(), at_limit);
        }
    });
}

#[test]
fn python_json_of_a_deep_value_is_refused() {
    on_small_stack(|| {
        for deep in [lists(DEEP), maps(DEEP), keys(DEEP), snapshots(DEEP)] {
            assert!(matches!(to_python_json(&deep), Err(Error::Serde { .. })));
            leak(deep);
        }
    });
}

#[test]
fn render_of_a_deep_value_is_refused() {
    on_small_stack(|| {
        for deep in [lists(DEEP), maps(DEEP), keys(DEEP), snapshots(DEEP)] {
            too_deep(render::try_value(&deep));
            let shown = render::value(&deep);
            let reason = shown["__error__"].as_str().unwrap_or_default();
            assert!(reason.contains("nests deeper than the limit of 128"), "{shown}");
            leak(deep);
        }
        // Everything the decoder accepts renders, bytes in the innermost
        // list included (one more JSON level: `{"__bytes__": …}`).
        let innermost = Value::Bin(bytes::Bytes::from_static(b"\x01"));
        let at_limit = (0..MAX_DEPTH).fold(innermost, |v, _| Value::Array(vec![v].into()));
        let at_limit = msgpack::decode(&msgpack::encode(&at_limit).unwrap()).unwrap();
        let rendered = render::try_value(&at_limit).unwrap();
        let text = render::python_json(&rendered);
        assert!(text.ends_with(&format!("{{\"__bytes__\": \"01\"}}{}", "]".repeat(MAX_DEPTH))));
        too_deep(render::try_value(&Value::Array(vec![at_limit].into())));
        // (Not `keys`: a non-string key renders as the JSON text of its
        // rendering, which doubles its escapes per level.)
        for at_limit in [lists(MAX_DEPTH), maps(MAX_DEPTH), snapshots(MAX_DEPTH)] {
            render::try_value(&at_limit).unwrap();
        }
    });
}

#[test]
fn python_json_text_of_deep_json_is_written() {
    on_small_stack(|| {
        let deep = deep_json(DEEP);
        let text = render::python_json(&deep);
        assert_eq!(text.len(), 2 * DEEP + 4);
        let indented = render::python_json_indented(&deep, 0);
        assert!(indented.starts_with("[\n[\n"));
        leak(deep);
        let mut obj = serde_json::Value::Null;
        for _ in 0..DEEP {
            // (not `json!`, which copies its arguments by serializing them)
            let mut m = serde_json::Map::new();
            m.insert("k".to_owned(), obj);
            obj = serde_json::Value::Object(m);
        }
        assert_eq!(render::python_json(&obj).len(), 7 * DEEP + 4);
        leak(obj);
    });
}

#[test]
fn normalize_of_a_deep_dump_is_refused() {
    on_small_stack(|| {
        let mut deep = serde_json::Map::new();
        deep.insert("threads".to_owned(), serde_json::Value::Array(Vec::new()));
        deep.insert("source".to_owned(), deep_json(DEEP));
        let deep = serde_json::Value::Object(deep);
        match render::normalize(&deep) {
            Err(Error::Serde { reason }) => assert!(reason.contains("nests deeper than the limit of"), "{reason}"),
            other => panic!("{other:?}"),
        }
        leak(deep);
    });
}

/// A dump of a store holding values as deep as the decoder accepts
/// normalizes: the dump's limit leaves room for its own levels. Savers refuse
/// to store a value that deep (`limits::MAX_NESTING`), but a store another
/// writer filled can hold one: the write's bytes are planted in a SQLite file.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn normalize_of_a_dump_at_the_value_limit_works() {
    use checkpointer::sqlite::SqliteSaver;
    use checkpointer::{
        ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
        CheckpointSource,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.sqlite");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let innermost = Value::Bin(bytes::Bytes::from_static(b"\x01"));
    let deepest = (0..MAX_DEPTH).fold(innermost, |v, _| Value::Array(vec![v].into()));
    let mut cp = Checkpoint::new(0);
    cp.id = "1ef00000-0000-6000-8000-000000000001".to_owned();
    let mut versions = ChannelVersions::new();
    versions.insert("x".to_owned(), ChannelVersion::Int(1));
    cp.channel_values.insert("x".to_owned(), Value::from(1));
    cp.channel_versions = versions.clone();
    let config = saver
        .put(
            &CheckpointConfig::new("t"),
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &versions,
        )
        .await
        .unwrap();
    saver
        .put_writes(&config, &[("w".to_owned(), Value::Nil)], "task", "")
        .await
        .unwrap();
    let bytes = msgpack::encode(&deepest).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE writes SET type = 'msgpack', value = ?1 WHERE channel = 'w'",
            [&bytes],
        )
        .unwrap();
    let dump = render::dump(&saver, "sqlite").await.unwrap();
    let text = render::python_json(&dump);
    assert!(text.contains("{\"__bytes__\": \"01\"}"), "{text}");
    let dump = on_small_stack(move || render::normalize(&dump).map(|_| ()));
    dump.unwrap();
}

#[test]
fn cloning_a_deep_chain_of_extensions_does_not_recurse() {
    on_small_stack(|| {
        let deep = snapshots(DEEP);
        let copy = deep.clone();
        let mut cur = &copy;
        let mut depth = 0;
        while let Value::Ext(e) = cur {
            cur = e.snapshot_value().unwrap();
            depth += 1;
        }
        assert_eq!(depth, DEEP);
        leak(copy);
        leak(deep);
    });
}

/// Depths a program can build for itself, far beyond anything a decoder
/// accepts: half a million and a million levels.
const CALLER_DEPTHS: [usize; 2] = [500_000, 1_000_000];

/// The stack every thread gets by default (std's spawned threads, tokio's
/// workers and blocking pool).
const DEFAULT_STACK: usize = 2 << 20;

/// Runs `f` on a thread with a 2 MiB stack and returns its result.
fn on_default_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(DEFAULT_STACK)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// Lists, maps and extensions in turn, with a string and a number beside
/// each level, so that no one kind of container carries the whole depth.
fn mixed(levels: usize) -> Value {
    (0..levels).fold(Value::Nil, |v, i| match i % 4 {
        0 => Value::Array(vec![Value::from(i), v].into()),
        1 => Value::map([("k", v), ("n", Value::from(i))]),
        2 => Value::delta_snapshot(v),
        _ => Value::Map(vec![(v, Value::from("key"))].into()),
    })
}

/// The shapes of caller-built deep values.
const SHAPES: [&str; 5] = ["lists", "maps", "keys", "snapshots", "mixed"];

/// A value of `shape`, `levels` deep.
fn build(shape: &str, levels: usize) -> Value {
    match shape {
        "lists" => lists(levels),
        "maps" => maps(levels),
        "keys" => keys(levels),
        "snapshots" => snapshots(levels),
        _ => mixed(levels),
    }
}

#[test]
fn deep_values_a_caller_builds_drop_clone_compare_and_print_on_a_default_stack() {
    on_default_stack(|| {
        for levels in CALLER_DEPTHS {
            for shape in SHAPES {
                let deep = build(shape, levels);
                // A clone shares the lists and maps (the extensions are copied
                // in a loop); both holders then drop, the last one walking it all.
                let copy = deep.clone();
                assert!(copy == deep, "{shape}: a clone equals its source");
                // Built again, sharing nothing: the comparison walks every level.
                let twin = build(shape, levels);
                assert!(twin == deep, "{shape}: equal values built apart");
                let shallower = build(shape, levels - 1);
                assert!(shallower != deep, "{shape}: one level less differs");
                drop(shallower);
                // Printing stops at a bound: the text does not grow with the depth.
                let shown = format!("{deep:?}");
                assert!(shown.len() < 64 * 1024, "{shape}: {} bytes of Debug", shown.len());
                assert!(shown.contains('…'), "{shape}: the cut is marked");
                let pretty = format!("{deep:#?}");
                assert!(pretty.contains('…'), "{shape}");
                // What prints as JSON is refused at the decoder's limit.
                too_deep(render::try_value(&deep));
                assert!(matches!(to_python_json(&deep), Err(Error::Serde { .. })), "{shape}");
                drop(copy);
                drop(twin);
                drop(deep);
            }
        }
    });
}

#[test]
fn debug_of_a_value_at_the_decoders_limit_is_complete() {
    on_default_stack(|| {
        let at_limit = lists(MAX_DEPTH);
        let shown = format!("{at_limit:?}");
        assert_eq!(
            shown,
            format!("{}Nil{}", "Array([".repeat(MAX_DEPTH), "])".repeat(MAX_DEPTH))
        );
        // The shapes Debug has always printed, unchanged.
        let v = Value::map([
            ("a", Value::from(vec![Value::from(1), Value::from("x"), Value::Nil])),
            ("s", Value::delta_snapshot(Value::Float(1.5))),
        ]);
        assert_eq!(
            format!("{v:?}"),
            "Map([(Str(\"a\"), Array([Int(1), Str(\"x\"), Nil])), \
             (Str(\"s\"), Ext(Ext { code: 7, payload: Decoded(Float(1.5)) }))])"
        );
        assert!(format!("{v:#?}").starts_with("Map(\n    [\n        (\n            Str(\n"));
        // Equality as before: element-wise, NaN unequal to itself.
        let nan = Value::from(vec![Value::Float(f64::NAN)]);
        assert!(nan != nan.clone());
        assert!(Value::from(vec![1, 2]) != Value::from(vec![1]));
        assert!(Value::Int(1) != Value::UInt(1));
    });
}

/// Every saver a process can hold refuses a caller's deep value with the
/// typed error of the nesting limit, in a channel value, a pending write, a
/// metadata value and a list filter, and the caller's value then drops.
#[cfg(feature = "sqlite")]
#[test]
fn savers_refuse_deep_values_a_caller_builds_on_a_default_stack() {
    use checkpointer::sqlite::SqliteSaver;
    use checkpointer::{
        ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
        CheckpointSaverExt, CheckpointSource, InMemorySaver, ListOptions,
    };
    use std::sync::Arc;
    on_default_stack(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let savers: Vec<(&str, Arc<dyn CheckpointSaver>)> = vec![
                ("memory", Arc::new(InMemorySaver::new())),
                (
                    "sqlite",
                    Arc::new(SqliteSaver::open(dir.path().join("deep.sqlite")).await.unwrap()),
                ),
            ];
            for (name, saver) in &savers {
                let config = CheckpointConfig::new("t");
                let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
                let stored = saver
                    .put(&config, &Checkpoint::new(0), &meta, &ChannelVersions::new())
                    .await
                    .unwrap();
                for levels in CALLER_DEPTHS {
                    for shape in SHAPES {
                        let deep = build(shape, levels);
                        let what = format!("{name} {shape} {levels}");
                        let mut cp = Checkpoint::new(1);
                        cp.channel_values.insert("deep".to_owned(), deep.clone());
                        let mut versions = ChannelVersions::new();
                        versions.insert("deep".to_owned(), ChannelVersion::Int(1));
                        cp.channel_versions = versions.clone();
                        let err = saver.put(&stored, &cp, &meta, &versions).await.unwrap_err();
                        assert!(matches!(err, Error::Serde { .. }), "{what}: {err:?}");
                        let mut deep_meta = meta.clone();
                        deep_meta.0.insert("deep".to_owned(), deep.clone());
                        let err = saver
                            .put(&stored, &Checkpoint::new(1), &deep_meta, &ChannelVersions::new())
                            .await;
                        assert!(matches!(err, Err(Error::Serde { .. })), "{what}: {err:?}");
                        let err = saver
                            .put_writes(&stored, &[("w".to_owned(), deep.clone())], "task", "")
                            .await;
                        assert!(matches!(err, Err(Error::Serde { .. })), "{what}: {err:?}");
                        let err = saver
                            .list_vec(None, ListOptions::default().filter("deep", deep.clone()))
                            .await;
                        assert!(matches!(err, Err(Error::InvalidInput { .. })), "{what}: {err:?}");
                        drop((cp, deep_meta, deep));
                    }
                }
                // Nothing was written by the refused calls.
                let all = saver.list_vec(None, ListOptions::default()).await.unwrap();
                assert_eq!(all.len(), 1, "{name}");
                assert!(
                    saver
                        .get_tuple(&stored)
                        .await
                        .unwrap()
                        .unwrap()
                        .pending_writes
                        .is_empty(),
                    "{name}"
                );
            }
        });
    });
}
