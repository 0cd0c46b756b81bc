//! Group commit: concurrent writers' `put` and
//! `put_writes` share transactions; a member whose statement fails fails
//! alone while the others of its group commit; with group commit off every
//! write is a transaction of its own.
//!
//! Rows written by one transaction share their `xmin`, which is how the
//! tests see that groups formed. A trigger refuses every row of a thread
//! whose id starts with `poison`, so that one member of a group fails on the
//! server. A member refused where no statement of its own
//! shows it (at `COMMIT`, by a deferred constraint trigger; in the group's
//! thread-lock statement, by a lock timeout) still fails alone.

use crate::harness;
use crate::postgres_support;

use std::sync::Arc;

use checkpointer::postgres::{PostgresSaver, StatementMode};
use checkpointer::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt, CheckpointSource, Error,
    ListOptions, Value,
};
use postgres_support::{connect, fresh_database, url_of};

const WRITERS: usize = 16;
const STEPS: i64 = 15;

const POISON: &str = "\
CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
IF NEW.thread_id LIKE 'poison%' THEN RAISE EXCEPTION 'poisoned thread %', NEW.thread_id; END IF; \
RETURN NEW; END $$; \
CREATE TRIGGER poison_checkpoints BEFORE INSERT ON checkpoints FOR EACH ROW EXECUTE FUNCTION poison(); \
CREATE TRIGGER poison_writes BEFORE INSERT ON checkpoint_writes FOR EACH ROW EXECUTE FUNCTION poison();";

fn step(saver: &PostgresSaver, n: i64, who: usize) -> Checkpoint {
    let mut cp = Checkpoint::new(n);
    cp.channel_values.insert("n".into(), Value::Int(n));
    cp.channel_values.insert("who".into(), Value::from(vec![who as i64, n]));
    for ch in ["n", "who"] {
        cp.channel_versions
            .insert(ch.into(), saver.get_next_version(None).unwrap());
    }
    cp
}

/// Writer `who`: `STEPS` checkpoints with one write each into `thread`; returns
/// how many of its calls failed, checking each failure names the poison.
async fn writer(saver: PostgresSaver, thread: String, who: usize) -> usize {
    let mut parent = CheckpointConfig::new(&thread);
    let mut failed = 0;
    for n in 0..STEPS {
        let cp = step(&saver, n, who);
        let md = CheckpointMetadata::new(CheckpointSource::Loop, n);
        let stored = match saver.put(&parent, &cp, &md, &cp.channel_versions).await {
            Ok(stored) => stored,
            Err(e) => {
                assert!(matches!(e, Error::Storage { .. }), "{e:?}");
                assert!(e.to_string().contains("poisoned thread"), "{e}");
                failed += 1;
                // The poisoned thread writes its writes under a made-up id.
                CheckpointConfig::new(&thread).with_checkpoint_id(cp.id.clone())
            }
        };
        let w = saver
            .put_writes(&stored, &[("w".into(), Value::Int(n))], &format!("task-{n}"), "")
            .await;
        if let Err(e) = w {
            assert!(e.to_string().contains("poisoned thread"), "{e}");
            failed += 1;
        }
        parent = stored;
    }
    failed
}

/// (rows, transactions) of the rows of threads `like` in `table`.
pub(crate) async fn transactions(db: &str, table: &str, like: &str) -> (i64, i64) {
    let client = connect(db).await.unwrap();
    let row = client
        .query_one(
            &format!("SELECT count(*), count(DISTINCT xmin::text) FROM {table} WHERE thread_id LIKE $1"),
            &[&like],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

async fn run(db: &str, saver: &PostgresSaver, poisoned: bool) {
    let mut tasks = Vec::new();
    for who in 0..WRITERS {
        let thread = match who {
            0 if poisoned => "poison-0".to_owned(),
            _ => format!("g-{who}"),
        };
        tasks.push(tokio::spawn(writer(saver.clone(), thread, who)));
    }
    for (who, task) in tasks.into_iter().enumerate() {
        let failed = task.await.unwrap();
        let expected = if who == 0 && poisoned { 2 * STEPS as usize } else { 0 };
        assert_eq!(failed, expected, "writer {who}");
    }
    // Every other write is stored, whole.
    for who in (0..WRITERS).filter(|&w| !(w == 0 && poisoned)) {
        let thread = format!("g-{who}");
        let listed = saver
            .list_vec(Some(CheckpointConfig::new(&thread)), ListOptions::default())
            .await
            .unwrap();
        assert_eq!(listed.len(), STEPS as usize, "{thread}");
        for t in &listed {
            let n = t.metadata.step().unwrap();
            assert_eq!(
                t.checkpoint.channel_values.get("who"),
                Some(&Value::from(vec![who as i64, n]))
            );
            assert_eq!(t.pending_writes.len(), 1, "{thread} step {n}");
        }
    }
    let _ = db;
}

async fn poisoned_member_fails_alone(mode: StatementMode) {
    let Some(db) = fresh_database().await else { return };
    let saver = PostgresSaver::builder()
        .url(url_of(&db.0))
        .statement_mode(mode)
        .max_connections(WRITERS)
        .open()
        .await
        .unwrap();
    connect(&db.0).await.unwrap().batch_execute(POISON).await.unwrap();
    let saver = Arc::new(saver);
    run(&db.0, &saver, true).await;
    let (rows, txs) = transactions(&db.0, "checkpoints", "g-%").await;
    assert_eq!(rows, (WRITERS as i64 - 1) * STEPS);
    assert!(
        txs < rows,
        "{mode:?}: no two puts shared a transaction ({rows} rows, {txs} transactions)"
    );
    let (rows, txs) = transactions(&db.0, "checkpoint_writes", "g-%").await;
    assert!(
        txs < rows,
        "{mode:?}: no two put_writes shared a transaction ({rows} rows, {txs} transactions)"
    );
    let (rows, _) = transactions(&db.0, "checkpoint_writes", "poison%").await;
    assert_eq!(rows, 0);
}

async fn a_failing_member_of_a_group_fails_alone() {
    poisoned_member_fails_alone(StatementMode::Prepared).await;
}

async fn a_failing_member_of_a_group_fails_alone_unnamed() {
    poisoned_member_fails_alone(StatementMode::Unnamed).await;
}

async fn without_group_commit_every_write_commits_alone() {
    let Some(db) = fresh_database().await else { return };
    let saver = PostgresSaver::builder()
        .url(url_of(&db.0))
        .max_connections(WRITERS)
        .group_commit(false)
        .open()
        .await
        .unwrap();
    run(&db.0, &saver, false).await;
    for table in ["checkpoints", "checkpoint_writes"] {
        let (rows, txs) = transactions(&db.0, table, "g-%").await;
        assert_eq!(rows, WRITERS as i64 * STEPS);
        assert_eq!(txs, rows, "{table}");
    }
}

/// Deferred constraint triggers (checked at `COMMIT`) that refuse the rows of
/// threads `guilty…` (P0001) and `serial…` (40001, as a serialization failure
/// at commit would).
const DEFERRED: &str = "\
CREATE FUNCTION at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
IF NEW.thread_id LIKE 'guilty%' THEN RAISE EXCEPTION 'guilty thread %', NEW.thread_id; END IF; \
IF NEW.thread_id LIKE 'serial%' THEN RAISE EXCEPTION 'serial thread %', NEW.thread_id USING ERRCODE = '40001'; \
END IF; RETURN NULL; END $$; \
CREATE CONSTRAINT TRIGGER at_commit_checkpoints AFTER INSERT ON checkpoints \
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION at_commit(); \
CREATE CONSTRAINT TRIGGER at_commit_writes AFTER INSERT ON checkpoint_writes \
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION at_commit();";

/// How many callers run at once in the tests of failures no statement of
/// one member shows.
const CALLERS: usize = 450;

/// The thread of caller `i`: one in 50 `guilty` and one in 150 `serial`.
fn thread_of(i: usize) -> String {
    match i {
        _ if i % 50 == 13 => format!("guilty-{i}"),
        _ if i % 150 == 77 => format!("serial-{i}"),
        _ => format!("c-{i}"),
    }
}

/// Caller `i`: one put, then one put_writes on it; the two outcomes.
async fn one_caller(
    saver: PostgresSaver,
    i: usize,
    start: Arc<tokio::sync::Barrier>,
) -> (checkpointer::Result<CheckpointConfig>, checkpointer::Result<()>) {
    let thread = thread_of(i);
    let cp = step(&saver, 0, i);
    let md = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    start.wait().await;
    let put = saver
        .put(&CheckpointConfig::new(&thread), &cp, &md, &cp.channel_versions)
        .await;
    let target = CheckpointConfig::new(&thread).with_checkpoint_id(cp.id.clone());
    let writes = saver
        .put_writes(&target, &[("w".into(), Value::Int(i as i64))], "task", "")
        .await;
    (put, writes)
}

/// `CALLERS` callers at once, each its put and put_writes; checks that every
/// caller of a `guilty` or `serial` thread got its own error (retryable for
/// `serial`), every other one succeeded and is stored whole, and that groups
/// formed (else the test proved nothing).
async fn each_caller_gets_its_own_outcome(db: &str, saver: &PostgresSaver, like: &str) {
    let start = Arc::new(tokio::sync::Barrier::new(CALLERS));
    let tasks: Vec<_> = (0..CALLERS)
        .map(|i| tokio::spawn(one_caller(saver.clone(), i, start.clone())))
        .collect();
    let (mut innocent_errors, mut guilty_wrong) = (Vec::new(), Vec::new());
    for (i, task) in tasks.into_iter().enumerate() {
        let (put, writes) = task.await.unwrap();
        let thread = thread_of(i);
        let words = if thread.starts_with("guilty") {
            Some(("guilty thread", false))
        } else if thread.starts_with("serial") {
            Some(("serial thread", true))
        } else {
            None
        };
        for (op, out) in [("put", put.map(drop)), ("put_writes", writes)] {
            match (words, out) {
                (None, Ok(())) => {}
                (None, Err(e)) => innocent_errors.push(format!("{thread} {op}: {e}")),
                (Some((words, retryable)), Err(e)) => {
                    let own = matches!(e, Error::Storage { .. })
                        && e.to_string().contains(&format!("{words} {thread}"))
                        && e.is_retryable() == retryable;
                    if !own {
                        guilty_wrong.push(format!("{thread} {op}: {e} (retryable: {})", e.is_retryable()));
                    }
                }
                (Some(_), Ok(())) => guilty_wrong.push(format!("{thread} {op}: succeeded past its trigger")),
            }
        }
    }
    assert!(
        innocent_errors.is_empty() && guilty_wrong.is_empty(),
        "{} innocent calls failed, e.g. {:?}; {} refused calls got another outcome than their own, e.g. {:?}",
        innocent_errors.len(),
        &innocent_errors[..innocent_errors.len().min(2)],
        guilty_wrong.len(),
        &guilty_wrong[..guilty_wrong.len().min(2)],
    );
    for i in 0..CALLERS {
        let thread = thread_of(i);
        let got = saver.get_tuple(&CheckpointConfig::new(&thread)).await.unwrap();
        if !thread.starts_with("c-") {
            assert!(got.is_none(), "{thread}: stored");
            continue;
        }
        let got = got.unwrap_or_else(|| panic!("{thread}: not stored"));
        assert_eq!(
            got.checkpoint.channel_values.get("who"),
            Some(&Value::from(vec![i as i64, 0])),
            "{thread}"
        );
        let writes: Vec<_> = got.pending_writes.iter().map(|w| w.value.clone()).collect();
        assert_eq!(writes, [Value::Int(i as i64)], "{thread}");
    }
    let client = connect(db).await.unwrap();
    let mut grouped = Vec::new();
    for table in ["checkpoints", "checkpoint_writes"] {
        let row = client
            .query_one(
                &format!("SELECT count(*) FROM {table} WHERE thread_id NOT LIKE $1"),
                &[&like],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 0, "{table}: rows of refused threads");
        let (rows, txs) = transactions(db, table, like).await;
        grouped.push((table, rows, txs));
    }
    // On a loaded machine a queued put may wait past the group's escape
    // time and go alone, so groups may form for one kind of write only;
    // at least one must have, else the test proved nothing.
    assert!(
        grouped.iter().any(|&(_, rows, txs)| txs < rows),
        "no two writes shared a transaction: {grouped:?} (table, rows, transactions)"
    );
}

/// A write refused only at `COMMIT` (a deferred constraint trigger) fails
/// its own caller, not the other members of its group:
/// before, every member of the group got the error.
async fn a_write_refused_at_commit_fails_alone(mode: StatementMode) {
    let Some(db) = fresh_database().await else { return };
    let saver = PostgresSaver::builder()
        .url(url_of(&db.0))
        .statement_mode(mode)
        .max_connections(WRITERS)
        .open()
        .await
        .unwrap();
    connect(&db.0).await.unwrap().batch_execute(DEFERRED).await.unwrap();
    each_caller_gets_its_own_outcome(&db.0, &saver, "c-%").await;
}

async fn a_write_refused_at_commit_fails_alone_prepared() {
    a_write_refused_at_commit_fails_alone(StatementMode::Prepared).await;
}

async fn a_write_refused_at_commit_fails_alone_unnamed() {
    a_write_refused_at_commit_fails_alone(StatementMode::Unnamed).await;
}

/// The group's own statement (the thread locks its puts take first) fails
/// under `lock_timeout` because one member's thread is locked elsewhere: that
/// member gets the lock timeout, the other members of its group commit.
async fn a_group_statement_failure_fails_only_the_member_it_concerns() {
    let Some(db) = fresh_database().await else { return };
    let saver = PostgresSaver::builder()
        .url(format!("{}?options=-c%20lock_timeout%3D300", url_of(&db.0)))
        .max_connections(WRITERS)
        .open()
        .await
        .unwrap();
    // Hold the exclusive thread lock (`delete_for_runs`'s) of the `locked`
    // threads in another session.
    let holder = connect(&db.0).await.unwrap();
    let locked: Vec<String> = (0..CALLERS)
        .filter(|i| i % 50 == 13)
        .map(|i| format!("locked-{i}"))
        .collect();
    holder
        .execute(
            "SELECT count(pg_advisory_lock(1667985524, hashtext(t))) FROM unnest($1::text[]) AS t",
            &[&locked],
        )
        .await
        .unwrap();
    let start = Arc::new(tokio::sync::Barrier::new(CALLERS));
    let tasks: Vec<_> = (0..CALLERS)
        .map(|i| {
            let saver = saver.clone();
            let start = start.clone();
            tokio::spawn(async move {
                let thread = match i % 50 == 13 {
                    true => format!("locked-{i}"),
                    false => format!("c-{i}"),
                };
                let cp = step(&saver, 0, i);
                let md = CheckpointMetadata::new(CheckpointSource::Loop, 0);
                start.wait().await;
                let out = saver
                    .put(&CheckpointConfig::new(&thread), &cp, &md, &cp.channel_versions)
                    .await;
                (thread, out)
            })
        })
        .collect();
    let mut innocent_errors = Vec::new();
    for task in tasks {
        let (thread, out) = task.await.unwrap();
        match (thread.starts_with("locked"), out) {
            (false, Ok(_)) => {}
            (false, Err(e)) => innocent_errors.push(format!("{thread}: {e}")),
            (true, Err(e)) => {
                assert!(e.to_string().contains("55P03"), "{thread}: {e}");
                assert!(e.is_retryable(), "{thread}: {e:?}");
            }
            (true, Ok(_)) => panic!("{thread}: stored past a held lock"),
        }
    }
    assert!(
        innocent_errors.is_empty(),
        "{} innocent puts failed, e.g. {:?}",
        innocent_errors.len(),
        &innocent_errors[..innocent_errors.len().min(3)]
    );
    let (rows, txs) = transactions(&db.0, "checkpoints", "c-%").await;
    assert_eq!(rows as usize, CALLERS - locked.len());
    assert!(txs < rows, "no two puts shared a transaction ({rows} rows)");
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "group_commit::a_failing_member_of_a_group_fails_alone",
            &[&crate::POSTGRES],
            4,
            a_failing_member_of_a_group_fails_alone,
        ),
        harness::tokio(
            "group_commit::a_failing_member_of_a_group_fails_alone_unnamed",
            &[&crate::POSTGRES],
            4,
            a_failing_member_of_a_group_fails_alone_unnamed,
        ),
        harness::tokio(
            "group_commit::without_group_commit_every_write_commits_alone",
            &[&crate::POSTGRES],
            4,
            without_group_commit_every_write_commits_alone,
        ),
        harness::tokio(
            "group_commit::a_write_refused_at_commit_fails_alone_prepared",
            &[&crate::POSTGRES],
            4,
            a_write_refused_at_commit_fails_alone_prepared,
        ),
        harness::tokio(
            "group_commit::a_write_refused_at_commit_fails_alone_unnamed",
            &[&crate::POSTGRES],
            4,
            a_write_refused_at_commit_fails_alone_unnamed,
        ),
        harness::tokio(
            "group_commit::a_group_statement_failure_fails_only_the_member_it_concerns",
            &[&crate::POSTGRES],
            4,
            a_group_statement_failure_fails_only_the_member_it_concerns,
        ),
    ]
}
