//! The administrative face of an [`InMemorySaver`] opened by `memory:`.

use std::sync::Arc;

use async_trait::async_trait;

use super::InMemorySaver;
use crate::import::{ImportMode, ThreadImport};
use crate::open::{admin_names, OpenOptions, SaverAdmin, StorageSize};
use crate::Result;

/// A fresh in-memory store, with the options' serializer.
pub(crate) fn open(options: &OpenOptions) -> Arc<dyn SaverAdmin> {
    let saver = match &options.serializer {
        Some(serializer) => InMemorySaver::with_serializer(serializer.clone()),
        None => InMemorySaver::new(),
    };
    Arc::new(MemoryAdmin {
        saver: Arc::new(saver),
        name: "memory:".to_owned(),
    })
}

#[derive(Debug)]
struct MemoryAdmin {
    saver: Arc<InMemorySaver>,
    name: String,
}

#[async_trait]
impl SaverAdmin for MemoryAdmin {
    admin_names!(
        "memory",
        "each thread is built aside, then replaces the old one at once"
    );

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
