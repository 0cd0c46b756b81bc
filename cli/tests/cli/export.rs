//! `export` prints what `read_fixtures.py` prints for the same store, byte
//! for byte; read-only commands never touch the file they read.

use crate::harness;
use crate::support::{companion, fixtures, run, sqlite_url, temp_copy, testdata_dir};

fn export_normalize_equals_python_for_every_fixture() {
    let testdata = testdata_dir();
    for (name, path) in fixtures(&testdata) {
        let out = run(&["export", "--normalize", &sqlite_url(&path)]).expect(0);
        let want = companion(&path, "normalized.json");
        assert!(
            out.stdout == want,
            "{name}: export --normalize differs from {name}.normalized.json\n{}",
            first_difference(&out.stdout, &want)
        );
    }
}

fn export_equals_python_for_every_fixture() {
    let testdata = testdata_dir();
    for (name, path) in fixtures(&testdata) {
        let out = run(&["export", &sqlite_url(&path)]).expect(0);
        let want = companion(&path, "expected.json");
        assert!(
            out.stdout == want,
            "{name}: export differs from {name}.expected.json\n{}",
            first_difference(&out.stdout, &want)
        );
    }
}

/// `--thread` keeps only that thread, exactly as the full dump has it, and
/// `-o` writes the same bytes to a file.
fn export_of_one_thread_to_a_file() {
    let testdata = testdata_dir();
    let fixture = testdata.join("fixtures").join("b_reducer.sqlite");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dump.json");
    let out = run(&[
        "export",
        &sqlite_url(&fixture),
        "--thread",
        "b-2",
        "-o",
        file.to_str().unwrap(),
    ])
    .expect(0);
    assert!(out.stdout.is_empty());
    let got: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let full: serde_json::Value = serde_json::from_slice(&companion(&fixture, "expected.json")).unwrap();
    let want_thread = full["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == "b-2")
        .unwrap();
    assert_eq!(got["threads"], serde_json::json!([want_thread]));
    assert_eq!(
        got["summary"],
        serde_json::json!({"checkpoints": 4, "namespaces": 1, "pending_writes": 7, "threads": 1})
    );
}

/// `threads`, `history`, `show`, `diff`, `export` and `stats` open a SQLite
/// file read-only: its bytes stay the same and no journal files appear
/// (opening it as a saver would switch it to WAL and add indexes).
fn read_commands_leave_the_file_untouched() {
    let testdata = testdata_dir();
    let (top, first) = temp_copy(&testdata.join("fixtures").join("f_messages.sqlite"));
    // a path SQLite's URI syntax must escape
    let dir = top.path().join("a b?#%");
    std::fs::create_dir(&dir).unwrap();
    let copy = dir.join("f_messages.sqlite");
    std::fs::rename(&first, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let url = sqlite_url(&copy);
    let history = run(&["--json", "history", &url, "f-1"]).expect(0).json();
    let ids: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_str().unwrap())
        .collect();
    run(&["threads", &url]).expect(0);
    run(&["show", &url, "f-1"]).expect(0);
    run(&["diff", &url, "f-1", ids[1], ids[0]]).expect(0);
    run(&["export", "--normalize", &url]).expect(0);
    run(&["stats", &url]).expect(0);
    assert!(std::fs::read(&copy).unwrap() == before, "the file changed");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["f_messages.sqlite".to_owned()]);
}

/// Where two byte strings first differ, with some context.
fn first_difference(got: &[u8], want: &[u8]) -> String {
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let from = at.saturating_sub(200);
    format!(
        "first difference at byte {at} (lengths {} and {}):\n--- got\n{}\n--- want\n{}",
        got.len(),
        want.len(),
        String::from_utf8_lossy(&got[from..(at + 200).min(got.len())]),
        String::from_utf8_lossy(&want[from..(at + 200).min(want.len())])
    )
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "export::export_normalize_equals_python_for_every_fixture",
            &[],
            export_normalize_equals_python_for_every_fixture,
        ),
        harness::test(
            "export::export_equals_python_for_every_fixture",
            &[],
            export_equals_python_for_every_fixture,
        ),
        harness::test(
            "export::export_of_one_thread_to_a_file",
            &[],
            export_of_one_thread_to_a_file,
        ),
        harness::test(
            "export::read_commands_leave_the_file_untouched",
            &[],
            read_commands_leave_the_file_untouched,
        ),
    ]
}
