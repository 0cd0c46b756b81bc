//! The global index (every thread; every `(id, thread, namespace)`; the
//! TTL threads' deadlines), in another slot than a thread's keys: entries
//! are added before a thread's script and removed after it, and the sweep
//! drops those of expired threads (`docs/design.md`, *Redis layout*).

use std::collections::{HashMap, HashSet};

use futures::future::try_join_all;
use indexmap::IndexMap;

use super::backend::Redis;
use super::keys::{global_member, global_of_local, lex_range, split_global};
use super::queries;
use super::rows::RawItem;
use crate::error::Result;

/// Global index members removed per command.
const CHUNK: usize = 250;
/// Members of a TTL thread's member set looked at per step of a sweep.
const SWEEP_CHUNK: usize = 256;

/// Milliseconds since the Unix epoch, by this machine's clock.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Redis {
    /// The global index keys of `thread`, `KEYS[2..6]` of the scripts that
    /// update the index themselves (one server only: they are in another
    /// slot).
    pub(super) fn index_keys(&self, thread: &str) -> [String; 5] {
        [
            self.keys.threads(),
            self.keys.checkpoints(),
            self.keys.gens(),
            self.keys.expiry(),
            self.keys.members(thread),
        ]
    }

    /// Adds index entries (before the thread's script: the global index may
    /// name more than is stored, never less).
    pub(super) async fn index_add(&self, thread: &str, members: &[Vec<u8>], op: &str) -> Result<()> {
        // the index keys are one slot: MULTI/EXEC
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("ZADD").arg(self.keys.threads()).arg(0).arg(thread).ignore();
        pipe.cmd("HINCRBY").arg(self.keys.gens()).arg(thread).arg(1).ignore();
        for chunk in members.chunks(CHUNK) {
            let mut cmd = redis::cmd("ZADD");
            cmd.arg(self.keys.checkpoints());
            for m in chunk {
                cmd.arg(0).arg(m.as_slice());
            }
            pipe.add_command(cmd).ignore();
        }
        if let Some(ttl) = self.ttl {
            pipe.cmd("ZADD")
                .arg(self.keys.expiry())
                .arg(now_ms().saturating_add(ttl.millis()))
                .arg(thread)
                .ignore();
            let tm = self.keys.members(thread);
            for chunk in members.chunks(CHUNK) {
                pipe.cmd("SADD").arg(&tm).arg(chunk).ignore();
            }
        }
        self.pipe(&pipe, op).await
    }

    /// Removes index entries (`id \0 ns` members of `thread`) after the
    /// thread's keys stopped naming them, one bounded transaction per chunk;
    /// with `thread_empty`, the thread's own entries last.
    pub(super) async fn index_remove(
        &self,
        thread: &str,
        local: &[Vec<u8>],
        thread_empty: bool,
        op: &str,
    ) -> Result<()> {
        let tm = self.keys.members(thread);
        for chunk in local.chunks(CHUNK) {
            // `id \0 ns` to `id \0 thread \0 ns`
            let global: Vec<Vec<u8>> = chunk.iter().map(|m| global_of_local(thread, m)).collect();
            let mut pipe = redis::pipe();
            pipe.atomic();
            pipe.cmd("ZREM").arg(self.keys.checkpoints()).arg(&global).ignore();
            pipe.cmd("SREM").arg(&tm).arg(&global).ignore();
            self.pipe(&pipe, op).await?;
        }
        if thread_empty {
            let mut pipe = redis::pipe();
            pipe.atomic();
            pipe.cmd("ZREM").arg(self.keys.threads()).arg(thread).ignore();
            pipe.cmd("HDEL").arg(self.keys.gens()).arg(thread).ignore();
            pipe.cmd("ZREM").arg(self.keys.expiry()).arg(thread).ignore();
            // the members' set of a TTL thread may be large: freed in the background
            pipe.cmd("UNLINK").arg(&tm).ignore();
            self.pipe(&pipe, op).await?;
        }
        Ok(())
    }

    /// A page of the global index, newest first, from `max`.
    pub(super) async fn global_page(
        &self,
        max: Vec<u8>,
        size: usize,
        full: bool,
        op: &str,
    ) -> Result<(Vec<RawItem>, Option<Vec<u8>>)> {
        let cmd = lex_range("ZREVRANGEBYLEX", self.keys.checkpoints(), max, "-", size);
        let members: Vec<Vec<u8>> = self.query(&cmd, op, true).await?;
        let next = (members.len() >= size).then(|| members.last().cloned()).flatten();
        // per thread, in order of first appearance
        let mut order: Vec<(String, String, String)> = Vec::with_capacity(members.len());
        let mut by_thread: IndexMap<String, Vec<(String, String)>> = IndexMap::new();
        for m in &members {
            let (thread, ns, id) = split_global(m)?;
            by_thread
                .entry(thread.clone())
                .or_default()
                .push((ns.clone(), id.clone()));
            order.push((thread, ns, id));
        }
        let mut found: HashMap<(String, String, String), RawItem> = HashMap::new();
        // one script per thread, all sent at once: they share the pipeline of
        // the multiplexed connection (on a cluster, the nodes work in parallel)
        let fetched = try_join_all(
            by_thread
                .iter()
                .map(|(thread, ids)| self.fetch_ids(thread, ids, full, op)),
        )
        .await?;
        for item in fetched.into_iter().flatten() {
            found.insert((item.thread.clone(), item.ns.clone(), item.id.clone()), item);
        }
        // entries whose checkpoint is gone (a put that failed after its
        // index entry, a delete that failed before removing it) are skipped
        let rows = order.into_iter().filter_map(|k| found.remove(&k)).collect();
        Ok((rows, next))
    }
}

/// What a sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SweepReport {
    /// Threads found expired whose index entries were removed.
    pub removed: usize,
    /// Threads past the deadline the index had, found alive (a read
    /// renewed them, or a saver without a TTL wrote them): their deadline in
    /// the index was corrected, nothing removed.
    pub renewed: usize,
}

impl Redis {
    /// One sweep of the expiry index: threads the index believes expired
    /// (at most `limit`), each checked on its own slot, then its entries
    /// removed on the index slot unless a write came meanwhile.
    pub(crate) async fn sweep(&self, limit: usize) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        let now = now_ms();
        let mut cmd = redis::cmd("ZRANGEBYSCORE");
        cmd.arg(self.keys.expiry())
            .arg("-inf")
            .arg(now)
            .arg("LIMIT")
            .arg(0)
            .arg(limit.max(1));
        let due: Vec<String> = self.query(&cmd, "sweep", true).await?;
        for thread in due {
            let generation: Option<String> = self
                .query(redis::cmd("HGET").arg(self.keys.gens()).arg(&thread), "sweep", true)
                .await?;
            let pttl: i64 = self
                .query(
                    redis::cmd("PTTL").arg(format!("{}:ns", self.keys.thread(&thread))),
                    "sweep",
                    true,
                )
                .await?;
            let what = match pttl {
                -2 => "gone".to_owned(),
                -1 => "persist".to_owned(),
                ms => now_ms().saturating_add(u64::try_from(ms).unwrap_or(0)).to_string(),
            };
            // the members naming checkpoints the thread no longer holds
            // (all of them when it is gone; a thread reborn without a TTL
            // may hold some again), removed a chunk at a time while no write
            // of the thread bumps its generation
            let generation = generation.unwrap_or_default();
            let tm = self.keys.members(&thread);
            let mut cursor = "0".to_owned();
            let mut moved = false;
            loop {
                let (next, chunk): (String, Vec<Vec<u8>>) = self
                    .query(
                        redis::cmd("SSCAN").arg(&tm).arg(&cursor).arg("COUNT").arg(SWEEP_CHUNK),
                        "sweep",
                        true,
                    )
                    .await?;
                let mut dead = chunk;
                if pttl != -2 && !dead.is_empty() {
                    let mut asked = Vec::with_capacity(dead.len());
                    for m in &dead {
                        let (_, ns, id) = split_global(m)?;
                        asked.push((ns, id));
                    }
                    let alive: HashSet<Vec<u8>> = self
                        .fetch_ids(&thread, &asked, false, "sweep")
                        .await?
                        .into_iter()
                        .map(|item| global_member(&thread, &item.ns, &item.id))
                        .collect();
                    dead.retain(|m| !alive.contains(m));
                }
                if !dead.is_empty() {
                    let mut inv = queries::SWEEP.prepare_invoke();
                    inv.key(self.keys.expiry())
                        .key(self.keys.checkpoints())
                        .key(self.keys.threads())
                        .key(self.keys.gens())
                        .key(&tm)
                        .arg(&thread)
                        .arg(&generation)
                        .arg("members")
                        .arg(&dead);
                    let applied: i64 = self.invoke(&inv, "sweep", false).await?;
                    if applied == 0 {
                        moved = true;
                        break;
                    }
                }
                if next == "0" {
                    break;
                }
                cursor = next;
            }
            if moved {
                continue; // a write came: the thread is looked at again later
            }
            let mut inv = queries::SWEEP.prepare_invoke();
            inv.key(self.keys.expiry())
                .key(self.keys.checkpoints())
                .key(self.keys.threads())
                .key(self.keys.gens())
                .key(self.keys.members(&thread))
                .arg(&thread)
                .arg(&generation)
                .arg(&what);
            let applied: i64 = self.invoke(&inv, "sweep", false).await?;
            if applied == 1 {
                if what == "gone" {
                    report.removed += 1;
                } else {
                    report.renewed += 1;
                }
            }
        }
        Ok(report)
    }
}
