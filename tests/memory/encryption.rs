//! Encryption at rest through a saver and the key from the environment.
//! The Python peer is in `tests/python/encryption.rs`.

use std::sync::Arc;

use bytes::Bytes;
use checkpointer::serde::{AesEax, EncryptedSerializer, Serializer, TypedBytes};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, EncryptionError, Error, InMemorySaver, Value,
};
use parking_lot::Mutex;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

/// Records every payload the saver stores through the serializer it wraps.
#[derive(Debug)]
struct Recording<S> {
    inner: S,
    written: Mutex<Vec<TypedBytes>>,
}

impl<S: Serializer> Serializer for Recording<S> {
    fn dumps_typed(&self, value: &Value) -> checkpointer::Result<TypedBytes> {
        let typed = self.inner.dumps_typed(value)?;
        self.written.lock().push(typed.clone());
        Ok(typed)
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> checkpointer::Result<Value> {
        self.inner.loads_typed(tag, data)
    }

    fn encrypts(&self) -> bool {
        self.inner.encrypts()
    }
}

/// The only test of this binary touching `LANGGRAPH_AES_KEY`, so no other
/// test reads the environment while it changes.
#[test]
#[allow(unsafe_code)] // SAFETY (each `set_var`/`remove_var`): no other test of this binary reads or writes the environment
fn key_from_environment_variable() {
    unsafe { std::env::remove_var("LANGGRAPH_AES_KEY") };
    assert!(matches!(
        EncryptedSerializer::from_env(),
        Err(Error::Encryption(EncryptionError::KeyNotSet {
            var: "LANGGRAPH_AES_KEY"
        }))
    ));
    for bad in ["", "short", "0123456789abcdef0", "0123456789abcdef0123456789abcdef!"] {
        unsafe { std::env::set_var("LANGGRAPH_AES_KEY", bad) };
        match EncryptedSerializer::from_env() {
            Err(Error::Encryption(EncryptionError::InvalidKeyLength { len })) => assert_eq!(len, bad.len()),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    // The length is counted in UTF-8 bytes, as Python encodes the string:
    // 8 two-byte characters make a 16-byte key.
    unsafe { std::env::set_var("LANGGRAPH_AES_KEY", "éééééééé") };
    assert_eq!(AesEax::from_env().unwrap().key_bits(), 128);
    unsafe { std::env::set_var("LANGGRAPH_AES_KEY", std::str::from_utf8(KEY).unwrap()) };
    let from_env = EncryptedSerializer::from_env().unwrap();
    unsafe { std::env::remove_var("LANGGRAPH_AES_KEY") };
    let from_bytes = EncryptedSerializer::from_key(KEY).unwrap();
    let typed = from_env.dumps_typed(&Value::from("x")).unwrap();
    assert_eq!(
        from_bytes.loads_typed(&typed.tag, &typed.data).unwrap(),
        Value::from("x")
    );
}

fn secret_checkpoint() -> (Checkpoint, ChannelVersions) {
    let mut cp = Checkpoint::new(0);
    cp.channel_values
        .insert("password".into(), Value::from("hunter2-plaintext"));
    cp.channel_values
        .insert("blob".into(), Value::Bin(Bytes::from_static(b"hunter2-bytes")));
    cp.channel_values.insert("none".into(), Value::Nil);
    let mut versions = ChannelVersions::new();
    for ch in ["password", "blob", "none"] {
        versions.insert(ch.into(), ChannelVersion::Int(1));
    }
    cp.channel_versions = versions.clone();
    (cp, versions)
}

/// Every value `InMemorySaver` stores passes through the cipher (tags end in
/// `+aes`, no plaintext byte string survives), and reads give the values back.
#[tokio::test]
async fn in_memory_saver_stores_only_ciphertext() {
    let recording = Arc::new(Recording {
        inner: EncryptedSerializer::from_key(KEY).unwrap(),
        written: Mutex::new(Vec::new()),
    });
    let saver = InMemorySaver::with_serializer(recording.clone());
    assert!(saver.serializer().encrypts(), "wrappers forward encrypts()");
    let (cp, versions) = secret_checkpoint();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let stored = saver
        .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
        .await
        .unwrap();
    saver
        .put_writes(
            &stored,
            &[
                ("password".into(), Value::from("hunter2-write")),
                ("__error__".into(), Value::from("hunter2-error")),
            ],
            "task",
            "",
        )
        .await
        .unwrap();

    let written = recording.written.lock().clone();
    assert_eq!(written.len(), 5, "{written:?}");
    for typed in &written {
        assert!(typed.tag.ends_with("+aes"), "{typed:?}");
        assert!(!typed.data.windows(7).any(|w| w == b"hunter2"), "{typed:?}");
    }
    assert!(written.iter().any(|t| t.tag == "null+aes" && t.data.len() == 32));

    let tuple = saver.get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.channel_values, cp.channel_values);
    let writes: Vec<_> = tuple
        .pending_writes
        .iter()
        .map(|w| (w.channel.as_str(), w.value.clone()))
        .collect();
    assert_eq!(
        writes,
        // sorted by idx: `__error__` has the fixed index -1
        [
            ("__error__", Value::from("hunter2-error")),
            ("password", Value::from("hunter2-write")),
        ]
    );
}

/// A saver whose serializer holds another key cannot read the stored values:
/// the read fails with a typed error instead of yielding garbage.
#[tokio::test]
async fn reading_with_the_wrong_key_fails_typed() {
    let right = EncryptedSerializer::from_key(KEY).unwrap();
    let wrong = EncryptedSerializer::from_key(b"fedcba9876543210").unwrap();
    let typed = right.dumps_typed(&Value::from("hunter2")).unwrap();
    let err = wrong.loads_typed(&typed.tag, &typed.data).unwrap_err();
    assert!(matches!(err, Error::Encryption(EncryptionError::AuthenticationFailed)));
    assert!(!err.to_string().contains("hunter2"));
    assert!(!err.is_retryable());
}

/// `Debug` of a saver holding the encrypting serializer shows no key.
#[test]
fn saver_debug_shows_no_key() {
    let saver = InMemorySaver::with_serializer(Arc::new(EncryptedSerializer::from_key(KEY).unwrap()));
    let text = format!("{saver:?}");
    assert!(text.contains("EncryptedSerializer"), "{text}");
    assert!(text.contains("redacted"), "{text}");
    assert!(!text.contains("0123456789abcdef"), "{text}");
}
