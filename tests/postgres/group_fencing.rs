//! Group commit of fenced writes and atomic steps: concurrent fenced
//! `put`s, `put_writes` and atomic steps (fenced or not) share
//! transactions; a fenced member refused by its lease check fails alone
//! (`Error::Fenced`, nothing of it stored) while its group commits; an
//! atomic step is one member, its writes and checkpoint committed together
//! or not at all.
//!
//! As in `group_commit.rs`, rows written by one transaction share their
//! `xmin`. A group with fenced members locks their lease rows first
//! (`FOR UPDATE`), which leaves the group's transaction id in the lease
//! row's `xmax`: so a refused member's lease row, which nothing else
//! touches, names the group it was refused in.

use crate::group_commit::transactions;
use crate::harness;
use crate::postgres_support::{connect, fresh_database, url_of};

use std::sync::Arc;
use std::time::Duration;

use checkpointer::fence::{Fence, Fenceable};
use checkpointer::postgres::PostgresSaver;
use checkpointer::{
    CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt, CheckpointSource, CheckpointTuple,
    Error, PendingWrite, StepCheckpoint,
};
use tokio::sync::Barrier;

async fn store(db: &str, connections: usize) -> PostgresSaver {
    PostgresSaver::builder()
        .url(url_of(db))
        .max_connections(connections)
        .open()
        .await
        .unwrap()
}

fn writer(store: &PostgresSaver, name: &str) -> Arc<dyn Fenceable> {
    store.fenced_saver(Fence::new(name, Duration::from_secs(60))).unwrap()
}

fn meta(n: i64) -> CheckpointMetadata {
    CheckpointMetadata::new(CheckpointSource::Loop, n)
}

/// The first checkpoint of `thread`.
async fn root(saver: &dyn Fenceable, thread: &str) -> checkpointer::Result<CheckpointTuple> {
    let mut step = StepCheckpoint::first(0);
    step.write("n", 0, |v| saver.get_next_version(v))?;
    saver.put_step(&CheckpointConfig::new(thread), &step, &meta(0)).await
}

/// Step `n` after `parent`, with `writes`: as an atomic step, or (`atomic`
/// false) as `put_writes` then `put`.
async fn next(
    saver: &dyn Fenceable,
    parent: &CheckpointTuple,
    n: i64,
    writes: &[PendingWrite],
    atomic: bool,
) -> checkpointer::Result<CheckpointTuple> {
    let mut step = parent.checkpoint.successor(n);
    step.write("n", n, |v| saver.get_next_version(v))?;
    if atomic {
        return saver
            .put_step_with_writes(&parent.config, &step, &meta(n), writes)
            .await;
    }
    // one put_writes per task
    let mut from = 0;
    while from < writes.len() {
        let task = &writes[from].task_id;
        let to = writes[from..]
            .iter()
            .position(|w| &w.task_id != task)
            .map_or(writes.len(), |k| from + k);
        saver.put_pending_writes(&parent.config, &writes[from..to]).await?;
        from = to;
    }
    saver.put_step(&parent.config, &step, &meta(n)).await
}

/// Two tasks' writes of step `n`.
fn writes_of(n: i64, third: &str) -> Vec<PendingWrite> {
    vec![
        PendingWrite::new("task-a", "a", n).with_task_path("~__pregel_pull, a"),
        PendingWrite::new("task-b", "b", n).with_task_path("~__pregel_pull, b"),
        PendingWrite::new("task-b", third, n)
            .with_task_path("~__pregel_pull, b")
            .with_idx(1),
    ]
}

/// (rows of the atomic steps' writes of threads `like`, those whose `xmin`
/// is not their step checkpoint's): a step's writes and checkpoint commit
/// in one transaction.
async fn step_writes_apart(db: &str, like: &str) -> (i64, i64) {
    let client = connect(db).await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE w.xmin::text <> c.xmin::text) \
             FROM checkpoints c JOIN checkpoint_writes w ON w.thread_id = c.thread_id \
             AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.parent_checkpoint_id \
             WHERE c.thread_id LIKE $1",
            &[&like],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

const WRITERS: usize = 18;
const STEPS: i64 = 10;

/// Writers each on a thread of their own, at once: a third fenced `put` +
/// `put_writes` chains, a third fenced atomic steps, a third unfenced
/// atomic steps. Every call succeeds; each kind's rows share transactions
/// (groups formed), and every atomic step's writes share their
/// checkpoint's transaction.
async fn fenced_writes_and_atomic_steps_are_group_committed() {
    let Some(db) = fresh_database().await else { return };
    let store = store(&db.0, WRITERS).await;
    let start = Arc::new(Barrier::new(WRITERS));
    let tasks: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (store, start) = (store.clone(), start.clone());
            tokio::spawn(async move {
                let (kind, saver): (&str, Arc<dyn Fenceable>) = match i % 3 {
                    0 => ("gf-put", writer(&store, &format!("w-{i}"))),
                    1 => ("gf-step", writer(&store, &format!("w-{i}"))),
                    _ => ("gu-step", Arc::new(store.clone())),
                };
                let thread = format!("{kind}-{i}");
                // first writes on a fresh database: the lease table made by
                // many sessions at once
                let parent = root(saver.as_ref(), &thread).await;
                start.wait().await;
                let mut parent = parent.unwrap_or_else(|e| panic!("{thread} root: {e}"));
                for n in 1..=STEPS {
                    parent = next(saver.as_ref(), &parent, n, &writes_of(n, "c"), kind != "gf-put")
                        .await
                        .unwrap_or_else(|e| panic!("{thread} step {n}: {e}"));
                }
                thread
            })
        })
        .collect();
    for task in tasks {
        let thread = task.await.unwrap();
        let latest = store.get_tuple(&CheckpointConfig::new(&thread)).await.unwrap().unwrap();
        assert_eq!(latest.metadata.step(), Some(STEPS), "{thread}");
        let before = store
            .get_tuple(latest.parent_config.as_ref().unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(before.pending_writes.len(), 3, "{thread}");
    }
    let steps_per_kind = (WRITERS / 3) as i64 * STEPS;
    for (like, what) in [
        ("gf-put-%", "fenced puts"),
        ("gf-step-%", "fenced atomic steps"),
        ("gu-step-%", "atomic steps"),
    ] {
        let (rows, txs) = transactions(&db.0, "checkpoints", like).await;
        assert_eq!(rows, steps_per_kind + (WRITERS / 3) as i64, "{what}");
        assert!(
            txs < rows,
            "no two {what} shared a transaction ({rows} rows, {txs} transactions)"
        );
    }
    let (rows, txs) = transactions(&db.0, "checkpoint_writes", "gf-put-%").await;
    assert!(
        txs < rows,
        "no two fenced put_writes shared a transaction ({rows} rows)"
    );
    for like in ["gf-step-%", "gu-step-%"] {
        let (writes, apart) = step_writes_apart(&db.0, like).await;
        assert_eq!(writes, steps_per_kind * 3, "{like}");
        assert_eq!(apart, 0, "{like}: a step's writes committed apart from its checkpoint");
    }
}

const CALLERS: usize = 64;

/// Callers at once, each with its own thread and writer; one in eight has
/// lost its thread to another writer (released, then taken). Each makes a
/// fenced `put`, `put_writes` and atomic step: the stale ones get
/// `Error::Fenced` for each and nothing of theirs is stored, every other
/// call succeeds and groups formed; and some stale member was refused
/// inside a group that committed others (its lease row's `xmax` is the
/// `xmin` of other callers' rows).
async fn a_refused_fenced_member_fails_alone_in_its_group() {
    let Some(db) = fresh_database().await else { return };
    let store = store(&db.0, 16).await;
    let stale = |i: usize| i % 8 == 3;
    let mut savers = Vec::new();
    for i in 0..CALLERS {
        let thread = format!("fr-{i}");
        let saver = writer(&store, &format!("caller-{i}"));
        saver.acquire(&thread).await.unwrap();
        if stale(i) {
            assert!(saver.release(&thread).await.unwrap());
            writer(&store, &format!("usurper-{i}")).acquire(&thread).await.unwrap();
        }
        savers.push((thread, saver));
    }
    let start = Arc::new(Barrier::new(CALLERS));
    let tasks: Vec<_> = savers
        .into_iter()
        .map(|(thread, saver)| {
            let start = start.clone();
            tokio::spawn(async move {
                let step = StepCheckpoint::first(0);
                start.wait().await;
                let put = saver.put_step(&CheckpointConfig::new(&thread), &step, &meta(0)).await;
                // the stale caller's calls go on against a made-up parent
                let parent = match &put {
                    Ok(t) => t.clone(),
                    Err(_) => CheckpointTuple {
                        config: CheckpointConfig::new(&thread).with_checkpoint_id(step.checkpoint().id.clone()),
                        checkpoint: step.checkpoint().clone(),
                        metadata: meta(0),
                        parent_config: None,
                        pending_writes: Vec::new(),
                    },
                };
                let writes = saver.put_pending_writes(&parent.config, &writes_of(0, "c")[1..]).await;
                let step = next(saver.as_ref(), &parent, 1, &writes_of(1, "c"), true).await;
                (thread, [put.map(drop), writes, step.map(drop)])
            })
        })
        .collect();
    let mut wrong = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        let (thread, outs) = task.await.unwrap();
        for (op, out) in ["put", "put_writes", "atomic step"].into_iter().zip(outs) {
            match (stale(i), out) {
                (false, Ok(())) => {}
                (true, Err(Error::Fenced { thread_id, writer, .. }))
                    if thread_id == thread && writer == format!("caller-{i}") => {}
                (_, out) => wrong.push(format!("{thread} {op}: {out:?}")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} calls got another outcome than theirs: {wrong:?}",
        wrong.len()
    );
    let client = connect(&db.0).await.unwrap();
    for table in ["checkpoints", "checkpoint_writes", "checkpoint_blobs"] {
        let stale_threads: Vec<String> = (0..CALLERS).filter(|&i| stale(i)).map(|i| format!("fr-{i}")).collect();
        let n: i64 = client
            .query_one(
                &format!("SELECT count(*) FROM {table} WHERE thread_id = ANY($1)"),
                &[&stale_threads],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table}: rows of refused writes");
    }
    let honest = (CALLERS - CALLERS / 8) as i64;
    let (rows, txs) = transactions(&db.0, "checkpoints", "fr-%").await;
    assert_eq!(rows, 2 * honest);
    assert!(txs < rows, "no two fenced writes shared a transaction ({rows} rows)");
    // a stale caller's lease row was last locked by a group that stored
    // other callers' rows
    let refused_in_a_group: i64 = client
        .query_one(
            "SELECT count(*) FROM checkpointer_leases l WHERE l.owner LIKE 'usurper-%' \
             AND l.xmax::text <> '0' AND EXISTS (SELECT 1 FROM checkpoints c \
             WHERE c.thread_id LIKE 'fr-%' AND c.xmin::text = l.xmax::text)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        refused_in_a_group > 0,
        "no refused member was in a group that committed others"
    );
}

/// Refuses, on the server, the write rows of channel `poison` and the step
/// 1 checkpoints of threads `cpoison…`.
const POISON: &str = "\
CREATE FUNCTION poison_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
IF NEW.channel = 'poison' THEN RAISE EXCEPTION 'poisoned write of %', NEW.thread_id; END IF; \
RETURN NEW; END $$; \
CREATE FUNCTION poison_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
IF NEW.thread_id LIKE 'cpoison%' AND NEW.metadata ->> 'step' = '1' THEN \
RAISE EXCEPTION 'poisoned checkpoint of %', NEW.thread_id; END IF; \
RETURN NEW; END $$; \
CREATE TRIGGER poison_checkpoints BEFORE INSERT ON checkpoints FOR EACH ROW EXECUTE FUNCTION poison_checkpoint(); \
CREATE TRIGGER poison_writes BEFORE INSERT ON checkpoint_writes FOR EACH ROW EXECUTE FUNCTION poison_write();";

/// Callers at once, fenced and not, each an atomic step after a root; in
/// some the server refuses a write row after the step's first ones
/// (`wpoison…`), in others its checkpoint after its writes (`cpoison…`):
/// those steps fail with their own error and store nothing (neither writes
/// nor checkpoint), the others store both, in one transaction, and groups
/// formed.
async fn an_atomic_step_failing_midway_stores_nothing() {
    let Some(db) = fresh_database().await else { return };
    let store = store(&db.0, 16).await;
    connect(&db.0).await.unwrap().batch_execute(POISON).await.unwrap();
    let kind = |i: usize| match i % 8 {
        2 => "wpoison",
        5 => "cpoison",
        _ => "ok",
    };
    let start = Arc::new(Barrier::new(CALLERS));
    let tasks: Vec<_> = (0..CALLERS)
        .map(|i| {
            let (store, start) = (store.clone(), start.clone());
            tokio::spawn(async move {
                let saver: Arc<dyn Fenceable> = match i % 2 {
                    0 => writer(&store, &format!("stepper-{i}")),
                    _ => Arc::new(store.clone()),
                };
                let thread = format!("{}-{i}", kind(i));
                let parent = root(saver.as_ref(), &thread).await;
                let third = if kind(i) == "wpoison" { "poison" } else { "c" };
                start.wait().await;
                let parent = parent.unwrap_or_else(|e| panic!("{thread} root: {e}"));
                let out = next(saver.as_ref(), &parent, 1, &writes_of(1, third), true).await;
                (thread, parent, out)
            })
        })
        .collect();
    let mut wrong = Vec::new();
    for task in tasks {
        let (thread, parent, out) = task.await.unwrap();
        let stored = store.get_tuple(&parent.config).await.unwrap().unwrap();
        let latest = store.get_tuple(&CheckpointConfig::new(&thread)).await.unwrap().unwrap();
        match (thread.split('-').next().unwrap(), out) {
            ("ok", Ok(_)) => {
                assert_eq!(stored.pending_writes.len(), 3, "{thread}");
                assert_eq!(latest.metadata.step(), Some(1), "{thread}");
            }
            (kind @ ("wpoison" | "cpoison"), Err(e)) => {
                let what = if kind == "wpoison" { "write" } else { "checkpoint" };
                assert!(
                    matches!(e, Error::Storage { .. })
                        && e.to_string().contains(&format!("poisoned {what} of {thread}")),
                    "{thread}: {e}"
                );
                assert_eq!(stored.pending_writes, [], "{thread}: a failed step stored writes");
                assert_eq!(
                    latest.config, parent.config,
                    "{thread}: a failed step stored its checkpoint"
                );
            }
            (_, out) => wrong.push(format!("{thread}: {:?}", out.map(drop))),
        }
    }
    assert!(wrong.is_empty(), "{wrong:?}");
    let (writes, apart) = step_writes_apart(&db.0, "ok-%").await;
    assert_eq!(writes as usize, 3 * (CALLERS - CALLERS / 4));
    assert_eq!(apart, 0, "a step's writes committed apart from its checkpoint");
    let client = connect(&db.0).await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT xmin::text) FROM checkpoints \
             WHERE thread_id LIKE 'ok-%' AND metadata ->> 'step' = '1'",
            &[],
        )
        .await
        .unwrap();
    let (rows, txs): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        txs < rows,
        "no two atomic steps shared a transaction ({rows} rows, {txs} transactions)"
    );
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "group_fencing::fenced_writes_and_atomic_steps_are_group_committed",
            &[&crate::POSTGRES],
            4,
            fenced_writes_and_atomic_steps_are_group_committed,
        ),
        harness::tokio(
            "group_fencing::a_refused_fenced_member_fails_alone_in_its_group",
            &[&crate::POSTGRES],
            4,
            a_refused_fenced_member_fails_alone_in_its_group,
        ),
        harness::tokio(
            "group_fencing::an_atomic_step_failing_midway_stores_nothing",
            &[&crate::POSTGRES],
            4,
            an_atomic_step_failing_midway_stores_nothing,
        ),
    ]
}
