//! `RedisSaver` on a real Redis Cluster (three masters started by
//! `cluster_support`): every conformance check (`cluster::conformance::<check>`),
//! the model-based test against the oracle, and threads spread over the
//! masters with the cross-thread operations (`list(None)`, `list_threads`,
//! `delete_for_runs`, `copy_thread`) working across them.

use crate::cluster_support;
use crate::harness;

use std::collections::{BTreeSet, HashMap};
#[cfg(feature = "conformance")]
use std::sync::Arc;

use checkpointer::redis::{key_slot, RedisSaver};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, ListOptions, ListThreadsOptions, Value,
};

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    #[cfg_attr(not(feature = "conformance"), allow(unused_mut))]
    let mut out = vec![
        harness::tokio(
            "cluster::threads_on_different_nodes_work_together",
            &[&crate::CLUSTER],
            2,
            threads_on_different_nodes_work_together,
        ),
        harness::tokio(
            "cluster::bad_cluster_settings_are_invalid_input",
            &[],
            0,
            bad_cluster_settings_are_invalid_input,
        ),
        harness::tokio(
            "cluster::ttl_threads_expire_whole_and_are_swept",
            &[&crate::CLUSTER],
            2,
            ttl_threads_expire_whole_and_are_swept,
        ),
        harness::tokio(
            "cluster::edge_thread_ids_are_stored_like_any_other",
            &[&crate::CLUSTER],
            2,
            edge_thread_ids_are_stored_like_any_other,
        ),
        harness::tokio(
            "cluster::storage_size_sums_every_primary",
            &[&crate::CLUSTER],
            2,
            storage_size_sums_every_primary,
        ),
        harness::tokio(
            "cluster::debug_names_the_nodes",
            &[&crate::CLUSTER],
            0,
            debug_names_the_nodes,
        ),
    ];
    #[cfg(feature = "conformance")]
    {
        for check in checkpointer::conformance::checks() {
            out.push(conformance_trial(check));
        }
        out.push(harness::test(
            "cluster::model::cluster_matches_the_oracle",
            &[&crate::CLUSTER],
            cluster_matches_the_oracle,
        ));
    }
    out
}

#[cfg(feature = "conformance")]
fn conformance_trial(check: &'static checkpointer::conformance::Check) -> harness::Trial {
    use checkpointer::conformance::Outcome;
    let name = check.name();
    harness::tokio(
        &format!("cluster::conformance::{name}"),
        &[&crate::CLUSTER],
        2,
        move || async move {
            let prefix = cluster_support::fresh_prefix();
            let saver: Arc<dyn CheckpointSaver> = Arc::new(cluster_support::saver_on(prefix.clone()).await);
            let outcome = check.run(&*saver).await;
            cluster_support::cleanup(&prefix).await;
            match outcome {
                Outcome::Passed => {}
                Outcome::Skipped(reason) => panic!("conformance check `{name}` did not run: {reason}"),
                Outcome::Failed(failure) => panic!("conformance check `{name}` failed on the cluster: {failure}"),
            }
        },
    )
}

/// Fewer cases than on one server (`PROPTEST_CASES` still sets them).
#[cfg(feature = "conformance")]
fn cluster_matches_the_oracle() {
    use checkpointer::conformance::model::{check_against_oracle, ModelConfig};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let family = cluster_support::fresh_prefix();
    let next = Arc::new(AtomicUsize::new(0));
    let config = if std::env::var("PROPTEST_CASES").is_ok() {
        ModelConfig::default()
    } else {
        ModelConfig::default().cases(16)
    };
    let stats = check_against_oracle(
        || {
            let prefix = format!("{family}-{}", next.fetch_add(1, Ordering::Relaxed));
            async move { Arc::new(cluster_support::saver_on(prefix).await) as Arc<dyn CheckpointSaver> }
        },
        config,
    );
    let used = next.load(Ordering::Relaxed);
    let family2 = family.clone();
    crate::redis_support::block_on_thread(async move {
        for n in 0..used {
            cluster_support::cleanup(&format!("{family2}-{n}")).await;
        }
    });
    let stats = stats.unwrap_or_else(|failure| panic!("{failure}"));
    match stats.skipped {
        Some(reason) => panic!("the model test did not run: {reason}"),
        None => println!("cluster: {} cases, {} operations", stats.cases, stats.total_ops()),
    }
}

async fn put(
    saver: &(impl CheckpointSaver + ?Sized),
    config: &CheckpointConfig,
    id: &str,
    run: &str,
) -> CheckpointConfig {
    let mut cp = Checkpoint::new(0);
    cp.id = id.to_owned();
    let mut versions = ChannelVersions::new();
    cp.channel_values.insert("a".into(), Value::from(format!("{id}@{run}")));
    versions.insert("a".into(), ChannelVersion::Int(id.len() as i64));
    cp.channel_versions = versions.clone();
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    meta.insert("run_id", run);
    saver.put(config, &cp, &meta, &versions).await.unwrap()
}

/// Thread ids at the edges of the key grammar (the empty id, whose
/// escaped form is empty, braces, the escape character, the index's tag)
/// behave on the cluster as on one server: every operation stores and finds
/// them, each thread's keys in one slot.
async fn edge_thread_ids_are_stored_like_any_other() {
    let prefix = cluster_support::fresh_prefix();
    let saver = cluster_support::saver_on(prefix.clone()).await;
    let ids = ["", "%", "%25", "{}", "{", "}", "{x}", "#index", ":", " ", "ü"];
    for thread in ids {
        let config = CheckpointConfig::new(thread);
        let first = put(&saver, &config, "1f0000000000000000000000000000001", "r1").await;
        let second = put(&saver, &first, "1f0000000000000000000000000000002", "r2").await;
        saver
            .put_writes(&second, &[("w".into(), Value::from(1))], "task", "")
            .await
            .unwrap_or_else(|e| panic!("put_writes of {thread:?}: {e}"));
        let latest = saver
            .latest(thread)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no checkpoint of {thread:?}"));
        assert_eq!(latest.config, second, "{thread:?}");
        assert_eq!(latest.pending_writes.len(), 1, "{thread:?}");
        assert_eq!(
            saver
                .list_vec(Some(config.clone()), ListOptions::default())
                .await
                .unwrap()
                .len(),
            2,
            "{thread:?}"
        );
        let copy = format!("{thread}-copy");
        saver.copy_thread(thread, &copy).await.unwrap();
        assert_eq!(
            saver.latest(&copy).await.unwrap().unwrap().checkpoint.id,
            second.checkpoint_id.clone().unwrap()
        );
        saver
            .prune(&[thread.to_owned()], checkpointer::PruneStrategy::KeepLatest)
            .await
            .unwrap();
        assert_eq!(
            saver
                .list_vec(Some(config.clone()), ListOptions::default())
                .await
                .unwrap()
                .len(),
            1
        );
        saver.delete_for_runs(&["r2".to_owned()]).await.unwrap();
        assert!(saver.latest(thread).await.unwrap().is_none(), "{thread:?}");
    }
    // into the empty id, and the listing across threads names each
    saver.copy_thread("%-copy", "").await.unwrap();
    let listed: BTreeSet<String> = saver
        .list_threads(ListThreadsOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_id)
        .collect();
    assert!(listed.contains(""), "{listed:?}");
    for thread in ids {
        assert!(listed.contains(&format!("{thread}-copy")), "{thread:?}: {listed:?}");
        saver.delete_thread(&format!("{thread}-copy")).await.unwrap();
    }
    saver.delete_thread("").await.unwrap();
    assert!(saver
        .list_threads(ListThreadsOptions::default())
        .await
        .unwrap()
        .is_empty());
    cluster_support::cleanup(&prefix).await;
}

/// Threads whose slots are served by three different masters, one per
/// master, found by name (`t-<n>`).
async fn one_thread_per_node() -> Vec<(String, u16)> {
    let ports = &cluster_support::the_cluster().ports;
    let owners = cluster_support::slot_owners().await;
    let mut found: HashMap<u16, String> = HashMap::new();
    for n in 0.. {
        let thread = format!("t-{n}");
        // the hash tag of a thread's keys is its escaped id (`t-<n>` as is)
        let owner = cluster_support::owner_in(&owners, key_slot(format!("{{{thread}}}").as_bytes()));
        found.entry(owner).or_insert(thread);
        if found.len() == ports.len() {
            break;
        }
    }
    let mut out: Vec<(String, u16)> = found.into_iter().map(|(p, t)| (t, p)).collect();
    out.sort();
    out
}

/// `storage_size` on a cluster is the `MEMORY USAGE` of every key of the
/// prefix, on every master, and nothing of another prefix.
async fn storage_size_sums_every_primary() {
    let prefix = cluster_support::fresh_prefix();
    let other = cluster_support::fresh_prefix();
    let url = |prefix: &str| format!("{}?prefix={prefix}", cluster_support::the_cluster().urls().join(","));
    let store = checkpointer::OpenOptions::new().open(&url(&prefix)).await.unwrap();
    let empty = store.storage_size().await.unwrap().expect("a cluster's size");
    assert!(empty.in_memory && empty.bytes > 0, "the layout marker: {empty:?}");
    let saver = store.saver();
    let neighbour = checkpointer::OpenOptions::new()
        .open(&url(&other))
        .await
        .unwrap()
        .saver();
    for (i, (thread, _)) in one_thread_per_node().await.iter().enumerate() {
        let mut config = CheckpointConfig::new(thread.as_str());
        for step in 0..3 {
            config = put(saver.as_ref(), &config, &format!("{i}-{step}"), "run").await;
        }
        put(neighbour.as_ref(), &CheckpointConfig::new(thread.as_str()), "x", "run").await;
    }
    let mut expected = 0;
    let mut nodes = 0;
    for port in &cluster_support::the_cluster().ports {
        let keys = cluster_support::keys_on(*port, &prefix).await;
        let mut c = cluster_support::node(*port).await;
        let mut on_node = 0;
        for key in &keys {
            let used: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .query_async(&mut c)
                .await
                .unwrap();
            on_node += used.unwrap();
        }
        nodes += usize::from(on_node > 0);
        expected += on_node;
    }
    assert_eq!(nodes, 3, "the prefix's keys are on every master");
    let size = store.storage_size().await.unwrap().expect("a cluster's size");
    assert_eq!(size.bytes, expected, "{size:?}");
    assert!(size.bytes > empty.bytes);
    cluster_support::cleanup(&prefix).await;
    cluster_support::cleanup(&other).await;
}

async fn threads_on_different_nodes_work_together() {
    let prefix = cluster_support::fresh_prefix();
    let saver = cluster_support::saver_on(prefix.clone()).await;
    let threads = one_thread_per_node().await;
    assert_eq!(threads.len(), 3, "{threads:?}");
    for (i, (thread, _)) in threads.iter().enumerate() {
        let root = put(
            &saver,
            &CheckpointConfig::new(thread.as_str()),
            &format!("{i}-1"),
            "run-keep",
        )
        .await;
        let child = put(&saver, &root, &format!("{i}-2"), "run-drop").await;
        saver
            .put_writes(&child, &[("a".into(), Value::from(i as i64))], "task", "")
            .await
            .unwrap();
    }
    // each thread's keys are on the master its slot says, so on three nodes
    let mut nodes_with_threads = BTreeSet::new();
    for port in &cluster_support::the_cluster().ports {
        for key in cluster_support::keys_on(*port, &prefix).await {
            let key = String::from_utf8(key).unwrap();
            for (thread, owner) in &threads {
                if key.contains(&format!("{{{thread}}}")) {
                    assert_eq!(port, owner, "{key} is not on the node serving its slot");
                    nodes_with_threads.insert(*port);
                }
            }
        }
    }
    assert_eq!(nodes_with_threads.len(), 3, "the threads are not on three nodes");
    // both global indexes on the master of `{#index}`'s slot (one MULTI/EXEC)
    let index_node = cluster_support::owner_in(&cluster_support::slot_owners().await, key_slot(b"{#index}"));
    let on_index_node = cluster_support::keys_on(index_node, &prefix).await;
    for index in ["threads", "checkpoints"] {
        let key = format!("{prefix}:v2:{{#index}}:{index}").into_bytes();
        assert!(on_index_node.contains(&key), "{index} is not on node {index_node}");
    }

    // across threads: list(None), list_threads
    let all = saver.list_vec(None, ListOptions::default()).await.unwrap();
    let ids: BTreeSet<String> = all.iter().map(|t| t.checkpoint.id.clone()).collect();
    assert_eq!(ids, ["0-1", "0-2", "1-1", "1-2", "2-1", "2-2"].map(String::from).into());
    assert!(all.windows(2).all(|w| w[0].checkpoint.id >= w[1].checkpoint.id));
    let listed: Vec<String> = saver
        .list_threads(ListThreadsOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_id)
        .collect();
    let names: Vec<String> = threads.iter().map(|(t, _)| t.clone()).collect();
    assert_eq!(listed, names);

    // copy_thread from each node to a target on another node
    let owners = cluster_support::slot_owners().await;
    for (i, (source, source_node)) in threads.iter().enumerate() {
        let (_, target_node) = &threads[(i + 1) % threads.len()];
        let target = (0..)
            .map(|n| format!("copy-{i}-{n}"))
            .find(|t| cluster_support::owner_in(&owners, key_slot(format!("{{{t}}}").as_bytes())) == *target_node)
            .unwrap();
        assert_ne!(source_node, target_node);
        saver.copy_thread(source, &target).await.unwrap();
        let copied = saver.latest(&target).await.unwrap().unwrap();
        assert_eq!(copied.checkpoint.id, format!("{i}-2"));
        assert_eq!(copied.pending_writes.len(), 1);
        assert_eq!(
            saver
                .list_vec(Some(CheckpointConfig::new(target.as_str())), ListOptions::default())
                .await
                .unwrap()
                .len(),
            2
        );
    }
    assert_eq!(saver.list_vec(None, ListOptions::default()).await.unwrap().len(), 12);
    assert_eq!(
        saver.list_threads(ListThreadsOptions::default()).await.unwrap().len(),
        6
    );

    // delete_for_runs drops the run's checkpoints on every node
    saver.delete_for_runs(&["run-drop".to_owned()]).await.unwrap();
    let left = saver.list_vec(None, ListOptions::default()).await.unwrap();
    assert_eq!(left.len(), 6, "{left:?}");
    assert!(left.iter().all(|t| t.checkpoint.id.ends_with("-1")));
    for (thread, _) in &threads {
        assert!(saver
            .latest(thread)
            .await
            .unwrap()
            .unwrap()
            .checkpoint
            .id
            .ends_with("-1"));
    }
    // and delete_thread on each node empties the indexes
    for info in saver.list_threads(ListThreadsOptions::default()).await.unwrap() {
        saver.delete_thread(&info.thread_id).await.unwrap();
    }
    assert!(saver.list_vec(None, ListOptions::default()).await.unwrap().is_empty());
    assert!(saver
        .list_threads(ListThreadsOptions::default())
        .await
        .unwrap()
        .is_empty());
    cluster_support::cleanup(&prefix).await;
}

async fn bad_cluster_settings_are_invalid_input() {
    for builder in [
        RedisSaver::builder().cluster(Vec::<String>::new()),
        RedisSaver::builder().cluster(["http://nope:1"]),
        RedisSaver::builder()
            .url("redis://127.0.0.1:1")
            .cluster(["redis://127.0.0.1:2"]),
    ] {
        let err = builder.open().await.unwrap_err();
        assert!(matches!(err, checkpointer::Error::InvalidInput { .. }), "{err:?}");
    }
}

async fn debug_names_the_nodes() {
    let prefix = cluster_support::fresh_prefix();
    let saver = RedisSaver::open_cluster(cluster_support::the_cluster().urls())
        .await
        .unwrap();
    assert_eq!(saver.key_prefix(), checkpointer::redis::DEFAULT_KEY_PREFIX);
    let saver = cluster_support::saver_on(prefix.clone()).await;
    let shown = format!("{saver:?}");
    assert!(shown.contains("cluster: true"), "{shown}");
    for url in cluster_support::the_cluster().urls() {
        assert!(shown.contains(&url), "{shown}");
    }
    cluster_support::cleanup(&prefix).await;
}

/// TTL on a cluster: the thread's keys (on their node) expire whole; the
/// index entries (on the `{#index}` node, written by a separate
/// transaction) go with a sweep, and a live thread on another node keeps
/// its own.
async fn ttl_threads_expire_whole_and_are_swept() {
    use checkpointer::redis::{SweepReport, TtlConfig};
    let prefix = cluster_support::fresh_prefix();
    let saver = RedisSaver::builder()
        .cluster(cluster_support::the_cluster().urls())
        .key_prefix(prefix.as_str())
        .ttl(TtlConfig::new(std::time::Duration::from_millis(1200)))
        .sweep_interval(None)
        .open()
        .await
        .unwrap();
    let keeper = cluster_support::saver_on(prefix.clone()).await;
    let threads = one_thread_per_node().await;
    let (doomed, kept) = (&threads[0].0, &threads[1].0);
    let root = put(&saver, &CheckpointConfig::new(doomed.as_str()), "1", "r").await;
    let child = put(&saver, &root, "2", "r").await;
    saver
        .put_writes(&child, &[("a".into(), Value::from(1))], "task", "")
        .await
        .unwrap();
    // a thread without a TTL, written by the saver without one
    put(&keeper, &CheckpointConfig::new(kept.as_str()), "1", "r").await;
    // every key of the doomed thread has one deadline, on its node
    let node = threads[0].1;
    let mut c = cluster_support::node(node).await;
    let mut deadlines = std::collections::BTreeSet::new();
    let mut count = 0;
    for key in cluster_support::keys_on(node, &prefix).await {
        if String::from_utf8_lossy(&key).contains(&format!("{{{doomed}}}")) {
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query_async(&mut c).await.unwrap();
            deadlines.insert(at);
            count += 1;
        }
    }
    // the nine keys and the version
    assert_eq!(count, 10, "the thread's keys on node {node}");
    assert_eq!(deadlines.len(), 1, "{deadlines:?}");
    assert!(*deadlines.iter().next().unwrap() > 0);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(saver.latest(doomed).await.unwrap().is_none());
    let listed: Vec<String> = saver
        .list_threads(ListThreadsOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_id)
        .collect();
    assert_eq!(listed, std::slice::from_ref(kept));
    assert_eq!(
        saver.sweep_expired(10).await.unwrap(),
        SweepReport { removed: 1, renewed: 0 }
    );
    // left: the layout marker, the kept thread's keys and its index entries
    let index_node = cluster_support::owner_in(&cluster_support::slot_owners().await, key_slot(b"{#index}"));
    let mut left = Vec::new();
    for port in &cluster_support::the_cluster().ports {
        for key in cluster_support::keys_on(*port, &prefix).await {
            let key = String::from_utf8_lossy(&key).into_owned();
            assert!(!key.contains(&format!("{{{doomed}}}")), "{key} is left");
            if key.contains("{#index}") {
                assert_eq!(*port, index_node);
                left.push(key.rsplit(':').next().unwrap().to_owned());
            }
        }
    }
    left.sort();
    assert_eq!(left, ["checkpoints", "gen", "threads"]);
    let all = saver.list_vec(None, ListOptions::default()).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].config.thread_id, *kept);
    cluster_support::cleanup(&prefix).await;
}
