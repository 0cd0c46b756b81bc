//! Encoded I/O (`checkpointer::encoded::EncodedSaver`) on every saver
//! (InMemorySaver, SQLite, PostgreSQL, Redis): a checkpoint and writes handed
//! over as serializer bytes read back as what `put` and `put_writes` store,
//! decoded or as bytes, by `get` and `list`; whatever `put` or `put_writes`
//! refuses is refused here with the same typed error and nothing stored.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]

use crate::harness;
use crate::postgres_support;
use crate::redis_support;

use checkpointer::encoded::{EncodedSaver, EncodedTuple};
use checkpointer::postgres::StatementMode;
use checkpointer::serde::{msgpack, JsonPlusSerializer, Serializer, TypedBytes};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::CheckpointSaver;
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Error,
    InMemorySaver, ListOptions, PendingWrite, Value,
};
use futures::StreamExt;

fn dumps(value: &Value) -> TypedBytes {
    JsonPlusSerializer.dumps_typed(value).unwrap()
}

fn loads(typed: &TypedBytes) -> Value {
    JsonPlusSerializer.loads_typed(&typed.tag, &typed.data).unwrap()
}

/// A payload read back: sealed ones opened by `serde`, plaintext ones by
/// the serializer that made them.
fn loads_with(serde: &dyn Serializer, typed: &TypedBytes) -> Value {
    if typed.tag.contains('+') {
        return serde.loads_typed(&typed.tag, &typed.data).unwrap();
    }
    loads(typed)
}

/// A value nested `levels` arrays deep.
fn nested(levels: usize) -> Value {
    (0..levels).fold(Value::Int(0), |v, _| Value::Array(vec![v].into()))
}

/// msgpack of [`nested`], written by hand: the encoder refuses it.
fn nested_bytes(levels: usize) -> Vec<u8> {
    let mut out = vec![0x91; levels];
    out.push(0x00);
    out
}

/// msgpack of `checkpoint` with `bytes` in place of the value of channel
/// `a`, whose value is the string `"@"`.
fn splice(checkpoint: &Checkpoint, bytes: &[u8]) -> TypedBytes {
    let whole = msgpack::encode(&checkpoint.to_value(true)).unwrap();
    let marker = msgpack::encode(&Value::from("@")).unwrap();
    let at = whole.windows(marker.len()).position(|w| w == marker).unwrap();
    let mut out = whole[..at].to_vec();
    out.extend_from_slice(bytes);
    out.extend_from_slice(&whole[at + marker.len()..]);
    TypedBytes::new("msgpack", out)
}

type Write = (String, String, Value);

/// The checkpoint, metadata and writes (task, channel, value) of an encoded
/// tuple, decoded.
fn decode(t: &EncodedTuple, serde: &dyn Serializer) -> (Checkpoint, CheckpointMetadata, Vec<Write>) {
    let checkpoint = Checkpoint::from_value(&loads_with(serde, &t.checkpoint)).unwrap();
    let metadata = CheckpointMetadata::from_value(&loads(&t.metadata)).unwrap();
    let writes = t
        .writes
        .iter()
        .map(|w| (w.task_id.clone(), w.channel.clone(), loads_with(serde, &w.value)))
        .collect();
    (checkpoint, metadata, writes)
}

fn triples(writes: &[PendingWrite]) -> Vec<Write> {
    writes
        .iter()
        .map(|w| (w.task_id.clone(), w.channel.clone(), w.value.clone()))
        .collect()
}

/// `saver` stores with `serde` (a payload it seals is opened with it).
async fn check(saver: &dyn EncodedSaver, serde: &dyn Serializer) {
    let id = format!("enc-{:016x}", rand::random::<u64>());
    let mut cp = Checkpoint::new(0);
    let values = [
        ("a", Value::from("text")),
        ("b", Value::Map(vec![(Value::from("k"), Value::Int(1))].into())),
        ("c", Value::Bin(bytes::Bytes::from_static(b"\x00\x01"))),
    ];
    for (i, (channel, value)) in values.iter().enumerate() {
        cp.channel_values.insert((*channel).into(), value.clone());
        cp.channel_versions
            .insert((*channel).into(), ChannelVersion::Str(format!("{:032}.0.5", i + 1)));
    }
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    meta.insert("user", "ada");
    let config = CheckpointConfig::new(&id);
    let given = dumps(&cp.to_value(true));
    let stored = saver
        .put_encoded(&config, &cp.id, given.clone(), &meta, &cp.channel_versions)
        .await
        .unwrap();
    assert_eq!(stored.checkpoint_id.as_deref(), Some(cp.id.as_str()));
    let writes = vec![
        ("a".to_owned(), dumps(&Value::from("w1"))),
        ("b".to_owned(), dumps(&Value::Nil)),
        ("__interrupt__".to_owned(), dumps(&Value::Int(1))),
        ("__interrupt__".to_owned(), dumps(&Value::Int(2))),
    ];
    saver
        .put_writes_encoded(&stored, writes.clone(), "task", "p")
        .await
        .unwrap();

    // the same checkpoint and writes through put and put_writes, on a twin
    let twin = CheckpointConfig::new(format!("{id}-twin"));
    let twin_stored = saver.put(&twin, &cp, &meta, &cp.channel_versions).await.unwrap();
    let plain = [
        ("a".to_owned(), Value::from("w1")),
        ("b".to_owned(), Value::Nil),
        ("__interrupt__".to_owned(), Value::Int(1)),
        ("__interrupt__".to_owned(), Value::Int(2)),
    ];
    saver.put_writes(&twin_stored, &plain, "task", "p").await.unwrap();
    let want = saver.get_tuple(&twin_stored).await.unwrap().unwrap();

    let got = saver.get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(got.checkpoint, cp);
    assert_eq!(got.metadata, meta);
    assert_eq!(got.pending_writes, want.pending_writes);
    assert_eq!(
        got.pending_writes
            .iter()
            .filter(|w| w.channel == "__interrupt__")
            .count(),
        1,
        "a special channel written twice in one call is kept once"
    );

    let encoded = saver.get_tuple_encoded(&config).await.unwrap().unwrap();
    assert_eq!(encoded.thread_id, id);
    assert_eq!(encoded.checkpoint_ns, "");
    assert_eq!(encoded.checkpoint_id, cp.id);
    assert_eq!(encoded.parent_checkpoint_id, None);
    assert_eq!(
        decode(&encoded, serde),
        (cp.clone(), meta.clone(), triples(&want.pending_writes))
    );
    // the bytes given, unless sealed (the channel names have one length:
    // PostgreSQL's JSONB keeps such keys in order), and what `get_tuple`
    // reads, encoded
    if !encoded.checkpoint.tag.contains('+') {
        assert_eq!(encoded.checkpoint, given);
        assert_eq!(encoded.checkpoint, dumps(&got.checkpoint.to_value(true)));
    }
    for read in encoded.writes.iter().filter(|w| w.channel != "__interrupt__") {
        let (_, given) = writes.iter().find(|(ch, _)| *ch == read.channel).unwrap();
        if read.value.tag.contains('+') {
            assert_eq!(read.value.tag, format!("{}+aes", given.tag));
        } else {
            assert_eq!(&read.value, given, "{}", read.channel);
        }
    }
    let twin_encoded = saver.get_tuple_encoded(&twin_stored).await.unwrap().unwrap();
    if !twin_encoded.checkpoint.tag.contains('+') {
        assert_eq!(twin_encoded.checkpoint, dumps(&want.checkpoint.to_value(true)));
    }
    let listed: Vec<EncodedTuple> = saver
        .list_encoded(Some(config.clone()), ListOptions::default())
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(listed, std::slice::from_ref(&encoded));
    // a metadata filter, applied or not by the store, gives the same rows
    let mut options = ListOptions::default();
    options.filter.insert("user".into(), Value::from("ada"));
    let filtered: Vec<EncodedTuple> = saver
        .list_encoded(Some(config.clone()), options.clone())
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(
        filtered.iter().map(|t| decode(t, serde)).collect::<Vec<_>>(),
        [decode(&encoded, serde)]
    );
    // and the same bytes: a store that filters after reading hands its
    // matching rows out as an unfiltered listing does (sealed payloads
    // sealed), not decoded and encoded again
    assert_eq!(filtered, std::slice::from_ref(&encoded));
    options.filter.insert("user".into(), Value::from("bob"));
    assert_eq!(saver.list_encoded(Some(config.clone()), options).count().await, 0);
    assert!(saver
        .get_tuple_encoded(&CheckpointConfig::new(format!("{id}-nobody")))
        .await
        .unwrap()
        .is_none());

    // refusals: the error put and put_writes give, and nothing stored
    let other = CheckpointConfig::new(format!("{id}-refused"));
    let deep = checkpointer::limits::MAX_NESTING + 1;
    let mut too_deep = Checkpoint::new(0);
    too_deep.channel_values.insert("a".into(), nested(deep));
    too_deep.channel_versions.insert("a".into(), ChannelVersion::Int(1));
    let none = ChannelVersions::default();
    let by_put = saver.put(&other, &too_deep, &meta, &none).await;
    let mut marked = too_deep.clone();
    marked.channel_values.insert("a".into(), Value::from("@"));
    let by_bytes = saver
        .put_encoded(&other, &too_deep.id, splice(&marked, &nested_bytes(deep)), &meta, &none)
        .await;
    assert!(matches!(by_put, Err(Error::Serde { .. })), "{by_put:?}");
    assert!(matches!(by_bytes, Err(Error::Serde { .. })), "{by_bytes:?}");
    let by_put = saver
        .put(
            &other,
            &Checkpoint {
                id: String::new(),
                ..cp.clone()
            },
            &meta,
            &none,
        )
        .await;
    let by_bytes = saver
        .put_encoded(&other, "", dumps(&cp.to_value(true)), &meta, &none)
        .await;
    assert!(matches!(by_put, Err(Error::InvalidInput { .. })), "{by_put:?}");
    assert!(matches!(by_bytes, Err(Error::InvalidInput { .. })), "{by_bytes:?}");
    let mut deep_meta = meta.clone();
    deep_meta.insert("deep", nested(deep));
    let by_put = saver.put(&other, &cp, &deep_meta, &none).await;
    let by_bytes = saver
        .put_encoded(&other, &cp.id, dumps(&cp.to_value(true)), &deep_meta, &none)
        .await;
    assert!(matches!(by_put, Err(Error::Serde { .. })), "{by_put:?}");
    assert!(matches!(by_bytes, Err(Error::Serde { .. })), "{by_bytes:?}");
    let truncated = msgpack::encode(&cp.to_value(true)).unwrap();
    let truncated = TypedBytes::new("msgpack", truncated[..truncated.len() - 1].to_vec());
    let by_bytes = saver.put_encoded(&other, &cp.id, truncated, &meta, &none).await;
    assert!(matches!(by_bytes, Err(Error::Serde { .. })), "{by_bytes:?}");
    assert!(saver.get_tuple(&other).await.unwrap().is_none());

    let at = other.clone().with_checkpoint_id(cp.id.clone());
    let by_writes = saver.put_writes(&at, &[("a".to_owned(), nested(deep))], "t", "").await;
    let by_bytes = saver
        .put_writes_encoded(
            &at,
            vec![("a".to_owned(), TypedBytes::new("msgpack", nested_bytes(deep)))],
            "t",
            "",
        )
        .await;
    assert!(matches!(by_writes, Err(Error::Serde { .. })), "{by_writes:?}");
    assert!(matches!(by_bytes, Err(Error::Serde { .. })), "{by_bytes:?}");
    let by_writes = saver
        .put_writes(&other, &[("a".to_owned(), Value::Int(1))], "t", "")
        .await;
    let by_bytes = saver
        .put_writes_encoded(&other, vec![("a".to_owned(), dumps(&Value::Int(1)))], "t", "")
        .await;
    assert!(matches!(by_writes, Err(Error::InvalidInput { .. })), "{by_writes:?}");
    assert!(matches!(by_bytes, Err(Error::InvalidInput { .. })), "{by_bytes:?}");
    saver.put(&other, &cp, &meta, &cp.channel_versions).await.unwrap();
    assert!(saver.get_tuple(&at).await.unwrap().unwrap().pending_writes.is_empty());
}

async fn memory_encoded_round_trip() {
    check(&InMemorySaver::new(), &JsonPlusSerializer).await;
}

async fn sqlite_encoded_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let saver = SqliteSaver::open(dir.path().join("encoded.sqlite")).await.unwrap();
    check(&saver, &JsonPlusSerializer).await;
}

fn postgres_encoded_round_trip() {
    let Some(db) = postgres_support::shared_database() else {
        return;
    };
    postgres_support::block_on_thread(async move {
        check(
            &postgres_support::saver_on(&db, StatementMode::Prepared, 2),
            &JsonPlusSerializer,
        )
        .await;
    });
}

fn redis_encoded_round_trip() {
    redis_support::block_on_thread(async {
        check(&redis_support::saver().await, &JsonPlusSerializer).await;
    });
}

/// An encrypting saver stores a caller's checkpoint, plaintext or sealed by
/// its serializer, as `put` stores the decoded one: every value sealed,
/// read back as given.
#[cfg(feature = "encryption")]
async fn check_encrypting(saver: &dyn EncodedSaver, serde: &dyn Serializer) {
    check(saver, serde).await;
    let id = format!("enc-sealed-{:016x}", rand::random::<u64>());
    let mut cp = Checkpoint::new(0);
    for (i, (channel, value)) in [
        ("text", Value::from("secret text")),
        ("list", Value::from(vec!["a", "b"])),
        ("bin", Value::Bin(bytes::Bytes::from_static(b"\x00\x01"))),
        ("nil", Value::Nil),
    ]
    .into_iter()
    .enumerate()
    {
        cp.channel_values.insert(channel.into(), value);
        cp.channel_versions
            .insert(channel.into(), ChannelVersion::Int(i as i64 + 1));
    }
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let sealed = serde.dumps_typed(&cp.to_value(true)).unwrap();
    assert!(sealed.tag.contains('+'));
    let config = CheckpointConfig::new(&id);
    let stored = saver
        .put_encoded(&config, &cp.id, sealed, &meta, &cp.channel_versions)
        .await
        .unwrap();
    assert_eq!(saver.get_tuple(&stored).await.unwrap().unwrap().checkpoint, cp);
    let encoded = saver.get_tuple_encoded(&stored).await.unwrap().unwrap();
    assert_eq!(Checkpoint::from_value(&loads(&encoded.checkpoint)).unwrap(), cp);
    // a payload the cipher does not open is refused as `put` refuses it
    let mut forged = serde.dumps_typed(&cp.to_value(true)).unwrap();
    forged.data = bytes::Bytes::from(vec![0; forged.data.len()]);
    let other = CheckpointConfig::new(format!("{id}-forged"));
    let by_bytes = saver
        .put_encoded(&other, &cp.id, forged, &meta, &cp.channel_versions)
        .await;
    assert!(matches!(by_bytes, Err(Error::Encryption(_))), "{by_bytes:?}");
}

#[cfg(feature = "encryption")]
fn cipher() -> std::sync::Arc<dyn Serializer> {
    let key = checkpointer::serde::AesEax::new(&[3; 16]).unwrap();
    std::sync::Arc::new(checkpointer::serde::EncryptedSerializer::new(JsonPlusSerializer, key))
}

/// The memory store hands its sealed writes out as stored (not opened and
/// encoded again), and its checkpoint as `put` stored it.
#[cfg(feature = "encryption")]
async fn memory_encrypting_encoded_round_trip() {
    let serde = cipher();
    let saver = InMemorySaver::with_serializer(serde.clone());
    check_encrypting(&saver, serde.as_ref()).await;
    let cp = Checkpoint::new(0);
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let stored = saver
        .put(
            &CheckpointConfig::new("sealed-writes"),
            &cp,
            &meta,
            &ChannelVersions::default(),
        )
        .await
        .unwrap();
    let given = dumps(&Value::from("a secret write"));
    saver
        .put_writes_encoded(&stored, vec![("w".to_owned(), given.clone())], "task", "")
        .await
        .unwrap();
    let encoded = saver.get_tuple_encoded(&stored).await.unwrap().unwrap();
    let [write] = &encoded.writes[..] else {
        panic!("one write: {:?}", encoded.writes);
    };
    assert_eq!(write.value.tag, "msgpack+aes", "as stored: sealed");
    assert!(!write.value.data.windows(14).any(|w| w == b"a secret write"));
    assert_eq!(loads_with(serde.as_ref(), &write.value), Value::from("a secret write"));
    assert_eq!(encoded.checkpoint, dumps(&cp.to_value(true)));
}

#[cfg(feature = "encryption")]
fn postgres_encrypting_encoded_round_trip() {
    // a database of its own: the shared one is read whole by unencrypted
    // savers (the model test lists every thread), which cannot open these rows
    postgres_support::block_on_thread(async move {
        let Some(db) = postgres_support::fresh_database().await else {
            return;
        };
        let serde = cipher();
        let saver = checkpointer::postgres::PostgresSaver::builder()
            .url(postgres_support::url_of(&db.0))
            .serializer(serde.clone())
            .max_connections(2)
            .open()
            .await
            .unwrap();
        check_encrypting(&saver, serde.as_ref()).await;
    });
}

#[cfg(feature = "encryption")]
fn redis_encrypting_encoded_round_trip() {
    redis_support::block_on_thread(async {
        let serde = cipher();
        let saver = checkpointer::redis::RedisSaver::builder()
            .url(redis_support::url())
            .key_prefix(redis_support::fresh_prefix())
            .serializer(serde.clone())
            .open()
            .await
            .unwrap();
        check_encrypting(&saver, serde.as_ref()).await;
    });
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio("encoded::memory_encoded_round_trip", &[], 0, memory_encoded_round_trip),
        harness::tokio("encoded::sqlite_encoded_round_trip", &[], 0, sqlite_encoded_round_trip),
        harness::test(
            "encoded::postgres_encoded_round_trip",
            &[&crate::POSTGRES],
            postgres_encoded_round_trip,
        ),
        harness::test(
            "encoded::redis_encoded_round_trip",
            &[&crate::REDIS],
            redis_encoded_round_trip,
        ),
        #[cfg(feature = "encryption")]
        harness::tokio(
            "encoded::memory_encrypting_encoded_round_trip",
            &[],
            0,
            memory_encrypting_encoded_round_trip,
        ),
        #[cfg(feature = "encryption")]
        harness::test(
            "encoded::postgres_encrypting_encoded_round_trip",
            &[&crate::POSTGRES],
            postgres_encrypting_encoded_round_trip,
        ),
        #[cfg(feature = "encryption")]
        harness::test(
            "encoded::redis_encrypting_encoded_round_trip",
            &[&crate::REDIS],
            redis_encrypting_encoded_round_trip,
        ),
    ]
}
