//! `copy` killed with SIGKILL at ten random moments per test (SQLite →
//! SQLite, SQLite → PostgreSQL, SQLite → Redis, each with and without
//! `--overwrite`): every thread of the target is absent or identical to the
//! source's, `export` finds the target consistent, and `copy --resume`
//! finishes the job.

use crate::harness;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis_support::{block_on_thread, cleanup, fresh_prefix, saver_on, url as redis_url};
use crate::support::{require_postgres, run, sqlite_url, testdata_dir, with_pg_client};

type Row = Vec<rusqlite::types::Value>;

const CHECKPOINTS: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, \
                           metadata FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id";
const WRITES: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value \
                      FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx";

/// Rows by thread (column 0).
fn by_thread(db: &Path, sql: &str) -> BTreeMap<String, Vec<Row>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    let mut out: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    let rows = stmt
        .query_map([], |r| {
            (0..n)
                .map(|i| r.get::<_, rusqlite::types::Value>(i))
                .collect::<rusqlite::Result<Row>>()
        })
        .unwrap();
    for row in rows {
        let row = row.unwrap();
        let rusqlite::types::Value::Text(thread) = &row[0] else {
            panic!("thread id is not text")
        };
        out.entry(thread.clone()).or_default().push(row);
    }
    out
}

/// How many extra copies of b_reducer's two threads [`big_source`] makes:
/// `CHECKPOINTER_CLI_CRASH_COPIES`, 50 by default (102 threads, so 102
/// transactions a kill can land between, each round's copy, export and
/// resume a fraction of a second). 300 gives the 602 threads earlier runs
/// used.
fn copies() -> usize {
    std::env::var("CHECKPOINTER_CLI_CRASH_COPIES")
        .ok()
        .map(|v| v.parse().expect("CHECKPOINTER_CLI_CRASH_COPIES: a number"))
        .unwrap_or(50)
}

/// b_reducer's two threads, `1 +` [`copies`] times each under other names
/// (6 checkpoints and about 10.5 writes per copy of the pair).
fn big_source(dir: &Path, testdata: &Path) -> PathBuf {
    let path = dir.join("source.sqlite");
    std::fs::copy(testdata.join("fixtures").join("b_reducer.sqlite"), &path).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let copies = copies();
    conn.execute_batch(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {copies}) \
         INSERT INTO checkpoints SELECT thread_id || '-' || printf('%03d', i), checkpoint_ns, checkpoint_id, \
         parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints, n; \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {copies}) \
         INSERT INTO writes SELECT thread_id || '-' || printf('%03d', i), checkpoint_ns, checkpoint_id, task_id, \
         task_path, idx, channel, type, value FROM writes, n;",
    ))
    .unwrap();
    path
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_checkpointer"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until `ready()` or the child ends; SIGKILLs it if it still runs.
/// Returns whether it was killed (false: it had finished).
fn kill_when(child: &mut Child, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if ready() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    true
}

/// The number of checkpoints in a SQLite file another process is writing
/// (0 until its tables exist).
fn sqlite_count(db: &Path) -> usize {
    let Ok(conn) = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return 0;
    };
    let _ = conn.busy_timeout(Duration::from_millis(50));
    conn.query_row("SELECT count(*) FROM checkpoints", [], |r| r.get::<_, i64>(0))
        .map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// Every thread of the SQLite target is the source's, row for row; returns
/// how many threads it has.
#[track_caller]
fn assert_whole_or_absent(source: &Path, target: &Path, what: &str) -> usize {
    let (src_cp, dst_cp) = (by_thread(source, CHECKPOINTS), by_thread(target, CHECKPOINTS));
    let (src_w, dst_w) = (by_thread(source, WRITES), by_thread(target, WRITES));
    for (thread, rows) in &dst_cp {
        assert!(
            src_cp.get(thread) == Some(rows),
            "{what}: thread {thread} in the target has {} checkpoint(s), the source {}",
            rows.len(),
            src_cp.get(thread).map_or(0, Vec::len)
        );
        assert!(
            src_w.get(thread) == dst_w.get(thread),
            "{what}: the writes of thread {thread} differ"
        );
    }
    for thread in dst_w.keys() {
        assert!(
            dst_cp.contains_key(thread),
            "{what}: writes of thread {thread} without its checkpoints"
        );
    }
    dst_cp.len()
}

/// How many times each test kills a copy, each at a random moment.
const ROUNDS: usize = 10;

fn copy_killed_leaves_whole_threads_and_resume_finishes() {
    let testdata = testdata_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = big_source(dir.path(), &testdata);
    let total = sqlite_count(&source);
    let mut state = seed();
    let mut killed = 0;
    for trial in 0..ROUNDS {
        let fraction = random_fraction(&mut state);
        let target = dir.path().join(format!("target-{trial}.sqlite"));
        let (src, dst) = (sqlite_url(&source), sqlite_url(&target));
        let mut child = spawn(&["copy", &src, &dst]);
        let at = (total as f64 * fraction) as usize;
        if kill_when(&mut child, || sqlite_count(&target) >= at) {
            killed += 1;
        }
        let what = format!("round {trial}: killed after {at} of {total} checkpoints");
        let threads = assert_whole_or_absent(&source, &target, &what);
        // what is there reads consistently
        run(&["export", &dst]).expect(0);
        run(&["threads", &dst]).expect(0);
        if threads > 0 {
            // a plain rerun names the threads the target has and changes nothing
            let refused = run(&["copy", &src, &dst]).expect(5);
            assert!(refused.stderr.contains("--resume"), "{}", refused.stderr);
        }
        let resumed = run(&["--json", "copy", &src, &dst, "--resume"]).expect(0).json();
        assert_eq!(resumed["skipped"].as_array().unwrap().len(), threads, "{what}");
        assert_eq!(
            by_thread(&target, CHECKPOINTS),
            by_thread(&source, CHECKPOINTS),
            "{what}"
        );
        assert_eq!(by_thread(&target, WRITES), by_thread(&source, WRITES), "{what}");
    }
    assert!(killed > 0, "every copy finished before it could be killed");
}

fn copy_overwrite_killed_keeps_every_thread() {
    let testdata = testdata_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = big_source(dir.path(), &testdata);
    let target = dir.path().join("target.sqlite");
    let (src, dst) = (sqlite_url(&source), sqlite_url(&target));
    let started = Instant::now();
    run(&["copy", &src, &dst]).expect(0);
    run(&["copy", &src, &dst, "--overwrite"]).expect(0);
    let full = started.elapsed() / 2;
    let all = by_thread(&source, CHECKPOINTS).len();
    overwrite_killed_rounds(&src, &dst, full, |what| {
        assert_eq!(
            assert_whole_or_absent(&source, &target, what),
            all,
            "{what}: a thread is gone"
        );
    });
}

/// Kills `copy src dst --overwrite` at [`ROUNDS`] random moments of a run
/// that takes `full`; after each, `check(what)` looks at the target and
/// `export` reads it whole.
fn overwrite_killed_rounds(src: &str, dst: &str, full: Duration, mut check: impl FnMut(&str)) {
    let mut full = full;
    let mut state = seed();
    let mut killed = 0;
    for round in 0..ROUNDS {
        let fraction = random_fraction(&mut state);
        let mut child = spawn(&["copy", src, dst, "--overwrite"]);
        let start = Instant::now();
        if kill_when(&mut child, || start.elapsed() >= full.mul_f64(fraction)) {
            killed += 1;
        } else {
            // a run that finished first is the better measure of a whole
            // one (the first may have run on a busier machine)
            full = full.min(start.elapsed());
        }
        let what = format!(
            "round {round}: --overwrite killed after {:.0} % of a run",
            fraction * 100.0
        );
        check(&what);
        run(&["export", dst]).expect(0);
    }
    assert!(killed > 0, "every copy finished before it could be killed");
}

/// Waits until no other session is connected to the database: a killed
/// client's last transaction (a COMMIT already sent) is then settled.
fn pg_wait_idle(url: &str) {
    with_pg_client(url, |client| async move {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let others: i64 = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                     AND pid <> pg_backend_pid()",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if others == 0 || Instant::now() > deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// Checkpoints and writes per thread in a PostgreSQL database.
fn pg_counts(url: &str) -> BTreeMap<String, (i64, i64)> {
    with_pg_client(url, |client| async move {
        let mut out = BTreeMap::new();
        let exists = client
            .query_one("SELECT to_regclass('checkpoint_writes') IS NOT NULL", &[])
            .await
            .unwrap()
            .get::<_, bool>(0);
        if !exists {
            return out;
        }
        let rows = client
            .query(
                "SELECT t, (SELECT count(*) FROM checkpoints c WHERE c.thread_id = t), \
                 (SELECT count(*) FROM checkpoint_writes w WHERE w.thread_id = t) \
                 FROM (SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM checkpoint_writes) \
                 AS x(t)",
                &[],
            )
            .await
            .unwrap();
        for r in rows {
            out.insert(r.get::<_, String>(0), (r.get(1), r.get(2)));
        }
        out
    })
}

fn copy_to_postgres_killed_leaves_whole_threads_and_resume_finishes() {
    let testdata = testdata_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = big_source(dir.path(), &testdata);
    let want = source_counts(&source);
    let total: i64 = want.values().map(|c| c.0).sum();
    let mut state = seed();
    let mut killed = 0;
    for round in 0..ROUNDS {
        let fraction = random_fraction(&mut state);
        let Some(db) = require_postgres() else { return };
        let (src, dst) = (sqlite_url(&source), db.url());
        let mut child = spawn(&["copy", &src, &dst]);
        let at = (total as f64 * fraction) as i64;
        if kill_when(&mut child, || pg_counts(&dst).values().map(|c| c.0).sum::<i64>() >= at) {
            killed += 1;
        }
        let what = format!("round {round}: killed after {at} of {total} checkpoints");
        pg_wait_idle(&dst);
        let got = pg_counts(&dst);
        for (thread, counts) in &got {
            assert_eq!(Some(counts), want.get(thread), "{what}: thread {thread} is partial");
        }
        run(&["export", &dst]).expect(0);
        let resumed = run(&["--json", "copy", &src, &dst, "--resume"]).expect(0).json();
        assert_eq!(resumed["skipped"].as_array().unwrap().len(), got.len(), "{what}");
        assert_eq!(pg_counts(&dst), want, "{what}: after --resume");
        // and an --overwrite killed midway keeps every thread
        let mut child = spawn(&["copy", &src, &dst, "--overwrite"]);
        let start = Instant::now();
        kill_when(&mut child, || start.elapsed() >= Duration::from_millis(300));
        pg_wait_idle(&dst);
        assert_eq!(pg_counts(&dst), want, "{what}: after a killed --overwrite");
    }
    assert!(killed > 0, "every copy finished before it could be killed");
}

/// The source's checkpoints and writes per thread, as [`pg_counts`] counts
/// them.
fn source_counts(source: &Path) -> BTreeMap<String, (i64, i64)> {
    let (src_cp, src_w) = (by_thread(source, CHECKPOINTS), by_thread(source, WRITES));
    src_cp
        .iter()
        .map(|(t, rows)| (t.clone(), (rows.len() as i64, src_w.get(t).map_or(0, Vec::len) as i64)))
        .collect()
}

/// `copy --overwrite` into PostgreSQL killed at random moments, ten times:
/// every thread is still there, whole (the old copy or the new one, in one
/// transaction).
fn copy_overwrite_to_postgres_killed_keeps_every_thread() {
    let testdata = testdata_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = big_source(dir.path(), &testdata);
    let want = source_counts(&source);
    let Some(db) = require_postgres() else { return };
    let (src, dst) = (sqlite_url(&source), db.url());
    run(&["copy", &src, &dst]).expect(0);
    assert_eq!(pg_counts(&dst), want);
    let started = Instant::now();
    run(&["copy", &src, &dst, "--overwrite"]).expect(0);
    let full = started.elapsed();
    assert_eq!(pg_counts(&dst), want);
    overwrite_killed_rounds(&src, &dst, full, |what| {
        pg_wait_idle(&dst);
        assert_eq!(pg_counts(&dst), want, "{what}");
    });
}

/// Checkpoints and writes per thread under a Redis key prefix, by the
/// saver's `thread_keys` (threads without a checkpoint are left out, as
/// `list_threads` leaves them out).
fn redis_counts(prefix: &str) -> BTreeMap<String, (usize, usize)> {
    let prefix = prefix.to_owned();
    block_on_thread(async move {
        use checkpointer::{CheckpointSaver, ListThreadsOptions};
        let saver = saver_on(prefix).await;
        let mut out = BTreeMap::new();
        let mut after = None;
        loop {
            let page = saver
                .list_threads(ListThreadsOptions {
                    filter: Default::default(),
                    after: after.clone(),
                    limit: Some(500),
                })
                .await
                .unwrap();
            for t in &page {
                let keys = saver.thread_keys(&t.thread_id).await.unwrap();
                out.insert(t.thread_id.clone(), (keys.checkpoints.len(), keys.writes.len()));
            }
            if page.len() < 500 {
                return out;
            }
            after = page.last().map(|t| t.thread_id.clone());
        }
    })
}

/// The store URL of `prefix` on the test server.
fn redis_store(prefix: &str) -> String {
    let server = redis_url();
    let sep = if server.contains('?') { '&' } else { '?' };
    format!("{server}{sep}prefix={prefix}")
}

/// A pseudo-random fraction in [0.02, 0.98) (xorshift, seeded by the clock).
fn random_fraction(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    0.02 + (*state % 960) as f64 / 1000.0
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    u64::from(nanos) | 1
}

/// SQLite → Redis killed at random moments, ten times (a fresh prefix
/// each): every thread the target has is whole (as many checkpoints and
/// writes as an uninterrupted copy gives it), and `--resume` finishes.
fn copy_to_redis_killed_leaves_whole_threads_and_resume_finishes() {
    let testdata = testdata_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = big_source(dir.path(), &testdata);
    let src = sqlite_url(&source);
    let reference = fresh_prefix();
    let started = Instant::now();
    run(&["copy", &src, &redis_store(&reference)]).expect(0);
    let mut full = started.elapsed();
    let want = redis_counts(&reference);
    block_on_thread(async move { cleanup(&reference).await });
    assert_eq!(want.len(), by_thread(&source, CHECKPOINTS).len());
    let mut state = seed();
    let mut killed = 0;
    for round in 0..ROUNDS {
        let prefix = fresh_prefix();
        let dst = redis_store(&prefix);
        let fraction = random_fraction(&mut state);
        let mut child = spawn(&["copy", &src, &dst]);
        let start = Instant::now();
        if kill_when(&mut child, || start.elapsed() >= full.mul_f64(fraction)) {
            killed += 1;
        } else {
            // a run that finished first is the better measure of a whole
            // one (the first may have run on a busier machine)
            full = full.min(start.elapsed());
        }
        let what = format!("round {round}: killed after {:.0} % of a run", fraction * 100.0);
        let got = redis_counts(&prefix);
        for (thread, counts) in &got {
            assert_eq!(Some(counts), want.get(thread), "{what}: thread {thread} is partial");
        }
        run(&["export", &dst]).expect(0);
        let resumed = run(&["--json", "copy", &src, &dst, "--resume"]).expect(0).json();
        assert_eq!(resumed["skipped"].as_array().unwrap().len(), got.len(), "{what}");
        assert_eq!(redis_counts(&prefix), want, "{what}: after --resume");
        block_on_thread(async move { cleanup(&prefix).await });
    }
    assert!(killed > 0, "every copy finished before it could be killed");
}

/// `copy --overwrite` into Redis killed at random moments, ten times:
/// every thread is still there, whole (the old copy or the new one).
fn copy_overwrite_to_redis_killed_keeps_every_thread() {
    let testdata = testdata_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = big_source(dir.path(), &testdata);
    let src = sqlite_url(&source);
    let prefix = fresh_prefix();
    let dst = redis_store(&prefix);
    run(&["copy", &src, &dst]).expect(0);
    let want = redis_counts(&prefix);
    let started = Instant::now();
    run(&["copy", &src, &dst, "--overwrite"]).expect(0);
    let full = started.elapsed();
    assert_eq!(redis_counts(&prefix), want);
    overwrite_killed_rounds(&src, &dst, full, |what| {
        assert_eq!(redis_counts(&prefix), want, "{what}");
    });
    block_on_thread(async move { cleanup(&prefix).await });
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "crash::copy_killed_leaves_whole_threads_and_resume_finishes",
            &[],
            copy_killed_leaves_whole_threads_and_resume_finishes,
        ),
        harness::test(
            "crash::copy_overwrite_killed_keeps_every_thread",
            &[],
            copy_overwrite_killed_keeps_every_thread,
        ),
        harness::test(
            "crash::copy_to_postgres_killed_leaves_whole_threads_and_resume_finishes",
            &[&crate::POSTGRES],
            copy_to_postgres_killed_leaves_whole_threads_and_resume_finishes,
        ),
        harness::test(
            "crash::copy_overwrite_to_postgres_killed_keeps_every_thread",
            &[&crate::POSTGRES],
            copy_overwrite_to_postgres_killed_keeps_every_thread,
        ),
        harness::test(
            "crash::copy_to_redis_killed_leaves_whole_threads_and_resume_finishes",
            &[&crate::REDIS],
            copy_to_redis_killed_leaves_whole_threads_and_resume_finishes,
        ),
        harness::test(
            "crash::copy_overwrite_to_redis_killed_keeps_every_thread",
            &[&crate::REDIS],
            copy_overwrite_to_redis_killed_keeps_every_thread,
        ),
    ]
}
