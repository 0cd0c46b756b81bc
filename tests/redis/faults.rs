//! Faults, on `redis-server`s the tests start themselves (free port, own
//! directory, killed on drop): acknowledged puts survive `SIGKILL` of a
//! server with `appendfsync always`; a connection killed mid-call
//! (`CLIENT KILL`) or a refused one is an `Error::Storage`, retryable only
//! when nothing was applied; `response_timeout` bounds a stalled call; a
//! server busy with another script refuses, retryable; and the saver
//! recovers after each, without being reopened.

use crate::harness;
use crate::saver::REDIS_SERVER;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpointer::redis::RedisSaver;
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, CheckpointTuple, Error, ListOptions, ListThreadsOptions, Result, Value,
};
use redis::aio::MultiplexedConnection;

/// Every saver call of these tests ends well within this, or the test fails
/// (a hang is a failure, not a wait).
const CALL_BOUND: Duration = Duration::from_secs(15);

/// Persistence that acknowledges a write only once it is fsynced.
const AOF_ALWAYS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];
/// No persistence at all.
const NO_PERSISTENCE: &[&str] = &["--appendonly", "no"];

/// A `redis-server` of the test's own on a free port with its own
/// directory, which [`kill`](Server::kill) and [`restart`](Server::restart)
/// keep (port, directory, arguments). Dropping it kills the server and
/// removes the directory; a watchdog does the same if the test process
/// dies first.
struct Server {
    /// Scheduling priority of the server process (`nice`), 0 normally.
    nice: i32,
    port: u16,
    dir: tempfile::TempDir,
    args: Vec<String>,
    child: Option<Child>,
    watchdogs: Vec<Child>,
}

impl Server {
    async fn start(persistence: &[&str]) -> Server {
        Self::start_niced(persistence, 0).await
    }

    /// A server run at priority `nice` (negative: ahead of the machine's
    /// other work, where permitted), so what its slow log measures is its
    /// own work rather than time it waited for a CPU.
    async fn start_niced(persistence: &[&str], nice: i32) -> Server {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::Builder::new().prefix("cktest-faults-").tempdir().unwrap();
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir.path().display().to_string(),
            "--logfile",
            "server.log",
            "--save",
            "",
            "--enable-debug-command",
            "local",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(persistence.iter().map(|s| s.to_string()));
        let mut server = Server {
            nice,
            port,
            dir,
            args,
            child: None,
            watchdogs: Vec::new(),
        };
        server.restart().await;
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `SIGKILL`: no shutdown, no final write or fsync.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server (again) on its port and directory, and waits until
    /// it answers `PING` (after loading what its directory holds).
    async fn restart(&mut self) {
        assert!(self.child.is_none(), "restart of a running server");
        let child = Command::new("nice")
            .arg("-n")
            .arg(self.nice.to_string())
            .arg("redis-server")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let watchdog = format!(
            "while kill -0 {me} 2>/dev/null && kill -0 {pid} 2>/dev/null; do sleep 0.3; done; \
             if ! kill -0 {me} 2>/dev/null; then kill -9 {pid} 2>/dev/null; rm -rf '{dir}'; fi",
            me = std::process::id(),
            pid = child.id(),
            dir = self.dir.path().display(),
        );
        self.child = Some(child);
        self.watchdogs.push(
            Command::new("sh")
                .args(["-c", &watchdog])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = self.try_control().await {
                if let Ok(pong) = redis::cmd("PING").query_async::<String>(&mut c).await {
                    assert_eq!(pong, "PONG");
                    return;
                }
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
                panic!("redis-server on port {} did not start:\n{log}", self.port);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn try_control(&self) -> redis::RedisResult<MultiplexedConnection> {
        let client = redis::Client::open(self.url())?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(10)));
        client.get_multiplexed_async_connection_with_config(&config).await
    }

    /// A connection of the test's own (not the saver's).
    async fn control(&self) -> MultiplexedConnection {
        self.try_control().await.unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        for mut w in self.watchdogs.drain(..) {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// A saver on `server` with bounded waits: a dead server is an error within
/// seconds, never a hang.
async fn saver_on(server: &Server, response_timeout: Duration) -> RedisSaver {
    RedisSaver::builder()
        .url(server.url())
        .key_prefix("faults")
        .response_timeout(Some(response_timeout))
        .connection_timeout(Some(Duration::from_secs(1)))
        .open()
        .await
        .unwrap()
}

/// `call`, or a panic if it takes longer than [`CALL_BOUND`].
async fn bounded<T>(what: &str, call: impl Future<Output = Result<T>>) -> Result<T> {
    match tokio::time::timeout(CALL_BOUND, call).await {
        Ok(result) => result,
        Err(_) => panic!("{what} did not return within {CALL_BOUND:?}"),
    }
}

/// `err` is an [`Error::Storage`]; its retryability and message.
fn storage_error(err: &Error) -> (bool, String) {
    assert!(matches!(err, Error::Storage { .. }), "not a storage error: {err:?}");
    (err.is_retryable(), err.to_string())
}

/// The message of a write whose connection broke: the outcome is unknown.
const UNKNOWN: &str = "may or may not have been applied";

/// A small xorshift generator for random-ish moments (the test prints its
/// seed; the moments also depend on timing).
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        Rng(nanos | 1)
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_millis(lo + self.0 % (hi - lo))
    }
}

// ---------------------------------------------------------------------------
// 1. SIGKILL while writing

/// A checkpoint as a writer put it.
struct Sent {
    config: CheckpointConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    parent: Option<CheckpointConfig>,
}

/// What one writer sent and what it was told.
#[derive(Default)]
struct Ledger {
    thread: String,
    /// Puts that returned `Ok`.
    acked: Vec<Sent>,
    /// Puts that failed retryable: nothing may be stored.
    refused: Vec<Sent>,
    /// Puts that failed otherwise: stored whole or not at all.
    unknown: Vec<Sent>,
    /// (checkpoint id, task id) of `put_writes` that returned `Ok`, failed
    /// retryable, failed otherwise.
    writes_acked: Vec<(String, String)>,
    writes_refused: Vec<(String, String)>,
    writes_unknown: Vec<(String, String)>,
    /// (operation, retryable, message) of every failure.
    errors: Vec<(&'static str, bool, String)>,
}

fn step_checkpoint(thread: &str, step: i64) -> (Checkpoint, CheckpointMetadata, ChannelVersions) {
    let mut cp = Checkpoint::new(step);
    let mut versions = ChannelVersions::new();
    let payload: Vec<u8> = (0..512).map(|i| (i as i64 * 31 + step) as u8).collect();
    for (channel, value, version) in [
        ("step", Value::from(step), step),
        // one version for every checkpoint: stored once, named by all
        ("writer", Value::from(thread), 1),
        ("payload", Value::Bin(payload.into()), step),
    ] {
        cp.channel_values.insert(channel.to_owned(), value);
        versions.insert(channel.to_owned(), ChannelVersion::Int(version));
    }
    cp.channel_versions = versions.clone();
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
    meta.insert("writer", thread);
    (cp, meta, versions)
}

fn write_value(id: &str, task: &str) -> Value {
    Value::from(format!("{task} on {id}"))
}

/// Shared by the writers and the test that kills their server.
#[derive(Default)]
struct Progress {
    stop: AtomicBool,
    /// Puts acknowledged so far, by all writers.
    acked: AtomicUsize,
}

impl Progress {
    /// Waits until the writers got `n` more puts acknowledged.
    async fn until_acked(&self, n: usize, after: &str) {
        let base = self.acked.load(Ordering::SeqCst);
        let deadline = Instant::now() + CALL_BOUND;
        while self.acked.load(Ordering::SeqCst) < base + n {
            assert!(Instant::now() < deadline, "no put acknowledged {after}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Puts a chain of checkpoints (and a write on each) until told to stop,
/// going on after failures from the last acknowledged checkpoint.
async fn writer(saver: RedisSaver, thread: String, progress: Arc<Progress>) -> Ledger {
    let mut ledger = Ledger {
        thread: thread.clone(),
        ..Ledger::default()
    };
    let mut parent = CheckpointConfig::new(thread.as_str());
    let mut step = 0;
    while !progress.stop.load(Ordering::SeqCst) {
        step += 1;
        let (checkpoint, metadata, versions) = step_checkpoint(&thread, step);
        let sent = |config| Sent {
            config,
            checkpoint: checkpoint.clone(),
            metadata: metadata.clone(),
            parent: parent.checkpoint_id().map(|_| parent.clone()),
        };
        match bounded("put", saver.put(&parent, &checkpoint, &metadata, &versions)).await {
            Ok(config) => {
                ledger.acked.push(sent(config.clone()));
                progress.acked.fetch_add(1, Ordering::SeqCst);
                parent = config;
            }
            Err(e) => {
                let (retryable, message) = storage_error(&e);
                let config = parent.clone().with_checkpoint_id(checkpoint.id.as_str());
                if retryable {
                    ledger.refused.push(sent(config));
                } else {
                    ledger.unknown.push(sent(config));
                }
                ledger.errors.push(("put", retryable, message));
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        }
        let id = checkpoint.id.clone();
        let task = format!("task-{step}");
        let writes = [("w".to_owned(), write_value(&id, &task))];
        match bounded("put_writes", saver.put_writes(&parent, &writes, &task, "")).await {
            Ok(()) => ledger.writes_acked.push((id, task)),
            Err(e) => {
                let (retryable, message) = storage_error(&e);
                if retryable {
                    ledger.writes_refused.push((id, task));
                } else {
                    ledger.writes_unknown.push((id, task));
                }
                ledger.errors.push(("put_writes", retryable, message));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    ledger
}

/// The tuple stored for `sent` is exactly what was sent.
fn assert_whole(tuple: &CheckpointTuple, sent: &Sent) {
    let id = &sent.checkpoint.id;
    assert_eq!(tuple.config, sent.config, "config of {id}");
    assert_eq!(tuple.checkpoint, sent.checkpoint, "checkpoint {id}");
    assert_eq!(tuple.metadata, sent.metadata, "metadata of {id}");
    assert_eq!(tuple.parent_config, sent.parent, "parent of {id}");
}

async fn check_ledger(saver: &RedisSaver, ledger: &Ledger) {
    let thread = &ledger.thread;
    let mut written: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (id, task) in ledger.writes_acked.iter().chain(&ledger.writes_unknown) {
        written.entry(id.as_str()).or_default().insert(task.as_str());
    }
    // every acknowledged put reads back exactly, its writes each one sent
    // and not refused
    let mut stored_writes = HashSet::new();
    for sent in &ledger.acked {
        let id = sent.checkpoint.id.as_str();
        let tuple = bounded("get_tuple", saver.get_tuple(&sent.config))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("acknowledged checkpoint {id} of {thread} is lost"));
        assert_whole(&tuple, sent);
        for w in &tuple.pending_writes {
            assert!(
                written.get(id).is_some_and(|tasks| tasks.contains(w.task_id.as_str())),
                "write {w:?} on {id} was never sent or was refused"
            );
            assert_eq!(w.value, write_value(id, &w.task_id), "write of {} on {id}", w.task_id);
            stored_writes.insert((id.to_owned(), w.task_id.clone()));
        }
    }
    for key in &ledger.writes_acked {
        assert!(
            stored_writes.contains(key),
            "acknowledged write {key:?} of {thread} is lost"
        );
    }
    for key in &ledger.writes_refused {
        assert!(
            !stored_writes.contains(key),
            "write {key:?} failed retryable, yet is stored"
        );
    }
    // a put that failed retryable stored nothing
    for sent in &ledger.refused {
        let found = bounded("get_tuple", saver.get_tuple(&sent.config)).await.unwrap();
        assert!(
            found.is_none(),
            "put of {} failed retryable, yet is stored",
            sent.checkpoint.id
        );
    }
    // the thread's listing: whole checkpoints, each one sent and not
    // refused, acknowledged ones all there, newest first, parents listed
    let listed = bounded(
        "list",
        saver.list_vec(Some(CheckpointConfig::new(thread.as_str())), ListOptions::default()),
    )
    .await
    .unwrap();
    let mut sent_by_id: HashMap<&str, &Sent> = HashMap::new();
    for sent in ledger.acked.iter().chain(&ledger.unknown) {
        sent_by_id.insert(sent.checkpoint.id.as_str(), sent);
    }
    let ids: Vec<&str> = listed.iter().map(|t| t.checkpoint.id.as_str()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "not newest first: {ids:?}");
    let listed_ids: HashSet<&str> = ids.iter().copied().collect();
    for tuple in &listed {
        let id = tuple.checkpoint.id.as_str();
        let sent = sent_by_id
            .get(id)
            .unwrap_or_else(|| panic!("{thread} lists {id}, which was never sent or was refused"));
        assert_whole(tuple, sent);
        if let Some(parent) = &tuple.parent_config {
            let parent = parent.checkpoint_id().unwrap();
            assert!(listed_ids.contains(parent), "{id}'s parent {parent} is not listed");
        }
    }
    for sent in &ledger.acked {
        assert!(
            listed_ids.contains(sent.checkpoint.id.as_str()),
            "acknowledged {} not listed",
            sent.checkpoint.id
        );
    }
}

async fn acknowledged_puts_survive_sigkill() {
    const WRITERS: usize = 4;
    const ROUNDS: usize = 4;
    let mut rng = Rng::seeded();
    eprintln!("acknowledged_puts_survive_sigkill: seed {}", rng.0);
    let mut server = Server::start(AOF_ALWAYS).await;
    // the one saver lives through every kill: its connection reconnects
    let saver = saver_on(&server, Duration::from_secs(3)).await;
    let progress = Arc::new(Progress::default());
    let writers: Vec<_> = (0..WRITERS)
        .map(|n| tokio::spawn(writer(saver.clone(), format!("writer-{n}"), progress.clone())))
        .collect();
    // each round: the writers at work (puts acknowledged since the last
    // restart), a kill at a random-ish moment, a restart
    progress.until_acked(WRITERS, "at the start").await;
    for round in 1..=ROUNDS {
        tokio::time::sleep(rng.millis(10, 300)).await;
        server.kill();
        // one long outage: the saver's reconnection gives up, and the
        // calls meanwhile are refused (retryable)
        let outage = if round == 2 {
            Duration::from_millis(1500)
        } else {
            rng.millis(50, 300)
        };
        tokio::time::sleep(outage).await;
        server.restart().await;
        progress
            .until_acked(2 * WRITERS, &format!("after restart {round}"))
            .await;
    }
    progress.stop.store(true, Ordering::SeqCst);
    let mut ledgers = Vec::new();
    for w in writers {
        ledgers.push(w.await.unwrap());
    }
    // everything acknowledged must now come back from the append-only file
    server.kill();
    server.restart().await;
    let fresh = saver_on(&server, Duration::from_secs(3)).await;

    let errors: Vec<&(&str, bool, String)> = ledgers.iter().flat_map(|l| &l.errors).collect();
    let mut unknown_stored = 0;
    for sent in ledgers.iter().flat_map(|l| &l.unknown) {
        unknown_stored += usize::from(fresh.get_tuple(&sent.config).await.unwrap().is_some());
    }
    let mut kinds: Vec<String> = errors
        .iter()
        .map(|(op, retryable, message)| format!("{op} retryable={retryable}: {message}"))
        .collect();
    kinds.sort();
    kinds.dedup();
    eprintln!(
        "acknowledged_puts_survive_sigkill: {} puts and {} put_writes acknowledged; \
         {} failures, {} puts of unknown outcome of which {unknown_stored} stored; failures seen:\n  {}",
        ledgers.iter().map(|l| l.acked.len()).sum::<usize>(),
        ledgers.iter().map(|l| l.writes_acked.len()).sum::<usize>(),
        errors.len(),
        ledgers.iter().map(|l| l.unknown.len()).sum::<usize>(),
        kinds.join("\n  ")
    );
    // each kill hit the writers (and the saver recovered after each restart:
    // `until_acked`)
    assert!(errors.len() >= ROUNDS, "{} failures over {ROUNDS} kills", errors.len());
    assert!(errors.iter().any(|e| e.1), "no call refused in a 1.5 s outage");
    for (_, retryable, message) in &errors {
        assert!(
            *retryable || message.contains(UNKNOWN),
            "a write failed non-retryable without saying its outcome is unknown: {message}"
        );
    }
    for ledger in &ledgers {
        check_ledger(&fresh, ledger).await;
    }
    let threads = fresh.list_threads(ListThreadsOptions::default()).await.unwrap();
    for ledger in ledgers.iter().filter(|l| !l.acked.is_empty()) {
        assert!(
            threads.iter().any(|t| t.thread_id == ledger.thread),
            "{} missing from list_threads",
            ledger.thread
        );
    }
}

// ---------------------------------------------------------------------------
// 2. connections killed mid-call, and refused

/// Waits until the server holds `n` clients blocked (here: by `CLIENT PAUSE`).
async fn until_blocked(c: &mut MultiplexedConnection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info: String = redis::cmd("INFO").arg("clients").query_async(c).await.unwrap();
        let blocked = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if blocked >= n {
            return;
        }
        assert!(Instant::now() < deadline, "no call got held by the pause: {info}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `call` on the saver while the server holds it (`CLIENT PAUSE ..
/// WRITE`, which on Redis 7.0 holds every script, reads included), kills
/// the saver's connection (`CLIENT KILL`), lifts the pause, and returns
/// what the call returned. (`CLIENT PAUSE .. ALL` would hold this test's
/// own `CLIENT KILL` too.)
async fn killed_while_held<T: Send + 'static>(
    server: &Server,
    call: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let mut c = server.control().await;
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(10_000)
        .arg("WRITE")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let task = tokio::spawn(async move { bounded("the held call", call).await });
    until_blocked(&mut c, 1).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(killed, 1, "the saver's connection is the server's one other client");
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    task.await.unwrap()
}

async fn a_killed_connection_fails_retryable_only_when_nothing_was_applied() {
    let mut server = Server::start(NO_PERSISTENCE).await;
    let saver = saver_on(&server, Duration::from_secs(10)).await;
    let thread = "killed";
    let (root_cp, root_meta, root_versions) = step_checkpoint(thread, 1);
    let root = saver
        .put(&CheckpointConfig::new(thread), &root_cp, &root_meta, &root_versions)
        .await
        .unwrap();

    // a write held by the pause, its connection killed: the outcome is
    // unknown to the saver (not retryable); on the server, nothing applied
    let (cp, meta, versions) = step_checkpoint(thread, 2);
    let (s, parent, c2, m2, v2) = (saver.clone(), root.clone(), cp.clone(), meta.clone(), versions.clone());
    let err = killed_while_held(&server, async move { s.put(&parent, &c2, &m2, &v2).await })
        .await
        .unwrap_err();
    let (retryable, message) = storage_error(&err);
    eprintln!("put, connection killed: {message}");
    assert!(!retryable && message.contains(UNKNOWN), "{message}");
    let child = root.clone().with_checkpoint_id(cp.id.as_str());
    // the next call reconnects and works
    assert_eq!(bounded("get_tuple", saver.get_tuple(&child)).await.unwrap(), None);
    let stored = bounded("put", saver.put(&root, &cp, &meta, &versions)).await.unwrap();
    assert_eq!(stored, child);

    let writes = [("w".to_owned(), Value::from("x"))];
    let (s, at, w) = (saver.clone(), child.clone(), writes.clone());
    let err = killed_while_held(&server, async move { s.put_writes(&at, &w, "task", "").await })
        .await
        .unwrap_err();
    let (retryable, message) = storage_error(&err);
    eprintln!("put_writes, connection killed: {message}");
    assert!(!retryable && message.contains(UNKNOWN), "{message}");
    let tuple = saver.get_tuple(&child).await.unwrap().unwrap();
    assert!(tuple.pending_writes.is_empty(), "{:?}", tuple.pending_writes);
    // repeating it is safe (every write is idempotent)
    saver.put_writes(&child, &writes, "task", "").await.unwrap();
    saver.put_writes(&child, &writes, "task", "").await.unwrap();
    assert_eq!(saver.get_tuple(&child).await.unwrap().unwrap().pending_writes.len(), 1);

    // a read whose connection broke may simply be repeated
    let (s, at) = (saver.clone(), child.clone());
    let err = killed_while_held(&server, async move { s.get_tuple(&at).await })
        .await
        .unwrap_err();
    let (retryable, message) = storage_error(&err);
    eprintln!("get_tuple, connection killed: {message}");
    assert!(retryable && !message.contains(UNKNOWN), "{message}");
    let (s, at) = (saver.clone(), CheckpointConfig::new(thread));
    let err = killed_while_held(
        &server,
        async move { s.list_vec(Some(at), ListOptions::default()).await },
    )
    .await
    .unwrap_err();
    assert!(storage_error(&err).0, "{err}");
    assert_eq!(saver.latest(thread).await.unwrap().unwrap().config, child);

    // the server gone: once the connection's loss is seen, calls are
    // refused, retryable, and fail fast
    server.kill();
    let mut refused = 0;
    for attempt in 0..4 {
        let started = Instant::now();
        let (cp, meta, versions) = step_checkpoint(thread, 3 + attempt);
        let err = bounded("put", saver.put(&child, &cp, &meta, &versions))
            .await
            .unwrap_err();
        let (retryable, message) = storage_error(&err);
        eprintln!(
            "put, server gone ({:?}): retryable {retryable}: {message}",
            started.elapsed()
        );
        assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
        if message.contains("refused") {
            assert!(retryable, "a refused connection is retryable: {message}");
            refused += 1;
        } else {
            // the first call may find the dead connection: unknown
            assert!(!retryable && message.contains(UNKNOWN), "{message}");
        }
    }
    assert!(refused >= 3, "{refused} of 4 calls refused");
    server.restart().await;
    // an empty server now (no persistence): the saver works on it
    assert_eq!(bounded("latest", saver.latest(thread)).await.unwrap(), None);
    let (cp, meta, versions) = step_checkpoint(thread, 9);
    bounded("put", saver.put(&CheckpointConfig::new(thread), &cp, &meta, &versions))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------
// 3. a stalled server and response_timeout

/// Holds the server for `seconds` (`DEBUG SLEEP` from a connection of the
/// test's own), returning once the server is asleep.
async fn stall(server: &Server, seconds: f64) -> tokio::task::JoinHandle<()> {
    let mut c = server.control().await;
    // connected before the stall: a connection made during it would wait
    let mut probe = server.control().await;
    let task = tokio::spawn(async move {
        redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(seconds)
            .query_async::<()>(&mut c)
            .await
            .unwrap();
    });
    // asleep once a PING from another connection goes unanswered
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let ping = tokio::time::timeout(
            Duration::from_millis(50),
            redis::cmd("PING").query_async::<String>(&mut probe),
        )
        .await;
        if ping.is_err() {
            return task;
        }
        assert!(
            Instant::now() < deadline && !task.is_finished(),
            "the server never stalled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn a_response_timeout_bounds_a_stalled_call() {
    const TIMEOUT: Duration = Duration::from_millis(300);
    let server = Server::start(NO_PERSISTENCE).await;
    let saver = saver_on(&server, TIMEOUT).await;
    let thread = "stalled";
    let (cp, meta, versions) = step_checkpoint(thread, 1);
    let root = saver
        .put(&CheckpointConfig::new(thread), &cp, &meta, &versions)
        .await
        .unwrap();

    // the script cached: a write sent during the stall is one EVALSHA,
    // which the server runs when it wakes up (an uncached one would get
    // NOSCRIPT then, and the saver, gone, would not send the EVAL)
    saver
        .put_writes(&root, &[("w".to_owned(), Value::from("early"))], "first", "")
        .await
        .unwrap();
    // 3 s: a call that waited for the server would take over 2 s
    let sleeper = stall(&server, 3.0).await;
    let timed = |started: Instant, err: &Error| {
        let elapsed = started.elapsed();
        assert!(
            elapsed >= TIMEOUT && elapsed < TIMEOUT + Duration::from_secs(1),
            "{elapsed:?} for a timeout of {TIMEOUT:?}: {err}"
        );
    };
    // a read: retryable
    let started = Instant::now();
    let err = bounded("get_tuple", saver.get_tuple(&root)).await.unwrap_err();
    timed(started, &err);
    let (retryable, message) = storage_error(&err);
    eprintln!("get_tuple, timed out: {message}");
    assert!(retryable && message.contains("timed out"), "{message}");
    // a write: not retryable, and indeed applied once the server wakes up
    let writes = [("w".to_owned(), Value::from("late"))];
    let started = Instant::now();
    let err = bounded("put_writes", saver.put_writes(&root, &writes, "task", ""))
        .await
        .unwrap_err();
    timed(started, &err);
    let (retryable, message) = storage_error(&err);
    eprintln!("put_writes, timed out: {message}");
    assert!(!retryable && message.contains(UNKNOWN), "{message}");
    sleeper.await.unwrap();
    // the connection survives the late answers: the next calls work
    let tuple = bounded("get_tuple", saver.get_tuple(&root)).await.unwrap().unwrap();
    assert_eq!(
        tuple.pending_writes.iter().map(|w| &w.value).collect::<Vec<_>>(),
        [&Value::from("early"), &Value::from("late")],
        "the timed-out put_writes was applied after the stall"
    );
    let (cp, meta, versions) = step_checkpoint(thread, 2);
    bounded("put", saver.put(&root, &cp, &meta, &versions)).await.unwrap();
    assert_eq!(saver.latest(thread).await.unwrap().unwrap().checkpoint.id, cp.id);

    // a paused server (`CLIENT PAUSE .. ALL`, which lifts itself): the
    // same bound
    let mut c = server.control().await;
    let paused = Instant::now();
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(800)
        .arg("ALL")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let started = Instant::now();
    let err = bounded("latest", saver.latest(thread)).await.unwrap_err();
    timed(started, &err);
    assert!(storage_error(&err).0, "{err}");
    tokio::time::sleep(Duration::from_millis(1000).saturating_sub(paused.elapsed())).await;
    assert_eq!(
        bounded("latest", saver.latest(thread))
            .await
            .unwrap()
            .unwrap()
            .checkpoint
            .id,
        cp.id
    );
}

// ---------------------------------------------------------------------------
// 4. a server busy running another script

async fn a_busy_server_refuses_retryable() {
    let server = Server::start(&["--appendonly", "no", "--lua-time-limit", "100"]).await;
    let saver = saver_on(&server, Duration::from_secs(5)).await;
    let thread = "busy";
    let (cp, meta, versions) = step_checkpoint(thread, 1);
    let root = saver
        .put(&CheckpointConfig::new(thread), &cp, &meta, &versions)
        .await
        .unwrap();
    let mut probe = server.control().await;
    let mut c = server.control().await;
    let looping = tokio::spawn(async move {
        redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query_async::<()>(&mut c)
            .await
            .unwrap_err()
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match redis::cmd("PING").query_async::<String>(&mut probe).await {
            Err(e) if e.code() == Some("BUSY") => break,
            other => assert!(Instant::now() < deadline, "the server is not busy: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (cp, meta, versions) = step_checkpoint(thread, 2);
    let writes = [("w".to_owned(), Value::from("x"))];
    let results = [
        ("get_tuple", saver.get_tuple(&root).await.map(drop)),
        ("put", saver.put(&root, &cp, &meta, &versions).await.map(drop)),
        ("put_writes", saver.put_writes(&root, &writes, "task", "").await),
    ];
    redis::cmd("SCRIPT")
        .arg("KILL")
        .query_async::<()>(&mut probe)
        .await
        .unwrap();
    looping.await.unwrap();
    // refused before anything ran: retryable, reads and writes alike
    for (op, result) in results {
        let err = result.unwrap_err();
        let (retryable, message) = storage_error(&err);
        eprintln!("{op}, server busy: {message}");
        assert!(retryable && message.contains("BUSY"), "{op}: {message}");
        assert!(!message.contains(UNKNOWN), "{op}: {message}");
    }
    // and indeed nothing was applied; the same calls now succeed
    let tuple = saver.get_tuple(&root).await.unwrap().unwrap();
    assert!(tuple.pending_writes.is_empty(), "{:?}", tuple.pending_writes);
    assert_eq!(saver.latest(thread).await.unwrap().unwrap().config, root);
    let child = saver.put(&root, &cp, &meta, &versions).await.unwrap();
    saver.put_writes(&root, &writes, "task", "").await.unwrap();
    assert_eq!(saver.latest(thread).await.unwrap().unwrap().config, child);
    assert_eq!(saver.get_tuple(&root).await.unwrap().unwrap().pending_writes.len(), 1);
}

/// The server forgets its scripts (restart, `SCRIPT FLUSH`, failover): a
/// `put` (values by `HSETNX`, then `EVALSHA` in one transaction) loads the
/// script and runs again, whole; so do the other operations.
async fn puts_survive_a_script_flush() {
    use checkpointer::redis::TtlConfig;
    // a server of its own: a flush would disturb the other tests' calls
    let server = Server::start(&[]).await;
    let saver = RedisSaver::builder()
        .url(server.url())
        .key_prefix("flush")
        .ttl(TtlConfig::minutes(10.0))
        .open()
        .await
        .unwrap();
    let mut c = server.control().await;
    let mut parent: Option<CheckpointConfig> = None;
    for round in 0..3 {
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async::<()>(&mut c)
            .await
            .unwrap();
        let config = parent.clone().unwrap_or_else(|| CheckpointConfig::new("t"));
        let (cp, meta, versions) = step_checkpoint("t", round);
        let stored = saver.put(&config, &cp, &meta, &versions).await.unwrap();
        saver
            .put_writes(&stored, &[("a".into(), Value::from(round))], "task", "")
            .await
            .unwrap();
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async::<()>(&mut c)
            .await
            .unwrap();
        let tuple = saver.get_tuple(&stored).await.unwrap().unwrap();
        assert_eq!(tuple.checkpoint.id, cp.id);
        assert_eq!(tuple.checkpoint.channel_values, cp.channel_values);
        assert_eq!(tuple.pending_writes.len(), 1);
        parent = Some(stored);
    }
    // every key of the thread has a deadline (none left without one)
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("flush:*").query_async(&mut c).await.unwrap();
    assert!(keys.len() >= 9, "{} keys", keys.len());
    for key in keys {
        let name = String::from_utf8_lossy(&key).into_owned();
        if name.contains("{t}") {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut c).await.unwrap();
            assert!(ttl > 0, "{name} has no deadline ({ttl})");
        }
    }
}

// ---------------------------------------------------------------------------
// 6. Operations proportional to a thread never stall the server

/// The longest a single command or script of the saver may keep the server
/// from answering anyone else, as the server measures it (`SLOWLOG`).
const STALL_BOUND_US: i64 = 10_000;

/// Checkpoints of the large thread (`CHECKPOINTER_STALL_CHECKPOINTS`
/// overrides: 100 000 for the figures in the report).
fn stall_checkpoints() -> usize {
    std::env::var("CHECKPOINTER_STALL_CHECKPOINTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000)
}

/// The entries of the server's slow log (commands that ran 1 ms or more),
/// as (µs, command), emptied after reading.
async fn slow_commands(c: &mut MultiplexedConnection) -> Vec<(i64, String)> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(-1).query_async(c).await.unwrap();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query_async(c).await.unwrap();
    let mut out = Vec::new();
    for e in entries {
        let redis::Value::Array(parts) = e else { continue };
        let us = match parts.get(2) {
            Some(redis::Value::Int(us)) => *us,
            _ => continue,
        };
        let cmd = match parts.get(3) {
            Some(redis::Value::Array(args)) => args
                .iter()
                .take(3)
                .map(|a| match a {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        };
        out.push((us, cmd));
    }
    out
}

type Step = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs `setup(i)` then `run(i)` and reads the slow log of `run` alone; a
/// command or script of [`STALL_BOUND_US`] or more fails the test unless
/// another attempt (three in all) has none: a stall of the saver's own
/// repeats every time, while a CPU quota throttling the whole machine
/// (`/proc/pressure/cpu`) stops the server at random commands.
async fn without_stalls(
    c: &mut MultiplexedConnection,
    what: &str,
    n: usize,
    report: &mut Vec<String>,
    mut setup: impl FnMut(usize) -> Step,
    mut run: impl FnMut(usize) -> Step,
) {
    let mut seen = Vec::new();
    for i in 0..3 {
        setup(i).await;
        let _ = slow_commands(c).await;
        run(i).await;
        let mut slow = slow_commands(c).await;
        slow.sort_by_key(|(us, _)| std::cmp::Reverse(*us));
        let stalls: Vec<(i64, String)> = slow.iter().filter(|(us, _)| *us >= STALL_BOUND_US).cloned().collect();
        slow.truncate(3);
        let line = format!("{what} (attempt {i}): the longest: {slow:?}");
        eprintln!("{line}");
        report.push(line);
        if stalls.is_empty() {
            return;
        }
        seen.push(stalls);
    }
    panic!(
        "{what} of a thread of {n} checkpoints stalled the server >= {STALL_BOUND_US} µs at every attempt: {seen:?}"
    );
}

/// `copy_thread`, `import_thread`, `thread_keys`, `delete_for_runs`,
/// `prune` and `delete_thread` of a thread of 20 000 checkpoints (a value
/// per checkpoint, a shared one, writes on every tenth) on a server of the
/// test's own: the slow log, measured by the server, holds no command or
/// script of 10 ms or more (before bounded steps, `copy_thread` was one
/// script of about 170 ms at this size), and each operation did its work.
async fn thread_wide_operations_never_stall_the_server() {
    // the machine's other work (builds on few cores) would otherwise
    // preempt the server mid-command and show up as stalls of the saver's
    let server = Server::start_niced(NO_PERSISTENCE, -15).await;
    let mut c = server.control().await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(1000)
        .arg("slowlog-max-len")
        .arg(100_000)
        .query_async(&mut c)
        .await
        .unwrap();
    let saver = saver_on(&server, Duration::from_secs(60)).await;
    let n = stall_checkpoints();
    let thread = "large";
    let mut calls = Vec::with_capacity(n);
    let mut parent: Option<String> = None;
    for step in 0..n {
        let (cp, mut meta, versions) = step_checkpoint(thread, step as i64);
        meta.insert("run_id", format!("run-{}", step % 50));
        let mut config = CheckpointConfig::new(thread);
        if let Some(p) = &parent {
            config = config.with_checkpoint_id(p.clone());
        }
        parent = Some(cp.id.clone());
        calls.push((config, cp, meta, versions));
    }
    // built by concurrent puts on the multiplexed connection
    for chunk in calls.chunks(500) {
        let puts = chunk.iter().map(|(config, cp, meta, versions)| {
            let saver = saver.clone();
            async move {
                let stored = saver.put(config, cp, meta, versions).await.unwrap();
                if cp.channel_values["step"].as_i64().unwrap_or(0) % 10 == 0 {
                    saver
                        .put_writes(&stored, &[("out".into(), Value::from(1))], "task", "")
                        .await
                        .unwrap();
                }
            }
        });
        futures::future::join_all(puts).await;
    }
    let keys = saver.thread_keys(thread).await.unwrap();
    assert_eq!(keys.checkpoints.len(), n);
    assert_eq!(keys.writes.len(), n.div_ceil(10));
    let mut report = Vec::new();
    let s = saver.clone();
    let count = move |t: String| {
        let s = s.clone();
        async move { s.thread_keys(&t).await.unwrap() }
    };

    let (s, k) = (saver.clone(), count.clone());
    without_stalls(
        &mut c,
        "copy_thread",
        n,
        &mut report,
        |_| Box::pin(async {}),
        move |i| {
            let (s, k) = (s.clone(), k.clone());
            Box::pin(async move {
                s.copy_thread(thread, &format!("copied-{i}")).await.unwrap();
                let copied = k(format!("copied-{i}")).await;
                assert_eq!((copied.checkpoints.len(), copied.writes.len()), (n, n.div_ceil(10)));
            })
        },
    )
    .await;

    // import: the thread's checkpoints, read back, into new threads
    let mut imported = checkpointer::import::ThreadImport {
        thread_id: String::new(),
        checkpoints: Vec::new(),
    };
    let mut stream = saver.list(Some(CheckpointConfig::new(thread)), ListOptions::default());
    use futures::StreamExt;
    while let Some(t) = stream.next().await {
        let t = t.unwrap();
        imported.checkpoints.push(checkpointer::import::ImportedCheckpoint {
            checkpoint_ns: t.config.ns().to_owned(),
            parent_checkpoint_id: t.parent_config.and_then(|p| p.checkpoint_id),
            checkpoint: t.checkpoint,
            metadata: t.metadata,
            writes: Vec::new(),
        });
    }
    drop(stream);
    let imported = Arc::new(imported);
    for (what, mode) in [
        ("import_thread", checkpointer::import::ImportMode::Create),
        ("import_thread (replace)", checkpointer::import::ImportMode::Replace),
    ] {
        let (s, k, im) = (saver.clone(), count.clone(), imported.clone());
        without_stalls(
            &mut c,
            what,
            n,
            &mut report,
            |_| Box::pin(async {}),
            move |i| {
                let (s, k, im) = (s.clone(), k.clone(), im.clone());
                Box::pin(async move {
                    let mut one = (*im).clone();
                    one.thread_id = format!("imported-{i}");
                    s.import_thread(&one, mode).await.unwrap();
                    assert_eq!(k(one.thread_id.clone()).await.checkpoints.len(), n);
                })
            },
        )
        .await;
    }

    let k = count.clone();
    without_stalls(
        &mut c,
        "thread_keys",
        n,
        &mut report,
        |_| Box::pin(async {}),
        move |_| {
            let k = k.clone();
            Box::pin(async move {
                assert_eq!(k(thread.to_owned()).await.checkpoints.len(), n);
            })
        },
    )
    .await;

    // a run's checkpoints: 1 in 50 of every thread holding them
    let (s, k) = (saver.clone(), count.clone());
    let before = Arc::new(AtomicUsize::new(n));
    without_stalls(
        &mut c,
        "delete_for_runs",
        n,
        &mut report,
        |_| Box::pin(async {}),
        move |i| {
            let (s, k, before) = (s.clone(), k.clone(), before.clone());
            Box::pin(async move {
                let run = 7 + i;
                s.delete_for_runs(&[format!("run-{run}")]).await.unwrap();
                let left = k(thread.to_owned()).await.checkpoints.len();
                assert_eq!(left, before.load(Ordering::Relaxed) - (n + 49 - run) / 50);
                before.store(left, Ordering::Relaxed);
            })
        },
    )
    .await;

    let (s, s2, k) = (saver.clone(), saver.clone(), count.clone());
    without_stalls(
        &mut c,
        "prune",
        n,
        &mut report,
        move |i| {
            let s = s.clone();
            Box::pin(async move {
                s.copy_thread(thread, &format!("pruned-{i}")).await.unwrap();
            })
        },
        move |i| {
            let (s, k) = (s2.clone(), k.clone());
            Box::pin(async move {
                s.prune(&[format!("pruned-{i}")], checkpointer::PruneStrategy::KeepLatest)
                    .await
                    .unwrap();
                assert_eq!(k(format!("pruned-{i}")).await.checkpoints.len(), 1);
            })
        },
    )
    .await;

    let (s, s2, k) = (saver.clone(), saver.clone(), count.clone());
    without_stalls(
        &mut c,
        "delete_thread",
        n,
        &mut report,
        move |i| {
            let s = s.clone();
            Box::pin(async move {
                s.copy_thread(thread, &format!("deleted-{i}")).await.unwrap();
            })
        },
        move |i| {
            let (s, k) = (s2.clone(), k.clone());
            Box::pin(async move {
                s.delete_thread(&format!("deleted-{i}")).await.unwrap();
                assert!(k(format!("deleted-{i}")).await.checkpoints.is_empty());
            })
        },
    )
    .await;

    // every thread deleted: the global index is empty
    loop {
        let threads = saver.list_threads(ListThreadsOptions::default()).await.unwrap();
        if threads.is_empty() {
            break;
        }
        for t in &threads {
            saver.delete_thread(&t.thread_id).await.unwrap();
        }
    }
    assert!(saver
        .list_threads(ListThreadsOptions::default())
        .await
        .unwrap()
        .is_empty());
    let index: i64 = redis::cmd("ZCARD")
        .arg("faults:v2:{#index}:checkpoints")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(index, 0, "the global index still names checkpoints");
    eprintln!("the slowest commands (µs), {n} checkpoints: {report:#?}");
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "faults::acknowledged_puts_survive_sigkill",
            &[&REDIS_SERVER],
            2,
            acknowledged_puts_survive_sigkill,
        ),
        harness::tokio(
            "faults::a_killed_connection_fails_retryable_only_when_nothing_was_applied",
            &[&REDIS_SERVER],
            2,
            a_killed_connection_fails_retryable_only_when_nothing_was_applied,
        ),
        harness::tokio(
            "faults::a_response_timeout_bounds_a_stalled_call",
            &[&REDIS_SERVER],
            2,
            a_response_timeout_bounds_a_stalled_call,
        ),
        harness::tokio(
            "faults::puts_survive_a_script_flush",
            &[&REDIS_SERVER],
            2,
            puts_survive_a_script_flush,
        ),
        harness::tokio(
            "faults::thread_wide_operations_never_stall_the_server",
            &[&REDIS_SERVER],
            2,
            thread_wide_operations_never_stall_the_server,
        ),
        harness::tokio(
            "faults::a_busy_server_refuses_retryable",
            &[&REDIS_SERVER],
            2,
            a_busy_server_refuses_retryable,
        ),
    ]
}
