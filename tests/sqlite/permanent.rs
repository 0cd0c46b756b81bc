//! Files SQLite cannot use are permanent failures, as a
//! missing database is on the servers: a path that cannot be opened (its
//! directory missing, or a directory), a file that is not a database, and a
//! read-only file written to are `Error::Storage` with `retryable: false`.

use std::path::Path;
use std::process::Command;

use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error,
};

#[track_caller]
fn permanent(what: &str, err: &Error, words: &str) {
    assert!(matches!(err, Error::Storage { .. }), "{what}: {err:?}");
    assert!(!err.is_retryable(), "{what}: reported retryable: {err}");
    assert!(err.to_string().contains(words), "{what}: {words:?} not in {err}");
}

async fn put(saver: &SqliteSaver, thread: &str) -> checkpointer::Result<CheckpointConfig> {
    let cp = Checkpoint::new(0);
    let metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver
        .put(&CheckpointConfig::new(thread), &cp, &metadata, &ChannelVersions::new())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_sqlite_cannot_open_is_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let err = SqliteSaver::open(dir.path().join("missing").join("db.sqlite"))
        .await
        .unwrap_err();
    permanent("missing directory", &err, "unable to open");
    let err = SqliteSaver::open(dir.path()).await.unwrap_err();
    permanent("a directory", &err, "unable to open");
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(
        &junk,
        b"not a database at all, just text long enough for a header\n".repeat(64),
    )
    .unwrap();
    permanent(
        "not a database",
        &SqliteSaver::open(&junk).await.unwrap_err(),
        "not a database",
    );
}

/// Makes `path` read-only for this process, root included (`chattr +i`),
/// until dropped.
struct ReadOnly<'a>(&'a Path);

impl<'a> ReadOnly<'a> {
    fn set(path: &'a Path) -> ReadOnly<'a> {
        let mut perms = std::fs::metadata(path).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(path, perms).unwrap();
        let guard = ReadOnly(path);
        if std::fs::OpenOptions::new().write(true).open(path).is_ok() {
            // root ignores the mode: make the file immutable
            let out = Command::new("chattr").arg("+i").arg(path).output();
            assert!(
                out.as_ref().is_ok_and(|o| o.status.success()),
                "cannot make {} read-only for this process (root without chattr?): {out:?}",
                path.display()
            );
        }
        guard
    }
}

impl Drop for ReadOnly<'_> {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(self.0).output();
        if let Ok(meta) = std::fs::metadata(self.0) {
            let mut perms = meta.permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            let _ = std::fs::set_permissions(self.0, perms);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_read_only_file_is_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made.sqlite");
    {
        let saver = SqliteSaver::open(&made).await.unwrap();
        put(&saver, "before").await.unwrap();
    }
    let conn = rusqlite::Connection::open(&made).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(conn);
    // A copy (a file this process never opened for writing: SQLite reuses
    // a descriptor it keeps open for the same file) made read-only.
    let path = dir.path().join("ro.sqlite");
    std::fs::copy(&made, &path).unwrap();
    let _ro = ReadOnly::set(&path);
    let saver = SqliteSaver::open(&path).await.unwrap();
    assert!(saver
        .get_tuple(&CheckpointConfig::new("before"))
        .await
        .unwrap()
        .is_some());
    // SQLite opened the file read-only: every write is refused up front as
    // on a read-only open, with the same typed error, never retryable.
    let err = put(&saver, "after").await.unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { operation: "put", .. }),
        "read-only file: {err:?}"
    );
    assert!(!err.is_retryable(), "read-only file: reported retryable: {err}");
    assert!(err.to_string().contains("read-only"), "read-only file: {err}");
}
