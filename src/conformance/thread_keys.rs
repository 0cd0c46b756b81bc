//! Checks of [`CheckpointSaver::thread_keys`] (ours).

use super::*;
use crate::checkpoint::channels;
use crate::saver::{CheckpointKey, ThreadKeys, WriteKey};

fn checkpoint_key(config: &CheckpointConfig, parent: Option<&CheckpointConfig>) -> CheckpointKey {
    CheckpointKey {
        checkpoint_ns: config.ns().to_owned(),
        checkpoint_id: id_of(config).to_owned(),
        parent_checkpoint_id: parent.map(|p| id_of(p).to_owned()),
    }
}

fn write_key(config: &CheckpointConfig, task_id: &str, task_path: &str, idx: i64, channel: &str) -> WriteKey {
    WriteKey {
        checkpoint_ns: config.ns().to_owned(),
        checkpoint_id: id_of(config).to_owned(),
        task_id: task_id.to_owned(),
        task_path: task_path.to_owned(),
        idx,
        channel: channel.to_owned(),
    }
}

/// Every checkpoint of every namespace with its parent, and every write
/// with its task path and index, sorted by (namespace, id) and (namespace,
/// checkpoint, task path, task id, idx) by code point.
pub async fn thread_keys_lists_checkpoints_and_writes(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let root = put_chain(s, &generate_config(&t), 2).await?;
    // "child:é" sorts after "child:z" by code point, not in most collations
    let accent = put_chain(s, &generate_config(&t).with_ns("child:é"), 1).await?;
    let child = put_chain(s, &generate_config(&t).with_ns("child:z"), 1).await?;
    put_writes(
        s,
        &root[1],
        &[
            ("b", Value::Int(1)),
            (channels::ERROR, Value::from("e")),
            ("a", Value::Int(2)),
        ],
        "task-b",
        "~__pregel_pull, n",
    )
    .await?;
    put_writes(s, &root[1], &[("a", Value::Int(3))], "task-a", "~__pregel_pull, n").await?;
    put_writes(s, &root[0], &[("z", Value::Int(4))], "task-z", "").await?;
    put_writes(s, &child[0], &[("c", Value::Int(5))], "task-c", "p").await?;
    let got = s.thread_keys(&t).await?;
    let want = ThreadKeys {
        checkpoints: vec![
            checkpoint_key(&root[0], None),
            checkpoint_key(&root[1], Some(&root[0])),
            checkpoint_key(&child[0], None),
            checkpoint_key(&accent[0], None),
        ],
        writes: vec![
            write_key(&root[0], "task-z", "", 0, "z"),
            write_key(&root[1], "task-a", "~__pregel_pull, n", 0, "a"),
            write_key(&root[1], "task-b", "~__pregel_pull, n", -1, channels::ERROR),
            write_key(&root[1], "task-b", "~__pregel_pull, n", 0, "b"),
            write_key(&root[1], "task-b", "~__pregel_pull, n", 2, "a"),
            write_key(&child[0], "task-c", "p", 0, "c"),
        ],
    };
    ensure_eq!(got, want, "keys of the thread");
    ensure_eq!(
        got.namespaces(),
        vec![("", 2), ("child:z", 1), ("child:é", 1)],
        "namespaces"
    );
    Ok(())
}

/// A thread that was never written, or was deleted, has no keys; the keys of
/// one thread never include another's.
pub async fn thread_keys_of_unknown_or_deleted_thread_are_empty(s: &dyn CheckpointSaver) -> CheckResult {
    let (t, other) = (new_thread_id(), new_thread_id());
    ensure_eq!(
        s.thread_keys(&t).await?,
        ThreadKeys::default(),
        "a thread never written"
    );
    let configs = put_chain(s, &generate_config(&t), 1).await?;
    put_writes(s, &configs[0], &[("a", Value::Int(1))], "task", "").await?;
    put_chain(s, &generate_config(&other), 1).await?;
    s.delete_thread(&t).await?;
    ensure_eq!(s.thread_keys(&t).await?, ThreadKeys::default(), "a deleted thread");
    ensure_eq!(s.thread_keys(&other).await?.checkpoints.len(), 1, "the other thread");
    Ok(())
}

/// Writes saved against a checkpoint id that is not stored are listed with
/// that id: they are what `get_tuple` and `list` cannot show.
pub async fn thread_keys_include_writes_of_missing_checkpoints(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 1).await?;
    let missing = stored_config(&t, "", "1ef00000-0000-6000-8000-000000000000");
    put_writes(s, &missing, &[("a", Value::Int(1))], "task", "").await?;
    let got = s.thread_keys(&t).await?;
    ensure_eq!(got.checkpoints, vec![checkpoint_key(&configs[0], None)], "checkpoints");
    ensure_eq!(got.writes, vec![write_key(&missing, "task", "", 0, "a")], "writes");
    Ok(())
}

/// A special channel's write replaced by a later call is listed once, with
/// its fixed index.
pub async fn thread_keys_list_a_replaced_write_once(s: &dyn CheckpointSaver) -> CheckResult {
    let t = new_thread_id();
    let configs = put_chain(s, &generate_config(&t), 1).await?;
    put_writes(s, &configs[0], &[(channels::INTERRUPT, Value::from("1"))], "task", "").await?;
    put_writes(s, &configs[0], &[(channels::INTERRUPT, Value::from("2"))], "task", "").await?;
    let got = s.thread_keys(&t).await?;
    ensure_eq!(
        got.writes,
        vec![write_key(&configs[0], "task", "", -3, channels::INTERRUPT)],
        "writes"
    );
    Ok(())
}
