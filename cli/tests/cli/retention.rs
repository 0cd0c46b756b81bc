//! `prune` with a retention policy and `stats` with one, on a copy of a
//! fixture: a dry run prints what would go and the bytes it frees and
//! leaves the file byte for byte as it was (no file appears either); the
//! run removes what the dry run counted, and `stats`' total falls by the
//! bytes it said; policies that contradict themselves and bad options are
//! usage errors (exit 2) before anything is opened.

use std::path::Path;

use crate::harness;
use crate::support::{run, sqlite_url, temp_copy, testdata_dir};

/// The file names in `dir`, sorted.
fn listing(dir: &Path) -> std::collections::BTreeSet<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect()
}

fn prune_dry_run_counts_and_writes_nothing() {
    let fixture = testdata_dir().join("fixtures").join("b_reducer.sqlite");
    let (dir, copy) = temp_copy(&fixture);
    let url = sqlite_url(&copy);
    let (bytes, files) = (std::fs::read(&copy).unwrap(), listing(dir.path()));
    let policy = ["--keep-last", "2", "--batch", "3"];
    let mut args = vec!["--json", "prune", &url, "--all-threads", "--dry-run"];
    args.extend(policy);
    let dry = run(&args).expect(0).json();
    assert!(std::fs::read(&copy).unwrap() == bytes, "a dry run changed the file");
    assert_eq!(listing(dir.path()), files, "a dry run made files");
    assert_eq!(dry["dry_run"], true);
    let removed = dry["checkpoints_removed"].as_u64().unwrap();
    let freed = dry["bytes"].as_u64().unwrap();
    assert!(removed > 0 && freed > 0, "{dry}");
    let per_thread: u64 = dry["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["checkpoints"].as_array().unwrap().len() as u64)
        .sum();
    assert_eq!(per_thread, removed, "{dry}");

    let text = run(&["prune", &url, "--thread", "b-1", "--dry-run", "--keep-last", "2"])
        .expect(0)
        .text();
    assert!(text.starts_with("b-1: "), "{text}");
    assert!(text.contains("nothing was removed"), "{text}");
    assert!(std::fs::read(&copy).unwrap() == bytes, "a dry run changed the file");

    // stats shows the same, and falls by it once the policy runs
    let mut args = vec!["--json", "stats", &url];
    args.extend(policy);
    let before = run(&args).expect(0).json();
    assert_eq!(before["retention"]["bytes"], freed, "{}", before["retention"]);
    assert_eq!(before["retention"]["checkpoints_removed"], removed);
    assert!(std::fs::read(&copy).unwrap() == bytes, "stats changed the file");
    let mut args = vec!["--json", "prune", &url, "--all-threads"];
    args.extend(policy);
    let done = run(&args).expect(0).json();
    assert_eq!(done["checkpoints_removed"], removed, "{done}");
    assert_eq!(done["dry_run"], false);
    let after = run(&["--json", "stats", &url]).expect(0).json();
    assert_eq!(
        after["bytes"].as_u64().unwrap(),
        before["bytes"].as_u64().unwrap() - freed,
        "the serialized bytes after the run"
    );
    let again = run(&[
        "--json",
        "prune",
        &url,
        "--all-threads",
        "--dry-run",
        "--keep-last",
        "2",
    ])
    .expect(0)
    .json();
    assert_eq!(again["checkpoints_removed"], 0, "{again}");
}

fn prune_refuses_bad_policies() {
    let fixture = testdata_dir().join("fixtures").join("b_reducer.sqlite");
    let (_dir, copy) = temp_copy(&fixture);
    let url = sqlite_url(&copy);
    let bytes = std::fs::read(&copy).unwrap();
    for (args, says) in [
        (vec!["--keep-last", "0"], "keeps no checkpoint"),
        (
            vec!["--keep-newer-than", "2d", "--delete-idle", "1d"],
            "delete_idle_threads",
        ),
        (vec!["--keep-last", "1", "--mark-key", ""], "mark key"),
        (vec!["--keep-last", "1", "--batch", "0"], "--batch"),
        (vec!["--keep-newer-than", "5x"], "unit"),
        (vec!["--keep-newer-than", "99999999999999999999d"], "duration"),
        (vec!["--keep-latest", "--keep-last", "2"], "cannot be used with"),
        (vec!["--delete", "--dry-run"], "cannot be used with"),
        (vec!["--mark-key", "pinned"], "required"),
    ] {
        let mut all = vec!["prune", url.as_str(), "--all-threads"];
        all.extend(args.iter().copied());
        let out = run(&all).expect(2);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
    let out = run(&["stats", &url, "--keep-last", "0"]).expect(2);
    assert!(out.stderr.contains("keeps no checkpoint"), "{}", out.stderr);
    assert!(std::fs::read(&copy).unwrap() == bytes, "a refused run changed the file");
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "retention::prune_dry_run_counts_and_writes_nothing",
            &[],
            prune_dry_run_counts_and_writes_nothing,
        ),
        harness::test("retention::prune_refuses_bad_policies", &[], prune_refuses_bad_policies),
    ]
}
