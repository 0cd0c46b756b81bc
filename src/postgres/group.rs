//! Group commit for `put`, `put_writes`, atomic steps and every write of a
//! fenced saver (`docs/performance.md`, *Postgres*): concurrent writers'
//! statements share one transaction, so N writers pay one WAL flush
//! (`synchronous_commit = on`) instead of N. Each member is one statement
//! ([`write`]): an atomic step's writes and checkpoint are one, and a
//! fenced write's lease check is the first part of its own.
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
//! A fenced member whose lease check refuses it is no failure of the
//! transaction: its statement stores nothing and returns no row, its caller
//! gets `Error::Fenced`, and the group commits the others as it is. A group
//! with fenced members locks their lease rows first, in key order
//! ([`queries::LOCK_GROUP_LEASES`](super::queries::LOCK_GROUP_LEASES)).
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use deadpool_postgres::Object;
use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};

use super::conn::Pg;
use super::error::DbError;

mod send;
mod write;

pub(crate) use write::Write;

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
        let lz4 = write.stores_checkpoint() && self.has_lz4(&client).await?;
        sent.store(true, Ordering::SeqCst);
        let rows = self.q(&client, write.sql(lz4), &write.params()).await?;
        write.answer(rows.len())
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
