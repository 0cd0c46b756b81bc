//! Encryption at rest through `PostgresSaver`: with a serializer that
//! encrypts, nothing is stored in plaintext, and with one that refuses
//! plaintext, a value planted inline in the checkpoint JSONB (where Python's
//! saver keeps primitives) is refused on every read path exactly as a
//! plaintext blob is; a blob that does not decrypt is an
//! `Error::Encryption` too. Skipped without a server outside CI.

use crate::harness;
use crate::postgres_support;

use std::sync::Arc;

use checkpointer::postgres::PostgresSaver;
use checkpointer::serde::{EncryptedSerializer, Serializer};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, EncryptionError, Error, ListOptions, Value,
};

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
const ID1: &str = "1ef00000-0000-6000-8000-000000000001";
const ID2: &str = "1ef00000-0000-6000-8000-000000000002";

async fn saver(db: &postgres_support::TestDatabase, serde: EncryptedSerializer) -> PostgresSaver {
    PostgresSaver::builder()
        .url(postgres_support::url_of(&db.0))
        .max_connections(2)
        .serializer(Arc::new(serde) as Arc<dyn Serializer>)
        .open()
        .await
        .unwrap()
}

fn encrypted() -> EncryptedSerializer {
    EncryptedSerializer::from_key(KEY).unwrap()
}

async fn sql(db: &postgres_support::TestDatabase, statement: &str) {
    let client = postgres_support::connect(&db.0).await.unwrap();
    client.batch_execute(statement).await.unwrap();
}

/// Puts `id` (child of `parent`) with primitive and non-primitive values.
async fn put(saver: &PostgresSaver, parent: Option<&str>, id: &str) -> CheckpointConfig {
    put_in(saver, "t", parent, id).await
}

async fn put_in(saver: &PostgresSaver, thread: &str, parent: Option<&str>, id: &str) -> CheckpointConfig {
    let mut cp = Checkpoint::new(0);
    cp.id = id.to_owned();
    let mut versions = ChannelVersions::new();
    for (ch, value) in [
        ("secret", Value::from("hunter2-inline")),
        ("n", Value::Int(7)),
        ("none", Value::Nil),
        ("list", Value::from(vec!["hunter2-list"])),
    ] {
        cp.channel_values.insert(ch.into(), value);
        versions.insert(ch.into(), ChannelVersion::Int(1));
    }
    cp.channel_versions = versions.clone();
    let mut config = CheckpointConfig::new(thread);
    config.checkpoint_id = parent.map(str::to_owned);
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver.put(&config, &cp, &meta, &versions).await.unwrap()
}

#[track_caller]
fn assert_inline_refused<T: std::fmt::Debug>(what: &str, got: checkpointer::Result<T>) {
    match got {
        Err(Error::Encryption(EncryptionError::PlaintextRefused { tag })) => assert_eq!(tag, "jsonb", "{what}"),
        other => panic!("{what}: {other:?}"),
    }
}

/// Every read path refuses the inline value.
async fn assert_every_read_refuses(saver: &PostgresSaver, config: &CheckpointConfig, child: &CheckpointConfig) {
    assert_inline_refused("get_tuple", saver.get_tuple(config).await);
    assert_inline_refused("latest", saver.latest("t").await);
    assert_inline_refused(
        "list",
        saver
            .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
            .await,
    );
    assert_inline_refused(
        "list of all namespaces",
        saver.list_vec(None, ListOptions::default()).await,
    );
    assert_inline_refused(
        "delta history",
        saver
            .get_delta_channel_history(child, &["secret".to_owned(), "planted".to_owned()])
            .await,
    );
}

async fn nothing_is_stored_in_plaintext() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let saver = saver(&db, encrypted()).await;
    let config = put(&saver, None, ID1).await;
    saver
        .put_writes(&config, &[("w".into(), Value::from("hunter2-write"))], "task", "")
        .await
        .unwrap();
    let client = postgres_support::connect(&db.0).await.unwrap();
    let row = client
        .query_one(
            "SELECT checkpoint -> 'channel_values' = '{}'::jsonb, checkpoint::text LIKE '%hunter2%' FROM checkpoints",
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "values inline under encryption");
    assert!(!row.get::<_, bool>(1));
    for table in ["checkpoint_blobs", "checkpoint_writes"] {
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*), count(*) FILTER (WHERE type LIKE '%+aes'), \
                     count(*) FILTER (WHERE position('hunter2'::bytea IN blob) > 0) FROM {table}"
                ),
                &[],
            )
            .await
            .unwrap();
        let (all, sealed, plain): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        assert!(
            all > 0 && all == sealed && plain == 0,
            "{table}: {all} {sealed} {plain}"
        );
    }
    let tuple = saver.get_tuple(&config).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.channel_values["secret"], Value::from("hunter2-inline"));
    assert_eq!(tuple.checkpoint.channel_values["none"], Value::Nil);
}

async fn inline_plaintext_is_refused_on_every_read() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let saver = saver(&db, encrypted()).await;
    let config = put(&saver, None, ID1).await;
    let child = put(&saver, Some(ID1), ID2).await;

    // A channel the checkpoint has no blob for.
    sql(
        &db,
        "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,planted}', '\"evil\"')",
    )
    .await;
    assert_every_read_refuses(&saver, &config, &child).await;
    // Reading plaintext on purpose shows it (the planted value is data).
    let open = self::saver(&db, encrypted().allow_plaintext(true)).await;
    let tuple = open.get_tuple(&config).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.channel_values["planted"], Value::from("evil"));
    assert_eq!(tuple.checkpoint.channel_values["secret"], Value::from("hunter2-inline"));

    // Plaintext in place of a value whose encrypted blob was deleted.
    sql(
        &db,
        "UPDATE checkpoints SET checkpoint = checkpoint #- '{channel_values,planted}'; \
         DELETE FROM checkpoint_blobs WHERE channel = 'secret'; \
         UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,secret}', '\"evil\"')",
    )
    .await;
    assert_every_read_refuses(&saver, &config, &child).await;
    let tuple = open.get_tuple(&config).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.channel_values["secret"], Value::from("evil"));

    // An inline value a blob replaces is never handed out: the blob is.
    sql(
        &db,
        "UPDATE checkpoints SET checkpoint = checkpoint #- '{channel_values,secret}'; \
         UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,list}', '\"evil\"')",
    )
    .await;
    let tuple = saver.get_tuple(&config).await.unwrap().unwrap();
    assert_eq!(
        tuple.checkpoint.channel_values["list"],
        Value::from(vec!["hunter2-list"])
    );
}

async fn a_blob_that_does_not_decrypt_is_an_encryption_error() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let saver = saver(&db, encrypted()).await;
    // Another key's ciphertext, a flipped bit, a truncated payload.
    let other = EncryptedSerializer::from_key(b"fedcba9876543210")
        .unwrap()
        .dumps_typed(&Value::from("x"))
        .unwrap();
    let hex: String = other.data.iter().map(|b| format!("{b:02x}")).collect();
    for (case, (statement, check)) in [
        (
            format!("UPDATE checkpoint_blobs SET blob = '\\x{hex}'::bytea WHERE channel = 'list'"),
            (|e: &EncryptionError| matches!(e, EncryptionError::AuthenticationFailed)) as fn(&EncryptionError) -> bool,
        ),
        (
            "UPDATE checkpoint_blobs SET blob = set_byte(blob, 20, get_byte(blob, 20) # 1) WHERE channel = 'secret'"
                .to_owned(),
            |e| matches!(e, EncryptionError::AuthenticationFailed),
        ),
        (
            "UPDATE checkpoint_blobs SET blob = substring(blob FROM 1 FOR 10) WHERE channel = 'n'".to_owned(),
            |e| matches!(e, EncryptionError::Truncated { len: 10 }),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let thread = format!("t{case}");
        let config = put_in(&saver, &thread, None, ID1).await;
        let child = put_in(&saver, &thread, Some(ID1), ID2).await;
        sql(&db, &format!("{statement} AND thread_id = '{thread}'")).await;
        for (what, got) in [
            ("get_tuple", saver.get_tuple(&config).await.map(|_| ())),
            (
                "list",
                saver
                    .list_vec(Some(CheckpointConfig::new(&thread)), ListOptions::default())
                    .await
                    .map(|_| ()),
            ),
            (
                "delta history",
                saver
                    .get_delta_channel_history(&child, &["list".to_owned(), "secret".to_owned(), "n".to_owned()])
                    .await
                    .map(|_| ()),
            ),
        ] {
            match got {
                Err(Error::Encryption(e)) => assert!(check(&e), "{statement}: {what}: {e:?}"),
                other => panic!("{statement}: {what}: {other:?}"),
            }
        }
    }
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "encryption::nothing_is_stored_in_plaintext",
            &[&crate::POSTGRES],
            2,
            nothing_is_stored_in_plaintext,
        ),
        harness::tokio(
            "encryption::inline_plaintext_is_refused_on_every_read",
            &[&crate::POSTGRES],
            2,
            inline_plaintext_is_refused_on_every_read,
        ),
        harness::tokio(
            "encryption::a_blob_that_does_not_decrypt_is_an_encryption_error",
            &[&crate::POSTGRES],
            2,
            a_blob_that_does_not_decrypt_is_an_encryption_error,
        ),
    ]
}
