//! The administrative face of a PostgreSQL database opened by
//! `postgres://…`, `postgresql://…` or a `key=value` string.

use std::sync::Arc;

use async_trait::async_trait;

use super::{error_message, parse_connection_string, queries, PostgresSaver};
use crate::import::{ImportMode, ThreadImport};
use crate::open::{admin_names, OpenOptions, SaverAdmin, StorageSize};
use crate::secret::redact;
use crate::space::{refuse_rewrite, ReclaimOptions, ReclaimReport, SpaceUsage};
use crate::{Error, Result};

/// Checks the connection string, without connecting.
///
/// # Errors
/// [`Error::InvalidInput`], every password masked.
pub(crate) fn parse(url: &str) -> Result<()> {
    match parse_connection_string(url) {
        Ok(_) => Ok(()),
        Err(Error::InvalidInput { reason }) => Err(Error::invalid(format!("bad PostgreSQL URL: {reason}"))),
        Err(other) => Err(other),
    }
}

/// Opens the database of `url` as `options` say: creates or migrates the
/// tables when creating, else requires them; lazily, neither (nor connects).
pub(crate) async fn open(url: &str, options: &OpenOptions) -> Result<Arc<dyn SaverAdmin>> {
    parse(url)?;
    let name = redact(url);
    let mut builder = PostgresSaver::builder()
        .url(url)
        .fill_from_parent(options.fill_from_parent);
    if let Some(serializer) = &options.serializer {
        builder = builder.serializer(serializer.clone());
    }
    if let Some(n) = options.max_connections {
        builder = builder.max_connections(n);
    }
    let saver = builder.build()?;
    if options.lazy {
        // reached on first use; `setup` creates the tables
    } else if options.creates() {
        saver.setup().await?;
    } else if saver.migration_version().await?.is_none() {
        return Err(Error::storage(
            "postgres",
            false,
            format!(
                "{name} has no checkpoint tables: it was never set up by LangGraph's PostgresSaver or checkpointer"
            ),
        ));
    }
    Ok(Arc::new(PostgresAdmin {
        saver: Arc::new(saver),
        name,
        read_only: options.reads_only(),
    }))
}

#[derive(Debug)]
struct PostgresAdmin {
    saver: Arc<PostgresSaver>,
    name: String,
    /// Opened read-only: `reclaim_space` (a `VACUUM`) is refused.
    read_only: bool,
}

#[async_trait]
impl SaverAdmin for PostgresAdmin {
    admin_names!("postgres", "each thread is replaced in one transaction");

    async fn setup(&self) -> Result<()> {
        self.saver.setup().await
    }

    async fn identity(&self) -> Result<Option<String>> {
        let failed = |e: &(dyn std::error::Error + 'static)| {
            Error::storage(
                "postgres",
                true,
                format!("cannot read {}: {}", self.name, error_message(e)),
            )
        };
        let client = self.saver.pool().get().await.map_err(|e| failed(&e))?;
        let row = client
            .query_one(queries::DATABASE_IDENTITY, &[])
            .await
            .map_err(|e| failed(&e))?;
        let id: String = row.try_get(0).map_err(|e| failed(&e))?;
        Ok(Some(format!("postgres {id}")))
    }

    async fn storage_size(&self) -> Result<Option<StorageSize>> {
        Ok(Some(StorageSize {
            bytes: self.saver.disk_bytes().await?,
            in_memory: false,
        }))
    }

    async fn space_usage(&self) -> Result<Option<SpaceUsage>> {
        Ok(Some(self.saver.space_usage().await?))
    }

    /// A plain `VACUUM` of each checkpoint table (see [`crate::space`]).
    async fn reclaim_space(&self, options: ReclaimOptions) -> Result<ReclaimReport> {
        refuse_rewrite("postgres", &options)?;
        if self.read_only {
            return Err(Error::Unsupported {
                operation: "reclaim_space",
                implementer: "a PostgreSQL store opened read-only",
            });
        }
        let before = Some(self.saver.space_usage().await?);
        let actions = self.saver.vacuum().await?;
        Ok(ReclaimReport {
            before,
            after: Some(self.saver.space_usage().await?),
            steps: u64::try_from(actions.len()).unwrap_or(u64::MAX),
            actions,
        })
    }

    async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()> {
        self.saver.import_thread(thread, mode).await
    }
}
