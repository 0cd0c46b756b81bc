//! `check` on PostgreSQL and Redis stores: every fixture copied into them
//! passes; the `b_reducer` fixture cut short (its oldest checkpoints gone, a
//! checkpoint's writes gone) is named violation by violation, exit 6, and
//! `threads` and `export` flag the same rows there.

use crate::hardening::{cut_short, fixture};
use crate::harness;
use crate::redis_support::{block_on_thread, cleanup, fresh_prefix};
use crate::support::{fixtures, require_postgres, run, sqlite_url, testdata_dir};

/// Copies every fixture into `url`; `check` finds nothing.
fn fixtures_pass(url: &str) {
    let testdata = testdata_dir();
    for (name, path) in fixtures(&testdata) {
        run(&["copy", &sqlite_url(&path), url]).expect(0);
        let out = run(&["check", url]).expect(0);
        assert!(out.stderr.contains(": 0 violation(s)"), "{name}: {}", out.stderr);
    }
    let json = run(&["--json", "check", url]).expect(0).json();
    assert_eq!(json["threads"], 5, "{json}");
    assert!(json["checkpoints"].as_u64().unwrap() > 20, "{json}");
    assert_eq!(json["violations"], serde_json::json!([]));
}

/// Copies the cut-short `b_reducer` into `url` (the copy leaves its orphaned
/// writes behind); `check`, `threads` and `export` name the missing parent
/// and the missing writes.
fn cut_short_is_named(url: &str) {
    let testdata = testdata_dir();
    let (_dir, db) = fixture(&testdata, "b_reducer");
    let (b1, b2) = cut_short(&db);
    run(&["copy", &sqlite_url(&db), url]);
    let parent = format!(
        "thread \"b-1\", checkpoint {} [missing-parent]: its parent checkpoint {} is not stored",
        b1[2], b1[1]
    );
    let writes = format!(
        "thread \"b-2\", checkpoint {} [missing-writes]: its pending writes are missing",
        b2[1]
    );
    let out = run(&["check", url]).expect(6);
    let text = out.text();
    for want in [&parent, &writes] {
        assert!(text.contains(want.as_str()), "{want}\nnot in {text}");
    }
    let threads = run(&["threads", url]).expect(6);
    let export = run(&["export", url]).expect(6);
    for want in [&parent, &writes] {
        assert!(
            threads.stderr.contains(want.as_str()),
            "{want}\nnot in {}",
            threads.stderr
        );
        assert!(
            export.stderr.contains(want.as_str()),
            "{want}\nnot in {}",
            export.stderr
        );
    }
}

fn check_on_postgres() {
    let Some(good) = require_postgres() else { return };
    fixtures_pass(&good.url());
    let Some(bad) = require_postgres() else { return };
    cut_short_is_named(&bad.url());
}

fn check_on_redis() {
    let prefixes = [fresh_prefix(), fresh_prefix()];
    let url = |p: &str| format!("{}?prefix={p}", crate::redis_support::url());
    fixtures_pass(&url(&prefixes[0]));
    cut_short_is_named(&url(&prefixes[1]));
    for p in prefixes {
        block_on_thread(async move { cleanup(&p).await });
    }
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "check_stores::check_on_postgres",
            &[&crate::POSTGRES],
            check_on_postgres,
        ),
        harness::test("check_stores::check_on_redis", &[&crate::REDIS], check_on_redis),
    ]
}
