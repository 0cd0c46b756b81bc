//! [`Record`]: one stored checkpoint, compact while nobody reads it.
//!
//! A thread that is written and not read again (most of a service's threads,
//! most of the time) should cost little: a record keeps the checkpoint's
//! parts in a compact form ([`Cold`]: the timestamp, the channel versions
//! packed in one buffer, the metadata as its msgpack bytes) and builds the
//! native skeleton and metadata the first time a read needs them, then keeps
//! them ([`Hot`]), so a thread that is read keeps being read at the cost of
//! clones. Both forms hold the same data; neither changes once built.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use indexmap::IndexMap;

use super::{CkptId, Stored, ThreadTag};
use crate::checkpoint::{ChannelValues, ChannelVersions, Checkpoint, CheckpointMetadata, SharedMap};
use crate::error::Result;
use crate::serde::msgpack::len32;
use crate::serde::{msgpack, Value};
use crate::version::ChannelVersion;

/// One stored checkpoint. Immutable once built: a re-put replaces the record.
#[derive(Debug)]
pub(in crate::memory) struct Record {
    pub(in crate::memory) id: CkptId,
    pub(in crate::memory) parent: Option<Box<str>>,
    cold: Cold,
    /// The stored value of each channel of the versions, in their order;
    /// `None` = no value (never an `empty` marker).
    pub(in crate::memory) values: Box<[Option<Stored>]>,
    /// The native form, built by the first read that needs it.
    hot: OnceLock<Box<Hot>>,
    pub(super) tag: Arc<ThreadTag>,
    /// Encoded size of skeleton and metadata (see `storage_bytes`).
    pub(super) size: usize,
}

/// The compact form of a checkpoint without its channel values, and its
/// metadata: built by `put` outside the store lock.
#[derive(Debug, Clone)]
pub(in crate::memory) struct Cold {
    v: i64,
    ts: Box<str>,
    versions: Versions,
    versions_seen: SharedMap<String, ChannelVersions>,
    updated_channels: Option<Arc<[String]>>,
    /// The metadata map as msgpack.
    metadata: Box<[u8]>,
    /// What most checkpoints do not have.
    rare: Option<Box<Rare>>,
}

#[derive(Debug, Clone, Default)]
struct Rare {
    /// Values of channels in `channel_values` that have no version: kept so
    /// no value given to `put` is lost.
    unversioned: Vec<(String, Stored)>,
    pending_sends: Option<Vec<Value>>,
    extra: Vec<(String, Value)>,
}

/// The native form of a record, as reads hand it out (by clones).
#[derive(Debug)]
pub(in crate::memory) struct Hot {
    /// The checkpoint with empty `channel_values`.
    pub(in crate::memory) skeleton: Checkpoint,
    pub(in crate::memory) metadata: CheckpointMetadata,
    /// The checkpoint's `channel_values` when values are kept live (shared
    /// by every read); `None` when they are encoded and decoded per read.
    pub(in crate::memory) channel_values: Option<ChannelValues>,
}

impl Cold {
    /// The compact form of `checkpoint` (its `channel_values` aside) and
    /// `metadata`, whose msgpack length is `metadata_len` (computed, and its
    /// depth checked, by the caller).
    pub(in crate::memory) fn new(
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        metadata_len: usize,
        unversioned: Vec<(String, Stored)>,
    ) -> Result<Cold> {
        let packed = pack_metadata(metadata, metadata_len)?;
        let rare = (!unversioned.is_empty() || checkpoint.pending_sends.is_some() || !checkpoint.extra.is_empty())
            .then(|| {
                Box::new(Rare {
                    unversioned,
                    pending_sends: checkpoint.pending_sends.clone(),
                    extra: checkpoint.extra.clone(),
                })
            });
        Ok(Cold {
            v: checkpoint.v,
            ts: checkpoint.ts.as_str().into(),
            versions: Versions::pack(&checkpoint.channel_versions)?,
            versions_seen: if checkpoint.versions_seen.is_empty() {
                no_seen()
            } else {
                checkpoint.versions_seen.clone()
            },
            updated_channels: checkpoint.updated_channels.clone(),
            metadata: packed,
            rare,
        })
    }

    /// The channel versions, in order.
    pub(in crate::memory) fn versions(&self) -> VersionsIter<'_> {
        self.versions.iter()
    }

    fn metadata(&self) -> Result<CheckpointMetadata> {
        CheckpointMetadata::from_value(&msgpack::decode(&self.metadata)?)
    }
}

impl Record {
    pub(in crate::memory) fn new(
        id: CkptId,
        parent: Option<Box<str>>,
        cold: Cold,
        values: Box<[Option<Stored>]>,
        tag: Arc<ThreadTag>,
        size: usize,
    ) -> Record {
        Record {
            id,
            parent,
            cold,
            values,
            hot: OnceLock::new(),
            tag,
            size,
        }
    }

    /// The channel versions, in order (one per entry of `values`).
    pub(in crate::memory) fn versions(&self) -> VersionsIter<'_> {
        self.cold.versions()
    }

    /// The checkpoint's `ts`, as given.
    pub(in crate::memory) fn ts(&self) -> &str {
        &self.cold.ts
    }

    /// Values of channels without a version.
    pub(in crate::memory) fn unversioned(&self) -> &[(String, Stored)] {
        self.cold.rare.as_ref().map_or(&[], |r| &r.unversioned)
    }

    /// The stored values by channel: the versioned channels' (those with a
    /// value), then the unversioned ones; the order `get_tuple` returns.
    pub(in crate::memory) fn stored_values(&self) -> impl Iterator<Item = (&str, &Stored)> {
        let versioned = self.versions().map(|(ch, _)| ch).zip(self.values.iter());
        let stored = versioned.filter_map(|(ch, s)| Some((ch, s.as_ref()?)));
        stored.chain(self.unversioned().iter().map(|(ch, s)| (ch.as_str(), s)))
    }

    /// The channels with a stored value (decided rule: any value, Nil
    /// included, counts; an `empty` marker does not).
    pub(in crate::memory) fn stored_channels(&self) -> HashSet<&str> {
        self.stored_values().map(|(ch, _)| ch).collect()
    }

    /// The metadata map as msgpack, as kept: the encoding of its value.
    pub(in crate::memory) fn metadata_msgpack(&self) -> &[u8] {
        &self.cold.metadata
    }

    /// The native form, built on the first call.
    ///
    /// # Errors
    /// `Error::Serde` if the stored metadata does not read back (it always
    /// does: the store wrote it).
    pub(in crate::memory) fn hot(&self) -> Result<&Hot> {
        if let Some(hot) = self.hot.get() {
            return Ok(hot);
        }
        let hot = self.build_hot()?;
        Ok(self.hot.get_or_init(|| Box::new(hot)))
    }

    /// The metadata: the native form's when built, else read from the
    /// compact form without keeping it (scans under the store lock read
    /// many records once).
    pub(in crate::memory) fn metadata(&self) -> Result<Cow<'_, CheckpointMetadata>> {
        match self.hot.get() {
            Some(hot) => Ok(Cow::Borrowed(&hot.metadata)),
            None => self.cold.metadata().map(Cow::Owned),
        }
    }

    fn build_hot(&self) -> Result<Hot> {
        let cold = &self.cold;
        let mut versions = IndexMap::with_capacity(self.values.len());
        for (ch, ver) in cold.versions() {
            versions.insert(ch.to_owned(), ver.to_owned());
        }
        let rare = cold.rare.as_deref();
        let skeleton = Checkpoint {
            v: cold.v,
            id: self.id.to_string(),
            ts: cold.ts.to_string(),
            channel_values: no_values(),
            channel_versions: versions.into(),
            versions_seen: cold.versions_seen.clone(),
            updated_channels: cold.updated_channels.clone(),
            pending_sends: rare.and_then(|r| r.pending_sends.clone()),
            extra: rare.map(|r| r.extra.clone()).unwrap_or_default(),
        };
        // Live values are shared: the map is built once and kept.
        let mut live = ChannelValues::with_capacity(self.values.len() + self.unversioned().len());
        let mut all_live = true;
        for (ch, s) in self.stored_values() {
            match s {
                Stored::Live { value, .. } => {
                    live.insert(ch.to_owned(), value.clone());
                }
                Stored::Encoded { .. } => {
                    all_live = false;
                    break;
                }
            }
        }
        Ok(Hot {
            skeleton,
            metadata: cold.metadata()?,
            channel_values: all_live.then_some(live),
        })
    }

    pub(super) fn with_tag(&self, tag: Arc<ThreadTag>) -> Record {
        let hot = OnceLock::new();
        if let Some(h) = self.hot.get() {
            let _ = hot.set(Box::new(Hot {
                skeleton: h.skeleton.clone(),
                metadata: h.metadata.clone(),
                channel_values: h.channel_values.clone(),
            }));
        }
        Record {
            id: self.id.clone(),
            parent: self.parent.clone(),
            cold: self.cold.clone(),
            values: self.values.clone(),
            hot,
            tag,
            size: self.size,
        }
    }

    pub(super) fn without_parent(&self) -> Record {
        Record {
            parent: None,
            ..self.with_tag(self.tag.clone())
        }
    }
}

/// The empty `channel_values` of every skeleton: one shared map.
fn no_values() -> ChannelValues {
    static EMPTY: OnceLock<ChannelValues> = OnceLock::new();
    EMPTY.get_or_init(ChannelValues::new).clone()
}

/// The empty `versions_seen` of every record without one: one shared map.
fn no_seen() -> SharedMap<String, ChannelVersions> {
    static EMPTY: OnceLock<SharedMap<String, ChannelVersions>> = OnceLock::new();
    EMPTY.get_or_init(SharedMap::new).clone()
}

/// The metadata map as msgpack (the encoding of `metadata.to_value()`,
/// without building that value), `len` bytes.
fn pack_metadata(metadata: &CheckpointMetadata, len: usize) -> Result<Box<[u8]>> {
    let mut out = Vec::with_capacity(len);
    let n = len32(metadata.0.len(), "map")?;
    msgpack::map_header(&mut out, n);
    for (key, value) in metadata.0.iter() {
        msgpack::str_header(&mut out, len32(key.len(), "string")?);
        out.extend_from_slice(key.as_bytes());
        msgpack::encode_into(value, &mut out)?;
    }
    Ok(out.into_boxed_slice())
}

/// Channel versions packed in one buffer: per channel a kind byte, the
/// channel's length (u32, little-endian) and bytes, then the version (a
/// string as length and bytes, a number as its 8 bytes).
#[derive(Debug, Clone)]
struct Versions(Box<[u8]>);

const STR: u8 = 0;
const INT: u8 = 1;
const FLOAT: u8 = 2;

impl Versions {
    fn pack(versions: &ChannelVersions) -> Result<Versions> {
        let mut len = 0usize;
        for (ch, ver) in versions.iter() {
            let ver_len = match ver {
                ChannelVersion::Str(s) => 4usize.saturating_add(s.len()),
                _ => 8,
            };
            len = len.saturating_add(5).saturating_add(ch.len()).saturating_add(ver_len);
        }
        let mut out = Vec::with_capacity(len);
        for (ch, ver) in versions.iter() {
            let kind = match ver {
                ChannelVersion::Str(_) => STR,
                ChannelVersion::Int(_) => INT,
                ChannelVersion::Float(_) => FLOAT,
            };
            out.push(kind);
            put_str(&mut out, ch, "channel name")?;
            match ver {
                ChannelVersion::Str(s) => put_str(&mut out, s, "channel version")?,
                ChannelVersion::Int(i) => out.extend_from_slice(&i.to_le_bytes()),
                ChannelVersion::Float(f) => out.extend_from_slice(&f.to_bits().to_le_bytes()),
            }
        }
        Ok(Versions(out.into_boxed_slice()))
    }

    fn iter(&self) -> VersionsIter<'_> {
        VersionsIter(&self.0)
    }
}

fn put_str(out: &mut Vec<u8>, s: &str, what: &str) -> Result<()> {
    out.extend_from_slice(&len32(s.len(), what)?.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn take_str(b: &[u8]) -> Option<(&str, &[u8])> {
    let (n, rest) = b.split_first_chunk::<4>()?;
    let n = usize::try_from(u32::from_le_bytes(*n)).ok()?;
    if rest.len() < n {
        return None;
    }
    let (s, rest) = rest.split_at(n);
    Some((std::str::from_utf8(s).ok()?, rest))
}

/// A channel version read from a packed buffer.
#[derive(Debug, Clone, Copy)]
pub(in crate::memory) enum VersionRef<'a> {
    Str(&'a str),
    Int(i64),
    Float(f64),
}

impl<'a> VersionRef<'a> {
    /// The blob key of the version (see `version_key`).
    pub(in crate::memory) fn key(self) -> Cow<'a, str> {
        match self {
            VersionRef::Str(s) => Cow::Borrowed(s),
            other => Cow::Owned(other.to_owned().to_string()),
        }
    }

    fn to_owned(self) -> ChannelVersion {
        match self {
            VersionRef::Str(s) => ChannelVersion::Str(s.to_owned()),
            VersionRef::Int(i) => ChannelVersion::Int(i),
            VersionRef::Float(f) => ChannelVersion::Float(f),
        }
    }
}

/// The (channel, version) entries of a packed buffer, in order.
#[derive(Debug, Clone)]
pub(in crate::memory) struct VersionsIter<'a>(&'a [u8]);

impl<'a> Iterator for VersionsIter<'a> {
    type Item = (&'a str, VersionRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, rest) = self.0.split_first()?;
        let (ch, rest) = take_str(rest)?;
        let (ver, rest) = match kind {
            STR => {
                let (s, rest) = take_str(rest)?;
                (VersionRef::Str(s), rest)
            }
            INT => {
                let (b, rest) = rest.split_first_chunk::<8>()?;
                (VersionRef::Int(i64::from_le_bytes(*b)), rest)
            }
            _ => {
                let (b, rest) = rest.split_first_chunk::<8>()?;
                (VersionRef::Float(f64::from_bits(u64::from_le_bytes(*b))), rest)
            }
        };
        self.0 = rest;
        Some((ch, ver))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_metadata_is_the_encoding_of_its_value() {
        let long = "k".repeat(300);
        for n in [0usize, 1, 15, 16, 40] {
            let mut m = IndexMap::new();
            for i in 0..n {
                let key = if i == 3 { long.clone() } else { format!("key{i}") };
                m.insert(key, Value::Int(i as i64));
            }
            let m = CheckpointMetadata(m.into());
            let want = msgpack::encode(&m.to_value()).unwrap();
            let got = pack_metadata(&m, want.len()).unwrap();
            assert_eq!(&*got, &want[..], "{n} entries");
            assert_eq!(
                CheckpointMetadata::from_value(&msgpack::decode(&got).unwrap()).unwrap(),
                m
            );
        }
    }

    #[test]
    fn packed_versions_read_back_in_order() {
        let mut v = IndexMap::new();
        v.insert(
            "b".to_owned(),
            ChannelVersion::Str("00000000000000000000000000000002.0.5".into()),
        );
        v.insert(String::new(), ChannelVersion::Int(-7));
        v.insert("é".to_owned(), ChannelVersion::Float(1.5));
        let v: ChannelVersions = v.into();
        let packed = Versions::pack(&v).unwrap();
        let back: Vec<(String, ChannelVersion)> = packed.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        let want: Vec<(String, ChannelVersion)> = v.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(back, want);
        let keys: Vec<Cow<'_, str>> = packed.iter().map(|(_, v)| v.key()).collect();
        let want_keys: Vec<Cow<'_, str>> = v.values().map(super::super::version_key).collect();
        assert_eq!(keys, want_keys);
    }
}
