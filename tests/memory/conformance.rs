//! The conformance suite against [`InMemorySaver`], the reference backend.

use std::sync::Arc;

use checkpointer::{CheckpointSaver, InMemorySaver};

checkpointer::conformance_tests!(|| async { Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver> });
