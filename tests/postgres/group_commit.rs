//! Group commit (issue 14, item 5): concurrent writers' `put` and
//! `put_writes` share transactions; a member whose statement fails fails
//! alone while the others of its group commit; with group commit off every
//! write is a transaction of its own.
//!
//! Rows written by one transaction share their `xmin`, which is how the
//! tests see that groups formed. A trigger refuses every row of a thread
//! whose id starts with `poison`, so that one member of a group fails on the
//! server.

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
async fn transactions(db: &str, table: &str, like: &str) -> (i64, i64) {
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
    ]
}
