//! Crash safety of `SqliteSaver`: a writer in a child
//! process (this test binary, re-run as `crash_child`) puts checkpoints and
//! writes from three concurrent tasks, printing each acknowledgement; the
//! parent kills it with SIGKILL at a random moment, then checks the file:
//!
//! * `PRAGMA integrity_check` is `ok`;
//! * every put and put_writes acknowledged before the kill is there, its
//!   stored bytes identical to what the crate encodes for it;
//! * nothing half-written is visible: every checkpoint row present is one the
//!   writer made, complete and byte-identical, and every batch of writes is
//!   there whole or not at all.
//!
//! The next round resumes each thread from its latest checkpoint, on the
//! same file. `CRASH_ROUNDS` sets the number of rounds (default 50).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use checkpointer::serde::{JsonPlusSerializer, Serializer};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, ListOptions, Value,
};

use crate::sqlite_support::{child_test, in_child};

const THREADS: [&str; 3] = ["crash-a", "crash-b", "crash-c"];
const WRITES_PER_BATCH: usize = 3;
const CHILD_ENV: &str = "CHECKPOINTER_CRASH_DB";

fn checkpoint_id(i: u64) -> String {
    format!("1ef00000-0000-6000-8000-{i:012x}")
}

fn step_of(id: &str) -> u64 {
    u64::from_str_radix(id.rsplit('-').next().unwrap(), 16).unwrap()
}

/// The checkpoint number `i` of `thread`, as the writer makes it: a counter,
/// a few kB of bytes that differ per step, a message list.
fn expected(thread: &str, i: u64) -> (Checkpoint, CheckpointMetadata, ChannelVersions) {
    let mut cp = Checkpoint::new(0);
    cp.id = checkpoint_id(i);
    cp.ts = format!("2024-01-01T00:00:{:02}.{:06}+00:00", i % 60, i);
    let blob: Vec<u8> = (0..2048 + (i % 7) * 512)
        .map(|k| (k ^ i.wrapping_mul(2_654_435_761)) as u8)
        .collect();
    cp.channel_values.insert("counter".into(), Value::Int(i as i64));
    cp.channel_values.insert("blob".into(), Value::Bin(Bytes::from(blob)));
    cp.channel_values.insert(
        "msgs".into(),
        Value::Array(
            (0..(i % 5))
                .map(|k| Value::from(format!("{thread} message {k} of {i}")))
                .collect(),
        ),
    );
    let mut versions = ChannelVersions::new();
    for ch in ["counter", "blob", "msgs"] {
        versions.insert(ch.into(), ChannelVersion::Int(i as i64 + 1));
    }
    cp.channel_versions = versions.clone();
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, i as i64);
    meta.insert("writer", thread);
    (cp, meta, versions)
}

fn expected_writes(thread: &str, i: u64) -> Vec<(String, Value)> {
    vec![
        ("counter".to_owned(), Value::Int(i as i64)),
        ("note".to_owned(), Value::from(format!("{thread} wrote at {i}"))),
        ("__error__".to_owned(), Value::Nil),
    ]
}

/// The child: writes until killed. Ignored unless run by the parent.
#[test]
#[ignore = "run by crash_safety_under_sigkill in a child process"]
fn crash_child() {
    in_child(CHILD_ENV, |path| async move {
        let saver = Arc::new(SqliteSaver::open(&path).await.unwrap());
        let out = Arc::new(Mutex::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for thread in THREADS {
            let (saver, out) = (saver.clone(), out.clone());
            tasks.push(tokio::spawn(async move {
                let latest = saver.latest(thread).await.unwrap();
                let (mut i, mut parent) = match latest {
                    Some(t) => (step_of(&t.checkpoint.id) + 1, t.config),
                    None => (0, CheckpointConfig::new(thread)),
                };
                loop {
                    let (cp, meta, versions) = expected(thread, i);
                    let stored = saver.put(&parent, &cp, &meta, &versions).await.unwrap();
                    writeln!(out.lock().unwrap(), "ACK PUT {thread} {i}").unwrap();
                    saver
                        .put_writes(&stored, &expected_writes(thread, i), "task", "path")
                        .await
                        .unwrap();
                    writeln!(out.lock().unwrap(), "ACK WRITES {thread} {i}").unwrap();
                    parent = stored;
                    i += 1;
                }
            }));
        }
        // the writers never finish: this waits until the process is killed
        // and fails if a writer panics first
        #[allow(clippy::never_loop)]
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// What the child acknowledged: per thread, the highest put and the set of
/// checkpoints whose writes were acknowledged.
#[derive(Default, Debug)]
struct Acks {
    puts: BTreeMap<String, u64>,
    writes: BTreeMap<String, Vec<u64>>,
}

fn run_child(path: &Path, kill_after: Duration) -> Acks {
    let mut child = child_test(concat!(module_path!(), "::crash_child"), CHILD_ENV, path, false)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (first_ack, got_first) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Acks::default();
        let mut first = Some(first_ack);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let parts: Vec<&str> = line.split(' ').collect();
            if let ["ACK", kind, thread, i] = parts[..] {
                let i: u64 = i.parse().unwrap();
                if kind == "PUT" {
                    acks.puts.insert(thread.to_owned(), i);
                } else {
                    acks.writes.entry(thread.to_owned()).or_default().push(i);
                }
                if let Some(tx) = first.take() {
                    let _ = tx.send(());
                }
            }
        }
        acks
    });
    // The delay counts from the first acknowledgement, so that every round
    // kills a writer at work (not one still opening the file).
    let _ = got_first.recv_timeout(Duration::from_secs(30));
    std::thread::sleep(kill_after);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap()
}

/// A stored write: (idx, channel, type, value).
type WriteRow = (i64, String, String, Vec<u8>);

async fn verify(path: &Path, acks: &Acks, round: usize) -> usize {
    let conn = rusqlite::Connection::open(path).unwrap();
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(integrity, "ok", "round {round}");

    let serde = JsonPlusSerializer;
    let mut rows = conn
        .prepare("SELECT thread_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints")
        .unwrap();
    let mut present: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let rows = rows
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Vec<u8>>(4)?,
                r.get::<_, Vec<u8>>(5)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (thread, id, parent, tag, blob, metadata) = row.unwrap();
        assert!(
            THREADS.contains(&thread.as_str()),
            "round {round}: stray thread {thread}"
        );
        let i = step_of(&id);
        let (cp, meta, _) = expected(&thread, i);
        let typed = serde.dumps_typed(&cp.to_value(true)).unwrap();
        assert_eq!(tag, typed.tag, "round {round}: {thread} {i}");
        assert!(
            blob == typed.data.as_ref(),
            "round {round}: {thread} {i}: checkpoint bytes differ"
        );
        assert_eq!(
            metadata,
            meta.to_python_json().unwrap().into_bytes(),
            "round {round}: {thread} {i}"
        );
        assert_eq!(
            parent,
            i.checked_sub(1).map(checkpoint_id),
            "round {round}: {thread} {i}"
        );
        present.entry(thread).or_default().push(i);
    }
    let mut total = 0;
    for thread in THREADS {
        let mut ids = present.remove(thread).unwrap_or_default();
        ids.sort_unstable();
        // No gaps: checkpoints 0..=n, n at least the last acknowledged one.
        assert!(
            ids.iter().copied().eq(0..ids.len() as u64),
            "round {round}: {thread} has gaps: {ids:?}"
        );
        if let Some(&acked) = acks.puts.get(thread) {
            assert!(
                ids.last().is_some_and(|&n| n >= acked),
                "round {round}: acknowledged {thread} {acked} lost"
            );
        }
        total += ids.len();
    }

    // Writes: whole batches, byte-identical, every acknowledged batch present.
    let mut writes = conn
        .prepare(
            "SELECT thread_id, checkpoint_id, task_id, task_path, idx, channel, type, value FROM writes \
             ORDER BY thread_id, checkpoint_id, idx",
        )
        .unwrap();
    let mut batches: BTreeMap<(String, u64), Vec<WriteRow>> = BTreeMap::new();
    let rows = writes
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, Vec<u8>>(7)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (thread, id, task, path, idx, channel, tag, value) = row.unwrap();
        assert_eq!((task.as_str(), path.as_str()), ("task", "path"));
        batches
            .entry((thread, step_of(&id)))
            .or_default()
            .push((idx, channel, tag, value));
    }
    for ((thread, i), mut batch) in batches {
        batch.sort_by_key(|w| w.0);
        assert_eq!(
            batch.len(),
            WRITES_PER_BATCH,
            "round {round}: {thread} {i}: partial batch"
        );
        let mut want: Vec<WriteRow> = expected_writes(&thread, i)
            .into_iter()
            .enumerate()
            .map(|(pos, (ch, v))| {
                let typed = serde.dumps_typed(&v).unwrap();
                let idx = checkpointer::checkpoint::write_idx(&ch, pos);
                (idx, ch, typed.tag, typed.data.to_vec())
            })
            .collect();
        want.sort_by_key(|w| w.0);
        assert_eq!(batch, want, "round {round}: {thread} {i}: write bytes differ");
    }
    for (thread, acked) in &acks.writes {
        for i in acked {
            let got = conn
                .query_row(
                    "SELECT count(*) FROM writes WHERE thread_id = ?1 AND checkpoint_id = ?2",
                    rusqlite::params![thread, checkpoint_id(*i)],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap();
            assert_eq!(
                got, WRITES_PER_BATCH as i64,
                "round {round}: acknowledged writes {thread} {i} lost"
            );
        }
    }

    // And the saver reads back what it wrote.
    let saver = SqliteSaver::open(path).await.unwrap();
    for thread in THREADS {
        let listed = saver
            .list_vec(Some(CheckpointConfig::all_namespaces(thread)), ListOptions::default())
            .await
            .unwrap();
        for t in &listed {
            let (cp, meta, _) = expected(thread, step_of(&t.checkpoint.id));
            assert_eq!(t.checkpoint.channel_values, cp.channel_values);
            assert_eq!(t.metadata, meta);
        }
    }
    saver.close().await.unwrap();
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_safety_under_sigkill() {
    let rounds: usize = std::env::var("CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.sqlite");
    let started = Instant::now();
    let mut checkpoints = 0;
    let mut acked_puts = 0;
    for round in 0..rounds {
        let kill_after = Duration::from_millis(rand::random::<u64>() % 150);
        let path2 = path.clone();
        let acks = tokio::task::spawn_blocking(move || run_child(&path2, kill_after))
            .await
            .unwrap();
        acked_puts += acks.puts.len();
        checkpoints = verify(&path, &acks, round).await;
    }
    assert!(acked_puts > 0, "the child never acknowledged a put");
    println!(
        "{rounds} SIGKILL rounds in {:.1?}: {checkpoints} checkpoints in the file, all intact",
        started.elapsed()
    );
    // The writers made progress across rounds.
    assert!(checkpoints >= rounds, "{checkpoints} checkpoints after {rounds} rounds");
}
