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

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::blocking_allowed;
use super::error::is_busy;
use crate::error::{Error, Result};

/// The most jobs one transaction takes.
pub(crate) const MAX_BATCH: usize = 512;

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
        let out = catch_unwind(AssertUnwindSafe(|| (self.work)(conn)))
            .unwrap_or_else(|_| Err(Error::storage("sqlite", false, "a write job panicked")));
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
}

impl Writer {
    /// Starts the thread on an open, set-up connection; `read_only` refuses
    /// every write.
    pub(crate) fn start(conn: Connection, read_only: bool) -> Result<Writer> {
        let (tx, rx) = std::sync::mpsc::channel();
        let counters = Arc::new(Counters::default());
        let shared: Shared = Arc::new(parking_lot::Mutex::new(Some(conn)));
        let (thread_counters, thread_conn) = (counters.clone(), shared.clone());
        let thread = std::thread::Builder::new()
            .name("checkpointer-sqlite-writer".into())
            .spawn(move || run(&thread_conn, rx, &thread_counters))
            .map_err(|e| Error::storage("sqlite", false, e))?;
        Ok(Writer {
            tx: parking_lot::Mutex::new(Some(tx)),
            conn: shared,
            thread: parking_lot::Mutex::new(Some(thread)),
            counters,
            read_only,
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
        });
        match (queued, done) {
            (None, Some(done)) => done.answer(),
            (Some(job), _) => self.send(Request::Write(job))?,
            (None, None) => {}
        }
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

fn run(shared: &Shared, rx: Receiver<Request>, counters: &Counters) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    let mut reads: Vec<ReadJob> = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(request) = next.take() {
            match request {
                Request::Write(job) => batch.push(job),
                Request::Read(job) => reads.push(job),
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
            continue;
        };
        let mut done = None;
        if !batch.is_empty() {
            counters.jobs.fetch_add(batch.len() as u64, Ordering::Relaxed);
            counters.transactions.fetch_add(1, Ordering::Relaxed);
            done = Some(execute(conn, std::mem::take(&mut batch)));
        }
        for read in reads.drain(..) {
            read(conn);
        }
        drop(guard);
        if let Some(done) = done {
            done.answer();
        }
    }
    // every sender is gone and the queue is drained: closing the connection
    // checkpoints the WAL when this is the last one
    drop(shared.lock().take());
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
}
