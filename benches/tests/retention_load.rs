//! The retention-under-load measurement (`benches/retention_load/`) on a
//! 2 MB SQLite fill: every phase times puts, retention removes checkpoints
//! and idle threads, the floor removes what a dry run names, the reclaim
//! step shrinks the file, and the store still verifies.
//! `cargo test -p checkpointer-benches --all-features --test retention_load`.

#[path = "../fill/gen.rs"]
mod generator;
#[path = "../retention_load/run.rs"]
mod measure;

use std::sync::Arc;
use std::time::Duration;

use checkpointer::prelude::*;
use checkpointer::verify::{verify_store, ViolationKind};
use checkpointer::{OpenOptions, SaverAdmin};
use generator::{fill, Fill};
use measure::{id_micros, run, Options, Phase};

#[test]
fn quantiles_are_nearest_rank() {
    let phase = Phase {
        puts: (1..=100).rev().collect(),
        ..Phase::default()
    };
    assert_eq!(phase.quantile(0.5), 50);
    assert_eq!(phase.quantile(0.99), 99);
    assert_eq!(phase.quantile(1.0), 100);
    assert_eq!(Phase::default().quantile(0.99), 0);
}

#[test]
fn an_id_gives_its_time() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    let id = Checkpoint::new(0).id;
    let t = id_micros(&id).unwrap();
    assert!((now - t).abs() < 5_000_000, "{id}: {t} vs {now}");
    assert_eq!(id_micros("not-an-id"), None);
    assert_eq!(id_micros("1ef4f797-8335-4c3e-8000-000000000000"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_run_measures_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("r.sqlite").display());
    let store: Arc<dyn SaverAdmin> = OpenOptions::new().open(&url).await.unwrap();
    let filling = Fill {
        bytes: 2 << 20,
        seed: 3,
        writers: 4,
        steps: (30, 60),
        progress: false,
    };
    fill(&store, &filling).await.unwrap();
    let fill_threads = store.saver().list_threads(Default::default()).await.unwrap();
    // the oldest threads become idle with a margin the run cannot outlast
    tokio::time::sleep(Duration::from_millis(300)).await;
    let options = Options {
        url: url.clone(),
        writers: 2,
        rate: 50.0,
        thread_steps: 10,
        phase: Duration::from_millis(700),
        keep_last: 5,
        idle_fraction: 0.3,
        batch: 16,
        floor_threads: 4,
        rest: 1,
        step_pages: 64,
        reclaim: true,
        retain_max: None,
        alternate: Some(Duration::from_millis(100)),
    };
    let report = run(&store, &options, false).await.unwrap();
    let phases = report["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 5);
    for p in &phases[..4] {
        assert!(p["puts"].as_u64().unwrap() > 0, "{p}");
        assert!(p["p99_us"].as_u64().unwrap() >= p["p50_us"].as_u64().unwrap(), "{p}");
    }
    // retention paused between threads at least once, the load going on
    let between = &phases[4];
    assert_eq!(between["phase"], "between");
    assert!(between["seconds"].as_f64().unwrap() >= 0.1, "{between}");
    let retain = &report["retain"];
    assert!(retain["checkpoints_removed"].as_u64().unwrap() > 0, "{retain}");
    assert!(retain["threads_deleted"].as_u64().unwrap() >= 1, "{retain}");
    let floor = &report["floor"];
    assert!(floor["raw_delete"]["removed"].as_u64().unwrap() > 0, "{floor}");
    assert!(floor["retain"]["removed"].as_u64().unwrap() > 0, "{floor}");
    let space = &report["space"];
    let (before, after) = (
        space["before"]["bytes"].as_u64().unwrap(),
        space["after_reclaim"]["bytes"].as_u64().unwrap(),
    );
    assert!(after < before, "{space}");
    let db = |at: &str| space[at]["parts"][0]["bytes"].as_u64().unwrap();
    assert!(db("after_reclaim") < db("after_retain") / 2, "{space}");

    // what the policy said stays, stays: each remaining fill thread's root
    // namespace has its last 5 and the threads not idle are all there
    let saver = store.saver();
    let verified = verify_store(saver.as_ref()).await.unwrap();
    let raw: Vec<&str> = floor["raw_threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let wrong: Vec<_> = verified
        .violations
        .iter()
        .filter(|v| !(raw.contains(&v.thread_id.as_str()) && v.kind == ViolationKind::MissingParent))
        .collect();
    assert!(wrong.is_empty(), "{wrong:?}");
    let left = saver.list_threads(Default::default()).await.unwrap();
    let deleted = retain["threads_deleted"].as_u64().unwrap() as usize;
    let fill_left = left.iter().filter(|t| t.thread_id.starts_with("fill-")).count();
    // the floor's threads may have gone whole before (idle ones)
    let gone = fill_threads.len() - fill_left;
    assert!(
        gone >= deleted && gone <= deleted + options.floor_threads,
        "{gone} {deleted}"
    );
    assert!(
        left.iter().any(|t| t.thread_id.starts_with("load-")),
        "the load's threads stay"
    );
    for t in left.iter().filter(|t| t.thread_id.starts_with("fill-")) {
        let all = saver
            .list_vec(Some(CheckpointConfig::new(t.thread_id.clone())), ListOptions::default())
            .await
            .unwrap();
        assert!(all.len() >= 5, "{}: {}", t.thread_id, all.len());
    }
    store.close().await.unwrap();
}
