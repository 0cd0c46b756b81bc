//! `RedisSaver` against the server at `CHECKPOINTER_REDIS_URL` (default
//! `redis://127.0.0.1:6379`, see `redis_support`): the conformance suite,
//! the model-based property test, encryption at rest, the password kept
//! out of messages, and the key layout (one hash slot per thread); and on
//! a local Redis Cluster the tests start themselves (`cluster`); and
//! faults on servers the tests start and kill themselves (`faults`):
//! acknowledged puts surviving `SIGKILL` under `appendfsync always`,
//! connections killed mid-call (`CLIENT KILL`) or refused,
//! `response_timeout` against a stalled server, and a server busy with
//! another script.
//!
//! The harness is `tests/support/harness.rs` (`harness = false`): without a
//! reachable server the tests are reported ignored, with the reason,
//! outside CI, and fail in CI (`CI=true`). Each test uses key prefixes of
//! its own and removes its keys.

#[path = "../support/harness.rs"]
mod harness;

#[path = "../support/redis.rs"]
mod redis_support;

#[path = "../support/redis_cluster.rs"]
mod cluster_support;

#[path = "../support/fencing.rs"]
mod fencing_support;

#[path = "../support/step_crash.rs"]
mod step_crash_support;

#[path = "../support/retention.rs"]
mod retention_support;

mod auth;
mod cluster;

#[cfg(feature = "conformance")]
mod conformance;
#[cfg(feature = "encryption")]
mod encryption;
mod faults;
mod fencing;
#[cfg(feature = "conformance")]
mod model;
mod retain_crash;
mod saver;
mod step_crash;
mod tls;
mod ttl;
#[cfg(feature = "sqlite")]
mod verify;

/// A Redis (or Valkey) server at `CHECKPOINTER_REDIS_URL`.
pub(crate) static REDIS: harness::Need = harness::Need::new("Redis", redis_support::reachable);

/// A local Redis Cluster the tests start (`redis-server`, `redis-cli` on PATH).
pub(crate) static CLUSTER: harness::Need = harness::Need::new("a Redis Cluster", cluster_support::available);

fn main() {
    step_crash_support::child_if_asked();
    let mut tests = Vec::new();
    #[cfg(feature = "conformance")]
    tests.extend(conformance::tests());
    #[cfg(feature = "encryption")]
    tests.extend(encryption::tests());
    #[cfg(feature = "conformance")]
    tests.extend(model::tests());
    tests.extend(saver::tests());
    tests.extend(ttl::tests());
    tests.extend(cluster::tests());
    tests.extend(faults::tests());
    tests.extend(fencing::tests());
    tests.extend(step_crash::tests());
    tests.extend(retain_crash::tests());
    tests.extend(tls::tests());
    tests.extend(auth::tests());
    #[cfg(feature = "sqlite")]
    tests.extend(verify::tests());
    tests.push(harness::no_libtest_attributes("redis"));
    tests.push(harness::missing_need_is_reported_ignored(
        "saver::layout_marker_is_written_and_checked",
        &[("CHECKPOINTER_REDIS_URL", Some("redis://127.0.0.1:1"))],
    ));
    harness::main(tests)
}
