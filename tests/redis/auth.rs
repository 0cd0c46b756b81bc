//! Configuration and permission failures are permanent:
//! on a `redis-server` of the test's own with `requirepass` and an ACL user
//! without permissions, a missing password (`NOAUTH`), a wrong one
//! (`WRONGPASS`), an unknown user and a refused command (`NOPERM`) are
//! `Error::Storage` with `retryable: false`, at `open` and on a saver in
//! use whose server changed its password, while a dropped connection stays
//! retryable for a read.

use crate::harness;
use crate::saver::{OwnServer, REDIS_SERVER};

use std::time::Duration;

use checkpointer::redis::RedisSaver;
use checkpointer::{CheckpointSaverExt, Error};

const SECRET: &str = "auth-pw-5531";

/// `err` is a permanent storage error whose text names `words`.
#[track_caller]
fn permanent(what: &str, err: &Error, words: &str) {
    assert!(matches!(err, Error::Storage { .. }), "{what}: {err:?}");
    assert!(!err.is_retryable(), "{what}: reported retryable: {err:?}");
    assert!(err.to_string().contains(words), "{what}: {words:?} not in {err}");
    assert!(!format!("{err} {err:?}").contains(SECRET), "{what}: {err:?}");
}

async fn refused_credentials_are_permanent() {
    let server = OwnServer::start(&["--requirepass", SECRET]).await;
    let port = server.port;
    let open = |url: String| async move {
        RedisSaver::builder()
            .url(url)
            .connection_timeout(Some(Duration::from_secs(2)))
            .response_timeout(Some(Duration::from_secs(2)))
            .open()
            .await
    };
    let err = open(format!("redis://127.0.0.1:{port}")).await.unwrap_err();
    permanent("no password", &err, "NOAUTH");
    let err = open(format!("redis://:wrong-{SECRET}@127.0.0.1:{port}"))
        .await
        .unwrap_err();
    permanent("wrong password", &err, "authentication failed");
    let err = open(format!("redis://nobody:{SECRET}@127.0.0.1:{port}"))
        .await
        .unwrap_err();
    permanent("unknown user", &err, "authentication failed");

    // A user who may log in but run none of the saver's commands.
    let saver = open(format!("redis://:{SECRET}@127.0.0.1:{port}")).await.unwrap();
    let client = redis::Client::open(format!("redis://:{SECRET}@127.0.0.1:{port}")).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "limited",
            "on",
            ">limited-pw",
            "~*",
            "&*",
            "-@all",
            "+hello",
            "+auth",
            "+ping",
            "+client",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let err = open(format!("redis://limited:limited-pw@127.0.0.1:{port}"))
        .await
        .unwrap_err();
    permanent("no permission", &err, "no permissions to run");

    // The server's password changes under a saver in use: once its
    // connection is dropped, the reconnection is refused, permanently; the
    // drop itself is retryable for a read.
    assert!(saver.latest("t").await.unwrap().is_none());
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "another-pw"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        match saver.latest("t").await {
            Ok(_) => panic!("a read succeeded on a connection the server refuses"),
            Err(e) if e.to_string().contains("authentication failed") || e.to_string().contains("NOAUTH") => {
                permanent("reconnection refused", &e, "");
                return;
            }
            Err(e) => {
                assert!(e.is_retryable(), "a dropped connection, for a read: {e:?}");
                seen.push(e.to_string());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the refused reconnection was never reported: {seen:?}");
}

/// A `redis-server` of the test's own listening only on a unix socket in
/// a temporary directory; killed on drop.
struct SocketServer {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl SocketServer {
    async fn start(extra: &[&str]) -> SocketServer {
        let dir = tempfile::Builder::new().prefix("cktest-unix-").tempdir().unwrap();
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--save",
                "",
                "--appendonly",
                "no",
                "--unixsocketperm",
                "700",
            ])
            .arg("--unixsocket")
            .arg(dir.path().join("redis.sock"))
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = SocketServer { child, dir };
        for _ in 0..100 {
            if std::os::unix::net::UnixStream::connect(server.socket()).is_ok() {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server on {} did not start", server.socket().display());
    }

    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("redis.sock")
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `unix://` and `redis+unix://` URLs open a Redis store through
/// `checkpointer::open`, their `pass=` read by the client and masked
/// everywhere it could show.
async fn unix_socket_urls_open_redis() {
    use checkpointer::{
        ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    };
    let server = SocketServer::start(&["--requirepass", SECRET]).await;
    let socket = server.socket().display().to_string();
    for scheme in ["unix", "redis+unix", "UNIX"] {
        let url = format!("{scheme}://{socket}?pass={SECRET}&prefix=unix-{}", std::process::id());
        let store = checkpointer::OpenOptions::new().open(&url).await.unwrap();
        assert_eq!(store.backend(), "redis");
        let name = store.name();
        assert!(name.contains("pass=***") && !name.contains(SECRET), "{name}");
        let saver = checkpointer::open(&url).await.unwrap();
        assert!(!format!("{saver:?}").contains(SECRET));
        let thread = format!("unix-{scheme}");
        let config = CheckpointConfig::new(thread.as_str());
        let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
        let stored = saver
            .put(&config, &Checkpoint::new(0), &meta, &ChannelVersions::new())
            .await
            .unwrap();
        let found = store.saver().latest(&thread).await.unwrap().map(|t| t.config);
        assert_eq!(found, Some(stored), "{scheme}");
        assert!(store.storage_size().await.unwrap().is_some_and(|s| s.bytes > 0));
        let wrong = format!("{scheme}://{socket}?pass=wrong-{SECRET}");
        let err = checkpointer::open(&wrong).await.unwrap_err();
        permanent(scheme, &err, "authentication failed");
        assert!(
            !format!("{err} {err:?}").contains(&format!("wrong-{SECRET}")),
            "{err:?}"
        );
    }
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "auth::refused_credentials_are_permanent",
            &[&REDIS_SERVER],
            2,
            refused_credentials_are_permanent,
        ),
        harness::tokio(
            "auth::unix_socket_urls_open_redis",
            &[&REDIS_SERVER],
            2,
            unix_socket_urls_open_redis,
        ),
    ]
}
