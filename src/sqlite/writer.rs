//! The writer thread: the only connection that writes, with group commit.
//!
//! Every mutating operation is sent to one dedicated OS thread as a job. The
//! thread takes the first job, then everything else already queued (up to
//! [`MAX_BATCH`]), and runs them all in one `BEGIN IMMEDIATE` transaction,
//! each inside its own `SAVEPOINT`: a job that fails is rolled back to its
//! savepoint alone and the others go on. One `COMMIT` (one fsync with
//! `synchronous=FULL`) then makes the whole batch durable, and only after it
//! is each caller answered. While a commit is syncing, new jobs queue up and
//! form the next batch, so throughput grows with the number of concurrent
//! writers while every acknowledged write is on disk.
//!
//! Callers wait on a oneshot channel, never on SQLite: an async caller's
//! runtime thread is not blocked.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

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

/// A batch-level failure, handed to every job of the batch.
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

/// The sending side of the writer thread.
#[derive(Debug)]
pub(crate) struct Writer {
    tx: parking_lot::Mutex<Option<Sender<Request>>>,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
    pub(crate) counters: Arc<Counters>,
}

impl Writer {
    /// Starts the thread on an open, set-up connection.
    pub(crate) fn start(conn: Connection) -> Result<Writer> {
        let (tx, rx) = std::sync::mpsc::channel();
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        let thread = std::thread::Builder::new()
            .name("checkpointer-sqlite-writer".into())
            .spawn(move || run(conn, rx, &thread_counters))
            .map_err(|e| Error::storage("sqlite", false, e))?;
        Ok(Writer {
            tx: parking_lot::Mutex::new(Some(tx)),
            thread: parking_lot::Mutex::new(Some(thread)),
            counters,
        })
    }

    fn send(&self, request: Request) -> Result<()> {
        let guard = self.tx.lock();
        let tx = guard.as_ref().ok_or_else(closed)?;
        tx.send(request).map_err(|_| closed())
    }

    /// Queues a write job and waits for the commit that makes it durable.
    pub(crate) async fn write<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Write(Box::new(TypedJob { work, out: None, reply })))?;
        answer.await.map_err(|_| closed())?
    }

    /// Runs a read on the writer's connection.
    pub(crate) async fn read<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Read(Box::new(move |conn: &Connection| {
            let out = catch_unwind(AssertUnwindSafe(|| work(conn)))
                .unwrap_or_else(|_| Err(Error::storage("sqlite", false, "a read job panicked")));
            let _ = reply.send(out);
        })))?;
        answer.await.map_err(|_| closed())?
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

fn run(conn: Connection, rx: Receiver<Request>, counters: &Counters) {
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
        if !batch.is_empty() {
            counters.jobs.fetch_add(batch.len() as u64, Ordering::Relaxed);
            counters.transactions.fetch_add(1, Ordering::Relaxed);
            execute(&conn, std::mem::take(&mut batch));
        }
        for read in reads.drain(..) {
            read(&conn);
        }
    }
    // every sender is gone and the queue is drained: closing the connection
    // checkpoints the WAL when this is the last one
    drop(conn);
}

fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Runs one batch in one transaction (see the module docs).
fn execute(conn: &Connection, mut jobs: Vec<Box<dyn Job>>) {
    loop {
        if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
            let failure = Failure::from_sql("cannot start a write transaction", &e);
            for job in jobs {
                job.finish(Some(&failure));
            }
            return;
        }
        let mut aborted = None;
        for (i, job) in jobs.iter_mut().enumerate() {
            if let Err(e) = exec(conn, "SAVEPOINT checkpointer_job") {
                aborted = Some((i, Some(Failure::from_sql("cannot open a savepoint", &e))));
                break;
            }
            if job.run(conn) {
                if let Err(e) = exec(conn, "RELEASE checkpointer_job") {
                    aborted = Some((i, Some(Failure::from_sql("cannot release a savepoint", &e))));
                    break;
                }
                continue;
            }
            if conn.is_autocommit() {
                // SQLite rolled the whole transaction back (disk full, I/O
                // error): drop this job and run the others again
                aborted = Some((i, None));
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
                let failed = jobs.remove(i);
                failed.finish(None);
                if jobs.is_empty() {
                    return;
                }
                continue;
            }
            Some((_, Some(failure))) => {
                let _ = exec(conn, "ROLLBACK");
                for job in jobs {
                    job.finish(Some(&failure));
                }
                return;
            }
        }
        match exec(conn, "COMMIT") {
            Ok(()) => {
                for job in jobs {
                    job.finish(None);
                }
            }
            Err(e) => {
                let failure = Failure::from_sql("commit failed", &e);
                if !conn.is_autocommit() {
                    let _ = exec(conn, "ROLLBACK");
                }
                for job in jobs {
                    job.finish(Some(&failure));
                }
            }
        }
        return;
    }
}
