//! One scenario on a fresh saver of every backend: the runner the walks of
//! the runtime kit share (`thread_state`, `thread_branch`, `step_sends`,
//! `subgraph_resume`).

use std::future::Future;
use std::sync::Arc;

use checkpointer::prelude::*;

use crate::harness::{self, Trial};

/// A saver as the walks take it.
pub(crate) type Saver = Arc<dyn CheckpointSaver>;

/// One trial per backend built in, named `<stem>on_memory`,
/// `<stem>on_a_sqlite_file`, `<stem>on_postgres` and `<stem>on_redis`, each
/// running `scenario` on a new saver: in memory, on a SQLite file in a
/// temporary directory, on the shared PostgreSQL database (2 connections,
/// prepared statements) and on the Redis at `CHECKPOINTER_REDIS_URL`. The
/// memory trial runs on a runtime of `memory_workers` (0: current-thread),
/// the others on two worker threads.
pub(crate) fn trials<F, Fut>(stem: &str, memory_workers: usize, scenario: F) -> Vec<Trial>
where
    F: Fn(Saver) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    #[allow(unused_mut)]
    let mut trials = vec![harness::tokio(
        &format!("{stem}on_memory"),
        &[],
        memory_workers,
        move || scenario(Arc::new(InMemorySaver::new())),
    )];
    #[cfg(feature = "sqlite")]
    trials.push(harness::tokio(
        &format!("{stem}on_a_sqlite_file"),
        &[],
        2,
        move || async move {
            let dir = tempfile::tempdir().unwrap();
            let saver = checkpointer::sqlite::SqliteSaver::open(dir.path().join("s.sqlite"))
                .await
                .unwrap();
            scenario(Arc::new(saver)).await;
        },
    ));
    #[cfg(feature = "postgres")]
    trials.push(harness::tokio(
        &format!("{stem}on_postgres"),
        &[&crate::POSTGRES],
        2,
        move || async move {
            let Some(db) = crate::postgres_support::shared_database() else {
                return;
            };
            let saver = crate::postgres_support::saver_on(&db, checkpointer::postgres::StatementMode::Prepared, 2);
            scenario(Arc::new(saver)).await;
        },
    ));
    #[cfg(feature = "redis")]
    trials.push(harness::tokio(
        &format!("{stem}on_redis"),
        &[&crate::REDIS],
        2,
        move || async move {
            let saver = checkpointer::redis::RedisSaver::open(crate::redis_support::url())
                .await
                .unwrap();
            scenario(Arc::new(saver)).await;
        },
    ));
    trials
}
