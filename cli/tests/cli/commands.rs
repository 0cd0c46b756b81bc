//! What each command prints, on the fixtures: threads, history, show, diff,
//! delete-thread, prune, stats, JSON output and colours.

use crate::harness;
use std::path::{Path, PathBuf};

use crate::support::{companion, run, sqlite_url, temp_copy, testdata_dir};
use checkpointer::serde::msgpack;
use checkpointer::Value;
use serde_json::json;

fn fixture(testdata: &Path, name: &str) -> PathBuf {
    testdata.join("fixtures").join(format!("{name}.sqlite"))
}

/// The checkpoints of (thread, ns) in Python's dump of a fixture, oldest first.
fn expected_checkpoints(path: &Path, thread: &str, ns: &str) -> Vec<serde_json::Value> {
    let dump: serde_json::Value = serde_json::from_slice(&companion(path, "expected.json")).unwrap();
    let t = dump["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == thread)
        .unwrap();
    let n = t["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["checkpoint_ns"] == ns)
        .unwrap();
    n["checkpoints"].as_array().unwrap().clone()
}

fn threads_counts_filters_and_pages() {
    let testdata = testdata_dir();
    let url = sqlite_url(&fixture(&testdata, "c_subgraph"));
    let out = run(&["--json", "threads", &url]).expect(0).json();
    let c1 = &out["threads"][0];
    assert_eq!(c1["thread_id"], "c-1");
    assert_eq!(c1["checkpoints"], 9);
    assert_eq!(c1["namespaces"].as_array().unwrap().len(), 2);
    assert_eq!(c1["namespaces"][0], "");
    assert_eq!(c1["step"], 3);
    assert_eq!(c1["source"], "loop");
    let latest = expected_checkpoints(&fixture(&testdata, "c_subgraph"), "c-1", "")
        .pop()
        .unwrap();
    assert_eq!(c1["latest_checkpoint_id"], latest["checkpoint_id"]);
    assert_eq!(c1["ts"], latest["checkpoint"]["ts"]);
    assert_eq!(out["next_after"], serde_json::Value::Null);

    let url = sqlite_url(&fixture(&testdata, "b_reducer"));
    let page = run(&["--json", "threads", &url, "--limit", "1"]).expect(0).json();
    assert_eq!(page["threads"].as_array().unwrap().len(), 1);
    assert_eq!(page["threads"][0]["thread_id"], "b-1");
    assert_eq!(page["next_after"], "b-1");
    let next = run(&["--json", "threads", &url, "--limit", "1", "--after", "b-1"])
        .expect(0)
        .json();
    assert_eq!(next["threads"][0]["thread_id"], "b-2");
    assert_eq!(next["next_after"], serde_json::Value::Null);

    // b-1's latest checkpoint is at step 6, b-2's at step 2
    let filtered = run(&[
        "--json",
        "threads",
        &url,
        "--filter",
        "step=2",
        "--filter",
        r#"source="loop""#,
    ])
    .expect(0)
    .json();
    let ids: Vec<&str> = filtered["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["b-2"]);

    let text = run(&["threads", &url]).expect(0).text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("THREAD"), "{text}");
    assert!(lines[1].starts_with("b-1") && lines[1].contains(" 8 "), "{text}");
    assert_eq!(lines.len(), 3, "{text}");

    let empty = run(&["threads", "memory:"]).expect(0);
    assert!(empty.stdout.is_empty());
    assert!(empty.stderr.contains("no threads"));
}

fn history_lists_newest_first() {
    let testdata = testdata_dir();
    let path = fixture(&testdata, "c_subgraph");
    let url = sqlite_url(&path);
    let root = run(&["--json", "history", &url, "c-1"]).expect(0).json();
    let want = expected_checkpoints(&path, "c-1", "");
    let got: Vec<&serde_json::Value> = root.as_array().unwrap().iter().collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want.iter().rev()) {
        assert_eq!(g["checkpoint_id"], w["checkpoint_id"]);
        assert_eq!(g["parent_checkpoint_id"], w["parent_checkpoint_id"]);
        assert_eq!(g["step"], w["metadata"]["step"]);
        assert_eq!(g["source"], w["metadata"]["source"]);
        assert_eq!(g["updated_channels"], w["checkpoint"]["updated_channels"]);
        assert_eq!(g["pending_writes"], w["pending_writes"].as_array().unwrap().len());
    }
    let all = run(&["--json", "history", &url, "c-1", "--all-ns"]).expect(0).json();
    assert_eq!(all.as_array().unwrap().len(), 9);
    let child = all
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| c["checkpoint_ns"].as_str().filter(|ns| !ns.is_empty()))
        .unwrap()
        .to_owned();
    let sub = run(&["--json", "history", &url, "c-1", "--ns", &child, "--limit", "2"])
        .expect(0)
        .json();
    let want = expected_checkpoints(&path, "c-1", &child);
    assert_eq!(sub.as_array().unwrap().len(), 2);
    assert_eq!(sub[0]["checkpoint_id"], want[want.len() - 1]["checkpoint_id"]);

    let text = run(&["history", &url, "c-1"]).expect(0).text();
    assert!(text.lines().next().unwrap().starts_with("CHECKPOINT"), "{text}");
    let newest = root[0]["checkpoint_id"].as_str().unwrap();
    assert!(text.lines().nth(1).unwrap().starts_with(newest), "{text}");
}

/// `show --json` is the checkpoint exactly as Python's dump has it.
fn show_prints_the_checkpoint_as_python_reads_it() {
    let testdata = testdata_dir();
    let path = fixture(&testdata, "f_messages");
    let url = sqlite_url(&path);
    let want = expected_checkpoints(&path, "f-1", "");
    let latest = run(&["--json", "show", &url, "f-1"]).expect(0).json();
    let mut latest_obj = latest.as_object().unwrap().clone();
    assert_eq!(latest_obj.remove("thread_id").unwrap(), "f-1");
    assert_eq!(latest_obj.remove("checkpoint_ns").unwrap(), "");
    assert_eq!(serde_json::Value::Object(latest_obj), want[want.len() - 1]);
    let id = want[1]["checkpoint_id"].as_str().unwrap();
    let second = run(&["--json", "show", &url, "f-1", id]).expect(0).json();
    assert_eq!(second["pending_writes"], want[1]["pending_writes"]);
    assert_eq!(
        second["checkpoint"]["channel_values"],
        want[1]["checkpoint"]["channel_values"]
    );

    let text = run(&["show", &url, "f-1"]).expect(0).text();
    for part in [
        "channels (4)",
        "langchain_core.messages.ai.AIMessage",
        "\"get_weather\"",
        "metadata",
        "pending writes (0)",
        "branch:to:tools",
        "(no value)",
    ] {
        assert!(text.contains(part), "show lacks {part:?}:\n{text}");
    }
    assert!(!text.contains('\x1b'), "colours when not on a terminal");
}

fn diff_lists_channel_changes() {
    let testdata = testdata_dir();
    let path = fixture(&testdata, "b_reducer");
    let url = sqlite_url(&path);
    let cps = expected_checkpoints(&path, "b-1", "");
    let (a, b) = (
        cps[1]["checkpoint_id"].as_str().unwrap(),
        cps[2]["checkpoint_id"].as_str().unwrap(),
    );
    let out = run(&["--json", "diff", &url, "b-1", a, b]).expect(0).json();
    let changes: Vec<(&str, &str)> = out["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["channel"].as_str().unwrap(), c["change"].as_str().unwrap()))
        .collect();
    assert_eq!(
        changes,
        [
            ("items", "changed"),
            ("branch:to:step_a", "removed"),
            ("count", "added"),
            ("branch:to:step_b", "added"),
        ]
    );
    let items = &out["channels"][0];
    assert_eq!(items["from"], cps[1]["checkpoint"]["channel_values"]["items"]);
    assert_eq!(items["to"], cps[2]["checkpoint"]["channel_values"]["items"]);
    assert_eq!(out["channels"][1].get("to"), None, "a removed channel has no new value");
    assert_eq!(out["metadata"], json!({"step": {"from": 0, "to": 1}}));

    let same = run(&["--json", "diff", &url, "b-1", a, a]).expect(0).json();
    assert_eq!(same["channels"], json!([]));
    let all = run(&["--json", "diff", &url, "b-1", a, a, "--all"]).expect(0).json();
    assert!(all["channels"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["change"] == "unchanged"));

    let text = run(&["diff", &url, "b-1", a, b]).expect(0).text();
    assert!(text.contains("~ items"), "{text}");
    assert!(text.contains("1 item(s) appended"), "{text}");
    assert!(text.contains("+ count"), "{text}");
    assert!(text.contains("step: 0 -> 1"), "{text}");
}

fn delete_thread_and_prune_change_the_store() {
    let testdata = testdata_dir();
    let (_dir, copy) = temp_copy(&fixture(&testdata, "b_reducer"));
    let url = sqlite_url(&copy);
    let pruned = run(&["--json", "prune", &url, "--keep-latest", "--all-threads"])
        .expect(0)
        .json();
    assert_eq!(pruned["strategy"], "keep-latest");
    assert_eq!(
        pruned["threads"],
        json!([
            {"thread_id": "b-1", "checkpoints_before": 8, "checkpoints_after": 1},
            {"thread_id": "b-2", "checkpoints_before": 4, "checkpoints_after": 1},
        ])
    );
    assert_eq!(pruned["checkpoints_removed"], 10);
    // the kept heads forgot their pruned parents: nothing is missing
    run(&["threads", &url]).expect(0);
    let history = run(&["--json", "history", &url, "b-1"]).expect(0).json();
    let want = expected_checkpoints(&fixture(&testdata, "b_reducer"), "b-1", "");
    assert_eq!(history[0]["checkpoint_id"], want[want.len() - 1]["checkpoint_id"]);

    let deleted = run(&["--json", "delete-thread", &url, "b-2"]).expect(0).json();
    assert_eq!(deleted, json!({"deleted": [{"thread_id": "b-2", "checkpoints": 1}]}));
    let removed = run(&["prune", &url, "--delete", "--thread", "b-1"]).expect(0).text();
    assert_eq!(
        removed,
        "pruned 1 thread(s) (delete): 1 checkpoint(s) removed, 0 kept\n"
    );
    assert_eq!(run(&["--json", "threads", &url]).expect(0).json()["threads"], json!([]));
    // the tables stay, empty, and the file keeps its rollback journal
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM checkpoints", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "delete");
    drop(conn);
    let names: Vec<String> = std::fs::read_dir(copy.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["b_reducer.sqlite"]);
}

/// SQLite stores every value in every checkpoint: a channel's value bytes
/// are the sum of its encoded values over the checkpoints, read here from
/// the raw rows.
fn stats_counts_bytes_per_thread_and_channel() {
    let testdata = testdata_dir();
    let path = fixture(&testdata, "b_reducer");
    let stats = run(&["--json", "stats", &sqlite_url(&path)]).expect(0).json();
    assert_eq!(stats["layout"], "inline");
    assert_eq!(stats["disk_bytes"], std::fs::metadata(&path).unwrap().len());
    let conn = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut want: std::collections::BTreeMap<(String, String), (u64, u64)> = Default::default();
    let mut stmt = conn.prepare("SELECT thread_id, checkpoint FROM checkpoints").unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .unwrap();
    for row in rows {
        let (thread, blob) = row.unwrap();
        let cp = msgpack::decode(&blob).unwrap();
        let Some(Value::Map(values)) = cp.get("channel_values") else {
            panic!()
        };
        for (k, v) in values {
            let e = want
                .entry((thread.clone(), k.as_str().unwrap().to_owned()))
                .or_default();
            e.0 += 1;
            e.1 += msgpack::encode(v).unwrap().len() as u64;
        }
    }
    let mut got: std::collections::BTreeMap<(String, String), (u64, u64)> = Default::default();
    for t in stats["threads"].as_array().unwrap() {
        for c in t["channels"].as_array().unwrap() {
            if c["values"].as_u64().unwrap() > 0 {
                got.insert(
                    (
                        t["thread_id"].as_str().unwrap().to_owned(),
                        c["channel"].as_str().unwrap().to_owned(),
                    ),
                    (c["values"].as_u64().unwrap(), c["value_bytes"].as_u64().unwrap()),
                );
            }
        }
    }
    assert_eq!(got, want);
    let b1 = stats["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == "b-1")
        .unwrap();
    assert_eq!(b1["checkpoints"], 8);
    assert_eq!(b1["writes"], 14);
    let text = run(&["stats", &sqlite_url(&path), "--top", "1"]).expect(0).text();
    assert!(text.contains("inline"), "{text}");
    assert!(text.contains("1 more thread(s)"), "{text}");
    assert!(text.contains("CHANNEL"), "{text}");
}

fn colours_only_when_asked_or_on_a_terminal() {
    let testdata = testdata_dir();
    let url = sqlite_url(&fixture(&testdata, "b_reducer"));
    let plain = run(&["history", &url, "b-1"]).expect(0);
    assert!(!plain.text().contains('\x1b'));
    let coloured = run(&["--color", "always", "history", &url, "b-1"]).expect(0);
    assert!(coloured.text().contains("\x1b[36m"), "{}", coloured.text());
    let never = crate::support::run_env(&["--color", "never", "history", &url, "b-1"], &[("NO_COLOR", "1")]).expect(0);
    assert!(!never.text().contains('\x1b'));
    // piped stderr: no progress bar, no colour
    let err = run(&["threads", "nope"]).expect(2);
    assert!(!err.stderr.contains('\x1b'), "{}", err.stderr);
}

/// `stats` shows the file's free pages; `reclaim` keeps them in a file
/// Python made (no incremental auto-vacuum) unless `--rewrite`, which gives
/// them back and switches the file to incremental; stores that cannot
/// rewrite refuse it as a usage error.
fn reclaim_gives_back_free_pages() {
    let testdata = testdata_dir();
    let (_dir, path) = temp_copy(&fixture(&testdata, "b_reducer"));
    let url = sqlite_url(&path);
    run(&["delete-thread", &url, "b-1"]).expect(0);
    let stats = run(&["--json", "stats", &url]).expect(0).json();
    let parts = stats["space"]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["name"], "database");
    let free = parts[0]["reclaimable_bytes"].as_u64().unwrap();
    assert!(free > 0, "{stats}");
    let kept = run(&["--json", "reclaim", &url]).expect(0).json();
    assert_eq!(kept["steps"], 0, "{kept}");
    assert_eq!(kept["after"]["parts"][0]["reclaimable_bytes"], free, "{kept}");
    let done = run(&["--json", "reclaim", &url, "--rewrite"]).expect(0).json();
    assert_eq!(done["steps"], 1, "{done}");
    assert_eq!(done["after"]["parts"][0]["reclaimable_bytes"], 0, "{done}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, 2);
    let text = run(&["stats", &url]).expect(0).text();
    assert!(text.contains("reclaimable"), "{text}");
    let refused = run(&["reclaim", "memory:", "--rewrite"]).expect(2);
    assert!(refused.stderr.contains("rewrite"), "{}", refused.stderr);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "commands::threads_counts_filters_and_pages",
            &[],
            threads_counts_filters_and_pages,
        ),
        harness::test("commands::history_lists_newest_first", &[], history_lists_newest_first),
        harness::test(
            "commands::show_prints_the_checkpoint_as_python_reads_it",
            &[],
            show_prints_the_checkpoint_as_python_reads_it,
        ),
        harness::test("commands::diff_lists_channel_changes", &[], diff_lists_channel_changes),
        harness::test(
            "commands::delete_thread_and_prune_change_the_store",
            &[],
            delete_thread_and_prune_change_the_store,
        ),
        harness::test(
            "commands::stats_counts_bytes_per_thread_and_channel",
            &[],
            stats_counts_bytes_per_thread_and_channel,
        ),
        harness::test(
            "commands::reclaim_gives_back_free_pages",
            &[],
            reclaim_gives_back_free_pages,
        ),
        harness::test(
            "commands::colours_only_when_asked_or_on_a_terminal",
            &[],
            colours_only_when_asked_or_on_a_terminal,
        ),
    ]
}
