//! Time to live (`RedisSaverBuilder::ttl`, LangGraph's `TTLConfig`): every
//! key of a thread gets one deadline, renewed together by writes (and by
//! reads with `refresh_on_read`), so a thread expires whole; the global
//! index entries of expired threads go with a sweep. Short TTLs (about a
//! second) against the server at `CHECKPOINTER_REDIS_URL`.

use std::collections::BTreeSet;
use std::time::Duration;

use checkpointer::redis::{RedisSaver, SweepReport, TtlConfig};
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, ListOptions, ListThreadsOptions, Value,
};

use crate::harness;
use crate::redis_support;

const TTL: Duration = Duration::from_millis(1500);

pub(crate) fn tests() -> Vec<harness::Trial> {
    let t = |name: &str, f: fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>| {
        harness::tokio(&format!("ttl::{name}"), &[&crate::REDIS], 0, f)
    };
    vec![
        t("a_thread_expires_whole", || Box::pin(a_thread_expires_whole())),
        t("every_write_renews_every_key", || {
            Box::pin(every_write_renews_every_key())
        }),
        t("refresh_on_read_renews_and_reads_do_not_otherwise", || {
            Box::pin(refresh_on_read_renews_and_reads_do_not_otherwise())
        }),
        t("a_saver_without_ttl_keeps_the_deadline", || {
            Box::pin(a_saver_without_ttl_keeps_the_deadline())
        }),
        t("sweep_spares_live_threads", || Box::pin(sweep_spares_live_threads())),
        t("the_background_sweep_cleans_the_index", || {
            Box::pin(the_background_sweep_cleans_the_index())
        }),
        t(
            "copies_and_deletes_with_ttl",
            || Box::pin(copies_and_deletes_with_ttl()),
        ),
        harness::test("ttl::config_from_minutes", &[], config_from_minutes),
    ]
}

async fn ttl_saver(prefix: &str, ttl: TtlConfig) -> RedisSaver {
    RedisSaver::builder()
        .url(redis_support::url())
        .key_prefix(prefix)
        .ttl(ttl)
        .sweep_interval(None)
        .open()
        .await
        .unwrap()
}

/// A checkpoint of channel `a` at version `n` (a value stored by version)
/// and an inline value.
async fn put(
    saver: &RedisSaver,
    thread: &str,
    ns: &str,
    parent: Option<&CheckpointConfig>,
    n: i64,
) -> CheckpointConfig {
    let mut cp = Checkpoint::new(n);
    cp.channel_values.insert("a".into(), Value::from(format!("value {n}")));
    cp.channel_versions.insert("a".into(), ChannelVersion::Int(n));
    let versions = ChannelVersions::from([("a".to_owned(), ChannelVersion::Int(n))]);
    let config = parent
        .cloned()
        .unwrap_or_else(|| CheckpointConfig::new(thread).with_ns(ns));
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, n);
    saver.put(&config, &cp, &meta, &versions).await.unwrap()
}

/// A thread with two namespaces, two checkpoints each, writes on each.
async fn populate(saver: &RedisSaver, thread: &str) -> Vec<CheckpointConfig> {
    let mut out = Vec::new();
    for ns in ["", "child:1"] {
        let first = put(saver, thread, ns, None, 1).await;
        let second = put(saver, thread, ns, Some(&first), 2).await;
        for c in [&first, &second] {
            saver
                .put_writes(c, &[("a".into(), Value::from("w"))], "task", "")
                .await
                .unwrap();
        }
        out.extend([first, second]);
    }
    out
}

/// The keys of `thread` under `prefix`, each with its absolute deadline
/// (`PEXPIRETIME`, ms since the epoch; -1: none).
async fn deadlines(prefix: &str, thread: &str) -> Vec<(String, i64)> {
    let mut c = redis_support::connection().await.unwrap();
    let pattern = format!(
        "{}:v2:{{{thread}}}:*",
        redis_support::prefix_pattern(prefix).trim_end_matches(":*")
    );
    let mut out = Vec::new();
    for key in redis_support::scan(&mut c, &pattern).await {
        let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query_async(&mut c).await.unwrap();
        out.push((String::from_utf8_lossy(&key).into_owned(), at));
    }
    out.sort();
    out
}

/// The one deadline all of a thread's keys share (panics if they differ).
async fn one_deadline(prefix: &str, thread: &str) -> i64 {
    let all = deadlines(prefix, thread).await;
    // ten with parents and writes (nine and the version), seven at least
    // (a lone checkpoint)
    assert!(all.len() >= 7, "the thread has {} keys: {all:?}", all.len());
    let set: BTreeSet<i64> = all.iter().map(|(_, d)| *d).collect();
    assert_eq!(set.len(), 1, "the keys of {thread} have different deadlines: {all:?}");
    *set.iter().next().unwrap()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Global index keys of the prefix and what they hold for `thread`.
async fn index_mentions(prefix: &str, thread: &str) -> Vec<String> {
    let mut c = redis_support::connection().await.unwrap();
    let base = format!("{prefix}:v2:{{#index}}");
    let mut found = Vec::new();
    let threads: Vec<String> = redis::cmd("ZRANGE")
        .arg(format!("{base}:threads"))
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    if threads.iter().any(|t| t == thread) {
        found.push("threads".to_owned());
    }
    let members: Vec<Vec<u8>> = redis::cmd("ZRANGE")
        .arg(format!("{base}:checkpoints"))
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    let needle = format!("\0{thread}\0");
    if members
        .iter()
        .any(|m| String::from_utf8_lossy(m).contains(needle.as_str()))
    {
        found.push("checkpoints".to_owned());
    }
    let generation: Option<String> = redis::cmd("HGET")
        .arg(format!("{base}:gen"))
        .arg(thread)
        .query_async(&mut c)
        .await
        .unwrap();
    if generation.is_some() {
        found.push("gen".to_owned());
    }
    let expiry: Option<f64> = redis::cmd("ZSCORE")
        .arg(format!("{base}:expiry"))
        .arg(thread)
        .query_async(&mut c)
        .await
        .unwrap();
    if expiry.is_some() {
        found.push("expiry".to_owned());
    }
    let tm: i64 = redis::cmd("EXISTS")
        .arg(format!("{base}:tm:{thread}"))
        .query_async(&mut c)
        .await
        .unwrap();
    if tm == 1 {
        found.push("tm".to_owned());
    }
    found
}

async fn a_thread_expires_whole() {
    let prefix = redis_support::fresh_prefix();
    let saver = ttl_saver(&prefix, TtlConfig::new(TTL)).await;
    let before = now_ms();
    let configs = populate(&saver, "doomed").await;
    put(&saver, "other", "", None, 1).await;
    // every key of the thread, whatever it holds, has the one deadline
    let deadline = one_deadline(&prefix, "doomed").await;
    assert!(
        deadline >= before + TTL.as_millis() as i64 && deadline <= now_ms() + TTL.as_millis() as i64,
        "deadline {deadline} is not about {TTL:?} from now"
    );
    assert_eq!(
        index_mentions(&prefix, "doomed").await,
        ["threads", "checkpoints", "gen", "expiry", "tm"]
    );
    assert_eq!(
        saver
            .list_vec(Some(CheckpointConfig::new("doomed")), ListOptions::default())
            .await
            .unwrap()
            .len(),
        2
    );

    tokio::time::sleep(TTL + Duration::from_millis(300)).await;
    // gone whole: no key of the thread is left, nothing reads back
    assert_eq!(deadlines(&prefix, "doomed").await, Vec::<(String, i64)>::new());
    for c in &configs {
        assert!(saver.get_tuple(c).await.unwrap().is_none());
    }
    assert!(saver.latest("doomed").await.unwrap().is_none());
    assert!(saver
        .list_vec(Some(CheckpointConfig::new("doomed")), ListOptions::default())
        .await
        .unwrap()
        .is_empty());
    // readers across threads skip it before any sweep
    let all = saver.list_vec(None, ListOptions::default()).await.unwrap();
    assert!(all.iter().all(|t| t.config.thread_id != "doomed"), "{all:?}");
    let threads = saver.list_threads(ListThreadsOptions::default()).await.unwrap();
    assert!(threads.iter().all(|t| t.thread_id != "doomed"));
    // the sweep removes its index entries, and only its
    let report = saver.sweep_expired(100).await.unwrap();
    assert_eq!(report.removed, 2, "both threads expired: {report:?}");
    assert_eq!(index_mentions(&prefix, "doomed").await, Vec::<String>::new());
    assert_eq!(index_mentions(&prefix, "other").await, Vec::<String>::new());
    // nothing of the prefix is left but the layout marker
    let left = redis_support::keys_of(&prefix).await;
    let left: Vec<String> = left.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
    assert_eq!(left, [format!("{prefix}:layout")]);
    // a sweep with nothing due does nothing
    assert_eq!(saver.sweep_expired(100).await.unwrap(), SweepReport::default());
    redis_support::cleanup(&prefix).await;
}

async fn every_write_renews_every_key() {
    let prefix = redis_support::fresh_prefix();
    let saver = ttl_saver(&prefix, TtlConfig::new(TTL)).await;
    let configs = populate(&saver, "t").await;
    let first = one_deadline(&prefix, "t").await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    // a put_writes alone renews all ten keys
    saver
        .put_writes(&configs[0], &[("b".into(), Value::from(1))], "late", "")
        .await
        .unwrap();
    let second = one_deadline(&prefix, "t").await;
    assert!(second >= first + 600, "{first} -> {second}");
    // past the first deadline, everything is there
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(now_ms() > first);
    let tuple = saver.get_tuple(&configs[0]).await.unwrap().unwrap();
    assert_eq!(tuple.pending_writes.len(), 2);
    assert_eq!(tuple.checkpoint.channel_values["a"], Value::from("value 1"));
    assert_eq!(
        saver
            .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
            .await
            .unwrap()
            .len(),
        2
    );
    // the nine keys and the version
    assert_eq!(deadlines(&prefix, "t").await.len(), 10);
    // a put renews them too, and so does a prune
    tokio::time::sleep(Duration::from_millis(300)).await;
    put(&saver, "t", "", Some(&configs[1]), 3).await;
    let third = one_deadline(&prefix, "t").await;
    assert!(third > second, "{second} -> {third}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    saver
        .prune(&["t".to_owned()], checkpointer::PruneStrategy::KeepLatest)
        .await
        .unwrap();
    let fourth = one_deadline(&prefix, "t").await;
    assert!(fourth > third, "{third} -> {fourth}");
    redis_support::cleanup(&prefix).await;
}

async fn refresh_on_read_renews_and_reads_do_not_otherwise() {
    let prefix = redis_support::fresh_prefix();
    let plain = ttl_saver(&prefix, TtlConfig::new(TTL)).await;
    let refreshing = ttl_saver(&prefix, TtlConfig::new(TTL).refresh_on_read(true)).await;
    let configs = populate(&plain, "t").await;
    let first = one_deadline(&prefix, "t").await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    // reads without refresh_on_read leave the deadline
    plain.get_tuple(&configs[1]).await.unwrap().unwrap();
    plain
        .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
        .await
        .unwrap();
    plain
        .get_delta_channel_history(&configs[1], &["a".to_owned()])
        .await
        .unwrap();
    assert_eq!(one_deadline(&prefix, "t").await, first);
    // admin reads never renew
    refreshing.list_threads(ListThreadsOptions::default()).await.unwrap();
    refreshing.thread_keys("t").await.unwrap();
    assert_eq!(one_deadline(&prefix, "t").await, first);
    // each checkpoint read with refresh_on_read renews every key
    let mut last = first;
    for read in 0..3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        match read {
            0 => drop(refreshing.get_tuple(&configs[0]).await.unwrap().unwrap()),
            1 => drop(
                refreshing
                    .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default().limit(1))
                    .await
                    .unwrap(),
            ),
            _ => drop(
                refreshing
                    .get_delta_channel_history(&configs[1], &["a".to_owned()])
                    .await
                    .unwrap(),
            ),
        }
        let now = one_deadline(&prefix, "t").await;
        assert!(now > last, "read {read}: {last} -> {now}");
        last = now;
    }
    // a read of a thread that does not exist creates nothing
    assert!(refreshing.latest("nobody").await.unwrap().is_none());
    assert!(deadlines(&prefix, "nobody").await.is_empty());
    redis_support::cleanup(&prefix).await;
}

async fn a_saver_without_ttl_keeps_the_deadline() {
    let prefix = redis_support::fresh_prefix();
    let with = ttl_saver(&prefix, TtlConfig::new(Duration::from_secs(60))).await;
    let without = redis_support::saver_on(prefix.clone()).await;
    let first = put(&with, "t", "", None, 1).await;
    let deadline = one_deadline(&prefix, "t").await;
    // keys the other saver creates (writes, a new namespace) get the same
    // deadline; none is left without one
    without
        .put_writes(&first, &[("a".into(), Value::from(1))], "task", "")
        .await
        .unwrap();
    put(&without, "t", "sub:1", None, 1).await;
    assert_eq!(one_deadline(&prefix, "t").await, deadline);
    // a thread the saver without TTL wrote has none
    put(&without, "forever", "", None, 1).await;
    assert!(deadlines(&prefix, "forever").await.iter().all(|(_, d)| *d == -1));
    redis_support::cleanup(&prefix).await;
}

async fn sweep_spares_live_threads() {
    let prefix = redis_support::fresh_prefix();
    let saver = ttl_saver(&prefix, TtlConfig::new(TTL).refresh_on_read(true)).await;
    let configs = populate(&saver, "kept-alive").await;
    populate(&saver, "reborn").await;
    // kept alive by reads: its index deadline goes stale
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        saver.get_tuple(&configs[0]).await.unwrap().unwrap();
    }
    // reborn after expiry by a saver without TTL: lives on without one
    let without = redis_support::saver_on(prefix.clone()).await;
    let again = put(&without, "reborn", "", None, 7).await;
    let report = saver.sweep_expired(100).await.unwrap();
    assert_eq!(report, SweepReport { removed: 0, renewed: 2 });
    assert_eq!(
        index_mentions(&prefix, "kept-alive").await,
        ["threads", "checkpoints", "gen", "expiry", "tm"]
    );
    // the reborn thread keeps its index entries (only the new checkpoint's:
    // those of its first life are gone), and leaves the expiry index
    assert_eq!(
        index_mentions(&prefix, "reborn").await,
        ["threads", "checkpoints", "gen"]
    );
    let mut c = redis_support::connection().await.unwrap();
    let members: Vec<Vec<u8>> = redis::cmd("ZRANGE")
        .arg(format!("{prefix}:v2:{{#index}}:checkpoints"))
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    let reborn: Vec<String> = members
        .iter()
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .filter(|m| m.contains("\0reborn\0"))
        .collect();
    let again_id = again.checkpoint_id.clone().unwrap();
    assert_eq!(reborn, [format!("{again_id}\0reborn\0")]);
    let listed = saver.list_vec(None, ListOptions::default()).await.unwrap();
    assert!(listed.iter().any(|t| t.config == again), "{listed:?}");
    let threads: Vec<String> = saver
        .list_threads(ListThreadsOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_id)
        .collect();
    assert_eq!(threads, ["kept-alive", "reborn"]);
    // nothing more is due
    assert_eq!(saver.sweep_expired(100).await.unwrap(), SweepReport::default());
    redis_support::cleanup(&prefix).await;
}

async fn the_background_sweep_cleans_the_index() {
    let prefix = redis_support::fresh_prefix();
    let saver = RedisSaver::builder()
        .url(redis_support::url())
        .key_prefix(prefix.as_str())
        .ttl(TtlConfig::new(Duration::from_millis(300)))
        .sweep_interval(Some(Duration::from_millis(100)))
        .open()
        .await
        .unwrap();
    populate(&saver, "t").await;
    let mut left = index_mentions(&prefix, "t").await;
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = index_mentions(&prefix, "t").await;
    }
    assert_eq!(left, Vec::<String>::new(), "the background sweep did not run");
    let keys = redis_support::keys_of(&prefix).await;
    assert_eq!(keys, [format!("{prefix}:layout").into_bytes()]);
    redis_support::cleanup(&prefix).await;
}

async fn copies_and_deletes_with_ttl() {
    let prefix = redis_support::fresh_prefix();
    let saver = ttl_saver(&prefix, TtlConfig::new(Duration::from_secs(60))).await;
    populate(&saver, "src").await;
    saver.copy_thread("src", "dst").await.unwrap();
    // the copy has a deadline of its own, on every key
    one_deadline(&prefix, "dst").await;
    assert_eq!(
        index_mentions(&prefix, "dst").await,
        ["threads", "checkpoints", "gen", "expiry", "tm"]
    );
    // a delete removes the thread's index entries, the expiry ones too
    saver.delete_thread("src").await.unwrap();
    assert!(deadlines(&prefix, "src").await.is_empty());
    assert_eq!(index_mentions(&prefix, "src").await, Vec::<String>::new());
    assert_eq!(
        index_mentions(&prefix, "dst").await,
        ["threads", "checkpoints", "gen", "expiry", "tm"]
    );
    redis_support::cleanup(&prefix).await;
}

fn config_from_minutes() {
    assert_eq!(TtlConfig::minutes(60.0).default_ttl(), Duration::from_secs(3600));
    assert_eq!(TtlConfig::minutes(0.5).default_ttl(), Duration::from_secs(30));
    // nonsense is clamped, never a panic
    for odd in [-1.0, f64::NAN, 0.0] {
        assert_eq!(TtlConfig::minutes(odd).default_ttl(), Duration::from_millis(1));
    }
    assert!(TtlConfig::minutes(f64::INFINITY).default_ttl() > Duration::from_secs(1 << 30));
    assert!(!TtlConfig::minutes(1.0).refreshes_on_read());
    assert!(TtlConfig::minutes(1.0).refresh_on_read(true).refreshes_on_read());
}
