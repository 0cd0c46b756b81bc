//! The writer thread: the only connection that writes, with group commit.
//!
//! Every mutating operation is sent to one dedicated OS thread as a job. The
//! thread takes the first job, then everything else already queued (up to
//! [`MAX_BATCH`]), and runs them all in one `BEGIN IMMEDIATE` transaction,
//! each inside its own `SAVEPOINT`: a job that fails is rolled back to its
//! savepoint alone and the others go on. One `COMMIT` (one fsync with
//! `synchronous=FULL`) then makes the whole batch durable, and only after it
//! is each caller answered. When a statement of the batch's own fails (the
//! `COMMIT`, a savepoint), the batch is rolled back and its jobs run again
//! one transaction each, so every caller gets its own outcome, never another
//! job's failure. While a commit is syncing, new jobs queue up and
//! form the next batch, so throughput grows with the number of concurrent
//! writers while every acknowledged write is on disk.
//!
//! Callers wait on a oneshot channel, never on SQLite: an async caller's
//! runtime thread is not blocked.
//!
//! A caller that blocks anyway (a sync caller inside [`may_block`](super::may_block)) skips
//! the hand-off when the writer is idle: it takes the connection, runs its job
//! in a transaction of its own on its own thread and hands the connection
//! back fairly, so that a batch queued meanwhile goes next. Passing a job to
//! the thread and the answer back costs two thread wake-ups, more than the
//! job itself when the commit does not sync.
//!
//! Maintenance that may run long (a retention batch) is a *sliced* job
//! ([`Writer::write_sliced`]): it runs only while no other job is queued
//! (or after [`STARVE_AFTER`] batches passed it), in slices of at most
//! [`SLICE`] each its own transaction, so a write arriving meanwhile waits
//! for one short slice, never for the whole job. A slice's `COMMIT` does not
//! sync in WAL mode (`synchronous=NORMAL` for that transaction): it stays
//! atomic, and the next synced commit, or a WAL checkpoint, makes it
//! durable; a power loss can undo the last slices whole, never half of one.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::blocking_allowed;
use super::checkpoints::Checkpoints;
use super::error::is_busy;
use crate::error::{Error, Result};

/// The most jobs one transaction takes.
pub(crate) const MAX_BATCH: usize = 512;

/// The longest a sliced job's transaction runs steps before it commits and
/// lets queued writes go (a step begun runs to its end).
pub(crate) const SLICE: Duration = Duration::from_millis(1);

/// How many batches of other jobs may go before a waiting sliced job runs a
/// slice anyway (a writer never idle would otherwise starve it).
pub(crate) const STARVE_AFTER: u32 = 16;

/// A unit of work for the writer thread.
pub(crate) trait Job: Send {
    /// Runs inside the batch transaction; may run again if SQLite rolled the
    /// whole transaction back. Returns whether it succeeded.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Answers the caller. `commit` is the error of the batch's `COMMIT`, if
    /// it failed (then a job that succeeded did not persist).
    fn finish(self: Box<Self>, commit: Option<&Failure>);
}

/// A failure of a batch's own statements (or of one job's transaction when
/// the batch's jobs ran again one by one, see [`each_alone`]).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    message: String,
    retryable: bool,
}

impl Failure {
    fn from_sql(context: &str, e: &rusqlite::Error) -> Self {
        Failure {
            message: format!("{context}: {e}"),
            retryable: is_busy(e),
        }
    }

    fn to_error(&self) -> Error {
        Error::storage("sqlite", self.retryable, self.message.clone())
    }
}

struct TypedJob<T, F> {
    work: F,
    out: Option<Result<T>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Job for TypedJob<T, F>
where
    T: Send,
    F: FnMut(&Connection) -> Result<T> + Send,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let out = caught(|| (self.work)(conn));
        let ok = out.is_ok();
        self.out = Some(out);
        ok
    }

    fn finish(self: Box<Self>, commit: Option<&Failure>) {
        let out = match (commit, self.out) {
            (_, Some(Err(e))) => Err(e),
            (Some(f), _) => Err(f.to_error()),
            (None, Some(ok)) => ok,
            (None, None) => Err(Error::storage("sqlite", true, "write job was not run")),
        };
        let _ = self.reply.send(out);
    }
}

/// A read on the writer's own connection (in-memory databases, which other
/// connections cannot see).
pub(crate) type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

pub(crate) enum Request {
    Write(Box<dyn Job>),
    Read(ReadJob),
    Sliced(Box<dyn Sliced>),
}

/// A job the writer runs in slices while it is otherwise idle (see the
/// module docs).
pub(crate) trait Sliced: Send {
    /// Runs the next step inside the slice's transaction; whether the job
    /// has ended (done, or failed: then the slice is rolled back).
    fn step(&mut self, conn: &Connection) -> bool;
    /// Whether the job has failed.
    fn failed(&self) -> bool;
    /// Ends the job with `failure` (of a slice's own statements).
    fn fail(&mut self, failure: &Failure);
    /// Answers the caller.
    fn finish(self: Box<Self>);
}

/// A write job's `work` run, a panic in it an error.
fn caught<T>(work: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(work))
        .unwrap_or_else(|_| Err(Error::storage("sqlite", false, "a write job panicked")))
}

/// A sliced job is a [`TypedJob`] whose work answers `None` until its
/// last step.
impl<T, F> Sliced for TypedJob<T, F>
where
    T: Send,
    F: FnMut(&Connection) -> Result<Option<T>> + Send,
{
    fn step(&mut self, conn: &Connection) -> bool {
        match caught(|| (self.work)(conn)) {
            Ok(None) => false,
            Ok(Some(done)) => {
                self.out = Some(Ok(done));
                true
            }
            Err(e) => {
                self.out = Some(Err(e));
                true
            }
        }
    }

    fn failed(&self) -> bool {
        matches!(self.out, Some(Err(_)))
    }

    fn fail(&mut self, failure: &Failure) {
        self.out = Some(Err(failure.to_error()));
    }

    fn finish(self: Box<Self>) {
        let out = self
            .out
            .unwrap_or_else(|| Err(Error::storage("sqlite", true, "write job was not run")));
        let _ = self.reply.send(out);
    }
}

/// Counters of the writer thread.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) transactions: AtomicU64,
    pub(crate) jobs: AtomicU64,
}

/// The connection, shared by the writer thread and inline writers; `None`
/// once the thread has closed it.
type Shared = Arc<parking_lot::Mutex<Option<Connection>>>;

/// The sending side of the writer thread.
#[derive(Debug)]
pub(crate) struct Writer {
    tx: parking_lot::Mutex<Option<Sender<Request>>>,
    conn: Shared,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
    pub(crate) counters: Arc<Counters>,
    /// Whether the connection is read-only: every write is refused before
    /// it is queued (see [`Self::check_writable`]).
    read_only: bool,
    /// The WAL checkpoints off the commit path (a file in WAL mode).
    checkpoints: Option<Arc<Checkpoints>>,
}

impl Writer {
    /// Starts the thread on an open, set-up connection; `read_only` refuses
    /// every write.
    pub(crate) fn start(conn: Connection, read_only: bool) -> Result<Writer> {
        let (tx, rx) = std::sync::mpsc::channel();
        let counters = Arc::new(Counters::default());
        let shared: Shared = Arc::new(parking_lot::Mutex::new(Some(conn)));
        let checkpoints = if read_only {
            None
        } else {
            shared.lock().as_ref().and_then(Checkpoints::start).map(Arc::new)
        };
        let (thread_counters, thread_conn, thread_checkpoints) =
            (counters.clone(), shared.clone(), checkpoints.clone());
        let thread = std::thread::Builder::new()
            .name("checkpointer-sqlite-writer".into())
            .spawn(move || run(&thread_conn, rx, &thread_counters, thread_checkpoints.as_deref()))
            .map_err(|e| Error::storage("sqlite", false, e))?;
        Ok(Writer {
            tx: parking_lot::Mutex::new(Some(tx)),
            conn: shared,
            thread: parking_lot::Mutex::new(Some(thread)),
            counters,
            read_only,
            checkpoints,
        })
    }

    /// `Ok` unless the saver was opened read-only; then the typed refusal
    /// of `operation`.
    pub(crate) fn check_writable(&self, operation: &'static str) -> Result<()> {
        if self.read_only {
            return Err(super::error::read_only(operation));
        }
        Ok(())
    }

    /// Runs `run` on the connection on this thread, if this thread is inside
    /// [`may_block`](super::may_block), the saver is open and the connection is free; then
    /// hands the connection to the writer thread if it is waiting for it.
    /// Gives `job` back otherwise.
    fn try_inline<J>(&self, job: J, run: impl FnOnce(&Connection, J)) -> Option<J> {
        if !blocking_allowed() || self.tx.lock().is_none() {
            return Some(job);
        }
        let Some(guard) = self.conn.try_lock() else {
            return Some(job);
        };
        let Some(conn) = guard.as_ref() else {
            return Some(job);
        };
        run(conn, job);
        parking_lot::MutexGuard::unlock_fair(guard);
        None
    }

    fn send(&self, request: Request) -> Result<()> {
        let guard = self.tx.lock();
        let tx = guard.as_ref().ok_or_else(closed)?;
        tx.send(request).map_err(|_| closed())
    }

    /// Queues a write job of `operation` and waits for the commit that makes
    /// it durable. Refused on a read-only saver.
    pub(crate) async fn write<T, F>(&self, operation: &'static str, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T> + Send + 'static,
    {
        self.check_writable(operation)?;
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(TypedJob { work, out: None, reply });
        let mut done = None;
        let queued = self.try_inline(job, |conn, job| {
            self.counters.jobs.fetch_add(1, Ordering::Relaxed);
            self.counters.transactions.fetch_add(1, Ordering::Relaxed);
            done = Some(execute(conn, vec![job]));
            if let Some(checkpoints) = &self.checkpoints {
                checkpoints.after_commit(conn);
            }
        });
        match (queued, done) {
            (None, Some(done)) => done.answer(),
            (Some(job), _) => self.send(Request::Write(job))?,
            (None, None) => {}
        }
        answer.await.map_err(|_| closed())?
    }

    /// Queues a sliced job of `operation` (see the module docs) and waits
    /// for its end. `work` runs one step per call inside a slice's
    /// transaction: `Ok(None)` while steps remain, `Ok(Some(out))` with the
    /// last. Each slice commits what its steps did; a failed step rolls back
    /// its own slice and ends the job (earlier slices stay: each step must
    /// leave the store whole). Refused on a read-only saver.
    pub(crate) async fn write_sliced<T, F>(&self, operation: &'static str, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<Option<T>> + Send + 'static,
    {
        self.check_writable(operation)?;
        let (reply, answer) = oneshot::channel();
        self.send(Request::Sliced(Box::new(TypedJob { work, out: None, reply })))?;
        answer.await.map_err(|_| closed())?
    }

    /// Runs a read on the writer's connection.
    pub(crate) async fn read<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn: &Connection| {
            let out = catch_unwind(AssertUnwindSafe(|| work(conn)))
                .unwrap_or_else(|_| Err(Error::storage("sqlite", false, "a read job panicked")));
            let _ = reply.send(out);
        });
        if let Some(job) = self.try_inline(job, |conn, job| job(conn)) {
            self.send(Request::Read(job))?;
        }
        answer.await.map_err(|_| closed())?
    }

    /// Runs a short read on the writer's connection, on this thread, if this
    /// thread is inside [`may_block`](super::may_block), the saver is open
    /// and the connection is free; `None` otherwise. The connection that
    /// wrote the rows holds them in its page cache.
    pub(crate) fn try_read_here<T>(&self, work: impl FnOnce(&Connection) -> Result<T>) -> Option<Result<T>> {
        let mut out = None;
        self.try_inline((), |conn, ()| {
            out = Some(
                catch_unwind(AssertUnwindSafe(|| work(conn)))
                    .unwrap_or_else(|_| Err(Error::storage("sqlite", false, "a read job panicked"))),
            );
            // the next write begins its own transaction: leave none open
            if !conn.is_autocommit() {
                super::pool::end_transaction(conn);
            }
        });
        out
    }

    /// Stops accepting jobs, lets the thread finish the queued ones and
    /// returns its handle.
    pub(crate) fn close(&self) -> Option<JoinHandle<()>> {
        self.tx.lock().take();
        self.thread.lock().take()
    }
}

fn closed() -> Error {
    Error::storage("sqlite", false, "the SQLite writer thread has stopped")
}

fn run(shared: &Shared, rx: Receiver<Request>, counters: &Counters, checkpoints: Option<&Checkpoints>) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    let mut reads: Vec<ReadJob> = Vec::new();
    let mut sliced: VecDeque<Box<dyn Sliced>> = VecDeque::new();
    // a request taken while a slice ran, served next
    let mut held: Option<Request> = None;
    // batches run while a sliced job waited
    let mut passed = 0u32;
    let mut durability: Option<SliceDurability> = None;
    loop {
        let first = match held.take() {
            Some(request) => Some(request),
            None if sliced.is_empty() => match rx.recv() {
                Ok(request) => Some(request),
                Err(_) => break,
            },
            // a sliced job waits: only what is already queued goes first
            // (after the last sender is gone too, until it is done)
            None => rx.try_recv().ok(),
        };
        if let Some(first) = first {
            let mut next = Some(first);
            while let Some(request) = next.take() {
                match request {
                    Request::Write(job) => batch.push(job),
                    Request::Read(job) => reads.push(job),
                    Request::Sliced(job) => sliced.push_back(job),
                }
                if batch.len() >= MAX_BATCH {
                    break;
                }
                next = rx.try_recv().ok();
            }
            let guard = shared.lock();
            let Some(conn) = guard.as_ref() else {
                // cannot happen (only this thread takes the connection out,
                // below); dropping a job answers its caller "stopped"
                batch.clear();
                reads.clear();
                sliced.clear();
                continue;
            };
            let mut done = None;
            if !batch.is_empty() {
                counters.jobs.fetch_add(batch.len() as u64, Ordering::Relaxed);
                counters.transactions.fetch_add(1, Ordering::Relaxed);
                done = Some(execute(conn, std::mem::take(&mut batch)));
                if let Some(checkpoints) = checkpoints {
                    checkpoints.after_commit(conn);
                }
            }
            for read in reads.drain(..) {
                read(conn);
            }
            drop(guard);
            if let Some(done) = done {
                done.answer();
            }
            if sliced.is_empty() {
                continue;
            }
            passed += 1;
            if passed < STARVE_AFTER {
                continue;
            }
        }
        // nothing else queued (or the sliced job waited long enough)
        passed = 0;
        let guard = shared.lock();
        let Some(conn) = guard.as_ref() else {
            sliced.clear();
            continue;
        };
        let Some(job) = sliced.front_mut() else { continue };
        let durability = *durability.get_or_insert_with(|| SliceDurability::of(conn));
        counters.transactions.fetch_add(1, Ordering::Relaxed);
        let (ended, taken) = slice(conn, &mut **job, &rx, durability);
        if let Some(checkpoints) = checkpoints {
            checkpoints.after_commit(conn);
        }
        held = taken;
        drop(guard);
        if ended {
            if let Some(job) = sliced.pop_front() {
                counters.jobs.fetch_add(1, Ordering::Relaxed);
                job.finish();
            }
        }
    }
    // every sender is gone and the queue is drained: closing the connection
    // checkpoints the WAL when this is the last one (the checkpoint
    // thread's closes first)
    if let Some(checkpoints) = checkpoints {
        checkpoints.stop();
    }
    drop(shared.lock().take());
}

/// How a slice's commit lowers the connection's `synchronous` setting: in
/// WAL mode from `FULL` or `EXTRA` to `NORMAL` (no sync at `COMMIT`, still
/// atomic), then back.
#[derive(Debug, Clone, Copy)]
struct SliceDurability {
    /// The pragma that restores the connection's own level, when lowered.
    restore: Option<&'static str>,
}

impl SliceDurability {
    fn of(conn: &Connection) -> Self {
        let wal = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .is_ok_and(|mode| mode.eq_ignore_ascii_case("wal"));
        let level = conn
            .query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))
            .unwrap_or(0);
        let restore = match (wal, level) {
            (true, 2) => Some("PRAGMA synchronous = FULL"),
            (true, 3) => Some("PRAGMA synchronous = EXTRA"),
            _ => None,
        };
        SliceDurability { restore }
    }
}

/// Runs one slice of `job` in a transaction of its own: steps until the job
/// ends, [`SLICE`] has passed or another request arrives (returned, to go
/// next). Whether the job has ended.
fn slice(
    conn: &Connection,
    job: &mut dyn Sliced,
    rx: &Receiver<Request>,
    durability: SliceDurability,
) -> (bool, Option<Request>) {
    let lowered = durability.restore.is_some() && exec(conn, "PRAGMA synchronous = NORMAL").is_ok();
    let outcome = slice_transaction(conn, job, rx);
    if let (true, Some(restore)) = (lowered, durability.restore) {
        // cannot fail outside a transaction; if it did, the next commits
        // would skip their sync: refuse them rather than lose them
        if let Err(e) = exec(conn, restore) {
            let _ = exec(conn, "PRAGMA query_only = 1");
            job.fail(&Failure::from_sql("cannot restore synchronous", &e));
            return (true, outcome.1);
        }
    }
    outcome
}

fn slice_transaction(conn: &Connection, job: &mut dyn Sliced, rx: &Receiver<Request>) -> (bool, Option<Request>) {
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        job.fail(&Failure::from_sql("cannot start a write transaction", &e));
        return (true, None);
    }
    let started = Instant::now();
    let mut taken = None;
    let ended = loop {
        if job.step(conn) {
            break true;
        }
        if started.elapsed() >= SLICE {
            break false;
        }
        match rx.try_recv() {
            Ok(request) => {
                taken = Some(request);
                break false;
            }
            Err(_) => continue,
        }
    };
    if job.failed() {
        if !conn.is_autocommit() {
            let _ = exec(conn, "ROLLBACK");
        }
        return (true, taken);
    }
    if let Err(e) = exec(conn, "COMMIT") {
        if !conn.is_autocommit() {
            let _ = exec(conn, "ROLLBACK");
        }
        job.fail(&Failure::from_sql("commit failed", &e));
        return (true, taken);
    }
    (ended, taken)
}

fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Runs one batch in one transaction (see the module docs).
///
/// The first job runs without a savepoint: if it fails, rolling the whole
/// transaction back undoes it alone, and the others start again in a new
/// one. A savepoint is not free: every page a job changes inside one is
/// first copied to SQLite's statement journal, which for a large delete
/// costs about half the delete again. A batch of one (every write without
/// concurrency, every inline write) therefore needs none.
fn execute(conn: &Connection, mut jobs: Vec<Box<dyn Job>>) -> Done {
    let mut done = Done::default();
    loop {
        if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
            let failure = Failure::from_sql("cannot start a write transaction", &e);
            done.fail(jobs, failure);
            return done;
        }
        let mut aborted = None;
        for (i, job) in jobs.iter_mut().enumerate() {
            let savepoint = i > 0;
            if savepoint {
                if let Err(e) = exec(conn, "SAVEPOINT checkpointer_job") {
                    aborted = Some((i, Some(Failure::from_sql("cannot open a savepoint", &e))));
                    break;
                }
            }
            if job.run(conn) {
                if savepoint {
                    if let Err(e) = exec(conn, "RELEASE checkpointer_job") {
                        aborted = Some((i, Some(Failure::from_sql("cannot release a savepoint", &e))));
                        break;
                    }
                }
                continue;
            }
            if conn.is_autocommit() {
                // SQLite rolled the whole transaction back (disk full, I/O
                // error): drop this job and run the others again
                aborted = Some((i, None));
                break;
            }
            if !savepoint {
                // the first job: the transaction holds its changes alone
                aborted = Some(match exec(conn, "ROLLBACK") {
                    Ok(()) => (i, None),
                    Err(e) => (i, Some(Failure::from_sql("cannot roll back", &e))),
                });
                break;
            }
            let undo = exec(conn, "ROLLBACK TO checkpointer_job").and_then(|()| exec(conn, "RELEASE checkpointer_job"));
            if let Err(e) = undo {
                aborted = Some((i, Some(Failure::from_sql("cannot roll back a savepoint", &e))));
                break;
            }
        }
        match aborted {
            None => {}
            Some((i, None)) => {
                done.finished.push((jobs.remove(i), None));
                if jobs.is_empty() {
                    return done;
                }
                continue;
            }
            Some((_, Some(failure))) => {
                if !conn.is_autocommit() {
                    let _ = exec(conn, "ROLLBACK");
                }
                each_alone(conn, jobs, failure, &mut done);
                return done;
            }
        }
        match exec(conn, "COMMIT") {
            Ok(()) => done.finished.extend(jobs.into_iter().map(|job| (job, None))),
            Err(e) => {
                let failure = Failure::from_sql("commit failed", &e);
                if !conn.is_autocommit() {
                    let _ = exec(conn, "ROLLBACK");
                }
                each_alone(conn, jobs, failure, &mut done);
            }
        }
        return done;
    }
}

/// After a failure of the batch's own statements (its `COMMIT`, a
/// savepoint), which no single job shows: the batch was rolled back whole,
/// so each job runs again in a transaction of its own and its caller gets
/// that outcome, not the batch's. A batch of one keeps the failure it had.
fn each_alone(conn: &Connection, jobs: Vec<Box<dyn Job>>, failure: Failure, done: &mut Done) {
    if jobs.len() == 1 {
        done.fail(jobs, failure);
        return;
    }
    for mut job in jobs {
        if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
            done.finished
                .push((job, Some(Failure::from_sql("cannot start a write transaction", &e))));
            continue;
        }
        if !job.run(conn) {
            if !conn.is_autocommit() {
                let _ = exec(conn, "ROLLBACK");
            }
            done.finished.push((job, None));
            continue;
        }
        match exec(conn, "COMMIT") {
            Ok(()) => done.finished.push((job, None)),
            Err(e) => {
                if !conn.is_autocommit() {
                    let _ = exec(conn, "ROLLBACK");
                }
                done.finished.push((job, Some(Failure::from_sql("commit failed", &e))));
            }
        }
    }
}

/// The jobs a batch ran, each with the batch failure it ends with (if any),
/// to be answered once the connection is released: a caller woken by its
/// answer finds the connection free.
#[derive(Default)]
struct Done {
    finished: Vec<(Box<dyn Job>, Option<Failure>)>,
}

impl Done {
    fn fail(&mut self, jobs: Vec<Box<dyn Job>>, failure: Failure) {
        self.finished
            .extend(jobs.into_iter().map(|job| (job, Some(failure.clone()))));
    }

    /// Answers every caller.
    fn answer(self) {
        for (job, failure) in self.finished {
            job.finish(failure.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::may_block;
    use std::thread::ThreadId;

    fn writer() -> Writer {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        Writer::start(conn, false).unwrap()
    }

    /// The thread a write ran on, after inserting a row.
    fn write_here(writer: &Writer, rt: &tokio::runtime::Runtime) -> Result<ThreadId> {
        rt.block_on(writer.write("test", |conn: &Connection| {
            conn.execute("INSERT INTO t VALUES (1)", [])
                .map_err(|e| Error::storage("sqlite", false, e))?;
            Ok(std::thread::current().id())
        }))
    }

    fn rows(writer: &Writer, rt: &tokio::runtime::Runtime) -> i64 {
        rt.block_on(writer.read(|conn: &Connection| {
            conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .map_err(|e| Error::storage("sqlite", false, e))
        }))
        .unwrap()
    }

    #[test]
    fn writes_run_on_the_writer_thread_unless_inline() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let writer = writer();
        let me = std::thread::current().id();
        assert_ne!(write_here(&writer, &rt).unwrap(), me);
        assert_eq!(may_block(|| write_here(&writer, &rt)).unwrap(), me);
        // the flag ends with the scope, panics included
        let _ = std::panic::catch_unwind(|| may_block(|| panic!("inside")));
        assert_ne!(write_here(&writer, &rt).unwrap(), me);
        assert_eq!(rows(&writer, &rt), 3);
        let stats = (
            writer.counters.jobs.load(Ordering::Relaxed),
            writer.counters.transactions.load(Ordering::Relaxed),
        );
        assert_eq!(stats, (3, 3));
    }

    #[test]
    fn an_inline_write_queues_while_the_connection_is_busy() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let writer = writer();
        // the writer thread holds the connection until told to go on
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        let blocker = writer.write("test", move |_conn: &Connection| {
            let _ = started.send(());
            let _ = wait.recv();
            Ok(())
        });
        let blocked = std::thread::scope(|s| {
            let handle = s.spawn(|| rt.block_on(blocker));
            running.recv().unwrap();
            let ran_on = std::thread::scope(|s2| {
                let queued = s2.spawn(|| {
                    let ran_on = may_block(|| write_here(&writer, &rt));
                    (std::thread::current().id(), ran_on)
                });
                // give it time to find the connection busy and queue
                std::thread::sleep(std::time::Duration::from_millis(50));
                go.send(()).unwrap();
                let (caller, ran_on) = queued.join().unwrap();
                (caller, ran_on.unwrap())
            });
            // queued: it ran on the writer thread, after the blocker
            assert_ne!(ran_on.0, ran_on.1);
            handle.join().unwrap()
        });
        blocked.unwrap();
        assert_eq!(rows(&writer, &rt), 1);
    }

    #[test]
    fn an_inline_write_after_close_fails_as_closed() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let writer = writer();
        writer.close().unwrap().join().unwrap();
        let err = may_block(|| write_here(&writer, &rt)).unwrap_err();
        assert!(err.to_string().contains("writer thread has stopped"), "{err}");
    }

    #[test]
    fn a_failed_inline_write_rolls_back_alone() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let writer = writer();
        let failed = may_block(|| {
            rt.block_on(writer.write("test", |conn: &Connection| {
                conn.execute("INSERT INTO t VALUES (1)", [])
                    .map_err(|e| Error::storage("sqlite", false, e))?;
                Err::<(), _>(Error::invalid("refused after the insert"))
            }))
        });
        assert!(failed.is_err());
        assert_eq!(rows(&writer, &rt), 0);
        may_block(|| write_here(&writer, &rt)).unwrap();
        assert_eq!(rows(&writer, &rt), 1);
    }

    /// A job inserting `x`, failing after the insert when `fail`.
    fn insert_job(x: i64, fail: bool) -> (Box<dyn Job>, oneshot::Receiver<Result<()>>) {
        let (reply, answer) = oneshot::channel();
        let work = move |conn: &Connection| {
            conn.execute("INSERT INTO t VALUES (?1)", [x])
                .map_err(|e| Error::storage("sqlite", false, e))?;
            if fail {
                return Err(Error::invalid(format!("job {x} refused")));
            }
            Ok(())
        };
        (Box::new(TypedJob { work, out: None, reply }), answer)
    }

    /// The rows of `t`, in order.
    fn stored(conn: &Connection) -> Vec<i64> {
        conn.prepare("SELECT x FROM t ORDER BY x")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    #[test]
    fn a_batch_undoes_exactly_its_failed_jobs() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        // the first job (no savepoint) and a middle one (in a savepoint) fail
        let plan = [(1, true), (2, false), (3, true), (4, false), (5, true)];
        let (jobs, answers): (Vec<_>, Vec<_>) = plan.iter().map(|&(x, fail)| insert_job(x, fail)).unzip();
        execute(&conn, jobs).answer();
        let outcomes: Vec<bool> = answers.into_iter().map(|mut a| a.try_recv().unwrap().is_ok()).collect();
        assert_eq!(outcomes, [false, true, false, true, false]);
        let stored = stored(&conn);
        assert_eq!(stored, [2, 4]);
        assert!(conn.is_autocommit(), "the transaction was left open");
    }

    #[test]
    fn a_job_refused_at_commit_fails_alone() {
        // a deferred foreign key is checked at COMMIT: the job that breaks it
        // makes the batch's COMMIT fail, which none of the others caused
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE parent (x INTEGER PRIMARY KEY);
             CREATE TABLE t (x INTEGER REFERENCES parent (x) DEFERRABLE INITIALLY DEFERRED);
             INSERT INTO parent VALUES (1), (2), (4), (5);",
        )
        .unwrap();
        let plan = [(1, false), (2, false), (3, false), (4, false), (5, false)];
        let (jobs, answers): (Vec<_>, Vec<_>) = plan.iter().map(|&(x, fail)| insert_job(x, fail)).unzip();
        execute(&conn, jobs).answer();
        let outcomes: Vec<Result<()>> = answers.into_iter().map(|mut a| a.try_recv().unwrap()).collect();
        let ok: Vec<bool> = outcomes.iter().map(Result::is_ok).collect();
        assert_eq!(ok, [true, true, false, true, true], "{outcomes:?}");
        let err = outcomes[2].as_ref().unwrap_err().to_string();
        assert!(err.contains("FOREIGN KEY"), "{err}");
        let stored = stored(&conn);
        assert_eq!(stored, [1, 2, 4, 5]);
        assert!(conn.is_autocommit(), "the transaction was left open");
    }

    #[test]
    fn a_point_read_runs_on_the_writers_connection_only_for_a_caller_that_may_block() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let writer = writer();
        // inline, so that the writer thread never holds the connection here
        may_block(|| write_here(&writer, &rt)).unwrap();
        let count = |conn: &Connection| -> Result<i64> {
            conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .map_err(|e| Error::storage("sqlite", false, e))
        };
        assert!(writer.try_read_here(count).is_none());
        assert_eq!(may_block(|| writer.try_read_here(count)).unwrap().unwrap(), 1);
        // a read that leaves a transaction open does not break the next write
        let left_open = may_block(|| {
            writer.try_read_here(|conn: &Connection| {
                conn.execute_batch("BEGIN; SELECT 1;")
                    .map_err(|e| Error::storage("sqlite", false, e))
            })
        });
        assert!(left_open.unwrap().is_ok());
        may_block(|| write_here(&writer, &rt)).unwrap();
        assert_eq!(may_block(|| writer.try_read_here(count)).unwrap().unwrap(), 2);
        writer.close().unwrap().join().unwrap();
        assert!(may_block(|| writer.try_read_here(count)).is_none());
    }

    /// A sliced job inserting `1..=steps`, one row a step, each step taking
    /// `pause`; failing after the insert of `fail_at`.
    fn sliced_inserts(
        writer: &Writer,
        steps: i64,
        pause: Duration,
        fail_at: Option<i64>,
    ) -> impl std::future::Future<Output = Result<i64>> + '_ {
        let mut x = 0;
        writer.write_sliced("test", move |conn: &Connection| {
            x += 1;
            conn.execute("INSERT INTO t VALUES (?1)", [x])
                .map_err(|e| Error::storage("sqlite", false, e))?;
            std::thread::sleep(pause);
            if Some(x) == fail_at {
                return Err(Error::invalid(format!("step {x} refused")));
            }
            Ok((x == steps).then_some(x))
        })
    }

    #[test]
    fn a_sliced_job_commits_slice_by_slice_and_a_failed_step_undoes_its_slice_alone() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let writer = writer();
        // steps of a whole slice each: one transaction a step
        let before = writer.counters.transactions.load(Ordering::Relaxed);
        assert_eq!(rt.block_on(sliced_inserts(&writer, 4, SLICE, None)).unwrap(), 4);
        let slices = writer.counters.transactions.load(Ordering::Relaxed) - before;
        assert_eq!(slices, 4);
        // short steps share a slice
        let before = writer.counters.transactions.load(Ordering::Relaxed);
        assert_eq!(
            rt.block_on(sliced_inserts(&writer, 50, Duration::ZERO, None)).unwrap(),
            50
        );
        assert!(writer.counters.transactions.load(Ordering::Relaxed) - before < 50);
        assert_eq!(rows(&writer, &rt), 54);
        // the third step fails: the two slices before it stay
        rt.block_on(writer.write("test", |conn: &Connection| {
            conn.execute("DELETE FROM t", [])
                .map(drop)
                .map_err(|e| Error::storage("sqlite", false, e))
        }))
        .unwrap();
        let err = rt.block_on(sliced_inserts(&writer, 5, SLICE, Some(3))).unwrap_err();
        assert!(err.to_string().contains("step 3 refused"), "{err}");
        let kept = rt.block_on(writer.read(|conn: &Connection| Ok(stored(conn)))).unwrap();
        assert_eq!(kept, vec![1, 2]);
    }

    #[test]
    fn a_write_queued_during_a_sliced_job_goes_before_its_next_slice() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let writer = Arc::new(writer());
        // 200 steps of 1 ms: at least 200 ms of work
        let job = {
            let writer = writer.clone();
            rt.spawn(async move { sliced_inserts(&writer, 200, Duration::from_millis(1), None).await })
        };
        rt.block_on(async {
            // until the job has begun
            while rows_now(&writer).await == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            writer
                .write("test", |conn: &Connection| {
                    conn.execute("INSERT INTO t VALUES (-1)", [])
                        .map(drop)
                        .map_err(|e| Error::storage("sqlite", false, e))
                })
                .await
                .unwrap();
        });
        assert_eq!(rt.block_on(job).unwrap().unwrap(), 200);
        // it went in between two slices, not after the job's last one
        let before_it: i64 = rt
            .block_on(writer.read(|conn: &Connection| {
                conn.query_row(
                    "SELECT count(*) FROM t WHERE rowid < (SELECT rowid FROM t WHERE x = -1)",
                    [],
                    |r| r.get(0),
                )
                .map_err(|e| Error::storage("sqlite", false, e))
            }))
            .unwrap();
        assert!(before_it < 200, "{before_it} steps went first");
    }

    async fn rows_now(writer: &Writer) -> i64 {
        writer
            .read(|conn: &Connection| {
                conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                    .map_err(|e| Error::storage("sqlite", false, e))
            })
            .await
            .unwrap()
    }

    #[test]
    fn a_slice_commits_without_sync_and_the_connection_keeps_its_level() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("w.sqlite")).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE t (x INTEGER)")
            .unwrap();
        let writer = Writer::start(conn, false).unwrap();
        let level = rt
            .block_on(writer.write_sliced("test", move |conn: &Connection| {
                conn.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))
                    .map(Some)
                    .map_err(|e| Error::storage("sqlite", false, e))
            }))
            .unwrap();
        // NORMAL inside the slice, FULL again after it
        assert_eq!(level, 1);
        let after = rt
            .block_on(writer.read(|conn: &Connection| {
                conn.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))
                    .map_err(|e| Error::storage("sqlite", false, e))
            }))
            .unwrap();
        assert_eq!(after, 2);
    }

    #[test]
    fn a_sliced_job_begun_before_close_runs_to_its_end() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let writer = Arc::new(writer());
        let job = {
            let writer = writer.clone();
            rt.spawn(async move { sliced_inserts(&writer, 20, SLICE, None).await })
        };
        rt.block_on(async {
            while rows_now(&writer).await == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let handle = writer.close().unwrap();
        assert_eq!(rt.block_on(job).unwrap().unwrap(), 20);
        handle.join().unwrap();
    }
}
