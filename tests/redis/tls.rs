//! TLS (`rediss://`, the `redis-tls` feature) against `redis-server`s the
//! tests start themselves with a throwaway CA (`tests/support/redis_tls.rs`:
//! the `openssl` command and a `redis-server` built with TLS): a round
//! trip and the whole conformance suite over TLS with the CA trusted, a
//! round trip on a three-master cluster whose nodes speak only TLS, a
//! server whose certificate no trusted CA signed refused with a prompt
//! [`Error::Storage`], mutual TLS, certificates that are not PEM refused,
//! and the password of a `rediss://` URL in no message or `Debug` output.
//!
//! Without the feature: a `rediss://` URL is refused with
//! [`Error::InvalidInput`] naming the feature.

use crate::harness;

use checkpointer::redis::RedisSaver;
use checkpointer::Error;

#[cfg(feature = "redis-tls")]
#[path = "../support/redis_tls.rs"]
mod redis_tls;

/// `openssl` and a `redis-server` built with TLS (the servers start).
#[cfg(feature = "redis-tls")]
pub(crate) static TLS: harness::Need = harness::Need::new("openssl and redis-server with TLS", redis_tls::available);

/// A Redis Cluster speaking only TLS (`redis-cli` too).
#[cfg(feature = "redis-tls")]
pub(crate) static TLS_CLUSTER: harness::Need =
    harness::Need::new("a Redis Cluster with TLS", redis_tls::cluster_available);

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    #[cfg_attr(not(feature = "redis-tls"), allow(unused_mut))]
    let mut out = vec![harness::tokio(
        "tls::rediss_needs_the_redis_tls_feature",
        &[],
        0,
        rediss_needs_the_redis_tls_feature,
    )];
    #[cfg(feature = "redis-tls")]
    with_tls::tests(&mut out);
    out
}

/// Without `redis-tls`, `rediss://` is refused before any connection, the
/// feature named; with it, certificates given with a `redis://` URL are.
/// The password shows in neither.
async fn rediss_needs_the_redis_tls_feature() {
    let err = RedisSaver::open("rediss://:hunter2@127.0.0.1:1").await.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!text.contains("hunter2"), "{text}");
    if cfg!(feature = "redis-tls") {
        // the feature is on: a connection is tried, and refused
        assert!(matches!(err, Error::Storage { .. }), "{err:?}");
    } else {
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
        assert!(text.contains("`redis-tls` feature"), "{text}");
        assert!(text.contains("rediss://:***@127.0.0.1:1"), "{text}");
        let err = RedisSaver::open_cluster(["rediss://:hunter2@127.0.0.1:1"])
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    }
}

#[cfg(feature = "redis-tls")]
mod with_tls {
    use super::redis_tls::{self, Tls, PASSWORD};
    use super::{TLS, TLS_CLUSTER};
    use crate::harness;
    use crate::redis_support::fresh_prefix;

    use std::time::{Duration, Instant};

    use checkpointer::redis::RedisSaver;
    use checkpointer::{
        ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
        CheckpointSaverExt, CheckpointSource, Error, ListOptions, Value,
    };

    /// A refused handshake is an error within this, not a hang.
    const BOUND: Duration = Duration::from_secs(15);

    pub(super) fn tests(out: &mut Vec<harness::Trial>) {
        out.push(harness::tokio(
            "tls::round_trip_over_rediss",
            &[&TLS],
            2,
            round_trip_over_rediss,
        ));
        out.push(harness::tokio(
            "tls::untrusted_server_is_a_storage_error",
            &[&TLS],
            2,
            untrusted_server_is_a_storage_error,
        ));
        out.push(harness::tokio(
            "tls::webpki_roots_by_default",
            &[&TLS],
            2,
            webpki_roots_by_default,
        ));
        out.push(harness::tokio(
            "tls::client_certificate_for_mutual_tls",
            &[&TLS],
            2,
            client_certificate_for_mutual_tls,
        ));
        out.push(harness::tokio(
            "tls::certificates_not_pem_are_invalid_input",
            &[&TLS],
            2,
            certificates_not_pem_are_invalid_input,
        ));
        out.push(harness::tokio(
            "tls::password_never_shows",
            &[&TLS],
            2,
            password_never_shows,
        ));
        out.push(harness::tokio(
            "tls::cluster_over_rediss",
            &[&TLS, &TLS_CLUSTER],
            2,
            cluster_over_rediss,
        ));
        #[cfg(feature = "conformance")]
        for check in checkpointer::conformance::checks() {
            out.push(conformance(check));
        }
    }

    fn tls() -> &'static Tls {
        redis_tls::tls().unwrap()
    }

    /// A saver on the password server, the CA trusted, on a fresh prefix.
    async fn saver() -> RedisSaver {
        RedisSaver::builder()
            .url(tls().url())
            .tls_root_ca_pem(tls().read("ca.pem"))
            .key_prefix(fresh_prefix())
            .open()
            .await
            .unwrap()
    }

    /// The error of opening `builder`, within [`BOUND`].
    async fn open_err(builder: checkpointer::redis::RedisSaverBuilder) -> Error {
        let started = Instant::now();
        let result = tokio::time::timeout(BOUND, builder.open())
            .await
            .unwrap_or_else(|_| panic!("open did not return within {BOUND:?}"));
        let err = result.expect_err("opened");
        eprintln!("  refused in {:?}: {err}", started.elapsed());
        err
    }

    async fn round_trip_over_rediss() {
        let saver = saver().await;
        let config = CheckpointConfig::new("thread-tls");
        let mut cp = Checkpoint::new(0);
        cp.channel_values.insert("messages".into(), Value::from("over TLS"));
        let mut versions = ChannelVersions::new();
        versions.insert("messages".into(), ChannelVersion::Int(1));
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
        let stored = saver.put(&config, &cp, &meta, &versions).await.unwrap();
        let writes = [("messages".to_owned(), Value::from("pending"))];
        saver.put_writes(&stored, &writes, "task-1", "").await.unwrap();
        let tuple = saver.get_tuple(&stored).await.unwrap().expect("the checkpoint");
        assert_eq!(tuple.checkpoint.channel_values["messages"], Value::from("over TLS"));
        assert_eq!(tuple.pending_writes.len(), 1);
        let listed = saver
            .list_vec(Some(config.clone()), ListOptions::default())
            .await
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].config, stored);
        saver.delete_thread("thread-tls").await.unwrap();
        assert!(saver.latest("thread-tls").await.unwrap().is_none());
    }

    /// A server whose certificate the trusted CA did not sign: a prompt
    /// `Error::Storage` naming the certificate.
    async fn untrusted_server_is_a_storage_error() {
        let err = open_err(
            RedisSaver::builder()
                .url(tls().url())
                .tls_root_ca_pem(tls().read("other-ca.pem")),
        )
        .await;
        assert!(matches!(err, Error::Storage { .. }), "{err:?}");
        assert!(!err.is_retryable(), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("certificate") && text.contains("tls_root_ca_pem"),
            "{text}"
        );
        assert!(!text.contains(PASSWORD), "{text}");
    }

    /// The webpki roots (no CA given) do not hold the test CA.
    async fn webpki_roots_by_default() {
        let err = open_err(RedisSaver::builder().url(tls().url())).await;
        assert!(matches!(err, Error::Storage { .. }), "{err:?}");
        assert!(err.to_string().to_lowercase().contains("certificate"), "{err}");
    }

    /// A server that requires a client certificate: refused without one,
    /// served with the CA-signed one.
    async fn client_certificate_for_mutual_tls() {
        let ca = tls().read("ca.pem");
        let err = open_err(RedisSaver::builder().url(tls().mtls_url()).tls_root_ca_pem(ca.clone())).await;
        assert!(matches!(err, Error::Storage { .. }), "{err:?}");
        assert!(err.to_string().contains("tls_client_cert_pem"), "{err}");
        let saver = RedisSaver::builder()
            .url(tls().mtls_url())
            .tls_root_ca_pem(ca)
            .tls_client_cert_pem(tls().read("client.pem"), tls().read("client.key"))
            .key_prefix(fresh_prefix())
            .open()
            .await
            .unwrap();
        let config = CheckpointConfig::new("thread-mtls");
        let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
        let stored = saver
            .put(&config, &Checkpoint::new(-1), &meta, &Default::default())
            .await
            .unwrap();
        assert_eq!(
            saver.latest("thread-mtls").await.unwrap().map(|t| t.config),
            Some(stored)
        );
    }

    /// Certificates that are not PEM, or given with a `redis://` URL:
    /// `Error::InvalidInput` before any connection; the key in no message.
    async fn certificates_not_pem_are_invalid_input() {
        let cases = [
            RedisSaver::builder().url(tls().url()).tls_root_ca_pem(b"junk".to_vec()),
            RedisSaver::builder()
                .url(tls().url())
                .tls_client_cert_pem(tls().read("client.pem"), b"KEY-BYTES-junk".to_vec()),
            RedisSaver::builder()
                .url(tls().url())
                .tls_client_cert_pem(b"junk".to_vec(), tls().read("client.key")),
            RedisSaver::builder()
                .url(format!("redis://:{PASSWORD}@127.0.0.1:{}", tls().port))
                .tls_root_ca_pem(tls().read("ca.pem")),
            RedisSaver::builder()
                .cluster([tls().url(), format!("redis://:{PASSWORD}@127.0.0.1:1")])
                .tls_root_ca_pem(tls().read("ca.pem")),
        ];
        let key = String::from_utf8(tls().read("client.key")).unwrap();
        let key_body = key.lines().nth(1).unwrap().to_owned();
        for builder in cases {
            let shown = format!("{builder:?}");
            assert!(!shown.contains(&key_body) && !shown.contains(PASSWORD), "{shown}");
            let err = open_err(builder).await;
            assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
            let text = format!("{err} {err:?}");
            for secret in [PASSWORD, "KEY-BYTES", key_body.as_str()] {
                assert!(!text.contains(secret), "{text}");
            }
        }
    }

    /// The password of a `rediss://` URL shows in no `Debug` output and no
    /// error: a wrong password, an untrusted server, a closed port.
    async fn password_never_shows() {
        let saver = saver().await;
        let shown = format!("{saver:?}");
        assert!(
            !shown.contains(PASSWORD) && shown.contains("rediss://:***@127.0.0.1"),
            "{shown}"
        );
        let builder = RedisSaver::builder()
            .url(tls().url())
            .tls_root_ca_pem(tls().read("ca.pem"));
        let shown = format!("{builder:?}");
        assert!(
            !shown.contains(PASSWORD) && shown.contains("tls_root_ca: true"),
            "{shown}"
        );
        let wrong = format!("rediss://:wrong-{PASSWORD}@127.0.0.1:{}", tls().port);
        let errors = [
            open_err(RedisSaver::builder().url(wrong).tls_root_ca_pem(tls().read("ca.pem"))).await,
            open_err(
                RedisSaver::builder()
                    .url(tls().url())
                    .tls_root_ca_pem(tls().read("other-ca.pem")),
            )
            .await,
            open_err(
                RedisSaver::builder()
                    .url(format!("rediss://:{PASSWORD}@127.0.0.1:1"))
                    .connection_timeout(Some(Duration::from_secs(2))),
            )
            .await,
            open_err(RedisSaver::builder().url(format!("rediss://:{PASSWORD}@127.0.0.1:bad"))).await,
        ];
        for err in errors {
            let text = format!("{err} {err:?}");
            assert!(!text.contains(PASSWORD), "{text}");
        }
    }

    /// A cluster whose nodes speak only TLS, the CA trusted: threads
    /// (spread over the masters) written, read back and listed; an
    /// untrusted CA is a prompt `Error::Storage`.
    async fn cluster_over_rediss() {
        let saver = RedisSaver::builder()
            .cluster(redis_tls::cluster_urls())
            .tls_root_ca_pem(tls().read("ca.pem"))
            .key_prefix(fresh_prefix())
            .open()
            .await
            .unwrap();
        let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
        let threads: Vec<String> = (0..24).map(|i| format!("thread-{i}")).collect();
        for t in &threads {
            let mut cp = Checkpoint::new(-1);
            cp.channel_values.insert("who".into(), Value::from(t.as_str()));
            let mut versions = ChannelVersions::new();
            versions.insert("who".into(), ChannelVersion::Int(1));
            cp.channel_versions = versions.clone();
            saver
                .put(&CheckpointConfig::new(t.clone()), &cp, &meta, &versions)
                .await
                .unwrap();
        }
        for t in &threads {
            let tuple = saver.latest(t).await.unwrap().expect("the checkpoint");
            assert_eq!(tuple.checkpoint.channel_values["who"], Value::from(t.as_str()));
        }
        let listed = saver.list_threads(Default::default()).await.unwrap();
        assert_eq!(listed.len(), threads.len());
        let err = open_err(
            RedisSaver::builder()
                .cluster(redis_tls::cluster_urls())
                .tls_root_ca_pem(tls().read("other-ca.pem")),
        )
        .await;
        assert!(matches!(err, Error::Storage { .. }), "{err:?}");
    }

    /// One conformance check on the password server over TLS.
    #[cfg(feature = "conformance")]
    fn conformance(check: &'static checkpointer::conformance::Check) -> harness::Trial {
        use checkpointer::conformance::Outcome;
        use std::sync::Arc;
        let name = check.name();
        harness::tokio(&format!("tls::conformance::{name}"), &[&TLS], 2, move || async move {
            let shared: Arc<dyn CheckpointSaver> = Arc::new(saver().await);
            match check.run(&*shared).await {
                Outcome::Passed => {}
                Outcome::Skipped(reason) => panic!("conformance check `{name}` did not run: {reason}"),
                Outcome::Failed(failure) => panic!("conformance check `{name}` failed: {failure}"),
            }
        })
    }
}
