//! Reader connections, used from blocking tasks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::Semaphore;

use super::open_reader;
use crate::error::{Error, Result};

/// Up to `max` reader connections, opened on first need and reused.
#[derive(Debug)]
pub(crate) struct ReaderPool {
    path: PathBuf,
    busy_timeout: Duration,
    idle: parking_lot::Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

impl ReaderPool {
    pub(crate) fn new(path: PathBuf, busy_timeout: Duration, max: usize) -> Self {
        ReaderPool {
            path,
            busy_timeout,
            idle: parking_lot::Mutex::new(Vec::with_capacity(max)),
            permits: Arc::new(Semaphore::new(max)),
        }
    }

    /// Runs `work` on a reader connection: in `spawn_blocking` inside a tokio
    /// runtime, inline otherwise (no runtime thread to keep free). Waits
    /// (asynchronously) while all connections are busy.
    pub(crate) async fn run<T, F>(self: &Arc<Self>, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::storage("sqlite", false, e))?;
        let pool = self.clone();
        let task = move || {
            let conn = pool.checkout()?;
            let out = work(&conn);
            pool.idle.lock().push(conn);
            drop(permit);
            out
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => rt
                .spawn_blocking(task)
                .await
                .map_err(|e| Error::storage("sqlite", false, e))?,
            Err(_) => task(),
        }
    }

    fn checkout(&self) -> Result<Connection> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok(conn);
        }
        open_reader(&self.path, self.busy_timeout)
    }

    /// Closes the idle connections (busy ones close when their read ends
    /// and they are next taken).
    pub(crate) fn close_idle(&self) {
        self.idle.lock().clear();
    }
}
