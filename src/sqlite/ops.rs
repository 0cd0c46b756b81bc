//! The statements of `queries.rs` run: every function here is synchronous
//! and runs on a connection the caller owns, a reader (see "Where reads
//! run" in the module docs of `sqlite`) or the writer thread inside a batch
//! transaction. Reads hand back rows as stored (`rows.rs`), decoded later on
//! the caller's side.

use std::collections::{HashMap, HashSet};

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::error::sql_error;
use super::functions::encode_filter;
use super::queries::{self, Cursor, ListQuery};
use super::rows::{
    bytes_of, col, metadata_from_ref, record_from_row, stored_channel_values, text_of, write_from_row, CheckpointRow,
    Record, StoredTuple, WriteRecord, WriteRow,
};
use super::schema::SchemaInfo;
use crate::checkpoint::special_write_idx;
use crate::config::CheckpointConfig;
use crate::engine::encoded::checkpoint_without_values;
use crate::engine::{prune, Link, Removed, SkeletonQuery};
use crate::error::{Error, Result};
use crate::retention::parse_ts_micros;
use crate::retention::plan::{Facts, Skeleton};
use crate::saver::{CheckpointKey, ListThreadsOptions, ThreadInfo, ThreadKeys, WriteKey};
use crate::serde::{Serializer, TypedBytes, Value};
use crate::version::ChannelVersion;

/// A JSON array of strings, the parameter `json_each` expands.
fn json_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<&str> = items.into_iter().collect();
    serde_json::to_string(&items).unwrap_or_else(|_| "[]".to_owned())
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

/// `INSERT OR REPLACE`: a re-put replaces checkpoint, metadata and parent.
pub(crate) fn put_checkpoint(conn: &Connection, row: &CheckpointRow) -> Result<()> {
    conn.prepare_cached(queries::PUT_CHECKPOINT)
        .and_then(|mut stmt| {
            stmt.execute(params![
                row.thread_id,
                row.checkpoint_ns,
                row.checkpoint_id,
                row.parent_checkpoint_id,
                row.tag,
                &row.checkpoint[..],
                row.metadata
            ])
        })
        .map(drop)
        .map_err(sql_error)
}

/// Stores writes, deciding per write: special channels replace, regular ones
/// keep the first value stored for (task_id, idx).
pub(crate) fn put_writes(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    checkpoint_id: &str,
    rows: &[WriteRow],
) -> Result<()> {
    for row in rows {
        let sql = if special_write_idx(&row.channel).is_some() {
            queries::PUT_WRITE_REPLACE
        } else {
            queries::PUT_WRITE_KEEP
        };
        let mut stmt = conn.prepare_cached(sql).map_err(sql_error)?;
        // An empty payload (a `null` write) is stored as a zero-length BLOB,
        // never SQL NULL, as Python does.
        let value = SqlValue::Blob(row.value.clone());
        stmt.execute(params![
            thread_id,
            ns,
            checkpoint_id,
            row.task_id,
            row.task_path,
            row.idx,
            row.channel,
            row.tag,
            value
        ])
        .map_err(sql_error)?;
    }
    Ok(())
}

/// Removes every checkpoint and write of a thread.
pub(crate) fn delete_thread(conn: &Connection, thread_id: &str) -> Result<()> {
    for sql in queries::DELETE_THREAD {
        conn.prepare_cached(sql)
            .and_then(|mut s| s.execute([thread_id]))
            .map_err(sql_error)?;
    }
    Ok(())
}

/// Removes every checkpoint whose metadata `run_id` is one of `run_ids`, with
/// its writes. SQLite stores values inline, so nothing else is referenced.
pub(crate) fn delete_for_runs(conn: &Connection, run_ids: &[String]) -> Result<()> {
    let ids = json_list(run_ids.iter().map(String::as_str));
    conn.prepare_cached(queries::DELETE_RUN_WRITES)
        .and_then(|mut s| s.execute([&ids]))
        .map_err(sql_error)?;
    conn.prepare_cached(queries::DELETE_RUN_CHECKPOINTS)
        .and_then(|mut s| s.execute([&ids]))
        .map_err(sql_error)?;
    Ok(())
}

/// The threads holding a checkpoint whose metadata `run_id` is one of
/// `run_ids`.
pub(crate) fn run_threads(conn: &Connection, run_ids: &[String]) -> Result<Vec<String>> {
    let ids = json_list(run_ids.iter().map(String::as_str));
    conn.prepare_cached(queries::RUN_THREADS)
        .and_then(|mut s| s.query_map([&ids], |r| r.get(0))?.collect())
        .map_err(sql_error)
}

/// Copies every row of `source` to `target` byte for byte.
pub(crate) fn copy_thread(conn: &Connection, source: &str, target: &str) -> Result<()> {
    let exists = conn
        .prepare_cached(queries::THREAD_HAS_CHECKPOINTS)
        .and_then(|mut s| s.exists([target]))
        .map_err(sql_error)?;
    if exists {
        return Err(Error::ThreadExists {
            thread_id: target.to_owned(),
        });
    }
    conn.prepare_cached(queries::COPY_CHECKPOINTS)
        .and_then(|mut s| s.execute([source, target]))
        .map_err(sql_error)?;
    conn.prepare_cached(queries::COPY_WRITES)
        .and_then(|mut s| s.execute([source, target]))
        .map_err(sql_error)?;
    Ok(())
}

/// Keeps the latest checkpoints of each thread and what they need (the rule
/// of [`prune`]).
pub(crate) fn prune_keep_latest_all(conn: &Connection, serde: &dyn Serializer, thread_ids: &[String]) -> Result<()> {
    for thread_id in thread_ids {
        prune_keep_latest(conn, serde, thread_id)?;
    }
    Ok(())
}

fn prune_keep_latest(conn: &Connection, serde: &dyn Serializer, thread_id: &str) -> Result<()> {
    let namespaces: Vec<String> = conn
        .prepare_cached(queries::THREAD_NAMESPACES)
        .and_then(|mut s| s.query_map([thread_id], |r| r.get(0))?.collect())
        .map_err(sql_error)?;
    // the whole plan is made before anything is deleted
    let mut heads = Vec::with_capacity(namespaces.len());
    let mut parents: HashMap<String, Option<String>> = HashMap::new();
    for ns in namespaces {
        let Some(head) = load_record(conn, thread_id, &ns, None)? else {
            continue;
        };
        let checkpoint = head.checkpoint(serde)?;
        let metadata = metadata_from_ref(ValueRef::Blob(&head.metadata))?;
        let unstored = checkpoint
            .channel_versions
            .keys()
            .filter(|ch| !checkpoint.channel_values.contains_key(*ch))
            .map(String::as_str);
        parents.insert(ns.clone(), head.parent.clone());
        heads.push(prune::Head::new(ns, head.id, &metadata, unstored));
    }
    let mut saved = HashSet::new();
    for root in prune::roots_to_check(&heads) {
        let exists = conn
            .prepare_cached(queries::ROOT_HAS_CHECKPOINT)
            .and_then(|mut s| s.exists([thread_id, root]))
            .map_err(sql_error)?;
        if exists {
            saved.insert(root);
        }
    }
    for action in prune::plan(&heads, &saved) {
        let keep = match action {
            prune::Action::Drop(ns) => {
                for sql in queries::DELETE_NAMESPACE {
                    conn.prepare_cached(sql)
                        .and_then(|mut s| s.execute([thread_id, ns]))
                        .map_err(sql_error)?;
                }
                continue;
            }
            prune::Action::Keep(keep) => keep,
        };
        let mut walk = prune::KeptAncestry::new(keep.walk);
        let mut next = parents.get(keep.ns).cloned().flatten();
        while let (true, Some(id)) = (walk.wants_more(), next.take()) {
            let Some(rec) = load_record(conn, thread_id, keep.ns, Some(&id))? else {
                break;
            };
            let stored = rec.checkpoint(serde)?.channel_values;
            if walk.step(&rec.id, |ch| stored.contains_key(ch)) {
                next = rec.parent;
            }
        }
        let mut kept = walk.into_kept();
        kept.push(keep.head.to_owned());
        let keep_json = json_list(kept.iter().map(String::as_str));
        // Checkpoints and writes newer than the head may belong to a put
        // still in flight.
        for sql in queries::DELETE_OLDER_UNKEPT {
            conn.prepare_cached(sql)
                .and_then(|mut s| s.execute([thread_id, keep.ns, keep.head, keep_json.as_str()]))
                .map_err(sql_error)?;
        }
        conn.prepare_cached(queries::FORGET_PRUNED_PARENTS)
            .and_then(|mut s| s.execute([thread_id, keep.ns, keep_json.as_str()]))
            .map_err(sql_error)?;
    }
    Ok(())
}

/// Up to `limit` retention skeletons of `thread_id` after (ns, id) `after`.
pub(crate) fn skeletons(conn: &Connection, serde: &dyn Serializer, query: SkeletonQuery<'_>) -> Result<Vec<Skeleton>> {
    let (thread_id, mark_key) = (query.thread_id, query.mark_key);
    let (sql, ns, id, limit) = query.statement(queries::SKELETONS_FIRST, queries::SKELETONS_AFTER);
    let mut stmt = conn.prepare_cached(sql).map_err(sql_error)?;
    let rows = stmt
        .query_map(params![thread_id, ns, id, limit], |row| {
            let extra = (|| -> rusqlite::Result<(String, i64, bool)> { Ok((row.get(5)?, row.get(6)?, row.get(7)?)) })();
            Ok((record_from_row(row)?, extra))
        })
        .map_err(sql_error)?;
    let mut out = Vec::new();
    for row in rows {
        let (record, extra) = row.map_err(sql_error)?;
        let (record, (ns, writes, interrupt)) = (record?, extra.map_err(sql_error)?);
        // the channels' names only: their values are not decoded
        let tag = record
            .tag
            .clone()
            .ok_or_else(|| Error::serde("checkpoint row has no type tag"))?;
        let checkpoint = checkpoint_without_values(serde, &TypedBytes::new(tag, record.blob.clone()))?;
        let metadata = metadata_from_ref(ValueRef::Blob(&record.metadata))?;
        let versioned = checkpoint
            .channel_versions
            .keys()
            .map(|ch| (ch.as_str(), checkpoint.channel_values.contains_key(ch)));
        let unversioned = checkpoint
            .channel_values
            .keys()
            .filter(|ch| !checkpoint.channel_versions.contains_key(*ch))
            .map(|ch| (ch.as_str(), true));
        let facts = Facts::new(&metadata, mark_key, versioned.chain(unversioned));
        out.push(Skeleton {
            ns,
            id: record.id,
            parent: record.parent,
            ts: parse_ts_micros(&checkpoint.ts),
            marked: facts.marked,
            writes: u64::try_from(writes).unwrap_or(0),
            interrupt,
            needs: facts.needs,
            stores: facts.stores,
            refs: Vec::new(),
        });
    }
    Ok(out)
}

/// Removes the checkpoints `ids` of (`thread_id`, `ns`), a part of a
/// retention batch, with their writes, and clears the parent of those of
/// `clear_parent` whose parent is among them (values are inline: nothing is
/// shared).
pub(crate) fn remove_checkpoints(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    ids: &[String],
    clear_parent: &[String],
) -> Result<Removed> {
    let ids = json_list(ids.iter().map(String::as_str));
    let mut counts = [0u64; 2];
    for (sql, count) in queries::RETAIN_DELETE.iter().zip(&mut counts) {
        let n = conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params![thread_id, ns, ids]))
            .map_err(sql_error)?;
        *count = n as u64;
    }
    if !clear_parent.is_empty() {
        let clear = json_list(clear_parent.iter().map(String::as_str));
        conn.prepare_cached(queries::RETAIN_CLEAR_PARENTS)
            .and_then(|mut s| s.execute(params![thread_id, ns, clear, ids]))
            .map_err(sql_error)?;
    }
    Ok(Removed {
        writes: counts[0],
        checkpoints: counts[1],
    })
}

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/// A read transaction, ended (`COMMIT`, which for a read only releases the
/// snapshot) when dropped, however the read ends.
struct ReadSnapshot<'c>(&'c Connection);

impl<'c> ReadSnapshot<'c> {
    fn begin(conn: &'c Connection) -> Result<Self> {
        conn.prepare_cached("BEGIN")
            .and_then(|mut s| s.execute([]))
            .map_err(sql_error)?;
        Ok(ReadSnapshot(conn))
    }
}

impl Drop for ReadSnapshot<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            let ended = self.0.prepare_cached("COMMIT").and_then(|mut s| s.execute([]));
            if ended.is_err() && !self.0.is_autocommit() {
                let _ = self.0.execute_batch("ROLLBACK");
            }
        }
    }
}

/// One checkpoint row of (thread, ns): the given id, or the latest.
fn load_record(conn: &Connection, thread_id: &str, ns: &str, id: Option<&str>) -> Result<Option<Record>> {
    let found = match id {
        Some(id) => conn
            .prepare_cached(queries::CHECKPOINT_BY_ID)
            .and_then(|mut s| s.query_row([thread_id, ns, id], record_from_row).optional()),
        None => conn
            .prepare_cached(queries::LATEST_CHECKPOINT)
            .and_then(|mut s| s.query_row([thread_id, ns], record_from_row).optional()),
    };
    found.map_err(sql_error)?.transpose()
}

/// The pending writes of one checkpoint, not yet decoded.
fn pending_writes(
    conn: &Connection,
    schema: SchemaInfo,
    thread_id: &str,
    ns: &str,
    checkpoint_id: &str,
) -> Result<Vec<Result<WriteRecord>>> {
    conn.prepare_cached(queries::checkpoint_writes_sql(schema))
        .and_then(|mut s| {
            s.query_map([thread_id, ns, checkpoint_id], write_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(sql_error)
}

/// The checkpoint `config` names, or the latest of its (thread, namespace),
/// with its writes: two indexed lookups.
pub(crate) fn get_tuple(
    conn: &Connection,
    schema: SchemaInfo,
    config: &CheckpointConfig,
) -> Result<Option<StoredTuple>> {
    let ns = config.ns();
    // one read transaction for both lookups: the checkpoint and its writes
    // come from one snapshot, and the WAL read lock is taken once
    let _snapshot = ReadSnapshot::begin(conn)?;
    let Some(record) = load_record(conn, &config.thread_id, ns, config.checkpoint_id())? else {
        return Ok(None);
    };
    let writes = pending_writes(conn, schema, &config.thread_id, ns, &record.id)?;
    Ok(Some(StoredTuple {
        thread_id: config.thread_id.clone(),
        checkpoint_ns: ns.to_owned(),
        record,
        writes,
    }))
}

/// The values checkpoint `checkpoint_id` stores for the given channels, where
/// it names the same version.
pub(crate) fn values_at_versions(
    conn: &Connection,
    serde: &dyn Serializer,
    thread_id: &str,
    ns: &str,
    checkpoint_id: &str,
    channels: &[(String, ChannelVersion)],
) -> Result<Vec<(String, Value)>> {
    let Some(record) = load_record(conn, thread_id, ns, Some(checkpoint_id))? else {
        return Ok(Vec::new());
    };
    let mut stored = record.checkpoint(serde)?;
    Ok(channels
        .iter()
        .filter(|(ch, version)| stored.channel_versions.get(ch) == Some(version))
        .filter_map(|(ch, _)| stored.channel_values.shift_remove(ch).map(|v| (ch.clone(), v)))
        .collect())
}

/// One page of `list`: at most `page` rows after `cursor`, newest first, and
/// the cursor after the page (`None` when storage has no more rows). A row
/// that cannot be read is an error item, the others still come. The writes
/// of the whole page are read by one statement.
pub(crate) fn list_page(
    conn: &Connection,
    schema: SchemaInfo,
    query: &ListQuery,
    cursor: Option<&Cursor>,
    page: usize,
) -> Result<(Vec<Result<StoredTuple>>, Option<Cursor>)> {
    // the page and its writes from one snapshot, one WAL read lock
    let _snapshot = ReadSnapshot::begin(conn)?;
    let (sql, args) = queries::list_sql(query, cursor, page);
    let mut stmt = conn.prepare_cached(&sql).map_err(sql_error)?;
    let rows = stmt
        .query_map(params_from_iter(args.iter()), |row| {
            let head = (
                text_of(row.get_ref(0)?, "thread_id"),
                text_of(row.get_ref(1)?, "checkpoint_ns"),
            );
            let rest = (
                text_of(row.get_ref(2)?, "checkpoint_id"),
                text_of(row.get_ref(3)?, "parent_checkpoint_id"),
                text_of(row.get_ref(4)?, "type"),
                bytes_of(row.get_ref(5)?, "checkpoint"),
                bytes_of(row.get_ref(6)?, "metadata"),
            );
            Ok((head, rest))
        })
        .map_err(sql_error)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sql_error)?;
    drop(stmt);

    let full = rows.len() >= page;
    let mut next = None;
    let mut out = Vec::with_capacity(rows.len());
    for ((thread, ns), (id, parent, tag, blob, metadata)) in rows {
        let thread = thread?.unwrap_or_default();
        let ns = ns?.unwrap_or_default();
        let id = id?.unwrap_or_default();
        next = Some(Cursor {
            checkpoint_id: id.clone(),
            thread_id: thread.clone(),
            checkpoint_ns: ns.clone(),
        });
        let record = (|| {
            Ok(Record {
                id,
                parent: parent?.filter(|p| !p.is_empty()),
                tag: tag?,
                blob: blob?.into(),
                metadata: metadata?,
            })
        })();
        out.push(record.map(|record| StoredTuple {
            thread_id: thread,
            checkpoint_ns: ns,
            record,
            writes: Vec::new(),
        }));
    }
    attach_writes(conn, schema, &mut out)?;
    Ok((out, if full { next } else { None }))
}

/// Reads the writes of every tuple of a page in one statement: the page's
/// (thread, namespace, id) keys are bound as one JSON array, each probed on
/// the primary key of `writes`; `json_each`'s `key` (the position in the
/// array) says which tuple a write belongs to.
fn attach_writes(conn: &Connection, schema: SchemaInfo, tuples: &mut [Result<StoredTuple>]) -> Result<()> {
    let mut keys: Vec<[&str; 3]> = Vec::with_capacity(tuples.len());
    let mut slots: Vec<usize> = Vec::with_capacity(tuples.len());
    for (slot, tuple) in tuples.iter().enumerate() {
        if let Ok(t) = tuple {
            keys.push([&t.thread_id, &t.checkpoint_ns, &t.record.id]);
            slots.push(slot);
        }
    }
    if keys.is_empty() {
        return Ok(());
    }
    let keys = serde_json::to_string(&keys).map_err(|e| Error::invalid(format!("page keys: {e}")))?;
    let mut stmt = conn
        .prepare_cached(queries::page_writes_sql(schema))
        .map_err(sql_error)?;
    let mut rows = stmt.query([keys]).map_err(sql_error)?;
    while let Some(row) = rows.next().map_err(sql_error)? {
        let at: i64 = row.get(7).map_err(sql_error)?;
        let slot = usize::try_from(at).ok().and_then(|i| slots.get(i).copied());
        let Some(Ok(tuple)) = slot.and_then(|s| tuples.get_mut(s)) else {
            continue;
        };
        tuple.writes.push(write_from_row(row).map_err(sql_error)?);
    }
    Ok(())
}

/// The ancestors of a checkpoint for `get_delta_channel_history`, in two
/// statements: the parent chain by a recursive CTE read row by row (stopping
/// as soon as every channel has a stored value, or an id repeats), then the
/// chain's writes on the channels.
pub(crate) fn ancestors(
    conn: &Connection,
    serde: &dyn Serializer,
    schema: SchemaInfo,
    (thread_id, ns, id): (&str, &str, Option<&str>),
    channels: &[String],
) -> Result<Vec<Link>> {
    let mut links: Vec<Link> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    {
        let mut stmt = conn.prepare_cached(queries::ANCESTRY).map_err(sql_error)?;
        let mut rows = stmt.query(params![thread_id, ns, id]).map_err(sql_error)?;
        let mut visited: HashSet<String> = HashSet::new();
        let mut open: HashSet<&str> = channels.iter().map(String::as_str).collect();
        while let Some(row) = rows.next().map_err(sql_error)? {
            let depth: i64 = row.get(0).map_err(sql_error)?;
            let id = text_of(col(row, 1)?, "checkpoint_id")?.unwrap_or_default();
            if !visited.insert(id.clone()) {
                break; // a parent cycle
            }
            if depth == 0 {
                continue; // the target: its own writes are for the next step
            }
            let tag = text_of(col(row, 2)?, "type")?;
            let blob = bytes_of(col(row, 3)?, "checkpoint")?;
            let seeds: Vec<(String, Value)> = stored_channel_values(serde, tag.as_deref(), &blob)?
                .into_iter()
                .filter_map(|(k, v)| match k {
                    Value::Str(k) if channels.iter().any(|c| c.as_str() == k.as_str()) => Some((k.to_string(), v)),
                    _ => None,
                })
                .collect();
            for (ch, _) in &seeds {
                open.remove(ch.as_str());
            }
            ids.push(id);
            links.push(Link {
                seeds,
                writes: Vec::new(),
            });
            if open.is_empty() {
                break;
            }
        }
    }
    if links.is_empty() {
        return Ok(links);
    }
    let id_list = json_list(ids.iter().map(String::as_str));
    let names = json_list(channels.iter().map(String::as_str));
    let writes = conn
        .prepare_cached(queries::chain_writes_sql(schema))
        .and_then(|mut s| {
            s.query_map(params![thread_id, ns, id_list, names], write_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(sql_error)?;
    let position: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
    for w in writes {
        let w = w?;
        if let Some(&at) = position.get(w.checkpoint_id.as_str()) {
            links[at].writes.push(w.into_write(serde)?);
        }
    }
    Ok(links)
}

/// The keys of what thread `thread_id` stores (see [`queries::thread_keys_sql`]).
pub(crate) fn thread_keys(conn: &Connection, schema: SchemaInfo, thread_id: &str) -> Result<ThreadKeys> {
    let mut keys = ThreadKeys::default();
    let mut stmt = conn
        .prepare_cached(queries::thread_keys_sql(schema))
        .map_err(sql_error)?;
    let mut rows = stmt.query([thread_id]).map_err(sql_error)?;
    while let Some(row) = rows.next().map_err(sql_error)? {
        let text = |i: usize, what: &str| -> Result<String> {
            Ok(text_of(row.get_ref(i).map_err(sql_error)?, what)?.unwrap_or_default())
        };
        let (checkpoint_ns, checkpoint_id) = (text(1, "checkpoint_ns")?, text(2, "checkpoint_id")?);
        if row.get::<_, i64>(0).map_err(sql_error)? == 0 {
            keys.checkpoints.push(CheckpointKey {
                checkpoint_ns,
                checkpoint_id,
                parent_checkpoint_id: text_of(row.get_ref(3).map_err(sql_error)?, "parent_checkpoint_id")?,
            });
        } else {
            keys.writes.push(WriteKey {
                checkpoint_ns,
                checkpoint_id,
                task_id: text(4, "task_id")?,
                task_path: text(5, "task_path")?,
                idx: row.get(6).map_err(sql_error)?,
                channel: text(7, "channel")?,
            });
        }
    }
    Ok(keys)
}

/// Threads in id order after `options.after`, each with its latest checkpoint
/// in any namespace, filtered on that checkpoint's metadata.
pub(crate) fn list_threads(conn: &Connection, options: &ListThreadsOptions) -> Result<Vec<ThreadInfo>> {
    let filter = if options.filter.is_empty() {
        None
    } else {
        Some(encode_filter(&options.filter)?)
    };
    let (sql, args) = queries::list_threads_sql(options.after.as_deref(), filter, options.limit);
    let rows = conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_map(params_from_iter(args.iter()), |row| {
                Ok((
                    text_of(row.get_ref(0)?, "thread_id"),
                    text_of(row.get_ref(1)?, "checkpoint_ns"),
                    text_of(row.get_ref(2)?, "checkpoint_id"),
                    metadata_from_ref(row.get_ref(3)?),
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(sql_error)?;
    rows.into_iter()
        .map(|(thread, ns, id, metadata)| {
            let thread = thread?.unwrap_or_default();
            Ok(ThreadInfo {
                latest: CheckpointConfig::new(thread.clone())
                    .with_ns(ns?.unwrap_or_default())
                    .with_checkpoint_id(id?.unwrap_or_default()),
                thread_id: thread,
                metadata: metadata?,
            })
        })
        .collect()
}
