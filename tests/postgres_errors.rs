//! What `PostgresSaver`'s errors say: a server error keeps the server's
//! message (severity, SQLSTATE, message, detail, hint), and no error or
//! `Debug` output shows a password, in any connection-string form.
//! Skipped without a server outside CI (the redaction checks run always).

mod postgres_support;

use checkpointer::postgres::PostgresSaver;
use checkpointer::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error, Value,
};

const ID1: &str = "1ef00000-0000-6000-8000-000000000001";

struct Db(String);

impl Drop for Db {
    fn drop(&mut self) {
        let name = self.0.clone();
        postgres_support::block_on_thread(async move { postgres_support::drop_database(&name).await });
    }
}

async fn database() -> Option<Db> {
    match postgres_support::create_database().await {
        Ok(name) => Some(Db(name)),
        Err(reason) => {
            postgres_support::skip(&reason);
            None
        }
    }
}

fn saver_on(db: &Db) -> PostgresSaver {
    PostgresSaver::builder()
        .url(postgres_support::url_of(&db.0))
        .max_connections(2)
        .build()
        .unwrap()
}

async fn put(saver: &PostgresSaver, thread: &str) -> checkpointer::Result<CheckpointConfig> {
    let mut cp = Checkpoint::new(0);
    cp.id = ID1.to_owned();
    cp.channel_values.insert("x".into(), Value::from(vec![1]));
    cp.channel_versions.insert("x".into(), ChannelVersion::Int(1));
    let versions = cp.channel_versions.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver.put(&CheckpointConfig::new(thread), &cp, &meta, &versions).await
}

/// The error's whole text: its `Display` and its causes.
fn text(e: &Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(" | ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_keep_the_servers_message() {
    let Some(db) = database().await else { return };
    let saver = saver_on(&db);

    // No tables yet: the server says which relation is missing.
    let err = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains("42P01"), "{shown}");
    assert!(shown.contains("relation \"checkpoints\" does not exist"), "{shown}");
    assert!(!shown.contains("db error"), "{shown}");
    assert!(matches!(err, Error::Storage { .. }), "{err:?}");

    saver.setup().await.unwrap();
    // A server-side refusal with a detail and a hint (a policy trigger).
    let client = postgres_support::connect(&db.0).await.unwrap();
    client
        .batch_execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             RAISE EXCEPTION 'refused by policy' USING DETAIL = 'thread is frozen', HINT = 'ask the owner', \
             ERRCODE = 'P0001'; END $$; \
             CREATE TRIGGER refuse BEFORE INSERT ON checkpoints FOR EACH ROW \
             WHEN (NEW.thread_id = 'frozen') EXECUTE FUNCTION refuse()",
        )
        .await
        .unwrap();
    let err = put(&saver, "frozen").await.unwrap_err();
    let shown = err.to_string();
    for needle in ["P0001", "refused by policy", "thread is frozen", "ask the owner"] {
        assert!(shown.contains(needle), "{needle:?} not in {shown}");
    }
    assert!(!err.is_retryable(), "{err:?}");

    // A data exception on a read (stored JSONB of the wrong shape).
    put(&saver, "bent").await.unwrap();
    client
        .batch_execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_versions}', '[1]') \
             WHERE thread_id = 'bent'",
        )
        .await
        .unwrap();
    let err = saver.get_tuple(&CheckpointConfig::new("bent")).await.unwrap_err();
    let shown = err.to_string();
    assert!(matches!(err, Error::Serde { .. }), "{err:?}");
    assert!(shown.contains("22023") && shown.contains("non-object"), "{shown}");
    assert!(!shown.contains("db error"), "{shown}");
}
