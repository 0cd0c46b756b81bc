//! Retention on Redis: skeletons a page per script (16 checkpoints), and
//! each batch one script of cost bounded by the batch (at most 32
//! checkpoints, their writes and values), then its global index entries
//! removed.

use std::collections::HashSet;

use redis::Value as RValue;

use super::backend::Redis;
use super::fence::{fence_args, fenced_status};
use super::keys::{self, field_channel};
use super::queries;
use super::rows::{arr, bad_reply, bytes_of, int_of, split_key};
use crate::engine::{FenceToken, Removed, RetainRows, SkeletonQuery};
use crate::error::Result;
use crate::retention::parse_ts_micros;
use crate::retention::plan::{blob_ref, Batch, Facts, Skeleton};

/// Checkpoints read per skeleton script: a script holds the server's one
/// thread, so a write beside retention waits for at most a short one.
const SKELETON_SCRIPT: usize = 16;

/// The reference of a blob field (its channel and version escaped).
fn field_ref(field: &str) -> u64 {
    blob_ref(field, "")
}

impl RetainRows for Redis {
    /// A batch is one script (about 10 commands a checkpoint): 32 keep it
    /// near a third of a millisecond.
    const MOST_PER_BATCH: usize = 32;

    async fn skeletons(&self, query: SkeletonQuery<'_>) -> Result<Vec<Skeleton>> {
        let (thread, after, limit, mark_key) = (query.thread_id, query.after, query.limit, query.mark_key);
        let mut out = Vec::new();
        if keys::has_nul(&[thread]) {
            return Ok(out);
        }
        let mut from: Vec<u8> = after.map_or_else(Vec::new, |(ns, id)| format!("{ns}\0{id}").into_bytes());
        while out.len() < limit {
            let want = SKELETON_SCRIPT.min(limit - out.len());
            let mut inv = self.on_thread(&queries::SKELETONS, thread, 0);
            inv.arg(from.as_slice()).arg(want);
            let reply: RValue = self.invoke(&inv, "retain", true).await?;
            let mut parts = arr(reply)?.into_iter();
            let examined = int_of(&parts.next().ok_or_else(bad_reply)?)?;
            for item in arr(parts.next().ok_or_else(bad_reply)?)? {
                let mut f = arr(item)?.into_iter();
                let mut next = || f.next().ok_or_else(bad_reply);
                let member = bytes_of(next()?)?;
                let rec = bytes_of(next()?)?;
                let fields = keys::text(&bytes_of(next()?)?, "blob fields")?;
                let flags = bytes_of(next()?)?;
                let writes = int_of(&next()?)?;
                let interrupt = bytes_of(next()?)? == b"1";
                let (ns, id) = split_key(&member)?;
                let (parent, checkpoint, metadata) = self.record(&rec)?;
                let fields: Vec<&str> = fields.split('\n').filter(|f| !f.is_empty()).collect();
                let mut channels = Vec::with_capacity(fields.len());
                for (field, flag) in fields.iter().zip(flags.iter()) {
                    channels.push((field_channel(field.as_bytes())?, *flag == b'1'));
                }
                let versioned = channels.iter().map(|(c, s)| (c.as_str(), *s));
                let inline = checkpoint.channel_values.keys().map(|c| (c.as_str(), true));
                let facts = Facts::new(&metadata, mark_key, versioned.chain(inline));
                out.push(Skeleton {
                    ns,
                    id,
                    parent,
                    ts: parse_ts_micros(&checkpoint.ts),
                    marked: facts.marked,
                    writes: u64::try_from(writes).unwrap_or(0),
                    interrupt,
                    needs: facts.needs,
                    stores: facts.stores,
                    refs: fields.iter().map(|f| field_ref(f)).collect(),
                });
                from = member;
            }
            if usize::try_from(examined).unwrap_or(0) < want {
                break;
            }
        }
        Ok(out)
    }

    async fn remove_batch(&self, thread: &str, batch: &Batch, fence: Option<&FenceToken>) -> Result<Removed> {
        if keys::has_nul(&[thread, &batch.ns]) {
            return Ok(Removed::default());
        }
        // the blob fields of the batch's checkpoints that no survivor names
        let base = self.keys.thread(thread);
        let keys: Vec<Vec<u8>> = batch
            .ids
            .iter()
            .map(|id| format!("{}\0{id}", batch.ns).into_bytes())
            .collect();
        let orphans: HashSet<u64> = batch.orphan_refs.iter().copied().collect();
        let mut dead: Vec<String> = Vec::new();
        if !orphans.is_empty() {
            let lists: Vec<Option<Vec<u8>>> = self
                .query(redis::cmd("HMGET").arg(format!("{base}:cf")).arg(&keys), "retain", true)
                .await?;
            let mut seen = HashSet::new();
            for list in lists.into_iter().flatten() {
                let list = keys::text(&list, "blob fields")?;
                for f in list.split('\n').filter(|f| !f.is_empty()) {
                    if orphans.contains(&field_ref(f)) && seen.insert(f.to_owned()) {
                        dead.push(f.to_owned());
                    }
                }
            }
        }
        let script = match fence {
            None => &queries::RETAIN,
            Some(_) => &queries::FENCED_RETAIN,
        };
        let mut inv = self.on_thread(script, thread, 0);
        inv.arg(&batch.ns).arg(&batch.newest).arg(batch.ids.len());
        for id in &batch.ids {
            inv.arg(id);
        }
        inv.arg(batch.clear_parent.len());
        for id in &batch.clear_parent {
            inv.arg(id);
        }
        for f in &dead {
            inv.arg(f);
        }
        if let Some(fence) = fence {
            fence_args(&mut inv, fence);
        }
        let reply: RValue = self.invoke(&inv, "retain", false).await?;
        if let (RValue::Int(status), Some(fence)) = (&reply, fence) {
            fenced_status(*status, thread, fence)?;
            return Err(bad_reply());
        }
        let mut parts = arr(reply)?.into_iter();
        let mut next = || parts.next().ok_or_else(bad_reply);
        let checkpoints = int_of(&next()?)?;
        let writes = int_of(&next()?)?;
        let empty = int_of(&next()?)? == 1;
        let members: Vec<Vec<u8>> = parts.map(bytes_of).collect::<Result<_>>()?;
        if !members.is_empty() || empty {
            self.index_remove(thread, &members, empty, "retain").await?;
        }
        Ok(Removed {
            checkpoints: u64::try_from(checkpoints).unwrap_or(0),
            writes: u64::try_from(writes).unwrap_or(0),
        })
    }
}
