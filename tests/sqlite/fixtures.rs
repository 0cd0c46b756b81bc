//! Databases Python's `SqliteSaver` wrote: every `testdata/fixtures/*.sqlite`
//! opens, and what the crate reads equals Python's own reading of it
//! (`*.expected.json`, printed by `read_fixtures.py`): channel values,
//! versions, metadata, parents and pending writes in order.

use crate::sqlite_support;

use checkpointer::serde::render;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{CheckpointConfig, CheckpointSaver, CheckpointSaverExt, ListOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_read_as_python_reads_them() {
    let testdata = sqlite_support::testdata_dir();
    for (name, path) in sqlite_support::fixtures(&testdata) {
        let (_dir, copy) = sqlite_support::temp_copy(&path);
        let saver = SqliteSaver::open(&copy).await.unwrap();
        let got = render::dump(&saver, &name).await.unwrap();
        let expected_path = path.with_file_name(name.replace(".sqlite", ".expected.json"));
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&expected_path).unwrap()).unwrap();
        assert_eq!(got["errors"], serde_json::json!([]), "{name}: errors");
        assert_eq!(got["summary"], expected["summary"], "{name}: summary");
        let (got_threads, want_threads) = (
            got["threads"].as_array().unwrap(),
            expected["threads"].as_array().unwrap(),
        );
        assert_eq!(got_threads.len(), want_threads.len(), "{name}: threads");
        for (g, w) in got_threads.iter().zip(want_threads) {
            for (gn, wn) in g["namespaces"]
                .as_array()
                .unwrap()
                .iter()
                .zip(w["namespaces"].as_array().unwrap())
            {
                for (gc, wc) in gn["checkpoints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(wn["checkpoints"].as_array().unwrap())
                {
                    assert_eq!(gc, wc, "{name}: checkpoint {}", wc["checkpoint_id"]);
                }
            }
        }
        assert_eq!(got, expected, "{name}: whole dump");
        saver.close().await.unwrap();
    }
}

/// Fixture files open without `task_path` too: Python 3.1.1 created `writes`
/// without it; opening migrates the table as Python 3.1.2 does and the rows
/// read with `task_path = ''`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_without_task_path_are_migrated() {
    let testdata = sqlite_support::testdata_dir();
    let (_, path) = &sqlite_support::fixtures(&testdata)[0];
    let (_dir, copy) = sqlite_support::temp_copy(path);
    {
        // rebuild `writes` the 3.1.1 way: no task_path column
        let conn = rusqlite::Connection::open(&copy).unwrap();
        conn.execute_batch(
            "CREATE TABLE writes_old (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', \
             checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, \
             type TEXT, value BLOB, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));
             INSERT INTO writes_old SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value FROM writes;
             DROP TABLE writes;
             ALTER TABLE writes_old RENAME TO writes;",
        )
        .unwrap();
    }
    let saver = SqliteSaver::open(&copy).await.unwrap();
    let all = saver.list_vec(None, ListOptions::default()).await.unwrap();
    assert!(!all.is_empty());
    let writes: usize = all.iter().map(|t| t.pending_writes.len()).sum();
    assert!(writes > 0, "fixture has writes");
    let latest = saver
        .get_tuple(&CheckpointConfig::new(all[0].config.thread_id.clone()))
        .await
        .unwrap();
    assert!(latest.is_some());
    saver.close().await.unwrap();
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('writes')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        columns.last().map(String::as_str),
        Some("task_path"),
        "migrated like Python: {columns:?}"
    );
    let empty_paths: i64 = conn
        .query_row("SELECT count(*) FROM writes WHERE task_path = ''", [], |r| r.get(0))
        .unwrap();
    assert_eq!(empty_paths as usize, writes);
}

/// Given what Python's saver received (checkpoints, metadata, writes with
/// their task paths), the crate stores the very same bytes: every column of
/// every row of both tables is equal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaying_a_fixture_stores_the_same_bytes() {
    let testdata = sqlite_support::testdata_dir();
    for (name, path) in sqlite_support::fixtures(&testdata) {
        let (_dir, copy) = sqlite_support::temp_copy(&path);
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join(&name);
        let target = SqliteSaver::open(&out).await.unwrap();
        sqlite_support::replay(&copy, &target).await;
        target.close().await.unwrap();
        let (want, got) = (sqlite_support::raw_rows(&path), sqlite_support::raw_rows(&out));
        assert_eq!(got.len(), want.len(), "{name}: rows");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{name}");
        }
    }
}
