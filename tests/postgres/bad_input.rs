//! The bad-input catalogue's PostgreSQL rows (`docs/reliability.md`, B44,
//! B45, B51, B53–B55): JSONB columns of the wrong shape, plaintext planted
//! where an encrypting saver keeps values, passwords in every
//! connection-string form, the server's own messages, a silent network
//! partition. Each row runs on a fresh database.

use crate::catalogue_support::{self, put_values, ID1};
use crate::harness;
use crate::postgres_support;

use std::sync::Arc;

use checkpointer::postgres::PostgresSaver;
use checkpointer::serde::Serializer;
use checkpointer::{CheckpointConfig, CheckpointSaver, Error, Value};

/// A saver on a fresh database, storing through `serde` (the default one
/// when `None`), and the database.
async fn fresh(serde: Option<Arc<dyn Serializer>>) -> (PostgresSaver, postgres_support::TestDatabase) {
    let db = postgres_support::fresh_database()
        .await
        .expect("a PostgreSQL server (the row needs one)");
    let mut builder = PostgresSaver::builder()
        .url(postgres_support::url_of(&db.0))
        .max_connections(4);
    if let Some(serde) = serde {
        builder = builder.serializer(serde);
    }
    (builder.open().await.unwrap(), db)
}

async fn sql(db: &postgres_support::TestDatabase, statement: &str) {
    let client = postgres_support::connect(&db.0).await.unwrap();
    client.batch_execute(statement).await.unwrap();
}

/// Runs each statement on thread `bad` of a fresh database (see
/// [`catalogue_support::each_statement_is_serde`]).
async fn each_statement_is_serde(statements: &[&str], listed: bool) {
    let (saver, db) = fresh(None).await;
    catalogue_support::each_statement_is_serde(&saver, statements, listed, |statement| sql(&db, statement)).await;
}

/// B44: the checkpoint JSONB of the wrong shape.
async fn b44_corrupt_checkpoint_column() {
    each_statement_is_serde(
        &[
            r#"UPDATE checkpoints SET checkpoint = '{"v": "four", "id": 7, "channel_versions": {}}' WHERE thread_id = 'bad'"#,
            // The server itself refuses to expand a non-object
            // `channel_versions` (`jsonb_each_text`, SQLSTATE 22023): stored
            // data, so Serde like the rest.
            r#"UPDATE checkpoints SET checkpoint = '{"v": 4, "channel_versions": [1]}' WHERE thread_id = 'bad'"#,
        ],
        true,
    )
    .await;
}

/// B45: the metadata JSONB an array.
async fn b45_corrupt_metadata_column() {
    each_statement_is_serde(
        &["UPDATE checkpoints SET metadata = '[1, 2]' WHERE thread_id = 'bad'"],
        false,
    )
    .await;
}

/// B51: plaintext where Python's saver keeps primitives, in place of the
/// deleted encrypted blob: `PlaintextRefused` (tag `jsonb`) from
/// `get_tuple`, `list` and delta history.
#[cfg(feature = "encryption")]
async fn b51_inline_plaintext_under_encryption() {
    use checkpointer::serde::EncryptedSerializer;
    use checkpointer::{CheckpointSaverExt, EncryptionError, ListOptions};
    let serde = EncryptedSerializer::from_key(b"0123456789abcdef0123456789abcdef").unwrap();
    let (saver, db) = fresh(Some(Arc::new(serde))).await;
    let config = put_values(
        &saver,
        &CheckpointConfig::new("t"),
        ID1,
        &[("x", Value::from("secret"))],
    )
    .await
    .unwrap();
    sql(
        &db,
        "DELETE FROM checkpoint_blobs; UPDATE checkpoints SET checkpoint = \
         jsonb_set(checkpoint, '{channel_values,x}', '\"evil\"')",
    )
    .await;
    fn refused<T: std::fmt::Debug>(what: &str, got: checkpointer::Result<T>) {
        match got {
            Err(Error::Encryption(EncryptionError::PlaintextRefused { tag })) => assert_eq!(tag, "jsonb", "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    refused("get_tuple", saver.get_tuple(&config).await);
    refused(
        "list",
        saver
            .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
            .await,
    );
    let child = put_values(
        &saver,
        &config,
        "1ef00000-0000-6000-8000-000000000002",
        &[("y", Value::from(vec![1]))],
    )
    .await
    .unwrap();
    refused(
        "delta history",
        saver.get_delta_channel_history(&child, &["x".to_owned()]).await,
    );
}

/// Connection strings with the password `SECRET-pw`, unreachable.
const PASSWORD_FORMS: &[&str] = &[
    "postgres://u:SECRET-pw@127.0.0.1:1/db?connect_timeout=2",
    "postgresql://u:SECRET%2Dpw@127.0.0.1:1/db?connect_timeout=2",
    "postgresql://u@127.0.0.1:1/db?password=SECRET-pw&connect_timeout=2",
    "postgresql://u@127.0.0.1:1/db?connect_timeout=2&PassWord=SECRET%2Dpw&password=SECRET-pw",
    "host=127.0.0.1 port=1 password=SECRET-pw connect_timeout=2",
    "host=127.0.0.1 port=1 password = 'SECRET-pw \\' x' connect_timeout=2",
    "postgres://u:SECRET-pw@127.0.0.1:notaport/db",
    "host=127.0.0.1 password=SECRET-pw bogus=1",
    "host=127.0.0.1 password=SECRET -pw x",
];

/// B53: a password in every connection-string form is masked in `redact`,
/// the builder's `Debug`, parse and connection errors.
async fn b53_passwords_in_every_connection_string_form() {
    let hidden = |what: &str, text: &str| {
        for needle in ["SECRET", "-pw", "%2Dpw"] {
            assert!(!text.contains(needle), "{what}: {needle:?} in {text}");
        }
    };
    for form in PASSWORD_FORMS {
        hidden(form, &checkpointer::secret::redact(form));
        let builder = PostgresSaver::builder().url(*form);
        hidden(form, &format!("{builder:?}"));
        match builder.build() {
            Err(e) => hidden(form, &format!("{e} {e:?}")),
            Ok(saver) => {
                hidden(form, &format!("{saver:?}"));
                let e = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
                assert!(e.is_retryable(), "{form}: {e:?}");
                hidden(form, &format!("{e} {e:?}"));
            }
        }
    }
}

/// B54: a server error with a detail and a hint shows SQLSTATE, message,
/// detail and hint, never only "db error".
async fn b54_server_errors_keep_the_servers_message() {
    let (saver, db) = fresh(None).await;
    sql(
        &db,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         RAISE EXCEPTION 'refused by policy' USING DETAIL = 'thread is frozen', HINT = 'ask the owner'; \
         END $$; CREATE TRIGGER refuse BEFORE INSERT ON checkpoint_writes FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    .await;
    let config = put_values(&saver, &CheckpointConfig::new("t"), ID1, &[]).await.unwrap();
    let e = saver
        .put_writes(&config, &[("w".into(), Value::from(1))], "task", "")
        .await
        .unwrap_err();
    let shown = e.to_string();
    for needle in ["P0001", "refused by policy", "thread is frozen", "ask the owner"] {
        assert!(shown.contains(needle), "{needle:?} not in {shown}");
    }
    assert!(!shown.contains("db error"), "{shown}");
}

/// B55: a silent network partition is a retryable `Storage` error after the
/// call timeout; the saver works again once the network does.
async fn b55_silent_network_partition() {
    let (_saver, db) = fresh(None).await;
    let (upstream, user) = postgres_support::upstream();
    let proxy = postgres_support::Proxy::start(upstream).await;
    let saver = PostgresSaver::builder()
        .url(format!("postgresql://{user}@127.0.0.1:{}/{}", proxy.port, db.0))
        .call_timeout(Some(std::time::Duration::from_secs(2)))
        .build()
        .unwrap();
    let config = CheckpointConfig::new("t");
    assert!(saver.get_tuple(&config).await.unwrap().is_none());
    proxy.partition(true);
    let got = tokio::time::timeout(std::time::Duration::from_secs(30), saver.get_tuple(&config)).await;
    match got {
        Ok(Err(e)) => assert!(matches!(e, Error::Storage { .. }) && e.is_retryable(), "{e:?}"),
        other => panic!("{other:?}"),
    }
    proxy.partition(false);
    assert!(saver.get_tuple(&config).await.unwrap().is_none());
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    let needs = &[&crate::POSTGRES];
    #[cfg_attr(not(feature = "encryption"), allow(unused_mut))]
    let mut out = vec![
        harness::tokio(
            "bad_input::b44_corrupt_checkpoint_column",
            needs,
            2,
            b44_corrupt_checkpoint_column,
        ),
        harness::tokio(
            "bad_input::b45_corrupt_metadata_column",
            needs,
            2,
            b45_corrupt_metadata_column,
        ),
        harness::tokio(
            "bad_input::b53_passwords_in_every_connection_string_form",
            needs,
            2,
            b53_passwords_in_every_connection_string_form,
        ),
        harness::tokio(
            "bad_input::b54_server_errors_keep_the_servers_message",
            needs,
            2,
            b54_server_errors_keep_the_servers_message,
        ),
        harness::tokio(
            "bad_input::b55_silent_network_partition",
            needs,
            2,
            b55_silent_network_partition,
        ),
    ];
    #[cfg(feature = "encryption")]
    out.push(harness::tokio(
        "bad_input::b51_inline_plaintext_under_encryption",
        needs,
        2,
        b51_inline_plaintext_under_encryption,
    ));
    out
}
