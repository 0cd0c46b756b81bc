//! A step's deferred writes and its next checkpoint are stored together by
//! `Step::close` (`put_step_with_writes`): a failure injected between the
//! writes and the checkpoint leaves neither on a saver of the crate, while
//! the two-call path (a wrapper without atomic steps) leaves the writes
//! behind, which shows the failure does fall between them.

use std::path::Path;
use std::sync::Arc;

use checkpointer::prelude::*;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::testing::FaultySaver;

use crate::harness;

fn uid(prefix: &str) -> String {
    format!("{prefix}-{}", checkpointer::id::checkpoint_id(0))
}

/// Runs the step's tasks, deferring (or finishing) each: `START` writes
/// the input and triggers `echo`; `echo` copies `x` to `y`.
async fn run(step: &Step, defer: bool) {
    for task in step.to_run() {
        let ctx = step.context(&task).unwrap();
        let writes = if task.name == START {
            step.input_writes(&["echo"]).unwrap()
        } else {
            let x = step.parent().checkpoint.channel_values.get("x").cloned().unwrap();
            vec![("y".to_owned(), x)]
        };
        if defer {
            step.defer(&task, &ctx, writes).unwrap();
        } else {
            step.finish(&task, &ctx, writes).await.unwrap();
        }
    }
}

/// A thread run to its end, each step's writes deferred or finished.
async fn run_to_end(saver: Arc<dyn CheckpointSaver>, thread_id: &str, defer: bool) -> Vec<CheckpointTuple> {
    let thread = Thread::new(saver.clone(), thread_id);
    let mut step = thread.start(Value::map([("x", Value::from(7))]), None).await.unwrap();
    while !step.tasks().is_empty() {
        run(&step, defer).await;
        step = step.close(&Reducers::new()).await.unwrap();
    }
    saver
        .list_vec(Some(CheckpointConfig::new(thread_id)), ListOptions::default())
        .await
        .unwrap()
}

/// Deferring changes nothing of what is stored: the same checkpoints and
/// writes as `finish` (ids aside).
async fn defer_stores_what_finish_stores(saver: Arc<dyn CheckpointSaver>) {
    let shape = |tuples: Vec<CheckpointTuple>| -> Vec<_> {
        tuples
            .into_iter()
            .map(|t| {
                let writes: Vec<_> = t
                    .pending_writes
                    .into_iter()
                    .map(|w| (w.channel, w.value, w.idx))
                    .collect();
                (t.checkpoint.channel_values, t.metadata.step(), writes)
            })
            .collect()
    };
    let finished = shape(run_to_end(saver.clone(), &uid("finish"), false).await);
    let deferred = shape(run_to_end(saver, &uid("defer"), true).await);
    assert!(finished.len() >= 3, "{finished:?}");
    assert_eq!(deferred, finished);
}

/// Makes every later insert of a checkpoint of `thread` fail, in the
/// statement that inserts it: a crash between a step's writes and its
/// checkpoint, as the store sees it.
fn fail_checkpoints_of(path: &Path, thread: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "DROP TRIGGER IF EXISTS injected_crash; CREATE TRIGGER injected_crash BEFORE INSERT ON checkpoints WHEN NEW.thread_id = '{thread}' \
         BEGIN SELECT RAISE(ABORT, 'injected crash'); END"
    ))
    .unwrap();
}

/// Closes a step of deferred writes while the checkpoint's insert fails:
/// returns whether the step's writes were left stored without the
/// checkpoint.
async fn close_failing(saver: Arc<dyn CheckpointSaver>, path: &Path) -> bool {
    let thread_id = uid("crash");
    let thread = Thread::new(saver.clone(), &thread_id);
    let step = thread.start(Value::map([("x", Value::from(1))]), None).await.unwrap();
    let input = step.parent().config.clone();
    run(&step, true).await;
    fail_checkpoints_of(path, &thread_id);
    assert!(step.close(&Reducers::new()).await.is_err(), "the injected failure");
    let history = saver
        .list_vec(Some(CheckpointConfig::new(&thread_id)), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(history.len(), 1, "no checkpoint was stored");
    let parent = saver.get_tuple(&input).await.unwrap().unwrap();
    !parent.pending_writes.is_empty()
}

async fn a_failed_close_leaves_no_writes_without_their_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("steps.db");
    let saver: Arc<dyn CheckpointSaver> = Arc::new(SqliteSaver::open(&path).await.unwrap());
    assert!(
        !close_failing(saver.clone(), &path).await,
        "the close's writes were stored without its checkpoint"
    );
    // the control: the same failure through two calls leaves the writes
    let two_calls: Arc<dyn CheckpointSaver> = Arc::new(FaultySaver::new(saver));
    assert!(
        close_failing(two_calls, &path).await,
        "the injected failure did not fall between the writes and the checkpoint"
    );
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    let memory = || Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>;
    vec![
        harness::tokio("step_atomic::defer_stores_what_finish_stores", &[], 1, move || {
            defer_stores_what_finish_stores(memory())
        }),
        harness::tokio(
            "step_atomic::defer_stores_what_finish_stores_sqlite",
            &[],
            1,
            || async {
                let dir = tempfile::tempdir().unwrap();
                let saver = SqliteSaver::open(dir.path().join("steps.db")).await.unwrap();
                defer_stores_what_finish_stores(Arc::new(saver)).await;
            },
        ),
        harness::tokio(
            "step_atomic::a_failed_close_leaves_no_writes_without_their_checkpoint",
            &[],
            1,
            a_failed_close_leaves_no_writes_without_their_checkpoint,
        ),
    ]
}
