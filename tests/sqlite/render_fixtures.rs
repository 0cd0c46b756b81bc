//! `serde::render` prints exactly what `read_fixtures.py` prints: the dump of
//! every `testdata/fixtures/*.sqlite`, formatted with
//! `python_json_indented`, is its `*.expected.json` byte for byte, and after
//! `normalize` its `*.normalized.json`.

use crate::sqlite_support;

use checkpointer::serde::render::{self, DumpOptions};
use checkpointer::sqlite::SqliteSaver;

fn text(v: &serde_json::Value) -> Vec<u8> {
    (render::python_json_indented(v, 1) + "\n").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dumps_print_as_python_prints_them() {
    let testdata = sqlite_support::testdata_dir();
    for (name, path) in sqlite_support::fixtures(&testdata) {
        let (_dir, copy) = sqlite_support::temp_copy(&path);
        let saver = SqliteSaver::open(&copy).await.unwrap();
        let dump = render::dump(&saver, &name).await.unwrap();
        let stem = name.trim_end_matches(".sqlite");
        let expected = std::fs::read(path.with_file_name(format!("{stem}.expected.json"))).unwrap();
        assert!(text(&dump) == expected, "{name}: dump");
        let normalized = std::fs::read(path.with_file_name(format!("{stem}.normalized.json"))).unwrap();
        assert!(
            text(&render::normalize(&dump).unwrap()) == normalized,
            "{name}: normalized dump"
        );
        saver.close().await.unwrap();
    }
}

/// A dump of some threads is the full dump with only those threads, and
/// the callback hears of every checkpoint read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_of_some_threads() {
    let testdata = sqlite_support::testdata_dir();
    let path = testdata.join("fixtures").join("b_reducer.sqlite");
    let (_dir, copy) = sqlite_support::temp_copy(&path);
    let saver = SqliteSaver::open(&copy).await.unwrap();
    let full = render::dump(&saver, "b").await.unwrap();
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let tick = || {
        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let threads = ["b-2".to_owned()];
    let part = render::dump_with(
        &saver,
        "b",
        DumpOptions {
            threads: Some(&threads),
            on_checkpoint: Some(&tick),
        },
    )
    .await
    .unwrap();
    assert_eq!(part["threads"], serde_json::json!([full["threads"][1]]));
    assert_eq!(part["summary"]["checkpoints"], 4);
    assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 4);
    let none = render::dump_with(
        &saver,
        "b",
        DumpOptions {
            threads: Some(&[]),
            on_checkpoint: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(none["summary"]["checkpoints"], 0);
    saver.close().await.unwrap();
}
