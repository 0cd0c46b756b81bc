//! The administrative face of an [`InMemorySaver`] opened by `memory:`.

use std::sync::Arc;

use async_trait::async_trait;

use super::InMemorySaver;
use crate::import::{ImportMode, ThreadImport};
use crate::open::{SaverAdmin, StorageSize};
use crate::{CheckpointSaver, Result};

/// A fresh in-memory store.
pub(crate) fn open() -> Arc<dyn SaverAdmin> {
    Arc::new(MemoryAdmin {
        saver: Arc::new(InMemorySaver::new()),
    })
}

#[derive(Debug)]
struct MemoryAdmin {
    saver: Arc<InMemorySaver>,
}

#[async_trait]
impl SaverAdmin for MemoryAdmin {
    fn saver(&self) -> Arc<dyn CheckpointSaver> {
        self.saver.clone()
    }

    fn backend(&self) -> &'static str {
        "memory"
    }

    fn name(&self) -> String {
        "memory:".to_owned()
    }

    fn import_note(&self) -> &'static str {
        "each thread is built aside, then replaces the old one at once"
    }

    async fn identity(&self) -> Result<Option<String>> {
        Ok(None)
    }

    async fn storage_size(&self) -> Result<Option<StorageSize>> {
        Ok(None)
    }

    async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()> {
        self.saver.import_thread(thread, mode).await
    }
}
