//! Shared by the CLI tests: running the binary, the testdata fixtures, the
//! Python peer and PostgreSQL test databases.
//!
//! The harness (`main.rs`) checks PostgreSQL and the Python peer before the
//! tests run and ignores, outside CI, the tests that need what is missing; a
//! test that finds a prerequisite missing anyway (in CI, `CI=true`) fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use checkpointer::postgres::tokio_postgres;

/// What a run of the binary did.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Out {
    pub fn text(&self) -> String {
        String::from_utf8(self.stdout.clone()).unwrap()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.text(), self.stderr))
    }

    /// Panics unless the exit code is `code`.
    #[track_caller]
    pub fn expect(self, code: i32) -> Out {
        assert_eq!(
            self.code,
            code,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&self.stdout),
            self.stderr
        );
        self
    }
}

/// Runs `checkpointer ARGS` with a clean environment for colours.
pub fn run(args: &[&str]) -> Out {
    run_env(args, &[])
}

/// Runs `checkpointer ARGS` with extra environment variables.
pub fn run_env(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_checkpointer"));
    cmd.args(args).env_remove("NO_COLOR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the checkpointer binary");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Fails the test: a prerequisite the harness checked is missing.
pub fn skip(reason: &str) {
    panic!("{reason} (CI=true, or it was there when the tests started: this is a failure, not a skip)");
}

/// The repository's `testdata/` (holding `fixtures/` and `peer/`: data
/// Python LangGraph wrote, see `testdata/README.md`).
pub fn testdata_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

/// The fixture databases with their scenario names (`a_one_node`, …), sorted.
pub fn fixtures(testdata: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(testdata.join("fixtures"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.strip_suffix(".sqlite")?.to_owned();
            Some((name, path))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixtures in {}", testdata.display());
    out
}

/// `<scenario>.<suffix>` next to a fixture, read.
pub fn companion(fixture: &Path, suffix: &str) -> Vec<u8> {
    let name = fixture.file_stem().unwrap().to_str().unwrap();
    std::fs::read(fixture.with_file_name(format!("{name}.{suffix}"))).unwrap()
}

/// `sqlite://` URL of a path.
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// A writable copy of `file` in a fresh temporary directory.
pub fn temp_copy(file: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join(file.file_name().unwrap());
    std::fs::copy(file, &copy).unwrap();
    let mut perms = std::fs::metadata(&copy).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&copy, perms).unwrap();
    (dir, copy)
}

/// The Python of the peer venv (`CHECKPOINTER_PYTHON`).
pub fn require_python() -> Option<PathBuf> {
    match std::env::var("CHECKPOINTER_PYTHON") {
        Ok(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            skip("CHECKPOINTER_PYTHON is not set (CHECKPOINTER_PYTHON=$(scripts/python-venv.sh))");
            None
        }
    }
}

/// Runs `read_fixtures.py ARGS`; returns (exit code, stdout, stderr).
pub fn read_fixtures(python: &Path, testdata: &Path, args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(python)
        .arg(testdata.join("peer").join("read_fixtures.py"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The PostgreSQL server URL without a database (`CHECKPOINTER_PG_URL`).
pub fn pg_server() -> String {
    std::env::var("CHECKPOINTER_PG_URL")
        .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432".to_owned())
        .trim_end_matches('/')
        .to_owned()
}

pub fn block_on<T: Send + 'static>(f: impl std::future::Future<Output = T> + Send + 'static) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    })
    .join()
    .unwrap()
}

async fn admin_sql(sql: String) -> Result<(), String> {
    let url = format!("{}/postgres", pg_server());
    let connecting = tokio_postgres::connect(&url, tokio_postgres::NoTls);
    let (client, connection) = match tokio::time::timeout(Duration::from_secs(5), connecting).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(format!("no PostgreSQL at {url}: {e}")),
        Err(_) => return Err(format!("no PostgreSQL at {url}: connect timed out")),
    };
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client.batch_execute(&sql).await.map_err(|e| e.to_string())
}

/// Whether a server answers at [`pg_server`] (the harness's check, once).
pub fn pg_reachable() -> Result<(), String> {
    block_on(admin_sql("SELECT 1".to_owned()))
}

/// A database of its own, dropped at the end of the test.
pub struct PgDb {
    pub name: String,
}

impl PgDb {
    pub fn url(&self) -> String {
        format!("{}/{}", pg_server(), self.name)
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        let _ = block_on(admin_sql(sql));
    }
}

/// A fresh empty database (`ckpt_test_<pid>_<n>`, the names CI drops), or
/// `None` after printing why there is none.
pub fn require_postgres() -> Option<PgDb> {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        "ckpt_test_{}_{:08x}{}",
        std::process::id(),
        nanos,
        N.fetch_add(1, Ordering::Relaxed)
    );
    match block_on(admin_sql(format!("CREATE DATABASE \"{name}\""))) {
        Ok(()) => Some(PgDb { name }),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

/// A URL where no PostgreSQL listens.
pub const UNREACHABLE_PG: &str = "postgresql://postgres@127.0.0.1:1/nothing?connect_timeout=3";

/// Runs `work` with a client of the PostgreSQL database at `url`, on a
/// thread and runtime of its own (the tests are synchronous).
pub fn with_pg_client<T, F, Fut>(url: &str, work: F) -> T
where
    T: Send + 'static,
    F: FnOnce(tokio_postgres::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + Send,
{
    let url = url.to_owned();
    block_on(async move {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        work(client).await
    })
}
