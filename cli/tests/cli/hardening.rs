//! Attacks on the CLI (rows B63–B70 of docs/reliability.md): broken
//! threads, undecodable rows, deep input, large dumps.

use crate::harness;
use std::path::{Path, PathBuf};

use crate::support::{run, sqlite_url, temp_copy, testdata_dir};

fn sql(db: &Path, statements: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(statements)
        .unwrap();
}

pub(crate) fn fixture(testdata: &Path, name: &str) -> (tempfile::TempDir, PathBuf) {
    temp_copy(&testdata.join("fixtures").join(format!("{name}.sqlite")))
}

/// The ids of a thread's checkpoints, oldest first.
fn ids(db: &Path, thread: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 ORDER BY checkpoint_id")
        .unwrap();
    stmt.query_map([thread], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Cuts the `b_reducer` fixture's thread `b-1` short (its two oldest
/// checkpoints deleted, as a copy killed midway leaves it) and takes the
/// writes of `b-2`'s second checkpoint; returns both threads' ids.
pub(crate) fn cut_short(db: &Path) -> (Vec<String>, Vec<String>) {
    let b1 = ids(db, "b-1");
    let b2 = ids(db, "b-2");
    sql(
        db,
        &format!(
            "DELETE FROM checkpoints WHERE thread_id = 'b-1' AND checkpoint_id IN ('{}', '{}'); \
             DELETE FROM writes WHERE thread_id = 'b-2' AND checkpoint_id = '{}';",
            b1[0], b1[1], b2[1]
        ),
    );
    (b1, b2)
}

/// B66: a thread cut short (its oldest checkpoints gone, as a copy killed
/// midway left it) and one whose checkpoint lost its writes: export and
/// threads name the thread, the checkpoint and what is missing, exit 6.
fn export_and_threads_flag_missing_parents_and_writes() {
    let testdata = testdata_dir();
    let (_dir, db) = fixture(&testdata, "b_reducer");
    let url = sqlite_url(&db);
    let (b1, b2) = cut_short(&db);
    let out = run(&["export", &url]).expect(6);
    // the dump is what read_fixtures.py prints (which sees nothing wrong)
    assert_eq!(out.json()["errors"], serde_json::json!([]));
    let parent = format!(
        "thread \"b-1\", checkpoint {} [missing-parent]: its parent checkpoint {} is not stored",
        b1[2], b1[1]
    );
    let writes = format!(
        "thread \"b-2\", checkpoint {} [missing-writes]: its pending writes are missing",
        b2[1]
    );
    let orphans = format!(
        "thread \"b-1\", checkpoint {} [orphan-writes]: 2 stored write(s) for a checkpoint that is not stored",
        b1[0]
    );
    for want in [&parent, &writes, &orphans] {
        assert!(
            out.stderr.contains(&format!("ERROR: {want}")),
            "{want}\nnot in {}",
            out.stderr
        );
    }
    // --normalize finds them too
    run(&["export", "--normalize", &url]).expect(6);

    let threads = run(&["--json", "threads", &url]).expect(6);
    assert!(threads.stderr.contains(&parent), "{}", threads.stderr);
    assert!(threads.stderr.contains(&writes), "{}", threads.stderr);
    let listed = threads.json();
    for t in listed["threads"].as_array().unwrap() {
        assert!(!t["problems"].as_array().unwrap().is_empty(), "{t}");
    }
    let text = run(&["threads", &url]).expect(6).text();
    assert!(text.contains("b-1 (!)"), "{text}");

    // every fixture is consistent
    for (name, path) in crate::support::fixtures(&testdata) {
        let out = run(&["export", &sqlite_url(&path)]);
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        let out = run(&["threads", &sqlite_url(&path)]);
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
    }
}

/// B67: one undecodable checkpoint row: threads, stats and copy name its
/// thread and checkpoint id on stderr, go on with the other threads, and
/// exit 4.
fn one_undecodable_row_is_named_and_the_rest_goes_on() {
    let testdata = testdata_dir();
    let (dir, db) = fixture(&testdata, "b_reducer");
    let url = sqlite_url(&db);
    let b1 = ids(&db, "b-1");
    let bad = b1.last().unwrap().clone();
    sql(
        &db,
        &format!("UPDATE checkpoints SET checkpoint = X'c1c1c1' WHERE thread_id = 'b-1' AND checkpoint_id = '{bad}'"),
    );
    let named = format!("thread \"b-1\", checkpoint {bad}: cannot be read");

    let threads = run(&["--json", "threads", &url]).expect(4);
    assert!(threads.stderr.contains(&named), "{}", threads.stderr);
    let listed: Vec<String> = threads.json()["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, ["b-2"]);

    let stats = run(&["--json", "stats", &url]).expect(4);
    assert!(stats.stderr.contains(&named), "{}", stats.stderr);
    assert_eq!(stats.json()["threads"][0]["thread_id"], "b-2");

    let target = dir.path().join("copy.sqlite");
    let copy = run(&["--json", "copy", &url, &sqlite_url(&target)]).expect(4);
    assert!(copy.stderr.contains(&named), "{}", copy.stderr);
    let report = copy.json();
    assert_eq!(report["threads"][0]["thread_id"], "b-2");
    assert_eq!(report["failed"][0]["thread_id"], "b-1");
    assert_eq!(ids(&target, "b-2"), ids(&db, "b-2"));
    assert!(ids(&target, "b-1").is_empty());

    let export = run(&["export", &url]).expect(6);
    assert!(export.stderr.contains(&named), "{}", export.stderr);

    // a row in the middle of a thread: named, and its absence is not taken
    // for a missing parent or writes
    let (_dir2, db2) = fixture(&testdata, "b_reducer");
    let middle = ids(&db2, "b-1")[2].clone();
    sql(
        &db2,
        &format!("UPDATE checkpoints SET checkpoint = X'c1' WHERE thread_id = 'b-1' AND checkpoint_id = '{middle}'"),
    );
    let export = run(&["export", &sqlite_url(&db2)]).expect(6);
    let named = format!("thread \"b-1\", checkpoint {middle}: cannot be read");
    assert!(export.stderr.contains(&named), "{}", export.stderr);
    assert!(!export.stderr.contains("missing"), "{}", export.stderr);
    let threads = run(&["threads", &sqlite_url(&db2)]).expect(4);
    assert!(threads.stderr.contains(&named), "{}", threads.stderr);
    assert!(!threads.stderr.contains("missing"), "{}", threads.stderr);
}

/// B65: `--resume` skips threads the target has identically and refuses,
/// by name, one that differs; `--resume --overwrite` replaces only that one.
fn resume_names_the_thread_that_differs() {
    let testdata = testdata_dir();
    let (dir, db) = fixture(&testdata, "b_reducer");
    let (src, target) = (sqlite_url(&db), dir.path().join("t.sqlite"));
    let dst = sqlite_url(&target);
    run(&["copy", &src, &dst]).expect(0);
    let b1 = ids(&target, "b-1");
    sql(
        &target,
        &format!("DELETE FROM checkpoints WHERE checkpoint_id = '{}'", b1[0]),
    );
    let refused = run(&["copy", &src, &dst, "--resume"]).expect(5);
    assert!(
        refused.stderr.contains("thread(s) \"b-1\" that differ"),
        "{}",
        refused.stderr
    );
    let done = run(&["--json", "copy", &src, &dst, "--resume", "--overwrite"])
        .expect(0)
        .json();
    assert_eq!(done["skipped"], serde_json::json!(["b-2"]));
    assert_eq!(done["threads"][0]["thread_id"], "b-1");
    assert_eq!(ids(&target, "b-1"), ids(&db, "b-1"));
    run(&["export", &dst]).expect(0);
}

/// B68: `export --normalize` of 64 000 writes by as many tasks in one
/// checkpoint completes (it was quadratic: 24 s in a release build; the
/// 640 000 variant is measured in a release build, see docs/reliability.md).
fn export_normalize_of_many_writes_completes() {
    let testdata = testdata_dir();
    let (_dir, db) = fixture(&testdata, "a_one_node");
    let latest = ids(&db, "12345").pop().unwrap();
    let n = 64_000;
    sql(
        &db,
        &format!(
            "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < {n}) \
             INSERT INTO writes SELECT '12345', '', '{latest}', printf('task-%08d', (i * 7919) % {n}), '', 0, \
             'ch' || (i % 3), 'msgpack', X'01' FROM s;"
        ),
    );
    let out = run(&["export", "--normalize", &sqlite_url(&db)]).expect(0).json();
    let cps = out["threads"][0]["namespaces"][0]["checkpoints"].as_array().unwrap();
    let writes = cps.last().unwrap()["pending_writes"].as_array().unwrap();
    assert_eq!(writes.len(), n);
    // each task's writes together, tasks numbered in the order they appear
    let mut last = None;
    let mut seen = std::collections::HashSet::new();
    for w in writes {
        let task = w[0].as_str().unwrap();
        if last != Some(task) {
            assert!(seen.insert(task.to_owned()), "task {task} appears twice");
            last = Some(task);
        }
    }
}

/// B69: a `--filter` value nested far beyond the limit is refused as a usage
/// error naming the limit, without a stack overflow.
fn deep_filters_are_refused() {
    let testdata = testdata_dir();
    let url = sqlite_url(&testdata.join("fixtures").join("a_one_node.sqlite"));
    let deep = format!("k={}1{}", "[".repeat(60_000), "]".repeat(60_000));
    let out = run(&["threads", &url, "--filter", &deep]).expect(2);
    assert!(out.stderr.contains("nests deeper than 128 levels"), "{}", out.stderr);
    assert!(
        out.stderr.len() < 400,
        "the error echoes the whole input: {}",
        out.stderr.len()
    );
    let ok = format!("k={}1{}", "[".repeat(100), "]".repeat(100));
    run(&["threads", &url, "--filter", &ok]).expect(0);
}

/// `check` runs the library's verifier: every fixture passes (exit 0), and
/// a thread cut short, a checkpoint that lost its writes and a version moved
/// back are each named, with kind, checkpoint and channel, exit 6.
fn check_verifies_fixtures_and_names_each_violation() {
    let testdata = testdata_dir();
    for name in ["a_one_node", "b_reducer", "c_subgraph", "f_messages"] {
        let (_dir, db) = fixture(&testdata, name);
        let out = run(&["check", &sqlite_url(&db)]).expect(0);
        assert!(out.stderr.contains(": 0 violation(s)"), "{name}: {}", out.stderr);
    }
    let (_dir, db) = fixture(&testdata, "b_reducer");
    let url = sqlite_url(&db);
    let (b1, b2) = cut_short(&db);
    let out = run(&["check", &url]).expect(6);
    let text = out.text();
    for want in [
        format!(
            "thread \"b-1\", checkpoint {} [missing-parent]: its parent checkpoint {} is not stored",
            b1[2], b1[1]
        ),
        format!(
            "thread \"b-2\", checkpoint {} [missing-writes]: its pending writes are missing",
            b2[1]
        ),
        format!(
            "thread \"b-1\", checkpoint {} [orphan-writes]: 2 stored write(s) for a checkpoint that is not stored",
            b1[0]
        ),
    ] {
        assert!(text.contains(&want), "{want}\nnot in {text}");
    }
    assert!(out.stderr.contains("4 violation(s)"), "{}", out.stderr);
    let json = run(&["--json", "check", &url, "--thread", "b-2"]).expect(6).json();
    assert_eq!(json["threads"], 1);
    let kinds: Vec<&str> = json["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["missing-writes"]);
    run(&["check", &url, "--thread", "nope"]).expect(3);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "hardening::export_and_threads_flag_missing_parents_and_writes",
            &[],
            export_and_threads_flag_missing_parents_and_writes,
        ),
        harness::test(
            "hardening::one_undecodable_row_is_named_and_the_rest_goes_on",
            &[],
            one_undecodable_row_is_named_and_the_rest_goes_on,
        ),
        harness::test(
            "hardening::resume_names_the_thread_that_differs",
            &[],
            resume_names_the_thread_that_differs,
        ),
        harness::test(
            "hardening::export_normalize_of_many_writes_completes",
            &[],
            export_normalize_of_many_writes_completes,
        ),
        harness::test("hardening::deep_filters_are_refused", &[], deep_filters_are_refused),
        harness::test(
            "hardening::check_verifies_fixtures_and_names_each_violation",
            &[],
            check_verifies_fixtures_and_names_each_violation,
        ),
    ]
}
