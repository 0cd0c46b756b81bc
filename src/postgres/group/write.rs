//! One member of a group commit: a statement and the values it binds,
//! owned, so that a runner task may send it. Every member is one statement,
//! hence atomic on its own: a `put`, a `put_writes` batch, an atomic step
//! (its writes and its checkpoint), and the fenced forms of these and of
//! `delete_thread`, whose lease check is the statement's first part (see
//! [`queries::PUT_FENCED`]): a refused one stores nothing and returns no
//! row, and fails alone ([`Write::answer`]) while its group commits.

use std::collections::{HashMap, HashSet};
use std::error::Error as StdError;

use bytes::{Bytes, BytesMut};
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use super::super::conn::{JsonbParam, Param};
use super::super::error::DbError;
use super::super::rows::PutRows;
use super::super::{jsonb, queries};
use crate::engine::{FenceToken, WriteBatch};
use crate::error::{Error, Result};
use crate::serde::TypedBytes;

/// A `bytea` parameter sharing the caller's buffer.
#[derive(Debug)]
pub(crate) struct BytesParam(pub(crate) Bytes);

impl ToSql for BytesParam {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::BYTEA
    }

    to_sql_checked!();
}

/// One write (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct Write {
    what: What,
    /// A fenced write's lease check.
    fence: Option<Check>,
}

#[derive(Debug)]
enum What {
    Put(PutRow),
    Writes(WritesRow),
    /// An atomic step: the step's writes and its checkpoint.
    Step(PutRow, StepWrites),
    DeleteThread(String),
}

/// The values of [`queries::PUT`], `$1..$11`.
#[derive(Debug)]
struct PutRow {
    thread_id: String,
    ns: String,
    id: String,
    parent: Option<String>,
    checkpoint: JsonbParam,
    metadata: JsonbParam,
    blob_channels: Vec<String>,
    blob_versions: Vec<String>,
    blob_types: Vec<String>,
    blob_data: Vec<Option<BytesParam>>,
    unwritten: Vec<String>,
}

/// The values of [`queries::PUT_WRITES`], `$1..$9`.
#[derive(Debug)]
struct WritesRow {
    thread_id: String,
    ns: String,
    checkpoint_id: String,
    task_id: String,
    task_path: String,
    idxs: Vec<i32>,
    channels: Vec<String>,
    tags: Vec<String>,
    blobs: Vec<BytesParam>,
}

/// The writes of an atomic step, every task's, after the put's values
/// (`$12..$18` of [`queries::STEP`]).
#[derive(Debug, Default)]
struct StepWrites {
    checkpoint_id: String,
    task_ids: Vec<String>,
    task_paths: Vec<String>,
    idxs: Vec<i32>,
    channels: Vec<String>,
    tags: Vec<String>,
    blobs: Vec<BytesParam>,
}

/// The lease check of a fenced write: its parameters follow the write's.
#[derive(Debug)]
struct Check {
    writer: String,
    epoch: i64,
    lease: i64,
    token: FenceToken,
}

fn p<'a>(value: &'a (dyn ToSql + Sync), ty: Type) -> Param<'a> {
    (value, ty)
}

fn int8(n: u64, what: &str) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::invalid(format!("{what} {n} is beyond PostgreSQL's bigint")))
}

fn check(fence: Option<&FenceToken>) -> Result<Option<Check>> {
    fence
        .map(|token| {
            Ok(Check {
                writer: token.writer.to_string(),
                epoch: int8(token.epoch, "epoch")?,
                lease: int8(token.lease_ms, "lease")?,
                token: token.clone(),
            })
        })
        .transpose()
}

fn idx(i: i64) -> Result<i32> {
    i32::try_from(i).map_err(|_| Error::invalid(format!("write index {i} is beyond PostgreSQL's integer")))
}

/// A batch's keys and names checked for what PostgreSQL's text columns hold.
fn check_batch(batch: &WriteBatch<'_, TypedBytes>) -> Result<()> {
    for (text, what) in [
        (batch.thread_id, "thread_id"),
        (batch.checkpoint_ns, "checkpoint_ns"),
        (batch.checkpoint_id, "checkpoint id"),
        (batch.task_id, "task_id"),
        (batch.task_path, "task_path"),
    ] {
        jsonb::check_text(text, what)?;
    }
    batch
        .writes
        .iter()
        .try_for_each(|w| jsonb::check_text(&w.channel, "channel name"))
}

impl Write {
    /// An unfenced `put`.
    pub(crate) fn put(thread_id: &str, ns: &str, id: &str, parent: Option<&str>, rows: PutRows) -> Write {
        Write {
            what: What::Put(PutRow {
                thread_id: thread_id.to_owned(),
                ns: ns.to_owned(),
                id: id.to_owned(),
                parent: parent.map(str::to_owned),
                checkpoint: JsonbParam(rows.checkpoint),
                metadata: JsonbParam(rows.metadata),
                blob_channels: rows.blob_channels,
                blob_versions: rows.blob_versions,
                blob_types: rows.blob_types,
                blob_data: rows.blob_data.into_iter().map(|d| d.map(BytesParam)).collect(),
                unwritten: rows.unwritten,
            }),
            fence: None,
        }
    }

    /// This write, checked against `fence`'s lease when given.
    pub(crate) fn fenced(mut self, fence: Option<&FenceToken>) -> Result<Write> {
        self.fence = check(fence)?;
        Ok(self)
    }

    /// The writes of a `put_writes` batch (fenced when the batch is).
    pub(crate) fn writes(batch: WriteBatch<'_, TypedBytes>) -> Result<Write> {
        check_batch(&batch)?;
        let n = batch.writes.len();
        let (mut idxs, mut channels, mut tags, mut blobs) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for w in batch.writes {
            idxs.push(idx(w.idx)?);
            channels.push(w.channel);
            tags.push(w.value.tag);
            blobs.push(BytesParam(w.value.data));
        }
        Ok(Write {
            what: What::Writes(WritesRow {
                thread_id: batch.thread_id.to_owned(),
                ns: batch.checkpoint_ns.to_owned(),
                checkpoint_id: batch.checkpoint_id.to_owned(),
                task_id: batch.task_id.to_owned(),
                task_path: batch.task_path.to_owned(),
                idxs,
                channels,
                tags,
                blobs,
            }),
            fence: check(batch.fence)?,
        })
    }

    /// An atomic step: `put` (a [`Write::put`], fenced or not) and the
    /// step's write batches, every one of `put`'s thread and namespace and
    /// of one checkpoint, as one statement. A task that comes back in a
    /// later batch with an index an earlier batch wrote is stored as the
    /// batches one after the other would: a special write (negative index)
    /// replaces, a regular one keeps what is there.
    pub(crate) fn step(put: Write, batches: Vec<WriteBatch<'_, TypedBytes>>) -> Result<Write> {
        let Write {
            what: What::Put(row),
            fence,
        } = put
        else {
            return Err(Error::invalid("an atomic step is a put with writes"));
        };
        let mut writes = StepWrites::default();
        // (task, idx) -> (batch, position) of a write, when a task id comes back
        let mut seen: Option<HashMap<(String, i32), (usize, usize)>> = None;
        let mut tasks: HashSet<&str> = HashSet::with_capacity(batches.len());
        for (b, batch) in batches.into_iter().enumerate() {
            check_batch(&batch)?;
            if batch.thread_id != row.thread_id || batch.checkpoint_ns != row.ns {
                return Err(Error::invalid(
                    "an atomic step's writes are of its thread and namespace",
                ));
            }
            if b == 0 {
                writes.checkpoint_id = batch.checkpoint_id.to_owned();
            } else if batch.checkpoint_id != writes.checkpoint_id {
                return Err(Error::invalid("an atomic step's writes are of one checkpoint"));
            }
            if seen.is_none() && tasks.contains(batch.task_id) {
                let mut map = HashMap::new();
                for (at, (task, &i)) in writes.task_ids.iter().zip(&writes.idxs).enumerate() {
                    map.entry((task.clone(), i)).or_insert((0, at));
                }
                seen = Some(map);
            }
            for w in batch.writes {
                let i = idx(w.idx)?;
                if let Some(seen) = seen.as_mut() {
                    match seen.get(&(batch.task_id.to_owned(), i)) {
                        Some(&(earlier, at)) if earlier < b => {
                            if i < 0 {
                                writes.task_paths[at] = batch.task_path.to_owned();
                                writes.channels[at] = w.channel;
                                writes.tags[at] = w.value.tag;
                                writes.blobs[at] = BytesParam(w.value.data);
                            }
                            continue;
                        }
                        Some(_) => {}
                        None => {
                            seen.insert((batch.task_id.to_owned(), i), (b, writes.idxs.len()));
                        }
                    }
                }
                writes.task_ids.push(batch.task_id.to_owned());
                writes.task_paths.push(batch.task_path.to_owned());
                writes.idxs.push(i);
                writes.channels.push(w.channel);
                writes.tags.push(w.value.tag);
                writes.blobs.push(BytesParam(w.value.data));
            }
            tasks.insert(batch.task_id);
        }
        Ok(Write {
            what: What::Step(row, writes),
            fence,
        })
    }

    /// A fenced `delete_thread`.
    pub(crate) fn delete_thread(thread_id: &str, fence: &FenceToken) -> Result<Write> {
        jsonb::check_text(thread_id, "thread_id")?;
        Ok(Write {
            what: What::DeleteThread(thread_id.to_owned()),
            fence: check(Some(fence))?,
        })
    }

    /// The thread of a write that stores a checkpoint (a put or a step).
    pub(crate) fn put_thread(&self) -> Option<&str> {
        match &self.what {
            What::Put(row) | What::Step(row, _) => Some(&row.thread_id),
            What::Writes(_) | What::DeleteThread(_) => None,
        }
    }

    /// The thread of a fenced write, whose lease it checks.
    pub(crate) fn fence_thread(&self) -> Option<&str> {
        self.fence.as_ref()?;
        Some(match &self.what {
            What::Put(row) | What::Step(row, _) => &row.thread_id,
            What::Writes(row) => &row.thread_id,
            What::DeleteThread(thread_id) => thread_id,
        })
    }

    /// Whether [`Write::sql`] depends on the server's LZ4 support.
    pub(crate) fn stores_checkpoint(&self) -> bool {
        self.put_thread().is_some()
    }

    pub(crate) fn sql(&self, lz4: bool) -> &'static str {
        match (&self.what, lz4, self.fence.is_some()) {
            (What::Put(_), false, false) => queries::PUT,
            (What::Put(_), true, false) => queries::PUT_LZ4,
            (What::Put(_), false, true) => queries::PUT_FENCED,
            (What::Put(_), true, true) => queries::PUT_LZ4_FENCED,
            (What::Step(..), false, false) => queries::STEP,
            (What::Step(..), true, false) => queries::STEP_LZ4,
            (What::Step(..), false, true) => queries::STEP_FENCED,
            (What::Step(..), true, true) => queries::STEP_LZ4_FENCED,
            (What::Writes(_), _, false) => queries::PUT_WRITES,
            (What::Writes(_), _, true) => queries::PUT_WRITES_FENCED,
            (What::DeleteThread(_), _, false) => queries::DELETE_THREAD,
            (What::DeleteThread(_), _, true) => queries::DELETE_THREAD_FENCED,
        }
    }

    pub(crate) fn params(&self) -> Vec<Param<'_>> {
        let mut params: Vec<Param<'_>> = Vec::with_capacity(21);
        match &self.what {
            What::Put(row) => row.params(&mut params),
            What::Step(row, writes) => {
                row.params(&mut params);
                params.extend([
                    p(&writes.checkpoint_id, Type::TEXT),
                    p(&writes.task_ids, Type::TEXT_ARRAY),
                    p(&writes.task_paths, Type::TEXT_ARRAY),
                    p(&writes.idxs, Type::INT4_ARRAY),
                    p(&writes.channels, Type::TEXT_ARRAY),
                    p(&writes.tags, Type::TEXT_ARRAY),
                    p(&writes.blobs, Type::BYTEA_ARRAY),
                ]);
            }
            What::Writes(row) => params.extend([
                p(&row.thread_id, Type::TEXT),
                p(&row.ns, Type::TEXT),
                p(&row.checkpoint_id, Type::TEXT),
                p(&row.task_id, Type::TEXT),
                p(&row.task_path, Type::TEXT),
                p(&row.idxs, Type::INT4_ARRAY),
                p(&row.channels, Type::TEXT_ARRAY),
                p(&row.tags, Type::TEXT_ARRAY),
                p(&row.blobs, Type::BYTEA_ARRAY),
            ]),
            What::DeleteThread(thread_id) => params.push(p(thread_id, Type::TEXT)),
        }
        if let Some(check) = &self.fence {
            params.extend([
                p(&check.writer, Type::TEXT),
                p(&check.epoch, Type::INT8),
                p(&check.lease, Type::INT8),
            ]);
        }
        params
    }

    /// The caller's outcome of this write's statement, which returned
    /// `rows` rows: a fenced write returns its lease's epoch, or no row
    /// when the lease check refused it (then it stored nothing).
    pub(crate) fn answer(&self, rows: usize) -> Result<(), DbError> {
        match (&self.fence, self.fence_thread()) {
            (Some(check), Some(thread)) if rows == 0 => Err(DbError::Crate(check.token.refused(thread))),
            _ => Ok(()),
        }
    }
}

impl PutRow {
    fn params<'a>(&'a self, params: &mut Vec<Param<'a>>) {
        params.extend([
            p(&self.thread_id, Type::TEXT),
            p(&self.ns, Type::TEXT),
            p(&self.id, Type::TEXT),
            p(&self.parent, Type::TEXT),
            p(&self.checkpoint, Type::JSONB),
            p(&self.metadata, Type::JSONB),
            p(&self.blob_channels, Type::TEXT_ARRAY),
            p(&self.blob_versions, Type::TEXT_ARRAY),
            p(&self.blob_types, Type::TEXT_ARRAY),
            p(&self.blob_data, Type::BYTEA_ARRAY),
            p(&self.unwritten, Type::TEXT_ARRAY),
        ]);
    }
}
