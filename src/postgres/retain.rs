//! Retention on PostgreSQL: skeletons a page per query, and each batch one
//! transaction under the thread's exclusive advisory lock (the lock `put`
//! takes shared), so no `put` can name a value while it is collected.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_postgres::types::Type;

use super::backend::{has_nul, write_call};
use super::conn::{query_tx, read_retrying, JsonbText, Pg};
use super::error::DbError;
use super::lease::check_lease;
use super::rows::get;
use super::{jsonb, queries};
use crate::checkpoint::CheckpointMetadata;
use crate::engine::{FenceToken, Removed, RetainRows, SkeletonQuery};
use crate::error::Result;
use crate::retention::parse_ts_micros;
use crate::retention::plan::{blob_ref, Batch, Facts, Skeleton};

impl RetainRows for Pg {
    async fn skeletons(&self, query: SkeletonQuery<'_>) -> Result<Vec<Skeleton>> {
        self.timed("retain", None, async {
            read_retrying!(self, "retain", self.skeletons_once(query))
        })
        .await
    }

    async fn remove_batch(&self, thread_id: &str, batch: &Batch, fence: Option<&FenceToken>) -> Result<Removed> {
        write_call!(self, "retain", |sent| self
            .remove_batch_once(thread_id, batch, &sent, fence)
            .await)
    }
}

impl Pg {
    async fn skeletons_once(&self, query: SkeletonQuery<'_>) -> Result<Vec<Skeleton>, DbError> {
        let (thread_id, mark_key) = (query.thread_id, query.mark_key);
        if has_nul(&[thread_id]) {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        let (sql, ns, id, limit) = query.statement(queries::SKELETONS_FIRST, queries::SKELETONS_AFTER);
        // the server estimates 100 channels per checkpoint, prices the page
        // above `jit_above_cost` and compiles it (about 18 ms a page, more
        // than the query): not for this transaction
        let tx = client.transaction().await?;
        tx.batch_execute(queries::NO_JIT).await?;
        let rows = query_tx(
            &tx,
            self.inner.mode,
            sql,
            &[
                (&thread_id, Type::TEXT),
                (&ns, Type::TEXT),
                (&id, Type::TEXT),
                (&limit, Type::INT8),
            ],
        )
        .await?;
        tx.commit().await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let metadata: JsonbText = get(row, 4)?;
            let metadata = CheckpointMetadata::from_value(&jsonb::from_json(&metadata.0)?)?;
            let channels: Vec<String> = get(row, 5)?;
            let versions: Vec<String> = get(row, 6)?;
            let stored: Vec<bool> = get(row, 7)?;
            let inline: Vec<String> = get(row, 8)?;
            let versioned = channels.iter().map(String::as_str).zip(stored.iter().copied());
            let facts = Facts::new(
                &metadata,
                mark_key,
                versioned.chain(inline.iter().map(|c| (c.as_str(), true))),
            );
            let ts: Option<String> = get(row, 3)?;
            let writes: i64 = get(row, 9)?;
            out.push(Skeleton {
                ns: get(row, 0)?,
                id: get(row, 1)?,
                parent: get::<Option<String>>(row, 2)?.filter(|p| !p.is_empty()),
                ts: ts.as_deref().and_then(parse_ts_micros),
                marked: facts.marked,
                writes: u64::try_from(writes).unwrap_or(0),
                interrupt: get(row, 10)?,
                needs: facts.needs,
                stores: facts.stores,
                refs: channels.iter().zip(&versions).map(|(c, v)| blob_ref(c, v)).collect(),
            });
        }
        Ok(out)
    }

    async fn remove_batch_once(
        &self,
        thread_id: &str,
        batch: &Batch,
        sent: &AtomicBool,
        fence: Option<&FenceToken>,
    ) -> Result<Removed, DbError> {
        if has_nul(&[thread_id, &batch.ns]) {
            return Ok(Removed::default());
        }
        let mode = self.inner.mode;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // its commit need not wait for the WAL flush that the puts beside it
        // wait for: a crash can undo the batch whole (the next run removes it
        // again), never half of it
        tx.batch_execute(queries::NO_SYNC_COMMIT).await?;
        check_lease(&tx, mode, thread_id, fence).await?;
        query_tx(&tx, mode, queries::LOCK_THREAD, &[(&thread_id, Type::TEXT)]).await?;
        let rows = query_tx(
            &tx,
            mode,
            queries::RETAIN_DELETE,
            &[
                (&thread_id, Type::TEXT),
                (&batch.ns, Type::TEXT),
                (&batch.ids, Type::TEXT_ARRAY),
                (&batch.clear_parent, Type::TEXT_ARRAY),
            ],
        )
        .await?;
        let mut removed = Removed::default();
        let (mut dead_ch, mut dead_ver) = (Vec::new(), Vec::new());
        if let Some(row) = rows.first() {
            removed.checkpoints = u64::try_from(get::<i64>(row, 0)?).unwrap_or(0);
            removed.writes = u64::try_from(get::<i64>(row, 1)?).unwrap_or(0);
            let orphans: HashSet<u64> = batch.orphan_refs.iter().copied().collect();
            let channels: Vec<String> = get(row, 2)?;
            let versions: Vec<String> = get(row, 3)?;
            let mut seen = HashSet::new();
            for (ch, ver) in channels.into_iter().zip(versions) {
                if orphans.contains(&blob_ref(&ch, &ver)) && seen.insert((ch.clone(), ver.clone())) {
                    dead_ch.push(ch);
                    dead_ver.push(ver);
                }
            }
        }
        if !dead_ch.is_empty() {
            // values named by checkpoints put since the scan stay
            let fresh = query_tx(
                &tx,
                mode,
                queries::RETAIN_FRESH_NAMES,
                &[
                    (&thread_id, Type::TEXT),
                    (&batch.ns, Type::TEXT),
                    (&batch.newest, Type::TEXT),
                ],
            )
            .await?;
            let mut named = HashSet::new();
            for row in &fresh {
                named.insert((get::<String>(row, 0)?, get::<String>(row, 1)?));
            }
            let (mut ch, mut ver) = (Vec::new(), Vec::new());
            for (c, v) in dead_ch.into_iter().zip(dead_ver) {
                if !named.contains(&(c.clone(), v.clone())) {
                    ch.push(c);
                    ver.push(v);
                }
            }
            if !ch.is_empty() {
                query_tx(
                    &tx,
                    mode,
                    queries::RETAIN_DELETE_BLOBS,
                    &[
                        (&thread_id, Type::TEXT),
                        (&batch.ns, Type::TEXT),
                        (&ch, Type::TEXT_ARRAY),
                        (&ver, Type::TEXT_ARRAY),
                    ],
                )
                .await?;
            }
        }
        sent.store(true, Ordering::SeqCst);
        tx.commit().await?;
        Ok(removed)
    }
}
