//! `testing::FaultySaver`: injected failures and delays, and
//! a caller's retry loop tested against them.

use crate::harness;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use checkpointer::testing::{Call, Fault, FaultySaver, InjectedError, Op};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, Error, InMemorySaver, ListOptions, Value,
};
use futures::StreamExt;

/// A caller's retry policy: retry retryable errors up to `attempts` times
/// with a short doubling backoff; give up at once on any other error.
async fn with_retry<T, F, Fut>(attempts: u32, mut op: F) -> (Result<T, Error>, u32)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let mut backoff = Duration::from_millis(1);
    let mut tries = 0;
    loop {
        tries += 1;
        match op().await {
            Err(err) if err.is_retryable() && tries < attempts => {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            out => return (out, tries),
        }
    }
}

fn faulty() -> FaultySaver<InMemorySaver> {
    FaultySaver::new(Arc::new(InMemorySaver::new()))
}

fn checkpoint(step: i64, value: &str) -> (Checkpoint, CheckpointMetadata, ChannelVersions) {
    let mut cp = Checkpoint::new(step);
    cp.channel_values.insert("x".into(), Value::from(value));
    let mut versions = ChannelVersions::new();
    versions.insert("x".into(), ChannelVersion::Int(step + 1));
    cp.channel_versions = versions.clone();
    (cp, CheckpointMetadata::new(CheckpointSource::Loop, step), versions)
}

async fn retry_loop_recovers_from_transient_put_failures() {
    let saver = faulty();
    saver.inject(Fault::on(Op::Put).times(2).fail(InjectedError::Retryable));
    let (cp, meta, versions) = checkpoint(0, "a");
    let cfg = CheckpointConfig::new("t");
    let (out, tries) = with_retry(5, || saver.put(&cfg, &cp, &meta, &versions)).await;
    let stored = out.unwrap();
    assert_eq!(tries, 3);
    assert_eq!(saver.calls(Op::Put), 3);
    assert_eq!(saver.injected_failures(), 2);
    assert_eq!(saver.inner().checkpoint_count(), 1);
    let tuple = saver.get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.channel_values["x"], Value::from("a"));
}

async fn fatal_errors_are_not_retried() {
    let saver = faulty();
    saver.inject(Fault::on(Op::Put).fail(InjectedError::Fatal));
    let (cp, meta, versions) = checkpoint(0, "a");
    let cfg = CheckpointConfig::new("t");
    let (out, tries) = with_retry(5, || saver.put(&cfg, &cp, &meta, &versions)).await;
    let err = out.unwrap_err();
    assert!(matches!(err, Error::Storage { retryable: false, .. }), "{err:?}");
    assert_eq!(tries, 1);
    assert_eq!(saver.inner().checkpoint_count(), 0);
}

async fn retry_loop_gives_up_and_nothing_is_stored() {
    let saver = faulty();
    saver.inject(Fault::on(Op::PutWrites).fail(InjectedError::Retryable));
    let (cp, meta, versions) = checkpoint(0, "a");
    let stored = saver
        .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
        .await
        .unwrap();
    let writes = [("x".to_owned(), Value::from("w"))];
    let (out, tries) = with_retry(4, || saver.put_writes(&stored, &writes, "task", "")).await;
    assert!(out.unwrap_err().is_retryable());
    assert_eq!(tries, 4);
    let tuple = saver.inner().get_tuple(&stored).await.unwrap().unwrap();
    assert!(tuple.pending_writes.is_empty());
}

/// The connection drops after the commit: the caller sees an error although
/// the write happened. Savers' idempotence (same checkpoint id, same
/// (task, idx)) makes the retry safe: exactly one copy remains.
async fn ambiguous_outcome_retry_leaves_exactly_one_copy() {
    let saver = faulty();
    saver.inject(Fault::on(Op::Put).nth(1).fail_after(InjectedError::Retryable));
    saver.inject(Fault::on(Op::PutWrites).nth(1).fail_after(InjectedError::Retryable));
    let (cp, meta, versions) = checkpoint(0, "a");
    let cfg = CheckpointConfig::new("t");
    let (out, tries) = with_retry(3, || saver.put(&cfg, &cp, &meta, &versions)).await;
    let stored = out.unwrap();
    assert_eq!(tries, 2);
    let writes = [("x".to_owned(), Value::from("w")), ("y".to_owned(), Value::from("v"))];
    let (out, tries) = with_retry(3, || saver.put_writes(&stored, &writes, "task", "")).await;
    out.unwrap();
    assert_eq!(tries, 2);
    assert_eq!(saver.inner().checkpoint_count(), 1);
    let all = saver.inner().list_vec(None, ListOptions::default()).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].pending_writes.len(), 2);
}

/// A delayed call is cut short by the caller's timeout; the retry (the delay
/// rule spent) succeeds.
async fn delays_trip_the_callers_timeout() {
    let saver = faulty();
    saver.inject(Fault::on(Op::GetTuple).times(1).delay(Duration::from_secs(30)));
    let (cp, meta, versions) = checkpoint(0, "a");
    let stored = saver
        .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let first = tokio::time::timeout(Duration::from_millis(50), saver.get_tuple(&stored)).await;
    assert!(first.is_err(), "the delayed call must time out");
    assert!(started.elapsed() < Duration::from_secs(5));
    let second = tokio::time::timeout(Duration::from_secs(5), saver.get_tuple(&stored)).await;
    assert_eq!(second.unwrap().unwrap().unwrap().config, stored);
    assert_eq!(saver.calls(Op::GetTuple), 2);
    assert_eq!(saver.injected_failures(), 0);
}

async fn small_delays_add_up_and_the_call_still_succeeds() {
    let saver = faulty();
    saver.inject(Fault::any().delay(Duration::from_millis(20)));
    saver.inject(Fault::on(Op::DeleteThread).delay(Duration::from_millis(20)));
    let started = std::time::Instant::now();
    saver.delete_thread("nobody").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(40));
}

/// Faults chosen by a predicate hit only matching calls; `nth` counts every
/// call of the operation, failed ones included.
async fn predicates_and_call_numbers_select_calls() {
    let saver = faulty();
    saver.inject(
        Fault::on(Op::Put)
            .when(|call: &Call| call.thread_id.as_deref() == Some("bad"))
            .fail(InjectedError::Fatal),
    );
    saver.inject(Fault::on(Op::Put).nth(3).fail(InjectedError::Retryable));
    let (cp, meta, versions) = checkpoint(0, "a");
    // call 1: thread "bad" fails (Fatal)
    let err = saver
        .put(&CheckpointConfig::new("bad"), &cp, &meta, &versions)
        .await
        .unwrap_err();
    assert!(!err.is_retryable());
    // call 2: fine
    saver
        .put(&CheckpointConfig::new("good"), &cp, &meta, &versions)
        .await
        .unwrap();
    // call 3: the nth rule
    let err = saver
        .put(&CheckpointConfig::new("good"), &cp, &meta, &versions)
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    assert!(err.to_string().contains("put call #3"), "{err}");
    // call 4: fine again
    saver
        .put(&CheckpointConfig::new("good"), &cp, &meta, &versions)
        .await
        .unwrap();
    assert_eq!(saver.inner().thread_ids(), ["good"]);
    assert_eq!(saver.calls(Op::Put), 4);
    assert_eq!(saver.injected_failures(), 2);
}

async fn custom_errors_see_the_call() {
    let saver = faulty();
    saver.inject(
        Fault::on(Op::CopyThread).fail(InjectedError::custom(|call: &Call| Error::ThreadExists {
            thread_id: format!("{}#{}", call.thread_id.clone().unwrap_or_default(), call.n),
        })),
    );
    match saver.copy_thread("src", "dst").await {
        Err(Error::ThreadExists { thread_id }) => assert_eq!(thread_id, "src#1"),
        other => panic!("{other:?}"),
    }
    saver.clear();
    saver.copy_thread("src", "dst").await.unwrap();
}

async fn list_faults_fail_the_stream() {
    let saver = faulty();
    for step in 0..3 {
        let (cp, meta, versions) = checkpoint(step, "a");
        saver
            .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
            .await
            .unwrap();
    }
    saver.inject(Fault::on(Op::List).nth(1).fail(InjectedError::Retryable));
    saver.inject(Fault::on(Op::List).nth(2).fail_after(InjectedError::Fatal));
    let items: Vec<_> = saver.list(None, ListOptions::default()).collect().await;
    assert_eq!(items.len(), 1);
    assert!(items[0].as_ref().unwrap_err().is_retryable());
    let items: Vec<_> = saver.list(None, ListOptions::default()).collect().await;
    assert_eq!(items.len(), 4);
    assert!(items[..3].iter().all(Result::is_ok));
    assert!(items[3].is_err());
    assert_eq!(saver.list_vec(None, ListOptions::default()).await.unwrap().len(), 3);
}

/// Without faults the wrapper is invisible: the whole conformance suite
/// passes through it, but for the checks of encoded I/O, which the wrapper
/// does not have (its calls would bypass the fault plan).
async fn without_faults_the_wrapper_passes_conformance() {
    use checkpointer::conformance::Capability;
    let saver = faulty();
    saver.inject(Fault::any().delay(Duration::ZERO));
    let report = checkpointer::conformance::run_all(&saver).await;
    assert!(report.is_success(), "{report}");
    let encoded = checkpointer::conformance::checks()
        .iter()
        .filter(|c| c.capability() == Capability::Encoded)
        .count();
    assert!(encoded > 0);
    let fencing = checkpointer::conformance::checks()
        .iter()
        .filter(|c| c.capability() == Capability::Fencing)
        .count();
    assert!(fencing > 0);
    assert!(
        report
            .skipped()
            .all(|r| r.capability == Capability::Encoded || r.capability == Capability::Fencing),
        "{report}"
    );
    assert_eq!(report.skipped().count(), encoded + fencing);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "faulty_saver::retry_loop_recovers_from_transient_put_failures",
            &[],
            0,
            retry_loop_recovers_from_transient_put_failures,
        ),
        harness::tokio(
            "faulty_saver::fatal_errors_are_not_retried",
            &[],
            0,
            fatal_errors_are_not_retried,
        ),
        harness::tokio(
            "faulty_saver::retry_loop_gives_up_and_nothing_is_stored",
            &[],
            0,
            retry_loop_gives_up_and_nothing_is_stored,
        ),
        harness::tokio(
            "faulty_saver::ambiguous_outcome_retry_leaves_exactly_one_copy",
            &[],
            0,
            ambiguous_outcome_retry_leaves_exactly_one_copy,
        ),
        harness::tokio(
            "faulty_saver::delays_trip_the_callers_timeout",
            &[],
            0,
            delays_trip_the_callers_timeout,
        ),
        harness::tokio(
            "faulty_saver::small_delays_add_up_and_the_call_still_succeeds",
            &[],
            0,
            small_delays_add_up_and_the_call_still_succeeds,
        ),
        harness::tokio(
            "faulty_saver::predicates_and_call_numbers_select_calls",
            &[],
            0,
            predicates_and_call_numbers_select_calls,
        ),
        harness::tokio(
            "faulty_saver::custom_errors_see_the_call",
            &[],
            0,
            custom_errors_see_the_call,
        ),
        harness::tokio(
            "faulty_saver::list_faults_fail_the_stream",
            &[],
            0,
            list_faults_fail_the_stream,
        ),
        harness::tokio(
            "faulty_saver::without_faults_the_wrapper_passes_conformance",
            &[],
            0,
            without_faults_the_wrapper_passes_conformance,
        ),
    ]
}
