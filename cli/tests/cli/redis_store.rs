//! `redis://` stores: SQLite → Redis → SQLite round trips of every fixture
//! (the exports are the fixtures' dumps byte for byte), every command on a
//! Redis store, read-only commands writing no key, and bad or unreachable
//! servers reported with the usual exit codes and without the password.
//!
//! Each test has key prefixes of its own (`?prefix=cktest-<pid>-…`) and
//! removes their keys at the end, passed or failed.

use crate::harness;
use crate::redis_support::{block_on_thread, cleanup, fresh_prefix, keys_of, url as server_url};
use crate::support::{companion, fixtures, run, sqlite_url, testdata_dir, Out};

/// A key prefix of this test, its keys removed on drop.
struct Prefix(String);

impl Prefix {
    fn new() -> Prefix {
        Prefix(fresh_prefix())
    }

    /// The store URL of this prefix on the test server.
    fn url(&self) -> String {
        let server = server_url();
        let sep = if server.contains('?') { '&' } else { '?' };
        format!("{server}{sep}prefix={}", self.0)
    }

    fn keys(&self) -> usize {
        let prefix = self.0.clone();
        block_on_thread(async move { keys_of(&prefix).await.len() })
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let prefix = self.0.clone();
        block_on_thread(async move { cleanup(&prefix).await });
    }
}

fn run_owned(args: &[String]) -> Out {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)
}

/// An export of a Redis store (`"source": "redis"`) as if it were of the
/// file `name`: the rest must be the file's export byte for byte.
fn as_source(export: &[u8], name: &str) -> Vec<u8> {
    let text = std::str::from_utf8(export).unwrap();
    let from = "\n \"source\": \"redis\",\n";
    assert_eq!(text.matches(from).count(), 1, "{text}");
    text.replacen(from, &format!("\n \"source\": \"{name}\",\n"), 1)
        .into_bytes()
}

fn thread_ids(fixture: &std::path::Path) -> Vec<String> {
    let dump: serde_json::Value = serde_json::from_slice(&companion(fixture, "expected.json")).unwrap();
    dump["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap().to_owned())
        .collect()
}

/// SQLite → Redis → SQLite for every fixture: the exports (plain and
/// normalized) of each result are the fixture's dumps byte for byte, and
/// the Redis store exports as the fixtures together do.
fn copy_sqlite_to_redis_to_sqlite_round_trips() {
    let testdata = testdata_dir();
    let prefix = Prefix::new();
    let redis = prefix.url();
    let dir = tempfile::tempdir().unwrap();
    let all = fixtures(&testdata);
    for (name, fixture) in &all {
        let out = run(&["copy", &sqlite_url(fixture), &redis]).expect(0);
        assert!(out.text().starts_with("copied "), "{name}: {}", out.text());
        assert!(!out.text().contains("warning"), "{name}: {}", out.stderr);
    }
    let export = run(&["export", "--normalize", &redis]).expect(0);
    assert_eq!(export.json()["summary"]["threads"], 5, "{}", export.text());
    for (name, fixture) in &all {
        let target = dir.path().join(format!("{name}.sqlite"));
        let mut args = vec!["copy".to_owned(), redis.clone(), sqlite_url(&target)];
        for t in thread_ids(fixture) {
            args.extend(["--thread".to_owned(), t]);
        }
        run_owned(&args).expect(0);
        let url = sqlite_url(&target);
        let normalized = run(&["export", "--normalize", &url]).expect(0);
        assert!(
            normalized.stdout == companion(fixture, "normalized.json"),
            "{name}: normalized export"
        );
        let plain = run(&["export", &url]).expect(0);
        assert!(plain.stdout == companion(fixture, "expected.json"), "{name}: export");
        // and the Redis store itself exports the fixture's threads as it does
        let mut args = vec!["export".to_owned(), redis.clone()];
        for t in thread_ids(fixture) {
            args.extend(["--thread".to_owned(), t]);
        }
        let direct = run_owned(&args).expect(0);
        assert!(
            as_source(&direct.stdout, &format!("{name}.sqlite")) == companion(fixture, "expected.json"),
            "{name}: export of Redis"
        );
    }
}

/// threads, history, show, diff, export, stats, copy (conflict,
/// `--overwrite`, `--resume`, the same store refused), prune and
/// delete-thread on a Redis store.
fn every_command_works_on_redis() {
    let testdata = testdata_dir();
    let fixture = testdata.join("fixtures").join("b_reducer.sqlite");
    let src = sqlite_url(&fixture);
    let prefix = Prefix::new();
    let redis = prefix.url();
    let copied = run(&["--json", "copy", &src, &redis]).expect(0).json();
    assert_eq!(copied["checkpoints"], 12, "{copied}");
    assert_eq!(copied["writes"], 21, "{copied}");
    assert!(!copied["target"].as_str().unwrap().is_empty());

    let threads = run(&["--json", "threads", &redis]).expect(0).json();
    let ids: Vec<&str> = threads["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["b-1", "b-2"], "{threads}");
    assert_eq!(
        run(&["threads", &redis]).expect(0).text(),
        run(&["threads", &src]).expect(0).text()
    );

    let history = run(&["history", &redis, "b-2"]).expect(0).text();
    assert_eq!(history, run(&["history", &src, "b-2"]).expect(0).text());
    let (from, to) = (
        "1f1ebff3-b611-69bc-8000-b057af98a5e1",
        "1f1ebff3-b619-6718-8001-dc203b5149d3",
    );
    assert_eq!(
        run(&["show", &redis, "b-2", to]).expect(0).text(),
        run(&["show", &src, "b-2", to]).expect(0).text()
    );
    assert_eq!(
        run(&["--json", "show", &redis, "b-2"]).expect(0).json(),
        run(&["--json", "show", &src, "b-2"]).expect(0).json()
    );
    assert_eq!(
        run(&["diff", &redis, "b-2", from, to]).expect(0).text(),
        run(&["diff", &src, "b-2", from, to]).expect(0).text()
    );
    assert!(
        as_source(&run(&["export", &redis]).expect(0).stdout, "b_reducer.sqlite")
            == companion(&fixture, "expected.json"),
        "export"
    );
    run(&["show", &redis, "no-such-thread"]).expect(3);

    let stats = run(&["--json", "stats", &redis]).expect(0).json();
    assert_eq!(stats["layout"], "per_version", "{stats}");
    assert_eq!(stats["disk_bytes"], serde_json::Value::Null, "{stats}");
    assert!(stats["memory_bytes"].as_u64().unwrap() > 0, "{stats}");
    assert_eq!(stats["threads"].as_array().unwrap().len(), 2, "{stats}");
    let checkpoints: u64 = stats["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["checkpoints"].as_u64().unwrap())
        .sum();
    assert_eq!(checkpoints, 12, "{stats}");
    let text = run(&["stats", &redis]).expect(0).text();
    assert!(text.contains("in memory"), "{text}");

    // copy onto itself, and onto threads it has
    let same = run(&["copy", &redis, &redis, "--overwrite"]).expect(2);
    assert!(same.stderr.contains("are the same store"), "{}", same.stderr);
    let conflict = run(&["copy", &src, &redis]).expect(5);
    assert!(conflict.stderr.contains("\"b-1\""), "{}", conflict.stderr);
    // a Redis thread is replaced by one swap of staged keys, not deleted first
    assert!(
        conflict.stderr.contains("replaced whole, in one step"),
        "{}",
        conflict.stderr
    );
    let resumed = run(&["--json", "copy", &src, &redis, "--resume"]).expect(0).json();
    assert_eq!(resumed["skipped"], serde_json::json!(["b-1", "b-2"]), "{resumed}");

    let pruned = run(&["prune", &redis, "--keep-latest", "--thread", "b-2"]).expect(0);
    assert!(!pruned.text().is_empty());
    let history = run(&["--json", "history", &redis, "b-2"]).expect(0).json();
    assert_eq!(history.as_array().unwrap().len(), 1, "{history}");
    // the pruned thread is replaced whole
    let again = run(&["--json", "copy", &src, &redis, "--thread", "b-2", "--overwrite"])
        .expect(0)
        .json();
    assert_eq!(again["threads"][0]["replaced"], true, "{again}");
    assert_eq!(
        run(&["history", &redis, "b-2"]).expect(0).text(),
        run(&["history", &src, "b-2"]).expect(0).text()
    );

    run(&["delete-thread", &redis, "b-1"]).expect(0);
    run(&["history", &redis, "b-1"]).expect(3);
    let threads = run(&["--json", "threads", &redis]).expect(0).json();
    assert_eq!(threads["threads"].as_array().unwrap().len(), 1, "{threads}");
    run(&["prune", &redis, "--delete", "--all-threads"]).expect(0);
    let threads = run(&["--json", "threads", &redis]).expect(0).json();
    assert_eq!(threads["threads"], serde_json::json!([]), "{threads}");
}

/// A prefix no saver wrote is not a store (exit 4) for every command but
/// `copy`'s target, and the commands that read or change a store write no
/// key there; `copy` to it creates it.
fn a_prefix_without_a_store_is_a_store_error_and_stays_empty() {
    let prefix = Prefix::new();
    let redis = prefix.url();
    let id = "1f1ebff3-b5b4-6a7a-bfff-8e3ad424ad44";
    for args in [
        vec!["threads", &redis],
        vec!["history", &redis, "b-1"],
        vec!["show", &redis, "b-1"],
        vec!["diff", &redis, "b-1", id, id],
        vec!["export", &redis],
        vec!["copy", &redis, "memory:"],
        vec!["delete-thread", &redis, "b-1"],
        vec!["prune", &redis, "--keep-latest", "--all-threads"],
        vec!["stats", &redis],
    ] {
        let out = run(&args).expect(4);
        assert!(
            out.stderr.contains("has no checkpoint store under key prefix"),
            "{args:?}: {}",
            out.stderr
        );
        assert_eq!(prefix.keys(), 0, "{args:?} wrote a key");
    }
    let out = run(&["--json", "copy", "memory:", &redis]).expect(0).json();
    assert_eq!(out["threads"], serde_json::json!([]), "{out}");
    run(&["threads", &redis]).expect(0);
    assert_eq!(prefix.keys(), 1, "the layout marker");
}

/// Every command on an unreachable server: exit 4 naming the server, the
/// password masked (`rediss://` too); a malformed URL or TLS files with
/// `redis://`: exit 2, the password masked too.
fn an_unreachable_or_bad_redis_is_an_error_without_the_password() {
    let url = "redis://:SECRET-pw@127.0.0.1:1/0?prefix=p";
    let id = "1f1ebff3-b5b4-6a7a-bfff-8e3ad424ad44";
    let check = |args: &[&str], code: i32, message: &str| {
        let out = run(args);
        assert_eq!(out.code, code, "{args:?}\nstderr: {}", out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        for needle in ["SECRET", "-pw"] {
            assert!(
                !out.stderr.contains(needle) && !stdout.contains(needle),
                "{args:?} printed {needle:?}:\nstderr: {}\nstdout: {stdout}",
                out.stderr
            );
        }
        assert!(out.stderr.starts_with("error: "), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(message), "{args:?}: {}", out.stderr);
    };
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
    ] {
        check(&args, 4, "redis://:***@127.0.0.1:1/0?prefix=p");
    }
    for bad in [
        "redis://:SECRET-pw@127.0.0.1:notaport/0",
        "redis://:SECRET-pw@127.0.0.1/0?prefix=",
        "redis://:SECRET-pw@127.0.0.1/0?prefix=a%7Bb%7D",
    ] {
        check(&["threads", bad], 2, "bad Redis URL redis://:***@127.0.0.1");
        check(&["copy", "memory:", bad], 2, "bad Redis URL");
    }
    check(
        &["threads", "redis://:SECRET-pw@127.0.0.1:6380?ca=ca.pem"],
        2,
        "write rediss://",
    );
    check(
        &["threads", "rediss://:SECRET-pw@127.0.0.1:1"],
        4,
        "rediss://:***@127.0.0.1:1",
    );
    // a lone user part is the password for the redis crate
    check(
        &["threads", "redis://SECRET-pw@127.0.0.1:1"],
        4,
        "redis://***@127.0.0.1:1",
    );
}

/// A password the server refuses: exit 4, the password masked.
fn a_refused_password_is_not_printed() {
    let server = server_url();
    let Some(rest) = server.strip_prefix("redis://") else {
        return;
    };
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let url = format!("redis://nobody:SECRET-pw@{host}");
    let out = run(&["threads", &url]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(!out.stderr.contains("SECRET"), "{}", out.stderr);
    assert!(out.stderr.contains("nobody:***@"), "{}", out.stderr);
}

/// The tests of this module, for the harness of `main.rs`.
/// A prefix `P` and a prefix nested in its key grammar, `P:v2:x` (whose
/// keys start `P:v2:x:v2:{`): every command on `P` that scans or lists
/// sees `P`'s keys alone. `stats` of `P` counts the same bytes with and
/// without the other prefix; `threads`, `prune` and `delete-thread` on one
/// leave the other as it was.
fn nested_prefixes_do_not_overlap() {
    let testdata = testdata_dir();
    let fixtures = testdata.join("fixtures");
    let outer = Prefix::new();
    let inner = Prefix(format!("{}:v2:x", outer.0));
    let (p, q) = (outer.url(), inner.url());
    run(&["copy", &sqlite_url(&fixtures.join("a_one_node.sqlite")), &p]).expect(0);
    let alone = run(&["--json", "stats", &p]).expect(0).json();
    run(&["copy", &sqlite_url(&fixtures.join("b_reducer.sqlite")), &q]).expect(0);
    let nested = run(&["--json", "stats", &p]).expect(0).json();
    assert_eq!(nested["memory_bytes"], alone["memory_bytes"], "{alone}\n{nested}");
    assert_eq!(nested["threads"].as_array().unwrap().len(), 1, "{nested}");
    let threads = |url: &str| -> Vec<String> {
        run(&["--json", "threads", url]).expect(0).json()["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["thread_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (ours, theirs) = (threads(&p), threads(&q));
    assert_eq!(theirs, ["b-1", "b-2"]);
    assert_eq!(ours.len(), 1, "{ours:?}");
    let before = run(&["export", &q]).expect(0).stdout;
    run(&["prune", &p, "--keep-latest", "--all-threads"]).expect(0);
    run(&["delete-thread", &p, &ours[0]]).expect(0);
    assert!(threads(&p).is_empty());
    assert_eq!(
        run(&["export", &q]).expect(0).stdout,
        before,
        "the nested prefix changed"
    );
    // and the other way round
    run(&["prune", &q, "--delete", "--all-threads"]).expect(0);
    let outer_stats = run(&["--json", "stats", &p]).expect(0).json();
    assert!(outer_stats["memory_bytes"].as_u64().unwrap() > 0, "{outer_stats}");
    assert!(
        outer_stats["memory_bytes"].as_u64() < alone["memory_bytes"].as_u64(),
        "{outer_stats} after {alone}"
    );
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "redis_store::copy_sqlite_to_redis_to_sqlite_round_trips",
            &[&crate::REDIS],
            copy_sqlite_to_redis_to_sqlite_round_trips,
        ),
        harness::test(
            "redis_store::every_command_works_on_redis",
            &[&crate::REDIS],
            every_command_works_on_redis,
        ),
        harness::test(
            "redis_store::a_prefix_without_a_store_is_a_store_error_and_stays_empty",
            &[&crate::REDIS],
            a_prefix_without_a_store_is_a_store_error_and_stays_empty,
        ),
        harness::test(
            "redis_store::an_unreachable_or_bad_redis_is_an_error_without_the_password",
            &[],
            an_unreachable_or_bad_redis_is_an_error_without_the_password,
        ),
        harness::test(
            "redis_store::nested_prefixes_do_not_overlap",
            &[&crate::REDIS],
            nested_prefixes_do_not_overlap,
        ),
        harness::test(
            "redis_store::a_refused_password_is_not_printed",
            &[&crate::REDIS],
            a_refused_password_is_not_printed,
        ),
    ]
}
