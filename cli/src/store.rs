//! The stores the commands work on: a URL opened with [`checkpointer::OpenOptions`]
//! (its module docs list the URL forms: `sqlite://`, `postgres://`,
//! `redis://`, `rediss://`, cluster lists, `memory:`), and what the commands
//! ask of every store through its administrative face and its saver.
//!
//! Commands that only read open a store read-only (a SQLite file is never
//! touched, not even switched to WAL mode; no PostgreSQL table and no Redis
//! key is written) and need it to exist; only `copy` creates a store (file,
//! tables, Redis layout marker) that is missing.

use std::sync::Arc;

use checkpointer::import::{ImportMode, ThreadImport};
use checkpointer::saver::ThreadKeys;
use checkpointer::secret::redact;
use checkpointer::space::{ReclaimOptions, ReclaimReport, SpaceUsage};
use checkpointer::{
    CheckpointConfig, CheckpointSaver, CheckpointSaverExt, ListOptions, ListThreadsOptions, OpenOptions, SaverAdmin,
    StorageSize, ValueLayout,
};

use crate::error::{CliError, CliResult, Context};

/// What a command does with a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only: opened read-only; it must exist.
    Read,
    /// Changes existing data: the store must exist and have its tables.
    Write,
    /// The target of a copy: created (file, tables, marker) when missing.
    Create,
}

/// A library error met opening `url`: a bad URL is a usage error, a
/// missing file a not-found one.
pub fn open_error(url: &str, access: Access, e: checkpointer::Error) -> CliError {
    match e {
        checkpointer::Error::InvalidInput { reason } => CliError::usage(reason),
        checkpointer::Error::NotFound { what } => CliError::not_found(what),
        e => {
            let doing = if access == Access::Create { "set up" } else { "open" };
            tls_certificate_hint(tls_hint(CliError::from_lib(
                &format!("cannot {doing} {}", redact(url)),
                e,
            )))
        }
    }
}

/// Checks a store URL without opening it; gives the backend it names
/// (`"memory"`, `"sqlite"`, `"postgres"`, `"redis"`).
///
/// # Errors
/// Exit 2 for a URL of no known form.
pub fn check(url: &str) -> CliResult<&'static str> {
    if !url.contains(':') && url.contains('=') {
        // the library also reads libpq `key=value` strings; the command
        // line takes URLs only, so a mistyped argument is never a server
        return Err(CliError::usage(format!("bad store URL {:?}: not a URL", redact(url)))
            .with_hint("for PostgreSQL, write postgres://USER:PASSWORD@HOST:PORT/DB"));
    }
    OpenOptions::check(url).map_err(|e| open_error(url, Access::Read, e))
}

/// This build connects to PostgreSQL without TLS: say so when a server or
/// URL asks for it.
fn tls_hint(e: CliError) -> CliError {
    if e.message.contains("TLS") && e.message.contains("postgres") {
        e.with_hint("this build of checkpointer connects without TLS: use sslmode=disable, or a local tunnel")
    } else {
        e
    }
}

/// The query parameters that fix a TLS certificate error of a `rediss://`
/// store, as a hint.
fn tls_certificate_hint(e: CliError) -> CliError {
    if e.message.contains("UnknownIssuer") {
        e.with_hint("the server's certificate is signed by a CA the webpki roots do not hold: give its CA file as rediss://…?ca=/path/ca.pem")
    } else if e.message.contains("CertificateRequired") {
        e.with_hint("the server requires a client certificate: rediss://…?cert=/path/client.pem&key=/path/client.key")
    } else {
        e
    }
}

/// An open store.
pub struct Store {
    /// The store's saver.
    pub saver: Arc<dyn CheckpointSaver>,
    admin: Arc<dyn SaverAdmin>,
}

impl Store {
    /// Opens the store behind `url`.
    ///
    /// # Errors
    /// Exit 2 for a bad URL, exit 3 for a missing SQLite file (or the
    /// directory of a copy target), exit 4 when the store cannot be opened
    /// or reached or has no checkpoint tables (a Redis prefix: no layout
    /// marker).
    pub async fn open(url: &str, access: Access) -> CliResult<Store> {
        check(url)?;
        let options = OpenOptions::new()
            .read_only(access == Access::Read)
            .create(access == Access::Create);
        let admin = options.open(url).await.map_err(|e| open_error(url, access, e))?;
        Ok(Store {
            saver: admin.saver(),
            admin,
        })
    }

    /// The URL for messages, its secrets masked.
    pub fn name(&self) -> String {
        self.admin.name()
    }

    /// The dump's `"source"`, as `read_fixtures.py` names it: the file
    /// name, or the backend.
    pub fn source_name(&self) -> String {
        self.admin.source_name()
    }

    /// How `import_thread` replaces a thread, in words.
    pub fn import_note(&self) -> &'static str {
        self.admin.import_note()
    }

    /// What tells two open stores apart (`None` for memory, never shared).
    ///
    /// # Errors
    /// Exit 4 when the store cannot be asked.
    pub async fn identity(&self) -> CliResult<Option<String>> {
        self.admin
            .identity()
            .await
            .context(format!("cannot read {}", self.name()))
    }

    /// How the backend stores values.
    pub fn layout(&self) -> ValueLayout {
        self.admin.layout()
    }

    /// What the store takes, if it can tell.
    pub async fn size(&self) -> Option<StorageSize> {
        self.admin.storage_size().await.ok().flatten()
    }

    /// What the store takes part by part, and what is reclaimable, if it
    /// can tell.
    pub async fn space_usage(&self) -> Option<SpaceUsage> {
        self.admin.space_usage().await.ok().flatten()
    }

    /// Gives back the space deletes freed (see `checkpointer::space`).
    ///
    /// # Errors
    /// Exit 2 for an option the store cannot honour, 4 when the store
    /// refuses.
    pub async fn reclaim_space(&self, options: ReclaimOptions) -> CliResult<ReclaimReport> {
        match self.admin.reclaim_space(options).await {
            Err(checkpointer::Error::InvalidInput { reason }) => Err(CliError::usage(reason)),
            out => out.context(format!("cannot reclaim the space of {}", self.name())),
        }
    }

    /// Waits for queued writes and closes the store.
    ///
    /// # Errors
    /// Exit 4 when the writes cannot be finished.
    pub async fn close(self) -> CliResult<()> {
        let name = self.name();
        drop(self.saver);
        self.admin.close().await.context(format!("cannot close {name}"))
    }

    /// Writes a whole thread at once (the saver's `import_thread`): the
    /// thread is whole or absent after a failure or a crash.
    pub async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> checkpointer::Result<()> {
        self.admin.import_thread(thread, mode).await
    }

    /// Every thread id, in order.
    ///
    /// # Errors
    /// Exit 4 on storage failures.
    pub async fn thread_ids(&self) -> CliResult<Vec<String>> {
        const PAGE: usize = 500;
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .saver
                .list_threads(ListThreadsOptions {
                    filter: Default::default(),
                    after: after.clone(),
                    limit: Some(PAGE),
                })
                .await
                .context(format!("cannot list the threads of {}", self.name()))?;
            let n = page.len();
            after = page.last().map(|t| t.thread_id.clone());
            out.extend(page.into_iter().map(|t| t.thread_id));
            if n < PAGE {
                return Ok(out);
            }
        }
    }

    /// Whether the thread has a checkpoint in any namespace.
    ///
    /// # Errors
    /// Exit 4 on storage failures.
    pub async fn thread_exists(&self, thread_id: &str) -> CliResult<bool> {
        let found = self
            .saver
            .list_vec(
                Some(CheckpointConfig::all_namespaces(thread_id)),
                ListOptions::default().limit(1),
            )
            .await
            .context(format!("cannot read thread {thread_id:?} of {}", self.name()))?;
        Ok(!found.is_empty())
    }

    /// Fails with exit 3 unless every thread exists.
    ///
    /// # Errors
    /// Exit 3 naming the missing threads; exit 4 on storage failures.
    pub async fn require_threads(&self, threads: &[String]) -> CliResult<()> {
        let mut missing = Vec::new();
        for t in threads {
            if !self.thread_exists(t).await? {
                missing.push(format!("{t:?}"));
            }
        }
        match missing.as_slice() {
            [] => Ok(()),
            [one] => Err(CliError::not_found(format!("no thread {one} in {}", self.name()))),
            _ => Err(CliError::not_found(format!(
                "no threads {} in {}",
                missing.join(", "),
                self.name()
            ))),
        }
    }

    /// The keys of every checkpoint and write of a thread, read without
    /// decoding anything (so an undecodable row is still named).
    ///
    /// # Errors
    /// Exit 4 on storage failures.
    pub async fn thread_keys(&self, thread_id: &str) -> CliResult<ThreadKeys> {
        self.saver
            .thread_keys(thread_id)
            .await
            .context(format!("cannot read thread {thread_id:?} of {}", self.name()))
    }

    /// The namespaces of a thread with their checkpoint counts, by name.
    ///
    /// # Errors
    /// Exit 4 on storage failures.
    pub async fn thread_namespaces(&self, thread_id: &str) -> CliResult<Vec<(String, u64)>> {
        let keys = self.thread_keys(thread_id).await?;
        Ok(keys
            .namespaces()
            .into_iter()
            .map(|(ns, n)| (ns.to_owned(), n as u64))
            .collect())
    }

    /// Every checkpoint of a thread that cannot be read, named with its
    /// namespace and id and the reason: what to say when reading the thread
    /// failed. Empty when every row reads (or the backend cannot tell).
    pub async fn bad_rows(&self, thread_id: &str) -> Vec<String> {
        let Ok(keys) = self.thread_keys(thread_id).await else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for key in keys.checkpoints {
            let (ns, id) = (key.checkpoint_ns, key.checkpoint_id);
            let config = CheckpointConfig::new(thread_id)
                .with_ns(ns.clone())
                .with_checkpoint_id(id.clone());
            if let Err(e) = self.saver.get_tuple(&config).await {
                let place = if ns.is_empty() {
                    format!("thread {thread_id:?}, checkpoint {id}")
                } else {
                    format!("thread {thread_id:?}, namespace {ns:?}, checkpoint {id}")
                };
                out.push(format!("{place}: cannot be read: {e}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Exit;

    #[test]
    fn bad_urls_are_usage_errors() {
        for bad in [
            "",
            "sqlite://",
            "sqlite:x",
            "x.sqlite",
            "host=h password=secret",
            "redis://h:port",
            "redis://h?prefix=",
            "redis://h?prefix=a%7Bb",
            "redis://h?ca=/ca.pem",
            "rediss://h?cert=/c.pem",
            "rediss://h?ca=",
            "postgres://h:port/db",
        ] {
            assert_eq!(check(bad).unwrap_err().exit, Exit::Usage, "{bad}");
        }
        for good in [
            "sqlite://data/x.sqlite",
            "memory:",
            "postgres://u@h/db",
            "postgresql://u:p@h:5433/db?sslmode=disable",
            "redis://:pw@h:6380/2?prefix=my%20app&protocol=resp3",
            "rediss://:pw@h:6380/2?prefix=p&ca=/etc/my%20ca.pem&cert=c.pem&key=c.key",
        ] {
            check(good).unwrap();
        }
    }

    #[test]
    fn redis_passwords_are_masked() {
        let err = check("redis://:secret@h:port").unwrap_err();
        assert!(!err.message.contains("secret"), "{}", err.message);
        let err = check("redis://:secret@h?ca=ca.pem").unwrap_err();
        assert!(
            !err.message.contains("secret") && err.message.contains("rediss://"),
            "{}",
            err.message
        );
        assert_eq!(
            redact("redis://:secret@127.0.0.1:6379/0?prefix=p"),
            "redis://:***@127.0.0.1:6379/0?prefix=p"
        );
        assert_eq!(redact("redis://user:s%40cret@h/1"), "redis://user:***@h/1");
        assert_eq!(redact("rediss://:secret@h?ca=ca.pem"), "rediss://:***@h?ca=ca.pem");
        assert_eq!(
            checkpointer::secret::Secrets::of("redis://u:s%40cret@h").scrub("auth failed for s@cret and s%40cret"),
            "auth failed for *** and ***"
        );
    }

    #[test]
    fn passwords_are_masked() {
        assert_eq!(redact("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(
            redact("postgresql://u@h/db?password=x"),
            "postgresql://u@h/db?password=***"
        );
        assert_eq!(
            redact("host=h user=u password='a b' dbname=db"),
            "host=h user=u password=*** dbname=db"
        );
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        // a PostgreSQL user name is no password
        assert_eq!(redact("postgres://postgres@h/db"), "postgres://postgres@h/db");
        assert_eq!(redact("redis://secret@h/0"), "redis://***@h/0");
    }
}
