//! Encoded I/O ([`crate::encoded`]) through the engine: the checks of `put`
//! and `put_writes` on bytes, then the backend's rows.

use bytes::Bytes;
use indexmap::IndexMap;

use super::values::{SplitValue, SplitValues};
use super::{list, saved_config, Backend, Engine, FenceToken, Put, WritesCall};
use crate::checkpoint::{ChannelValues, ChannelVersions, Checkpoint, CheckpointMetadata};
use crate::config::CheckpointConfig;
use crate::encoded::{EncodedStream, EncodedTuple};
use crate::error::{Error, Result};
use crate::limits::{self, MAX_NESTING};
use crate::saver::{op_span, traced, ListOptions};
use crate::serde::msgpack::{self, DecodeLimits, MAX_DEPTH};
use crate::serde::{JsonPlusSerializer, Serializer, TypedBytes, Value};

mod head;

/// What [`Backend::put_encoded`] stores. The input checks have passed.
// read by the backends that store encoded checkpoints whole (SQLite)
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) struct EncodedPut<'a> {
    pub(crate) thread_id: &'a str,
    pub(crate) checkpoint_ns: &'a str,
    pub(crate) parent_id: Option<&'a str>,
    pub(crate) checkpoint_id: &'a str,
    /// Sealed by the backend's serializer.
    pub(crate) checkpoint: TypedBytes,
    pub(crate) metadata: &'a CheckpointMetadata,
    /// A fenced saver's token, checked with the write.
    pub(crate) fence: Option<&'a FenceToken>,
}

/// The value of a payload a caller encoded: sealed ones by the saver's
/// serializer, plaintext ones by the serializer that made them (the saver's,
/// or the [`JsonPlusSerializer`] inside an encrypting one).
pub(crate) fn open(serde: &dyn Serializer, typed: &TypedBytes) -> Result<Value> {
    if serde.encrypts() && !typed.tag.contains('+') {
        return JsonPlusSerializer.loads_typed_bytes(&typed.tag, &typed.data);
    }
    serde.loads_typed_bytes(&typed.tag, &typed.data)
}

/// Refuses a payload a reader would not decode or nesting deeper than
/// `max_depth`: plaintext msgpack is scanned without being decoded, other
/// tags are decoded and measured.
fn check(serde: &dyn Serializer, typed: &TypedBytes, max_depth: usize, what: &dyn std::fmt::Display) -> Result<()> {
    match typed.tag.as_str() {
        "msgpack" => msgpack::validate(&typed.data, DecodeLimits { max_depth }).map_err(|e| unstorable(what, e)),
        "null" | "bytes" | "bytearray" => Ok(()),
        _ if limits::nests_deeper(&open(serde, typed)?, max_depth) => Err(Error::serde(format!(
            "{what} nests deeper than the limit of {max_depth} levels and cannot be stored"
        ))),
        _ => Ok(()),
    }
}

/// The error of a payload whose bytes `check` refuses.
fn unstorable(what: &dyn std::fmt::Display, e: Error) -> Error {
    Error::serde(format!("{what} cannot be stored: {e}"))
}

/// The plaintext msgpack of a caller's checkpoint, when a backend storing
/// split values can store its channel values as they are: the payload as
/// given, or, sealed, opened once. `None`: it is decoded instead (another
/// tag, or a serializer whose payloads are not `JsonPlusSerializer`'s).
fn splittable(serde: &dyn Serializer, typed: &TypedBytes) -> Result<Option<Bytes>> {
    if typed.tag == "msgpack" && (serde.encrypts() || serde.preserves_values()) {
        return Ok(Some(typed.data.clone()));
    }
    if serde.encrypts() && typed.tag.contains('+') {
        if let Some(plain) = serde.unseal(typed)? {
            if plain.tag == "msgpack" {
                return Ok(Some(plain.data));
            }
        }
    }
    Ok(None)
}

/// A stored checkpoint read for what it names, not what it holds: its
/// `channel_values` keep their keys and every value is nil. Plaintext
/// msgpack (sealed or not) is split without decoding the values; any other
/// payload is decoded whole, as a read would.
#[cfg(feature = "sqlite")]
pub(crate) fn checkpoint_without_values(serde: &dyn Serializer, typed: &TypedBytes) -> Result<Checkpoint> {
    match splittable(serde, typed)? {
        Some(plain) => Checkpoint::from_value(&msgpack::split_checkpoint(&plain)?.skeleton),
        None => Checkpoint::from_value(&serde.loads_typed_bytes(&typed.tag, &typed.data)?),
    }
}

/// A checkpoint's plaintext msgpack as `put` would take it: the checkpoint
/// without its channel values, and those values as their bytes, refused
/// where [`Checkpoint::from_value`] and [`limits::check_put`] refuse them
/// (with the same errors, in the same order).
pub(crate) fn split(
    plain: &Bytes,
    checkpoint_id: &str,
    metadata: &CheckpointMetadata,
) -> Result<(Checkpoint, SplitValues)> {
    let split = msgpack::split_checkpoint(plain)?;
    let mut decoded = Checkpoint::from_value(&split.skeleton)?;
    check_id(&decoded, checkpoint_id)?;
    // a name given twice keeps its first place and its last value, as
    // `from_value` keeps it; every name is a string (`from_value` checked)
    let mut by_name: IndexMap<String, msgpack::ValueBytes> = IndexMap::with_capacity(split.channels.len());
    for (name, bytes) in split.channels {
        if let Value::Str(name) = name {
            by_name.insert(name.as_str().to_owned(), bytes);
        }
    }
    decoded.channel_values = ChannelValues::new();
    let mut values = SplitValues::with_capacity(by_name.len());
    for (name, bytes) in by_name {
        limits::check_channel_height(&name, bytes.height)?;
        values.insert(name, SplitValue::new(bytes)?);
    }
    limits::check_put(&decoded, metadata)?;
    Ok((decoded, values))
}

/// Refuses a caller's checkpoint that `check` (at [`MAX_DEPTH`], the limit
/// of `put`: a channel value sits two levels down) or reading it as a
/// checkpoint refuses, or whose id is not `checkpoint_id`. Plaintext msgpack
/// is checked in one pass without being decoded ([`head`]); a sealed one is
/// opened once, another tag decoded.
fn check_checkpoint(serde: &dyn Serializer, typed: &TypedBytes, checkpoint_id: &str) -> Result<()> {
    let what = &"the checkpoint";
    if typed.tag == "msgpack" && (serde.encrypts() || serde.preserves_values()) {
        let id = head::checkpoint_id(&typed.data, |e| unstorable(what, e))?;
        return same_id(id, checkpoint_id);
    }
    check(serde, typed, MAX_DEPTH, what)?;
    let decoded = match splittable(serde, typed)? {
        Some(plain) => Checkpoint::from_value(&msgpack::split_checkpoint(&plain)?.skeleton)?,
        None => Checkpoint::from_value(&open(serde, typed)?)?,
    };
    check_id(&decoded, checkpoint_id)
}

fn check_id(decoded: &Checkpoint, checkpoint_id: &str) -> Result<()> {
    same_id(&decoded.id, checkpoint_id)
}

fn same_id(id: &str, checkpoint_id: &str) -> Result<()> {
    if id != checkpoint_id {
        return Err(Error::invalid(format!(
            "the encoded checkpoint's id {id:?} is not {checkpoint_id:?}"
        )));
    }
    Ok(())
}

impl<B: Backend> Engine<B> {
    pub(crate) async fn put_encoded(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        checkpoint: TypedBytes,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let ns = config.ns();
        traced(op_span("put", &config.thread_id, ns, Some(checkpoint_id)), async {
            self.backend.check_writable("put")?;
            if checkpoint_id.is_empty() {
                return Err(Error::invalid("checkpoint.id is empty: every checkpoint needs an id"));
            }
            limits::check_metadata(metadata)?;
            let serde = self.backend.serializer();
            let token = self.token(&config.thread_id).await?;
            let put = |checkpoint| Put {
                fence: token.as_ref(),
                ..Put::new(config, checkpoint, metadata, new_versions)
            };
            if B::STORES_ENCODED_CHECKPOINTS {
                check_checkpoint(serde, &checkpoint, checkpoint_id)?;
                let checkpoint = serde.seal(checkpoint)?;
                self.backend
                    .put_encoded(EncodedPut {
                        thread_id: &config.thread_id,
                        checkpoint_ns: ns,
                        parent_id: config.checkpoint_id(),
                        checkpoint_id,
                        checkpoint,
                        metadata,
                        fence: token.as_ref(),
                    })
                    .await?;
            } else if let Some(plain) = B::STORES_SPLIT_VALUES
                .then(|| splittable(serde, &checkpoint))
                .transpose()?
                .flatten()
            {
                let (decoded, values) = split(&plain, checkpoint_id, metadata)?;
                self.backend.put_split(put(&decoded), &values).await?;
            } else {
                let decoded = Checkpoint::from_value(&open(serde, &checkpoint)?)?;
                check_id(&decoded, checkpoint_id)?;
                limits::check_put(&decoded, metadata)?;
                self.backend.put(put(&decoded)).await?;
            }
            Ok(saved_config(&config.thread_id, ns, checkpoint_id))
        })
        .await
    }

    pub(crate) async fn put_writes_encoded(&self, call: WritesCall<'_, Vec<(String, TypedBytes)>>) -> Result<()> {
        let mut call = call;
        let config = call.config;
        let span = op_span("put_writes", &config.thread_id, config.ns(), config.checkpoint_id());
        traced(span, async {
            self.backend.check_writable("put_writes")?;
            let checkpoint_id = limits::check_put_writes(config, &[])?;
            let serde = self.backend.serializer();
            for (channel, typed) in &call.writes {
                check(
                    serde,
                    typed,
                    MAX_NESTING,
                    &format_args!("the value written to channel {channel:?}"),
                )?;
            }
            if call.writes.is_empty() {
                return Ok(());
            }
            let encoded = std::mem::take(&mut call.writes)
                .into_iter()
                .map(|(channel, typed)| Ok((channel, self.backend.encoded_value(typed)?)))
                .collect::<Result<Vec<_>>>()?;
            let token = self.token(&config.thread_id).await?;
            let mut batch = call.batch(checkpoint_id, encoded);
            batch.fence = token.as_ref();
            self.backend.put_writes(batch).await
        })
        .await
    }

    pub(crate) async fn get_tuple_encoded(&self, config: &CheckpointConfig) -> Result<Option<EncodedTuple>> {
        self.get_as(config, B::encoded_row).await
    }

    pub(crate) fn list_encoded(&self, config: Option<CheckpointConfig>, options: ListOptions) -> EncodedStream {
        list::stream(self.backend.clone(), config, options)
    }
}
