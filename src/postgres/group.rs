//! Group commit for `put` and `put_writes` (`docs/performance.md`,
//! *Postgres*): concurrent writers' statements share one transaction, so N
//! writers pay one WAL flush (`synchronous_commit = on`) instead of N.
//!
//! A write that finds no other write in flight runs alone, as one
//! autocommit statement on its own connection, exactly as without group
//! commit: a lone writer waits for no one. Writes that arrive while one is
//! in flight queue up; when it ends, a runner task takes everything queued
//! (up to [`MAX_GROUP`]) and sends it in one pipelined round trip: `BEGIN`,
//! each statement, `COMMIT`. Only after the `COMMIT` succeeds is each caller
//! answered, so every acknowledged write is durable; if the connection
//! breaks, every member of the group gets that error (whether the group
//! committed is unknown).
//!
//! Two refinements keep groups whole. A write that arrives when nothing is
//! in flight, but the last commit had several members and ended less than
//! [`QUIET`] ago, expects its company back (writers answered together come
//! back together): it starts a runner that waits for as many writes as that
//! commit had, for at most half that commit's time and [`GATHER_MAX`] (so
//! the wait never costs more than the commit it saves), instead of going
//! alone and leaving the others one more commit behind it. A lone writer's
//! last commit had one member, so it never waits. And a queued write never
//! waits on a slow one in flight (say one blocked on a lock) for long: past
//! [`ESCAPE`] it withdraws and goes alone.
//!
//! Each caller stays atomic: its write is one statement. When one member's
//! statement fails, PostgreSQL aborts the transaction (the later members
//! fail with `25P02` and the pipelined `COMMIT` rolls everything back);
//! that member gets its own error and the others are sent again, as the next
//! group, without it. So a failing request is rolled back alone, with no
//! `SAVEPOINT`: a savepoint per member would cost a second round trip per
//! group (the `COMMIT` could no longer be pipelined, since it must wait to
//! learn which savepoints to roll back) and a subtransaction per member
//! (more than 64 in one transaction overflow PostgreSQL's per-backend
//! subtransaction cache, which slows every snapshot on the server).
//!
//! A failure no one member's statement shows is no member's alone: the
//! `COMMIT` refused (a deferred constraint trigger, a serialization failure
//! at commit), the group's own thread-lock statement refused (a lock
//! timeout), or a member's statement failing because the group's
//! transaction as a whole conflicted with another (`40001`, `40P01`). The
//! server rolled the whole group back, so nothing of it is stored; then
//! the group is split in two and each half sent as a group of its own, and
//! so on down to single writes: the innocent still commit in groups (a
//! failure costs about two transactions per halving, not one per member),
//! and only the write at fault gets the error, from a transaction of its
//! own. Nothing is applied twice, since nothing of a failed attempt was.
//!
//! A caller whose call is dropped (its call timeout, or the future
//! abandoned) before a runner took its write withdraws it; once taken, the
//! write may commit, and the caller's timeout error says its outcome is
//! unknown. Every write is idempotent, so the retries this causes are safe.

use std::collections::VecDeque;
use std::error::Error as StdError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use deadpool_postgres::Object;
use futures::TryStreamExt;
use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use tokio_postgres::Statement;

use super::conn::{JsonbParam, Param, Pg, StatementMode};
use super::error::DbError;
use super::rows::PutRows;
use super::{jsonb, queries};
use crate::engine::WriteBatch;
use crate::error::{Error, Result};
use crate::serde::TypedBytes;

/// The most writes one shared transaction takes.
pub(crate) const MAX_GROUP: usize = 32;

/// How many writes (alone or groups) are in flight at most before new ones
/// queue. One: with more, concurrent writers split into smaller groups that
/// commit separately (16 writers: about twice the WAL flushes and no more
/// throughput with 2, `docs/performance.md`); a write stuck on the server
/// holds the others up for at most [`ESCAPE`].
pub(crate) const DEFAULT_UNITS: usize = 1;

/// How long after a commit with company a new write still expects some.
const QUIET: Duration = Duration::from_millis(5);

/// The longest a write waits for company (at most half the last commit's
/// time, so waiting never costs more than the commit it saves).
const GATHER_MAX: Duration = Duration::from_millis(2);

/// How long a queued write waits for the writes in flight before it goes
/// alone.
const ESCAPE: Duration = Duration::from_millis(20);

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

/// One write: the statement and the values it binds, owned, so that a
/// runner task may send it.
#[derive(Debug)]
pub(crate) enum Write {
    Put {
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
    },
    Writes {
        thread_id: String,
        ns: String,
        checkpoint_id: String,
        task_id: String,
        task_path: String,
        idxs: Vec<i32>,
        channels: Vec<String>,
        tags: Vec<String>,
        blobs: Vec<BytesParam>,
    },
}

impl Write {
    pub(crate) fn put(thread_id: &str, ns: &str, id: &str, parent: Option<&str>, rows: PutRows) -> Write {
        Write::Put {
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
        }
    }

    /// The writes of a `put_writes` batch, their keys and names checked
    /// for what PostgreSQL's text and integer columns hold.
    pub(crate) fn writes(batch: WriteBatch<'_, TypedBytes>) -> Result<Write> {
        for (text, what) in [
            (batch.thread_id, "thread_id"),
            (batch.checkpoint_ns, "checkpoint_ns"),
            (batch.checkpoint_id, "checkpoint id"),
            (batch.task_id, "task_id"),
            (batch.task_path, "task_path"),
        ] {
            jsonb::check_text(text, what)?;
        }
        let n = batch.writes.len();
        let (mut idxs, mut channels, mut tags, mut blobs) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for w in batch.writes {
            jsonb::check_text(&w.channel, "channel name")?;
            let idx = i32::try_from(w.idx)
                .map_err(|_| Error::invalid(format!("write index {} is beyond PostgreSQL's integer", w.idx)))?;
            idxs.push(idx);
            channels.push(w.channel);
            tags.push(w.value.tag);
            blobs.push(BytesParam(w.value.data));
        }
        Ok(Write::Writes {
            thread_id: batch.thread_id.to_owned(),
            ns: batch.checkpoint_ns.to_owned(),
            checkpoint_id: batch.checkpoint_id.to_owned(),
            task_id: batch.task_id.to_owned(),
            task_path: batch.task_path.to_owned(),
            idxs,
            channels,
            tags,
            blobs,
        })
    }

    /// The thread of a put.
    fn put_thread(&self) -> Option<&str> {
        match self {
            Write::Put { thread_id, .. } => Some(thread_id),
            Write::Writes { .. } => None,
        }
    }

    pub(crate) fn sql(&self, lz4: bool) -> &'static str {
        match self {
            Write::Put { .. } if lz4 => queries::PUT_LZ4,
            Write::Put { .. } => queries::PUT,
            Write::Writes { .. } => queries::PUT_WRITES,
        }
    }

    pub(crate) fn params(&self) -> Vec<Param<'_>> {
        match self {
            Write::Put {
                thread_id,
                ns,
                id,
                parent,
                checkpoint,
                metadata,
                blob_channels,
                blob_versions,
                blob_types,
                blob_data,
                unwritten,
            } => vec![
                (thread_id, Type::TEXT),
                (ns, Type::TEXT),
                (id, Type::TEXT),
                (parent, Type::TEXT),
                (checkpoint, Type::JSONB),
                (metadata, Type::JSONB),
                (blob_channels, Type::TEXT_ARRAY),
                (blob_versions, Type::TEXT_ARRAY),
                (blob_types, Type::TEXT_ARRAY),
                (blob_data, Type::BYTEA_ARRAY),
                (unwritten, Type::TEXT_ARRAY),
            ],
            Write::Writes {
                thread_id,
                ns,
                checkpoint_id,
                task_id,
                task_path,
                idxs,
                channels,
                tags,
                blobs,
            } => vec![
                (thread_id, Type::TEXT),
                (ns, Type::TEXT),
                (checkpoint_id, Type::TEXT),
                (task_id, Type::TEXT),
                (task_path, Type::TEXT),
                (idxs, Type::INT4_ARRAY),
                (channels, Type::TEXT_ARRAY),
                (tags, Type::TEXT_ARRAY),
                (blobs, Type::BYTEA_ARRAY),
            ],
        }
    }
}

struct Job {
    /// Tells the job from the others in the queue.
    seq: u64,
    write: Write,
    reply: oneshot::Sender<Result<(), DbError>>,
}

#[derive(Default)]
struct State {
    /// Writes waiting for the next group; never empty unless `units > 0`.
    queue: VecDeque<Job>,
    /// Writes running alone and runner tasks, in flight.
    units: usize,
    next_seq: u64,
    /// The size of the last write or group that committed, when, and how
    /// long it took: a write that finds the saver busy lately waits a little
    /// for company (see [`Pg::write`]).
    last: Option<(usize, Instant, Duration)>,
}

/// The group-commit queue of one saver.
pub(crate) struct Group {
    state: Mutex<State>,
    /// Signalled when a write queues.
    arrived: Notify,
    /// How many writes (alone, or groups) may be in flight before new ones
    /// queue for the next group.
    units: usize,
}

impl Group {
    pub(crate) fn new(units: usize) -> Group {
        Group {
            state: Mutex::new(State::default()),
            arrived: Notify::new(),
            units: units.max(1),
        }
    }
}

impl Pg {
    /// Runs one write: alone when fewer than [`Group::units`] are in
    /// flight, else in the next group (see the [module docs](self)). `sent`
    /// is set once the write may have reached the server.
    pub(super) async fn write(&self, write: Write, sent: &AtomicBool) -> Result<(), DbError> {
        let Some(group) = self.inner.group.as_ref() else {
            return self.write_alone(&write, sent).await;
        };
        let queued = {
            let mut st = group.state.lock();
            let now = Instant::now();
            // Company is likely when the last commit had some and was recent:
            // then this write gathers the next group rather than going alone
            // (and leaving the writers right behind it for one more commit).
            let gather = match st.last {
                Some((n, at, took)) if n > 1 && now.duration_since(at) < QUIET => {
                    Some((n.min(MAX_GROUP), now + (took / 2).min(GATHER_MAX)))
                }
                _ => None,
            };
            let runtime = tokio::runtime::Handle::try_current().ok();
            if st.units < group.units && (gather.is_none() || runtime.is_none()) {
                st.units += 1;
                Err(write)
            } else {
                let (tx, rx) = oneshot::channel();
                let seq = st.next_seq;
                st.next_seq += 1;
                st.queue.push_back(Job { seq, write, reply: tx });
                if st.units < group.units {
                    st.units += 1;
                    if let (Some(rt), Some(gather)) = (runtime, gather) {
                        rt.spawn(self.clone().run_groups(Some(gather)));
                    }
                } else {
                    group.arrived.notify_one();
                }
                Ok((rx, seq))
            }
        };
        let (mut rx, seq) = match queued {
            Ok(queued) => queued,
            Err(write) => {
                let _handover = Handover(self, Instant::now());
                return self.write_alone(&write, sent).await;
            }
        };
        let mut withdraw = Withdraw {
            pg: self,
            seq,
            sent,
            armed: true,
        };
        // A write is never held up for long by those in flight (one may wait
        // on a lock): past ESCAPE it goes alone, as one more unit.
        let out = match tokio::time::timeout(ESCAPE, &mut rx).await {
            Ok(out) => out,
            Err(_) => match withdraw.take(true) {
                Some(write) => {
                    let _handover = Handover(self, Instant::now());
                    return self.write_alone(&write, sent).await;
                }
                None => rx.await,
            },
        };
        withdraw.armed = false;
        sent.store(true, Ordering::SeqCst);
        match out {
            Ok(out) => out,
            Err(_) => Err(DbError::Crate(crate::Error::storage(
                "postgres",
                false,
                "the group commit task stopped before it answered (the runtime is shutting down?); \
                 the write may or may not have been applied",
            ))),
        }
    }

    async fn write_alone(&self, write: &Write, sent: &AtomicBool) -> Result<(), DbError> {
        let client = self.client().await?;
        let lz4 = matches!(write, Write::Put { .. }) && self.has_lz4(&client).await?;
        sent.store(true, Ordering::SeqCst);
        self.q(&client, write.sql(lz4), &write.params()).await?;
        Ok(())
    }

    /// Notes a write or group of `n` sent at `start` as done.
    fn committed(&self, n: usize, start: Instant) {
        if let Some(group) = self.inner.group.as_ref() {
            let now = Instant::now();
            group.state.lock().last = Some((n, now, now.duration_since(start)));
        }
    }

    /// Takes the next group off the queue, or marks the runner's unit done.
    fn next_group(&self, retry: &mut Vec<Job>) -> Vec<Job> {
        let Some(group) = self.inner.group.as_ref() else {
            return std::mem::take(retry);
        };
        let mut st = group.state.lock();
        let mut jobs = std::mem::take(retry);
        // At most one put per thread: two puts of a thread in one
        // transaction could insert shared blob keys in an order that
        // crosses a concurrent put of that thread (a deadlock).
        let mut later = VecDeque::new();
        while jobs.len() < MAX_GROUP {
            let Some(job) = st.queue.pop_front() else { break };
            let taken = job
                .write
                .put_thread()
                .is_some_and(|t| jobs.iter().any(|j| j.write.put_thread() == Some(t)));
            if taken {
                later.push_back(job);
            } else {
                jobs.push(job);
            }
        }
        later.append(&mut st.queue);
        st.queue = later;
        if jobs.is_empty() {
            st.units = st.units.saturating_sub(1);
        }
        jobs
    }

    /// Runs groups until the queue is empty.
    /// `gather`: first wait for that many queued writes, until that instant.
    async fn run_groups(self, gather: Option<(usize, Instant)>) {
        let mut drain = Drain {
            pg: &self,
            finished: false,
        };
        if let (Some((want, until)), Some(group)) = (gather, self.inner.group.as_ref()) {
            loop {
                let now = Instant::now();
                if group.state.lock().queue.len() >= want || now >= until {
                    break;
                }
                let _ = tokio::time::timeout(until - now, group.arrived.notified()).await;
            }
        }
        let mut client: Option<Object> = None;
        let mut retry = Vec::new();
        loop {
            let jobs = self.next_group(&mut retry);
            if jobs.is_empty() {
                drain.finished = true;
                return;
            }
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                client = match self.client().await {
                    Ok(c) => Some(c),
                    Err(e) => {
                        for job in jobs {
                            let _ = job.reply.send(Err(e.share()));
                        }
                        continue;
                    }
                };
            }
            let Some(conn) = client.as_ref() else { continue };
            let (n, start) = (jobs.len(), Instant::now());
            retry = self.run_group(conn, jobs).await;
            self.committed(n, start);
        }
    }

    /// Sends one group; answers its members, and returns those to send
    /// again (the innocent members of a group one member failed). A group
    /// whose transaction failed in a way no member's own statement shows
    /// ([`Sent::Failed`]) is split in two and each half sent as a group of
    /// its own, down to single writes, so only the member at fault gets the
    /// error and the others still commit in groups.
    async fn run_group(&self, client: &Object, jobs: Vec<Job>) -> Vec<Job> {
        let mut again = Vec::new();
        let mut halves = vec![jobs];
        while let Some(mut jobs) = halves.pop() {
            if jobs.len() == 1 {
                for job in jobs {
                    let lz4 = match matches!(job.write, Write::Put { .. }) {
                        true => self.has_lz4(client).await,
                        false => Ok(false),
                    };
                    let out = match lz4 {
                        Ok(lz4) => self.q(client, job.write.sql(lz4), &job.write.params()).await.map(drop),
                        Err(e) => Err(e),
                    };
                    let _ = job.reply.send(out);
                }
                continue;
            }
            match self.send_group(client, &jobs).await {
                Err(e) => {
                    for job in jobs {
                        let _ = job.reply.send(Err(e.share()));
                    }
                }
                Ok(Sent::Committed) => {
                    for job in jobs {
                        let _ = job.reply.send(Ok(()));
                    }
                }
                Ok(Sent::Each(outs)) => {
                    for (job, out) in jobs.into_iter().zip(outs) {
                        let _ = job.reply.send(out);
                    }
                }
                Ok(Sent::Failed(failure)) => {
                    tracing::debug!(
                        size = jobs.len(),
                        error = ?failure,
                        "postgres group commit: the group's transaction failed, sending each half as a group"
                    );
                    let second = jobs.split_off(jobs.len() / 2);
                    halves.push(second);
                    halves.push(jobs);
                }
                Ok(Sent::Culprit(culprit, e)) => {
                    tracing::debug!(
                        size = jobs.len(),
                        culprit,
                        "postgres group commit: one member failed, sending the others again"
                    );
                    for (i, job) in jobs.into_iter().enumerate() {
                        if i == culprit {
                            let _ = job.reply.send(Err(DbError::Pg(e.clone())));
                        } else {
                            again.push(job);
                        }
                    }
                }
            }
        }
        again
    }

    /// `BEGIN`, the statements, `COMMIT`, in one round trip; when the
    /// transaction failed in a way no member's own statement shows, each
    /// member again in a transaction of its own (see [`Sent`]). `Err`: the
    /// whole group failed, before anything was sent or with the connection
    /// (then whether the group committed is unknown).
    async fn send_group(&self, client: &Object, jobs: &[Job]) -> Result<Sent, DbError> {
        let mode = self.inner.mode;
        let lz4 = match jobs.iter().any(|j| matches!(j.write, Write::Put { .. })) {
            true => self.has_lz4(client).await?,
            false => false,
        };
        let params: Vec<Vec<Param<'_>>> = jobs.iter().map(|j| j.write.params()).collect();
        let mut statements: Vec<Option<Statement>> = Vec::with_capacity(jobs.len());
        for (job, params) in jobs.iter().zip(&params) {
            statements.push(match mode {
                StatementMode::Prepared => {
                    let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
                    Some(client.prepare_typed_cached(job.write.sql(lz4), &types).await?)
                }
                StatementMode::Unnamed => None,
            });
        }
        // The puts' thread locks, taken first and in key order, as
        // `delete_for_runs` takes them: a group never holds one while it
        // waits for another.
        let threads: Vec<&str> = jobs.iter().filter_map(|j| j.write.put_thread()).collect();
        let lock_params: [Param<'_>; 1] = [(&threads, Type::TEXT_ARRAY)];
        let lock_statement = match (mode, threads.is_empty()) {
            (StatementMode::Prepared, false) => Some(
                client
                    .prepare_typed_cached(queries::LOCK_GROUP_THREADS, &[Type::TEXT_ARRAY])
                    .await?,
            ),
            _ => None,
        };
        let lock = async {
            match threads.is_empty() {
                true => Ok(()),
                false => {
                    run(
                        client,
                        lock_statement.as_ref(),
                        queries::LOCK_GROUP_THREADS,
                        &lock_params,
                    )
                    .await
                }
            }
        };
        // Each request leaves when its future is first polled, and `join!`
        // and `join_all` poll in order: BEGIN, the locks, the statements,
        // COMMIT.
        let runs = jobs
            .iter()
            .zip(&params)
            .zip(&statements)
            .map(|((job, params), statement)| run(client, statement.as_ref(), job.write.sql(lz4), params));
        let (begin, locked, outs, commit) = futures::join!(
            client.batch_execute("BEGIN"),
            lock,
            futures::future::join_all(runs),
            client.batch_execute("COMMIT"),
        );
        let own = |outs: Vec<Result<(), tokio_postgres::Error>>| outs.into_iter().map(|o| o.map_err(DbError::from));
        if let Err(e) = begin {
            let e = DbError::from(e);
            if e.connection_broke() {
                return Err(e);
            }
            // No transaction block: each statement was a transaction of its
            // own, and its outcome its caller's.
            return Ok(Sent::Each(own(outs).collect()));
        }
        let first = match locked {
            Err(e) => Some((None, e)),
            Ok(()) => outs
                .into_iter()
                .enumerate()
                .find_map(|(i, out)| out.err().map(|e| (Some(i), e))),
        };
        let failure = match first {
            None => match commit {
                Ok(()) => return Ok(Sent::Committed),
                Err(e) => DbError::from(e),
            },
            Some((who, e)) => {
                let e = Arc::new(e);
                let broke = DbError::Pg(e.clone()).connection_broke();
                match who {
                    // The server refused this member's statement and rolled
                    // the whole transaction back, whatever the `COMMIT`
                    // answered: nothing of the group is stored.
                    Some(i) if !broke && !conflict(&e) => return Ok(Sent::Culprit(i, e)),
                    _ if broke => return Err(DbError::Pg(e)),
                    // The rollback must be done before anything else is sent.
                    _ => {
                        commit?;
                        DbError::Pg(e)
                    }
                }
            }
        };
        // A failed `COMMIT` (a deferred constraint, a serialization failure),
        // the group's own statement, or a conflict of the group's transaction
        // as a whole: rolled back, and no one member's doing.
        if failure.connection_broke() {
            return Err(failure);
        }
        Ok(Sent::Failed(failure))
    }
}

/// How a group's transaction ended.
enum Sent {
    /// Every member committed.
    Committed,
    /// This member's own statement failed with this error; nothing of the
    /// group is stored, and the others are to be sent again.
    Culprit(usize, Arc<tokio_postgres::Error>),
    /// Each member's own outcome, from a transaction of its own.
    Each(Vec<Result<(), DbError>>),
    /// The transaction failed in a way no member's own statement shows and
    /// was rolled back: nothing of the group is stored, and no member is
    /// known to be at fault.
    Failed(DbError),
}

/// Whether a statement failed because the group's transaction as a whole
/// conflicted with another (a serialization failure, a deadlock): the same
/// statement alone may well succeed.
fn conflict(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| matches!(c.code(), "40001" | "40P01"))
}

async fn run(
    client: &Object,
    statement: Option<&Statement>,
    sql: &str,
    params: &[Param<'_>],
) -> Result<(), tokio_postgres::Error> {
    let stream = match statement {
        Some(statement) => client.query_raw(statement, params.iter().map(|(v, _)| *v)).await?,
        None => {
            client
                .query_typed_raw(sql, params.iter().map(|(v, t)| (*v, t.clone())))
                .await?
        }
    };
    futures::pin_mut!(stream);
    while stream.try_next().await?.is_some() {}
    Ok(())
}

/// Held by a write running alone: when it ends, however it ends, its unit
/// runs the writes queued meanwhile in a runner task (or is done).
struct Handover<'a>(&'a Pg, Instant);

impl Drop for Handover<'_> {
    fn drop(&mut self) {
        let pg = self.0;
        let Some(group) = pg.inner.group.as_ref() else { return };
        let now = Instant::now();
        let mut st = group.state.lock();
        st.last = Some((1, now, now.duration_since(self.1)));
        if st.queue.is_empty() {
            st.units = st.units.saturating_sub(1);
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                drop(st);
                rt.spawn(pg.clone().run_groups(None));
            }
            Err(_) => {
                // No runtime to run them on: their callers get an error.
                st.queue.clear();
                st.units = st.units.saturating_sub(1);
            }
        }
    }
}

/// Held by a runner task: if it stops early (a panic, the runtime shutting
/// down), the queued writes are dropped, so that their callers get an error
/// instead of waiting forever, and its unit is done.
struct Drain<'a> {
    pg: &'a Pg,
    /// The runner found the queue empty and marked its unit done itself.
    finished: bool,
}

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Some(group) = self.pg.inner.group.as_ref() {
            let mut st = group.state.lock();
            st.queue.clear();
            st.units = st.units.saturating_sub(1);
        }
    }
}

/// Held by a queued caller: dropped before the answer (a call timeout), it
/// withdraws the write if it is still queued, and otherwise marks it as
/// sent (a runner has it: its outcome is unknown).
struct Withdraw<'a> {
    pg: &'a Pg,
    seq: u64,
    sent: &'a AtomicBool,
    armed: bool,
}

impl Withdraw<'_> {
    /// The write back from the queue, unless a runner took it; `as_unit`:
    /// to run alone, as one more unit in flight.
    fn take(&mut self, as_unit: bool) -> Option<Write> {
        let group = self.pg.inner.group.as_ref()?;
        let mut st = group.state.lock();
        let at = st.queue.iter().position(|j| j.seq == self.seq)?;
        self.armed = false;
        let job = st.queue.remove(at)?;
        if as_unit {
            st.units += 1;
        }
        Some(job.write)
    }
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if self.armed && self.take(false).is_none() {
            self.sent.store(true, Ordering::SeqCst);
        }
    }
}
