//! WAL checkpoints off the commit path.
//!
//! SQLite's own automatic checkpoint runs inside the `COMMIT` that takes
//! the WAL past 1000 pages: that commit (a caller's write, or a retention
//! slice the next write queues behind) copies the pages into the database
//! file and syncs it, tens of milliseconds on a busy disk. The writer
//! connection instead counts the WAL's pages at each commit (a WAL hook,
//! which also turns the automatic checkpoint off) and, past
//! [`CHECKPOINT_PAGES`], wakes a thread of its own that runs a `PASSIVE`
//! checkpoint on a second connection: the writer goes on appending to the
//! WAL meanwhile. Should that thread fall behind (a reader holding old
//! pages keeps a passive checkpoint from finishing), the writer checkpoints
//! itself past [`BACKSTOP_PAGES`], as SQLite would have.

use std::cell::Cell;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use rusqlite::hooks::Wal;
use rusqlite::{Connection, OpenFlags};

/// WAL pages after which the checkpoint thread is woken (SQLite's own
/// automatic checkpoint threshold).
pub(crate) const CHECKPOINT_PAGES: i32 = 1000;

/// WAL pages after which the writer checkpoints itself.
pub(crate) const BACKSTOP_PAGES: i32 = 8 * CHECKPOINT_PAGES;

thread_local! {
    /// The WAL's pages after the last commit on this thread's connection.
    static WAL_PAGES: Cell<i32> = const { Cell::new(0) };
}

fn note_pages(_: &Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_PAGES.set(pages);
    Ok(())
}

/// The checkpoint thread of one writer connection.
#[derive(Debug)]
pub(crate) struct Checkpoints {
    wake: parking_lot::Mutex<Option<SyncSender<()>>>,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

impl Checkpoints {
    /// Starts the thread for `writer` when it writes a file in WAL mode;
    /// `None` otherwise (or when the second connection cannot be opened:
    /// SQLite's automatic checkpoint stays then).
    pub(crate) fn start(writer: &Connection) -> Option<Checkpoints> {
        let wal = writer
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .is_ok_and(|mode| mode.eq_ignore_ascii_case("wal"));
        let path = writer.path().filter(|p| !p.is_empty())?;
        if !wal || writer.is_readonly(rusqlite::MAIN_DB).unwrap_or(true) {
            return None;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).ok()?;
        let (wake, woken) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("checkpointer-sqlite-wal".into())
            .spawn(move || run(&conn, &woken))
            .ok()?;
        writer.wal_hook(Some(note_pages));
        Some(Checkpoints {
            wake: parking_lot::Mutex::new(Some(wake)),
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    /// After a commit on this thread: wakes the checkpoint thread when the
    /// WAL has grown past [`CHECKPOINT_PAGES`], checkpoints on `conn` past
    /// [`BACKSTOP_PAGES`].
    pub(crate) fn after_commit(&self, conn: &Connection) {
        let pages = WAL_PAGES.take();
        if pages >= BACKSTOP_PAGES {
            let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        } else if pages >= CHECKPOINT_PAGES {
            if let Some(wake) = self.wake.lock().as_ref() {
                // full: a wake-up is pending already
                let _: Result<(), TrySendError<()>> = wake.try_send(());
            }
        }
    }

    /// Stops the thread and waits for it: its connection closes before the
    /// writer's, which as the last one folds the WAL into the file.
    pub(crate) fn stop(&self) {
        drop(self.wake.lock().take());
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

fn run(conn: &Connection, woken: &Receiver<()>) {
    while woken.recv().is_ok() {
        // passive: never waits for the writer or a reader; what it cannot
        // copy now the next wake-up copies
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rusqlite::Connection;

    use crate::error::{Error, Result};
    use crate::sqlite::writer::Writer;

    #[test]
    fn the_wal_is_checkpointed_beside_the_writer_and_folded_in_at_close() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.sqlite");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x BLOB)")
            .unwrap();
        let writer = std::sync::Arc::new(Writer::start(conn, false).unwrap());
        // 1500 pages of rows in one commit: past the threshold
        rt.block_on(writer.write("test", |conn: &Connection| {
            conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1500) \
                 INSERT INTO t SELECT zeroblob(4000) FROM n",
                [],
            )
            .map(drop)
            .map_err(|e| Error::storage("sqlite", false, e))
        }))
        .unwrap();
        // the writer thread now holds the connection in a job of its own
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let blocker = {
            let writer = writer.clone();
            rt.spawn(async move {
                writer
                    .write("test", move |_: &Connection| -> Result<()> {
                        let _ = wait.recv();
                        Ok(())
                    })
                    .await
            })
        };
        // meanwhile the pages reach the database file
        let grown = (0..1000).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            std::fs::metadata(&path).unwrap().len() > 1500 * 4000
        });
        release.send(()).unwrap();
        rt.block_on(blocker).unwrap().unwrap();
        assert!(grown, "the WAL was not checkpointed while the writer was busy");
        writer.close().unwrap().join().unwrap();
        assert!(
            !dir.path().join("w.sqlite-wal").exists(),
            "the writer's close was not the last"
        );
    }
}
