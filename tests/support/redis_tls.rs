//! Local `redis-server`s speaking only TLS, for the tests of `rediss://`
//! (a module of the `redis` test binary's `tls` and of the CLI's tests):
//! a throwaway CA, a server certificate for `127.0.0.1` and a client
//! certificate made with the `openssl` command, and two servers on free
//! ports: one with a password that asks for no client certificate, one
//! that requires a client certificate (mutual TLS); and, when asked for
//! ([`cluster`]), a three-master Redis Cluster whose nodes and bus speak
//! only TLS (`redis-cli` joins them).
//!
//! Started once per test process ([`tls`]); each server runs under a small
//! shell watchdog that kills it and removes the directory when the test
//! process is gone, since a static is never dropped.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The password of [`Tls::port`]'s server.
pub const PASSWORD: &str = "tls-S3cret-pw";

/// The certificates and the two servers.
pub struct Tls {
    /// Where the certificates (and the servers' logs) are.
    pub dir: PathBuf,
    /// A server with a password that asks for no client certificate.
    pub port: u16,
    /// A server without password that requires a client certificate signed
    /// by the CA.
    pub mtls_port: u16,
}

impl Tls {
    /// `rediss://:PASSWORD@127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("rediss://:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    /// `rediss://127.0.0.1:<mtls_port>`.
    pub fn mtls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.mtls_port)
    }

    /// The path of a file of [`dir`](Self::dir): `ca.pem`, `other-ca.pem`
    /// (a CA that signed nothing of these servers), `client.pem`,
    /// `client.key`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The bytes of a file of [`dir`](Self::dir).
    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }
}

/// The certificates and servers of this process, made the first time they
/// are asked for.
pub fn tls() -> Result<&'static Tls, String> {
    static TLS: OnceLock<Result<Tls, String>> = OnceLock::new();
    TLS.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// The harness's check: `openssl` makes the certificates and
/// `redis-server` (built with TLS) starts.
pub fn available() -> Result<(), String> {
    tls().map(drop)
}

/// The certificates: two CAs, a server certificate for 127.0.0.1 and
/// localhost (a client certificate too: cluster nodes present it to each
/// other) and a client certificate, all signed by `ca` (EC P-256, fast to
/// make).
const MAKE_CERTIFICATES: &str = r#"set -e
ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=$2" -keyout "$1.key" -out "$1.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=$2" -keyout "$1.key" -out "$1.csr"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out "$1.pem" -extfile "$1.ext"
}
ca ca "checkpointer test CA"
ca other-ca "checkpointer other CA"
leaf server 127.0.0.1 serverAuth,clientAuth
leaf client "checkpointer test client" clientAuth
"#;

fn start() -> Result<Tls, String> {
    let dir = std::env::temp_dir().join(format!("cktest-tls-{}-{:08x}", std::process::id(), nanos()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let out = Command::new("sh")
        .args(["-c", MAKE_CERTIFICATES])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "the openssl command could not make the test certificates: {}",
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
        ));
    }
    let port = server(
        &dir,
        free_port(&[])?,
        &["--tls-auth-clients", "no", "--requirepass", PASSWORD],
    )?;
    let mtls_port = server(&dir, free_port(&[])?, &["--tls-auth-clients", "yes"])?;
    Ok(Tls { dir, port, mtls_port })
}

/// The TLS cluster of this process (the masters' ports), started the first
/// time it is asked for.
pub fn cluster() -> Result<&'static [u16], String> {
    static CLUSTER: OnceLock<Result<Vec<u16>, String>> = OnceLock::new();
    CLUSTER
        .get_or_init(start_cluster)
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

/// The harness's check for [`cluster`]: it starts (`redis-cli` too).
pub fn cluster_available() -> Result<(), String> {
    cluster().map(drop)
}

/// `rediss://127.0.0.1:<port>` of each master of [`cluster`].
pub fn cluster_urls() -> Vec<String> {
    cluster()
        .unwrap()
        .iter()
        .map(|p| format!("rediss://127.0.0.1:{p}"))
        .collect()
}

fn start_cluster() -> Result<Vec<u16>, String> {
    let tls = tls()?;
    let mut ports = Vec::new();
    for _ in 0..3 {
        let port = free_port(&ports)?;
        let conf = tls.path(&format!("nodes-{port}.conf")).display().to_string();
        let args = [
            "--tls-auth-clients",
            "no",
            "--tls-cluster",
            "yes",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &conf,
        ];
        ports.push(server(&tls.dir, port, &args)?);
    }
    let ca = tls.path("ca.pem").display().to_string();
    let cli = |args: &[&str]| {
        Command::new("redis-cli")
            .args(["--tls", "--cacert", &ca])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("no redis-cli: {e}"))
    };
    let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut create = vec!["--cluster", "create"];
    create.extend(nodes.iter().map(String::as_str));
    create.extend(["--cluster-replicas", "0", "--cluster-yes"]);
    let out = cli(&create)?;
    if !out.status.success() {
        return Err(format!(
            "redis-cli --cluster create over TLS failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for port in &ports {
        loop {
            let out = cli(&["-p", &port.to_string(), "CLUSTER", "INFO"])?;
            let info = String::from_utf8_lossy(&out.stdout);
            if info.contains("cluster_state:ok") {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "TLS cluster node {port} never reported cluster_state:ok: {info}"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(ports)
}

/// A free port `p` whose cluster bus port `p + 10000` is free too, not in
/// `taken`.
fn free_port(taken: &[u16]) -> Result<u16, String> {
    for _ in 0..200 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        if port <= 55000 && !taken.contains(&port) && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return Ok(port);
        }
    }
    Err("no free port pair".into())
}

/// Starts a TLS-only server with `extra` arguments on `port`, under a
/// watchdog, and waits until it accepts connections.
fn server(dir: &Path, port: u16, extra: &[&str]) -> Result<u16, String> {
    let file = |name: &str| dir.join(name).display().to_string();
    let log = file(&format!("log-{port}.txt"));
    let mut child = Command::new("redis-server")
        .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--tls-cert-file",
            &file("server.pem"),
            "--tls-key-file",
            &file("server.key"),
        ])
        .args(["--tls-ca-cert-file", &file("ca.pem")])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &file(""),
            "--logfile",
            &log,
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start redis-server: {e}"))?;
    let watchdog = format!(
        "while kill -0 {me} 2>/dev/null && kill -0 {pid} 2>/dev/null; do sleep 0.5; done; \
         kill -9 {pid} 2>/dev/null; rm -rf '{dir}'",
        me = std::process::id(),
        pid = child.id(),
        dir = dir.display(),
    );
    Command::new("sh")
        .args(["-c", &watchdog])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the watchdog: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
            }
            let logged = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!(
                "redis-server with TLS did not start ({status}; is it built with TLS?): {}{}",
                stderr.trim(),
                logged.lines().last().unwrap_or("")
            ));
        }
        if Instant::now() > deadline {
            return Err(format!("redis-server with TLS on port {port} did not start"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos()
}
