//! Durable, time-travelling state for agent and graph frameworks: the
//! checkpoint savers of LangGraph, in Rust, with storage byte-compatible with
//! Python LangGraph.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! use checkpointer::prelude::*;
//! let saver = InMemorySaver::new();
//! let next = |v: Option<&ChannelVersion>| saver.get_next_version(v);
//! // A super-step's checkpoint: values, versions bumped, stored, handed back.
//! let mut step = StepCheckpoint::first(-1);
//! step.write("messages", Value::from(vec!["hi"]), next)?;
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let stored = saver.put_step(&CheckpointConfig::new("thread-1"), &step, &meta).await?;
//! // Any process reading the store later resumes from it.
//! let latest = saver.latest("thread-1").await?.expect("stored");
//! assert_eq!(latest.checkpoint.channel_values["messages"], Value::from(vec!["hi"]));
//! assert_eq!(latest, stored);
//! # Ok(())
//! # }
//! ```
//!
//! Writing a graph runtime on the crate: the [`runtime_guide`]
//! (checkpoints, versions, triggers and pending writes, step by step).
//!
//! | item | what |
//! |---|---|
//! | [`CheckpointSaver`] | the async, dyn-compatible trait every backend implements |
//! | [`InMemorySaver`] | the reference backend, always built |
//! | [`open()`], [`OpenOptions`], [`SaverAdmin`], [`TtlConfig`] | a URL (`memory:`, `sqlite://`, `postgres://`, `redis://`, `rediss://`, cluster lists) becomes a saver, with the settings a caller gives; one administrative face on every backend |
//! | [`space`] | what a store takes part by part, and giving back the space deletes freed (SQLite incremental vacuum, PostgreSQL `VACUUM`) |
//! | [`serde`] | [`Value`], msgpack as LangGraph writes it, the typed bridge, [`serde::Serializer`] |
//! | [`version`], [`id`] | channel versions and uuid6 checkpoint ids |
//! | [`prelude`] | the common names in one import: `use checkpointer::prelude::*;` |
//! | [`task`] | LangGraph's task ids and task paths, as the Python runtime computes them |
//! | [`state`] | a typed state struct to and from one channel per field; typed partial-update writes |
//! | [`thread`] | [`thread::Thread`]: typed state snapshots, history, `update_state` and forks of one thread |
//! | [`step`] | [`step::Step`]: one super-step with the protocol owned (close, interrupt, resume, input writes) |
//! | [`reducer`] | [`reducer::Reducers`]: typed reducers per state field; `append` and LangGraph's `add_messages` |
//! | [`verify`] | a row verifier: every violation of the invariants a LangGraph runtime relies on, in a thread or a store |
//! | [`secret`] | the one mask of passwords and tokens in every connection-string form, for messages and `Debug` |
//! | [`blocking`] | a synchronous facade for callers without a runtime |
//! | `conformance` (feature `conformance`) | the suite every backend must pass |
//! | `testing` (feature `conformance`) | `FaultySaver`: inject failures and delays to test callers' retry paths |
//! | `store` (feature `store`) | long-term memory: LangGraph's `BaseStore` (namespaced JSON items, filters, TTL, vector search with the caller's embeddings), `InMemoryStore`, `SqliteStore` (with `sqlite`) and `PostgresStore` (with `postgres`) on Python's store tables, and its conformance suite |
//! | `postgres::PostgresSaver` (feature `postgres`) | PostgreSQL, in the tables of Python's `langgraph-checkpoint-postgres` |
//! | `redis::RedisSaver` (feature `redis`) | Redis 6.2+ or Valkey, core commands, one hash tag per thread (cluster-ready layout) |
//! | `sqlite::SqliteSaver` (feature `sqlite`) | checkpoints in a SQLite file, byte-compatible with Python's saver |
//!
//! # Features
//!
//! | feature | default | enables |
//! |---|---|---|
//! | `chrono` | yes | conversions between chrono types and Python's datetime encodings |
//! | `conformance` | no | the public conformance suite and test utilities (`testing`) |
//! | `encryption` | no | `serde::EncryptedSerializer`: AES-EAX at rest, as Python's `EncryptedSerializer` |
//! | `postgres` | no | `postgres::PostgresSaver` (tokio-postgres, deadpool-postgres) |
//! | `render` | no | `serde::render`: the JSON view of stored values `read_fixtures.py` prints, and `dump` of a whole store (serde_json) |
//! | `postgres-tls` | no | TLS for `PostgresSaver` via rustls (no system library) |
//! | `redis` | no | `redis::RedisSaver` (the `redis` crate, tokio, a reconnecting `ConnectionManager`; needs Rust 1.88) |
//! | `redis-tls` | no | TLS for `RedisSaver` (`rediss://`) via rustls (ring, webpki roots or a private CA; no system library) |
//! | `store` | no | `store`: LangGraph's long-term memory `Store` and `InMemoryStore` (serde_json); with `sqlite`, `SqliteStore`; with `postgres`, `PostgresStore` |
//! | `sqlite` | no | [`sqlite::SqliteSaver`] (links the system SQLite library) |
//! | `sqlite-bundled` | no | `sqlite` with SQLite compiled in |
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod atomic;
pub mod blocking;
pub mod checkpoint;
pub mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod encoded;
mod engine;
pub mod error;
pub mod fence;
pub mod id;
pub mod import;
pub mod limits;
pub mod memory;
mod open;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod prelude;
#[cfg(feature = "redis")]
pub mod redis;
pub mod reducer;
pub mod retention;
pub mod saver;
pub mod secret;
pub mod serde;
mod setters;
pub mod space;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod state;
pub mod step;
#[cfg(feature = "store")]
pub mod store;
pub mod task;
#[cfg(feature = "conformance")]
pub mod testing;
pub mod thread;
pub mod verify;
pub mod version;

pub use checkpoint::{
    ChannelValues, ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointSource, CheckpointTuple, PendingWrite,
    SharedMap, StepCheckpoint,
};
pub use config::{CheckpointConfig, CheckpointNs, NsScope};
pub use error::{EncryptionError, Error, Result};
pub use memory::InMemorySaver;
pub use open::{open, OpenOptions, SaverAdmin, StorageSize, TtlConfig, ValueLayout};
pub use saver::{
    Capabilities, CheckpointSaver, CheckpointSaverExt, CheckpointStream, DeltaChannelHistory, ListOptions,
    ListThreadsOptions, Operation, PruneStrategy, ThreadInfo, ThreadKeys,
};
pub use serde::Value;
pub use version::ChannelVersion;

/// The README's examples, compiled and run as doctests so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guide for authors of a graph runtime (`docs/runtime.md`), rendered
/// here so it is part of the crate's documentation; its examples are
/// compiled and run as doctests.
pub mod runtime_guide {
    #![doc = include_str!("../docs/runtime.md")]
}

/// The backends page's examples (`docs/backends.md`), compiled and run.
#[cfg(doctest)]
#[doc = include_str!("../docs/backends.md")]
pub struct BackendsDoctests;
