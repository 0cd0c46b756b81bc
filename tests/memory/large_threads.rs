//! `InMemorySaver` holds no store-wide lock across work proportional to one
//! caller's input (`docs/reliability.md`, rows B59, B61, B62): while it
//! writes 100 000 writes, copies or prunes a thread of 20 000 checkpoints,
//! another OS thread's reads of an unrelated thread complete. The results
//! themselves are the conformance checks' (`large_threads`).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, InMemorySaver, ListOptions, PruneStrategy, Value,
};

const N: usize = 20_000;

async fn empty(saver: &InMemorySaver, thread: &str) -> CheckpointConfig {
    let mut cp = Checkpoint::new(0);
    cp.id = "1ef00000-0000-6000-8000-000000000001".to_owned();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver
        .put(&CheckpointConfig::new(thread), &cp, &meta, &ChannelVersions::new())
        .await
        .unwrap()
}

/// A chain of `n` checkpoints in thread `t` (one write every 100).
async fn large_thread(saver: &InMemorySaver, t: &str, n: usize) -> Vec<CheckpointConfig> {
    let mut parent = CheckpointConfig::new(t);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let step = i as i64;
        let mut cp = Checkpoint::new(0);
        cp.id = format!("1ef00000-0000-6000-8000-{i:012}");
        cp.channel_values.insert("step".to_owned(), Value::Int(step));
        cp.channel_versions
            .insert("step".to_owned(), ChannelVersion::Int(step + 1));
        let versions = cp.channel_versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
        parent = saver.put(&parent, &cp, &meta, &versions).await.unwrap();
        if i % 100 == 0 {
            saver
                .put_writes(&parent, &[("w".to_owned(), Value::Int(step))], "task", "")
                .await
                .unwrap();
        }
        out.push(parent.clone());
    }
    out
}

/// Runs `op` while another OS thread reads `other`; returns how many reads
/// completed meanwhile.
async fn reads_during<F: Future<Output = ()>>(saver: &Arc<InMemorySaver>, other: &CheckpointConfig, op: F) -> usize {
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (saver, done, other) = (saver.clone(), done.clone(), other.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let mut during = 0usize;
            while !done.load(Ordering::SeqCst) {
                let got = rt.block_on(saver.get_tuple(&other)).unwrap();
                assert!(got.is_some());
                during += usize::from(!done.load(Ordering::SeqCst));
            }
            during
        })
    };
    op.await;
    done.store(true, Ordering::SeqCst);
    reader.join().unwrap()
}

/// B59: no store-wide lock is held while the write set is built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_writes_leave_other_threads_readable() {
    let saver = Arc::new(InMemorySaver::new());
    let other = empty(&saver, "other").await;
    let stored = empty(&saver, "t").await;
    let writes: Vec<(String, Value)> = (0..100_000).map(|i| (format!("ch{i}"), Value::Int(i))).collect();
    let during = reads_during(&saver, &other, async {
        saver.put_writes(&stored, &writes, "task", "").await.unwrap();
    })
    .await;
    assert!(during >= 1, "no read completed during put_writes");
    assert_eq!(
        saver.get_tuple(&stored).await.unwrap().unwrap().pending_writes.len(),
        100_000
    );
}

/// B61: the copy is built outside the store lock and published in O(1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_of_a_large_thread_leaves_other_threads_readable() {
    let saver = Arc::new(InMemorySaver::new());
    let other = empty(&saver, "other").await;
    let src = large_thread(&saver, "src", N).await;
    let during = reads_during(&saver, &other, async {
        saver.copy_thread("src", "dst").await.unwrap();
    })
    .await;
    assert!(during >= 1, "no read completed during copy_thread");
    let copied = saver
        .list_vec(Some(CheckpointConfig::new("dst")), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(copied.len(), N);
    for i in [0, N / 2, N - 1] {
        let a = saver.get_tuple(&src[i]).await.unwrap().unwrap();
        let dst = CheckpointConfig {
            thread_id: "dst".to_owned(),
            ..src[i].clone()
        };
        let b = saver.get_tuple(&dst).await.unwrap().unwrap();
        assert_eq!(a.checkpoint, b.checkpoint, "checkpoint {i}");
        assert_eq!(a.pending_writes, b.pending_writes, "writes of {i}");
    }
}

/// B62: the victims are removed a slice per lock hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_of_a_large_thread_leaves_other_threads_readable() {
    let saver = Arc::new(InMemorySaver::new());
    let other = empty(&saver, "other").await;
    let configs = large_thread(&saver, "t", N).await;
    let during = reads_during(&saver, &other, async {
        saver.prune(&["t".to_owned()], PruneStrategy::KeepLatest).await.unwrap();
    })
    .await;
    assert!(during >= 1, "no read completed during prune");
    let left = saver
        .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].config, configs[N - 1]);
    assert_eq!(left[0].checkpoint.channel_values["step"], Value::Int(N as i64 - 1));
    assert!(saver.get_tuple(&configs[0]).await.unwrap().is_none());
    assert!(saver.get_tuple(&other).await.unwrap().is_some());
}
