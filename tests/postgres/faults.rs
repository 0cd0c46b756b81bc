//! Faults for `PostgresSaver`: its connections are
//! terminated with `pg_terminate_backend` while `put`, `put_writes`,
//! `copy_thread` and `prune` run. Every failure is an `Error::Storage`; after
//! one that says it is retryable nothing of the call is visible; after any,
//! the call's effect is visible whole or not at all (never partly); and
//! repeating the call leaves exactly one copy.
//!
//! A killer connection terminates every busy backend of the saver under test
//! (application name `victim`) as fast as it can; the state is checked
//! through a second saver the killer leaves alone. `PG_FAULT_OPS` sets the
//! calls per operation (default 40). Without a server the test is ignored outside
//! CI and fails in CI.

use crate::harness;
use crate::postgres_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use checkpointer::postgres::PostgresSaver;
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, CheckpointTuple, Error, ListOptions, PruneStrategy, Value,
};
use parking_lot::Mutex;

fn id(i: usize) -> String {
    format!("1ef00000-0000-6000-8000-{i:012x}")
}

fn blob(i: usize, len: usize) -> Value {
    Value::Bin(Bytes::from(
        (0..len).map(|k| (k ^ i.wrapping_mul(40_503)) as u8).collect::<Vec<_>>(),
    ))
}

fn checkpoint(i: usize, size: usize) -> (Checkpoint, CheckpointMetadata, ChannelVersions) {
    let mut cp = Checkpoint::new(0);
    cp.id = id(i);
    cp.ts = "2024-01-01T00:00:00+00:00".to_owned();
    cp.channel_values.insert("big".into(), blob(i, size));
    cp.channel_values.insert("n".into(), Value::Int(i as i64));
    cp.channel_values
        .insert("list".into(), Value::Array((vec![Value::Int(i as i64); 8]).into()));
    let mut versions = ChannelVersions::new();
    for ch in ["big", "n", "list"] {
        versions.insert(ch.into(), ChannelVersion::Int(i as i64 + 1));
    }
    cp.channel_versions = versions.clone();
    (cp, CheckpointMetadata::new(CheckpointSource::Loop, i as i64), versions)
}

fn writes(i: usize) -> Vec<(String, Value)> {
    (0..5).map(|k| (format!("w{k}"), blob(i * 7 + k, 64 << 10))).collect()
}

/// Terminates every non-idle backend of the saver under test until stopped,
/// pausing a little after each kill.
async fn killer(db: String, stop: Arc<AtomicBool>, kills: Arc<AtomicU64>) {
    let client = postgres_support::connect(&db).await.unwrap();
    while !stop.load(Ordering::Relaxed) {
        let row = client
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = current_database() AND application_name = 'victim' AND state <> 'idle'",
                &[],
            )
            .await
            .unwrap();
        let n = row.get::<_, i64>(0) as u64;
        kills.fetch_add(n, Ordering::Relaxed);
        // After a kill, leave the next attempts a chance to get through.
        let pause = if n > 0 {
            2_000 + rand::random::<u64>() % 20_000
        } else {
            rand::random::<u64>() % 500
        };
        tokio::time::sleep(Duration::from_micros(pause)).await;
    }
}

/// Failures seen, by operation and retryability.
#[derive(Default, Debug)]
struct Faults {
    seen: BTreeMap<(&'static str, bool), u64>,
}

fn check_typed(op: &'static str, err: &Error, faults: &Mutex<Faults>) -> bool {
    assert!(
        matches!(
            err,
            Error::Storage {
                backend: "postgres",
                ..
            }
        ),
        "{op}: untyped failure {err:?}"
    );
    let retryable = err.is_retryable();
    *faults.lock().seen.entry((op, retryable)).or_default() += 1;
    retryable
}

async fn tuple(check: &PostgresSaver, thread: &str, i: usize) -> Option<CheckpointTuple> {
    check
        .get_tuple(&CheckpointConfig::new(thread).with_checkpoint_id(id(i)))
        .await
        .unwrap()
}

async fn all(check: &PostgresSaver, thread: &str) -> Vec<CheckpointTuple> {
    check
        .list_vec(Some(CheckpointConfig::all_namespaces(thread)), ListOptions::default())
        .await
        .unwrap()
}

const ATTEMPTS: usize = 200;

async fn terminated_connections_leave_no_partial_state() {
    let db = match postgres_support::create_database().await {
        Ok(db) => db,
        Err(reason) => return postgres_support::skip(&reason),
    };
    let ops: usize = std::env::var("PG_FAULT_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let url = postgres_support::url_of(&db);
    let check = PostgresSaver::builder()
        .url(&url)
        .max_connections(2)
        .open()
        .await
        .unwrap();
    let victim = PostgresSaver::builder()
        .url(format!("{url}?application_name=victim"))
        .max_connections(4)
        .build()
        .unwrap();
    let faults = Mutex::new(Faults::default());

    // Sources for copy_thread and prune, written without faults.
    let mut parent = CheckpointConfig::new("src");
    for i in 0..10 {
        let (cp, meta, versions) = checkpoint(i, 32 << 10);
        parent = check.put(&parent, &cp, &meta, &versions).await.unwrap();
        check.put_writes(&parent, &writes(i), "task", "").await.unwrap();
    }
    let source = all(&check, "src").await;
    for p in 0..ops {
        let thread = format!("prune-{p}");
        let mut parent = CheckpointConfig::new(&thread);
        for i in 0..6 {
            let (cp, meta, versions) = checkpoint(i, 16 << 10);
            parent = check.put(&parent, &cp, &meta, &versions).await.unwrap();
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicU64::new(0));
    let killer = tokio::spawn(killer(db.clone(), stop.clone(), kills.clone()));

    // put: a 1 MiB value and two small ones per checkpoint.
    let mut parent = CheckpointConfig::new("p");
    for i in 0..ops {
        let (cp, meta, versions) = checkpoint(i, 1 << 20);
        let mut attempts = 0;
        parent = loop {
            attempts += 1;
            assert!(attempts < ATTEMPTS, "put {i} never succeeded");
            match victim.put(&parent, &cp, &meta, &versions).await {
                Ok(stored) => break stored,
                Err(e) => {
                    let retryable = check_typed("put", &e, &faults);
                    match tuple(&check, "p", i).await {
                        None => {}
                        Some(t) => {
                            assert!(!retryable, "put {i}: retryable error but the checkpoint is stored");
                            assert_eq!(t.checkpoint.channel_values, cp.channel_values, "put {i}: partial");
                        }
                    }
                }
            }
        };
    }
    let stored = all(&check, "p").await;
    assert_eq!(stored.len(), ops, "exactly one copy of every put");
    for t in &stored {
        let i = usize::try_from(t.metadata.step().unwrap()).unwrap();
        assert_eq!(t.checkpoint.channel_values, checkpoint(i, 1 << 20).0.channel_values);
    }

    // put_writes: five 64 kB writes per call.
    for i in 0..ops {
        let config = CheckpointConfig::new("p").with_checkpoint_id(id(i));
        let batch = writes(i);
        let mut attempts = 0;
        loop {
            attempts += 1;
            assert!(attempts < ATTEMPTS, "put_writes {i} never succeeded");
            match victim.put_writes(&config, &batch, "task", "").await {
                Ok(()) => break,
                Err(e) => {
                    let retryable = check_typed("put_writes", &e, &faults);
                    let seen = tuple(&check, "p", i).await.unwrap().pending_writes;
                    assert!(
                        seen.is_empty() || seen.len() == batch.len(),
                        "put_writes {i}: partial batch"
                    );
                    assert!(
                        !retryable || seen.is_empty(),
                        "put_writes {i}: retryable error but writes stored"
                    );
                }
            }
        }
        let seen = tuple(&check, "p", i).await.unwrap().pending_writes;
        let got: Vec<_> = seen.into_iter().map(|w| (w.channel, w.value)).collect();
        assert_eq!(got, batch, "put_writes {i}: exactly one copy");
    }

    // copy_thread of a 10-checkpoint thread with writes.
    for c in 0..ops {
        let target = format!("copy-{c}");
        let mut attempts = 0;
        loop {
            attempts += 1;
            assert!(attempts < ATTEMPTS, "copy {c} never succeeded");
            let result = victim.copy_thread("src", &target).await;
            let copied = all(&check, &target).await;
            let whole = copied.len() == source.len()
                && copied.iter().zip(&source).all(|(a, b)| {
                    a.checkpoint == b.checkpoint && a.metadata == b.metadata && a.pending_writes == b.pending_writes
                });
            match result {
                Ok(()) => {
                    assert!(whole, "copy {c}: incomplete after Ok");
                    break;
                }
                Err(Error::ThreadExists { .. }) => {
                    // An earlier attempt committed before its connection died.
                    assert!(whole && attempts > 1, "copy {c}: ThreadExists over a partial copy");
                    break;
                }
                Err(e) => {
                    let retryable = check_typed("copy_thread", &e, &faults);
                    assert!(
                        copied.is_empty() || whole,
                        "copy {c}: partial copy ({} checkpoints)",
                        copied.len()
                    );
                    assert!(!retryable || copied.is_empty(), "copy {c}: retryable error but copied");
                }
            }
        }
    }

    // prune(KeepLatest) of 6-checkpoint threads.
    for p in 0..ops {
        let thread = format!("prune-{p}");
        let mut attempts = 0;
        loop {
            attempts += 1;
            assert!(attempts < ATTEMPTS, "prune {p} never succeeded");
            let result = victim
                .prune(std::slice::from_ref(&thread), PruneStrategy::KeepLatest)
                .await;
            let left = all(&check, &thread).await;
            match result {
                Ok(()) => {
                    assert_eq!(left.len(), 1, "prune {p}");
                    assert_eq!(left[0].checkpoint.id, id(5));
                    break;
                }
                Err(e) => {
                    let retryable = check_typed("prune", &e, &faults);
                    assert!(
                        left.len() == 6 || left.len() == 1,
                        "prune {p}: partial ({} left)",
                        left.len()
                    );
                    assert!(!retryable || left.len() == 6, "prune {p}: retryable error but pruned");
                }
            }
        }
    }

    stop.store(true, Ordering::Relaxed);
    killer.await.unwrap();
    let faults = faults.into_inner();
    let kills = kills.load(Ordering::Relaxed);
    println!(
        "{ops} calls per operation, {kills} backends terminated, failures seen: {:?}",
        faults.seen
    );
    for op in ["put", "put_writes", "copy_thread", "prune"] {
        let n: u64 = faults.seen.iter().filter(|((o, _), _)| *o == op).map(|(_, n)| n).sum();
        assert!(n > 0, "no {op} call was interrupted: the test proved nothing for it");
    }
    drop(victim);
    drop(check);
    postgres_support::drop_database(&db).await;
}

/// One writer of [`terminated_connections_mid_group_leave_no_partial_state`]:
/// `n` puts into its own thread, each followed by its writes, every call
/// repeated until it succeeds, checking the state after each failure.
async fn group_writer(victim: PostgresSaver, check: PostgresSaver, who: usize, n: usize, faults: Arc<Mutex<Faults>>) {
    let thread = format!("g-{who}");
    let mut parent = CheckpointConfig::new(&thread);
    for i in 0..n {
        let (cp, meta, versions) = checkpoint(who * 1000 + i, 64 << 10);
        let mut attempts = 0;
        parent = loop {
            attempts += 1;
            assert!(attempts < ATTEMPTS, "{thread}: put {i} never succeeded");
            match victim.put(&parent, &cp, &meta, &versions).await {
                Ok(stored) => break stored,
                Err(e) => {
                    let retryable = check_typed("put", &e, &faults);
                    if let Some(t) = tuple(&check, &thread, who * 1000 + i).await {
                        assert!(
                            !retryable,
                            "{thread}: put {i}: retryable error but the checkpoint is stored"
                        );
                        assert_eq!(
                            t.checkpoint.channel_values, cp.channel_values,
                            "{thread}: put {i}: partial"
                        );
                    }
                }
            }
        };
        let batch = writes(i);
        let mut attempts = 0;
        loop {
            attempts += 1;
            assert!(attempts < ATTEMPTS, "{thread}: put_writes {i} never succeeded");
            match victim.put_writes(&parent, &batch, "task", "").await {
                Ok(()) => break,
                Err(e) => {
                    let retryable = check_typed("put_writes", &e, &faults);
                    let seen = tuple(&check, &thread, who * 1000 + i).await.unwrap().pending_writes;
                    assert!(
                        seen.is_empty() || seen.len() == batch.len(),
                        "{thread}: put_writes {i}: partial"
                    );
                    assert!(
                        !retryable || seen.is_empty(),
                        "{thread}: put_writes {i}: retryable error but stored"
                    );
                }
            }
        }
    }
}

/// Concurrent writers share transactions (group commit) while their
/// connections are terminated: a group that loses its connection fails every
/// member, none partly, and after the retries every thread holds each of its
/// checkpoints and writes exactly once.
async fn terminated_connections_mid_group_leave_no_partial_state() {
    const WRITERS: usize = 8;
    let db = match postgres_support::create_database().await {
        Ok(db) => db,
        Err(reason) => return postgres_support::skip(&reason),
    };
    let n: usize = std::env::var("PG_FAULT_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
        / 2;
    let url = postgres_support::url_of(&db);
    let check = PostgresSaver::builder()
        .url(&url)
        .max_connections(2)
        .open()
        .await
        .unwrap();
    let victim = PostgresSaver::builder()
        .url(format!("{url}?application_name=victim"))
        .max_connections(WRITERS)
        .build()
        .unwrap();
    let faults = Arc::new(Mutex::new(Faults::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicU64::new(0));
    let killer = tokio::spawn(killer(db.clone(), stop.clone(), kills.clone()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|who| tokio::spawn(group_writer(victim.clone(), check.clone(), who, n, faults.clone())))
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    killer.await.unwrap();
    for who in 0..WRITERS {
        let thread = format!("g-{who}");
        let stored = all(&check, &thread).await;
        assert_eq!(stored.len(), n, "{thread}: exactly one copy of every put");
        for t in &stored {
            let i = usize::try_from(t.metadata.step().unwrap()).unwrap();
            assert_eq!(t.checkpoint.channel_values, checkpoint(i, 64 << 10).0.channel_values);
            let got: Vec<_> = t
                .pending_writes
                .iter()
                .map(|w| (w.channel.clone(), w.value.clone()))
                .collect();
            assert_eq!(got, writes(i - who * 1000), "{thread}: writes of {i}");
        }
    }
    let client = postgres_support::connect(&db).await.unwrap();
    let row = client
        .query_one("SELECT count(*), count(DISTINCT xmin::text) FROM checkpoints", &[])
        .await
        .unwrap();
    let (rows, txs): (i64, i64) = (row.get(0), row.get(1));
    let faults = Arc::try_unwrap(faults).unwrap().into_inner();
    let kills = kills.load(Ordering::Relaxed);
    println!(
        "{WRITERS} writers × {n} puts and put_writes: {kills} backends terminated, {rows} checkpoints in {txs} \
         transactions, failures seen: {:?}",
        faults.seen
    );
    assert!(
        txs < rows,
        "no two puts shared a transaction: the test proved nothing for groups"
    );
    for op in ["put", "put_writes"] {
        let seen: u64 = faults.seen.iter().filter(|((o, _), _)| *o == op).map(|(_, n)| n).sum();
        assert!(seen > 0, "no {op} call was interrupted: the test proved nothing for it");
    }
    drop(client);
    drop(victim);
    drop(check);
    postgres_support::drop_database(&db).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "faults::terminated_connections_leave_no_partial_state",
            &[&crate::POSTGRES],
            2,
            terminated_connections_leave_no_partial_state,
        ),
        harness::tokio(
            "faults::terminated_connections_mid_group_leave_no_partial_state",
            &[&crate::POSTGRES],
            2,
            terminated_connections_mid_group_leave_no_partial_state,
        ),
    ]
}
