//! The conformance suite against `RedisSaver`: one test per check
//! (`conformance::<check>`), each on a key prefix of its own, removed
//! afterwards; with the `encryption` feature once more with every value
//! stored through `EncryptedSerializer` (`conformance_encrypted::<check>`),
//! and once with a TTL (an hour, renewed on reads: `conformance_ttl::<check>`),
//! which must change nothing a check can see.

use crate::harness;
use crate::redis_support;

use std::sync::Arc;

use checkpointer::conformance::{checks, Outcome};
use checkpointer::redis::RedisSaver;
use checkpointer::{CheckpointSaver, InMemorySaver};

/// The tests of this module, for the harness of `main.rs`; also checks
/// that Redis declares every operation the memory saver does.
pub(crate) fn tests() -> Vec<harness::Trial> {
    let mut out = vec![harness::test(
        "conformance::declares_what_memory_declares",
        &[&crate::REDIS],
        || {
            redis_support::block_on_thread(async {
                let saver = redis_support::saver().await;
                assert_eq!(saver.capabilities(), InMemorySaver::new().capabilities());
                redis_support::cleanup(saver.key_prefix()).await;
            });
        },
    )];
    out.push(harness::tokio(
        "conformance::refuses_nul_in_ids_only",
        &[&crate::REDIS],
        2,
        refuses_nul_in_ids_only,
    ));
    let mut modules = vec![("conformance", Variant::Plain), ("conformance_ttl", Variant::Ttl)];
    if cfg!(feature = "encryption") {
        modules.push(("conformance_encrypted", Variant::Encrypted));
    }
    for (module, variant) in modules {
        for check in checks() {
            out.push(trial(module, variant, check));
        }
    }
    out
}

#[derive(Clone, Copy)]
enum Variant {
    Plain,
    Encrypted,
    Ttl,
}

fn trial(module: &str, variant: Variant, check: &'static checkpointer::conformance::Check) -> harness::Trial {
    let name = check.name();
    harness::tokio(&format!("{module}::{name}"), &[&crate::REDIS], 2, move || async move {
        let saver: RedisSaver = match variant {
            Variant::Encrypted => encrypted_saver().await,
            Variant::Plain => redis_support::saver().await,
            Variant::Ttl => RedisSaver::builder()
                .url(redis_support::url())
                .key_prefix(redis_support::fresh_prefix())
                .ttl(checkpointer::redis::TtlConfig::minutes(60.0).refresh_on_read(true))
                .open()
                .await
                .unwrap(),
        };
        let prefix = saver.key_prefix().to_owned();
        let shared: Arc<dyn CheckpointSaver> = Arc::new(saver);
        let outcome = check.run(&*shared).await;
        redis_support::cleanup(&prefix).await;
        match outcome {
            Outcome::Passed => {}
            Outcome::Skipped(reason) => panic!("conformance check `{name}` did not run: {reason}"),
            Outcome::Failed(failure) => panic!("conformance check `{name}` failed: {failure}"),
        }
    })
}

#[cfg(feature = "encryption")]
async fn encrypted_saver() -> RedisSaver {
    let serde = checkpointer::serde::EncryptedSerializer::from_key(b"0123456789abcdef").expect("a 16-byte key");
    RedisSaver::builder()
        .url(redis_support::url())
        .key_prefix(redis_support::fresh_prefix())
        .serializer(Arc::new(serde))
        .open()
        .await
        .unwrap()
}

#[cfg(not(feature = "encryption"))]
async fn encrypted_saver() -> RedisSaver {
    unreachable!("listed only with the encryption feature")
}

/// U+0000 separates the members of Redis's indexes: thread ids, namespaces
/// and checkpoint ids holding it are refused (`InvalidInput`, nothing
/// stored); everything else the catalogue's rows B02, B07–B09, B11 and B17
/// offer is stored.
async fn refuses_nul_in_ids_only() {
    use checkpointer::conformance::identifiers::{refusals, Refusals};
    let saver = redis_support::saver().await;
    let got = refusals(&saver).await;
    redis_support::cleanup(saver.key_prefix()).await;
    assert_eq!(
        got.unwrap(),
        Refusals {
            nul_in_ids: true,
            ..Refusals::default()
        }
    );
}
