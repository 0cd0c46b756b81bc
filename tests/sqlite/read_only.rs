//! Read-only opens (`SqliteSaverBuilder::read_only`) of files Python wrote:
//! nothing in the file changes, reads answer what a writable open answers,
//! every write is refused with one typed error, and a read-only file in a
//! read-only directory is read (a WAL-mode one too). And what a writable open
//! adds (`extra_indexes`).

use std::path::{Path, PathBuf};

use checkpointer::encoded::EncodedSaver;
use checkpointer::import::{ImportMode, ImportedCheckpoint, ThreadImport};
use checkpointer::saver::PruneStrategy;
use checkpointer::serde::TypedBytes;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, Error, ListOptions, ListThreadsOptions, Value,
};
use futures::TryStreamExt;
use rusqlite::{Connection, OpenFlags};

use crate::sqlite_support::{child_test, fixtures, in_child, temp_copy, testdata_dir};

const CHILD_ENV: &str = "CHECKPOINTER_READ_ONLY_DB";

/// Every row of `sqlite_master`, as stored (the DDL text included), read
/// through a connection that cannot write.
fn master(path: &Path) -> Vec<(String, String, String, Option<String>)> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = conn
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What a saver reads of a file, every read operation: `list(None)` whole and
/// limited, each thread's history per namespace with keys, latest and
/// point reads, `list_threads`, a filter across threads, delta history.
async fn everything_read(saver: &SqliteSaver) -> String {
    let mut out = Vec::new();
    let first = saver
        .list(None, ListOptions::default().limit(1))
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    out.push(format!("limit1 {first:?}"));
    let all = saver
        .list(None, ListOptions::default())
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert!(!all.is_empty());
    out.push(format!("all {all:?}"));
    let threads = saver.list_threads(ListThreadsOptions::default()).await.unwrap();
    out.push(format!("threads {threads:?}"));
    for t in &threads {
        let id = &t.thread_id;
        out.push(format!("keys {:?}", saver.thread_keys(id).await.unwrap()));
        out.push(format!("latest {:?}", saver.latest(id).await.unwrap()));
        let history = saver
            .list(Some(CheckpointConfig::new(id.as_str())), ListOptions::default())
            .try_collect::<Vec<_>>()
            .await
            .unwrap();
        out.push(format!("history {history:?}"));
        for tuple in &history {
            out.push(format!("get {:?}", saver.get_tuple(&tuple.config).await.unwrap()));
            let channels: Vec<String> = tuple.checkpoint.channel_versions.keys().cloned().collect();
            let delta = saver.get_delta_channel_history(&tuple.config, &channels).await;
            out.push(format!("delta {delta:?}"));
        }
    }
    let filtered = saver
        .list(None, ListOptions::default().filter("step", Value::Int(1)))
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    out.push(format!("filtered {filtered:?}"));
    out.join("\n")
}

/// A read-only open of each of Python's fixtures reads what a writable open
/// of a copy reads, and leaves the file byte for byte as it was, its schema
/// (`sqlite_master`) included, with no file added next to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_open_of_python_fixtures_changes_nothing() {
    for (name, fixture) in fixtures(&testdata_dir()) {
        let (dir, path) = temp_copy(&fixture);
        let (bytes, schema, files) = (std::fs::read(&path).unwrap(), master(&path), listing(dir.path()));
        let saver = SqliteSaver::open_read_only(&path).await.unwrap();
        let read = everything_read(&saver).await;
        saver.close().await.unwrap();
        drop(saver);
        assert_eq!(master(&path), schema, "{name}: the schema changed");
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "{name}: the file's bytes changed"
        );
        assert_eq!(listing(dir.path()), files, "{name}: files appeared");

        // the same answers as a writable open (which adds the indexes)
        let (_dir2, writable_path) = temp_copy(&fixture);
        let writable = SqliteSaver::open(&writable_path).await.unwrap();
        assert_eq!(everything_read(&writable).await, read, "{name}");
        writable.close().await.unwrap();
    }
}

fn is_read_only_refusal(e: &Error, op: &str) -> bool {
    matches!(e, Error::Unsupported { operation, implementer } if *operation == op && *implementer == "SqliteSaver opened read-only")
}

/// Every write of a read-only saver fails with `Error::Unsupported`, naming
/// the operation, whatever the arguments (valid ones, invalid ones, empty
/// batches that would write nothing); the file is not changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_open_refuses_every_write_with_one_error() {
    let fixture = &fixtures(&testdata_dir())[0].1;
    let (_dir, path) = temp_copy(fixture);
    let bytes = std::fs::read(&path).unwrap();
    let saver = SqliteSaver::builder(&path).read_only(true).open().await.unwrap();
    let latest = saver
        .list(None, ListOptions::default().limit(1))
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    let (thread, existing) = (latest[0].config.thread_id.clone(), latest[0].config.clone());
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let mut empty_id = Checkpoint::new(0);
    empty_id.id.clear();
    let writes = vec![("ch".to_owned(), Value::Int(1))];
    let import = ThreadImport {
        thread_id: "imported".into(),
        checkpoints: vec![ImportedCheckpoint {
            checkpoint_ns: String::new(),
            parent_checkpoint_id: None,
            checkpoint: Checkpoint::new(0),
            metadata: meta.clone(),
            writes: Vec::new(),
        }],
    };
    let raw = TypedBytes {
        tag: "msgpack".into(),
        data: checkpointer::serde::msgpack::encode(&Checkpoint::new(0).to_value(true))
            .unwrap()
            .into(),
    };
    let none = ChannelVersions::new();
    let results: Vec<(&str, checkpointer::Result<()>)> = vec![
        (
            "put",
            saver
                .put(&CheckpointConfig::new("new"), &Checkpoint::new(0), &meta, &none)
                .await
                .map(drop),
        ),
        ("put", saver.put(&existing, &empty_id, &meta, &none).await.map(drop)),
        ("put_writes", saver.put_writes(&existing, &writes, "task", "").await),
        ("put_writes", saver.put_writes(&existing, &[], "task", "").await),
        (
            "put_writes",
            saver
                .put_writes(&CheckpointConfig::new("no-id"), &writes, "task", "")
                .await,
        ),
        ("delete_thread", saver.delete_thread(&thread).await),
        ("delete_thread", saver.delete_thread("absent").await),
        ("delete_for_runs", saver.delete_for_runs(&["run".to_owned()]).await),
        ("delete_for_runs", saver.delete_for_runs(&[]).await),
        ("copy_thread", saver.copy_thread(&thread, "copy").await),
        (
            "prune",
            saver
                .prune(std::slice::from_ref(&thread), PruneStrategy::KeepLatest)
                .await,
        ),
        (
            "prune",
            saver.prune(std::slice::from_ref(&thread), PruneStrategy::Delete).await,
        ),
        ("prune", saver.prune(&[], PruneStrategy::KeepLatest).await),
        ("import_thread", saver.import_thread(&import, ImportMode::Replace).await),
        ("import_thread", saver.import_thread(&import, ImportMode::Create).await),
        (
            "put",
            saver
                .put_encoded(
                    &CheckpointConfig::new("raw"),
                    "1",
                    raw,
                    &meta,
                    &checkpointer::ChannelVersions::default(),
                )
                .await
                .map(drop),
        ),
    ];
    for (op, result) in results {
        let err = result.expect_err(op);
        assert!(is_read_only_refusal(&err, op), "{op}: {err:?}");
        assert!(!err.is_retryable(), "{op}");
    }
    // reads still work after the refusals
    assert!(saver.latest(&thread).await.unwrap().is_some());
    saver.close().await.unwrap();
    assert!(std::fs::read(&path).unwrap() == bytes, "the file changed");
}

/// A read-only open needs an existing checkpoint database: a missing file,
/// a file without Python's tables and `:memory:` are refused, and none is
/// created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_open_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sqlite");
    let err = SqliteSaver::open_read_only(&missing).await.unwrap_err();
    assert!(matches!(err, Error::Storage { .. }), "{err:?}");
    assert!(!missing.exists());
    let other = dir.path().join("other.sqlite");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let err = SqliteSaver::open_read_only(&other).await.unwrap_err();
    assert!(err.to_string().contains("no checkpoints table"), "{err}");
    assert_eq!(master(&other).len(), 1);
    let err = SqliteSaver::builder(":memory:").read_only(true).build().unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}

/// A writable open adds exactly the two indexes `docs/backends.md` lists (with this
/// DDL) and nothing else to the schema; `extra_indexes(false)` adds nothing
/// and the saver works the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writable_open_adds_the_two_indexes_unless_told_not_to() {
    let fixture = &fixtures(&testdata_dir())[0].1;
    let index = |name: &str, sql: &str| {
        (
            "index".to_owned(),
            name.to_owned(),
            "checkpoints".to_owned(),
            Some(sql.to_owned()),
        )
    };
    for extra in [true, false] {
        let (_dir, path) = temp_copy(fixture);
        let before = master(&path);
        let saver = SqliteSaver::builder(&path).extra_indexes(extra).open().await.unwrap();
        let read = everything_read(&saver).await;
        saver
            .put(
                &CheckpointConfig::new("added"),
                &Checkpoint::new(0),
                &CheckpointMetadata::new(CheckpointSource::Loop, 0),
                &ChannelVersions::new(),
            )
            .await
            .unwrap();
        assert!(saver.latest("added").await.unwrap().is_some());
        assert!(!read.is_empty());
        saver.close().await.unwrap();
        let mut expected = before.clone();
        if extra {
            expected.push(index(
                "checkpointer_checkpoints_id_idx",
                "CREATE INDEX checkpointer_checkpoints_id_idx\n    ON checkpoints (checkpoint_id, thread_id, checkpoint_ns)",
            ));
            expected.push(index(
                "checkpointer_checkpoints_thread_idx",
                "CREATE INDEX checkpointer_checkpoints_thread_idx\n    ON checkpoints (thread_id, checkpoint_id, checkpoint_ns)",
            ));
            expected.sort();
        }
        assert_eq!(master(&path), expected, "extra_indexes({extra})");
    }
}

/// Makes `path` a WAL-mode file (its `-wal` gone, as Python's saver leaves
/// it when it closes), then the file 0444 and its directory 0555.
fn wal_mode_read_only(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    assert!(!wal.exists(), "the -wal is folded in and deleted on close");
    set_mode(path, 0o444);
    set_mode(path.parent().unwrap(), 0o555);
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The child of `read_only_file_in_a_read_only_directory`: reads the file
/// read-only and prints what it read. Ignored unless run by the parent.
#[test]
#[ignore = "run by read_only_file_in_a_read_only_directory, as an unprivileged user"]
fn read_only_child() {
    in_child(CHILD_ENV, |path| async move {
        let saver = SqliteSaver::open_read_only(&path).await.unwrap();
        let read = everything_read(&saver).await;
        let err = saver.delete_thread("x").await.unwrap_err();
        assert!(is_read_only_refusal(&err, "delete_thread"), "{err:?}");
        saver.close().await.unwrap();
        println!("READ {}", read.len());
    });
}

/// A WAL-mode file Python wrote, 0444 in a 0555 directory, opened read-only
/// by a user who may not write either (without the fallback to
/// `immutable=1`, SQLite refuses: it cannot create the `-shm`): read as a
/// writable open reads it, nothing changes, no file appears. Run as
/// `nobody` through `setpriv` when the tests run as root (root may write
/// anything).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_file_in_a_read_only_directory() {
    let fixture = &fixtures(&testdata_dir())[0].1;
    let (dir, path) = temp_copy(fixture);
    wal_mode_read_only(&path);
    let (bytes, files) = (std::fs::read(&path).unwrap(), listing(dir.path()));
    let out = child_test(concat!(module_path!(), "::read_only_child"), CHILD_ENV, &path, true)
        .output()
        .expect("setpriv (util-linux) runs the child");
    set_mode(dir.path(), 0o755);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("READ "),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read(&path).unwrap() == bytes, "the file changed");
    assert_eq!(listing(dir.path()), files, "files appeared");
}

/// A WAL-mode file whose `-wal` holds commits but whose `-shm` cannot be
/// created is not read as if the `-wal` were not there (`immutable=1`
/// would skip its commits): the open fails.
#[test]
#[ignore = "run by a_wal_with_commits_is_never_skipped, as an unprivileged user"]
fn read_only_child_expecting_failure() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(SqliteSaver::open_read_only(&path));
    match out {
        Ok(saver) => println!(
            "OPENED {}",
            rt.block_on(saver.latest("late")).map(|t| t.is_some()).unwrap_or(false)
        ),
        Err(e) => println!("REFUSED {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_with_commits_is_never_skipped() {
    let fixture = &fixtures(&testdata_dir())[0].1;
    let (dir, path) = temp_copy(fixture);
    // a commit left in the -wal: a second connection holds a read
    // transaction while the saver closes, so the -wal is not folded in
    let holder = Connection::open(&path).unwrap();
    holder
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    holder
        .execute_batch("BEGIN; SELECT count(*) FROM checkpoints;")
        .unwrap();
    let saver = SqliteSaver::open(&path).await.unwrap();
    saver
        .put(
            &CheckpointConfig::new("late"),
            &Checkpoint::new(0),
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &ChannelVersions::new(),
        )
        .await
        .unwrap();
    saver.close().await.unwrap();
    // copy the file and its -wal (no -shm) to a directory nobody may write
    let ro = tempfile::tempdir().unwrap();
    let ro_path = ro.path().join("db.sqlite");
    std::fs::copy(&path, &ro_path).unwrap();
    let wal = std::fs::read(format!("{}-wal", path.display())).unwrap();
    assert!(!wal.is_empty());
    // the commit is in the -wal only: the file alone lacks it
    let alone = Connection::open_with_flags(
        format!("file:{}?mode=ro&immutable=1", ro_path.display()),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    let late: i64 = alone
        .query_row("SELECT count(*) FROM checkpoints WHERE thread_id = 'late'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(late, 0, "the commit was folded into the file: the test proves nothing");
    drop(alone);
    std::fs::write(format!("{}-wal", ro_path.display()), wal).unwrap();
    drop(holder);
    drop(dir);
    set_mode(&ro_path, 0o444);
    set_mode(ro.path(), 0o555);
    let child = concat!(module_path!(), "::read_only_child_expecting_failure");
    let out = child_test(child, CHILD_ENV, &ro_path, true).output().unwrap();
    set_mode(ro.path(), 0o755);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // either SQLite reads the -wal (the commit is seen) or the open fails;
    // never a read that misses the commit
    assert!(
        stdout.contains("REFUSED") || stdout.contains("OPENED true"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
