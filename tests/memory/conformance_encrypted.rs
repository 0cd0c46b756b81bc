//! The conformance suite against [`InMemorySaver`] storing every value
//! through [`EncryptedSerializer`]: encryption at rest changes nothing a
//! caller can observe (the `empty` marker and `null` values included).

use std::sync::Arc;

use checkpointer::serde::EncryptedSerializer;
use checkpointer::{CheckpointSaver, InMemorySaver};

checkpointer::conformance_tests!(|| async {
    let serde = EncryptedSerializer::from_key(b"0123456789abcdef").expect("a 16-byte key");
    Arc::new(InMemorySaver::with_serializer(Arc::new(serde))) as Arc<dyn CheckpointSaver>
});
