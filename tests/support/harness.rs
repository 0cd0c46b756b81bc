//! The test harness (libtest-mimic, `harness = false`) of the test binaries
//! whose tests need a service a developer's machine may lack: PostgreSQL, the
//! Python peer venv, a server the tests may restart.
//!
//! libtest cannot ignore a test at run time: a test that finds no server can
//! only return, and is then reported `ok` although it checked nothing. Here
//! each binary lists its tests with what they need ([`Need`]); whether each
//! need is met is decided once, before any test runs, and a test whose needs
//! are not met is
//!
//! * reported `ignored` outside CI, its kind (`[needs PostgreSQL]`) in its
//!   line and the reason printed once at the start;
//! * run as usual in CI (`CI=true`), where the missing service makes it fail
//!   (the support modules panic instead of skipping).
//!
//! Needs that are opt-in ([`Need::opt_in`], e.g. restarting the server) are
//! ignored when not asked for, in CI too: `.ci/run` asks for them.
//!
//! The arguments are libtest's (`--list`, `--ignored`, `--include-ignored`,
//! `--exact`, filters, `--test-threads`, `--format terse`), so `cargo test`
//! and `cargo nextest` run these binaries as any other. Unlike libtest,
//! libtest-mimic does not capture a test's output. With
//! `CHECKPOINTER_TEST_TIMES` set, each test that passes prints its time
//! (`time   12.34 s  module::test`), for finding what makes a binary slow.
#![allow(dead_code)]

use std::future::Future;
use std::sync::OnceLock;

pub use libtest_mimic::Trial;

/// Whether this run is CI (`CI=true`), where a missing service is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Something tests need: checked once (the first time a test lists it),
/// `Err(reason)` when it is missing.
pub struct Need {
    what: &'static str,
    check: fn() -> Result<(), String>,
    opt_in: bool,
    status: OnceLock<Result<(), String>>,
}

impl Need {
    /// A service: missing means ignored outside CI, a failure in CI.
    pub const fn new(what: &'static str, check: fn() -> Result<(), String>) -> Need {
        Need {
            what,
            check,
            opt_in: false,
            status: OnceLock::new(),
        }
    }

    /// Something a run must ask for (an environment variable): ignored
    /// when not asked for, in CI too.
    pub const fn opt_in(what: &'static str, check: fn() -> Result<(), String>) -> Need {
        Need {
            what,
            check,
            opt_in: true,
            status: OnceLock::new(),
        }
    }

    fn status(&self) -> &Result<(), String> {
        self.status.get_or_init(|| {
            let status = (self.check)();
            if let Err(reason) = &status {
                if self.opt_in || !in_ci() {
                    eprintln!("ignored: the tests that need {}: {reason}", self.what);
                } else {
                    eprintln!("CI=true: the tests that need {} run and fail: {reason}", self.what);
                }
            }
            status
        })
    }
}

/// The `CHECKPOINTER_PYTHON` check: set and not empty.
pub fn python_set() -> Result<(), String> {
    match std::env::var("CHECKPOINTER_PYTHON") {
        Ok(p) if !p.is_empty() => Ok(()),
        _ => Err("CHECKPOINTER_PYTHON is not set (CHECKPOINTER_PYTHON=$(scripts/python-venv.sh | tail -n 1))".into()),
    }
}

/// A test named `name` (as libtest names it: `module::function`) that needs
/// `needs`, running `body` (which panics on failure).
pub fn test(name: &str, needs: &[&'static Need], body: impl FnOnce() + Send + 'static) -> Trial {
    let mut ignored = false;
    let mut kinds = Vec::new();
    for need in needs {
        if need.status().is_err() {
            kinds.push(need.what);
            ignored |= need.opt_in || !in_ci();
        }
    }
    let timed = std::env::var_os("CHECKPOINTER_TEST_TIMES")
        .is_some()
        .then(|| name.to_owned());
    let trial = Trial::test(name, move || {
        let start = std::time::Instant::now();
        body();
        if let Some(name) = timed {
            eprintln!("time {:>8.2} s  {name}", start.elapsed().as_secs_f64());
        }
        Ok(())
    });
    if kinds.is_empty() {
        trial
    } else {
        trial
            .with_kind(format!("needs {}", kinds.join(", ")))
            .with_ignored_flag(ignored)
    }
}

/// A `#[tokio::test]`: `body` on a current-thread runtime (`workers == 0`) or
/// a multi-thread one with `workers` worker threads.
pub fn tokio<F, Fut>(name: &str, needs: &[&'static Need], workers: usize, body: F) -> Trial
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    test(name, needs, move || {
        let mut builder = if workers == 0 {
            tokio::runtime::Builder::new_current_thread()
        } else {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(workers);
            b
        };
        builder.enable_all().build().unwrap().block_on(body());
    })
}

/// A `#[should_panic(expected = ...)]` test: passes when `body` panics with a
/// message containing `expected`.
pub fn should_panic(
    name: &str,
    needs: &[&'static Need],
    expected: &'static str,
    body: impl FnOnce() + Send + 'static,
) -> Trial {
    test(name, needs, move || {
        let panic = expecting_panic(body).expect_err("the test did not panic");
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        assert!(
            message.contains(expected),
            "panicked with {message:?}, not a message containing {expected:?}"
        );
    })
}

thread_local! {
    static PANIC_EXPECTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `body`, catching its panic without printing it: a passing run of a
/// `should_panic` test prints no panic message or backtrace, which a reader
/// would take for a failure. Panics on other threads, and on this one
/// outside `body`, print as usual.
fn expecting_panic(body: impl FnOnce()) -> std::thread::Result<()> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let print = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !PANIC_EXPECTED.with(std::cell::Cell::get) {
                print(info);
            }
        }));
    });
    PANIC_EXPECTED.with(|flag| flag.set(true));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    PANIC_EXPECTED.with(|flag| flag.set(false));
    out
}

/// A test that fails if a source of this binary (the `.rs` files at `path`,
/// a file or a folder of the package, relative to its manifest) still has a `#[test]` or
/// `#[tokio::test]` function: without libtest such a test is compiled out
/// and would never run. The tests are listed in each module's `tests()`.
pub fn no_libtest_attributes(path: &'static str) -> Trial {
    test("harness::no_libtest_attributes", &[], move || {
        fn scan(path: &std::path::Path, found: &mut Vec<String>) {
            if path.is_dir() {
                for entry in std::fs::read_dir(path).unwrap() {
                    scan(&entry.unwrap().path(), found);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(path).unwrap();
                for (i, line) in text.lines().enumerate() {
                    let line = line.trim_start();
                    if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
                        found.push(format!("{}:{}", path.display(), i + 1));
                    }
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        assert!(root.exists(), "{} does not exist: nothing to scan", root.display());
        let mut found = Vec::new();
        scan(&root, &mut found);
        assert!(
            found.is_empty(),
            "libtest attributes in a harness = false binary (list the test in tests() instead): {found:?}"
        );
    })
}

/// A test that runs this binary again on the test `exact` (which needs
/// something `env` takes away), with `CI` unset, and checks that the
/// summary counts it ignored: a test that skips must never be reported
/// passed.
pub fn missing_need_is_reported_ignored(
    exact: &'static str,
    env: &'static [(&'static str, Option<&'static str>)],
) -> Trial {
    test("harness::missing_need_is_reported_ignored", &[], move || {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", exact, "--test-threads", "1"]).env_remove("CI");
        for (key, value) in env {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(
            stdout.contains("test result: ok. 0 passed; 0 failed; 1 ignored;"),
            "{exact} without what it needs is not reported ignored:\n{stdout}"
        );
    })
}

/// Runs the tests with the command line's arguments and exits.
pub fn main(trials: Vec<Trial>) -> ! {
    let args = libtest_mimic::Arguments::from_args();
    libtest_mimic::run(&args, trials).exit()
}
