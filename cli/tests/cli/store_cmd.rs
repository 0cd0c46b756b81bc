//! `store namespaces|items|get` on `testdata/store/python_store.sqlite`, a
//! file written by Python's `SqliteStore` (langgraph-checkpoint-sqlite,
//! `scripts/store_python_peer.py --store sqlite` over
//! `testdata/store/cli_write.json`), read without changing it; its item put
//! with a TTL of 0 minutes is expired and never shown.

use std::path::PathBuf;

use serde_json::json;

use crate::harness;
use crate::support::{run, sqlite_url, testdata_dir};

fn python_store() -> PathBuf {
    testdata_dir().join("store").join("python_store.sqlite")
}

fn namespaces_sorted_filtered_and_paged() {
    let file = python_store();
    let before = std::fs::read(&file).unwrap();
    let url = sqlite_url(&file);
    let all = run(&["--json", "store", "namespaces", &url]).expect(0).json();
    // sorted; docs.old holds only the expired item
    assert_eq!(
        all,
        json!({"namespaces": [["docs", "rust"], ["users", "ada"], ["users", "ada", "notes"], ["users", "bob"]],
               "next_offset": null})
    );
    let text = run(&["store", "namespaces", &url]).expect(0).text();
    assert_eq!(text, "docs.rust\nusers.ada\nusers.ada.notes\nusers.bob\n");
    let users = run(&[
        "--json",
        "store",
        "namespaces",
        &url,
        "--prefix",
        "users",
        "--max-depth",
        "2",
    ])
    .expect(0)
    .json();
    assert_eq!(users["namespaces"], json!([["users", "ada"], ["users", "bob"]]));
    let wild = run(&["--json", "store", "namespaces", &url, "--suffix", "*.notes"])
        .expect(0)
        .json();
    assert_eq!(wild["namespaces"], json!([["users", "ada", "notes"]]));
    let page = run(&["store", "namespaces", &url, "--limit", "2", "--offset", "1"]).expect(0);
    assert_eq!(page.text(), "users.ada\nusers.ada.notes\n");
    assert!(page.stderr.contains("--offset 3"), "{}", page.stderr);
    // nothing written: no WAL switch, no TTL refresh, no migration
    assert!(std::fs::read(&file).unwrap() == before, "the file changed");
}

fn items_filtered_and_paged() {
    let url = sqlite_url(&python_store());
    let notes = run(&["--json", "store", "items", &url, "users.ada.notes"])
        .expect(0)
        .json();
    let keys: Vec<&str> = notes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["n1", "n2", "n3"]);
    let n3 = &notes["items"][2];
    assert_eq!(n3["namespace"], json!(["users", "ada", "notes"]));
    assert_eq!(
        n3["value"],
        json!({"text": "prefers tea", "kind": "fact", "n": 3, "é": "ü"})
    );
    assert!(n3["updated_at"].as_str().unwrap().ends_with("+00:00"), "{n3}");

    let filter = r#"{"kind": "note", "n": {"$gt": 1}}"#;
    let found = run(&["--json", "store", "items", &url, "users", "--filter", filter])
        .expect(0)
        .json();
    assert_eq!(found["items"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["items"][0]["key"], "n2");

    // the root prefix: every live item, the expired one left out
    let all = run(&["--json", "store", "items", &url, "", "--limit", "100"])
        .expect(0)
        .json();
    let keys: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 6, "{keys:?}");
    assert!(!keys.contains(&"gone"), "{keys:?}");
    let page = run(&["--json", "store", "items", &url, "", "--limit", "4", "--offset", "1"])
        .expect(0)
        .json();
    assert_eq!(page["items"].as_array().unwrap().len(), 4);
    assert_eq!(page["items"][0]["key"], all["items"][1]["key"]);
    assert_eq!(page["next_offset"], 5);

    let table = run(&["store", "items", &url, "users.bob"]).expect(0).text();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[0].starts_with("NAMESPACE") && lines[0].contains("VALUE"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("users.bob") && lines[1].contains("\"light\""),
        "{table}"
    );
}

fn get_prints_one_item_or_not_found() {
    let url = sqlite_url(&python_store());
    let item = run(&["--json", "store", "get", &url, "users.ada", "prefs"])
        .expect(0)
        .json();
    assert_eq!(
        item["value"],
        json!({"theme": "dark", "size": 14, "nested": {"a": [1, 2.5, true]}})
    );
    assert_eq!(item["namespace"], json!(["users", "ada"]));
    let text = run(&["store", "get", &url, "users.ada", "prefs"]).expect(0).text();
    assert!(text.starts_with("item prefs\n  namespace  users.ada\n"), "{text}");
    assert!(text.contains("\"theme\": \"dark\""), "{text}");
    // expired: not found, as missing
    let gone = run(&["store", "get", &url, "docs.old", "gone"]).expect(3);
    assert!(gone.stderr.contains("no item \"gone\""), "{}", gone.stderr);
    run(&["store", "get", &url, "users.ada", "nope"]).expect(3);
}

fn bad_input_is_refused() {
    let url = sqlite_url(&python_store());
    for args in [
        vec!["store", "items", url.as_str(), "users", "--filter", "{not json"],
        vec![
            "store",
            "items",
            url.as_str(),
            "users",
            "--filter",
            r#"{"n": {"$near": 1}}"#,
        ],
        vec!["store", "items", url.as_str(), "users..ada"],
        vec!["store", "namespaces", url.as_str(), "--max-depth", "0"],
        vec!["store", "namespaces", "mysql://u:SECRET@h/db"],
    ] {
        let out = run(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("SECRET"), "{}", out.stderr);
    }
    // a PostgreSQL store no server answers for: a storage failure, no secret
    let out = run(&["store", "namespaces", "postgres://u:SECRET@127.0.0.1:1/db"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(!out.stderr.contains("SECRET"), "{}", out.stderr);
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.sqlite");
    run(&["store", "namespaces", &sqlite_url(&missing)]).expect(3);
    assert!(!missing.exists(), "a read creates no file");
    // a checkpoint file without store tables: a store error, left as it was
    let fixture = testdata_dir().join("fixtures").join("a_one_node.sqlite");
    let out = run(&["store", "namespaces", &sqlite_url(&fixture)]).expect(4);
    assert!(out.stderr.contains("no store table"), "{}", out.stderr);
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "store_cmd::namespaces_sorted_filtered_and_paged",
            &[],
            namespaces_sorted_filtered_and_paged,
        ),
        harness::test("store_cmd::items_filtered_and_paged", &[], items_filtered_and_paged),
        harness::test(
            "store_cmd::get_prints_one_item_or_not_found",
            &[],
            get_prints_one_item_or_not_found,
        ),
        harness::test("store_cmd::bad_input_is_refused", &[], bad_input_is_refused),
    ]
}

/// The same commands on a PostgreSQL store written through the library (as
/// Python's `PostgresStore` lays it out): listed, searched and read, an
/// expired item never shown, and no TTL restarted by the reads.
fn postgres_store_is_listed_and_read() {
    use checkpointer::store::{Namespace, Op, PostgresStore, PutOp, Store, Ttl};
    let Some(db) = crate::support::require_postgres() else {
        return;
    };
    let url = db.url();
    let writer_url = url.clone();
    crate::support::block_on(async move {
        let store = PostgresStore::open(writer_url).await.unwrap();
        let ada = Namespace::new(["users", "ada"]).unwrap();
        let gone = Namespace::new(["users", "gone"]).unwrap();
        store
            .batch(vec![
                Op::Put(PutOp::new(ada.clone(), "prefs", json!({"theme": "dark"})).ttl(Ttl::Minutes(60.0))),
                Op::Put(PutOp::new(ada.clone(), "notes", json!({"n": 2}))),
                Op::Put(PutOp::new(gone, "old", json!({"n": 0})).ttl(Ttl::Minutes(0.0))),
            ])
            .await
            .unwrap();
    });
    let expiry = || {
        crate::support::with_pg_client(&url, |client| async move {
            let row = client
                .query_one("SELECT expires_at::text FROM store WHERE key = 'prefs'", &[])
                .await
                .unwrap();
            row.get::<_, String>(0)
        })
    };
    let before = expiry();
    let all = run(&["--json", "store", "namespaces", &url]).expect(0).json();
    assert_eq!(all["namespaces"], json!([["users", "ada"]]));
    let items = run(&[
        "--json",
        "store",
        "items",
        &url,
        "users",
        "--filter",
        r#"{"theme": "dark"}"#,
    ])
    .expect(0)
    .json();
    assert_eq!(items["items"].as_array().unwrap().len(), 1, "{items}");
    assert_eq!(items["items"][0]["key"], "prefs");
    let got = run(&["--json", "store", "get", &url, "users.ada", "prefs"])
        .expect(0)
        .json();
    assert_eq!(got["value"], json!({"theme": "dark"}));
    run(&["store", "get", &url, "users.gone", "old"]).expect(3);
    assert_eq!(expiry(), before, "a read restarted the TTL");
}

pub(crate) fn postgres_tests() -> Vec<harness::Trial> {
    vec![harness::test(
        "store_cmd::postgres_store_is_listed_and_read",
        &[&crate::POSTGRES],
        postgres_store_is_listed_and_read,
    )]
}
