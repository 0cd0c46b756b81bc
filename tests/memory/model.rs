//! The model-based property test with `InMemorySaver`
//! under test: through a serializer wrapper that re-encodes every payload
//! (so stored bytes, not shared values, are compared) and through the
//! encrypting serializer. `PROPTEST_CASES` and `MODEL_MAX_OPS` set the size
//! (default 64 cases of at most 40 operations).

use std::sync::Arc;

use checkpointer::conformance::model::{check_against_oracle, ModelConfig};
use checkpointer::serde::{JsonPlusSerializer, Serializer, TypedBytes};
use checkpointer::{CheckpointSaver, InMemorySaver, Value};

/// Prefixes every tag on write and strips it on read: stored bytes pass
/// through a serializer that is not the oracle's.
#[derive(Debug)]
struct Reencoding;

impl Serializer for Reencoding {
    fn dumps_typed(&self, value: &Value) -> checkpointer::Result<TypedBytes> {
        let inner = JsonPlusSerializer.dumps_typed(value)?;
        Ok(TypedBytes::new(format!("wrapped-{}", inner.tag), inner.data))
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> checkpointer::Result<Value> {
        let tag = tag
            .strip_prefix("wrapped-")
            .ok_or_else(|| checkpointer::Error::serde(format!("unwrapped tag {tag}")))?;
        JsonPlusSerializer.loads_typed(tag, data)
    }
}

#[test]
fn in_memory_with_a_reencoding_serializer_matches_the_oracle() {
    let stats = check_against_oracle(
        || async { Arc::new(InMemorySaver::with_serializer(Arc::new(Reencoding))) as Arc<dyn CheckpointSaver> },
        ModelConfig::default(),
    )
    .unwrap_or_else(|failure| panic!("{failure}"));
    println!(
        "{} cases, {} operations {:?}, left out {:?}",
        stats.cases,
        stats.total_ops(),
        stats.ops,
        stats.skipped_ops
    );
    assert!(stats.total_ops() >= u64::from(stats.cases));
}

#[cfg(feature = "encryption")]
#[test]
fn in_memory_with_encryption_matches_the_oracle() {
    use checkpointer::serde::EncryptedSerializer;
    let stats = check_against_oracle(
        || async {
            let serde = EncryptedSerializer::from_key(b"0123456789abcdef").expect("16-byte key");
            Arc::new(InMemorySaver::with_serializer(Arc::new(serde))) as Arc<dyn CheckpointSaver>
        },
        ModelConfig::default(),
    )
    .unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(stats.skipped, None);
}

/// The same harness on a shared store: one saver for every case, thread and
/// run ids prefixed per case.
#[test]
fn shared_store_mode_isolates_cases() {
    let shared = Arc::new(InMemorySaver::new());
    let stats = check_against_oracle(
        || {
            let saver = shared.clone();
            async move { saver as Arc<dyn CheckpointSaver> }
        },
        ModelConfig::default().cases(16).shared_store(),
    )
    .unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(stats.cases, 16);
    assert!(
        shared.thread_ids().len() > 1,
        "cases left their threads in the shared store"
    );
}
