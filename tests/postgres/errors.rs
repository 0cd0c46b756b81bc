//! What `PostgresSaver`'s errors say: a server error keeps the server's
//! message (severity, SQLSTATE, message, detail, hint), and no error or
//! `Debug` output shows a password, in any connection-string form.
//! Skipped without a server outside CI (the redaction checks run always).

use crate::harness;
use crate::postgres_support;

use checkpointer::postgres::PostgresSaver;
use checkpointer::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error, Value,
};

const ID1: &str = "1ef00000-0000-6000-8000-000000000001";

fn saver_on(db: &postgres_support::TestDatabase) -> PostgresSaver {
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
fn text_of(e: &Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(" | ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

async fn server_errors_keep_the_servers_message() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
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

/// Connection strings carrying the password `SECRET-pw` in every form
/// `tokio_postgres` reads, pointing at a port nobody listens on.
const UNREACHABLE: &[&str] = &[
    "postgres://u:SECRET-pw@127.0.0.1:1/db?connect_timeout=2",
    "postgresql://u:SECRET%2Dpw@127.0.0.1:1/db?connect_timeout=2",
    "postgresql://u@127.0.0.1:1/db?password=SECRET-pw&connect_timeout=2",
    "postgresql://u@127.0.0.1:1/db?connect_timeout=2&password=SECRET%2Dpw",
    "host=127.0.0.1 port=1 user=u password=SECRET-pw connect_timeout=2",
    "host=127.0.0.1 port=1 user=u password = 'SECRET-pw \\' x' connect_timeout=2",
];

/// Strings that do not parse, with a password in them.
const MALFORMED: &[&str] = &[
    "postgres://u:SECRET-pw@127.0.0.1:notaport/db",
    "postgresql://u@h/db?password=SECRET-pw&bogus=1",
    "postgresql://u@h/db?password=SECRET-pw&sslmode=sometimes",
    "host=h password=SECRET-pw bogus=1",
    "host=h password=SECRET -pw x",
    "host=h password=SECRET-pw -pw",
    "host=h password='SECRET-pw",
    "host=h sslpassword=SECRET-pw",
];

#[track_caller]
fn assert_no_secret(what: &str, shown: &str) {
    for needle in ["SECRET", "-pw", "%2Dpw"] {
        assert!(!shown.contains(needle), "{what}: {needle:?} in {shown}");
    }
}

fn malformed_strings_never_show_their_password() {
    for text in MALFORMED {
        let err = PostgresSaver::builder().url(*text).build().unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{text}: {err:?}");
        assert_no_secret(text, &format!("{err} {err:?} {}", text_of(&err)));
    }
    let err = PostgresSaver::builder()
        .url("postgresql://u@h/db?bogus=1")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("unknown option `bogus`"), "{err}");
}

/// `open` refuses a malformed string with the same typed error as `build`,
/// before any I/O, and without its password.
async fn open_refuses_malformed_strings_without_their_password() {
    for text in MALFORMED {
        let err = PostgresSaver::open(*text).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{text}: {err:?}");
        assert_no_secret(text, &format!("{err} {err:?} {}", text_of(&err)));
        let err = PostgresSaver::builder().url(*text).open().await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{text}: {err:?}");
    }
    let err = PostgresSaver::builder().open().await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}

/// `open` on a server nobody listens at fails with the storage error a call
/// would give (retryable), and shows neither in `Display` nor in `Debug` the
/// URL's password.
async fn open_of_an_unreachable_server_never_shows_the_password() {
    let err = PostgresSaver::open("postgresql://u:hunter2@127.0.0.1:1/x")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Storage { .. }), "{err:?}");
    assert!(err.is_retryable(), "{err:?}");
    for shown in [err.to_string(), format!("{err:?}"), format!("{err:#?}"), text_of(&err)] {
        assert!(!shown.contains("hunter2"), "{shown}");
    }
    for text in UNREACHABLE {
        let err = PostgresSaver::open(*text).await.unwrap_err();
        assert!(matches!(err, Error::Storage { .. }), "{text}: {err:?}");
        assert_no_secret(text, &format!("{err} {err:?} {}", text_of(&err)));
    }
}

fn builder_debug_masks_the_password() {
    for text in UNREACHABLE {
        let builder = PostgresSaver::builder().url(*text);
        let shown = format!("{builder:?}");
        assert!(shown.contains("127.0.0.1"), "{shown}");
        assert_no_secret(text, &shown);
        let saver = builder.build().unwrap();
        assert_no_secret(text, &format!("{saver:?}"));
    }
}

async fn connection_errors_never_show_the_password() {
    for text in UNREACHABLE {
        let saver = PostgresSaver::builder().url(*text).build().unwrap();
        let err = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
        assert!(err.is_retryable(), "{text}: {err:?}");
        assert_no_secret(text, &format!("{err} {err:?} {}", text_of(&err)));
        let err = saver.setup().await.unwrap_err();
        assert_no_secret(text, &format!("{err} {err:?} {}", text_of(&err)));
    }
}

/// `error_message` (what the CLI prints for its own queries) gives the
/// server's words where `tokio_postgres::Error`'s `Display` says "db error",
/// also through a pool error.
async fn error_message_keeps_the_servers_words() {
    use checkpointer::postgres::error_message;
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let client = postgres_support::connect(&db.0).await.unwrap();
    let e = client.query("SELECT * FROM missing_table", &[]).await.unwrap_err();
    assert_eq!(e.to_string(), "db error");
    let shown = error_message(&e);
    assert!(shown.contains("42P01") && shown.contains("missing_table"), "{shown}");

    let saver = PostgresSaver::builder()
        .url(postgres_support::url_of("ckpt_no_such_database"))
        .build()
        .unwrap();
    let e = saver.pool().get().await.unwrap_err();
    assert!(!e.to_string().contains("3D000"), "{e}");
    let shown = error_message(&e);
    assert!(shown.contains("3D000") && shown.contains("does not exist"), "{shown}");
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "errors::server_errors_keep_the_servers_message",
            &[&crate::POSTGRES],
            2,
            server_errors_keep_the_servers_message,
        ),
        harness::test(
            "errors::malformed_strings_never_show_their_password",
            &[],
            malformed_strings_never_show_their_password,
        ),
        harness::tokio(
            "errors::open_refuses_malformed_strings_without_their_password",
            &[],
            0,
            open_refuses_malformed_strings_without_their_password,
        ),
        harness::tokio(
            "errors::open_of_an_unreachable_server_never_shows_the_password",
            &[],
            2,
            open_of_an_unreachable_server_never_shows_the_password,
        ),
        harness::test(
            "errors::builder_debug_masks_the_password",
            &[],
            builder_debug_masks_the_password,
        ),
        harness::tokio(
            "errors::connection_errors_never_show_the_password",
            &[],
            2,
            connection_errors_never_show_the_password,
        ),
        harness::tokio(
            "errors::error_message_keeps_the_servers_words",
            &[&crate::POSTGRES],
            2,
            error_message_keeps_the_servers_words,
        ),
    ]
}
