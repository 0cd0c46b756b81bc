//! The physical floor of each timed operation on each backend, measured in
//! the same run as the saver and interleaved with it call by call (see
//! `docs/performance.md`, *Floors*):
//!
//! - memory: `Arc`s in nested `BTreeMap`s keyed by (thread, ns, id): put
//!   inserts an `Arc` of the checkpoint (with its metadata and parent id),
//!   put_writes an `Arc` of the task's writes; reads are lookups (or a range
//!   of 10) plus `Arc` clones;
//! - SQLite: the raw rusqlite statements on LangGraph's tables (spec §7.1,
//!   no other index) in a file of their own, WAL + `synchronous = FULL`, one
//!   transaction per put/put_writes, the rows the saver just stored (same
//!   bytes); reads select the checkpoint row(s) and the writes and walk every
//!   msgpack blob and JSON metadata without building values;
//! - Postgres: raw tokio-postgres prepared statements on LangGraph's tables
//!   (spec §8.1, with the thread_id indexes) in schema `floor` of the same
//!   database: put is one statement (blob rows and checkpoint row, one
//!   commit), put_writes one statement; reads one statement that returns the
//!   checkpoint row(s), their blobs by primary key and their writes, then the
//!   same validating walk.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;
use std::sync::Arc;

use checkpointer::{Checkpoint, CheckpointMetadata, Value};

type Res<T> = Result<T, Box<dyn Error>>;

// ---------------------------------------------------------------------------
// Validating walks
// ---------------------------------------------------------------------------

/// Walks one msgpack value filling `bytes` exactly, checking its structure
/// and that strings are UTF-8, without building anything; returns the number
/// of items (scalars, containers) seen.
pub fn walk_msgpack(b: &[u8]) -> Res<usize> {
    fn take<'a>(b: &'a [u8], pos: &mut usize, n: usize) -> Res<&'a [u8]> {
        let end = pos
            .checked_add(n)
            .filter(|e| *e <= b.len())
            .ok_or("msgpack: truncated")?;
        let s = &b[*pos..end];
        *pos = end;
        Ok(s)
    }
    fn be(b: &[u8], pos: &mut usize, n: usize) -> Res<usize> {
        Ok(take(b, pos, n)?.iter().fold(0usize, |acc, x| (acc << 8) | *x as usize))
    }
    let mut pos = 0usize;
    let mut left = 1usize;
    let mut items = 0usize;
    while left > 0 {
        left -= 1;
        items += 1;
        let m = take(b, &mut pos, 1)?[0];
        let (strlen, skip, children) = match m {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (None, 0, 0),
            0x80..=0x8f => (None, 0, 2 * (m & 0x0f) as usize),
            0x90..=0x9f => (None, 0, (m & 0x0f) as usize),
            0xa0..=0xbf => (Some((m & 0x1f) as usize), 0, 0),
            0xc4 => (None, be(b, &mut pos, 1)?, 0),
            0xc5 => (None, be(b, &mut pos, 2)?, 0),
            0xc6 => (None, be(b, &mut pos, 4)?, 0),
            0xc7 => (None, be(b, &mut pos, 1)? + 1, 0),
            0xc8 => (None, be(b, &mut pos, 2)? + 1, 0),
            0xc9 => (None, be(b, &mut pos, 4)? + 1, 0),
            0xca => (None, 4, 0),
            0xcb => (None, 8, 0),
            0xcc | 0xd0 => (None, 1, 0),
            0xcd | 0xd1 => (None, 2, 0),
            0xce | 0xd2 => (None, 4, 0),
            0xcf | 0xd3 => (None, 8, 0),
            0xd4 => (None, 2, 0),
            0xd5 => (None, 3, 0),
            0xd6 => (None, 5, 0),
            0xd7 => (None, 9, 0),
            0xd8 => (None, 17, 0),
            0xd9 => (Some(be(b, &mut pos, 1)?), 0, 0),
            0xda => (Some(be(b, &mut pos, 2)?), 0, 0),
            0xdb => (Some(be(b, &mut pos, 4)?), 0, 0),
            0xdc => (None, 0, be(b, &mut pos, 2)?),
            0xdd => (None, 0, be(b, &mut pos, 4)?),
            0xde => (None, 0, 2 * be(b, &mut pos, 2)?),
            0xdf => (None, 0, 2 * be(b, &mut pos, 4)?),
            0xc1 => return Err("msgpack: reserved marker 0xc1".into()),
        };
        if let Some(n) = strlen {
            std::str::from_utf8(take(b, &mut pos, n)?)?;
        } else if skip > 0 {
            take(b, &mut pos, skip)?;
        }
        left = left.checked_add(children).ok_or("msgpack: length overflow")?;
        if left > b.len() - pos {
            return Err("msgpack: more items than bytes".into());
        }
    }
    if pos != b.len() {
        return Err("msgpack: trailing bytes".into());
    }
    Ok(items)
}

/// Checks that `b` is one JSON value without building it.
pub fn walk_json(b: &[u8]) -> Res<()> {
    serde_json::from_slice::<serde::de::IgnoredAny>(b)?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

/// One stored checkpoint of the memory floor.
pub type MemTuple = (Checkpoint, CheckpointMetadata, Option<String>);
/// The writes of one `put_writes` call: task id and (channel, value)s.
pub type MemWrites = (String, Vec<(String, Value)>);

#[derive(Default)]
pub struct MemNs {
    cps: BTreeMap<String, Arc<MemTuple>>,
    writes: BTreeMap<String, Vec<Arc<MemWrites>>>,
}

/// Nested maps thread → namespace → checkpoint id.
#[derive(Default)]
pub struct MemFloor {
    threads: BTreeMap<String, BTreeMap<String, MemNs>>,
}

/// What a memory floor read hands out: `Arc` clones, as a saver whose
/// records are shared would.
pub type MemRead = (Arc<MemTuple>, Option<Vec<Arc<MemWrites>>>);

impl MemFloor {
    fn ns_mut(&mut self, thread: &str, ns: &str) -> &mut MemNs {
        if !self.threads.contains_key(thread) {
            self.threads.insert(thread.to_owned(), BTreeMap::new());
        }
        let t = self.threads.get_mut(thread).expect("inserted above");
        if !t.contains_key(ns) {
            t.insert(ns.to_owned(), MemNs::default());
        }
        t.get_mut(ns).expect("inserted above")
    }

    fn ns(&self, thread: &str, ns: &str) -> Option<&MemNs> {
        self.threads.get(thread)?.get(ns)
    }

    /// delete_thread's floor: the thread's map out, then dropped.
    pub fn delete_thread(&mut self, thread: &str) -> bool {
        self.threads.remove(thread).is_some()
    }

    pub fn put(&mut self, thread: &str, ns: &str, id: &str, tuple: Arc<MemTuple>) {
        self.ns_mut(thread, ns).cps.insert(id.to_owned(), tuple);
    }

    pub fn put_writes(&mut self, thread: &str, ns: &str, id: &str, writes: Arc<MemWrites>) {
        let n = self.ns_mut(thread, ns);
        match n.writes.get_mut(id) {
            Some(v) => v.push(writes),
            None => {
                n.writes.insert(id.to_owned(), vec![writes]);
            }
        }
    }

    fn read(n: &MemNs, id: &str, cp: &Arc<MemTuple>) -> MemRead {
        (Arc::clone(cp), n.writes.get(id).cloned())
    }

    pub fn get(&self, thread: &str, ns: &str, id: Option<&str>) -> Option<MemRead> {
        let n = self.ns(thread, ns)?;
        match id {
            Some(id) => n.cps.get_key_value(id),
            None => n.cps.last_key_value(),
        }
        .map(|(id, cp)| Self::read(n, id, cp))
    }

    pub fn list(&self, thread: &str, ns: &str, limit: usize) -> Vec<MemRead> {
        let Some(n) = self.ns(thread, ns) else {
            return Vec::new();
        };
        n.cps
            .iter()
            .rev()
            .take(limit)
            .map(|(id, cp)| Self::read(n, id, cp))
            .collect()
    }
}

// ---------------------------------------------------------------------------
// SQLite
// ---------------------------------------------------------------------------

const SQLITE_CP_COLS: &str =
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata";
const SQLITE_W_COLS: &str = "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value";

type SqlRow = Vec<rusqlite::types::Value>;

fn sql_row(r: &rusqlite::Row<'_>, n: usize) -> rusqlite::Result<SqlRow> {
    (0..n).map(|i| r.get(i)).collect()
}

/// A blob column of a row, walked in place.
fn walk_sql_blob(r: &rusqlite::Row<'_>, i: usize) -> Res<()> {
    match r.get_ref(i)? {
        rusqlite::types::ValueRef::Blob(b) if !b.is_empty() => {
            walk_msgpack(b)?;
        }
        _ => {}
    }
    Ok(())
}

pub struct SqliteFloor {
    /// the saver's file, read back (untimed) for the rows to insert
    source: rusqlite::Connection,
    /// the floor's own file
    conn: rusqlite::Connection,
}

impl SqliteFloor {
    /// `saver_file` is read for the rows; the floor writes `floor_file`.
    pub fn open(saver_file: &Path, floor_file: &Path, mmap_size: u64) -> Res<SqliteFloor> {
        let source = rusqlite::Connection::open_with_flags(
            saver_file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // LangGraph's tables (spec §7.1), nothing else: the crate's own
        // setup without its extra indexes
        drop(
            checkpointer::sqlite::SqliteSaver::builder(floor_file)
                .extra_indexes(false)
                .build()?,
        );
        let conn = rusqlite::Connection::open(floor_file)?;
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
        conn.execute_batch(&format!("PRAGMA synchronous = FULL; PRAGMA mmap_size = {mmap_size};"))?;
        Ok(SqliteFloor { source, conn })
    }

    /// The checkpoint row the saver stored (untimed).
    pub fn stored_checkpoint(&self, thread: &str, ns: &str, id: &str) -> Res<SqlRow> {
        let mut st = self.source.prepare_cached(&format!(
            "SELECT {SQLITE_CP_COLS} FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
        ))?;
        Ok(st.query_row([thread, ns, id], |r| sql_row(r, 7))?)
    }

    /// The write rows of one task the saver stored (untimed).
    pub fn stored_writes(&self, thread: &str, ns: &str, id: &str, task: &str) -> Res<Vec<SqlRow>> {
        let mut st = self.source.prepare_cached(&format!(
            "SELECT {SQLITE_W_COLS} FROM writes WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 \
             AND task_id = ?4 ORDER BY idx"
        ))?;
        let rows = st
            .query_map([thread, ns, id, task], |r| sql_row(r, 9))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// put's floor: one `INSERT OR REPLACE`, one `BEGIN IMMEDIATE` transaction
    /// (as the saver's writer).
    pub fn put(&mut self, row: &SqlRow) -> Res<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.prepare_cached(&format!(
            "INSERT OR REPLACE INTO checkpoints ({SQLITE_CP_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ))?
        .execute(rusqlite::params_from_iter(row.iter()))?;
        tx.commit()?;
        Ok(())
    }

    /// put_writes' floor: one `INSERT OR IGNORE` per write, one `BEGIN
    /// IMMEDIATE` transaction.
    pub fn put_writes(&mut self, rows: &[SqlRow]) -> Res<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut st = tx.prepare_cached(&format!(
                "INSERT OR IGNORE INTO writes ({SQLITE_W_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ))?;
            for r in rows {
                st.execute(rusqlite::params_from_iter(r.iter()))?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// delete_thread's floor: Python's two `DELETE`s by `thread_id`, one
    /// `BEGIN IMMEDIATE` transaction; the checkpoints removed.
    pub fn delete_thread(&mut self, thread: &str) -> Res<usize> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let n = tx
            .prepare_cached("DELETE FROM checkpoints WHERE thread_id = ?1")?
            .execute([thread])?;
        tx.prepare_cached("DELETE FROM writes WHERE thread_id = ?1")?
            .execute([thread])?;
        tx.commit()?;
        Ok(n)
    }

    /// Walks the writes of checkpoints `lo..=hi`; returns how many.
    fn writes_between(&self, thread: &str, ns: &str, lo: &str, hi: &str) -> Res<usize> {
        let mut st = self.conn.prepare_cached(
            "SELECT checkpoint_id, task_id, channel, type, value, task_path, idx FROM writes \
             WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id >= ?3 AND checkpoint_id <= ?4",
        )?;
        let mut rows = st.query([thread, ns, lo, hi])?;
        let mut n = 0;
        while let Some(r) = rows.next()? {
            walk_sql_blob(r, 4)?;
            n += 1;
        }
        Ok(n)
    }

    /// get_tuple's floor: the checkpoint row (latest or by id), its writes,
    /// every blob walked. Returns (checkpoint id, writes).
    pub fn get(&self, thread: &str, ns: &str, id: Option<&str>) -> Res<Option<(String, usize)>> {
        let sql = match id {
            Some(_) => {
                "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
            }
            None => {
                "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 ORDER BY checkpoint_id DESC LIMIT 1"
            }
        };
        let mut st = self.conn.prepare_cached(sql)?;
        let mut rows = match id {
            Some(id) => st.query([thread, ns, id])?,
            None => st.query([thread, ns])?,
        };
        let Some(r) = rows.next()? else {
            return Ok(None);
        };
        let cid: String = r.get(0)?;
        walk_sql_blob(r, 3)?;
        if let rusqlite::types::ValueRef::Blob(m) = r.get_ref(4)? {
            walk_json(m)?;
        }
        drop(rows);
        let n = self.writes_between(thread, ns, &cid, &cid)?;
        Ok(Some((cid, n)))
    }

    /// list(limit)'s floor: `limit` checkpoint rows newest first, then the
    /// writes of that id range in one query; every blob walked. Returns the
    /// number of checkpoints.
    pub fn list(&self, thread: &str, ns: &str, limit: usize) -> Res<usize> {
        let mut st = self.conn.prepare_cached(
            "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints \
             WHERE thread_id = ?1 AND checkpoint_ns = ?2 ORDER BY checkpoint_id DESC LIMIT ?3",
        )?;
        let mut rows = st.query(rusqlite::params![thread, ns, limit as i64])?;
        let (mut hi, mut lo) = (None::<String>, None::<String>);
        let mut n = 0;
        while let Some(r) = rows.next()? {
            let cid: String = r.get(0)?;
            walk_sql_blob(r, 3)?;
            if let rusqlite::types::ValueRef::Blob(m) = r.get_ref(4)? {
                walk_json(m)?;
            }
            if hi.is_none() {
                hi = Some(cid.clone());
            }
            lo = Some(cid);
            n += 1;
        }
        drop(rows);
        if let (Some(lo), Some(hi)) = (lo, hi) {
            self.writes_between(thread, ns, &lo, &hi)?;
        }
        Ok(n)
    }
}

// ---------------------------------------------------------------------------
// Postgres
// ---------------------------------------------------------------------------

/// Any column's raw wire bytes (binary format), borrowed from the row.
struct Raw<'a>(&'a [u8]);

impl<'a> tokio_postgres::types::FromSql<'a> for Raw<'a> {
    fn from_sql(_: &tokio_postgres::types::Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(Raw(raw))
    }

    fn accepts(_: &tokio_postgres::types::Type) -> bool {
        true
    }
}

/// A jsonb column in binary format: version byte 1, then the JSON text.
fn walk_jsonb(raw: Option<Raw<'_>>) -> Res<()> {
    if let Some(Raw(b)) = raw {
        match b.split_first() {
            Some((1, json)) => walk_json(json)?,
            _ => return Err("jsonb: unknown binary version".into()),
        }
    }
    Ok(())
}

/// The rows one put stored, as the floor inserts them.
pub struct PgPutRows {
    thread: String,
    ns: String,
    id: String,
    parent: Option<String>,
    checkpoint: String,
    metadata: String,
    channels: Vec<String>,
    versions: Vec<String>,
    types: Vec<String>,
    blobs: Vec<Option<Vec<u8>>>,
}

/// The write rows of one put_writes call.
pub struct PgWriteRows {
    thread: String,
    ns: String,
    id: String,
    task: String,
    task_path: String,
    idx: Vec<i32>,
    channels: Vec<String>,
    types: Vec<Option<String>>,
    blobs: Vec<Vec<u8>>,
}

pub struct PgFloor {
    client: tokio_postgres::Client,
    put: tokio_postgres::Statement,
    put_writes: tokio_postgres::Statement,
    get_latest: tokio_postgres::Statement,
    get_by_id: tokio_postgres::Statement,
    list10: tokio_postgres::Statement,
    read_cp: tokio_postgres::Statement,
    read_blobs: tokio_postgres::Statement,
    read_writes: tokio_postgres::Statement,
    delete: [tokio_postgres::Statement; 3],
}

/// One statement: the checkpoint rows chosen by `pick`, each blob of their
/// channel versions by primary key, and their writes by primary-key prefix.
/// The lateral subqueries (`LIMIT 1` on a unique key, `OFFSET 0`) keep the
/// planner from hashing the thread's whole blob or writes table instead of
/// probing the primary key once per row.
fn pg_read_sql(pick: &str) -> String {
    format!(
        "WITH c AS (SELECT checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM floor.checkpoints \
           WHERE thread_id = $1 AND checkpoint_ns = $2 {pick}) \
         SELECT 0::int2 AS k, c.checkpoint_id, c.parent_checkpoint_id AS s1, NULL::text AS s2, NULL::text AS s3, \
                NULL::text AS s4, c.checkpoint AS j1, c.metadata AS j2, NULL::bytea AS blob, NULL::int4 AS idx FROM c \
         UNION ALL \
         SELECT 1::int2, c.checkpoint_id, v.key, b.type, NULL, NULL, NULL, NULL, b.blob, NULL \
           FROM c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') v \
           CROSS JOIN LATERAL (SELECT type, blob FROM floor.checkpoint_blobs \
             WHERE thread_id = $1 AND checkpoint_ns = $2 AND channel = v.key AND version = v.value LIMIT 1) b \
         UNION ALL \
         SELECT 2::int2, c.checkpoint_id, w.task_id, w.channel, w.type, w.task_path, NULL, NULL, w.blob, w.idx \
           FROM c CROSS JOIN LATERAL (SELECT task_id, channel, type, task_path, blob, idx FROM floor.checkpoint_writes \
             WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = c.checkpoint_id OFFSET 0) w"
    )
}

impl PgFloor {
    /// Connects to `url` (the saver's database) and (re)creates schema
    /// `floor` there.
    pub async fn open(url: &str) -> Res<PgFloor> {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("[workload] floor connection: {e}");
            }
        });
        client.batch_execute("SET client_min_messages = warning").await?;
        client
            .batch_execute("DROP SCHEMA IF EXISTS floor CASCADE; CREATE SCHEMA floor")
            .await?;
        // LangGraph's tables after all migrations (spec §8.1), in schema
        // `floor`: the crate's own setup on a connection whose search path
        // is that schema
        let mut config: tokio_postgres::Config = url.parse()?;
        config.options("-c search_path=floor");
        drop(
            checkpointer::postgres::PostgresSaver::builder()
                .config(config)
                .max_connections(1)
                .open()
                .await?,
        );
        let put = client
            .prepare(
                "WITH b AS (INSERT INTO floor.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
                   SELECT $1, $2, u.c, u.v, u.t, u.b FROM unnest($5::text[], $6::text[], $7::text[], $8::bytea[]) \
                   AS u(c, v, t, b) ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING) \
                 INSERT INTO floor.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
                   checkpoint, metadata) VALUES ($1, $2, $3, $4, $9::text::jsonb, $10::text::jsonb) \
                 ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) \
                 DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata",
            )
            .await?;
        let put_writes = client
            .prepare(
                "INSERT INTO floor.checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, \
                   idx, channel, type, blob) \
                 SELECT $1, $2, $3, $4, $5, u.i, u.c, u.t, u.b \
                   FROM unnest($6::int4[], $7::text[], $8::text[], $9::bytea[]) AS u(i, c, t, b) \
                 ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING",
            )
            .await?;
        let get_latest = client
            .prepare(&pg_read_sql("ORDER BY checkpoint_id DESC LIMIT 1"))
            .await?;
        let get_by_id = client.prepare(&pg_read_sql("AND checkpoint_id = $3")).await?;
        let list10 = client
            .prepare(&pg_read_sql("ORDER BY checkpoint_id DESC LIMIT 10"))
            .await?;
        let read_cp = client
            .prepare(
                "SELECT parent_checkpoint_id, checkpoint::text, metadata::text FROM public.checkpoints \
                 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
            )
            .await?;
        let read_blobs = client
            .prepare(
                "SELECT b.channel, b.version, b.type, b.blob FROM public.checkpoint_blobs b \
                 JOIN unnest($3::text[], $4::text[]) AS u(c, v) ON b.channel = u.c AND b.version = u.v \
                 WHERE b.thread_id = $1 AND b.checkpoint_ns = $2",
            )
            .await?;
        let read_writes = client
            .prepare(
                "SELECT task_path, idx, channel, type, blob FROM public.checkpoint_writes \
                 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 AND task_id = $4 ORDER BY idx",
            )
            .await?;
        let mut delete = Vec::new();
        for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
            delete.push(
                client
                    .prepare(&format!("DELETE FROM floor.{table} WHERE thread_id = $1"))
                    .await?,
            );
        }
        let delete: [tokio_postgres::Statement; 3] = delete.try_into().map_err(|_| "three statements")?;
        Ok(PgFloor {
            client,
            put,
            put_writes,
            get_latest,
            get_by_id,
            list10,
            read_cp,
            read_blobs,
            read_writes,
            delete,
        })
    }

    /// The rows the saver's put stored (untimed): its checkpoint row and the
    /// blob rows of `new_versions`.
    pub async fn stored_put(
        &self,
        thread: &str,
        ns: &str,
        id: &str,
        new_versions: &[(String, String)],
    ) -> Res<PgPutRows> {
        let row = self.client.query_one(&self.read_cp, &[&thread, &ns, &id]).await?;
        let (chs, vers): (Vec<&str>, Vec<&str>) = new_versions.iter().map(|(c, v)| (c.as_str(), v.as_str())).unzip();
        let blobs = self
            .client
            .query(&self.read_blobs, &[&thread, &ns, &chs, &vers])
            .await?;
        let mut out = PgPutRows {
            thread: thread.to_owned(),
            ns: ns.to_owned(),
            id: id.to_owned(),
            parent: row.get(0),
            checkpoint: row.get(1),
            metadata: row.get(2),
            channels: Vec::new(),
            versions: Vec::new(),
            types: Vec::new(),
            blobs: Vec::new(),
        };
        for b in blobs {
            out.channels.push(b.get(0));
            out.versions.push(b.get(1));
            out.types.push(b.get(2));
            out.blobs.push(b.get(3));
        }
        Ok(out)
    }

    /// The write rows of one task the saver stored (untimed).
    pub async fn stored_writes(&self, thread: &str, ns: &str, id: &str, task: &str) -> Res<PgWriteRows> {
        let rows = self
            .client
            .query(&self.read_writes, &[&thread, &ns, &id, &task])
            .await?;
        let mut out = PgWriteRows {
            thread: thread.to_owned(),
            ns: ns.to_owned(),
            id: id.to_owned(),
            task: task.to_owned(),
            task_path: String::new(),
            idx: Vec::new(),
            channels: Vec::new(),
            types: Vec::new(),
            blobs: Vec::new(),
        };
        for r in rows {
            out.task_path = r.get(0);
            out.idx.push(r.get(1));
            out.channels.push(r.get(2));
            out.types.push(r.get(3));
            out.blobs.push(r.get(4));
        }
        Ok(out)
    }

    /// put's floor: one statement, one commit.
    pub async fn put(&self, r: &PgPutRows) -> Res<()> {
        self.client
            .execute(
                &self.put,
                &[
                    &r.thread,
                    &r.ns,
                    &r.id,
                    &r.parent,
                    &r.channels,
                    &r.versions,
                    &r.types,
                    &r.blobs,
                    &r.checkpoint,
                    &r.metadata,
                ],
            )
            .await?;
        Ok(())
    }

    /// put_writes' floor: one statement, one commit.
    pub async fn put_writes(&self, r: &PgWriteRows) -> Res<()> {
        self.client
            .execute(
                &self.put_writes,
                &[
                    &r.thread,
                    &r.ns,
                    &r.id,
                    &r.task,
                    &r.task_path,
                    &r.idx,
                    &r.channels,
                    &r.types,
                    &r.blobs,
                ],
            )
            .await?;
        Ok(())
    }

    /// delete_thread's floor: the three bare `DELETE … WHERE thread_id =
    /// $1` statements in one transaction, `BEGIN` to `COMMIT` pipelined
    /// (one round trip, one commit); the checkpoints removed.
    pub async fn delete_thread(&self, thread: &str) -> Res<u64> {
        let c = &self.client;
        let p: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&thread];
        let (begin, cps, blobs, writes, commit) = tokio::join!(
            c.batch_execute("BEGIN"),
            c.execute(&self.delete[0], &p),
            c.execute(&self.delete[1], &p),
            c.execute(&self.delete[2], &p),
            c.batch_execute("COMMIT"),
        );
        begin?;
        let n = cps?;
        blobs?;
        writes?;
        commit?;
        Ok(n)
    }

    /// Runs one read statement and walks every row; returns (checkpoints,
    /// writes, id of the first checkpoint).
    async fn read(
        &self,
        st: &tokio_postgres::Statement,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Res<(usize, usize, Option<String>)> {
        let rows = self.client.query(st, params).await?;
        let (mut cps, mut writes, mut first) = (0, 0, None);
        for r in &rows {
            let k: i16 = r.get(0);
            match k {
                0 => {
                    if first.is_none() {
                        first = Some(r.get::<_, String>(1));
                    }
                    walk_jsonb(r.get(6))?;
                    walk_jsonb(r.get(7))?;
                    cps += 1;
                }
                _ => {
                    if let Some(Raw(b)) = r.get::<_, Option<Raw<'_>>>(8) {
                        if !b.is_empty() {
                            walk_msgpack(b)?;
                        }
                    }
                    if k == 2 {
                        writes += 1;
                    }
                }
            }
        }
        Ok((cps, writes, first))
    }

    /// get_tuple's floor (latest or by id): (checkpoint id, writes).
    pub async fn get(&self, thread: &str, ns: &str, id: Option<&str>) -> Res<Option<(String, usize)>> {
        let (_, writes, first) = match id {
            Some(id) => self.read(&self.get_by_id, &[&thread, &ns, &id]).await?,
            None => self.read(&self.get_latest, &[&thread, &ns]).await?,
        };
        Ok(first.map(|id| (id, writes)))
    }

    /// list(limit = 10)'s floor: the number of checkpoints.
    pub async fn list10(&self, thread: &str, ns: &str) -> Res<usize> {
        Ok(self.read(&self.list10, &[&thread, &ns]).await?.0)
    }

    pub async fn drop_schema(&self) -> Res<()> {
        self.client.batch_execute("DROP SCHEMA IF EXISTS floor CASCADE").await?;
        Ok(())
    }
}
