//! Configuration and permission failures are permanent:
//! a missing database (3D000), a role that may not log in or does not exist
//! (28000), a database the role may not connect to (42501), a TLS setup the
//! server cannot meet and an invalid connection configuration are
//! `Error::Storage` with `retryable: false`, on `open` and on every call,
//! while an unreachable server and an exhausted pool stay retryable. Before,
//! every failure to connect was reported retryable, so a retry loop spun
//! forever. (pg_hba on the test server trusts 127.0.0.1, so a wrong password
//! cannot be refused there: the roles above stand for class 28.)

use crate::harness;
use crate::postgres_support;

use std::time::Duration;

use checkpointer::postgres::PostgresSaver;
use checkpointer::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error, Value,
};
use postgres_support::{connect, server_url, url_of};

/// A role made for one test, dropped (with what it owns) when this goes
/// out of scope.
struct TestRole(String);

impl TestRole {
    async fn create(options: &str) -> TestRole {
        let name = format!("ckpt_test_role_{}_{:08x}", std::process::id(), rand::random::<u32>());
        connect("postgres")
            .await
            .unwrap()
            .batch_execute(&format!("CREATE ROLE \"{name}\" {options}"))
            .await
            .unwrap();
        TestRole(name)
    }
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let name = self.0.clone();
        postgres_support::block_on_thread(async move {
            if let Ok(admin) = connect("postgres").await {
                let _ = admin.batch_execute(&format!("DROP ROLE IF EXISTS \"{name}\"")).await;
            }
        });
    }
}

/// `url` with user `user` instead of the server URL's.
fn as_user(user: &str, db: &str) -> String {
    let server = server_url();
    let rest = server.split_once("://").map_or(server.as_str(), |(_, r)| r);
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    format!("postgresql://{user}@{host}/{db}")
}

fn saver_at(url: &str) -> PostgresSaver {
    PostgresSaver::builder()
        .url(url)
        .max_connections(2)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

async fn put(saver: &PostgresSaver) -> checkpointer::Result<CheckpointConfig> {
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("x".into(), Value::from(1));
    cp.channel_versions.insert("x".into(), ChannelVersion::Int(1));
    let versions = cp.channel_versions.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver.put(&CheckpointConfig::new("t"), &cp, &meta, &versions).await
}

/// `err` is a storage error that says it is not retryable and names `words`.
#[track_caller]
fn permanent(what: &str, err: &Error, words: &str) {
    assert!(matches!(err, Error::Storage { .. }), "{what}: {err:?}");
    assert!(!err.is_retryable(), "{what}: reported retryable: {err}");
    assert!(err.to_string().contains(words), "{what}: {words:?} not in {err}");
}

/// Every way in (`open`, `setup`, a read, a write) fails for `url`
/// permanently, naming `words`.
async fn refused_everywhere(what: &str, url: &str, words: &str) {
    let err = PostgresSaver::builder()
        .url(url)
        .connect_timeout(Duration::from_secs(5))
        .open()
        .await
        .unwrap_err();
    permanent(&format!("{what}: open"), &err, words);
    let saver = saver_at(url);
    permanent(&format!("{what}: setup"), &saver.setup().await.unwrap_err(), words);
    let err = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
    permanent(&format!("{what}: get_tuple"), &err, words);
    permanent(&format!("{what}: put"), &put(&saver).await.unwrap_err(), words);
}

async fn a_missing_database_is_permanent() {
    let missing = format!("ckpt_test_missing_{}_{:08x}", std::process::id(), rand::random::<u32>());
    refused_everywhere("missing database", &url_of(&missing), "3D000").await;
}

async fn a_refused_role_is_permanent() {
    let role = TestRole::create("NOLOGIN").await;
    refused_everywhere("NOLOGIN role", &as_user(&role.0, "postgres"), "28000").await;
    let ghost = format!("ckpt_test_no_role_{}", std::process::id());
    refused_everywhere("unknown role", &as_user(&ghost, "postgres"), "28000").await;
}

async fn a_database_the_role_may_not_connect_to_is_permanent() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let role = TestRole::create("LOGIN").await;
    connect(&db.0)
        .await
        .unwrap()
        .batch_execute(&format!("REVOKE CONNECT ON DATABASE \"{}\" FROM PUBLIC", db.0))
        .await
        .unwrap();
    refused_everywhere("no CONNECT privilege", &as_user(&role.0, &db.0), "42501").await;
}

/// A configuration tokio_postgres refuses before it connects: no host.
async fn an_invalid_configuration_is_permanent() {
    let mut config = checkpointer::postgres::tokio_postgres::Config::new();
    config.user("postgres").dbname("postgres");
    let saver = PostgresSaver::builder().config(config).build().unwrap();
    let err = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
    permanent("no host", &err, "invalid configuration");
    permanent("no host: put", &put(&saver).await.unwrap_err(), "invalid configuration");
}

/// TLS required with no TLS set up, and a server certificate no trusted CA
/// signed (the test server's own): permanent.
async fn a_tls_setup_the_server_cannot_meet_is_permanent() {
    let url = format!("{}?sslmode=require", url_of("postgres"));
    let saver = saver_at(&url);
    let err = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
    permanent("sslmode=require without TLS", &err, "TLS");
    #[cfg(feature = "postgres-tls")]
    {
        // The server must speak TLS for its certificate to be refused.
        let admin = connect("postgres").await.unwrap();
        let ssl: String = admin.query_one("SHOW ssl", &[]).await.unwrap().get(0);
        assert_eq!(
            ssl, "on",
            "the test server has no TLS: the check below would prove nothing"
        );
        let saver = PostgresSaver::builder()
            .url(&url)
            .tls_with_webpki_roots()
            .unwrap()
            .build()
            .unwrap();
        let err = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
        permanent("untrusted server certificate", &err, "certificate");
        permanent(
            "untrusted server certificate: put",
            &put(&saver).await.unwrap_err(),
            "certificate",
        );
    }
}

/// What may pass stays retryable: no server listening, and a pool whose
/// connections are all taken.
async fn passing_failures_stay_retryable() {
    let err = saver_at("postgresql://postgres@127.0.0.1:1/postgres")
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "refused connection: {err}");
    let Some(db) = postgres_support::shared_database() else {
        return;
    };
    let saver = PostgresSaver::builder()
        .url(url_of(&db))
        .max_connections(1)
        .wait_timeout(Some(Duration::from_millis(100)))
        .build()
        .unwrap();
    let held = saver.pool().get().await.unwrap();
    let err = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
    assert!(err.is_retryable(), "exhausted pool: {err}");
    drop(held);
    saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap();
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "permanent::a_missing_database_is_permanent",
            &[&crate::POSTGRES],
            2,
            a_missing_database_is_permanent,
        ),
        harness::tokio(
            "permanent::a_refused_role_is_permanent",
            &[&crate::POSTGRES],
            2,
            a_refused_role_is_permanent,
        ),
        harness::tokio(
            "permanent::a_database_the_role_may_not_connect_to_is_permanent",
            &[&crate::POSTGRES],
            2,
            a_database_the_role_may_not_connect_to_is_permanent,
        ),
        harness::tokio(
            "permanent::an_invalid_configuration_is_permanent",
            &[],
            2,
            an_invalid_configuration_is_permanent,
        ),
        harness::tokio(
            "permanent::a_tls_setup_the_server_cannot_meet_is_permanent",
            &[&crate::POSTGRES],
            2,
            a_tls_setup_the_server_cannot_meet_is_permanent,
        ),
        harness::tokio(
            "permanent::passing_failures_stay_retryable",
            &[&crate::POSTGRES],
            2,
            passing_failures_stay_retryable,
        ),
    ]
}
