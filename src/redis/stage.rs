//! Work proportional to a thread, in bounded steps (`docs/design.md`,
//! *Redis layout*, *Bounded steps*): a thread is read a chunk at a time,
//! every chunk with the thread's version (`B:ver`, bumped by every write
//! script), so the chunks are one consistent state when the versions agree;
//! a thread's new contents are written a chunk at a time into staged keys
//! (`B:s:<token>:…`, the thread's hash tag, so one slot) that no reader
//! looks at and that expire by themselves if the writer dies; then one O(1)
//! script ([`queries::SWAP`]) renames them live. The old keys are
//! `UNLINK`ed (freed in the background) except `:all`, renamed to a trash
//! key that the caller reads in chunks to drop the thread's entries from the
//! global index, then deletes (it too expires by itself).
//!
//! No command or script here costs more than one chunk, whatever the size
//! of the thread: the server answers everyone else in between.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use super::backend::Redis;
use super::fence::{fence_args, fenced_status};
use super::keys::{global_of_local, pack, pack_write, refuse_nul, unpack, write_field};
use super::queries::{self, THREAD_KEYS};
use super::rows::EMPTY;
use crate::engine::import::Import;
use crate::engine::FenceToken;
use crate::error::{Error, Result};
use crate::import::ImportMode;
use crate::serde::TypedBytes;

/// Fields asked of one `HSCAN` step (a hint: a small hash answers whole).
const SCAN_COUNT: usize = 128;
/// Items (members, or field/value pairs) per command writing a stage.
const STAGE_CHUNK: usize = 64;
/// Commands per pipeline writing a stage.
const PIPELINE: usize = 64;
/// Global index members per transaction.
const INDEX_CHUNK: usize = 250;
/// How long staged and trash keys live without their writer (ms).
pub(super) const LEASE_MS: u64 = 10 * 60 * 1000;
/// Attempts of an operation whose thread keeps changing under it.
pub(super) const ATTEMPTS: usize = 8;

/// The hashes a thread's contents are read from (the other keys derive
/// from them): indexes into [`THREAD_KEYS`].
pub(super) const CK: usize = 3;
pub(super) const CF: usize = 4;
pub(super) const PAR: usize = 5;
pub(super) const BL: usize = 6;
pub(super) const W: usize = 8;
/// Every hash.
pub(super) const ALL: [usize; 5] = [CK, CF, PAR, BL, W];

/// A thread as its five hashes hold it (raw bytes, nothing decoded):
/// `:ck`, `:cf`, `:par` by `ns \0 id`, `:bl` by `ns \0 blob field`, `:w`
/// by `ns \0 id \0 write field`. `:ns`, `:all`, `:ids` and `:wz` follow
/// from them.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct RawThread {
    pub(super) ck: BTreeMap<Vec<u8>, Vec<u8>>,
    pub(super) cf: BTreeMap<Vec<u8>, Vec<u8>>,
    pub(super) par: BTreeMap<Vec<u8>, Vec<u8>>,
    pub(super) bl: BTreeMap<Vec<u8>, Vec<u8>>,
    pub(super) w: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// A prune plan's kept namespaces: ns → (head, ids kept).
pub(super) type KeptNamespaces = HashMap<Vec<u8>, (Vec<u8>, HashSet<Vec<u8>>)>;

/// A thread's version and one `HSCAN` step (next cursor, fields and values).
type VersionedChunk = (Option<Vec<u8>>, (String, Vec<Vec<u8>>));

/// What `SWAP` checks before it applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode<'a> {
    /// Refuse when the thread holds a checkpoint.
    Create,
    /// Replace whatever the thread holds.
    Replace,
    /// Apply only if the thread is still at this version.
    Guard(&'a [u8]),
}

/// What `SWAP` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Swapped {
    Applied,
    /// The thread holds checkpoints ([`Mode::Create`]).
    Exists,
    /// The thread changed since it was read, or the stage expired: read
    /// again and retry.
    Changed,
}

/// The part of `key` before its first U+0000.
fn ns_of(key: &[u8]) -> &[u8] {
    key.split(|&b| b == 0).next().unwrap_or_default()
}

/// `ns \0 id` of a write field `ns \0 id \0 field`.
fn checkpoint_of_write(key: &[u8]) -> &[u8] {
    let mut zeros = key.iter().enumerate().filter(|&(_, &b)| b == 0).map(|(i, _)| i);
    let _ = zeros.next();
    match zeros.next() {
        Some(at) => &key[..at],
        None => key,
    }
}

/// `ns \0 id` as `id \0 ns`: the member of `:all`.
fn all_member(key: &[u8]) -> Vec<u8> {
    let ns = ns_of(key);
    let id = key.get(ns.len() + 1..).unwrap_or_default();
    let mut out = Vec::with_capacity(key.len());
    out.extend_from_slice(id);
    out.push(0);
    out.extend_from_slice(ns);
    out
}

fn join(ns: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ns.len() + 1 + rest.len());
    out.extend_from_slice(ns);
    out.push(0);
    out.extend_from_slice(rest);
    out
}

impl RawThread {
    /// Whether nothing is left.
    pub(super) fn is_empty(&self) -> bool {
        self.ck.is_empty() && self.w.is_empty()
    }

    /// The namespaces holding a checkpoint or a write (`:ns`).
    fn namespaces(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = self.ck.keys().chain(self.w.keys()).map(|k| ns_of(k).to_vec()).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The members of `:all` (`id \0 ns`).
    pub(super) fn all_members(&self) -> HashSet<Vec<u8>> {
        self.ck.keys().map(|k| all_member(k)).collect()
    }

    /// The sizes `SWAP` checks, in the order of [`THREAD_KEYS`].
    fn sizes(&self) -> [usize; 9] {
        let n = self.ck.len();
        [
            self.namespaces().len(),
            n,
            n,
            n,
            self.cf.len(),
            self.par.len(),
            self.bl.len(),
            self.w.len(),
            self.w.len(),
        ]
    }

    /// Drops the checkpoints `drop` (`ns \0 id` each) with their writes,
    /// then the values of the namespaces touched that no remaining
    /// checkpoint names. Returns whether anything went.
    pub(super) fn drop_checkpoints(&mut self, drop: &HashSet<Vec<u8>>) -> bool {
        let before = (self.ck.len(), self.w.len());
        self.ck.retain(|k, _| !drop.contains(k));
        self.w.retain(|k, _| !drop.contains(checkpoint_of_write(k)));
        let changed = before != (self.ck.len(), self.w.len());
        let touched: HashSet<Vec<u8>> = drop.iter().map(|k| ns_of(k).to_vec()).collect();
        self.follow_checkpoints();
        self.collect(&touched);
        changed
    }

    /// Applies a prune plan: `drop` namespaces go whole; in each `keep`
    /// namespace (ns → (head, ids kept)) the checkpoints older than the
    /// head and not kept go, with their writes, and a kept checkpoint whose
    /// parent is gone forgets it. Then the values no remaining checkpoint
    /// of those namespaces names go.
    ///
    /// # Errors
    /// [`Error::Serde`] for a malformed record.
    pub(super) fn prune(&mut self, drop: &HashSet<Vec<u8>>, keep: &KeptNamespaces) -> Result<()> {
        let stays = |ns: &[u8], id: &[u8]| -> bool {
            if drop.contains(ns) {
                return false;
            }
            match keep.get(ns) {
                None => true,
                // the head, the ids kept, and what is newer (with its writes)
                Some((head, ids)) => ids.contains(id) || id >= head.as_slice(),
            }
        };
        self.ck.retain(|k, _| {
            let ns = ns_of(k);
            stays(ns, &k[ns.len() + 1..])
        });
        self.w.retain(|k, _| {
            let cp = checkpoint_of_write(k);
            let ns = ns_of(cp);
            stays(ns, cp.get(ns.len() + 1..).unwrap_or_default())
        });
        self.follow_checkpoints();
        // a kept checkpoint whose parent is gone forgets it
        let orphans: Vec<Vec<u8>> = self
            .par
            .iter()
            .filter(|(k, parent)| keep.contains_key(ns_of(k)) && !self.ck.contains_key(&join(ns_of(k), parent)))
            .map(|(k, _)| k.clone())
            .collect();
        for key in orphans {
            self.par.remove(&key);
            if let Some(rec) = self.ck.get_mut(&key) {
                let parts = unpack(rec, super::rows::RECORD_PARTS)?;
                let mut new: Vec<&[u8]> = vec![b"0", b""];
                new.extend_from_slice(&parts[2..]);
                *rec = pack(&new);
            }
        }
        let touched: HashSet<Vec<u8>> = drop.iter().chain(keep.keys()).cloned().collect();
        self.collect(&touched);
        Ok(())
    }

    /// `:cf` and `:par` entries only for the checkpoints left.
    fn follow_checkpoints(&mut self) {
        let ck = &self.ck;
        self.cf.retain(|k, _| ck.contains_key(k));
        self.par.retain(|k, _| ck.contains_key(k));
    }

    /// Drops the values of the namespaces `touched` no checkpoint names.
    fn collect(&mut self, touched: &HashSet<Vec<u8>>) {
        let mut named: HashSet<Vec<u8>> = HashSet::new();
        for (key, fields) in &self.cf {
            let ns = ns_of(key);
            if touched.contains(ns) {
                for f in fields.split(|&b| b == b'\n').filter(|f| !f.is_empty()) {
                    named.insert(join(ns, f));
                }
            }
        }
        self.bl.retain(|k, _| !touched.contains(ns_of(k)) || named.contains(k));
    }
}

/// A name no other staged or trash key of this process has, nor (with
/// the clock and the process id) another process's.
pub(super) fn token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:x}.{:x}.{:x}",
        nanos,
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The error of an operation whose thread changed under it at every attempt.
pub(super) fn kept_changing(op: &str, thread: &str) -> Error {
    Error::storage(
        "redis",
        true,
        super::error::RedisFailure::new(format!(
            "{op}: thread {thread:?} changed under every one of {ATTEMPTS} attempts; nothing was applied"
        )),
    )
}

impl Redis {
    /// The thread's version (`B:ver`; empty when it has none).
    pub(super) async fn version(&self, thread: &str, op: &str) -> Result<Vec<u8>> {
        let v: Option<Vec<u8>> = self
            .query(
                redis::cmd("GET").arg(format!("{}:ver", self.keys.thread(thread))),
                op,
                true,
            )
            .await?;
        Ok(v.unwrap_or_default())
    }

    /// The hashes `which` of a thread, read a chunk at a time; `None` when
    /// a write came in between (the chunks would not be one state).
    pub(super) async fn read_raw(
        &self,
        thread: &str,
        which: &[usize],
        op: &str,
    ) -> Result<Option<(Vec<u8>, RawThread)>> {
        let base = self.keys.thread(thread);
        let ver_key = format!("{base}:ver");
        let mut raw = RawThread::default();
        let mut seen: Option<Vec<u8>> = None;
        for &k in which {
            let key = format!("{base}{}", THREAD_KEYS[k]);
            let map = match k {
                CK => &mut raw.ck,
                CF => &mut raw.cf,
                PAR => &mut raw.par,
                BL => &mut raw.bl,
                _ => &mut raw.w,
            };
            let mut cursor = "0".to_owned();
            loop {
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .cmd("GET")
                    .arg(&ver_key)
                    .cmd("HSCAN")
                    .arg(&key)
                    .arg(&cursor)
                    .arg("COUNT")
                    .arg(SCAN_COUNT);
                let (ver, (next, items)): VersionedChunk = pipe
                    .query_async(&mut self.conn.clone())
                    .await
                    .map_err(|e| super::error::storage(e, op, true, &self.secrets))?;
                let ver = ver.unwrap_or_default();
                match &seen {
                    Some(v) if *v != ver => return Ok(None),
                    Some(_) => {}
                    None => seen = Some(ver),
                }
                let mut it = items.into_iter();
                while let (Some(f), Some(v)) = (it.next(), it.next()) {
                    map.insert(f, v);
                }
                if next == "0" {
                    break;
                }
                cursor = next;
            }
        }
        Ok(Some((seen.unwrap_or_default(), raw)))
    }

    /// [`Self::read_raw`] until it reads one state.
    ///
    /// # Errors
    /// As [`kept_changing`] after [`ATTEMPTS`] tries.
    pub(super) async fn snapshot(&self, thread: &str, which: &[usize], op: &str) -> Result<(Vec<u8>, RawThread)> {
        for _ in 0..ATTEMPTS {
            if let Some(read) = self.read_raw(thread, which, op).await? {
                return Ok(read);
            }
        }
        Err(kept_changing(op, thread))
    }

    /// Adds the global index entries of `members` (`id \0 ns` each) of
    /// `thread`, a bounded transaction per chunk (before the thread's keys
    /// name them: the index may name more than is stored, never less).
    pub(super) async fn index_add_chunked<'m>(
        &self,
        thread: &str,
        members: impl IntoIterator<Item = &'m Vec<u8>>,
        op: &str,
    ) -> Result<()> {
        let global: Vec<Vec<u8>> = members.into_iter().map(|m| global_of_local(thread, m)).collect();
        if global.is_empty() {
            return self.index_add(thread, &[], op).await;
        }
        for chunk in global.chunks(INDEX_CHUNK) {
            self.index_add(thread, chunk, op).await?;
        }
        Ok(())
    }

    /// Writes `raw` as `thread`'s contents: staged a chunk at a time, then
    /// swapped live by one O(1) script, then the old `:all`'s index entries
    /// that `raw` does not hold dropped a chunk at a time.
    pub(super) async fn write_thread(
        &self,
        thread: &str,
        raw: &RawThread,
        mode: Mode<'_>,
        fence: Option<&FenceToken>,
        op: &str,
    ) -> Result<Swapped> {
        let members = raw.all_members();
        self.index_add_chunked(thread, &members, op).await?;
        let base = self.keys.thread(thread);
        let token = token();
        let stage = format!("{base}:s:{token}");
        let trash = format!("{base}:x:{token}");
        self.stage(&stage, raw, op).await?;
        // the staged keys are the writer's own until the swap; the swap,
        // the one step that changes the thread, checks the lease
        let script = match fence {
            Some(_) => &queries::FENCED_SWAP,
            None => &queries::SWAP,
        };
        let mut inv = self.on_thread(script, thread, self.write_ttl());
        inv.key(&stage).key(&trash);
        let ver = match mode {
            Mode::Guard(v) => v,
            _ => b"",
        };
        inv.arg(match mode {
            Mode::Create => "create",
            Mode::Replace => "replace",
            Mode::Guard(_) => "guard",
        })
        .arg(ver)
        .arg(LEASE_MS);
        for n in raw.sizes() {
            inv.arg(n);
        }
        if let Some(fence) = fence {
            fence_args(&mut inv, fence);
        }
        let reply: Vec<i64> = self.invoke(&inv, op, false).await?;
        let (status, moved, empty) = match reply.as_slice() {
            [s, m, e] => (*s, *m == 1, *e == 1),
            _ => return Err(Error::serde("unexpected reply from Redis")),
        };
        match (status, fence) {
            (1, _) => {}
            (0, _) => return Ok(Swapped::Exists),
            (-3, Some(fence)) => return Err(fence.refused(thread)),
            _ => return Ok(Swapped::Changed),
        }
        self.retire(thread, moved.then_some(trash.as_str()), &members, empty, op)
            .await
            .map_err(|e| super::backend::partly(e, true))?;
        Ok(Swapped::Applied)
    }

    /// The import primitive: the thread's keys built in memory, written into
    /// staged keys and made live by one O(1) script ([`Self::write_thread`]),
    /// which with [`ImportMode::Create`] first checks that the thread holds
    /// no checkpoint; with [`ImportMode::Replace`] the old thread goes in the
    /// same script. Readers and a crash see the thread as it was or whole.
    pub(super) async fn import_thread(&self, import: Import<'_, TypedBytes>) -> Result<()> {
        let (id, fence) = (import.thread_id, import.fence.as_ref());
        refuse_nul(id, "thread_id")?;
        let mut raw = RawThread::default();
        for cp in import.checkpoints {
            let put = cp.put;
            refuse_nul(put.checkpoint_ns, "checkpoint_ns")?;
            refuse_nul(&put.checkpoint.id, "checkpoint id")?;
            let (ns, cid) = (put.checkpoint_ns.as_bytes(), put.checkpoint.id.as_bytes());
            let (record, fields, blobs) =
                self.encode_checkpoint(put.parent_id, put.checkpoint, put.values(), put.metadata, |_| true)?;
            let at = join(ns, cid);
            raw.ck.insert(at.clone(), record);
            raw.cf.insert(at.clone(), fields.join("\n").into_bytes());
            if let Some(p) = put.parent_id {
                raw.par.insert(at, p.as_bytes().to_vec());
            }
            for (field, value) in blobs {
                // one value per (namespace, channel, version): a value wins
                // over `empty`, the first value over a later one
                let slot = join(ns, field.as_bytes());
                let empty = |v: &[u8]| v.get(4..4 + EMPTY.len()) == Some(EMPTY);
                match raw.bl.get_mut(&slot) {
                    Some(old) if empty(old) && !empty(&value) => *old = value,
                    Some(_) => {}
                    None => {
                        raw.bl.insert(slot, value);
                    }
                }
            }
            for w in cp.writes {
                let field = join(&join(ns, cid), write_field(w.task_id, w.idx).as_bytes());
                let value = pack_write(w.task_id, w.task_path, w.channel, &w.value);
                raw.w.insert(field, value);
            }
        }
        let exists = || Error::ThreadExists {
            thread_id: id.to_owned(),
        };
        if raw.is_empty() {
            if import.mode == ImportMode::Create && self.has_checkpoints(id, fence, "import_thread").await? {
                return Err(exists());
            }
            // writes left without a checkpoint (or, replacing, the thread) go
            return self.delete_thread_keys_fenced(id, "import_thread", fence).await;
        }
        let how = match import.mode {
            ImportMode::Create => Mode::Create,
            _ => Mode::Replace,
        };
        match self.write_thread(id, &raw, how, fence, "import_thread").await? {
            Swapped::Applied => Ok(()),
            Swapped::Exists => Err(exists()),
            Swapped::Changed => Err(kept_changing("import_thread", id)),
        }
    }

    /// Writes the staged keys under `stage`, a bounded command at a time,
    /// each key given the lease.
    async fn stage(&self, stage: &str, raw: &RawThread, op: &str) -> Result<()> {
        let name = |k: usize| format!("{stage}{}", THREAD_KEYS[k]);
        let mut cmds: Vec<redis::Cmd> = Vec::new();
        let sets = |cmds: &mut Vec<redis::Cmd>, verb: &str, key: String, items: &mut dyn Iterator<Item = Vec<u8>>| {
            let mut cmd: Option<redis::Cmd> = None;
            let mut n = 0;
            for item in items {
                let c = cmd.get_or_insert_with(|| {
                    let mut c = redis::cmd(verb);
                    c.arg(&key);
                    c
                });
                if verb == "ZADD" {
                    c.arg(0);
                }
                c.arg(item);
                n += 1;
                if n == STAGE_CHUNK {
                    cmds.extend(cmd.take());
                    n = 0;
                }
            }
            cmds.extend(cmd);
        };
        let hash = |cmds: &mut Vec<redis::Cmd>, key: String, map: &BTreeMap<Vec<u8>, Vec<u8>>| {
            for chunk in map.iter().collect::<Vec<_>>().chunks(STAGE_CHUNK) {
                let mut c = redis::cmd("HSET");
                c.arg(&key);
                for (f, v) in chunk {
                    c.arg(f.as_slice()).arg(v.as_slice());
                }
                cmds.push(c);
            }
        };
        sets(&mut cmds, "SADD", name(0), &mut raw.namespaces().into_iter());
        sets(&mut cmds, "ZADD", name(1), &mut raw.ck.keys().map(|k| all_member(k)));
        sets(&mut cmds, "ZADD", name(2), &mut raw.ck.keys().cloned());
        hash(&mut cmds, name(CK), &raw.ck);
        hash(&mut cmds, name(CF), &raw.cf);
        hash(&mut cmds, name(PAR), &raw.par);
        hash(&mut cmds, name(BL), &raw.bl);
        sets(&mut cmds, "ZADD", name(7), &mut raw.w.keys().cloned());
        hash(&mut cmds, name(W), &raw.w);
        for batch in cmds.chunks(PIPELINE) {
            let mut pipe = redis::pipe();
            for c in batch {
                pipe.add_command(c.clone()).ignore();
            }
            for k in 0..THREAD_KEYS.len() {
                pipe.cmd("PEXPIRE").arg(name(k)).arg(LEASE_MS).ignore();
            }
            self.pipe(&pipe, op).await?;
        }
        Ok(())
    }

    /// Drops the index entries of the trash key's members (`id \0 ns`)
    /// that `keep` does not hold, a chunk at a time, then the trash key;
    /// and the thread's own entries when it is `empty`.
    pub(super) async fn retire(
        &self,
        thread: &str,
        trash: Option<&str>,
        keep: &HashSet<Vec<u8>>,
        empty: bool,
        op: &str,
    ) -> Result<()> {
        if let Some(trash) = trash {
            loop {
                let chunk: Vec<Vec<u8>> = self
                    .query(redis::cmd("ZRANGE").arg(trash).arg(0).arg(INDEX_CHUNK - 1), op, false)
                    .await?;
                if chunk.is_empty() {
                    break;
                }
                let gone: Vec<Vec<u8>> = chunk.iter().filter(|m| !keep.contains(*m)).cloned().collect();
                self.index_remove(thread, &gone, false, op).await?;
                let _: i64 = self.query(redis::cmd("ZREM").arg(trash).arg(&chunk), op, false).await?;
                if chunk.len() < INDEX_CHUNK {
                    break;
                }
            }
            let _: i64 = self.query(redis::cmd("UNLINK").arg(trash), op, false).await?;
        }
        if empty {
            self.index_remove(thread, &[], true, op).await?;
        }
        Ok(())
    }

    /// Whether the thread holds a checkpoint. Fenced, the lease is checked
    /// (and extended) first, in the same script: a writer that does not
    /// hold it gets `Error::Fenced`, never what the thread holds.
    pub(super) async fn has_checkpoints(&self, thread: &str, fence: Option<&FenceToken>, op: &str) -> Result<bool> {
        if let Some(fence) = fence {
            let mut inv = self.on_thread(&queries::FENCED_HAS_CHECKPOINTS, thread, 0);
            fence_args(&mut inv, fence);
            let n: i64 = self.invoke(&inv, op, false).await?;
            fenced_status(n, thread, fence)?;
            return Ok(n == 1);
        }
        let n: i64 = self
            .query(
                redis::cmd("EXISTS").arg(format!("{}:all", self.keys.thread(thread))),
                op,
                true,
            )
            .await?;
        Ok(n == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, id: &str) -> Vec<u8> {
        join(ns.as_bytes(), id.as_bytes())
    }

    #[test]
    fn write_keys_name_their_checkpoint() {
        assert_eq!(checkpoint_of_write(b"ns\0id\0task:0"), b"ns\0id");
        assert_eq!(all_member(b"ns\0id"), b"id\0ns");
        assert_eq!(all_member(b"\0id"), b"id\0");
    }

    #[test]
    fn dropping_checkpoints_collects_their_values() {
        let mut raw = RawThread::default();
        for (id, fields) in [("1", "a:1\nb:1"), ("2", "a:2\nb:1")] {
            raw.ck.insert(key("", id), b"rec".to_vec());
            raw.cf.insert(key("", id), fields.as_bytes().to_vec());
        }
        raw.par.insert(key("", "2"), b"1".to_vec());
        for f in ["a:1", "a:2", "b:1"] {
            raw.bl.insert(key("", f), b"v".to_vec());
        }
        raw.w.insert(b"\x001\0t:0".to_vec(), b"w".to_vec());
        raw.w.insert(b"\x002\0t:0".to_vec(), b"w".to_vec());
        assert!(raw.drop_checkpoints(&HashSet::from([key("", "1")])));
        assert_eq!(raw.ck.keys().collect::<Vec<_>>(), [&key("", "2")]);
        assert_eq!(raw.bl.keys().collect::<Vec<_>>(), [&key("", "a:2"), &key("", "b:1")]);
        assert_eq!(raw.w.len(), 1);
        // a dropped checkpoint's child keeps naming it (as delete_for_runs does)
        assert_eq!(raw.par.len(), 1);
        assert_eq!(raw.sizes(), [1, 1, 1, 1, 1, 1, 2, 1, 1]);
    }
}
