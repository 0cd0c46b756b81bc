//! Reader connections.
//!
//! A read runs on the caller's thread when it cannot wait on a lock, and on
//! a blocking thread when it might (see the `sqlite` module docs, "Where
//! reads run").

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::Semaphore;

use super::builder::open_reader;
use super::error::sql_error;
use crate::error::{Error, Result};

/// How long a read may run SQLite on the caller's thread before it is
/// stopped and run again in `spawn_blocking`. Point reads and `list` pages
/// without a filter take tens of microseconds; a filter scanning thousands
/// of rows takes milliseconds, and the budget spent before it moves is lost.
pub(crate) const INLINE_BUDGET: Duration = Duration::from_micros(500);

/// SQLite VM instructions between two looks at the clock (a few
/// microseconds of work).
const BUDGET_CHECK_OPS: c_int = 1000;

/// A stored row or filter of more bytes than this is not compared on the
/// caller's thread: one comparison runs inside one SQL function call, where
/// the progress handler cannot stop it, and reading this much takes about
/// the whole inline budget.
const INLINE_MAX_FUNCTION_BYTES: usize = 64 * 1024;

thread_local! {
    /// The deadline and stop flag of the inline read running on this thread.
    static INLINE_READ: std::cell::RefCell<Option<(Instant, Arc<AtomicBool>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Called by this crate's SQL functions before work proportional to `bytes`:
/// whether the inline read running on this thread (if any) is out of time or
/// would be by this call, in which case it is marked stopped (to run again
/// in a blocking task) and the function should fail.
pub(crate) fn inline_read_must_stop(bytes: usize) -> bool {
    INLINE_READ.with(|cell| {
        let cell = cell.borrow();
        let Some((deadline, stopped)) = cell.as_ref() else {
            return false;
        };
        let stop = bytes > INLINE_MAX_FUNCTION_BYTES || Instant::now() >= *deadline;
        if stop {
            stopped.store(true, Ordering::Relaxed);
        }
        stop
    })
}

/// Clears [`INLINE_READ`] when the inline attempt ends, however it ends.
struct InlineReadGuard;

impl Drop for InlineReadGuard {
    fn drop(&mut self) {
        INLINE_READ.with(|cell| cell.borrow_mut().take());
    }
}

/// What a read does, which says where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadKind {
    /// A few index lookups (or a short walk): starts on the caller's thread.
    Lookup,
    /// A scan of the whole table (a filter across all threads): starts in
    /// `spawn_blocking`, where it would end up after the inline budget.
    Scan,
}

/// How one attempt at a read runs.
enum Attempt {
    /// On the caller's thread: no busy timeout, SQLite stopped after
    /// [`INLINE_BUDGET`] (then the flag is set).
    Inline(Arc<AtomicBool>),
    /// In a blocking task (or outside a runtime): the configured busy
    /// timeout, no time limit.
    Blocking,
}

/// How reader connections are opened and used.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReaderSettings {
    /// The busy timeout of a read run in `spawn_blocking`.
    pub(crate) busy_timeout: Duration,
    /// SQLite's `mmap_size` of each connection.
    pub(crate) mmap_size: u64,
    /// Whether a read first runs on the caller's thread.
    pub(crate) inline: bool,
    /// How long it may run there ([`INLINE_BUDGET`] but in tests).
    pub(crate) inline_budget: Duration,
    /// Whether the path is a read-only open's URI.
    pub(crate) read_only: bool,
}

/// Up to `max` reader connections, opened on first need and reused.
#[derive(Debug)]
pub(crate) struct ReaderPool {
    path: PathBuf,
    settings: ReaderSettings,
    idle: parking_lot::Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

impl ReaderPool {
    pub(crate) fn new(path: PathBuf, settings: ReaderSettings, max: usize) -> Self {
        ReaderPool {
            path,
            settings,
            idle: parking_lot::Mutex::new(Vec::with_capacity(max)),
            permits: Arc::new(Semaphore::new(max)),
        }
    }

    /// Runs `work` on a reader connection, waiting (asynchronously) while all
    /// connections are busy.
    ///
    /// Outside a tokio runtime it runs inline. Inside one it first runs
    /// inline (when inline reads are on) with no busy timeout and SQLite
    /// stopped after [`INLINE_BUDGET`]: a WAL reader takes no lock another
    /// connection holds for long, so the read either proceeds at once or
    /// fails with "busy". If it fails with "busy" or runs out of time (a
    /// filter scanning many rows), it is run again in `spawn_blocking` with
    /// the configured busy timeout and no time limit, where neither waiting
    /// nor a long scan holds a runtime thread. A [`ReadKind::Scan`] starts
    /// there.
    pub(crate) async fn run<T, F>(self: &Arc<Self>, kind: ReadKind, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> Result<T> + Send + 'static,
    {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::storage("sqlite", false, e))?;
        let rt = match tokio::runtime::Handle::try_current() {
            // a caller that may block runs the read itself, to the end
            Ok(rt) if !super::blocking_allowed() => rt,
            _ => return self.with_connection(Attempt::Blocking, &work),
        };
        if self.settings.inline && kind == ReadKind::Lookup {
            let stopped = Arc::new(AtomicBool::new(false));
            match self.with_connection(Attempt::Inline(stopped.clone()), &work) {
                Err(e) if e.is_retryable() => {}
                _ if stopped.load(Ordering::Relaxed) => {}
                done => return done,
            }
        }
        let pool = self.clone();
        rt.spawn_blocking(move || {
            let out = pool.with_connection(Attempt::Blocking, &work);
            drop(permit);
            out
        })
        .await
        .map_err(|e| Error::storage("sqlite", false, e))?
    }

    /// Runs `work` on an idle (or new) connection. A panic in `work` is an
    /// error, as it was when reads ran only in `spawn_blocking`; its
    /// connection is closed rather than reused.
    fn with_connection<T>(&self, attempt: Attempt, work: impl Fn(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.checkout()?;
        let out = catch_unwind(AssertUnwindSafe(|| {
            let mut _guard = None;
            match attempt {
                Attempt::Inline(stopped) => {
                    conn.busy_timeout(Duration::ZERO).map_err(sql_error)?;
                    let deadline = Instant::now() + self.settings.inline_budget;
                    INLINE_READ.with(|cell| *cell.borrow_mut() = Some((deadline, stopped.clone())));
                    _guard = Some(InlineReadGuard);
                    let handler = move || {
                        let over = Instant::now() >= deadline;
                        if over {
                            stopped.store(true, Ordering::Relaxed);
                        }
                        over
                    };
                    conn.progress_handler(BUDGET_CHECK_OPS, Some(handler))
                        .map_err(sql_error)?;
                }
                Attempt::Blocking => {
                    conn.busy_timeout(self.settings.busy_timeout).map_err(sql_error)?;
                    conn.progress_handler(0, None::<fn() -> bool>).map_err(sql_error)?;
                }
            }
            work(&conn)
        }));
        match out {
            Ok(out) => {
                // a read that left a transaction open (it was stopped while
                // ending it) would hold its snapshot, and the WAL with it:
                // end it, or close the connection
                if conn.is_autocommit() || end_transaction(&conn) {
                    self.idle.lock().push(conn);
                }
                out
            }
            Err(_) => Err(Error::storage("sqlite", false, "a read panicked")),
        }
    }

    /// Opens one connection ahead of the first read and has it read the
    /// schema, so the first read does not pay for either. A failure is left
    /// for that read to meet and report.
    pub(crate) fn warm_up(&self) {
        if let Ok(conn) = self.checkout() {
            if conn.prepare("SELECT 1 FROM checkpoints LIMIT 0").is_ok() {
                self.idle.lock().push(conn);
            }
        }
    }

    fn checkout(&self) -> Result<Connection> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok(conn);
        }
        open_reader(
            &self.path,
            self.settings.busy_timeout,
            self.settings.mmap_size,
            self.settings.read_only,
        )
    }

    /// Closes the idle connections (busy ones close when their read ends
    /// and they are next taken).
    pub(crate) fn close_idle(&self) {
        self.idle.lock().clear();
    }
}

/// Rolls back the transaction a read left open, with nothing left to stop
/// it; whether the connection is back in autocommit mode.
pub(crate) fn end_transaction(conn: &Connection) -> bool {
    let _ = conn.progress_handler(0, None::<fn() -> bool>);
    let _ = conn.execute_batch("ROLLBACK");
    conn.is_autocommit()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn pool(dir: &tempfile::TempDir, inline: bool) -> Arc<ReaderPool> {
        pool_with_budget(dir, inline, INLINE_BUDGET)
    }

    fn pool_with_budget(dir: &tempfile::TempDir, inline: bool, inline_budget: Duration) -> Arc<ReaderPool> {
        let path = dir.path().join("pool.sqlite");
        Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA journal_mode = WAL")
            .unwrap();
        let settings = ReaderSettings {
            busy_timeout: Duration::from_millis(1234),
            mmap_size: 0,
            inline,
            inline_budget,
            read_only: false,
        };
        Arc::new(ReaderPool::new(path, settings, 2))
    }

    fn busy_timeout_ms(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA busy_timeout", [], |r| r.get(0)).unwrap()
    }

    /// Inline first, with no busy timeout; after a "busy" answer, again on a
    /// blocking thread with the configured timeout.
    #[tokio::test(flavor = "current_thread")]
    async fn a_busy_inline_read_runs_again_in_a_blocking_task() {
        let (out, attempts) = first_and_later(
            |conn, on_caller| {
                assert!(on_caller);
                assert_eq!(busy_timeout_ms(conn), 0);
                Err(Error::storage("sqlite", true, "database is locked"))
            },
            busy_timeout_ms,
        )
        .await;
        assert_eq!(out, (false, 1234));
        assert_eq!(attempts, 2);
    }

    /// A lookup on an inline pool whose first attempt answers `first` (given
    /// whether it runs on the caller's thread) and any later one `later`:
    /// (whether the attempt that answered ran on the caller's thread, its
    /// answer), and how many attempts ran.
    async fn first_and_later<T: Send + 'static>(
        first: impl Fn(&Connection, bool) -> Result<T> + Send + 'static,
        later: impl Fn(&Connection) -> T + Send + 'static,
    ) -> ((bool, T), usize) {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir, true);
        let caller = std::thread::current().id();
        let attempts = Arc::new(AtomicUsize::new(0));
        let seen = attempts.clone();
        let out = pool
            .run(ReadKind::Lookup, move |conn| {
                let on_caller = std::thread::current().id() == caller;
                match seen.fetch_add(1, Ordering::SeqCst) {
                    0 => Ok((on_caller, first(conn, on_caller)?)),
                    _ => Ok((on_caller, later(conn))),
                }
            })
            .await
            .unwrap();
        (out, attempts.load(Ordering::SeqCst))
    }

    /// A read that returns with a transaction open (as one stopped while
    /// ending its snapshot would) has it rolled back before its connection
    /// is reused: the next read starts in autocommit mode.
    #[tokio::test(flavor = "current_thread")]
    async fn a_transaction_a_read_left_open_is_ended() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir, true);
        pool.run(ReadKind::Lookup, |conn| {
            conn.execute_batch("BEGIN; SELECT count(*) FROM sqlite_master;")
                .map_err(sql_error)?;
            assert!(!conn.is_autocommit());
            Ok(())
        })
        .await
        .unwrap();
        let autocommit = pool
            .run(ReadKind::Lookup, |conn| Ok(conn.is_autocommit()))
            .await
            .unwrap();
        assert!(autocommit);
        assert_eq!(pool.idle.lock().len(), 1, "the connection was reused");
    }

    /// Counts from 1 to `n` in SQL: VM work that grows with `n`.
    fn count_to(conn: &rusqlite::Connection, n: i64) -> Result<i64> {
        conn.query_row(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1) SELECT count(*) FROM c",
            [n],
            |r| r.get(0),
        )
        .map_err(sql_error)
    }

    /// Inside `may_block`, a read runs once, on the caller's thread, to the
    /// end and with the configured busy timeout: past the inline budget and
    /// for a scan alike, with no second attempt elsewhere.
    #[test]
    fn a_caller_that_may_block_reads_on_its_own_thread() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pool = pool_with_budget(&dir, true, Duration::from_micros(1));
        let caller = std::thread::current().id();
        for kind in [ReadKind::Lookup, ReadKind::Scan] {
            let attempts = Arc::new(AtomicUsize::new(0));
            let seen = attempts.clone();
            let read = pool.run(kind, move |conn| {
                seen.fetch_add(1, Ordering::SeqCst);
                // far more VM work than the budget
                let n = count_to(conn, 20000)?;
                Ok((std::thread::current().id() == caller, n, busy_timeout_ms(conn)))
            });
            let out = crate::sqlite::may_block(|| rt.block_on(read)).unwrap();
            assert_eq!(out, (true, 20000, 1234), "{kind:?}");
            assert_eq!(attempts.load(Ordering::SeqCst), 1, "{kind:?}");
        }
    }

    /// An inline read still running SQLite after the budget is stopped and
    /// run again off the caller's thread.
    #[tokio::test(flavor = "current_thread")]
    async fn a_long_inline_read_moves_to_a_blocking_task() {
        let started = Instant::now();
        // seconds of VM work, unless stopped
        let (out, attempts) = first_and_later(|conn, _| count_to(conn, 100_000_000), |_| 0).await;
        assert_eq!(out, (false, 0));
        assert_eq!(attempts, 2);
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    }

    /// One call of the metadata filter function on a row too big to compare
    /// within the inline budget (which no progress handler can stop) stops
    /// the inline read; it runs again, whole, off the caller's thread. A
    /// small row is compared inline.
    #[tokio::test(flavor = "current_thread")]
    async fn a_filter_call_on_a_big_row_moves_the_read_to_a_blocking_task() {
        let dir = tempfile::tempdir().unwrap();
        // a budget no loaded machine runs out of: what moves the big row is
        // its size alone, checked before the call
        let pool = pool_with_budget(&dir, true, Duration::from_secs(30));
        let caller = std::thread::current().id();
        let filter =
            super::super::functions::encode_filter(&[("k".to_owned(), crate::Value::from(1))].into_iter().collect())
                .unwrap();
        for (keys, inline) in [(10, true), (20_000, false)] {
            let metadata = crate::serde::json::to_python_json(&crate::Value::Map(
                (0..keys)
                    .map(|i| (crate::Value::from(format!("key-{i}")), crate::Value::from(i)))
                    .collect(),
            ))
            .unwrap();
            let filter = filter.clone();
            let attempts = Arc::new(AtomicUsize::new(0));
            let seen = attempts.clone();
            let (on_caller, matched) = pool
                .run(ReadKind::Lookup, move |conn| {
                    seen.fetch_add(1, Ordering::SeqCst);
                    let matched: bool = conn
                        .query_row(
                            "SELECT checkpointer_metadata_matches(?1, ?2)",
                            rusqlite::params![metadata.as_bytes(), filter],
                            |r| r.get(0),
                        )
                        .map_err(sql_error)?;
                    Ok((std::thread::current().id() == caller, matched))
                })
                .await
                .unwrap();
            assert_eq!(on_caller, inline, "{keys} keys");
            assert!(!matched, "{keys} keys");
            assert_eq!(attempts.load(Ordering::SeqCst), if inline { 1 } else { 2 });
        }
    }

    /// Any other outcome of the inline read is the answer.
    #[tokio::test(flavor = "current_thread")]
    async fn an_inline_read_that_fails_otherwise_is_not_repeated() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir, true);
        let attempts = Arc::new(AtomicUsize::new(0));
        let seen = attempts.clone();
        let out: Result<()> = pool
            .run(ReadKind::Lookup, move |_| {
                seen.fetch_add(1, Ordering::SeqCst);
                Err(Error::storage("sqlite", false, "disk I/O error"))
            })
            .await;
        assert!(out.is_err());
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
    }

    /// A panicking read is an error, inline as in a blocking task.
    #[tokio::test(flavor = "current_thread")]
    async fn a_panicking_read_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        for inline in [true, false] {
            let out: Result<()> = pool(&dir, inline).run(ReadKind::Lookup, |_| panic!("bug")).await;
            assert!(matches!(out, Err(Error::Storage { .. })), "{out:?}");
        }
    }

    /// A scan starts off the caller's thread, with the configured timeout.
    #[tokio::test(flavor = "current_thread")]
    async fn a_scan_starts_in_a_blocking_task() {
        let dir = tempfile::tempdir().unwrap();
        let caller = std::thread::current().id();
        let out = pool(&dir, true)
            .run(ReadKind::Scan, move |conn| {
                Ok((std::thread::current().id() == caller, busy_timeout_ms(conn)))
            })
            .await
            .unwrap();
        assert_eq!(out, (false, 1234));
    }

    /// With inline reads off, every read runs on a blocking thread.
    #[tokio::test(flavor = "current_thread")]
    async fn without_inline_reads_every_read_is_off_the_caller_thread() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir, false);
        let caller = std::thread::current().id();
        let (on_caller, timeout) = pool
            .run(ReadKind::Lookup, move |conn| {
                Ok((std::thread::current().id() == caller, busy_timeout_ms(conn)))
            })
            .await
            .unwrap();
        assert!(!on_caller);
        assert_eq!(timeout, 1234);
    }
}
