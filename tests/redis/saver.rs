//! `RedisSaver` itself: the layout marker, the URL's password kept out of
//! `Debug` and error messages, and every key of a thread in one cluster
//! slot (thread ids holding `{`, `}` included).

use crate::harness;
use crate::redis_support;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use checkpointer::redis::{key_slot, RedisSaver};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, Error, InMemorySaver, ListOptions, ListThreadsOptions, Value,
};

/// The `redis-server` binary, for tests that start a server of their own.
pub(crate) static REDIS_SERVER: harness::Need = harness::Need::new("redis-server", || {
    Command::new("redis-server")
        .arg("--version")
        .output()
        .map(drop)
        .map_err(|e| format!("no redis-server binary: {e}"))
});

async fn put(saver: &RedisSaver, config: &CheckpointConfig, id: &str) -> CheckpointConfig {
    let mut cp = Checkpoint::new(0);
    cp.id = id.to_owned();
    let mut versions = ChannelVersions::new();
    for (ch, value) in [("a", Value::from("x")), ("b", Value::from(vec![1, 2]))] {
        cp.channel_values.insert(ch.into(), value);
        versions.insert(ch.into(), ChannelVersion::Int(1));
    }
    cp.channel_versions = versions.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver.put(config, &cp, &meta, &versions).await.unwrap()
}

async fn layout_marker_is_written_and_checked() {
    let saver = redis_support::saver().await;
    let prefix = saver.key_prefix().to_owned();
    let mut c = redis_support::connection().await.unwrap();
    let marker: String = redis::cmd("GET")
        .arg(format!("{prefix}:layout"))
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(marker, "checkpointer-redis-layout 2");
    // opening again finds it
    redis_support::saver_on(prefix.clone()).await;
    redis::cmd("SET")
        .arg(format!("{prefix}:layout"))
        .arg("some-other-layout 9")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let err = RedisSaver::builder()
        .url(redis_support::url())
        .key_prefix(prefix.clone())
        .open()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Storage { .. }) && !err.is_retryable(), "{err:?}");
    assert!(err.to_string().contains("some-other-layout 9"), "{err}");
    redis_support::cleanup(&prefix).await;
}

async fn bad_settings_are_invalid_input() {
    for builder in [
        RedisSaver::builder(),
        RedisSaver::builder().url("http://nope"),
        RedisSaver::builder().url(redis_support::url()).key_prefix(""),
        RedisSaver::builder().url(redis_support::url()).key_prefix("a{b}"),
    ] {
        let err = builder.open().await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    }
}

async fn an_unreachable_server_is_a_retryable_storage_error() {
    let port = free_port();
    let err = RedisSaver::builder()
        .url(format!("redis://:pw-unreachable-77@127.0.0.1:{port}"))
        .connection_timeout(Some(Duration::from_secs(2)))
        .open()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Storage { .. }) && err.is_retryable(), "{err:?}");
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains("pw-unreachable-77"), "{text}");
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A `redis-server` of the test's own, killed on drop.
pub(crate) struct OwnServer {
    child: Child,
    pub(crate) port: u16,
}

impl OwnServer {
    pub(crate) async fn start(extra: &[&str]) -> OwnServer {
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--bind",
                "127.0.0.1",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return OwnServer { child, port };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        panic!("redis-server on port {port} did not start");
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn the_password_never_shows() {
    const SECRET: &str = "s3cr3t-Pw-4242";
    let server = OwnServer::start(&["--requirepass", SECRET]).await;
    let url = format!("redis://:{SECRET}@127.0.0.1:{}/0", server.port);
    let builder = RedisSaver::builder().url(url.clone());
    assert!(!format!("{builder:?}").contains(SECRET), "{builder:?}");
    let saver = builder.open().await.unwrap();
    let shown = format!("{saver:?}");
    assert!(!shown.contains(SECRET) && shown.contains("***"), "{shown}");
    put(&saver, &CheckpointConfig::new("t"), "1").await;
    assert!(saver.latest("t").await.unwrap().is_some());

    // a wrong password, user and password, and a server gone mid-use
    for wrong in [
        format!("redis://:wrong-{SECRET}@127.0.0.1:{}", server.port),
        format!("redis://someone:wrong-{SECRET}@127.0.0.1:{}", server.port),
    ] {
        let err = RedisSaver::open(wrong).await.unwrap_err();
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(!text.contains(SECRET), "{text}");
        }
    }
    drop(server);
    let err = saver.latest("t").await.unwrap_err();
    assert!(matches!(err, Error::Storage { .. }), "{err:?}");
    for text in [err.to_string(), format!("{err:?}"), format!("{saver:?}")] {
        assert!(!text.contains(SECRET), "{text}");
    }
}

async fn every_key_of_a_thread_hashes_to_one_slot() {
    let saver = redis_support::saver().await;
    let prefix = saver.key_prefix().to_owned();
    let threads = [
        "plain",
        "a{b}c",
        "}{",
        "{",
        "}",
        "{}",
        "x:y%z",
        "ünï code",
        "{ckpt:v2:{evil}}",
        // escaped, the empty id is empty: `{}` would be no hash tag
        "",
        "%",
    ];
    for thread in threads {
        for ns in ["", "sub:{1}", "}"] {
            let root = put(&saver, &CheckpointConfig::new(thread).with_ns(ns), "1").await;
            let child = put(&saver, &root, "2").await;
            saver
                .put_writes(&child, &[("a".into(), Value::from(1))], "task{x}", "")
                .await
                .unwrap();
        }
        assert_eq!(saver.latest(thread).await.unwrap().unwrap().checkpoint.id, "2");
    }
    let keys = redis_support::keys_of(&prefix).await;
    let global = [
        format!("{prefix}:layout"),
        format!("{prefix}:v2:{{#index}}:threads"),
        format!("{prefix}:v2:{{#index}}:checkpoints"),
        format!("{prefix}:v2:{{#index}}:gen"),
    ];
    let mut c = redis_support::connection().await.unwrap();
    // the server's own CRC16, where it answers CLUSTER KEYSLOT
    let server_slot = |slot: Result<i64, redis::RedisError>| slot.ok();
    let mut per_slot: std::collections::HashMap<u16, usize> = std::collections::HashMap::new();
    let mut thread_keys = 0;
    for key in &keys {
        if global.iter().any(|g| g.as_bytes() == key.as_slice()) {
            continue;
        }
        thread_keys += 1;
        let slot = key_slot(key);
        if let Some(s) = server_slot(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async(&mut c).await) {
            assert_eq!(i64::from(slot), s, "{}", String::from_utf8_lossy(key));
        }
        *per_slot.entry(slot).or_default() += 1;
    }
    // one slot per thread, and every thread's keys in it
    let expected: std::collections::HashSet<u16> = threads
        .iter()
        .map(|t| {
            let tag = if t.is_empty() {
                "%".to_owned()
            } else {
                checkpointer_escape(t)
            };
            let probe = format!("{prefix}:v2:{{{tag}}}:ns");
            key_slot(probe.as_bytes())
        })
        .collect();
    assert!(thread_keys >= threads.len() * 6, "{thread_keys} keys");
    let slots: std::collections::HashSet<u16> = per_slot.keys().copied().collect();
    assert_eq!(slots, expected, "{per_slot:?}");
    redis_support::cleanup(&prefix).await;
}

/// A store written before the empty thread id had a tag of its own keeps
/// that thread under `P:v2:{}`: opening a saver moves it to `P:v2:{%}`,
/// where every operation finds it.
async fn the_empty_thread_of_an_older_store_is_moved_to_its_tag() {
    let saver = redis_support::saver().await;
    let prefix = saver.key_prefix().to_owned();
    let root = put(&saver, &CheckpointConfig::new(""), "1").await;
    let child = put(&saver, &root, "2").await;
    saver
        .put_writes(&child, &[("a".into(), Value::from(1))], "task", "")
        .await
        .unwrap();
    // the keys as an older saver named them
    let mut c = redis_support::connection().await.unwrap();
    let tagged = format!("{prefix}:v2:{{%}}");
    for key in redis_support::scan(&mut c, &format!("{prefix}:v2:{{%}}:*")).await {
        let suffix = String::from_utf8_lossy(&key[tagged.len()..]).into_owned();
        let _: () = redis::cmd("RENAME")
            .arg(&key)
            .arg(format!("{prefix}:v2:{{}}{suffix}"))
            .query_async(&mut c)
            .await
            .unwrap();
    }
    assert!(saver.latest("").await.unwrap().is_none());
    let reopened = redis_support::saver_on(prefix.clone()).await;
    let latest = reopened.latest("").await.unwrap().unwrap();
    assert_eq!(latest.config, child);
    assert_eq!(latest.pending_writes.len(), 1);
    assert!(redis_support::scan(&mut c, &format!("{prefix}:v2:{{}}*"))
        .await
        .is_empty());
    reopened.delete_thread("").await.unwrap();
    assert!(reopened.latest("").await.unwrap().is_none());
    redis_support::cleanup(&prefix).await;
}

/// The escape of the layout (percent-escaping all but `[A-Za-z0-9._-]`).
fn checkpointer_escape(raw: &str) -> String {
    raw.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn crc16_matches_the_server() {
    let mut c = redis_support::connection().await.unwrap();
    let answer: Result<i64, _> = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg("foo{123456789}bar")
        .query_async(&mut c)
        .await;
    // a standalone server without cluster support refuses CLUSTER: the
    // known value then
    assert_eq!(answer.unwrap_or(12739), 12739);
    assert_eq!(key_slot(b"foo{123456789}bar"), 12739);
    assert_eq!(key_slot(b"{}foo"), key_slot(b"{}foo"));
}

async fn index_entries_naming_nothing_are_skipped() {
    // What a call failing between its index write and its thread's script
    // leaves: entries in the global indexes for checkpoints never stored.
    let saver = redis_support::saver().await;
    let prefix = saver.key_prefix().to_owned();
    put(&saver, &CheckpointConfig::new("real"), "1").await;
    let mut c = redis_support::connection().await.unwrap();
    redis::pipe()
        .cmd("ZADD")
        .arg(format!("{prefix}:v2:{{#index}}:threads"))
        .arg(0)
        .arg("ghost")
        .ignore()
        .cmd("ZADD")
        .arg(format!("{prefix}:v2:{{#index}}:checkpoints"))
        .arg(0)
        .arg("9\0ghost\0")
        .arg(0)
        .arg("2\0real\0")
        .ignore()
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let all = saver.list_vec(None, ListOptions::default()).await.unwrap();
    let ids: Vec<(&str, &str)> = all
        .iter()
        .map(|t| (t.config.thread_id.as_str(), t.checkpoint.id.as_str()))
        .collect();
    assert_eq!(ids, [("real", "1")]);
    let limited = saver.list_vec(None, ListOptions::default().limit(1)).await.unwrap();
    assert_eq!(limited.len(), 1);
    let threads = saver.list_threads(ListThreadsOptions::default()).await.unwrap();
    let names: Vec<&str> = threads.iter().map(|t| t.thread_id.as_str()).collect();
    assert_eq!(names, ["real"]);
    // delete_for_runs scans past them
    saver.delete_for_runs(&["no-such-run".to_owned()]).await.unwrap();
    // deleting the thread removes its entries
    saver.delete_thread("real").await.unwrap();
    let left: Vec<Vec<u8>> = redis::cmd("ZRANGE")
        .arg(format!("{prefix}:v2:{{#index}}:checkpoints"))
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(left, [b"2\0real\0".to_vec(), b"9\0ghost\0".to_vec()]);
    redis_support::cleanup(&prefix).await;
}

async fn a_copy_onto_a_taken_target_writes_nothing() {
    let saver = redis_support::saver().await;
    let prefix = saver.key_prefix().to_owned();
    let root = put(&saver, &CheckpointConfig::new("src"), "1").await;
    put(&saver, &root, "2").await;
    put(&saver, &CheckpointConfig::new("dst").with_ns("other"), "5").await;
    let before = saver.thread_keys("dst").await.unwrap();
    let err = saver.copy_thread("src", "dst").await.unwrap_err();
    assert!(matches!(err, Error::ThreadExists { .. }), "{err:?}");
    assert_eq!(saver.thread_keys("dst").await.unwrap(), before);
    // onto a free target: whole, values and parents included
    saver.copy_thread("src", "copy").await.unwrap();
    let copied = saver.latest("copy").await.unwrap().unwrap();
    assert_eq!(copied.checkpoint.id, "2");
    assert_eq!(copied.checkpoint.channel_values["b"], Value::from(vec![1, 2]));
    assert_eq!(copied.parent_config.unwrap().checkpoint_id.as_deref(), Some("1"));
    redis_support::cleanup(&prefix).await;
}

async fn nul_in_keys_is_refused_or_finds_nothing() {
    let saver = redis_support::saver().await;
    let prefix = saver.key_prefix().to_owned();
    let cp = Checkpoint::new(0);
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    for config in [
        CheckpointConfig::new("a\0b"),
        CheckpointConfig::new("t").with_ns("n\0s"),
    ] {
        let err = saver.put(&config, &cp, &meta, &Default::default()).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
        assert!(saver.get_tuple(&config).await.unwrap().is_none());
    }
    redis_support::cleanup(&prefix).await;
}

/// Listings longer than a page (64) equal `InMemorySaver`'s, in every
/// scope, with `before`, `limit` and a filter.
async fn listings_across_pages_equal_memory() {
    let saver = redis_support::saver().await;
    let prefix = saver.key_prefix().to_owned();
    let memory = InMemorySaver::new();
    let savers: [&dyn CheckpointSaver; 2] = [&saver, &memory];
    for s in savers {
        for thread in ["t1", "t2", "t3"] {
            for ns in ["", "sub:1"] {
                let mut config = CheckpointConfig::new(thread).with_ns(ns);
                for i in 0..70 {
                    let mut cp = Checkpoint::new(i);
                    cp.id = format!("1ef00000-0000-6000-8000-{:012}", i * 7 % 150 + i64::from(ns.is_empty()));
                    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, i);
                    meta.insert("parity", i % 2);
                    config = s.put(&config, &cp, &meta, &Default::default()).await.unwrap();
                }
            }
        }
    }
    let key = |ts: Vec<checkpointer::CheckpointTuple>| -> Vec<(String, String, String)> {
        ts.into_iter()
            .map(|t| (t.config.thread_id.clone(), t.config.ns().to_owned(), t.checkpoint.id))
            .collect()
    };
    let before = "1ef00000-0000-6000-8000-000000000100".to_owned();
    let scopes = [
        None,
        Some(CheckpointConfig::new("t2")),
        Some(CheckpointConfig::new("t2").with_ns("")),
        Some(CheckpointConfig::new("t2").with_ns("sub:1")),
    ];
    for scope in scopes {
        for options in [
            ListOptions::default(),
            ListOptions::default().limit(100),
            ListOptions::default().before(before.clone()),
            ListOptions::default().before(before.clone()).limit(65),
            ListOptions::default().filter("parity", 1),
        ] {
            let got = key(saver.list_vec(scope.clone(), options.clone()).await.unwrap());
            let want = key(memory.list_vec(scope.clone(), options.clone()).await.unwrap());
            assert!(want.len() > 30, "{scope:?} {options:?}");
            assert_eq!(got, want, "{scope:?} {options:?}");
        }
    }
    let threads = |ts: Vec<checkpointer::saver::ThreadInfo>| -> Vec<(String, String)> {
        ts.into_iter()
            .map(|t| (t.thread_id, t.latest.checkpoint_id.unwrap_or_default()))
            .collect()
    };
    assert_eq!(
        threads(saver.list_threads(ListThreadsOptions::default()).await.unwrap()),
        threads(memory.list_threads(ListThreadsOptions::default()).await.unwrap())
    );
    redis_support::cleanup(&prefix).await;
}

/// A parent chain longer than one walk step (64 links) gives the history
/// `InMemorySaver` gives, and prune keeps what it keeps.
async fn long_chains_equal_memory() {
    let saver = redis_support::saver().await;
    let prefix = saver.key_prefix().to_owned();
    let memory = InMemorySaver::new();
    let savers: [&dyn CheckpointSaver; 2] = [&saver, &memory];
    let mut last = Vec::new();
    for s in savers {
        let mut config = CheckpointConfig::new("chain");
        for i in 0..150_i64 {
            let mut cp = Checkpoint::new(i);
            cp.id = format!("1ef00000-0000-6000-8000-{i:012}");
            cp.channel_versions.insert("log".into(), ChannelVersion::Int(i + 1));
            if i == 3 {
                cp.channel_values.insert("log".into(), Value::from("seed"));
            }
            let versions = cp.channel_versions.clone();
            let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, i);
            meta.insert("delta_writes_versioned", vec!["log"]);
            config = s.put(&config, &cp, &meta, &versions).await.unwrap();
            s.put_writes(&config, &[("log".into(), Value::from(i))], &format!("task-{i}"), "")
                .await
                .unwrap();
        }
        last.push(config);
    }
    let history = |h: indexmap::IndexMap<String, checkpointer::saver::DeltaChannelHistory>| {
        let log = &h["log"];
        (
            log.seed.clone(),
            log.writes.iter().map(|w| w.value.clone()).collect::<Vec<_>>(),
        )
    };
    let channels = ["log".to_owned()];
    let got = history(saver.get_delta_channel_history(&last[0], &channels).await.unwrap());
    let want = history(memory.get_delta_channel_history(&last[1], &channels).await.unwrap());
    assert_eq!(got.1.len(), 146, "{got:?}");
    assert_eq!(got, want);
    saver
        .prune(&["chain".to_owned()], checkpointer::saver::PruneStrategy::KeepLatest)
        .await
        .unwrap();
    memory
        .prune(&["chain".to_owned()], checkpointer::saver::PruneStrategy::KeepLatest)
        .await
        .unwrap();
    let keys = |k: checkpointer::saver::ThreadKeys| {
        (
            k.checkpoints.into_iter().map(|c| c.checkpoint_id).collect::<Vec<_>>(),
            k.writes.len(),
        )
    };
    let kept = keys(saver.thread_keys("chain").await.unwrap());
    assert_eq!(kept, keys(memory.thread_keys("chain").await.unwrap()));
    assert_eq!(kept.0.len(), 147);
    assert_eq!(
        history(saver.get_delta_channel_history(&last[0], &channels).await.unwrap()),
        want
    );
    redis_support::cleanup(&prefix).await;
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::tokio(
            "saver::layout_marker_is_written_and_checked",
            &[&crate::REDIS],
            0,
            layout_marker_is_written_and_checked,
        ),
        harness::tokio(
            "saver::the_empty_thread_of_an_older_store_is_moved_to_its_tag",
            &[&crate::REDIS],
            0,
            the_empty_thread_of_an_older_store_is_moved_to_its_tag,
        ),
        harness::tokio(
            "saver::bad_settings_are_invalid_input",
            &[],
            0,
            bad_settings_are_invalid_input,
        ),
        harness::tokio(
            "saver::an_unreachable_server_is_a_retryable_storage_error",
            &[],
            0,
            an_unreachable_server_is_a_retryable_storage_error,
        ),
        harness::tokio(
            "saver::the_password_never_shows",
            &[&REDIS_SERVER],
            0,
            the_password_never_shows,
        ),
        harness::tokio(
            "saver::every_key_of_a_thread_hashes_to_one_slot",
            &[&crate::REDIS],
            2,
            every_key_of_a_thread_hashes_to_one_slot,
        ),
        harness::tokio(
            "saver::crc16_matches_the_server",
            &[&crate::REDIS],
            0,
            crc16_matches_the_server,
        ),
        harness::tokio(
            "saver::index_entries_naming_nothing_are_skipped",
            &[&crate::REDIS],
            2,
            index_entries_naming_nothing_are_skipped,
        ),
        harness::tokio(
            "saver::a_copy_onto_a_taken_target_writes_nothing",
            &[&crate::REDIS],
            2,
            a_copy_onto_a_taken_target_writes_nothing,
        ),
        harness::tokio(
            "saver::nul_in_keys_is_refused_or_finds_nothing",
            &[&crate::REDIS],
            0,
            nul_in_keys_is_refused_or_finds_nothing,
        ),
        harness::tokio(
            "saver::listings_across_pages_equal_memory",
            &[&crate::REDIS],
            2,
            listings_across_pages_equal_memory,
        ),
        harness::tokio(
            "saver::long_chains_equal_memory",
            &[&crate::REDIS],
            2,
            long_chains_equal_memory,
        ),
    ]
}
