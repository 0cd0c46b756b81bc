//! Unit tests of the in-memory saver internals (the shared conformance suite
//! covers the contract).

use std::sync::Arc;

use futures::StreamExt;

use indexmap::IndexMap;

use super::store::{self, Stored};
use super::{size, InMemorySaver, PAGE};
use crate::checkpoint::{ChannelVersions, CheckpointSource};
use crate::checkpoint::{Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::saver::{
    CheckpointSaver, CheckpointSaverExt, DeltaChannelHistory, ListOptions, ListThreadsOptions, PruneStrategy,
};
use crate::serde::{Ext, ExtPayload, TypedBytes};
use crate::serde::{JsonPlusSerializer, Serializer, Value};
use crate::version::ChannelVersion;

pub(super) fn ext(code: i8, payload: ExtPayload) -> Ext {
    Ext { code, payload }
}

pub(super) fn ver(i: i64) -> ChannelVersion {
    ChannelVersion::Int(i)
}

/// A checkpoint with the given id, versions and values.
pub(super) fn cp(id: &str, versions: &[(&str, i64)], values: &[(&str, Value)]) -> Checkpoint {
    let mut c = Checkpoint::new(0);
    c.id = id.to_owned();
    for (ch, v) in versions {
        c.channel_versions.insert((*ch).to_owned(), ver(*v));
    }
    for (ch, v) in values {
        c.channel_values.insert((*ch).to_owned(), v.clone());
    }
    c
}

pub(super) fn meta(step: i64) -> CheckpointMetadata {
    CheckpointMetadata::new(CheckpointSource::Loop, step)
}

pub(super) fn nv(versions: &[(&str, i64)]) -> ChannelVersions {
    versions.iter().map(|(ch, v)| ((*ch).to_owned(), ver(*v))).collect()
}

pub(super) fn cfg(thread: &str, ns: &str, id: Option<&str>) -> CheckpointConfig {
    let c = CheckpointConfig::new(thread).with_ns(ns);
    match id {
        Some(id) => c.with_checkpoint_id(id),
        None => c,
    }
}

/// Puts a bare checkpoint (no channels) with the given parent.
pub(super) async fn put_bare(s: &InMemorySaver, thread: &str, ns: &str, id: &str, parent: Option<&str>, step: i64) {
    s.put(
        &cfg(thread, ns, parent),
        &cp(id, &[], &[]),
        &meta(step),
        &ChannelVersions::new(),
    )
    .await
    .unwrap();
}

/// Puts checkpoint "1" of thread "t" (bare) and checks the pending writes
/// `at` reads with it, in order, as (task_id, channel, value).
pub(super) async fn assert_pending_once_put(s: &InMemorySaver, at: &CheckpointConfig, want: &[(&str, &str, Value)]) {
    put_bare(s, "t", "", "1", None, 0).await;
    let t = s.get_tuple(at).await.unwrap().unwrap();
    let got: Vec<_> = t
        .pending_writes
        .iter()
        .map(|w| (w.task_id.as_str(), w.channel.as_str(), w.value.clone()))
        .collect();
    assert_eq!(got, want);
}

pub(super) fn keys(tuples: &[CheckpointTuple]) -> Vec<(String, String, String)> {
    tuples
        .iter()
        .map(|t| {
            (
                t.checkpoint.id.clone(),
                t.config.thread_id.clone(),
                t.config.checkpoint_ns.clone().unwrap(),
            )
        })
        .collect()
}

pub(super) async fn list_all(
    s: &InMemorySaver,
    config: Option<CheckpointConfig>,
    options: ListOptions,
) -> Vec<CheckpointTuple> {
    s.list_vec(config, options).await.unwrap()
}

/// A chain 1..=n in ns "" of thread `t`: channel "d" (delta) holds a snapshot
/// at `snapshots`, is written (a pending write) at every step, and has a new
/// version at every step; channel "s" is a plain value set once at step 1.
pub(super) async fn delta_chain(s: &InMemorySaver, t: &str, n: i64, snapshots: &[i64]) {
    for i in 1..=n {
        let id = format!("{i:02}");
        let mut values = vec![];
        if i == 1 {
            values.push(("s", Value::from("plain")));
        }
        if snapshots.contains(&i) {
            values.push((
                "d",
                Value::Ext(Box::new(ext(7, ExtPayload::Decoded(Box::new(Value::Int(i)))))),
            ));
        }
        let c = cp(&id, &[("d", i), ("s", 1)], &values);
        let new = if i == 1 {
            nv(&[("d", i), ("s", 1)])
        } else {
            nv(&[("d", i)])
        };
        let parent = (i > 1).then(|| format!("{:02}", i - 1));
        // The runtime counts updates and super-steps since the last snapshot;
        // a snapshotted channel has no counter.
        let mut m = meta(i);
        if !snapshots.contains(&i) {
            let since = i - snapshots.iter().copied().filter(|s| *s < i).max().unwrap_or(0);
            m.insert(
                "counters_since_delta_snapshot",
                Value::map([("d", Value::Array(vec![Value::Int(since), Value::Int(since)].into()))]),
            );
        }
        s.put(&cfg(t, "", parent.as_deref()), &c, &m, &new).await.unwrap();
        s.put_writes(
            &cfg(t, "", Some(&id)),
            &[("d".into(), Value::Int(i))],
            &format!("task{i}"),
            "",
        )
        .await
        .unwrap();
    }
}

pub(super) fn ids(tuples: &[CheckpointTuple]) -> Vec<String> {
    tuples.iter().map(|t| t.checkpoint.id.clone()).collect()
}

pub(super) fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub(super) fn typed(v: &serde_json::Value) -> Value {
    let tag = v["type"].as_str().unwrap();
    JsonPlusSerializer
        .loads_typed(tag, &unhex(v["hex"].as_str().unwrap()))
        .unwrap()
}

pub(super) fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Nil => serde_json::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Int(i) => (*i).into(),
        Value::Str(s) => s.as_str().into(),
        Value::Array(items) => items.iter().map(to_json).collect(),
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| (k.as_str().unwrap().to_owned(), to_json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        other => panic!("unexpected {other:?}"),
    }
}

pub(super) fn nested(levels: usize) -> Value {
    let mut v = Value::Int(1);
    for _ in 0..levels {
        v = Value::Array(vec![v].into());
    }
    v
}

/// `n` regular writes on channels `c{i}` with values `i`, a special write every
/// 1000 (the last of each special channel wins).
pub(super) fn many_writes(n: usize) -> Vec<(String, Value)> {
    let mut writes: Vec<(String, Value)> = (0..n).map(|i| (format!("c{i}"), Value::Int(i as i64))).collect();
    for i in (0..n).step_by(1000) {
        writes[i] = ("__error__".to_owned(), Value::Int(i as i64));
    }
    writes
}

/// A thread of `n` bare checkpoints, each with a parent and one write.
pub(super) fn big_thread(s: &InMemorySaver, thread: &str, n: usize) {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            let mut parent: Option<String> = None;
            for i in 0..n {
                let id = format!("{i:07}");
                put_bare(s, thread, "", &id, parent.as_deref(), i as i64).await;
                if i % 100 == 0 {
                    s.put_writes(
                        &cfg(thread, "", Some(&id)),
                        &[("w".into(), Value::Int(i as i64))],
                        "task",
                        "",
                    )
                    .await
                    .unwrap();
                }
                parent = Some(id);
            }
        });
}

/// A serializer that stores msgpack XOR-ed with a key under its own tag, as an
/// encrypting serializer would, and answers as one (it encrypts, reads no
/// plaintext, preserves no values).
#[derive(Debug)]
pub(super) struct Xor;

impl Serializer for Xor {
    fn dumps_typed(&self, value: &Value) -> Result<TypedBytes> {
        let plain = JsonPlusSerializer.dumps_typed(value)?;
        let data: Vec<u8> = plain.data.iter().map(|b| b ^ 0x5a).collect();
        Ok(TypedBytes::new(format!("{}+xor", plain.tag), data))
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> Result<Value> {
        let tag = tag.strip_suffix("+xor").ok_or_else(|| Error::serde("not xor"))?;
        let plain: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
        JsonPlusSerializer.loads_typed(tag, &plain)
    }

    fn encrypts(&self) -> bool {
        true
    }
}

mod concurrency;
mod maintenance;
mod reads;
mod replace;
mod writes;
