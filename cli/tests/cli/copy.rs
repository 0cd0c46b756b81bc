//! `copy` between stores: SQLite → SQLite byte-exact, SQLite → PostgreSQL
//! → SQLite round trips (the exports are equal, Python reads every copy),
//! conflicts and `--overwrite`.

use crate::harness;
use std::path::Path;

use checkpointer::postgres::tokio_postgres;
use checkpointer::serde::msgpack;
use checkpointer::Value;

use crate::support::{
    companion, fixtures, read_fixtures, require_postgres, require_python, run, sqlite_url, testdata_dir, with_pg_client,
};

type Row = Vec<rusqlite::types::Value>;

fn rows(db: &Path, sql: &str) -> Vec<Row> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, rusqlite::types::Value>(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

const CHECKPOINTS: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, \
                           metadata FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id";
const WRITES: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value \
                      FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx";

fn thread_ids(fixture: &Path) -> Vec<String> {
    let dump: serde_json::Value = serde_json::from_slice(&companion(fixture, "expected.json")).unwrap();
    dump["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every row of both tables, column for column, byte for byte.
fn copy_sqlite_to_sqlite_is_byte_exact() {
    let testdata = testdata_dir();
    let dir = tempfile::tempdir().unwrap();
    for (name, fixture) in fixtures(&testdata) {
        let target = dir.path().join(format!("{name}.sqlite"));
        let out = run(&["copy", &sqlite_url(&fixture), &sqlite_url(&target)]).expect(0);
        assert!(out.text().starts_with("copied "), "{}", out.text());
        assert_eq!(
            rows(&target, CHECKPOINTS),
            rows(&fixture, CHECKPOINTS),
            "{name}: checkpoints"
        );
        assert_eq!(rows(&target, WRITES), rows(&fixture, WRITES), "{name}: writes");
        // one self-contained file, as the fixtures are
        for suffix in ["-wal", "-shm"] {
            let mut side = target.clone().into_os_string();
            side.push(suffix);
            assert!(!Path::new(&side).exists(), "{name}: {suffix} left behind");
        }
        let mode = rows(&target, "PRAGMA journal_mode");
        assert_eq!(mode, vec![vec![rusqlite::types::Value::Text("delete".into())]]);
    }
}

/// A checkpoint blob with its maps in a canonical order: PostgreSQL's JSONB
/// does not keep key order, so after a trip through it `channel_versions`,
/// `versions_seen` and the order of `channel_values` are the database's.
/// Each value's bytes, ids, timestamps and lists must be the same.
fn canonical_checkpoint(blob: &rusqlite::types::Value) -> Vec<(String, Vec<u8>)> {
    let rusqlite::types::Value::Blob(bytes) = blob else {
        panic!("checkpoint is not a blob: {blob:?}")
    };
    let Value::Map(entries) = msgpack::decode(bytes).unwrap() else {
        panic!("checkpoint is not a map")
    };
    let mut out = Vec::new();
    for (k, v) in entries {
        let key = k.as_str().unwrap().to_owned();
        match (key.as_str(), v) {
            ("channel_values" | "channel_versions", Value::Map(inner)) => {
                for (ck, cv) in inner {
                    out.push((format!("{key}.{}", ck.as_str().unwrap()), msgpack::encode(&cv).unwrap()));
                }
            }
            ("versions_seen", Value::Map(inner)) => {
                for (node, seen) in inner {
                    let Value::Map(seen) = seen else {
                        panic!("versions_seen entry")
                    };
                    for (ck, cv) in seen {
                        out.push((
                            format!("versions_seen.{}.{}", node.as_str().unwrap(), ck.as_str().unwrap()),
                            msgpack::encode(&cv).unwrap(),
                        ));
                    }
                }
            }
            (_, v) => out.push((key, msgpack::encode(&v).unwrap())),
        }
    }
    out.sort();
    out
}

fn metadata_json(v: &rusqlite::types::Value) -> serde_json::Value {
    match v {
        rusqlite::types::Value::Blob(b) => serde_json::from_slice(b).unwrap(),
        rusqlite::types::Value::Text(t) => serde_json::from_str(t).unwrap(),
        other => panic!("metadata is {other:?}"),
    }
}

/// SQLite → PostgreSQL → SQLite for every fixture: the exports of the result
/// are the fixtures' dumps byte for byte, every write row and every value is
/// byte-identical, and Python's `read_fixtures.py` reads the PostgreSQL
/// database and every SQLite copy (exit 0) as the crate does.
fn copy_sqlite_to_postgres_to_sqlite_round_trips() {
    let testdata = testdata_dir();
    let Some(db) = require_postgres() else { return };
    let python = require_python();
    let pg = db.url();
    let dir = tempfile::tempdir().unwrap();
    let all = fixtures(&testdata);
    for (_, fixture) in &all {
        run(&["copy", &sqlite_url(fixture), &pg]).expect(0);
    }
    let pg_export = run(&["export", "--normalize", &pg]).expect(0);
    let summary = pg_export.json()["summary"].clone();
    assert_eq!(summary["threads"], 5, "{summary}");
    if let Some(python) = &python {
        let (code, stdout, stderr) = read_fixtures(python, &testdata, &["--normalize", &pg]);
        assert_eq!(code, 0, "Python cannot read the PostgreSQL copy:\n{stderr}");
        assert!(
            stdout == pg_export.stdout,
            "Python reads the PostgreSQL copy differently"
        );
    }
    for (name, fixture) in &all {
        let target = dir.path().join(format!("{name}.sqlite"));
        let mut args = vec!["copy".to_owned(), pg.clone(), sqlite_url(&target)];
        for t in thread_ids(fixture) {
            args.extend(["--thread".to_owned(), t]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args).expect(0);

        let url = sqlite_url(&target);
        let normalized = run(&["export", "--normalize", &url]).expect(0);
        assert!(
            normalized.stdout == companion(fixture, "normalized.json"),
            "{name}: normalized export"
        );
        let plain = run(&["export", &url]).expect(0);
        assert!(plain.stdout == companion(fixture, "expected.json"), "{name}: export");

        assert_eq!(rows(&target, WRITES), rows(fixture, WRITES), "{name}: writes");
        let (got, want) = (rows(&target, CHECKPOINTS), rows(fixture, CHECKPOINTS));
        assert_eq!(got.len(), want.len(), "{name}: checkpoint count");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g[..5], w[..5], "{name}: ids, parent, type");
            assert_eq!(
                canonical_checkpoint(&g[5]),
                canonical_checkpoint(&w[5]),
                "{name}: checkpoint {:?}",
                w[2]
            );
            assert_eq!(
                metadata_json(&g[6]),
                metadata_json(&w[6]),
                "{name}: metadata of {:?}",
                w[2]
            );
        }

        if let Some(python) = &python {
            let (code, stdout, stderr) = read_fixtures(python, &testdata, &[target.to_str().unwrap()]);
            assert_eq!(code, 0, "{name}: Python cannot read the SQLite copy:\n{stderr}");
            assert!(
                stdout == companion(fixture, "expected.json"),
                "{name}: Python's dump of the copy"
            );
        }
    }
}

/// A thread that exists in the target is refused (exit 5, nothing written)
/// unless `--overwrite`, which replaces it.
fn copy_refuses_existing_threads_unless_overwrite() {
    let testdata = testdata_dir();
    let fixture = testdata.join("fixtures").join("b_reducer.sqlite");
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.sqlite");
    let (src, dst) = (sqlite_url(&fixture), sqlite_url(&target));
    let first = run(&["--json", "copy", &src, &dst, "--thread", "b-2"]).expect(0).json();
    assert_eq!(first["checkpoints"], 4);
    assert_eq!(first["writes"], 7);
    assert_eq!(first["threads"][0]["replaced"], false);

    // b-1 is new but b-2 exists: nothing is copied
    let refused = run(&["copy", &src, &dst]).expect(5);
    assert!(refused.stderr.contains("\"b-2\""), "{}", refused.stderr);
    assert!(refused.stderr.contains("--overwrite"), "{}", refused.stderr);
    let threads = run(&["--json", "threads", &dst]).expect(0).json();
    assert_eq!(threads["threads"].as_array().unwrap().len(), 1);

    // a changed target thread is replaced whole
    run(&["prune", &dst, "--keep-latest", "--thread", "b-2"]).expect(0);
    let again = run(&["--json", "copy", &src, &dst, "--overwrite"]).expect(0).json();
    assert_eq!(again["threads"][0]["thread_id"], "b-1");
    assert_eq!(again["threads"][0]["replaced"], false);
    assert_eq!(again["threads"][1]["replaced"], true);
    assert_eq!(rows(&target, CHECKPOINTS), rows(&fixture, CHECKPOINTS));
    assert_eq!(rows(&target, WRITES), rows(&fixture, WRITES));
}

/// `memory:` as a target reads, converts and stores everything and keeps
/// nothing: a dry run.
fn copy_to_memory_is_a_dry_run() {
    let testdata = testdata_dir();
    let fixture = testdata.join("fixtures").join("c_subgraph.sqlite");
    let out = run(&["--json", "copy", &sqlite_url(&fixture), "memory:"])
        .expect(0)
        .json();
    assert_eq!(out["checkpoints"], 9);
    assert_eq!(out["writes"], 14);
    assert_eq!(out["warnings"], serde_json::json!([]));
}

/// Rows of a PostgreSQL table as text, each value as the database prints it
/// (`bytea` as hex), sorted.
fn pg_rows(url: &str, sql: &str) -> Vec<Vec<Option<String>>> {
    let sql = sql.to_owned();
    with_pg_client(url, |client| async move {
        let mut out = Vec::new();
        for msg in client.simple_query(&sql).await.unwrap() {
            if let tokio_postgres::SimpleQueryMessage::Row(row) = msg {
                out.push((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect());
            }
        }
        out
    })
}

/// PostgreSQL → PostgreSQL (another database) keeps every row: checkpoints
/// and metadata as JSONB values, blobs and writes byte for byte; the same
/// database under another URL is refused.
fn copy_postgres_to_postgres_is_exact() {
    let testdata = testdata_dir();
    let (Some(a), Some(b)) = (require_postgres(), require_postgres()) else {
        return;
    };
    for (_, fixture) in fixtures(&testdata) {
        run(&["copy", &sqlite_url(&fixture), &a.url()]).expect(0);
    }
    run(&["copy", &a.url(), &b.url()]).expect(0);
    for sql in [
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint::text, \
         metadata::text FROM checkpoints ORDER BY 1, 2, 3",
        "SELECT thread_id, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs ORDER BY 1, 2, 3, 4",
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob \
         FROM checkpoint_writes ORDER BY 1, 2, 3, 4, 6",
    ] {
        let (got, want) = (pg_rows(&b.url(), sql), pg_rows(&a.url(), sql));
        assert!(!want.is_empty(), "{sql}");
        assert_eq!(got, want, "{sql}");
    }
    let other_name = a.url().replacen("postgresql://", "postgres://", 1);
    let out = run(&["copy", &a.url(), &other_name, "--overwrite"]).expect(2);
    assert!(out.stderr.contains("are the same store"), "{}", out.stderr);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "copy::copy_sqlite_to_sqlite_is_byte_exact",
            &[],
            copy_sqlite_to_sqlite_is_byte_exact,
        ),
        harness::test(
            "copy::copy_sqlite_to_postgres_to_sqlite_round_trips",
            &[&crate::POSTGRES, &crate::PYTHON],
            copy_sqlite_to_postgres_to_sqlite_round_trips,
        ),
        harness::test(
            "copy::copy_refuses_existing_threads_unless_overwrite",
            &[],
            copy_refuses_existing_threads_unless_overwrite,
        ),
        harness::test("copy::copy_to_memory_is_a_dry_run", &[], copy_to_memory_is_a_dry_run),
        harness::test(
            "copy::copy_postgres_to_postgres_is_exact",
            &[&crate::POSTGRES],
            copy_postgres_to_postgres_is_exact,
        ),
    ]
}
