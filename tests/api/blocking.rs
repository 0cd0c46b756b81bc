//! The blocking facade works outside any runtime, inside a multi-thread
//! runtime, and refuses (without panicking) inside a current-thread runtime.

use crate::harness;
use std::sync::Arc;

use checkpointer::blocking::BlockingSaver;
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Error, InMemorySaver,
    ListOptions, Value,
};

fn put_one(saver: &BlockingSaver, thread: &str) -> CheckpointConfig {
    let mut cp = Checkpoint::new(0);
    let v = checkpointer::version::next_version(None).unwrap();
    cp.channel_values.insert("x".into(), Value::from(1));
    cp.channel_versions.insert("x".into(), v.clone());
    let nv = ChannelVersions::from([("x".to_owned(), v)]);
    saver
        .put(
            &CheckpointConfig::new(thread),
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &nv,
        )
        .unwrap()
}

fn works_without_a_runtime() {
    let saver = BlockingSaver::new(Arc::new(InMemorySaver::new()));
    let cfg = put_one(&saver, "t1");
    saver
        .put_writes(&cfg, &[("y".to_owned(), Value::from("w"))], "task", "")
        .unwrap();
    let t = saver.get_tuple(&CheckpointConfig::new("t1")).unwrap().unwrap();
    assert_eq!(t.checkpoint.channel_values["x"], Value::from(1));
    assert_eq!(t.pending_writes.len(), 1);
    assert_eq!(saver.list(None, ListOptions::default()).unwrap().len(), 1);
    saver.delete_thread("t1").unwrap();
    assert!(saver.get(&CheckpointConfig::new("t1")).unwrap().is_none());
}

fn works_inside_a_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let saver = BlockingSaver::new(Arc::new(InMemorySaver::new()));
        put_one(&saver, "t2");
        assert!(saver.get_tuple(&CheckpointConfig::new("t2")).unwrap().is_some());
    });
}

fn refuses_inside_a_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let saver = BlockingSaver::new(Arc::new(InMemorySaver::new()));
        let err = saver.get_tuple(&CheckpointConfig::new("t3")).unwrap_err();
        assert!(matches!(err, Error::BlockingInAsync { .. }), "{err}");
        assert!(!err.is_retryable());
    });
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test("blocking::works_without_a_runtime", &[], works_without_a_runtime),
        harness::test(
            "blocking::works_inside_a_multi_thread_runtime",
            &[],
            works_inside_a_multi_thread_runtime,
        ),
        harness::test(
            "blocking::refuses_inside_a_current_thread_runtime",
            &[],
            refuses_inside_a_current_thread_runtime,
        ),
    ]
}
