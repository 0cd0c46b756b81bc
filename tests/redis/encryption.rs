//! Encryption at rest through `RedisSaver`: with a serializer that
//! encrypts, no stored byte holds a value in plaintext; an altered value is
//! an `Error::Encryption`; plaintext written before encryption is refused
//! unless allowed.

use crate::harness;
use crate::redis_support;

use std::sync::Arc;

use checkpointer::redis::RedisSaver;
use checkpointer::serde::{EncryptedSerializer, Serializer};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, EncryptionError, Error, ListOptions, Value,
};

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

async fn saver_on(prefix: &str, serde: EncryptedSerializer) -> RedisSaver {
    RedisSaver::builder()
        .url(redis_support::url())
        .key_prefix(prefix)
        .serializer(Arc::new(serde) as Arc<dyn Serializer>)
        .open()
        .await
        .unwrap()
}

fn encrypted() -> EncryptedSerializer {
    EncryptedSerializer::from_key(KEY).unwrap()
}

async fn put(saver: &RedisSaver, parent: Option<&str>, id: &str) -> CheckpointConfig {
    let mut cp = Checkpoint::new(0);
    cp.id = id.to_owned();
    let mut versions = ChannelVersions::new();
    for (ch, value) in [
        ("secret", Value::from("hunter2-inline")),
        ("n", Value::Int(7)),
        ("none", Value::Nil),
        ("list", Value::from(vec!["hunter2-list"])),
    ] {
        cp.channel_values.insert(ch.into(), value);
        versions.insert(ch.into(), ChannelVersion::Int(1));
    }
    cp.channel_versions = versions.clone();
    let mut config = CheckpointConfig::new("t");
    config.checkpoint_id = parent.map(str::to_owned);
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    meta.insert("note", "hunter2-meta");
    saver.put(&config, &cp, &meta, &versions).await.unwrap()
}

/// Every stored byte under `prefix`: values of strings, hash fields and
/// values, set and sorted-set members.
async fn stored_bytes(prefix: &str) -> Vec<Vec<u8>> {
    let mut c = redis_support::connection().await.unwrap();
    let mut out = Vec::new();
    for key in redis_support::keys_of(prefix).await {
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut c).await.unwrap();
        let parts: Vec<Vec<u8>> = match kind.as_str() {
            "string" => vec![redis::cmd("GET").arg(&key).query_async(&mut c).await.unwrap()],
            "hash" => redis::cmd("HGETALL").arg(&key).query_async(&mut c).await.unwrap(),
            "zset" => redis::cmd("ZRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query_async(&mut c)
                .await
                .unwrap(),
            "set" => redis::cmd("SMEMBERS").arg(&key).query_async(&mut c).await.unwrap(),
            other => panic!("unexpected key type {other}"),
        };
        out.push(key);
        out.extend(parts);
    }
    out
}

async fn nothing_is_stored_in_plaintext() {
    let prefix = redis_support::fresh_prefix();
    let saver = saver_on(&prefix, encrypted()).await;
    let config = put(&saver, None, "1").await;
    saver
        .put_writes(&config, &[("w".into(), Value::from("hunter2-write"))], "task", "")
        .await
        .unwrap();
    let bytes = stored_bytes(&prefix).await;
    assert!(bytes.len() > 10);
    for b in &bytes {
        assert!(!b.windows(7).any(|w| w == b"hunter2"), "{}", String::from_utf8_lossy(b));
    }
    let tuple = saver.get_tuple(&config).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.channel_values["secret"], Value::from("hunter2-inline"));
    assert_eq!(tuple.checkpoint.channel_values["none"], Value::Nil);
    assert_eq!(tuple.metadata.get("note"), Some(&Value::from("hunter2-meta")));
    assert_eq!(tuple.pending_writes[0].value, Value::from("hunter2-write"));
    redis_support::cleanup(&prefix).await;
}

async fn an_altered_value_is_an_encryption_error() {
    let prefix = redis_support::fresh_prefix();
    let saver = saver_on(&prefix, encrypted()).await;
    let config = put(&saver, None, "1").await;
    let child = put(&saver, Some("1"), "2").await;
    let mut c = redis_support::connection().await.unwrap();
    let blobs = format!("{prefix}:v2:{{t}}:bl");
    let fields: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL").arg(&blobs).query_async(&mut c).await.unwrap();
    assert!(!fields.is_empty());
    for (field, mut value) in fields {
        let last = value.len() - 1;
        value[last] ^= 1;
        redis::cmd("HSET")
            .arg(&blobs)
            .arg(field)
            .arg(value)
            .query_async::<()>(&mut c)
            .await
            .unwrap();
    }
    for (what, got) in [
        ("get_tuple", saver.get_tuple(&config).await.map(drop)),
        (
            "list",
            saver
                .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
                .await
                .map(drop),
        ),
        (
            "delta history",
            saver
                .get_delta_channel_history(&child, &["secret".to_owned()])
                .await
                .map(drop),
        ),
    ] {
        assert!(
            matches!(got, Err(Error::Encryption(EncryptionError::AuthenticationFailed))),
            "{what}: {got:?}"
        );
    }
    redis_support::cleanup(&prefix).await;
}

async fn plaintext_is_refused_unless_allowed() {
    let prefix = redis_support::fresh_prefix();
    let plain = redis_support::saver_on(prefix.clone()).await;
    let mut cp = Checkpoint::new(0);
    cp.id = "1".into();
    cp.channel_values.insert("a".into(), Value::from("x"));
    cp.channel_versions.insert("a".into(), ChannelVersion::Int(1));
    let versions = cp.channel_versions.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    plain
        .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
        .await
        .unwrap();
    let strict = saver_on(&prefix, encrypted()).await;
    let got = strict.latest("t").await;
    assert!(
        matches!(got, Err(Error::Encryption(EncryptionError::PlaintextRefused { .. }))),
        "{got:?}"
    );
    let open = saver_on(&prefix, encrypted().allow_plaintext(true)).await;
    let tuple = open.latest("t").await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.channel_values["a"], Value::from("x"));
    redis_support::cleanup(&prefix).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "encryption::nothing_is_stored_in_plaintext",
            &[&crate::REDIS],
            2,
            nothing_is_stored_in_plaintext,
        ),
        harness::tokio(
            "encryption::an_altered_value_is_an_encryption_error",
            &[&crate::REDIS],
            2,
            an_altered_value_is_an_encryption_error,
        ),
        harness::tokio(
            "encryption::plaintext_is_refused_unless_allowed",
            &[&crate::REDIS],
            2,
            plaintext_is_refused_unless_allowed,
        ),
    ]
}
