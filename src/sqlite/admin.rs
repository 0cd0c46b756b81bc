//! The administrative face of a SQLite file opened by `sqlite://PATH`.
//!
//! A writable open leaves the file in the journal mode it found (a new file
//! ends in rollback-journal mode, as Python's fixtures are): the saver
//! switches it to WAL, and [`SaverAdmin::close`] switches it back once the
//! WAL is folded in, so readers of the file need no `-wal`/`-shm` (unless
//! [`OpenOptions::restore_journal`] is off: then it stays in WAL mode).
//! `sqlite://:memory:` is a private in-memory database.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};

use super::{queries, SqliteSaver};
use crate::import::{ImportMode, ThreadImport};
use crate::open::{admin_names, OpenOptions, SaverAdmin, StorageSize, ValueLayout};
use crate::secret::redact;
use crate::space::{ReclaimOptions, ReclaimReport, SpaceUsage};
use crate::{Error, Result};

/// The file of a `sqlite://` URL: the rest of it, as written.
///
/// # Errors
/// [`Error::InvalidInput`] without a path.
pub(crate) fn parse(url: &str) -> Result<PathBuf> {
    match url.strip_prefix("sqlite://") {
        Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
        _ => Err(Error::invalid(format!(
            "bad store URL {:?}: no file path (sqlite://PATH, sqlite:///ABSOLUTE/PATH)",
            redact(url)
        ))),
    }
}

fn storage(message: String) -> Error {
    Error::storage("sqlite", false, message)
}

/// Whether `path` names SQLite's private in-memory database.
fn in_memory(path: &Path) -> bool {
    path == Path::new(":memory:")
}

/// Opens the file of `url` as `options` say (see [`OpenOptions`]).
pub(crate) async fn open(url: &str, options: &OpenOptions) -> Result<Arc<dyn SaverAdmin>> {
    let path = parse(url)?;
    let name = redact(url);
    let journal_after = if in_memory(&path) && options.creates() {
        None
    } else {
        look_at(&path, &name, options)?
    };
    let mut builder = SqliteSaver::builder(&path)
        .read_only(options.reads_only())
        .fill_from_parent(options.fill_from_parent);
    if let Some(serializer) = &options.serializer {
        builder = builder.serializer(serializer.clone());
    }
    Ok(Arc::new(SqliteAdmin {
        saver: Arc::new(builder.open().await?),
        path,
        name,
        journal_after: Mutex::new(journal_after),
    }))
}

/// Checks the path of a file to open (`creates`: or to create); whether
/// the file exists. Shared by the saver and the store (feature `store`).
///
/// # Errors
/// [`Error::InvalidInput`] for a directory; [`Error::NotFound`] for a
/// missing file not to be created, or the missing directory of one to be.
pub(crate) fn check_path(path: &Path, name: &str, creates: bool) -> Result<bool> {
    if path.is_dir() {
        return Err(Error::invalid(format!("{name} is a directory, not a SQLite file")));
    }
    if path.exists() {
        return Ok(true);
    }
    if !creates {
        return Err(Error::NotFound {
            what: format!("no such file: {}", path.display()),
        });
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(Error::NotFound {
            what: format!("no such directory: {}", parent.display()),
        });
    }
    Ok(false)
}

/// Checks the file before the saver opens it, as `options` require, and
/// gives the journal mode to leave it in (see [`SqliteAdmin`]).
fn look_at(path: &Path, name: &str, options: &OpenOptions) -> Result<Option<(String, bool)>> {
    if !check_path(path, name, options.creates())? {
        return Ok(options.restore_journal.then(|| ("DELETE".to_owned(), true)));
    }
    if options.creates() && !options.restore_journal {
        // nothing to require of the file, nor to remember
        return Ok(None);
    }
    // looked at read-only first: a file that is not a store is left as it was
    let uri = SqliteSaver::read_only_uri(path)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&uri, flags).map_err(|e| storage(format!("cannot open {name}: {e}")))?;
    let read = |e: rusqlite::Error| storage(format!("cannot read {name}: {e}"));
    let tables: i64 = conn
        .query_row(queries::CHECKPOINT_TABLES, [], |r| r.get(0))
        .map_err(read)?;
    if tables == 0 && !options.creates() {
        return Err(storage(format!(
            "{name} has no checkpoint tables: it is not a checkpoint database of LangGraph's SqliteSaver or checkpointer"
        )));
    }
    let mode: String = conn.query_row(queries::JOURNAL_MODE, [], |r| r.get(0)).map_err(read)?;
    let restore = options.restore_journal && !options.reads_only() && !mode.eq_ignore_ascii_case("wal");
    Ok(restore.then_some((mode, false)))
}

#[derive(Debug)]
struct SqliteAdmin {
    saver: Arc<SqliteSaver>,
    path: PathBuf,
    name: String,
    /// The journal mode to leave the file in after closing, and whether
    /// failing to is an error (a new file).
    journal_after: Mutex<Option<(String, bool)>>,
}

fn wal_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

#[async_trait]
impl SaverAdmin for SqliteAdmin {
    admin_names!("sqlite", "each thread is replaced in one transaction");

    fn source_name(&self) -> String {
        self.path
            .file_name()
            .map_or_else(|| self.path.display().to_string(), |n| n.to_string_lossy().into_owned())
    }

    fn layout(&self) -> ValueLayout {
        ValueLayout::Inline
    }

    async fn identity(&self) -> Result<Option<String>> {
        if in_memory(&self.path) {
            return Ok(None);
        }
        let meta = std::fs::metadata(&self.path).map_err(|e| storage(format!("{}: {e}", self.path.display())))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Ok(Some(format!("file {}:{}", meta.dev(), meta.ino())))
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            let abs = self
                .path
                .canonicalize()
                .map_err(|e| storage(format!("{}: {e}", self.path.display())))?;
            Ok(Some(format!("file {}", abs.display())))
        }
    }

    async fn storage_size(&self) -> Result<Option<StorageSize>> {
        if in_memory(&self.path) {
            return Ok(None);
        }
        let main = std::fs::metadata(&self.path)
            .map_err(|e| storage(format!("{}: {e}", self.path.display())))?
            .len();
        let wal = std::fs::metadata(wal_path(&self.path)).map_or(0, |m| m.len());
        Ok(Some(StorageSize {
            bytes: main.saturating_add(wal),
            in_memory: false,
        }))
    }

    async fn space_usage(&self) -> Result<Option<SpaceUsage>> {
        self.saver.space_usage().await
    }

    async fn reclaim_space(&self, options: ReclaimOptions) -> Result<ReclaimReport> {
        let before = self.saver.space_usage().await?;
        let (steps, actions) = self.saver.reclaim(options).await?;
        Ok(ReclaimReport {
            before,
            after: self.saver.space_usage().await?,
            steps,
            actions,
        })
    }

    async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()> {
        self.saver.import_thread(thread, mode).await
    }

    async fn close(&self) -> Result<()> {
        self.saver.close().await?;
        let Some((mode, required)) = self.journal_after.lock().take() else {
            return Ok(());
        };
        // the WAL is folded in already; with a rollback journal the file is
        // self-contained again
        let set = Connection::open(&self.path)
            .and_then(|conn| conn.query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| r.get::<_, String>(0)));
        match set {
            Err(e) if required => Err(storage(format!("cannot finish {}: {e}", self.name))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        assert_eq!(parse("sqlite://data/x.sqlite").unwrap(), PathBuf::from("data/x.sqlite"));
        assert_eq!(parse("sqlite:///abs/x.sqlite").unwrap(), PathBuf::from("/abs/x.sqlite"));
        assert!(matches!(parse("sqlite://"), Err(Error::InvalidInput { .. })));
    }

    #[test]
    fn read_only_uris_escape_the_path() {
        let dir = std::env::temp_dir().join("checkpointer cli ?#%");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.sqlite");
        std::fs::write(&file, b"").unwrap();
        let uri = SqliteSaver::read_only_uri(&file).unwrap();
        assert!(uri.starts_with("file:/"), "{uri}");
        assert!(
            uri.ends_with("/checkpointer%20cli%20%3F%23%25/a.sqlite?mode=ro"),
            "{uri}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
