//! Shared by the test binaries and benches that use PostgreSQL (a module
//! `postgres_support` of each): a fresh database per test process on the
//! server at `CHECKPOINTER_PG_URL` (default
//! `postgresql://postgres@127.0.0.1:5432`, no database part).
//!
//! Without a reachable server the test binaries' harness
//! (`tests/support/harness.rs`) reports the tests ignored, with the reason,
//! except in CI (`CI=true`), where they run and fail. Benches skip with a
//! printed reason. Tests share the database named by
//! `CHECKPOINTER_PG_DATABASE` (`.ci/run` creates a fresh one per run), or else
//! one created per test process; tests that need an empty database create
//! their own. Databases made here are named `ckpt_test_<pid>_<random>`; each
//! process drops those of processes that are gone, and `.ci/run` drops them
//! all at the end.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use checkpointer::postgres::{tokio_postgres, PostgresSaver, StatementMode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Whether we run in CI, where a missing server is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The server URL without a database.
pub fn server_url() -> String {
    std::env::var("CHECKPOINTER_PG_URL")
        .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432".to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// The URL of database `name` on the test server.
pub fn url_of(name: &str) -> String {
    format!("{}/{name}", server_url())
}

static UNDER_HARNESS: AtomicBool = AtomicBool::new(false);

/// Called first by the `main` of a test binary that lists its tests with
/// their needs (`tests/support/harness.rs`): from then on [`skip`] fails.
pub fn under_harness() {
    UNDER_HARNESS.store(true, Ordering::SeqCst);
}

/// Whether a server answers at [`server_url`] (the harness's check, once).
pub fn reachable() -> Result<(), String> {
    block_on_thread(async { connect("postgres").await.map(drop) })
}

/// Fails the test when there is no server: in CI (`CI=true`), and in a test
/// binary whose harness checked the server before any test ran (a test that
/// needs one is ignored when there is none). A bench prints why it skips.
pub fn skip(reason: &str) {
    if in_ci() {
        panic!("{reason} (CI=true: this is a failure, not a skip)");
    }
    if UNDER_HARNESS.load(Ordering::SeqCst) {
        panic!("{reason} (the server answered when the tests started)");
    }
    println!("skipped: {reason}");
}

/// Runs `f` on a fresh current-thread runtime in its own OS thread (so it
/// works from inside another runtime too).
pub fn block_on_thread<T: Send + 'static>(f: impl std::future::Future<Output = T> + Send + 'static) -> T {
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

/// Connects to database `db` of the test server with a plain client.
pub async fn connect(db: &str) -> Result<tokio_postgres::Client, String> {
    let url = url_of(db);
    let connecting = tokio_postgres::connect(&url, tokio_postgres::NoTls);
    match tokio::time::timeout(Duration::from_secs(5), connecting).await {
        Ok(Ok((client, connection))) => {
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok(client)
        }
        Ok(Err(e)) => Err(format!("no PostgreSQL at {url}: {e}")),
        Err(_) => Err(format!("no PostgreSQL at {url}: connect timed out")),
    }
}

fn process_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Creates a new empty database and returns its name, or the reason there is
/// no server.
pub async fn create_database() -> Result<String, String> {
    let admin = connect("postgres").await?;
    let stale = admin
        .query(
            "SELECT datname FROM pg_database WHERE datname LIKE 'ckpt\\_test\\_%'",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?;
    for row in stale {
        let name: String = row.get(0);
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !process_alive(p)) {
            let _ = admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\""))
                .await;
        }
    }
    let name = format!("ckpt_test_{}_{:08x}", std::process::id(), rand::random::<u32>());
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .map_err(|e| format!("cannot create a test database: {e}"))?;
    Ok(name)
}

/// Drops a database made by [`create_database`].
pub async fn drop_database(name: &str) {
    if let Ok(admin) = connect("postgres").await {
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .await;
    }
}

/// A database made by [`create_database`], dropped when this goes out of
/// scope.
pub struct TestDatabase(pub String);

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let name = self.0.clone();
        block_on_thread(async move { drop_database(&name).await });
    }
}

/// A fresh database for one test; `None` (after printing why, or failing in
/// CI) without a server.
pub async fn fresh_database() -> Option<TestDatabase> {
    match create_database().await {
        Ok(name) => Some(TestDatabase(name)),
        Err(reason) => {
            skip(&reason);
            None
        }
    }
}

/// This process's shared test database, set up once with the saver's
/// migrations; `None` (after printing why) when there is no server outside CI.
pub fn shared_database() -> Option<String> {
    static DB: OnceLock<Result<String, String>> = OnceLock::new();
    let db = DB.get_or_init(|| {
        block_on_thread(async {
            let name = match std::env::var("CHECKPOINTER_PG_DATABASE") {
                Ok(name) if !name.is_empty() => name,
                _ => create_database().await?,
            };
            let saver = PostgresSaver::builder()
                .url(url_of(&name))
                .max_connections(2)
                .build()
                .map_err(|e| e.to_string())?;
            saver.setup().await.map_err(|e| format!("setup failed: {e}"))?;
            Ok(name)
        })
    });
    match db {
        Ok(name) => Some(name.clone()),
        Err(reason) => {
            skip(reason);
            None
        }
    }
}

/// A saver on the shared test database.
pub fn saver_on(db: &str, mode: StatementMode, connections: usize) -> PostgresSaver {
    PostgresSaver::builder()
        .url(url_of(db))
        .statement_mode(mode)
        .max_connections(connections)
        .build()
        .unwrap()
}

/// A saver on the shared test database, for the conformance factory.
#[cfg(feature = "conformance")]
pub async fn conformance_saver(
    mode: StatementMode,
) -> Result<std::sync::Arc<dyn checkpointer::CheckpointSaver>, checkpointer::conformance::Skip> {
    // `shared_database` panics in CI when there is no server; outside CI it
    // prints the reason and the check is reported as skipped.
    let Some(db) = shared_database() else {
        return Err(checkpointer::conformance::Skip(
            "no PostgreSQL server reachable (see the reason printed above)".to_owned(),
        ));
    };
    Ok(std::sync::Arc::new(saver_on(&db, mode, 4)))
}

/// The migration versions recorded in `checkpoint_migrations`.
pub async fn migrations(db: &str) -> Vec<i32> {
    let client = connect(db).await.unwrap();
    client
        .query("SELECT v FROM checkpoint_migrations ORDER BY v", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Every column, index and constraint definition of the public schema.
pub async fn schema_of(db: &str) -> Vec<String> {
    let client = connect(db).await.unwrap();
    let mut out: Vec<String> = client
        .query(
            "SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || \
             coalesce(column_default, '-') || ' #' || ordinal_position \
             FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for sql in [
        "SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname",
        "SELECT conname || ': ' || pg_get_constraintdef(oid) FROM pg_constraint \
         WHERE connamespace = 'public'::regnamespace ORDER BY conname",
    ] {
        out.extend(
            client
                .query(sql, &[])
                .await
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0)),
        );
    }
    out
}

/// A TCP proxy to the test server that forwards, or silently drops
/// everything while `silent` is set.
pub struct Proxy {
    pub port: u16,
    silent: Arc<AtomicBool>,
}

impl Proxy {
    pub async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent = Arc::new(AtomicBool::new(false));
        let flag = silent.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pipe(cr, sw, flag.clone()));
                tokio::spawn(pipe(sr, cw, flag.clone()));
            }
        });
        Proxy { port, silent }
    }

    pub fn partition(&self, silent: bool) {
        self.silent.store(silent, Ordering::SeqCst);
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    silent: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if silent.load(Ordering::SeqCst) {
            continue; // lost in the partition
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The test server's `host:port` and user.
pub fn upstream() -> (String, String) {
    let config: tokio_postgres::Config = server_url().parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres").to_owned();
    (format!("{host}:{port}"), user)
}
