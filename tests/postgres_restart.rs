//! The server restarted under load: calls in flight fail
//! with clear errors, calls succeed again once it is back, and nothing that
//! was acknowledged is missing.
//!
//! Restarting disturbs everything else using the server, so this runs only
//! with `CHECKPOINTER_PG_RESTART_TEST=1` (`.ci/run` sets it). The cluster is
//! `CHECKPOINTER_PG_CLUSTER` (default `15 main`), restarted with
//! `pg_ctlcluster --skip-systemctl-redirect <version> <name> restart`; the test
//! leaves it running whatever happens.
//!
//! The harness is `tests/support/harness.rs` (`harness = false`): without
//! `CHECKPOINTER_PG_RESTART_TEST=1` the tests are reported ignored, in CI too
//! (`.ci/run` sets it); without a reachable server they are ignored outside
//! CI and fail in CI (`CI=true`).

#[path = "support/harness.rs"]
mod harness;
#[path = "support/postgres.rs"]
mod postgres_support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use checkpointer::postgres::PostgresSaver;
use checkpointer::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error, Value};
use postgres_support::{block_on_thread, create_database, drop_database, skip, url_of};

fn cluster() -> (String, String) {
    let spec = std::env::var("CHECKPOINTER_PG_CLUSTER").unwrap_or_else(|_| "15 main".to_owned());
    let mut parts = spec.split_whitespace();
    (
        parts.next().unwrap_or("15").to_owned(),
        parts.next().unwrap_or("main").to_owned(),
    )
}

fn pg_ctlcluster(action: &str) -> std::io::Result<std::process::Output> {
    let (version, name) = cluster();
    Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, &name, action])
        .output()
}

/// Starts the cluster again if it is down when the test ends, however it ends.
struct KeepServerRunning;

impl Drop for KeepServerRunning {
    fn drop(&mut self) {
        let running = pg_ctlcluster("status").is_ok_and(|o| o.status.success());
        if !running {
            let _ = pg_ctlcluster("start");
        }
    }
}

#[derive(Default)]
struct Log {
    /// (config returned by put, value stored) of every acknowledged put.
    puts: Vec<(CheckpointConfig, Value)>,
    /// (checkpoint, task id, value) of every acknowledged put_writes.
    writes: Vec<(CheckpointConfig, String, Value)>,
    /// Every error, with when it happened.
    errors: Vec<(Instant, String)>,
    /// When each writer last succeeded.
    last_ok: Vec<Option<Instant>>,
}

async fn write_until(saver: PostgresSaver, who: usize, pause: Duration, stop: Arc<AtomicBool>, log: Arc<Mutex<Log>>) {
    let thread = format!("restart-{who}");
    let mut parent = CheckpointConfig::new(&thread);
    let mut n = 0i64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let value = Value::from(vec![who as i64, n]);
        let mut cp = Checkpoint::new(n);
        cp.channel_values.insert("v".into(), value.clone());
        cp.channel_versions
            .insert("v".into(), saver.get_next_version(None).unwrap());
        let md = CheckpointMetadata::new(CheckpointSource::Loop, n);
        match saver.put(&parent, &cp, &md, &cp.channel_versions).await {
            Ok(stored) => {
                let task = format!("task-{n}");
                let w = saver
                    .put_writes(&stored, &[("w".into(), value.clone())], &task, "")
                    .await;
                let mut log = log.lock().unwrap();
                log.puts.push((stored.clone(), value.clone()));
                log.last_ok[who] = Some(Instant::now());
                match w {
                    Ok(()) => log.writes.push((stored.clone(), task, value)),
                    Err(e) => log.errors.push((Instant::now(), describe(&e))),
                }
                parent = stored;
            }
            Err(e) => log.lock().unwrap().errors.push((Instant::now(), describe(&e))),
        }
        // Reads too: repeated once on a fresh connection after a failure.
        if let Err(e) = saver.get_tuple(&parent).await {
            log.lock().unwrap().errors.push((Instant::now(), describe(&e)));
        }
        tokio::time::sleep(pause).await;
    }
}

fn describe(e: &Error) -> String {
    assert!(matches!(e, Error::Storage { .. }), "not a storage error: {e:?}");
    let text = e.to_string();
    assert!(text.len() > 20, "unclear error: {text}");
    format!("retryable={} {text}", e.is_retryable())
}

/// A PostgreSQL server at `CHECKPOINTER_PG_URL`.
static POSTGRES: harness::Need = harness::Need::new("PostgreSQL", postgres_support::reachable);

/// `CHECKPOINTER_PG_RESTART_TEST=1`: this run may restart the server.
static RESTART: harness::Need = harness::Need::opt_in("CHECKPOINTER_PG_RESTART_TEST=1", || {
    match std::env::var("CHECKPOINTER_PG_RESTART_TEST").as_deref() {
        Ok("1") => Ok(()),
        _ => Err("set CHECKPOINTER_PG_RESTART_TEST=1 to restart the PostgreSQL server under load".to_owned()),
    }
});

fn main() {
    postgres_support::under_harness();
    harness::main(vec![
        harness::test(
            "server_restart_mid_run_loses_nothing_acknowledged",
            &[&RESTART, &POSTGRES],
            server_restart_mid_run_loses_nothing_acknowledged,
        ),
        harness::test(
            "server_restart_mid_group_loses_nothing_acknowledged",
            &[&RESTART, &POSTGRES],
            server_restart_mid_group_loses_nothing_acknowledged,
        ),
        harness::no_libtest_attributes("postgres_restart.rs"),
    ])
}

fn server_restart_mid_run_loses_nothing_acknowledged() {
    restart_under_load(6, Duration::from_millis(5), false);
}

/// As above with 16 writers that never pause, so that their puts and writes
/// go in shared transactions (group commit) when the server goes away.
fn server_restart_mid_group_loses_nothing_acknowledged() {
    restart_under_load(16, Duration::ZERO, true);
}

fn restart_under_load(writers: usize, pause: Duration, grouped: bool) {
    if std::env::var("CHECKPOINTER_PG_RESTART_TEST").as_deref() != Ok("1") {
        panic!("set CHECKPOINTER_PG_RESTART_TEST=1 to restart the PostgreSQL server under load");
    }
    // The restarts of two tests must not overlap.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _guard = KeepServerRunning;
    let db = match block_on_thread(create_database()) {
        Ok(db) => db,
        Err(reason) => return skip(&reason),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let saver = runtime
        .block_on(
            PostgresSaver::builder()
                .url(url_of(&db))
                .max_connections(writers + 2)
                .connect_timeout(Duration::from_secs(2))
                .wait_timeout(Some(Duration::from_secs(5)))
                .open(),
        )
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(Log {
        last_ok: vec![None; writers],
        ..Log::default()
    }));
    let tasks: Vec<_> = (0..writers)
        .map(|who| runtime.spawn(write_until(saver.clone(), who, pause, stop.clone(), log.clone())))
        .collect();

    std::thread::sleep(Duration::from_secs(1));
    let restart = pg_ctlcluster("restart").expect("cannot run pg_ctlcluster");
    assert!(
        restart.status.success(),
        "restart failed: {}",
        String::from_utf8_lossy(&restart.stderr)
    );
    let back = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    runtime.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });

    let log = log.lock().unwrap();
    let mut kinds: Vec<&str> = log.errors.iter().map(|(_, e)| e.as_str()).collect();
    kinds.sort();
    kinds.dedup();
    println!(
        "{} puts and {} writes acknowledged, {} errors; distinct errors:\n  {}",
        log.puts.len(),
        log.writes.len(),
        log.errors.len(),
        kinds.join("\n  ")
    );
    assert!(
        !log.errors.is_empty(),
        "the restart caused no error: the test did not test anything"
    );
    for (who, ok) in log.last_ok.iter().enumerate() {
        assert!(
            ok.is_some_and(|t| t > back),
            "writer {who} never succeeded after the restart"
        );
    }
    let errors_after = log
        .errors
        .iter()
        .filter(|(t, _)| *t > back + Duration::from_secs(1))
        .count();
    assert_eq!(errors_after, 0, "calls still failed a second after the server was back");

    runtime.block_on(async {
        for (config, value) in &log.puts {
            let t = saver.get_tuple(config).await.unwrap();
            let t = t.unwrap_or_else(|| panic!("acknowledged checkpoint {config:?} is missing"));
            assert_eq!(&t.checkpoint.channel_values["v"], value);
        }
        for (config, task, value) in &log.writes {
            let t = saver.get_tuple(config).await.unwrap().unwrap();
            let found: Vec<_> = t.pending_writes.iter().filter(|w| &w.task_id == task).collect();
            assert_eq!(found.len(), 1, "write {task} of {config:?}");
            assert_eq!(&found[0].value, value);
        }
    });
    if grouped {
        let (rows, txs) = block_on_thread({
            let db = db.clone();
            async move {
                let client = postgres_support::connect(&db).await.unwrap();
                let row = client
                    .query_one("SELECT count(*), count(DISTINCT xmin::text) FROM checkpoints", &[])
                    .await
                    .unwrap();
                (row.get::<_, i64>(0), row.get::<_, i64>(1))
            }
        });
        println!("{rows} checkpoints in {txs} transactions");
        assert!(
            txs < rows,
            "no two puts shared a transaction: the test proved nothing for groups"
        );
    }
    drop(saver);
    drop(runtime);
    block_on_thread(async move { drop_database(&db).await });
}
