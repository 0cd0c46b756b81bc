//! Encoded I/O: checkpoints and writes as their serializer's `(tag, bytes)`
//! pairs, for a caller that encodes and decodes values itself (the Python
//! package hands LangGraph's own serializer output over and reads rows
//! back the same way).
//!
//! Every saver implements [`EncodedSaver`], through the same engine as
//! [`CheckpointSaver`]: the same input checks and limits (a value `put` or
//! `put_writes` refuses is refused here with the same typed error; a
//! plaintext msgpack payload is checked without being decoded), the same
//! tracing, the same paging. A store that keeps a checkpoint as one payload
//! (SQLite) stores the caller's bytes as given and reads them back as
//! stored; the others store write values as given. PostgreSQL and Redis
//! split a msgpack checkpoint into their rows without decoding its channel
//! values: each value's bytes become its payload as they are (decoded only
//! when not in the canonical form Python writes, so the stored bytes are
//! always those `put` would store), and they splice stored payloads back
//! into the checkpoint they hand out. A saver whose serializer encrypts
//! seals a plaintext payload ([`Serializer::seal`]) before storing it, so
//! nothing is kept in plaintext; a sealed checkpoint is opened once
//! ([`Serializer::unseal`]) and each of its values sealed on its own.
//!
//! Reads hand stored payloads out as they are: SQLite's checkpoint, every
//! pending write of SQLite, PostgreSQL, Redis and an encoding memory saver
//! (a plaintext one refused when the serializer refuses plaintext), the
//! memory saver's metadata, and, spliced into the checkpoint's msgpack,
//! the channel values PostgreSQL, Redis and an encoding memory saver store
//! (opened once when sealed, decoded only when not in the canonical form).
//! A listing with a metadata filter reads only the metadata of a row it
//! drops.
//!
//! Payloads read back carry their tag: what the store holds (`msgpack`,
//! `msgpack+aes`, …) or, for a store that decoded them, the tags of
//! [`JsonPlusSerializer`] (which LangGraph's serializers read).

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::checkpoint::{ChannelVersions, CheckpointMetadata, CheckpointTuple};
use crate::config::CheckpointConfig;
use crate::error::Result;
use crate::saver::{CheckpointSaver, ListOptions};
use crate::serde::{msgpack, JsonPlusSerializer, Serializer, TypedBytes};

/// A checkpoint with its writes, every value as its serializer's bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedTuple {
    /// The thread.
    pub thread_id: String,
    /// The namespace.
    pub checkpoint_ns: String,
    /// The checkpoint id.
    pub checkpoint_id: String,
    /// The parent checkpoint id.
    pub parent_checkpoint_id: Option<String>,
    /// The checkpoint.
    pub checkpoint: TypedBytes,
    /// The metadata: tag `json` (the JSON text Python's SQLite saver keeps;
    /// empty when there is none) or `msgpack`.
    pub metadata: TypedBytes,
    /// Its pending writes in (task_path, task_id, idx) order.
    pub writes: Vec<EncodedWrite>,
}

/// One pending write of an [`EncodedTuple`].
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The value.
    pub value: TypedBytes,
}

impl EncodedTuple {
    /// `tuple` encoded by [`JsonPlusSerializer`] (what a store that decodes
    /// its rows hands out).
    ///
    /// # Errors
    /// [`Error::Serde`](crate::Error::Serde) when a value cannot be encoded.
    pub fn from_tuple(tuple: &CheckpointTuple) -> Result<EncodedTuple> {
        let checkpoint = JsonPlusSerializer.dumps_typed(&tuple.checkpoint.to_value(true))?;
        EncodedTuple::with_checkpoint(tuple, checkpoint)
    }

    /// [`from_tuple`](Self::from_tuple) with the checkpoint already
    /// encoded (`tuple.checkpoint` is not looked at).
    fn with_checkpoint(tuple: &CheckpointTuple, checkpoint: TypedBytes) -> Result<EncodedTuple> {
        let serde = JsonPlusSerializer;
        Ok(EncodedTuple {
            thread_id: tuple.config.thread_id.clone(),
            checkpoint_ns: tuple.config.ns().to_owned(),
            checkpoint_id: tuple.checkpoint.id.clone(),
            parent_checkpoint_id: tuple.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
            checkpoint,
            metadata: metadata_msgpack(&tuple.metadata)?,
            writes: tuple
                .pending_writes
                .iter()
                .map(|w| {
                    Ok(EncodedWrite {
                        task_id: w.task_id.clone(),
                        channel: w.channel.clone(),
                        value: serde.dumps_typed(&w.value)?,
                    })
                })
                .collect::<Result<_>>()?,
        })
    }
}

/// The metadata of an [`EncodedTuple`] read from a store that decodes it.
#[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))]
pub(crate) fn metadata_msgpack(metadata: &CheckpointMetadata) -> Result<TypedBytes> {
    Ok(TypedBytes::new("msgpack", msgpack::encode(&metadata.to_value())?))
}

/// A listing of [`EncodedTuple`]s, newest first (see [`CheckpointSaver::list`]).
pub type EncodedStream = BoxStream<'static, Result<EncodedTuple>>;

/// Encoded I/O on a saver (see the [module docs](self)); every saver of this
/// crate implements it, and it is dyn-compatible: hold an
/// `Arc<dyn EncodedSaver>` and call [`CheckpointSaver`]'s methods on it too.
#[async_trait]
pub trait EncodedSaver: CheckpointSaver {
    /// [`CheckpointSaver::put`] of a checkpoint its caller encoded:
    /// `checkpoint_id` is its id, `checkpoint` its serializer's bytes. The
    /// parent is `config`'s checkpoint id.
    ///
    /// # Errors
    /// As `put`: [`Error::InvalidInput`](crate::Error::InvalidInput) for an
    /// empty id, [`Error::Serde`](crate::Error::Serde) for bytes a reader
    /// would not decode or that nest deeper than `put` stores.
    async fn put_encoded(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        checkpoint: TypedBytes,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig>;

    /// [`CheckpointSaver::put_writes`] of values their caller encoded.
    ///
    /// # Errors
    /// As `put_writes`.
    async fn put_writes_encoded(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, TypedBytes)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()>;

    /// [`CheckpointSaver::get_tuple`], values as bytes.
    ///
    /// # Errors
    /// As `get_tuple`, less what decoding values would find.
    async fn get_tuple_encoded(&self, config: &CheckpointConfig) -> Result<Option<EncodedTuple>>;

    /// [`CheckpointSaver::list`], values as bytes.
    fn list_encoded(&self, config: Option<CheckpointConfig>, options: ListOptions) -> EncodedStream;
}
