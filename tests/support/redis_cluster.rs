//! A real local Redis Cluster for the tests (a module `cluster_support` of
//! the `redis` test binary): three `redis-server` masters on free ports,
//! joined by `redis-cli --cluster create`, started once per test binary run
//! ([`cluster`]) and shared by the tests, each on key prefixes of its own.
//!
//! Each server runs under a small shell watchdog that kills it (and removes
//! the cluster's directory) when the test process is gone, since a static
//! is never dropped; [`Cluster`]'s `Drop` shuts the servers down too.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use checkpointer::redis::RedisSaver;

/// A running cluster.
pub struct Cluster {
    /// The masters' ports.
    pub ports: Vec<u16>,
    dir: std::path::PathBuf,
}

impl Cluster {
    /// The masters' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.ports.iter().map(|p| format!("redis://127.0.0.1:{p}")).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for port in &self.ports {
            let _ = Command::new("redis-cli")
                .args(["-p", &port.to_string(), "SHUTDOWN", "NOSAVE"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The cluster of this run, started the first time it is asked for.
pub fn cluster() -> Result<&'static Cluster, String> {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    CLUSTER.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// The harness's check: the binaries are there and the cluster starts.
pub fn available() -> Result<(), String> {
    cluster().map(drop)
}

/// A port `p` free along with its cluster bus port `p + 10000`.
fn free_port(taken: &[u16]) -> Result<u16, String> {
    for _ in 0..200 {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        if port > 55000 || taken.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return Ok(port);
        }
    }
    Err("no free port pair for a cluster node".into())
}

fn start() -> Result<Cluster, String> {
    let which = |bin: &str| {
        Command::new(bin)
            .arg("--version")
            .output()
            .map(drop)
            .map_err(|e| format!("no {bin} binary: {e}"))
    };
    which("redis-server")?;
    which("redis-cli")?;
    let dir = std::env::temp_dir().join(format!("cktest-cluster-{}-{:08x}", std::process::id(), nanos()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut ports = Vec::new();
    for _ in 0..3 {
        ports.push(free_port(&ports)?);
    }
    let me = std::process::id().to_string();
    for port in &ports {
        let p = port.to_string();
        let conf = dir.join(format!("nodes-{port}.conf"));
        let server = format!(
            "redis-server --port {p} --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file '{}' \
             --save '' --appendonly no --dir '{}' --logfile '{}'",
            conf.display(),
            dir.display(),
            dir.join(format!("log-{port}.txt")).display(),
        );
        // the watchdog: the server lives as long as the test process
        let script = format!(
            "{server} & s=$!; while kill -0 {me} 2>/dev/null && kill -0 $s 2>/dev/null; do sleep 0.5; done; \
             kill $s 2>/dev/null; wait $s; rm -rf '{}'",
            dir.display()
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e}"))?;
    }
    let cluster = Cluster { ports, dir };
    let deadline = Instant::now() + Duration::from_secs(20);
    for port in &cluster.ports {
        while ping(*port).is_err() {
            if Instant::now() > deadline {
                return Err(format!("cluster node on port {port} did not start"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let nodes: Vec<String> = cluster.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&nodes)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .map_err(|e| format!("redis-cli --cluster create: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    for port in &cluster.ports {
        loop {
            let info = cli(*port, &["CLUSTER", "INFO"]).unwrap_or_default();
            if info.contains("cluster_state:ok") {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("cluster node {port} never reported cluster_state:ok: {info}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(cluster)
}

fn nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos()
}

fn cli(port: u16, args: &[&str]) -> Result<String, String> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ping(port: u16) -> Result<(), String> {
    match cli(port, &["PING"])?.trim() {
        "PONG" => Ok(()),
        other => Err(other.to_owned()),
    }
}

/// The cluster, or a panic (the harness lists the tests with the need).
pub fn the_cluster() -> &'static Cluster {
    cluster().unwrap_or_else(|e| panic!("no Redis Cluster: {e}"))
}

/// A key prefix no other saver of this run uses.
pub fn fresh_prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "ckcluster-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A saver on the cluster, on `prefix`.
pub async fn saver_on(prefix: String) -> RedisSaver {
    RedisSaver::builder()
        .cluster(the_cluster().urls())
        .key_prefix(prefix)
        .open()
        .await
        .unwrap()
}

/// A plain connection to one node; a node busy with a large value (the
/// conformance suite stores 100 MB ones) may time a connect out, so it is
/// tried a few times.
pub async fn node(port: u16) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    let mut attempt = 0;
    loop {
        match client.get_multiplexed_async_connection().await {
            Ok(mut c) => {
                // The client's 500 ms would time out behind a 100 MB write.
                c.set_response_timeout(std::time::Duration::from_secs(60));
                return c;
            }
            Err(e) if attempt < 10 && e.is_timeout() => attempt += 1,
            Err(e) => panic!("no connection to the node at port {port}: {e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The keys under `prefix` on the node at `port` (`SCAN` of that node).
pub async fn keys_on(port: u16, prefix: &str) -> Vec<Vec<u8>> {
    let pattern = crate::redis_support::prefix_pattern(prefix);
    crate::redis_support::scan(&mut node(port).await, &pattern).await
}

/// Removes every key under `prefix`, node by node, one key per `UNLINK`
/// (keys of different slots cannot share a command on a cluster).
pub async fn cleanup(prefix: &str) {
    for port in &the_cluster().ports {
        let keys = keys_on(*port, prefix).await;
        let mut c = node(*port).await;
        for chunk in keys.chunks(500) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("UNLINK").arg(k).ignore();
            }
            pipe.query_async::<()>(&mut c).await.unwrap();
        }
    }
}

/// The masters' slot ranges, `(first, last, port)`, from `CLUSTER SLOTS`.
pub async fn slot_owners() -> Vec<(u16, u16, u16)> {
    use redis::Value;
    let mut c = node(the_cluster().ports[0]).await;
    let slots: Vec<Vec<Value>> = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut c).await.unwrap();
    let int = |v: &Value| match v {
        Value::Int(i) => u16::try_from(*i).unwrap(),
        other => panic!("unexpected CLUSTER SLOTS value {other:?}"),
    };
    slots
        .iter()
        .map(|range| match &range[2] {
            Value::Array(master) => (int(&range[0]), int(&range[1]), int(&master[1])),
            other => panic!("unexpected CLUSTER SLOTS node {other:?}"),
        })
        .collect()
}

/// The master port serving `slot` in `owners` ([`slot_owners`]).
pub fn owner_in(owners: &[(u16, u16, u16)], slot: u16) -> u16 {
    owners
        .iter()
        .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
        .map(|o| o.2)
        .unwrap_or_else(|| panic!("no node serves slot {slot}"))
}
