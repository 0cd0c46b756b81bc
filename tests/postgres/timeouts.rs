//! A silent network partition between `PostgresSaver` and its server: a TCP
//! proxy that stops forwarding (and drops what it reads, as a partitioned
//! network does) makes every call return within the call timeout — a
//! retryable `Error::Storage` when nothing was committed, a non-retryable one
//! that says the outcome is unknown when the change had been sent — and the
//! saver works again as soon as the proxy forwards again. Also the
//! server-side `statement_timeout` of the builder. Skipped without a server
//! outside CI.

use crate::harness;
use crate::postgres_support;

use std::time::Duration;

use checkpointer::postgres::PostgresSaver;
use checkpointer::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, Error, ListOptions, ListThreadsOptions, PruneStrategy, Value,
};

fn id(i: u32) -> String {
    format!("1ef00000-0000-6000-8000-{i:012x}")
}

async fn put(saver: &PostgresSaver, thread: &str, i: u32) -> checkpointer::Result<CheckpointConfig> {
    let mut cp = Checkpoint::new(0);
    cp.id = id(i);
    cp.channel_values.insert("x".into(), Value::from(vec![i]));
    cp.channel_versions
        .insert("x".into(), ChannelVersion::Int(i64::from(i)));
    let versions = cp.channel_versions.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, i64::from(i));
    saver.put(&CheckpointConfig::new(thread), &cp, &meta, &versions).await
}

/// A call under a partition: an error within the test's patience.
async fn bounded<T>(what: &str, call: impl std::future::Future<Output = checkpointer::Result<T>>) -> Error {
    match tokio::time::timeout(Duration::from_secs(30), call).await {
        Ok(Ok(_)) => panic!("{what}: succeeded through a partition"),
        Ok(Err(e)) => e,
        Err(_) => panic!("{what}: hung past the call timeout"),
    }
}

#[track_caller]
fn assert_retryable_timeout(what: &str, e: &Error) {
    assert!(matches!(e, Error::Storage { .. }) && e.is_retryable(), "{what}: {e:?}");
    assert!(e.to_string().contains("nothing was committed"), "{what}: {e}");
}

async fn a_silent_partition_times_out_and_the_saver_recovers() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    postgres_support::saver_on(&db.0, Default::default(), 1)
        .setup()
        .await
        .unwrap();
    let (upstream, user) = postgres_support::upstream();
    let proxy = postgres_support::Proxy::start(upstream).await;
    let saver = PostgresSaver::builder()
        .url(format!("postgresql://{user}@127.0.0.1:{}/{}", proxy.port, db.0))
        .max_connections(2)
        .call_timeout(Some(Duration::from_secs(2)))
        .connect_timeout(Duration::from_secs(20))
        .keepalives_idle(Duration::from_secs(5))
        .keepalives_interval(Duration::from_secs(1))
        .keepalives_retries(3)
        .tcp_user_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let first = put(&saver, "t", 1).await.unwrap();
    assert!(saver.get_tuple(&first).await.unwrap().is_some());

    // The pooled connection sends the put, which is lost: the outcome is
    // unknown to the saver.
    proxy.partition(true);
    let e = bounded("put", put(&saver, "t", 2)).await;
    assert!(matches!(e, Error::Storage { .. }) && !e.is_retryable(), "put: {e:?}");
    assert!(e.to_string().contains("may or may not have been applied"), "{e}");

    // New connections cannot even start: nothing is sent that could commit.
    let e = bounded("get_tuple", saver.get_tuple(&first)).await;
    assert_retryable_timeout("get_tuple", &e);
    let e = bounded("list", saver.list_vec(None, ListOptions::default())).await;
    assert_retryable_timeout("list", &e);
    let e = bounded("list_threads", saver.list_threads(ListThreadsOptions::default())).await;
    assert_retryable_timeout("list_threads", &e);
    let e = bounded("put", put(&saver, "t", 3)).await;
    assert_retryable_timeout("put on a new connection", &e);
    let e = bounded(
        "put_writes",
        saver.put_writes(&first, &[("w".into(), Value::from(1))], "task", ""),
    )
    .await;
    assert_retryable_timeout("put_writes", &e);
    let e = bounded("delete_thread", saver.delete_thread("t")).await;
    assert_retryable_timeout("delete_thread", &e);
    let e = bounded("copy_thread", saver.copy_thread("t", "u")).await;
    assert_retryable_timeout("copy_thread", &e);
    let e = bounded("prune", saver.prune(&["t".into()], PruneStrategy::KeepLatest)).await;
    assert_retryable_timeout("prune", &e);
    let e = bounded("delta history", saver.get_delta_channel_history(&first, &["x".into()])).await;
    assert_retryable_timeout("delta history", &e);
    let e = bounded("migration_version", saver.migration_version()).await;
    assert_retryable_timeout("migration_version", &e);

    // The network comes back: so does the saver, with nothing half done.
    proxy.partition(false);
    let mut tries = 0;
    let second = loop {
        match put(&saver, "t", 2).await {
            Ok(c) => break c,
            Err(e) if e.is_retryable() && tries < 5 => tries += 1,
            Err(e) => panic!("after the partition: {e:?}"),
        }
    };
    let ids: Vec<String> = saver
        .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.checkpoint.id)
        .collect();
    assert_eq!(ids, [id(2), id(1)]);
    assert!(saver.get_tuple(&second).await.unwrap().is_some());
}

async fn statement_timeout_cancels_on_the_server() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let saver = PostgresSaver::builder()
        .url(postgres_support::url_of(&db.0))
        .max_connections(1)
        .statement_timeout(Some(Duration::from_millis(300)))
        .open()
        .await
        .unwrap();
    let client = saver.pool().get().await.unwrap();
    let row = client.query_one("SHOW statement_timeout", &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "300ms");
    drop(client);
    // A statement stuck behind a lock is cancelled by the server: retryable.
    let locker = postgres_support::connect(&db.0).await.unwrap();
    locker
        .batch_execute("BEGIN; LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let e = bounded("get_tuple", saver.get_tuple(&CheckpointConfig::new("t"))).await;
    assert!(e.is_retryable(), "{e:?}");
    assert!(e.to_string().contains("57014"), "{e}");
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert!(saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_none());
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "timeouts::a_silent_partition_times_out_and_the_saver_recovers",
            &[&crate::POSTGRES],
            2,
            a_silent_partition_times_out_and_the_saver_recovers,
        ),
        harness::tokio(
            "timeouts::statement_timeout_cancels_on_the_server",
            &[&crate::POSTGRES],
            2,
            statement_timeout_cancels_on_the_server,
        ),
    ]
}
