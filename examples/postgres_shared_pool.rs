//! Two savers sharing one connection pool, in two tasks, on one thread of
//! history: a "graph" task writes checkpoints while a "reviewer" task reads
//! each one and attaches its feedback as a pending write, which the graph
//! then finds on its next read. This is how several services (or several
//! parts of one) share a PostgreSQL database with each other and with Python
//! LangGraph apps.
//!
//! ```sh
//! cargo run --example postgres_shared_pool --features postgres
//! DATABASE_URL=postgresql://user@host:5432/db cargo run --example postgres_shared_pool --features postgres
//! ```
//!
//! Without `DATABASE_URL` it uses the database `checkpointer_example` on the
//! local server (`postgresql://postgres@127.0.0.1:5432`), creating it when
//! missing; a given `DATABASE_URL` must name a database that exists.

use std::sync::Arc;

use checkpointer::postgres::deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use checkpointer::postgres::{tokio_postgres, PostgresSaver};
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSaverExt,
    CheckpointSource, ListOptions, Value,
};
use tokio::sync::mpsc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = match std::env::var("DATABASE_URL") {
        Ok(url) => url,
        Err(_) => default_database().await?,
    };

    // One pool for the whole application (it could serve other queries too).
    let config: tokio_postgres::Config = url.parse()?;
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager).max_size(8).build()?;

    // Two savers on it, e.g. owned by two components that know nothing of
    // each other. Neither holds a lock: their calls run in parallel.
    // `open` runs Python's migrations (a no-op when they ran); the second
    // saver needs no setup of its own, so `build` (no I/O) is enough.
    let graph_saver = PostgresSaver::builder().pool(pool.clone()).open().await?;
    let reviewer_saver: Arc<dyn CheckpointSaver> = Arc::new(PostgresSaver::builder().pool(pool).build()?);

    let thread = format!("shared-pool-demo-{}", std::process::id());
    let (to_reviewer, mut checkpoints) = mpsc::channel::<CheckpointConfig>(4);
    let (to_graph, mut reviewed) = mpsc::channel::<()>(4);

    let reviewer = tokio::spawn(async move {
        while let Some(config) = checkpoints.recv().await {
            let tuple = reviewer_saver.get_tuple(&config).await?.expect("the graph saved it");
            let draft = tuple.checkpoint.channel_values["draft"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            let feedback = format!("reviewed {draft:?}: ok");
            reviewer_saver
                .put_writes(&config, &[("feedback".into(), Value::from(feedback))], "reviewer", "")
                .await?;
            to_graph.send(()).await?;
        }
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    });

    let mut parent = CheckpointConfig::new(&thread);
    let mut versions = ChannelVersions::new();
    for step in 0..3 {
        let mut checkpoint = Checkpoint::new(step);
        let version = graph_saver.get_next_version(versions.get("draft"))?;
        versions.insert("draft".into(), version);
        checkpoint
            .channel_values
            .insert("draft".into(), Value::from(format!("draft #{step}")));
        checkpoint.channel_versions = versions.clone();
        let metadata = CheckpointMetadata::new(CheckpointSource::Loop, step);
        parent = graph_saver.put(&parent, &checkpoint, &metadata, &versions).await?;
        to_reviewer.send(parent.clone()).await?;
        reviewed.recv().await;
        // The reviewer's write is now a pending write of our checkpoint.
        let latest = graph_saver.latest(&thread).await?.expect("just saved");
        let feedback = &latest.pending_writes[0];
        println!(
            "step {step}: {} wrote {:?} = {:?}",
            feedback.task_id, feedback.channel, feedback.value
        );
    }
    drop(to_reviewer);
    reviewer.await?.map_err(|e| e.to_string())?;

    let history = graph_saver
        .list_vec(Some(CheckpointConfig::new(&thread)), ListOptions::default())
        .await?;
    println!("{} checkpoints in {thread}, newest first:", history.len());
    for t in &history {
        println!(
            "  {}  draft={:?}  pending writes={}",
            t.checkpoint.id,
            t.checkpoint.channel_values["draft"],
            t.pending_writes.len()
        );
    }
    graph_saver.delete_thread(&thread).await?;
    Ok(())
}

/// The example's own database on the local server, created when missing.
async fn default_database() -> Result<String, Box<dyn std::error::Error>> {
    const SERVER: &str = "postgresql://postgres@127.0.0.1:5432";
    let (client, connection) = tokio_postgres::connect(&format!("{SERVER}/postgres"), tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = 'checkpointer_example'", &[])
        .await?
        .is_some();
    if !exists {
        client.batch_execute("CREATE DATABASE checkpointer_example").await?;
    }
    Ok(format!("{SERVER}/checkpointer_example"))
}
