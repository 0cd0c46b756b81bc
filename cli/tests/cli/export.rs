//! `export` prints what `read_fixtures.py` prints for the same store, byte
//! for byte; read-only commands never touch the file they read.

use crate::harness;
use crate::support::{companion, fixtures, run, sqlite_url, temp_copy, testdata_dir, Out};

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

/// `--no-source` leaves out the line naming the store: a fixture and its copy
/// in another file export byte-equal, and without the flag they differ only
/// there.
fn export_without_source_compares_equal_stores() {
    let testdata = testdata_dir();
    let fixture = testdata.join("fixtures").join("b_reducer.sqlite");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.sqlite");
    run(&["copy", &sqlite_url(&fixture), &sqlite_url(&copy)]).expect(0);
    let original = run(&["export", "--no-source", &sqlite_url(&fixture)]).expect(0);
    let copied = run(&["export", "--no-source", &sqlite_url(&copy)]).expect(0);
    assert!(
        original.stdout == copied.stdout,
        "equal stores export differently without their source line\n{}",
        first_difference(&copied.stdout, &original.stdout)
    );
    let dump = original.json();
    assert!(dump.get("source").is_none(), "--no-source kept the source line");
    assert_eq!(dump["summary"]["threads"], 2, "{dump}");
    let with_source = run(&["export", &sqlite_url(&copy)]).expect(0).json();
    assert_eq!(with_source["source"], "copy.sqlite");
    let mut without = with_source.clone();
    without.as_object_mut().unwrap().remove("source");
    assert_eq!(without, dump, "--no-source changed more than the source line");
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

/// The read commands (`threads`, `history`, `show`, `diff`, `export`,
/// `stats`, and `copy` from it) read a WAL-mode file Python wrote, 0444 in a
/// 0555 directory, as a user who may write neither (`nobody` through
/// `setpriv` when the tests run as root, who may write anything): SQLite
/// cannot create the `-shm` there, and the file is read as it is, unchanged,
/// with no file added.
fn read_commands_work_on_a_read_only_file_in_a_read_only_directory() {
    use std::os::unix::fs::PermissionsExt;
    let testdata = testdata_dir();
    let (dir, copy) = temp_copy(&testdata.join("fixtures").join("f_messages.sqlite"));
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    let set_mode =
        |p: &std::path::Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    set_mode(&copy, 0o444);
    set_mode(dir.path(), 0o555);
    let before = std::fs::read(&copy).unwrap();
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let run_ro = |args: &[&str]| -> Out {
        let mut cmd = if root {
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_checkpointer"));
            c
        } else {
            std::process::Command::new(env!("CARGO_BIN_EXE_checkpointer"))
        };
        let out = cmd
            .args(args)
            .env_remove("NO_COLOR")
            .output()
            .expect("run the binary (setpriv from util-linux as root)");
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    let url = sqlite_url(&copy);
    let history = run_ro(&["--json", "history", &url, "f-1"]).expect(0).json();
    let ids: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_str().unwrap())
        .collect();
    assert!(ids.len() >= 2, "{history}");
    let threads = run_ro(&["--json", "threads", &url]).expect(0).json();
    assert!(threads.to_string().contains("\"f-1\""), "{threads}");
    run_ro(&["show", &url, "f-1"]).expect(0);
    run_ro(&["diff", &url, "f-1", ids[1], ids[0]]).expect(0);
    let export = run_ro(&["export", "--normalize", &url]).expect(0);
    assert!(export.stdout == companion(&testdata.join("fixtures").join("f_messages.sqlite"), "normalized.json"));
    run_ro(&["stats", &url]).expect(0);
    run_ro(&["copy", &url, "memory:"]).expect(0);
    // a write command is refused, and changes nothing either
    let refused = run_ro(&["delete-thread", &url, "f-1"]);
    assert_ne!(refused.code, 0, "{refused:?}");
    set_mode(dir.path(), 0o755);
    assert!(std::fs::read(&copy).unwrap() == before, "the file changed");
    let names: Vec<String> = std::fs::read_dir(dir.path())
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
            "export::export_without_source_compares_equal_stores",
            &[],
            export_without_source_compares_equal_stores,
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
        harness::test(
            "export::read_commands_work_on_a_read_only_file_in_a_read_only_directory",
            &[],
            read_commands_work_on_a_read_only_file_in_a_read_only_directory,
        ),
    ]
}
