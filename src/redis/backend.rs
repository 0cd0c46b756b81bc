//! The Redis side of the engine: rows in, rows out, one script per
//! operation on a thread (`docs/design.md`, *Redis layout*).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::try_join_all;
use indexmap::IndexMap;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, RedisFuture, Script, ScriptInvocation, Value as RValue};

use super::error::storage;
use super::fence::{fence_args, fenced_status};
use super::keys::{
    self, escape, excl, has_nul, incl, lex_range, pack_write, refuse_nul, split_global, unpack, write_field, Keys,
};
use super::queries;
use super::rows::{bad_reply, parse_read, split_key, RawItem, RECORD_PARTS};
use super::stage;
use super::TtlConfig;
use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::encoded::EncodedTuple;
use crate::engine::{
    page_size, prune, put_through_values, Backend, FenceToken, Fences, LeaseOp, Link, ListQuery, Page, Put, ThreadPage,
    ThreadsQuery, WriteBatch,
};
use crate::error::{Error, Result};
use crate::saver::{metadata_matches, CheckpointKey, ThreadInfo, ThreadKeys, WriteKey};
use crate::serde::{Serializer, TypedBytes, Value};

/// Checkpoints read per `list` page (with a filter, or when more are wanted).
const PAGE: usize = 64;
/// Links of a parent chain read per script call.
const WALK: usize = 64;
/// Index entries examined per step of a scan (`delete_for_runs`).
const SCAN: usize = 512;

/// The connection: one server (reconnecting) or a Redis Cluster (every
/// command and script routed to the master of its keys' slot).
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, RValue> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<RValue>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The storage side of `RedisSaver`.
pub(crate) struct Redis {
    pub(super) conn: Conn,
    pub(super) keys: Keys,
    pub(super) serde: Arc<dyn Serializer>,
    /// The URL's secrets, scrubbed from every error message.
    pub(super) secrets: crate::secret::Secrets,
    /// The deadline every key of a thread gets on a write (and on a read
    /// with `refresh_on_read`).
    pub(super) ttl: Option<TtlConfig>,
}

/// The operations whose reads renew a thread's deadline with
/// `refresh_on_read` (reads of checkpoints; not the scans of
/// `list_threads`, `delete_for_runs`, `prune`, `copy_thread`).
const REFRESHING: [&str; 3] = ["get_tuple", "list", "get_delta_channel_history"];

/// A prepared listing.
pub(crate) struct Prepared {
    query: ListQuery,
    impossible: bool,
}

/// `e`, made not retryable when an earlier step of the same call was
/// applied: repeating the call is safe (every step is idempotent), but
/// "retryable" promises that nothing was.
pub(super) fn partly(e: Error, applied: bool) -> Error {
    match e {
        Error::Storage {
            backend,
            retryable: true,
            source,
        } if applied => Error::storage(
            backend,
            false,
            super::error::RedisFailure::new(format!(
                "{source} (after part of the call was applied; repeating the call is safe)"
            )),
        ),
        other => other,
    }
}

impl Redis {
    pub(super) fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// The TTL argument of a write script (`0`: keep the thread's deadline).
    pub(super) fn write_ttl(&self) -> u64 {
        self.ttl.map_or(0, |t| t.millis())
    }

    /// `script` on `thread`'s keys, its first argument the TTL.
    pub(super) fn on_thread<'s>(&self, script: &'s Script, thread: &str, ttl: u64) -> ScriptInvocation<'s> {
        let mut inv = script.prepare_invoke();
        inv.key(self.keys.thread(thread)).arg(ttl);
        inv
    }

    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        inv: &ScriptInvocation<'_>,
        op: &str,
        read: bool,
    ) -> Result<T> {
        inv.invoke_async(&mut self.conn())
            .await
            .map_err(|e| storage(e, op, read, &self.secrets))
    }

    pub(super) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd, op: &str, read: bool) -> Result<T> {
        cmd.query_async(&mut self.conn())
            .await
            .map_err(|e| storage(e, op, read, &self.secrets))
    }

    pub(super) async fn pipe(&self, pipe: &redis::Pipeline, op: &str) -> Result<()> {
        pipe.query_async::<()>(&mut self.conn())
            .await
            .map_err(|e| storage(e, op, false, &self.secrets))
    }

    /// Runs `READ` on a thread.
    async fn read(&self, thread: &str, args: &[&[u8]], op: &str) -> Result<(usize, Vec<u8>, Vec<RawItem>)> {
        let refresh = self.ttl.filter(|t| t.refreshes_on_read() && REFRESHING.contains(&op));
        let mut inv = self.on_thread(&queries::READ, thread, refresh.map_or(0, |t| t.millis()));
        for a in args {
            inv.arg(*a);
        }
        let reply: RValue = self.invoke(&inv, op, true).await?;
        parse_read(thread, reply)
    }

    /// Deletes one thread, O(1) on its slot: `:all` becomes a trash key,
    /// the rest is unlinked (freed in the background); then its index
    /// entries go a chunk at a time (`stage`).
    pub(super) async fn delete_thread_keys(&self, thread: &str, op: &str) -> Result<()> {
        self.delete_thread_keys_fenced(thread, op, None).await
    }

    /// [`Self::delete_thread_keys`], refused (nothing removed) unless
    /// `fence` (if any) holds the thread's lease.
    pub(super) async fn delete_thread_keys_fenced(
        &self,
        thread: &str,
        op: &str,
        fence: Option<&FenceToken>,
    ) -> Result<()> {
        let trash = format!("{}:x:{}", self.keys.thread(thread), stage::token());
        let script = match fence {
            Some(_) => &queries::FENCED_DELETE_THREAD,
            None => &queries::DELETE_THREAD,
        };
        let mut inv = self.on_thread(script, thread, 0);
        inv.key(&trash);
        inv.arg(stage::LEASE_MS);
        if let Some(fence) = fence {
            fence_args(&mut inv, fence);
        }
        let moved: i64 = self.invoke(&inv, op, false).await?;
        if let Some(fence) = fence {
            fenced_status(moved, thread, fence)?;
        }
        self.retire(
            thread,
            (moved == 1).then_some(trash.as_str()),
            &HashSet::new(),
            true,
            op,
        )
        .await
        .map_err(|e| partly(e, true))
    }

    /// The checkpoints of one thread's namespaces given as (ns, id), in the
    /// order asked, those that are gone left out.
    pub(super) async fn fetch_ids(
        &self,
        thread: &str,
        ids: &[(String, String)],
        full: bool,
        op: &str,
    ) -> Result<Vec<RawItem>> {
        let mut args: Vec<&[u8]> = vec![b"ids", if full { b"1" } else { b"0" }];
        for (ns, id) in ids {
            args.push(ns.as_bytes());
            args.push(id.as_bytes());
        }
        Ok(self.read(thread, &args, op).await?.2)
    }

    /// Prunes one thread: plans from its heads (a few bounded reads),
    /// reads the thread a chunk at a time at the version the plan saw,
    /// applies the plan to that copy and swaps it in (`stage`), all again
    /// when a write came in between. Whether anything changed.
    async fn prune_thread(&self, thread: &str, fence: Option<&FenceToken>) -> Result<bool> {
        for _ in 0..stage::ATTEMPTS {
            let seen = self.version(thread, "prune").await?;
            let Some((drop, keep)) = self.prune_plan(thread).await? else {
                return Ok(false);
            };
            let Some((ver, mut raw)) = self.read_raw(thread, &stage::ALL, "prune").await? else {
                continue;
            };
            if ver != seen {
                continue;
            }
            let before = raw.clone();
            raw.prune(&drop, &keep)?;
            if raw == before {
                return Ok(false);
            }
            match self
                .write_thread(thread, &raw, stage::Mode::Guard(&seen), fence, "prune")
                .await?
            {
                stage::Swapped::Applied => return Ok(true),
                _ => continue,
            }
        }
        Err(stage::kept_changing("prune", thread))
    }

    /// The plan of one thread's prune: the namespaces dropped whole, and per
    /// namespace kept, its head and the ids kept (`None`: nothing to do).
    async fn prune_plan(&self, thread: &str) -> Result<Option<(HashSet<Vec<u8>>, stage::KeptNamespaces)>> {
        let base = self.keys.thread(thread);
        let mut namespaces: Vec<String> = self
            .query(redis::cmd("SMEMBERS").arg(format!("{base}:ns")), "prune", true)
            .await?;
        namespaces.sort_unstable();
        let mut heads = Vec::new();
        let mut parents: HashMap<String, Option<String>> = HashMap::new();
        for ns in &namespaces {
            let (_, _, items) = self
                .read(thread, &[b"range", ns.as_bytes(), b"+", b"-", b"1", b"1"], "prune")
                .await?;
            let Some(item) = items.into_iter().next() else { continue };
            let tuple = self.decode_item(item)?;
            let unstored: Vec<&str> = tuple
                .checkpoint
                .channel_versions
                .keys()
                .filter(|ch| !tuple.checkpoint.channel_values.contains_key(*ch))
                .map(String::as_str)
                .collect();
            heads.push(prune::Head::new(
                ns.clone(),
                tuple.checkpoint.id.clone(),
                &tuple.metadata,
                unstored,
            ));
            parents.insert(ns.clone(), tuple.parent_config.and_then(|p| p.checkpoint_id));
        }
        let roots: Vec<(String, String)> = prune::roots_to_check(&heads)
            .into_iter()
            .map(|r| (String::new(), r.to_owned()))
            .collect();
        let saved_ids: Vec<String> = if roots.is_empty() {
            Vec::new()
        } else {
            self.fetch_ids(thread, &roots, false, "prune")
                .await?
                .into_iter()
                .map(|i| i.id)
                .collect()
        };
        let saved: HashSet<&str> = saved_ids.iter().map(String::as_str).collect();
        let mut dropped: HashSet<Vec<u8>> = HashSet::new();
        let mut kept_ns = stage::KeptNamespaces::new();
        for action in prune::plan(&heads, &saved) {
            let keep = match action {
                prune::Action::Drop(ns) => {
                    dropped.insert(ns.as_bytes().to_vec());
                    continue;
                }
                prune::Action::Keep(keep) => keep,
            };
            let mut walk = prune::KeptAncestry::new(keep.walk);
            let mut next = parents.get(keep.ns).cloned().flatten();
            let limit = WALK.to_string();
            let escaped: Vec<String> = keep.walk.iter().map(|c| escape(c)).collect();
            'walk: while let (true, Some(start)) = (walk.wants_more(), next.take()) {
                // only the walked channels' values are fetched
                let mut args: Vec<&[u8]> = vec![b"walk", keep.ns.as_bytes(), start.as_bytes(), limit.as_bytes()];
                args.extend(escaped.iter().map(|c| c.as_bytes()));
                let (_, more, items) = self.read(thread, &args, "prune").await?;
                for item in items {
                    let id = item.id.clone();
                    let stored = self.decode_item(item)?.checkpoint.channel_values;
                    if !walk.step(&id, |ch| stored.contains_key(ch)) {
                        break 'walk;
                    }
                }
                next = (!more.is_empty()).then(|| String::from_utf8_lossy(&more).into_owned());
            }
            let kept = walk.into_kept().into_iter().map(String::into_bytes).collect();
            kept_ns.insert(keep.ns.as_bytes().to_vec(), (keep.head.as_bytes().to_vec(), kept));
        }
        if dropped.is_empty() && kept_ns.is_empty() {
            return Ok(None);
        }
        Ok(Some((dropped, kept_ns)))
    }
}

impl Backend for Redis {
    type Row = RawItem;
    type Cursor = Vec<u8>;
    type Query = Prepared;
    type Encoded = TypedBytes;

    fn encode(&self, value: &Value) -> Result<TypedBytes> {
        self.serde.dumps_typed(value)
    }

    fn decode(&self, row: RawItem) -> Result<CheckpointTuple> {
        self.decode_item(row)
    }

    fn encoded_row(&self, row: RawItem) -> Result<EncodedTuple> {
        self.encoded_item(row)
    }

    fn row_matches(&self, row: &RawItem, filter: &IndexMap<String, Value>) -> Option<bool> {
        let metadata = self.metadata(&unpack(&row.rec, RECORD_PARTS).ok()?).ok()?;
        Some(metadata_matches(&metadata, filter))
    }

    fn serializer(&self) -> &dyn Serializer {
        self.serde.as_ref()
    }

    fn encoded_value(&self, typed: TypedBytes) -> Result<TypedBytes> {
        self.serde.seal(typed)
    }

    async fn get(&self, thread_id: &str, ns: &str, id: Option<&str>) -> Result<Option<RawItem>> {
        if has_nul(&[thread_id, ns, id.unwrap_or("")]) {
            return Ok(None); // nothing stored can have such a key
        }
        let (max, min) = match id {
            Some(id) => (incl(id.as_bytes()), incl(id.as_bytes())),
            None => (b"+".to_vec(), b"-".to_vec()),
        };
        let (_, _, items) = self
            .read(
                thread_id,
                &[b"range", ns.as_bytes(), &max, &min, b"1", b"1"],
                "get_tuple",
            )
            .await?;
        Ok(items.into_iter().next())
    }

    fn prepare(&self, query: ListQuery) -> Result<Prepared> {
        let impossible = has_nul(&[
            query.thread_id.as_deref().unwrap_or(""),
            query.checkpoint_ns.as_deref().unwrap_or(""),
            query.checkpoint_id.as_deref().unwrap_or(""),
        ]) || query.before.as_deref().is_some_and(|b| b.contains('\0'))
            || matches!((&query.checkpoint_id, &query.before), (Some(id), Some(b)) if id >= b);
        Ok(Prepared { query, impossible })
    }

    async fn page(&self, p: &Prepared, cursor: Option<Vec<u8>>, want: usize) -> Result<Page<RawItem, Vec<u8>>> {
        let q = &p.query;
        let none = || Page {
            rows: Vec::new(),
            next: None,
            filtered: false,
        };
        if p.impossible {
            return Ok(none());
        }
        let size = page_size(want, PAGE, !q.filter.is_empty());
        let size_arg = size.to_string();
        let before = q.before.as_deref().map(|b| excl(b.as_bytes()));
        let Some(thread) = q.thread_id.as_deref() else {
            let max = cursor.map(|c| excl(&c)).or(before).unwrap_or_else(|| b"+".to_vec());
            let (rows, next) = self.global_page(max, size, true, "list").await?;
            return Ok(Page {
                rows,
                next,
                filtered: false,
            });
        };
        let (examined, last, rows) = match (&q.checkpoint_ns, &q.checkpoint_id) {
            (Some(ns), id) => {
                let (max, min) = match (id, &cursor) {
                    (Some(_), Some(_)) => return Ok(none()),
                    (Some(id), None) => (incl(id.as_bytes()), incl(id.as_bytes())),
                    (None, Some(c)) => (excl(c), b"-".to_vec()),
                    (None, None) => (before.unwrap_or_else(|| b"+".to_vec()), b"-".to_vec()),
                };
                self.read(
                    thread,
                    &[b"range", ns.as_bytes(), &max, &min, size_arg.as_bytes(), b"1"],
                    "list",
                )
                .await?
            }
            (None, id) => {
                let (max, min) = match id {
                    Some(id) => {
                        let mut low = id.as_bytes().to_vec();
                        low.push(0);
                        let mut high = id.as_bytes().to_vec();
                        high.push(1);
                        (cursor.map(|c| excl(&c)).unwrap_or_else(|| excl(&high)), incl(&low))
                    }
                    None => (
                        cursor.map(|c| excl(&c)).or(before).unwrap_or_else(|| b"+".to_vec()),
                        b"-".to_vec(),
                    ),
                };
                self.read(thread, &[b"all", &max, &min, size_arg.as_bytes(), b"1"], "list")
                    .await?
            }
        };
        Ok(Page {
            rows,
            next: (examined >= size).then_some(last),
            filtered: false,
        })
    }

    put_through_values!();

    async fn put_writes(&self, batch: WriteBatch<'_, TypedBytes>) -> Result<()> {
        refuse_nul(batch.thread_id, "thread_id")?;
        refuse_nul(batch.checkpoint_ns, "checkpoint_ns")?;
        refuse_nul(batch.checkpoint_id, "checkpoint id")?;
        let script = match batch.fence {
            Some(_) => &queries::FENCED_PUT_WRITES,
            None => &queries::PUT_WRITES,
        };
        let mut inv = self.on_thread(script, batch.thread_id, self.write_ttl());
        inv.arg(batch.checkpoint_ns).arg(batch.checkpoint_id);
        for w in &batch.writes {
            let value = pack_write(batch.task_id, batch.task_path, &w.channel, &w.value);
            inv.arg(write_field(batch.task_id, w.idx))
                .arg(value)
                .arg(if w.special { "1" } else { "0" });
        }
        if let Some(fence) = batch.fence {
            fence_args(&mut inv, fence);
        }
        let status: i64 = self.invoke(&inv, "put_writes", false).await?;
        match batch.fence {
            Some(fence) => fenced_status(status, batch.thread_id, fence),
            None => Ok(()),
        }
    }

    async fn put_step(&self, put: Put<'_>, writes: Vec<WriteBatch<'_, TypedBytes>>) -> Result<()> {
        let values = put.values();
        self.put_step_with(put, values, writes).await
    }

    const FENCES: bool = true;

    async fn lease(&self, thread_id: &str, writer: &str, lease_ms: u64, op: LeaseOp) -> Result<Option<u64>> {
        self.lease_op(thread_id, writer, lease_ms, op).await
    }

    async fn purge_leases(&self, older_than: std::time::Duration) -> Result<u64> {
        self.purge_leases_all(u64::try_from(older_than.as_millis()).unwrap_or(u64::MAX))
            .await
    }

    async fn delete_thread_fenced(&self, thread_id: &str, fence: &FenceToken) -> Result<()> {
        refuse_nul(thread_id, "thread_id")?;
        self.delete_thread_keys_fenced(thread_id, "delete_thread", Some(fence))
            .await
    }

    async fn import(&self, import: crate::engine::import::Import<'_, TypedBytes>) -> Result<()> {
        self.import_thread(import).await
    }

    async fn delete_threads(&self, thread_ids: &[String]) -> Result<()> {
        let mut applied = false;
        for thread in thread_ids {
            if thread.contains('\0') {
                continue;
            }
            self.delete_thread_keys(thread, "delete_thread")
                .await
                .map_err(|e| partly(e, applied))?;
            applied = true;
        }
        Ok(())
    }

    async fn delete_for_runs(&self, run_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        let runs: HashSet<&str> = run_ids.iter().map(String::as_str).collect();
        // One pass over the global index, a slice at a time; the checkpoints
        // of a run are dropped per thread, each thread in one script.
        let mut victims: IndexMap<String, Vec<(String, String)>> = IndexMap::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let min = after.as_deref().map_or_else(|| b"-".to_vec(), excl);
            let cmd = lex_range("ZRANGEBYLEX", self.keys.checkpoints(), min, "+", SCAN);
            let members: Vec<Vec<u8>> = self.query(&cmd, "delete_for_runs", true).await?;
            let mut by_thread: IndexMap<String, Vec<(String, String)>> = IndexMap::new();
            for m in &members {
                let (thread, ns, id) = split_global(m)?;
                by_thread.entry(thread).or_default().push((ns, id));
            }
            let fetched = try_join_all(
                by_thread
                    .iter()
                    .map(|(thread, ids)| self.fetch_ids(thread, ids, false, "delete_for_runs")),
            )
            .await?;
            for item in fetched.into_iter().flatten() {
                let parts = unpack(&item.rec, RECORD_PARTS)?;
                let metadata = self.metadata(&parts)?;
                if metadata.run_id().is_some_and(|r| runs.contains(r)) {
                    victims.entry(item.thread).or_default().push((item.ns, item.id));
                }
            }
            if members.len() < SCAN {
                break;
            }
            after = members.last().cloned();
        }
        // each thread's checkpoints of the runs dropped by rewriting the
        // thread in bounded steps (`stage`), at the version it was read at;
        // fenced, every thread the writer took, checked again by each swap
        if let Some(fences) = fences {
            fences.check_all(victims.keys().map(String::as_str))?;
        }
        let mut applied = false;
        for (thread, ids) in victims {
            let fence = fences.map(|f| f.token(&thread)).transpose()?;
            let drop: HashSet<Vec<u8>> = ids.iter().map(|(ns, id)| format!("{ns}\0{id}").into_bytes()).collect();
            let mut done = false;
            for _ in 0..stage::ATTEMPTS {
                let Some((ver, mut raw)) = self
                    .read_raw(&thread, &stage::ALL, "delete_for_runs")
                    .await
                    .map_err(|e| partly(e, applied))?
                else {
                    continue;
                };
                if !raw.drop_checkpoints(&drop) {
                    done = true;
                    break;
                }
                let swapped = self
                    .write_thread(
                        &thread,
                        &raw,
                        stage::Mode::Guard(&ver),
                        fence.as_ref(),
                        "delete_for_runs",
                    )
                    .await
                    .map_err(|e| partly(e, applied))?;
                if swapped == stage::Swapped::Applied {
                    applied = true;
                    done = true;
                    break;
                }
            }
            if !done {
                return Err(partly(stage::kept_changing("delete_for_runs", &thread), applied));
            }
        }
        Ok(())
    }

    async fn copy_thread(&self, source: &str, target: &str, fence: Option<&FenceToken>) -> Result<()> {
        refuse_nul(target, "target thread_id")?;
        // the source read a chunk at a time, at one version; the target
        // written into staged keys and swapped in by one O(1) script that
        // first checks it holds no checkpoint
        let raw = if source.contains('\0') {
            stage::RawThread::default()
        } else {
            self.snapshot(source, &stage::ALL, "copy_thread").await?.1
        };
        if raw.is_empty() {
            if self.has_checkpoints(target, fence, "copy_thread").await? {
                return Err(Error::ThreadExists {
                    thread_id: target.to_owned(),
                });
            }
            return Ok(());
        }
        match self
            .write_thread(target, &raw, stage::Mode::Create, fence, "copy_thread")
            .await?
        {
            stage::Swapped::Applied => Ok(()),
            stage::Swapped::Exists => Err(Error::ThreadExists {
                thread_id: target.to_owned(),
            }),
            stage::Swapped::Changed => Err(stage::kept_changing("copy_thread", target)),
        }
    }

    async fn prune_keep_latest(&self, thread_ids: &[String], fences: Option<&Fences>) -> Result<()> {
        // once one thread's prune applied, a later failure is not retryable
        let mut applied = false;
        for thread in thread_ids {
            if thread.contains('\0') {
                continue;
            }
            let fence = fences.map(|f| f.token(thread)).transpose()?;
            let pruned = self.prune_thread(thread, fence.as_ref()).await;
            if pruned.map_err(|e| partly(e, applied))? {
                applied = true;
            }
        }
        Ok(())
    }

    async fn ancestors(&self, thread_id: &str, ns: &str, id: Option<&str>, channels: &[String]) -> Result<Vec<Link>> {
        if has_nul(&[thread_id, ns, id.unwrap_or("")]) {
            return Ok(Vec::new());
        }
        let wanted: HashSet<&str> = channels.iter().map(String::as_str).collect();
        let mut open = wanted.clone();
        let mut seen: HashSet<String> = HashSet::new();
        let mut links = Vec::new();
        let mut next = Some(id.unwrap_or("").to_owned());
        let limit = WALK.to_string();
        let escaped: Vec<String> = channels.iter().map(|c| escape(c)).collect();
        'walk: while let Some(start) = next.take() {
            let mut args: Vec<&[u8]> = vec![b"walk", ns.as_bytes(), start.as_bytes(), limit.as_bytes()];
            args.extend(escaped.iter().map(|c| c.as_bytes()));
            let (_, more, items) = self.read(thread_id, &args, "get_delta_channel_history").await?;
            for item in items {
                if !seen.insert(item.id.clone()) {
                    break 'walk;
                }
                if seen.len() == 1 {
                    continue; // the target itself: only its ancestors count
                }
                let link = self.decode_link(item, &wanted)?;
                for (ch, _) in &link.seeds {
                    open.remove(ch.as_str());
                }
                links.push(link);
                if open.is_empty() {
                    break 'walk;
                }
            }
            next = (!more.is_empty()).then(|| String::from_utf8_lossy(&more).into_owned());
        }
        Ok(links)
    }

    async fn thread_keys(&self, thread_id: &str) -> Result<ThreadKeys> {
        if thread_id.contains('\0') {
            return Ok(ThreadKeys::default());
        }
        // a chunk at a time, at one version: no value is read
        let (_, raw) = self
            .snapshot(thread_id, &[stage::CF, stage::PAR, stage::W], "thread_keys")
            .await?;
        let mut out = ThreadKeys::default();
        for key in raw.cf.keys() {
            let (ns, id) = split_key(key)?;
            out.checkpoints.push(CheckpointKey {
                checkpoint_ns: ns,
                parent_checkpoint_id: raw.par.get(key).map(|p| keys::text(p, "parent id")).transpose()?,
                checkpoint_id: id,
            });
        }
        for (key, value) in &raw.w {
            let (ns, rest) = split_key(key)?;
            let (id, field) = rest.split_once('\0').ok_or_else(bad_reply)?;
            let (task_id, task_path, channel, idx, _) = Self::write_key(field.as_bytes(), value)?;
            out.writes.push(WriteKey {
                checkpoint_ns: ns,
                checkpoint_id: id.to_owned(),
                task_id,
                task_path,
                idx,
                channel,
            });
        }
        Ok(out)
    }

    async fn threads_page(&self, query: ThreadsQuery<'_>) -> Result<ThreadPage> {
        let size = query.page_size(PAGE);
        let min = query.after.map_or_else(|| b"-".to_vec(), |a| excl(a.as_bytes()));
        let cmd = lex_range("ZRANGEBYLEX", self.keys.threads(), min, "+", size);
        let threads: Vec<String> = self.query(&cmd, "list_threads", true).await?;
        let mut out = Vec::with_capacity(threads.len());
        // each thread's latest record alone (only the metadata is decoded),
        // the scripts of the page sent at once
        let latest = try_join_all(
            threads
                .iter()
                .map(|thread| self.read(thread, &[b"all", b"+", b"-", b"1", b"0"], "list_threads")),
        )
        .await?;
        for (thread, (_, _, items)) in threads.iter().zip(latest) {
            // a thread whose keys are gone (or never written) is skipped
            if let Some(item) = items.into_iter().next() {
                let metadata = self.metadata(&unpack(&item.rec, RECORD_PARTS)?)?;
                out.push(ThreadInfo {
                    thread_id: thread.clone(),
                    latest: CheckpointConfig::new(thread.as_str())
                        .with_ns(item.ns)
                        .with_checkpoint_id(item.id),
                    metadata,
                });
            }
        }
        Ok(ThreadPage {
            threads: out,
            next: (threads.len() >= size).then(|| threads.last().cloned()).flatten(),
            filtered: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_after_an_applied_step_is_not_retryable() {
        let refused = || Error::storage("redis", true, super::super::error::RedisFailure::new("refused".into()));
        assert!(partly(refused(), false).is_retryable());
        let late = partly(refused(), true);
        assert!(!late.is_retryable());
        assert!(late.to_string().contains("repeating the call is safe"), "{late}");
        // errors that were not retryable stay as they were
        let invalid = partly(Error::invalid("bad"), true);
        assert!(matches!(invalid, Error::InvalidInput { .. }));
    }
}
