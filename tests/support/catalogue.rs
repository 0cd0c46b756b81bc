//! Shared by the test binaries of the SQL savers (a module
//! `catalogue_support` of each): the rows of the bad-input catalogue
//! (`docs/reliability.md`) that alter stored columns behind the saver's back.
#![allow(dead_code)]

use std::future::Future;

use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, Error, ListOptions, Value,
};

/// The id of the checkpoints the rows put.
pub const ID1: &str = "1ef00000-0000-6000-8000-000000000001";

/// Puts checkpoint `id` in `config`'s thread with `values` (all new).
pub async fn put_values<S: CheckpointSaver + ?Sized>(
    saver: &S,
    config: &CheckpointConfig,
    id: &str,
    values: &[(&str, Value)],
) -> checkpointer::Result<CheckpointConfig> {
    let mut cp = Checkpoint::new(0);
    cp.id = id.to_owned();
    let mut versions = ChannelVersions::new();
    for (ch, v) in values {
        cp.channel_values.insert((*ch).to_owned(), v.clone());
        versions.insert((*ch).to_owned(), ChannelVersion::Int(1));
    }
    cp.channel_versions = versions.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver.put(config, &cp, &meta, &versions).await
}

/// Checkpoint [`ID1`] of a new thread `thread` holding `x` = `value`.
pub async fn put_x<S: CheckpointSaver + ?Sized>(saver: &S, thread: &str, value: &str) -> CheckpointConfig {
    put_values(saver, &CheckpointConfig::new(thread), ID1, &[("x", Value::from(value))])
        .await
        .unwrap()
}

/// Runs each statement (by `run`) on thread `bad` and checks that
/// `get_tuple` (and `list`, when `listed`) answer `Serde` while thread
/// `good` stays readable.
pub async fn each_statement_is_serde<'s, S, F, Fut>(saver: &S, statements: &[&'s str], listed: bool, mut run: F)
where
    S: CheckpointSaver + ?Sized,
    F: FnMut(&'s str) -> Fut,
    Fut: Future<Output = ()>,
{
    let good = put_x(saver, "good", "kept").await;
    let bad = put_x(saver, "bad", "v").await;
    for &statement in statements {
        run(statement).await;
        let got = saver.get_tuple(&bad).await;
        assert!(matches!(got, Err(Error::Serde { .. })), "{statement}: {got:?}");
        if listed {
            let listed = saver
                .list_vec(Some(CheckpointConfig::all_namespaces("bad")), ListOptions::default())
                .await
                .map(|v| v.len());
            assert!(matches!(listed, Err(Error::Serde { .. })), "{statement}: {listed:?}");
        }
        let kept = saver.get_tuple(&good).await.unwrap().unwrap();
        assert_eq!(kept.checkpoint.channel_values["x"], Value::from("kept"));
    }
}
