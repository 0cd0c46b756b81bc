//! Many writers on one file: async tasks, OS threads (through the blocking
//! facade), a second saver in the same process and two other processes, all
//! at once. No call may fail and every acknowledged put and write must be in
//! the file afterwards.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use checkpointer::blocking::BlockingSaver;
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error, Value,
};

use crate::sqlite_support::test_name;

/// Puts per writer.
const PUTS: usize = 40;
/// The environment variable that turns `child_writer_process` into a writer.
const CHILD_ENV: &str = "CHECKPOINTER_SQLITE_CHILD_DB";

fn checkpoint(writer: &str, i: usize) -> Checkpoint {
    let mut cp = Checkpoint::new(i as i64);
    cp.channel_values.insert("writer".into(), Value::from(writer));
    cp.channel_values.insert("i".into(), Value::from(i));
    cp
}

/// One writer's acknowledged (thread, checkpoint id) pairs.
type Acks = Vec<(String, String)>;

async fn async_writer(saver: Arc<dyn CheckpointSaver>, writer: String) -> Acks {
    let mut acks = Vec::new();
    let mut parent = CheckpointConfig::new(writer.clone());
    for i in 0..PUTS {
        let cp = checkpoint(&writer, i);
        let metadata = CheckpointMetadata::new(CheckpointSource::Loop, i as i64);
        parent = saver
            .put(&parent, &cp, &metadata, &ChannelVersions::new())
            .await
            .unwrap();
        saver
            .put_writes(&parent, &[("w".into(), Value::from(i))], "task", "")
            .await
            .unwrap();
        acks.push((writer.clone(), cp.id));
    }
    acks
}

fn blocking_writer(saver: &BlockingSaver, writer: String) -> Acks {
    let mut acks = Vec::new();
    let mut parent = CheckpointConfig::new(writer.clone());
    for i in 0..PUTS {
        let cp = checkpoint(&writer, i);
        let metadata = CheckpointMetadata::new(CheckpointSource::Loop, i as i64);
        parent = saver.put(&parent, &cp, &metadata, &ChannelVersions::new()).unwrap();
        saver
            .put_writes(&parent, &[("w".into(), Value::from(i))], "task", "")
            .unwrap();
        acks.push((writer.clone(), cp.id));
    }
    acks
}

fn spawn_child(db: &Path, name: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            test_name(concat!(module_path!(), "::child_writer_process")),
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, db)
        .env("CHECKPOINTER_SQLITE_CHILD_NAME", name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Run by `writers_across_tasks_threads_and_processes` in two child
/// processes: four async writers on their own saver, each acknowledged put
/// printed as `ACK <thread> <id>`.
#[test]
#[ignore = "a helper: runs as a child process of writers_across_tasks_threads_and_processes"]
fn child_writer_process() {
    let db = PathBuf::from(std::env::var(CHILD_ENV).expect("run by the parent test"));
    let name = std::env::var("CHECKPOINTER_SQLITE_CHILD_NAME").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let saver: Arc<dyn CheckpointSaver> = Arc::new(SqliteSaver::open(&db).await.unwrap());
        let tasks: Vec<_> = (0..4)
            .map(|w| tokio::spawn(async_writer(saver.clone(), format!("{name}-task-{w}"))))
            .collect();
        for t in tasks {
            for (thread, id) in t.await.unwrap() {
                println!("ACK {thread} {id}");
            }
        }
    });
}

#[test]
fn writers_across_tasks_threads_and_processes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("concurrent.sqlite");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let saver = Arc::new(rt.block_on(SqliteSaver::open(&db)).unwrap());
    let other = Arc::new(rt.block_on(SqliteSaver::open(&db)).unwrap());
    let children = [spawn_child(&db, "proc-a"), spawn_child(&db, "proc-b")];

    let mut acks: Acks = Vec::new();
    // 4 OS threads through the blocking facade, on the shared saver
    let threads: Vec<_> = (0..4)
        .map(|w| {
            let blocking = BlockingSaver::new(saver.clone() as Arc<dyn CheckpointSaver>);
            std::thread::spawn(move || blocking_writer(&blocking, format!("os-thread-{w}")))
        })
        .collect();
    // 8 async tasks: 6 on the shared saver, 2 on a second saver of the file
    rt.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let s: Arc<dyn CheckpointSaver> = if w < 6 { saver.clone() } else { other.clone() };
                tokio::spawn(async_writer(s, format!("task-{w}")))
            })
            .collect();
        for t in tasks {
            acks.extend(t.await.unwrap());
        }
    });
    for t in threads {
        acks.extend(t.join().unwrap());
    }
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<_> = stdout
            .lines()
            .filter_map(|l| l.split_once("ACK ").map(|(_, ack)| ack))
            .collect();
        assert_eq!(lines.len(), 4 * PUTS, "acknowledged puts of a child");
        for line in lines {
            let (thread, id) = line.split_once(' ').unwrap();
            acks.push((thread.to_owned(), id.to_owned()));
        }
    }
    assert_eq!(acks.len(), (4 + 8 + 8) * PUTS);

    // every acknowledged put is there, with its value and its write, read
    // through a fresh saver
    rt.block_on(async {
        let reader = SqliteSaver::open(&db).await.unwrap();
        let mut seen = HashSet::new();
        for (thread, id) in &acks {
            let t = reader
                .get_tuple(&CheckpointConfig::new(thread.clone()).with_checkpoint_id(id.clone()))
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("acknowledged put {thread}/{id} is missing"));
            assert_eq!(t.checkpoint.channel_values["writer"], Value::from(thread.as_str()));
            let i = t.checkpoint.channel_values["i"].clone();
            assert_eq!(t.pending_writes.len(), 1, "{thread}/{id}");
            assert_eq!(t.pending_writes[0].value, i);
            assert!(seen.insert((thread.clone(), id.clone())));
        }
    });
    // concurrent requests shared commits
    let stats = saver.writer_stats();
    assert!(
        stats.transactions < stats.requests,
        "no group commit happened: {stats:?}"
    );
    println!("shared saver: {stats:?}");
}

/// A request that fails inside a shared transaction fails alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_request_does_not_fail_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let saver = Arc::new(SqliteSaver::open(dir.path().join("batch.sqlite")).await.unwrap());
    let metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver
        .put(
            &CheckpointConfig::new("target"),
            &Checkpoint::new(0),
            &metadata,
            &ChannelVersions::new(),
        )
        .await
        .unwrap();
    saver
        .put(
            &CheckpointConfig::new("source"),
            &Checkpoint::new(0),
            &metadata,
            &ChannelVersions::new(),
        )
        .await
        .unwrap();
    let mut puts = Vec::new();
    let mut copies = Vec::new();
    for round in 0..20 {
        for i in 0..10 {
            let s = saver.clone();
            puts.push(tokio::spawn(async move {
                let m = CheckpointMetadata::new(CheckpointSource::Loop, i);
                s.put(
                    &CheckpointConfig::new(format!("t-{round}-{i}")),
                    &Checkpoint::new(i),
                    &m,
                    &ChannelVersions::new(),
                )
                .await
            }));
        }
        let s = saver.clone();
        copies.push(tokio::spawn(async move { s.copy_thread("source", "target").await }));
    }
    for p in puts {
        let config = p.await.unwrap().unwrap();
        assert!(saver.get_tuple(&config).await.unwrap().is_some());
    }
    for c in copies {
        assert!(matches!(c.await.unwrap(), Err(Error::ThreadExists { .. })));
    }
    let stats = saver.writer_stats();
    assert!(stats.transactions < stats.requests, "{stats:?}");
}

/// Reads go on while the writer is busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_run_beside_writes() {
    let dir = tempfile::tempdir().unwrap();
    let saver = Arc::new(SqliteSaver::open(dir.path().join("rw.sqlite")).await.unwrap());
    let metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let first = saver
        .put(
            &CheckpointConfig::new("r"),
            &Checkpoint::new(0),
            &metadata,
            &ChannelVersions::new(),
        )
        .await
        .unwrap();
    let writer = {
        let s = saver.clone();
        tokio::spawn(async move {
            let mut parent = CheckpointConfig::new("w");
            for i in 0..200 {
                parent = s
                    .put(
                        &parent,
                        &Checkpoint::new(i),
                        &CheckpointMetadata::new(CheckpointSource::Loop, i),
                        &ChannelVersions::new(),
                    )
                    .await
                    .unwrap();
            }
        })
    };
    let mut reads = 0;
    while !writer.is_finished() {
        assert!(saver.get_tuple(&first).await.unwrap().is_some());
        reads += 1;
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    writer.await.unwrap();
    assert!(reads > 0);
}
