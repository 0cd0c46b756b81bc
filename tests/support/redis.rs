//! Shared by the test binaries that use Redis (a module `redis_support` of
//! each): the server at `CHECKPOINTER_REDIS_URL` (default
//! `redis://127.0.0.1:6379`). Every saver made here has a key prefix of its
//! own (`cktest-<pid>-<random>-<n>`), so tests never see each other's keys;
//! [`cleanup`] removes a prefix's keys.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use checkpointer::redis::RedisSaver;

/// The server URL.
pub fn url() -> String {
    std::env::var("CHECKPOINTER_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Runs `f` on a fresh current-thread runtime in its own OS thread.
pub fn block_on_thread<T: Send + 'static>(f: impl std::future::Future<Output = T> + Send + 'static) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    })
    .join()
    .unwrap()
}

/// A plain connection to the test server; a connect timed out by a server
/// busy with a large value (the conformance suite stores 100 MB ones) is
/// tried again a few times.
pub async fn connection() -> Result<redis::aio::MultiplexedConnection, String> {
    let url = url();
    let client = redis::Client::open(url.as_str()).map_err(|e| format!("bad CHECKPOINTER_REDIS_URL: {e}"))?;
    let mut attempt = 0;
    let connected = loop {
        let got = tokio::time::timeout(Duration::from_secs(5), client.get_multiplexed_async_connection()).await;
        match got {
            Ok(Err(e)) if attempt < 10 && e.is_timeout() => attempt += 1,
            other => break other,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    match connected {
        Ok(Ok(mut c)) => {
            // The client's 500 ms would time out behind a 100 MB write.
            c.set_response_timeout(Duration::from_secs(60));
            Ok(c)
        }
        Ok(Err(e)) => Err(format!("no Redis at {}: {e}", checkpointer::secret::redact(&url))),
        Err(_) => Err(format!(
            "no Redis at {}: connect timed out",
            checkpointer::secret::redact(&url)
        )),
    }
}

/// Whether a server answers `PING` (the harness's check, once).
pub fn reachable() -> Result<(), String> {
    block_on_thread(async {
        let mut c = connection().await?;
        redis::cmd("PING")
            .query_async::<String>(&mut c)
            .await
            .map(drop)
            .map_err(|e| format!("Redis at {} does not answer PING: {e}", url()))
    })
}

/// This process's prefix base.
fn base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| format!("cktest-{}-{:08x}", std::process::id(), rand_u32()))
}

fn rand_u32() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.subsec_nanos() ^ (t.as_secs() as u32).rotate_left(13)
}

/// A key prefix no other saver of this run uses.
pub fn fresh_prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("{}-{}", base(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A saver on a fresh prefix.
pub async fn saver() -> RedisSaver {
    saver_on(fresh_prefix()).await
}

/// A saver on `prefix`.
pub async fn saver_on(prefix: String) -> RedisSaver {
    RedisSaver::builder()
        .url(url())
        .key_prefix(prefix)
        .open()
        .await
        .unwrap()
}

/// The keys under `prefix` (`<prefix>:*`).
pub async fn keys_of(prefix: &str) -> Vec<Vec<u8>> {
    matching(&prefix_pattern(prefix)).await
}

/// The `SCAN MATCH` pattern of the keys under `prefix`.
pub fn prefix_pattern(prefix: &str) -> String {
    format!("{}:*", glob_escape(prefix))
}

async fn matching(pattern: &str) -> Vec<Vec<u8>> {
    scan(&mut connection().await.unwrap(), pattern).await
}

/// Every key of the server behind `c` that matches `pattern` (`SCAN`).
pub async fn scan(c: &mut redis::aio::MultiplexedConnection, pattern: &str) -> Vec<Vec<u8>> {
    let mut cursor: u64 = 0;
    let mut out = Vec::new();
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(c)
            .await
            .unwrap();
        out.extend(batch);
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

fn glob_escape(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// Removes every key under `prefix`.
pub async fn cleanup(prefix: &str) {
    unlink(keys_of(prefix).await).await;
}

async fn unlink(keys: Vec<Vec<u8>>) {
    let mut c = connection().await.unwrap();
    for chunk in keys.chunks(500) {
        redis::cmd("UNLINK")
            .arg(chunk)
            .query_async::<i64>(&mut c)
            .await
            .unwrap();
    }
}

/// Removes every key under the prefixes `<family>-*`.
pub async fn cleanup_family(family: &str) {
    unlink(matching(&format!("{}-*", glob_escape(family))).await).await;
}

/// A saver on `<family>-<n>`, for a factory whose savers [`cleanup_family`]
/// removes together.
pub async fn family_saver(family: String) -> Arc<dyn checkpointer::CheckpointSaver> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Arc::new(saver_on(format!("{family}-{n}")).await)
}
