//! Every command's error paths and their exit codes: 2 usage or bad URL,
//! 3 not found, 4 store error, 5 conflict, 6 inconsistent store.

use crate::harness;
use std::path::Path;

use crate::support::{run, sqlite_url, temp_copy, testdata_dir, Out, UNREACHABLE_PG};

/// Each command with `URL` where its store goes (and a thread that exists
/// in the fixtures where one is needed).
fn commands(url: &str) -> Vec<Vec<String>> {
    let id = "1f1ebff3-b5b4-6a7a-bfff-8e3ad424ad44";
    [
        vec!["threads", url],
        vec!["history", url, "b-1"],
        vec!["show", url, "b-1"],
        vec!["diff", url, "b-1", id, id],
        vec!["export", url],
        vec!["copy", url, "memory:"],
        vec!["delete-thread", url, "b-1"],
        vec!["prune", url, "--keep-latest", "--all-threads"],
        vec!["stats", url],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(str::to_owned).collect())
    .collect()
}

fn run_owned(args: &[String]) -> Out {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)
}

#[track_caller]
fn expect_error(args: &[String], code: i32, message: &str) {
    let out = run_owned(args);
    assert_eq!(out.code, code, "{args:?}\nstderr: {}", out.stderr);
    assert!(
        out.stderr.contains(message),
        "{args:?}: stderr lacks {message:?}:\n{}",
        out.stderr
    );
    assert!(out.stderr.starts_with("error: "), "{args:?}: {}", out.stderr);
}

fn bad_urls_are_usage_errors() {
    for url in ["nope", "sqlite://", "sqlite:relative.db", "mysql://x/y", "file.sqlite"] {
        for args in commands(url) {
            expect_error(&args, 2, "bad store URL");
        }
    }
    for args in commands("postgresql://postgres@127.0.0.1:notaport/db") {
        expect_error(&args, 2, "bad PostgreSQL URL");
    }
    // the target of a copy too
    expect_error(&["copy".into(), "memory:".into(), "nope".into()], 2, "bad store URL");
    let hint = run(&["threads", "data.sqlite"]).expect(2);
    assert!(hint.stderr.contains("sqlite://data.sqlite"), "{}", hint.stderr);
}

fn a_missing_file_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sqlite");
    for args in commands(&sqlite_url(&missing)) {
        expect_error(&args, 3, "no such file");
    }
    assert!(!missing.exists(), "a command created the file");
    // a copy creates its target file, not its directory
    let nowhere = dir.path().join("no-dir").join("t.sqlite");
    expect_error(
        &["copy".into(), "memory:".into(), sqlite_url(&nowhere)],
        3,
        "no such directory",
    );
}

fn an_unreachable_postgres_is_a_store_error() {
    for args in commands(UNREACHABLE_PG) {
        let out = run_owned(&args);
        assert_eq!(out.code, 4, "{args:?}\nstderr: {}", out.stderr);
        assert!(out.stderr.contains("127.0.0.1:1"), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("password"), "{}", out.stderr);
    }
    expect_error(
        &["copy".into(), "memory:".into(), UNREACHABLE_PG.into()],
        4,
        "cannot set up",
    );
}

/// No form of a PostgreSQL password is ever printed: URL user info, a
/// `password=` query parameter (any case, percent-encoded, repeated) and
/// `key=value` strings, whether the string is unreachable, malformed or not
/// a store URL at all.
fn passwords_are_never_printed() {
    let cases = [
        "postgres://u:SECRET-pw@127.0.0.1:1/nothing?connect_timeout=3",
        "postgresql://u:SECRET%2Dpw@127.0.0.1:1/nothing?connect_timeout=3",
        "postgresql://u@127.0.0.1:1/nothing?password=SECRET-pw&connect_timeout=3",
        "postgresql://u@127.0.0.1:1/nothing?connect_timeout=3&PassWord=SECRET%2Dpw&password=SECRET-pw",
        "postgres://u:SECRET-pw@127.0.0.1:notaport/db",
        "postgresql://u@127.0.0.1:1/db?password=SECRET-pw&bogus=1",
        "host=127.0.0.1 port=1 user=u password=SECRET-pw",
        "host=127.0.0.1 port=1 password = 'SECRET-pw \\' x' dbname=d",
        "host=127.0.0.1 password=SECRET-pw.sqlite",
    ];
    for url in cases {
        for args in [
            vec!["threads".to_owned(), url.to_owned()],
            vec!["copy".to_owned(), "memory:".to_owned(), url.to_owned()],
        ] {
            let out = run_owned(&args);
            assert_ne!(out.code, 0, "{args:?}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            for needle in ["SECRET", "-pw", "%2Dpw"] {
                assert!(
                    !out.stderr.contains(needle) && !stdout.contains(needle),
                    "{args:?} printed {needle:?}:\nstderr: {}\nstdout: {stdout}",
                    out.stderr
                );
            }
            assert!(out.stderr.contains("***"), "{args:?}: {}", out.stderr);
        }
    }
}

/// Passwords with unencoded `/`, `#`, `?`, `@`, `:` or spaces (the URL does
/// not parse, or reads another way), in every scheme, and credentials in a
/// query: never printed by any command, on stdout or stderr (before:
/// `bad Redis URL redis://:hunter2/x@127.0.0.1:1/0` was printed whole).
fn reserved_character_passwords_are_never_printed() {
    let mut urls = Vec::new();
    for pw in [
        "SECRET/pw",
        "SECRET#pw",
        "SECRET?pw",
        "SE@CRET/pw",
        "SECRET pw",
        "SE:CRET/x",
    ] {
        urls.extend([
            format!("redis://:{pw}@127.0.0.1:1/0"),
            format!("redis://app:{pw}@127.0.0.1:1/0?prefix=p"),
            format!("rediss://{pw}@127.0.0.1:1"),
            format!("postgresql://u:{pw}@127.0.0.1:1/db?connect_timeout=2"),
        ]);
        if !pw.contains('@') {
            // no host at all (with an `@`, the rest is a host)
            urls.push(format!("redis://:{pw}"));
        }
    }
    urls.extend([
        "redis://127.0.0.1:1/0?password=SECRETpw".to_owned(),
        "redis+unix:///tmp/checkpointer-none.sock?pass=SECRETpw".to_owned(),
        "sqlite:///checkpointer-no-such-dir/x.sqlite?key=SECRETpw".to_owned(),
        "postgres://u:SECRET pw@127.0.0.1:notaport/db".to_owned(),
    ]);
    let id = "1f1ebff3-b5b4-6a7a-bfff-8e3ad424ad44";
    for url in &urls {
        let url = url.as_str();
        for args in [
            vec!["threads", url],
            vec!["history", url, "b-1"],
            vec!["show", url, "b-1"],
            vec!["diff", url, "b-1", id, id],
            vec!["export", url],
            vec!["copy", url, "memory:"],
            vec!["copy", "memory:", url],
            vec!["delete-thread", url, "b-1"],
            vec!["prune", url, "--keep-latest", "--all-threads"],
            vec!["stats", url],
            // clap's own errors quote the argument
            vec![url],
        ] {
            let out = run(&args);
            assert_ne!(out.code, 0, "{args:?}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            for needle in ["SECRET", "CRET"] {
                assert!(
                    !out.stderr.contains(needle) && !stdout.contains(needle),
                    "{args:?} printed {needle:?}:\nstderr: {}\nstdout: {stdout}",
                    out.stderr
                );
            }
        }
    }
    // a credential in a Redis URL's query is refused before connecting
    let out = run(&["threads", "redis://127.0.0.1:1/0?password=SECRETpw"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("credential"), "{}", out.stderr);
}

fn a_file_without_checkpoint_tables_is_a_store_error() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.sqlite");
    std::fs::write(
        &garbage,
        b"this is not a database, just some text long enough to have a header",
    )
    .unwrap();
    let other = dir.path().join("other.sqlite");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    for path in [&garbage, &other] {
        let before = std::fs::read(path).unwrap();
        for args in commands(&sqlite_url(path)) {
            let out = run_owned(&args);
            assert_eq!(out.code, 4, "{args:?}\nstderr: {}", out.stderr);
        }
        assert!(std::fs::read(path).unwrap() == before, "{} was changed", path.display());
    }
    expect_error(&["threads".into(), sqlite_url(&other)], 4, "has no checkpoint tables");
}

fn fixture(testdata: &Path) -> String {
    sqlite_url(&testdata.join("fixtures").join("b_reducer.sqlite"))
}

fn a_missing_thread_is_not_found() {
    let testdata = testdata_dir();
    let (_dir, copy) = temp_copy(&testdata.join("fixtures").join("b_reducer.sqlite"));
    let url = sqlite_url(&copy);
    let id = "1f1ebff3-b5b4-6a7a-bfff-8e3ad424ad44";
    let cases: Vec<Vec<&str>> = vec![
        vec!["history", &url, "nope"],
        vec!["show", &url, "nope"],
        vec!["show", &url, "nope", id],
        vec!["diff", &url, "nope", id, id],
        vec!["export", &url, "--thread", "nope"],
        vec!["export", &url, "--thread", "b-1", "--thread", "nope"],
        vec!["copy", &url, "memory:", "--thread", "nope"],
        vec!["delete-thread", &url, "b-1", "nope"],
        vec!["prune", &url, "--delete", "--thread", "nope"],
        vec!["stats", &url, "--thread", "nope"],
    ];
    for args in cases {
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        expect_error(&args, 3, "no thread \"nope\"");
    }
    // delete-thread is all or nothing: b-1 is still there
    let threads = run(&["--json", "threads", &url]).expect(0).json();
    assert_eq!(threads["threads"].as_array().unwrap().len(), 2);
}

fn a_missing_checkpoint_or_namespace_is_not_found() {
    let testdata = testdata_dir();
    let url = fixture(&testdata);
    let id = "1f1ebff3-b5b4-6a7a-bfff-8e3ad424ad44";
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    expect_error(
        &s(&["show", &url, "b-1", "no-such-id"]),
        3,
        "no checkpoint \"no-such-id\"",
    );
    expect_error(
        &s(&["diff", &url, "b-1", id, "no-such-id"]),
        3,
        "no checkpoint \"no-such-id\"",
    );
    expect_error(
        &s(&["diff", &url, "b-1", "no-such-id", id]),
        3,
        "no checkpoint \"no-such-id\"",
    );
    expect_error(&s(&["show", &url, "b-1", "--ns", "x:1"]), 3, "in namespace \"x:1\"");
    expect_error(&s(&["history", &url, "b-1", "--ns", "x:1"]), 3, "in namespace \"x:1\"");
}

fn an_existing_target_thread_is_a_conflict() {
    let testdata = testdata_dir();
    let dir = tempfile::tempdir().unwrap();
    let target = sqlite_url(&dir.path().join("t.sqlite"));
    run(&["copy", &fixture(&testdata), &target]).expect(0);
    expect_error(
        &[
            "copy".into(),
            fixture(&testdata),
            target.clone(),
            "--thread".into(),
            "b-1".into(),
        ],
        5,
        "already has thread(s) \"b-1\"",
    );
    // a store is not copied onto itself, even with --overwrite, whatever
    // the names: a hard link is the same file
    let link = dir.path().join("link.sqlite");
    std::fs::hard_link(dir.path().join("t.sqlite"), &link).unwrap();
    expect_error(
        &["copy".into(), target, sqlite_url(&link), "--overwrite".into()],
        2,
        "are the same store",
    );
    let threads = run(&["--json", "threads", &sqlite_url(&link)]).expect(0).json();
    assert_eq!(threads["threads"].as_array().unwrap().len(), 2);
}

fn bad_filters_are_usage_errors() {
    let testdata = testdata_dir();
    let url = fixture(&testdata);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    expect_error(&s(&["threads", &url, "--filter", "source=loop"]), 2, "not JSON");
    expect_error(&s(&["threads", &url, "--filter", "step={"]), 2, "not JSON");
    expect_error(&s(&["threads", &url, "--filter", "step"]), 2, "expected KEY=JSON");
    let hint = run(&["threads", &url, "--filter", "source=loop"]).expect(2);
    assert!(hint.stderr.contains(r#"source="loop""#), "{}", hint.stderr);
}

fn bad_arguments_are_usage_errors() {
    for args in [
        vec!["prune", "memory:", "--all-threads"],
        vec!["prune", "memory:", "--delete"],
        vec!["prune", "memory:", "--delete", "--keep-latest", "--all-threads"],
        vec!["delete-thread", "memory:"],
        vec!["history", "memory:"],
        vec!["frobnicate"],
        vec!["threads", "memory:", "--limit", "-1"],
    ] {
        let out = run(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
    }
}

/// A store whose rows do not all read is exported with the errors listed in
/// the dump and on stderr, exit 6.
fn an_inconsistent_store_exports_with_exit_6() {
    let testdata = testdata_dir();
    let (_dir, copy) = temp_copy(&testdata.join("fixtures").join("b_reducer.sqlite"));
    rusqlite::Connection::open(&copy)
        .unwrap()
        .execute(
            "UPDATE checkpoints SET checkpoint = x'c1' WHERE checkpoint_id = ?1",
            ["1f1ebff3-b5b4-6a7a-bfff-8e3ad424ad44"],
        )
        .unwrap();
    let out = run(&["export", &sqlite_url(&copy)]).expect(6);
    let dump = out.json();
    assert_eq!(dump["errors"].as_array().unwrap().len(), 1, "{}", dump["errors"]);
    assert_eq!(dump["summary"]["checkpoints"], 11);
    assert!(out.stderr.contains("ERROR: list failed on a row"), "{}", out.stderr);
    assert!(out.stderr.contains("inconsistently"), "{}", out.stderr);
}

/// A server error keeps the server's words (SQLSTATE, message) on stderr,
/// never only "db error": here a column the reads need is gone.
fn server_errors_show_the_servers_message() {
    let testdata = testdata_dir();
    let Some(db) = crate::support::require_postgres() else {
        return;
    };
    run(&["copy", &fixture(&testdata), &db.url()]).expect(0);
    crate::support::with_pg_client(&db.url(), |client| async move {
        client
            .batch_execute("ALTER TABLE checkpoint_writes DROP COLUMN task_path")
            .await
            .unwrap();
    });
    for command in ["export", "threads", "stats"] {
        let out = run(&[command, &db.url()]);
        assert_ne!(out.code, 0, "{command}");
        assert!(out.stderr.contains("42703"), "{command}: {}", out.stderr);
        assert!(!out.stderr.contains("db error"), "{command}: {}", out.stderr);
    }
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test("errors::bad_urls_are_usage_errors", &[], bad_urls_are_usage_errors),
        harness::test("errors::a_missing_file_is_not_found", &[], a_missing_file_is_not_found),
        harness::test(
            "errors::an_unreachable_postgres_is_a_store_error",
            &[],
            an_unreachable_postgres_is_a_store_error,
        ),
        harness::test("errors::passwords_are_never_printed", &[], passwords_are_never_printed),
        harness::test(
            "errors::reserved_character_passwords_are_never_printed",
            &[],
            reserved_character_passwords_are_never_printed,
        ),
        harness::test(
            "errors::a_file_without_checkpoint_tables_is_a_store_error",
            &[],
            a_file_without_checkpoint_tables_is_a_store_error,
        ),
        harness::test(
            "errors::a_missing_thread_is_not_found",
            &[],
            a_missing_thread_is_not_found,
        ),
        harness::test(
            "errors::a_missing_checkpoint_or_namespace_is_not_found",
            &[],
            a_missing_checkpoint_or_namespace_is_not_found,
        ),
        harness::test(
            "errors::an_existing_target_thread_is_a_conflict",
            &[],
            an_existing_target_thread_is_a_conflict,
        ),
        harness::test(
            "errors::bad_filters_are_usage_errors",
            &[],
            bad_filters_are_usage_errors,
        ),
        harness::test(
            "errors::bad_arguments_are_usage_errors",
            &[],
            bad_arguments_are_usage_errors,
        ),
        harness::test(
            "errors::an_inconsistent_store_exports_with_exit_6",
            &[],
            an_inconsistent_store_exports_with_exit_6,
        ),
        harness::test(
            "errors::server_errors_show_the_servers_message",
            &[&crate::POSTGRES],
            server_errors_show_the_servers_message,
        ),
    ]
}
