//! The bad-input catalogue of `docs/reliability.md` (issue 7, items 6 and
//! 8): every row is one function here, run against `InMemorySaver`,
//! `SqliteSaver` (a fresh file) and `PostgresSaver` (a fresh database; ignored
//! without a server outside CI, a failure in CI).
//!
//! Stored bytes are planted through the saver's own serializer
//! ([`Planting`]): a write whose value is a plant marker is stored as the
//! chosen (tag, bytes), exactly as if the row had been altered at rest, and
//! is read back through the real reading path. Rows specific to a backend's
//! tables (SQLite's checkpoint and metadata columns, Postgres JSONB) edit
//! them with SQL.

use crate::harness;
use crate::postgres_support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use checkpointer::postgres::PostgresSaver;
use checkpointer::serde::{msgpack, EncryptedSerializer, Ext, JsonPlusSerializer, Serializer, TypedBytes};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSaverExt, CheckpointSource, CheckpointTuple, EncryptionError, Error, InMemorySaver, ListOptions,
    ListThreadsOptions, PruneStrategy, Value,
};
use parking_lot::Mutex;

// ---------------------------------------------------------------------------
// The harness

/// Stores chosen bytes in place of marker values (see the module docs).
#[derive(Debug)]
struct Planting {
    inner: Arc<dyn Serializer>,
    plants: Mutex<HashMap<String, TypedBytes>>,
}

impl Planting {
    fn new(inner: Arc<dyn Serializer>) -> Arc<Self> {
        Arc::new(Planting {
            inner,
            plants: Mutex::new(HashMap::new()),
        })
    }

    /// A value that is stored as `(tag, data)`.
    fn plant(&self, tag: &str, data: impl Into<Bytes>) -> Value {
        let mut plants = self.plants.lock();
        let marker = format!("\u{1}plant-{}", plants.len());
        plants.insert(marker.clone(), TypedBytes::new(tag, data));
        Value::from(marker)
    }
}

impl Serializer for Planting {
    fn dumps_typed(&self, value: &Value) -> checkpointer::Result<TypedBytes> {
        if let Value::Str(s) = value {
            if let Some(planted) = self.plants.lock().get(s.as_str()) {
                return Ok(planted.clone());
            }
        }
        self.inner.dumps_typed(value)
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> checkpointer::Result<Value> {
        self.inner.loads_typed(tag, data)
    }

    fn encrypts(&self) -> bool {
        self.inner.encrypts()
    }

    fn reads_plaintext(&self) -> bool {
        self.inner.reads_plaintext()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Memory,
    Sqlite,
    Postgres,
}

/// Direct access to the store's tables, for rows about stored bytes.
enum Raw {
    None,
    Sqlite(PathBuf),
    Postgres(String),
}

struct Env {
    backend: Backend,
    saver: Arc<dyn CheckpointSaver>,
    plants: Arc<Planting>,
    raw: Raw,
    _dir: Option<tempfile::TempDir>,
    _db: Option<postgres_support::TestDatabase>,
}

fn plain() -> Arc<dyn Serializer> {
    Arc::new(JsonPlusSerializer)
}

const KEY: &[u8; 32] = b"0123456789abcdef0123456789abcdef";
const OTHER_KEY: &[u8; 32] = b"fedcba9876543210fedcba9876543210";

fn encrypted(key: &[u8]) -> EncryptedSerializer {
    EncryptedSerializer::from_key(key).unwrap()
}

impl Env {
    /// A fresh, empty store of `backend` reading through `base`; `None`
    /// (after printing why) for Postgres without a server outside CI.
    async fn new(backend: Backend, base: Arc<dyn Serializer>) -> Option<Env> {
        let plants = Planting::new(base);
        let serde: Arc<dyn Serializer> = plants.clone();
        Some(match backend {
            Backend::Memory => Env {
                backend,
                saver: Arc::new(InMemorySaver::with_serializer(serde)),
                plants,
                raw: Raw::None,
                _dir: None,
                _db: None,
            },
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("catalogue.sqlite");
                let saver = SqliteSaver::builder(&path).serializer(serde).open().await.unwrap();
                Env {
                    backend,
                    saver: Arc::new(saver),
                    plants,
                    raw: Raw::Sqlite(path),
                    _dir: Some(dir),
                    _db: None,
                }
            }
            Backend::Postgres => {
                let name = match postgres_support::create_database().await {
                    Ok(name) => name,
                    Err(reason) => {
                        postgres_support::skip(&reason);
                        return None;
                    }
                };
                let guard = postgres_support::TestDatabase(name.clone());
                let saver = PostgresSaver::builder()
                    .url(postgres_support::url_of(&name))
                    .max_connections(4)
                    .serializer(serde)
                    .open()
                    .await
                    .unwrap();
                Env {
                    backend,
                    saver: Arc::new(saver),
                    plants,
                    raw: Raw::Postgres(name),
                    _dir: None,
                    _db: Some(guard),
                }
            }
        })
    }

    fn s(&self) -> &dyn CheckpointSaver {
        &*self.saver
    }

    /// Puts a checkpoint with `values` (all new) and `metadata` extras.
    async fn put(
        &self,
        config: &CheckpointConfig,
        id: &str,
        values: &[(&str, Value)],
    ) -> checkpointer::Result<CheckpointConfig> {
        let mut cp = Checkpoint::new(0);
        cp.id = id.to_owned();
        let mut versions = ChannelVersions::new();
        for (ch, v) in values {
            cp.channel_values.insert((*ch).to_owned(), v.clone());
            versions.insert((*ch).to_owned(), ChannelVersion::Int(1));
        }
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        self.s().put(config, &cp, &meta, &versions).await
    }

    /// Stores a checkpoint in `thread` with one write whose stored bytes are
    /// `(tag, data)`, then reads the checkpoint back.
    async fn read_planted(
        &self,
        thread: &str,
        tag: &str,
        data: impl Into<Bytes>,
    ) -> checkpointer::Result<Option<CheckpointTuple>> {
        let config = self
            .put(&CheckpointConfig::new(thread), ID1, &[("x", Value::Int(1))])
            .await?;
        let marker = self.plants.plant(tag, data);
        self.s()
            .put_writes(&config, &[("w".to_owned(), marker)], "task", "")
            .await?;
        self.s().get_tuple(&config).await
    }

    /// Runs SQL on the store's tables (SQLite or Postgres).
    async fn sql(&self, statement: &str) {
        match &self.raw {
            Raw::None => panic!("no tables"),
            Raw::Sqlite(path) => rusqlite::Connection::open(path)
                .unwrap()
                .execute_batch(statement)
                .unwrap(),
            Raw::Postgres(db) => {
                let client = postgres_support::connect(db).await.unwrap();
                client.batch_execute(statement).await.unwrap();
            }
        }
    }
}

const ID1: &str = "1ef00000-0000-6000-8000-000000000001";
const ID2: &str = "1ef00000-0000-6000-8000-000000000002";
const ID3: &str = "1ef00000-0000-6000-8000-000000000003";

fn value_of(t: &CheckpointTuple, ch: &str) -> Value {
    t.checkpoint
        .channel_values
        .get(ch)
        .cloned()
        .unwrap_or_else(|| panic!("no value for {ch:?}"))
}

/// Bit-exact comparison (NaN included).
fn same(a: &Value, b: &Value) -> bool {
    msgpack::encode(a).unwrap() == msgpack::encode(b).unwrap()
}

fn is_serde(r: &checkpointer::Result<Option<CheckpointTuple>>) -> bool {
    matches!(r, Err(Error::Serde { .. }))
}

/// Reads stored bytes that must fail as `Error::Serde` through both
/// `get_tuple` and `list`, leaving other threads readable.
async fn assert_planted_refused(env: &Env, tag: &str, data: impl Into<Bytes>) {
    let good = env
        .put(&CheckpointConfig::new("good"), ID1, &[("x", Value::from("kept"))])
        .await
        .unwrap();
    let got = env.read_planted("bad", tag, data).await;
    assert!(is_serde(&got), "{:?}: {got:?}", env.backend);
    let listed = env
        .s()
        .list_vec(Some(CheckpointConfig::all_namespaces("bad")), ListOptions::default())
        .await;
    assert!(matches!(listed, Err(Error::Serde { .. })), "{listed:?}");
    let kept = env.s().get_tuple(&good).await.unwrap().unwrap();
    assert_eq!(value_of(&kept, "x"), Value::from("kept"));
}

/// Reads stored bytes that must decode to `expected`.
async fn assert_planted_reads(env: &Env, tag: &str, data: impl Into<Bytes>, expected: &Value) {
    let thread = format!("t{}", env.plants.plants.lock().len());
    let got = env.read_planted(&thread, tag, data).await.unwrap().unwrap();
    assert_eq!(got.pending_writes.len(), 1);
    assert!(
        same(&got.pending_writes[0].value, expected),
        "{:?} != {expected:?}",
        got.pending_writes[0].value
    );
}

macro_rules! env_or_skip {
    ($backend:expr) => {
        env_or_skip!($backend, plain())
    };
    ($backend:expr, $serde:expr) => {
        match Env::new($backend, $serde).await {
            Some(env) => env,
            None => return,
        }
    };
}

/// One test per row and backend: `memory::b01_…`, `sqlite::b01_…`,
/// `postgres::b01_…` (the last ones need PostgreSQL).
macro_rules! catalogue {
    ($($row:ident),* $(,)?) => {
        fn catalogue_tests() -> Vec<harness::Trial> {
            let backends: [(&str, Backend, &[&'static harness::Need]); 3] = [
                ("memory", Backend::Memory, &[]),
                ("sqlite", Backend::Sqlite, &[]),
                ("postgres", Backend::Postgres, &[&crate::POSTGRES]),
            ];
            let mut out = Vec::new();
            for (module, backend, needs) in backends {
                $(
                    out.push(harness::tokio(
                        &format!("bad_input_catalogue::{module}::{}", stringify!($row)),
                        needs,
                        2,
                        move || $row(backend),
                    ));
                )*
            }
            out
        }
        /// The catalogue's row names, in order (checked against the doc).
        const ROWS: &[&str] = &[$(stringify!($row)),*];
    };
}

catalogue!(
    b01_empty_thread_id,
    b02_huge_thread_id,
    b03_nul_in_identifiers,
    b04_sql_in_every_string,
    b05_wildcards_in_namespace,
    b06_non_uuid_checkpoint_ids,
    b07_huge_checkpoint_id,
    b08_hostile_channel_names,
    b09_hostile_task_ids_and_paths,
    b10_hostile_metadata_keys,
    b11_nul_in_metadata_values,
    b12_value_100_mb_binary,
    b13_value_100_mb_string,
    b14_nesting_within_limit,
    b15_nesting_beyond_limit,
    b16_nan_infinity_negative_zero,
    b17_nan_in_metadata,
    b18_nul_in_values,
    b19_extreme_integers,
    b20_non_string_and_duplicate_map_keys,
    b21_limit_zero_and_max,
    b22_before_from_another_thread,
    b23_before_extremes,
    b24_empty_checkpoint_id_means_none,
    b25_put_writes_without_checkpoint_id,
    b26_ten_thousand_writes,
    b27_copy_thread_onto_itself,
    b28_empty_and_hostile_id_lists,
    b29_delta_history_many_hostile_channels,
    b30_list_threads_extremes,
    b31_unknown_type_tag,
    b32_pickle_tag,
    b33_truncated_msgpack,
    b34_oversized_length_prefix,
    b35_huge_element_count,
    b36_nesting_10000_deep_bytes,
    b37_invalid_utf8_in_msgpack,
    b38_trailing_bytes,
    b39_legacy_json_invalid,
    b40_legacy_json_constructor_is_data,
    b41_python_class_payloads_are_data,
    b42_unknown_ext_code_kept_raw,
    b43_null_and_empty_tags_ignore_payload,
    b44_corrupt_checkpoint_column,
    b45_corrupt_metadata_column,
    b46_ciphertext_wrong_key,
    b47_ciphertext_flipped_bit,
    b48_plaintext_row_refused_unless_allowed,
    b49_truncated_ciphertext,
    b50_unknown_cipher,
    b51_inline_plaintext_under_encryption,
    b52_channel_value_that_does_not_decrypt,
    b53_passwords_in_every_connection_string_form,
    b54_server_errors_keep_the_servers_message,
    b55_silent_network_partition,
    b59_hundred_thousand_writes_while_another_thread_reads,
    b60_delete_for_runs_in_one_large_thread,
    b61_copy_thread_of_a_large_thread_while_another_thread_reads,
    b62_prune_of_a_large_thread_while_another_thread_reads,
    b71_metadata_nested_beyond_limit,
    b72_filter_nested_beyond_limit,
    b73_empty_checkpoint_id_at_put,
    b74_wide_metadata_and_equal_filter,
    b75_version_counters_beyond_64_bits,
    b79_value_200000_deep,
    b80_deep_extension_chains_and_pending_sends,
);

fn every_row_is_in_the_doc() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reliability.md")).unwrap();
    assert!(ROWS.len() >= 40);
    for row in ROWS {
        let id = &row[..3];
        assert!(
            doc.contains(&format!("| {} |", id.to_uppercase())),
            "{row} is not in docs/reliability.md"
        );
    }
}

// ---------------------------------------------------------------------------
// Identifiers through the public API

async fn b01_empty_thread_id(b: Backend) {
    let env = env_or_skip!(b);
    let stored = env
        .put(&CheckpointConfig::new(""), ID1, &[("x", Value::from("v"))])
        .await
        .unwrap();
    assert_eq!(stored.thread_id, "");
    let got = env.s().get_tuple(&CheckpointConfig::new("")).await.unwrap().unwrap();
    assert_eq!(value_of(&got, "x"), Value::from("v"));
    let listed = env
        .s()
        .list_vec(Some(CheckpointConfig::all_namespaces("")), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let threads = env.s().list_threads(ListThreadsOptions::default()).await.unwrap();
    assert_eq!(threads[0].thread_id, "");
}

async fn b02_huge_thread_id(b: Backend) {
    let env = env_or_skip!(b);
    let thread = "t".repeat(1 << 20);
    let result = env
        .put(&CheckpointConfig::new(&thread), ID1, &[("x", Value::Int(1))])
        .await;
    match b {
        Backend::Postgres => {
            // A btree index entry holds at most about 2.7 kB.
            let err = result.unwrap_err();
            assert!(matches!(err, Error::Storage { retryable: false, .. }), "{err:?}");
            assert!(env
                .s()
                .get_tuple(&CheckpointConfig::new(&thread))
                .await
                .unwrap()
                .is_none());
        }
        _ => {
            result.unwrap();
            let got = env
                .s()
                .get_tuple(&CheckpointConfig::new(&thread))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(got.config.thread_id.len(), 1 << 20);
        }
    }
}

async fn b03_nul_in_identifiers(b: Backend) {
    let env = env_or_skip!(b);
    let thread = "a\0b";
    let config = CheckpointConfig::new(thread).with_ns("n\0s");
    let result = env.put(&config, "id\0x", &[("x", Value::Int(1))]).await;
    match b {
        Backend::Postgres => {
            // PostgreSQL text cannot hold U+0000.
            let err = result.unwrap_err();
            assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
            let all = env.s().list_vec(None, ListOptions::default()).await.unwrap();
            assert!(all.is_empty());
        }
        _ => {
            let stored = result.unwrap();
            let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
            assert_eq!(got.config, stored);
            assert_eq!(got.config.thread_id, thread);
            assert!(env.s().get_tuple(&CheckpointConfig::new("a")).await.unwrap().is_none());
        }
    }
}

async fn b04_sql_in_every_string(b: Backend) {
    let env = env_or_skip!(b);
    let evil = "'; DROP TABLE checkpoints; --\" OR 1=1 /*";
    let config = CheckpointConfig::new(evil).with_ns(evil);
    let mut cp = Checkpoint::new(0);
    cp.id = format!("{ID1}{evil}");
    cp.channel_values.insert(evil.to_owned(), Value::from(evil));
    cp.channel_versions
        .insert(evil.to_owned(), ChannelVersion::Str(evil.to_owned()));
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    meta.insert(evil, evil);
    meta.insert("run_id", evil);
    let stored = env
        .s()
        .put(&config, &cp, &meta, &cp.channel_versions.clone())
        .await
        .unwrap();
    env.s()
        .put_writes(&stored, &[(evil.to_owned(), Value::from(evil))], evil, evil)
        .await
        .unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(got.checkpoint.channel_values[evil], Value::from(evil));
    assert_eq!(got.metadata.get(evil), Some(&Value::from(evil)));
    assert_eq!(got.pending_writes[0].task_id, evil);
    let hits = env
        .s()
        .list_vec(None, ListOptions::default().filter(evil, evil))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    let history = env
        .s()
        .get_delta_channel_history(&stored, &[evil.to_owned()])
        .await
        .unwrap();
    assert_eq!(history[evil].writes.len(), 0);
    env.s().copy_thread(evil, &format!("{evil}2")).await.unwrap();
    let copy = CheckpointConfig::all_namespaces(format!("{evil}2"));
    assert_eq!(
        env.s()
            .list_vec(Some(copy.clone()), ListOptions::default())
            .await
            .unwrap()
            .len(),
        1
    );
    env.s()
        .prune(&[evil.to_owned()], PruneStrategy::KeepLatest)
        .await
        .unwrap();
    // Both copies carry run id `evil`.
    env.s().delete_for_runs(&[evil.to_owned()]).await.unwrap();
    assert!(env
        .s()
        .list_vec(Some(copy), ListOptions::default())
        .await
        .unwrap()
        .is_empty());
    env.s().delete_thread(evil).await.unwrap();
    // The tables survived.
    let after = env
        .put(&CheckpointConfig::new("after"), ID1, &[("x", Value::Int(1))])
        .await
        .unwrap();
    assert!(env.s().get_tuple(&after).await.unwrap().is_some());
}

async fn b05_wildcards_in_namespace(b: Backend) {
    let env = env_or_skip!(b);
    for ns in ["%", "_", "a%", "abc", "a_c", "[a]", "*"] {
        env.put(&CheckpointConfig::new("t").with_ns(ns), ID1, &[("x", Value::from(ns))])
            .await
            .unwrap();
    }
    for ns in ["%", "_", "a%", "[a]", "*"] {
        let listed = env
            .s()
            .list_vec(Some(CheckpointConfig::new("t").with_ns(ns)), ListOptions::default())
            .await
            .unwrap();
        assert_eq!(listed.len(), 1, "{ns}");
        assert_eq!(value_of(&listed[0], "x"), Value::from(ns));
    }
}

async fn b06_non_uuid_checkpoint_ids(b: Backend) {
    let env = env_or_skip!(b);
    for id in ["not-a-uuid", "0", "zzzz", "1ef0"] {
        env.put(&CheckpointConfig::new("t"), id, &[("x", Value::from(id))])
            .await
            .unwrap();
    }
    let listed = env
        .s()
        .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
        .await
        .unwrap();
    let ids: Vec<_> = listed.iter().map(|t| t.checkpoint.id.as_str()).collect();
    assert_eq!(
        ids,
        ["zzzz", "not-a-uuid", "1ef0", "0"],
        "ordered as strings, descending"
    );
    let latest = env.s().get_tuple(&CheckpointConfig::new("t")).await.unwrap().unwrap();
    assert_eq!(latest.checkpoint.id, "zzzz");
}

async fn b07_huge_checkpoint_id(b: Backend) {
    let env = env_or_skip!(b);
    // Random, so that no storage compresses it under a size limit.
    let id: String = (0..64 << 10)
        .map(|_| char::from(b"0123456789abcdef"[usize::from(rand::random::<u8>() % 16)]))
        .collect();
    let result = env.put(&CheckpointConfig::new("t"), &id, &[("x", Value::Int(1))]).await;
    match b {
        Backend::Postgres => {
            assert!(
                matches!(result, Err(Error::Storage { retryable: false, .. })),
                "{result:?}"
            );
            assert!(env.s().get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_none());
        }
        _ => {
            let stored = result.unwrap();
            assert_eq!(env.s().get_tuple(&stored).await.unwrap().unwrap().checkpoint.id, id);
        }
    }
}

async fn b08_hostile_channel_names(b: Backend) {
    let env = env_or_skip!(b);
    let long = "c".repeat(10_000);
    let names = ["", "ch\u{0}x", "日本語 🚀", "__error__", long.as_str(), "a.b", "$x"];
    let values: Vec<(&str, Value)> = names
        .iter()
        .map(|n| (*n, Value::from(format!("v-{}", n.len()))))
        .collect();
    let result = env.put(&CheckpointConfig::new("t"), ID1, &values).await;
    match b {
        Backend::Postgres => {
            // Channel names are JSONB keys there: U+0000 cannot be stored.
            assert!(
                matches!(&result, Err(Error::InvalidInput { reason }) if reason.contains("U+0000")),
                "{result:?}"
            );
            let without_nul: Vec<_> = values.iter().filter(|(n, _)| !n.contains('\0')).cloned().collect();
            let stored = env.put(&CheckpointConfig::new("t"), ID1, &without_nul).await.unwrap();
            let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
            assert_eq!(got.checkpoint.channel_values.len(), without_nul.len());
        }
        _ => {
            let stored = result.unwrap();
            let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
            for (n, v) in &values {
                assert_eq!(&got.checkpoint.channel_values[*n], v, "{n:?}");
            }
        }
    }
}

async fn b09_hostile_task_ids_and_paths(b: Backend) {
    let env = env_or_skip!(b);
    let stored = env.put(&CheckpointConfig::new("t"), ID1, &[]).await.unwrap();
    let long = "k".repeat(10_000);
    for (task, path) in [
        ("", ""),
        ("t\u{0}", "p\u{0}"),
        (long.as_str(), long.as_str()),
        ("日本", "~é"),
    ] {
        let result = env
            .s()
            .put_writes(&stored, &[("x".to_owned(), Value::Int(1))], task, path)
            .await;
        match (b, task.contains('\0')) {
            (Backend::Postgres, true) => {
                assert!(
                    matches!(&result, Err(Error::InvalidInput { reason }) if reason.contains("U+0000")),
                    "{result:?}"
                )
            }
            _ => result.unwrap(),
        }
    }
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    let tasks: Vec<_> = got.pending_writes.iter().map(|w| w.task_id.len()).collect();
    let expected: &[usize] = match b {
        Backend::Postgres => &[0, 6, 10_000],
        _ => &[0, 2, 6, 10_000],
    };
    let mut sorted = tasks.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, expected);
}

async fn b10_hostile_metadata_keys(b: Backend) {
    let env = env_or_skip!(b);
    let keys = ["tag') OR 1=1 --", "$.tag", "tag\"", "a.b", "", "{}", "🚀"];
    for (i, key) in keys.iter().enumerate() {
        let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        meta.insert(*key, "hit");
        let mut cp = Checkpoint::new(0);
        cp.id = format!("{ID1}-{i}");
        env.s()
            .put(
                &CheckpointConfig::new(format!("t{i}")),
                &cp,
                &meta,
                &ChannelVersions::new(),
            )
            .await
            .unwrap();
    }
    for (i, key) in keys.iter().enumerate() {
        let hits = env
            .s()
            .list_vec(None, ListOptions::default().filter(*key, "hit"))
            .await
            .unwrap();
        assert_eq!(hits.len(), 1, "{key:?}");
        assert_eq!(hits[0].config.thread_id, format!("t{i}"));
        assert!(env
            .s()
            .list_vec(None, ListOptions::default().filter(*key, "miss"))
            .await
            .unwrap()
            .is_empty());
    }
}

async fn b11_nul_in_metadata_values(b: Backend) {
    let env = env_or_skip!(b);
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    meta.insert("top", "a\0b");
    meta.insert("nested", Value::map([("k", Value::from("c\0d"))]));
    let mut cp = Checkpoint::new(0);
    cp.id = ID1.to_owned();
    let result = env
        .s()
        .put(&CheckpointConfig::new("t"), &cp, &meta, &ChannelVersions::new())
        .await;
    if b == Backend::Postgres {
        // JSONB cannot hold U+0000: refused before anything is written.
        assert!(
            matches!(&result, Err(Error::InvalidInput { reason }) if reason.contains("U+0000")),
            "{result:?}"
        );
        assert!(env.s().get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_none());
        return;
    }
    let stored = result.unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(got.metadata.get("top"), Some(&Value::from("a\0b")));
    assert_eq!(got.metadata.get("nested"), meta.get("nested"));
    let hits = env
        .s()
        .list_vec(None, ListOptions::default().filter("top", "a\0b"))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
}

// ---------------------------------------------------------------------------
// Values through the public API

async fn b12_value_100_mb_binary(b: Backend) {
    let env = env_or_skip!(b);
    let big: Vec<u8> = (0..100 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let value = Value::Bin(Bytes::from(big));
    let stored = env
        .put(&CheckpointConfig::new("t"), ID1, &[("big", value.clone())])
        .await
        .unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert!(value_of(&got, "big") == value, "100 MB binary differs");
}

async fn b13_value_100_mb_string(b: Backend) {
    let env = env_or_skip!(b);
    let value = Value::from("é\u{0}x".repeat(25 << 20));
    let stored = env
        .put(&CheckpointConfig::new("t"), ID1, &[("big", value.clone())])
        .await
        .unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert!(value_of(&got, "big") == value, "100 MB string differs");
}

fn nested(levels: usize) -> Value {
    (0..levels).fold(Value::from("leaf"), |v, i| {
        if i % 2 == 0 {
            Value::Array(vec![v].into())
        } else {
            Value::map([("k", v)])
        }
    })
}

async fn b14_nesting_within_limit(b: Backend) {
    let env = env_or_skip!(b);
    // 120 levels: within the decoder's 128 wherever the value sits (SQLite
    // stores it two levels down inside the checkpoint).
    let value = nested(120);
    let stored = env
        .put(&CheckpointConfig::new("t"), ID1, &[("deep", value.clone())])
        .await
        .unwrap();
    env.s()
        .put_writes(&stored, &[("w".to_owned(), value.clone())], "task", "")
        .await
        .unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(value_of(&got, "deep"), value);
    assert_eq!(got.pending_writes[0].value, value);
}

async fn b15_nesting_beyond_limit(b: Backend) {
    let env = env_or_skip!(b);
    let value = nested(200);
    let err = env
        .put(&CheckpointConfig::new("t"), ID1, &[("deep", value.clone())])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Serde { .. }), "{err:?}");
    assert!(
        env.s().get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_none(),
        "nothing stored"
    );
    let stored = env.put(&CheckpointConfig::new("t"), ID1, &[]).await.unwrap();
    let err = env
        .s()
        .put_writes(&stored, &[("w".to_owned(), value)], "task", "")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Serde { .. }), "{err:?}");
    assert!(env
        .s()
        .get_tuple(&stored)
        .await
        .unwrap()
        .unwrap()
        .pending_writes
        .is_empty());
}

async fn b16_nan_infinity_negative_zero(b: Backend) {
    let env = env_or_skip!(b);
    let values = [
        ("nan", Value::Float(f64::NAN)),
        ("inf", Value::Float(f64::INFINITY)),
        ("ninf", Value::Float(f64::NEG_INFINITY)),
        ("nzero", Value::Float(-0.0)),
        (
            "nested",
            Value::Array(vec![Value::Float(f64::NAN), Value::Float(f64::INFINITY)].into()),
        ),
    ];
    let stored = env.put(&CheckpointConfig::new("t"), ID1, &values).await.unwrap();
    env.s()
        .put_writes(&stored, &[("w".to_owned(), Value::Float(f64::NAN))], "task", "")
        .await
        .unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    for (ch, v) in &values {
        assert!(same(&value_of(&got, ch), v), "{ch}: {:?}", value_of(&got, ch));
    }
    assert!(same(&got.pending_writes[0].value, &Value::Float(f64::NAN)));
}

async fn b17_nan_in_metadata(b: Backend) {
    let env = env_or_skip!(b);
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    meta.insert("score", Value::Float(f64::NAN));
    meta.insert("inf", Value::Float(f64::INFINITY));
    let mut cp = Checkpoint::new(0);
    cp.id = ID1.to_owned();
    let result = env
        .s()
        .put(&CheckpointConfig::new("t"), &cp, &meta, &ChannelVersions::new())
        .await;
    if b == Backend::Postgres {
        // JSONB has no NaN or infinity: refused before anything is written.
        assert!(
            matches!(&result, Err(Error::InvalidInput { reason }) if reason.contains("NaN")),
            "{result:?}"
        );
        assert!(env.s().get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_none());
        return;
    }
    let stored = result.unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert!(same(got.metadata.get("score").unwrap(), &Value::Float(f64::NAN)));
    assert!(same(got.metadata.get("inf").unwrap(), &Value::Float(f64::INFINITY)));
}

async fn b18_nul_in_values(b: Backend) {
    let env = env_or_skip!(b);
    let values = [
        ("inline", Value::from("a\0b")),
        ("only_nul", Value::from("\0")),
        ("nested", Value::map([("k\0", Value::from("\0v"))])),
    ];
    let stored = env.put(&CheckpointConfig::new("t"), ID1, &values).await.unwrap();
    env.s()
        .put_writes(&stored, &[("w".to_owned(), Value::from("\0"))], "task", "")
        .await
        .unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    for (ch, v) in &values {
        assert_eq!(&value_of(&got, ch), v, "{ch}");
    }
    assert_eq!(got.pending_writes[0].value, Value::from("\0"));
}

async fn b19_extreme_integers(b: Backend) {
    let env = env_or_skip!(b);
    let values = [
        ("min", Value::Int(i64::MIN)),
        ("max", Value::Int(i64::MAX)),
        ("umax", Value::UInt(u64::MAX)),
    ];
    let stored = env.put(&CheckpointConfig::new("t"), ID1, &values).await.unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    for (ch, v) in &values {
        assert_eq!(&value_of(&got, ch), v, "{ch}");
    }
}

async fn b20_non_string_and_duplicate_map_keys(b: Backend) {
    let env = env_or_skip!(b);
    let value = Value::Map(
        (vec![
            (Value::Int(1), Value::from("int key")),
            (Value::Nil, Value::from("nil key")),
            (Value::from("a"), Value::Int(1)),
            (Value::from("a"), Value::Int(2)),
            (
                Value::Array(vec![Value::Int(1), Value::Int(2)].into()),
                Value::from("tuple key"),
            ),
        ])
        .into(),
    );
    let stored = env
        .put(&CheckpointConfig::new("t"), ID1, &[("m", value.clone())])
        .await
        .unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(value_of(&got, "m"), value);
}

// ---------------------------------------------------------------------------
// Options and operations

async fn three(env: &Env, thread: &str) {
    let mut parent = CheckpointConfig::new(thread);
    for id in [ID1, ID2, ID3] {
        parent = env.put(&parent, id, &[("x", Value::from(id))]).await.unwrap();
    }
}

async fn b21_limit_zero_and_max(b: Backend) {
    let env = env_or_skip!(b);
    three(&env, "t").await;
    let none = env.s().list_vec(None, ListOptions::default().limit(0)).await.unwrap();
    assert!(none.is_empty());
    let all = env
        .s()
        .list_vec(None, ListOptions::default().limit(usize::MAX))
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    let threads = env
        .s()
        .list_threads(ListThreadsOptions {
            limit: Some(0),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(threads.is_empty());
}

async fn b22_before_from_another_thread(b: Backend) {
    let env = env_or_skip!(b);
    three(&env, "t").await;
    // ID2 exists in "other" only: `before` compares ids, whatever their thread.
    env.put(
        &CheckpointConfig::new("other"),
        "1ef00000-0000-6000-8000-000000000002x",
        &[],
    )
    .await
    .unwrap();
    let listed = env
        .s()
        .list_vec(
            Some(CheckpointConfig::new("t")),
            ListOptions::default().before("1ef00000-0000-6000-8000-000000000002x"),
        )
        .await
        .unwrap();
    let ids: Vec<_> = listed.iter().map(|t| t.checkpoint.id.as_str()).collect();
    assert_eq!(ids, [ID2, ID1]);
}

async fn b23_before_extremes(b: Backend) {
    let env = env_or_skip!(b);
    three(&env, "t").await;
    let none = env.s().list_vec(None, ListOptions::default().before("")).await.unwrap();
    assert!(none.is_empty());
    let all = env
        .s()
        .list_vec(None, ListOptions::default().before("\u{10FFFF}"))
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    let garbage = env
        .s()
        .list_vec(None, ListOptions::default().before("'; --"))
        .await
        .unwrap();
    assert!(garbage.is_empty(), "\"'\" sorts before every id");
}

async fn b24_empty_checkpoint_id_means_none(b: Backend) {
    let env = env_or_skip!(b);
    three(&env, "t").await;
    let got = env
        .s()
        .get_tuple(&CheckpointConfig::new("t").with_checkpoint_id(""))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.checkpoint.id, ID3, "an empty id is no id: the latest");
    let stored = env
        .put(&CheckpointConfig::new("u").with_checkpoint_id(""), ID1, &[])
        .await
        .unwrap();
    assert!(env
        .s()
        .get_tuple(&stored)
        .await
        .unwrap()
        .unwrap()
        .parent_config
        .is_none());
    let err = env
        .s()
        .put_writes(
            &CheckpointConfig::new("t").with_checkpoint_id(""),
            &[("x".to_owned(), Value::Nil)],
            "task",
            "",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}

async fn b25_put_writes_without_checkpoint_id(b: Backend) {
    let env = env_or_skip!(b);
    let err = env
        .s()
        .put_writes(
            &CheckpointConfig::new("t"),
            &[("x".to_owned(), Value::Int(1))],
            "task",
            "",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let stored = env.put(&CheckpointConfig::new("t"), ID1, &[]).await.unwrap();
    assert!(env
        .s()
        .get_tuple(&stored)
        .await
        .unwrap()
        .unwrap()
        .pending_writes
        .is_empty());
}

async fn b26_ten_thousand_writes(b: Backend) {
    let env = env_or_skip!(b);
    let stored = env.put(&CheckpointConfig::new("t"), ID1, &[]).await.unwrap();
    let writes: Vec<(String, Value)> = (0..10_000).map(|i| (format!("ch{i}"), Value::Int(i))).collect();
    env.s().put_writes(&stored, &writes, "task", "").await.unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(got.pending_writes.len(), 10_000);
    for (i, w) in got.pending_writes.iter().enumerate() {
        assert_eq!(w.value, Value::Int(i as i64), "in idx order");
    }
}

async fn b27_copy_thread_onto_itself(b: Backend) {
    let env = env_or_skip!(b);
    three(&env, "t").await;
    let err = env.s().copy_thread("t", "t").await.unwrap_err();
    assert!(
        matches!(&err, Error::ThreadExists { thread_id } if thread_id == "t"),
        "{err:?}"
    );
    assert_eq!(env.s().list_vec(None, ListOptions::default()).await.unwrap().len(), 3);
}

async fn b28_empty_and_hostile_id_lists(b: Backend) {
    let env = env_or_skip!(b);
    three(&env, "t").await;
    let hostile = vec![
        "' OR 1=1 --".to_owned(),
        "%".to_owned(),
        String::new(),
        "\u{0}".to_owned(),
    ];
    env.s().prune(&[], PruneStrategy::Delete).await.unwrap();
    env.s().delete_for_runs(&[]).await.unwrap();
    // Ids nothing can match (U+0000 included, which no PostgreSQL text holds).
    env.s().delete_for_runs(&hostile).await.unwrap();
    env.s().prune(&hostile, PruneStrategy::Delete).await.unwrap();
    let many: Vec<String> = (0..10_000).map(|i| format!("run-{i}")).collect();
    env.s().delete_for_runs(&many).await.unwrap();
    assert_eq!(
        env.s().list_vec(None, ListOptions::default()).await.unwrap().len(),
        3,
        "nothing deleted"
    );
}

async fn b29_delta_history_many_hostile_channels(b: Backend) {
    let env = env_or_skip!(b);
    three(&env, "t").await;
    let mut channels: Vec<String> = (0..1000).map(|i| format!("ch-{i}")).collect();
    channels.extend(["'; --".to_owned(), String::new(), "x".to_owned()]);
    let history = env
        .s()
        .get_delta_channel_history(&CheckpointConfig::new("t"), &channels)
        .await
        .unwrap();
    assert_eq!(history.len(), channels.len());
    assert!(history["ch-0"].seed.is_none() && history["ch-0"].writes.is_empty());
    assert_eq!(history["x"].seed, Some(Value::from(ID2)), "the parent's value seeds x");
}

async fn b30_list_threads_extremes(b: Backend) {
    let env = env_or_skip!(b);
    three(&env, "t").await;
    let after_all = env
        .s()
        .list_threads(ListThreadsOptions {
            after: Some("\u{10FFFF}".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(after_all.is_empty());
    let hostile = env
        .s()
        .list_threads(ListThreadsOptions {
            after: Some("' OR 1=1 --".to_owned()),
            filter: [("'; --".to_owned(), Value::Nil)].into_iter().collect(),
            limit: Some(usize::MAX),
        })
        .await
        .unwrap();
    assert_eq!(hostile.len(), 1, "a null filter matches the missing key");
}

// ---------------------------------------------------------------------------
// Stored bytes

async fn b31_unknown_type_tag(b: Backend) {
    let env = env_or_skip!(b);
    assert_planted_refused(&env, "bogus", &b"\x01"[..]).await;
}

async fn b32_pickle_tag(b: Backend) {
    let env = env_or_skip!(b);
    // pickle of os.system('true'): never unpickled, refused by tag.
    let pickle = b"\x80\x04\x95\x1c\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93\x94\x8c\x04true\x94\x85\x94R\x94.";
    assert_planted_refused(&env, "pickle", &pickle[..]).await;
}

async fn b33_truncated_msgpack(b: Backend) {
    let env = env_or_skip!(b);
    // {"a": "hello"} cut in the middle of the string.
    assert_planted_refused(&env, "msgpack", &b"\x81\xa1a\xa5hel"[..]).await;
}

async fn b34_oversized_length_prefix(b: Backend) {
    let env = env_or_skip!(b);
    for data in [
        &b"\xdb\xff\xff\xff\xffabc"[..],
        b"\xc6\xff\xff\xff\xff",
        b"\xc9\xff\xff\xff\xff\x00",
    ] {
        assert_planted_refused(&env, "msgpack", data).await;
    }
}

async fn b35_huge_element_count(b: Backend) {
    let env = env_or_skip!(b);
    for data in [&b"\xdd\xff\xff\xff\xff\xc0"[..], b"\xdf\xff\xff\xff\xff\xc0\xc0"] {
        assert_planted_refused(&env, "msgpack", data).await;
    }
}

async fn b36_nesting_10000_deep_bytes(b: Backend) {
    let env = env_or_skip!(b);
    let mut data = vec![0x91u8; 10_000];
    data.push(0xc0);
    assert_planted_refused(&env, "msgpack", data).await;
}

async fn b37_invalid_utf8_in_msgpack(b: Backend) {
    let env = env_or_skip!(b);
    assert_planted_refused(&env, "msgpack", &b"\xa2\xc3\x28"[..]).await;
}

async fn b38_trailing_bytes(b: Backend) {
    let env = env_or_skip!(b);
    assert_planted_refused(&env, "msgpack", &b"\x01\x02"[..]).await;
}

async fn b39_legacy_json_invalid(b: Backend) {
    let env = env_or_skip!(b);
    for data in [&b"{\"a\": "[..], b"\xff\xfe{}", b"[1, 2] trailing"] {
        assert_planted_refused(&env, "json", data).await;
    }
}

async fn b40_legacy_json_constructor_is_data(b: Backend) {
    let env = env_or_skip!(b);
    let json =
        br#"{"lc": 2, "type": "constructor", "id": ["os", "system"], "args": ["touch /tmp/pwned"], "kwargs": {}}"#;
    let expected = checkpointer::serde::json::from_json(json).unwrap();
    assert!(matches!(&expected, Value::Map(_)));
    assert_planted_reads(&env, "json", &json[..], &expected).await;
    assert!(!std::path::Path::new("/tmp/pwned").exists());
}

/// Item 8: stored payloads naming Python classes (code execution in a
/// careless reader) decode to data: module, class name and arguments.
async fn b41_python_class_payloads_are_data(b: Backend) {
    let env = env_or_skip!(b);
    let args = Value::Array((vec![Value::from("touch /tmp/pwned")]).into());
    let cases = [
        (0, "os", "system", Value::from("touch /tmp/pwned")),
        (1, "subprocess", "Popen", args.clone()),
        (
            2,
            "builtins",
            "eval",
            Value::map([("source", Value::from("__import__('os')"))]),
        ),
        (
            4,
            "pickle",
            "loads",
            Value::map([("data", Value::Bin(Bytes::from_static(b"\x80\x04.")))]),
        ),
        (
            5,
            "importlib",
            "import_module",
            Value::map([("name", Value::from("os"))]),
        ),
    ];
    for (code, module, name, arg) in cases {
        let kind = checkpointer::serde::ExtKind::from_code(code);
        let ext = Ext::object(kind, module, name, arg.clone()).unwrap();
        let bytes = msgpack::encode(&Value::Ext(Box::new(ext.clone()))).unwrap();
        let got = env
            .read_planted(&format!("t{code}"), "msgpack", bytes)
            .await
            .unwrap()
            .unwrap();
        let read = got.pending_writes[0]
            .value
            .as_ext()
            .expect("an extension value")
            .clone();
        assert_eq!(read.module(), Some(module));
        assert_eq!(read.name(), Some(name));
        assert_eq!(read.arg(), Some(&arg));
        assert_eq!(read, ext);
    }
    // ext 3 (a method call): only data too.
    let ext = Ext::object_with_method(
        checkpointer::serde::ExtKind::from_code(3),
        "os",
        "system",
        Value::from("id"),
        "__call__",
    )
    .unwrap();
    let bytes = msgpack::encode(&Value::Ext(Box::new(ext.clone()))).unwrap();
    let got = env.read_planted("t3", "msgpack", bytes).await.unwrap().unwrap();
    assert_eq!(got.pending_writes[0].value, Value::Ext(Box::new(ext)));
    assert!(!std::path::Path::new("/tmp/pwned").exists());
}

async fn b42_unknown_ext_code_kept_raw(b: Backend) {
    let env = env_or_skip!(b);
    let data = b"\xc7\x03\x63abc";
    let expected = Value::Ext(Box::new(Ext::raw(0x63, Bytes::from_static(b"abc"))));
    assert_planted_reads(&env, "msgpack", &data[..], &expected).await;
    let negative = b"\xd4\xfe\x00";
    assert_planted_reads(
        &env,
        "msgpack",
        &negative[..],
        &Value::Ext(Box::new(Ext::raw(-2, Bytes::from_static(b"\x00")))),
    )
    .await;
}

async fn b43_null_and_empty_tags_ignore_payload(b: Backend) {
    let env = env_or_skip!(b);
    // Python's reader ignores the payload of these tags too.
    assert_planted_reads(&env, "null", &b"garbage"[..], &Value::Nil).await;
    let env = env_or_skip!(b);
    let got = env.read_planted("t", "empty", &b"garbage"[..]).await.unwrap().unwrap();
    assert!(got.pending_writes.iter().all(|w| w.value == Value::Nil), "{got:?}");
}

async fn b44_corrupt_checkpoint_column(b: Backend) {
    let env = env_or_skip!(b);
    let good = env
        .put(&CheckpointConfig::new("good"), ID1, &[("x", Value::from("kept"))])
        .await
        .unwrap();
    let bad = env
        .put(&CheckpointConfig::new("bad"), ID1, &[("x", Value::from("v"))])
        .await
        .unwrap();
    let statements: &[&str] = match b {
        // InMemorySaver holds checkpoints as typed data, never as bytes.
        Backend::Memory => return,
        Backend::Sqlite => &[
            "UPDATE checkpoints SET checkpoint = x'2a' WHERE thread_id = 'bad'",
            "UPDATE checkpoints SET checkpoint = x'81a176a4666f7572' WHERE thread_id = 'bad'",
            "UPDATE checkpoints SET type = 'pickle' WHERE thread_id = 'bad'",
        ],
        Backend::Postgres => &[
            r#"UPDATE checkpoints SET checkpoint = '{"v": "four", "id": 7, "channel_versions": {}}' WHERE thread_id = 'bad'"#,
            // The server itself refuses to expand a non-object
            // `channel_versions` (`jsonb_each_text`, SQLSTATE 22023): stored
            // data, so Serde like the rest.
            r#"UPDATE checkpoints SET checkpoint = '{"v": 4, "channel_versions": [1]}' WHERE thread_id = 'bad'"#,
        ],
    };
    for statement in statements {
        env.sql(statement).await;
        let got = env.s().get_tuple(&bad).await;
        let listed = env
            .s()
            .list_vec(Some(CheckpointConfig::all_namespaces("bad")), ListOptions::default())
            .await
            .map(|v| v.len());
        assert!(is_serde(&got), "{statement}: {got:?}");
        assert!(matches!(listed, Err(Error::Serde { .. })), "{statement}: {listed:?}");
        assert_eq!(
            value_of(&env.s().get_tuple(&good).await.unwrap().unwrap(), "x"),
            Value::from("kept")
        );
    }
}

async fn b45_corrupt_metadata_column(b: Backend) {
    let env = env_or_skip!(b);
    let good = env
        .put(&CheckpointConfig::new("good"), ID1, &[("x", Value::from("kept"))])
        .await
        .unwrap();
    let bad = env.put(&CheckpointConfig::new("bad"), ID1, &[]).await.unwrap();
    let statements: &[&str] = match b {
        Backend::Memory => return,
        Backend::Sqlite => &[
            "UPDATE checkpoints SET metadata = x'7b22' WHERE thread_id = 'bad'",
            "UPDATE checkpoints SET metadata = '[1, 2]' WHERE thread_id = 'bad'",
            "UPDATE checkpoints SET metadata = x'7b2261223a2022ff227d' WHERE thread_id = 'bad'",
        ],
        Backend::Postgres => &["UPDATE checkpoints SET metadata = '[1, 2]' WHERE thread_id = 'bad'"],
    };
    for statement in statements {
        env.sql(statement).await;
        let got = env.s().get_tuple(&bad).await;
        assert!(is_serde(&got), "{statement}: {got:?}");
        assert_eq!(
            value_of(&env.s().get_tuple(&good).await.unwrap().unwrap(), "x"),
            Value::from("kept")
        );
    }
}

// ---------------------------------------------------------------------------
// Encryption at rest

async fn b46_ciphertext_wrong_key(b: Backend) {
    let env = env_or_skip!(b, Arc::new(encrypted(KEY)));
    let other = encrypted(OTHER_KEY).dumps_typed(&Value::from("secret")).unwrap();
    let got = env.read_planted("t", &other.tag, other.data).await;
    assert!(
        matches!(got, Err(Error::Encryption(EncryptionError::AuthenticationFailed))),
        "{got:?}"
    );
}

async fn b47_ciphertext_flipped_bit(b: Backend) {
    let env = env_or_skip!(b, Arc::new(encrypted(KEY)));
    let typed = encrypted(KEY).dumps_typed(&Value::from("secret")).unwrap();
    for bit in [0, 8 * 16 + 3, 8 * 32 + 7] {
        let mut data = typed.data.to_vec();
        data[bit / 8] ^= 1 << (bit % 8);
        let got = env.read_planted(&format!("t{bit}"), &typed.tag, data).await;
        assert!(
            matches!(got, Err(Error::Encryption(EncryptionError::AuthenticationFailed))),
            "{got:?}"
        );
    }
}

async fn b48_plaintext_row_refused_unless_allowed(b: Backend) {
    let env = env_or_skip!(b, Arc::new(encrypted(KEY)));
    let got = env.read_planted("t", "msgpack", &b"\xa5hello"[..]).await;
    assert!(
        matches!(&got, Err(Error::Encryption(EncryptionError::PlaintextRefused { tag })) if tag == "msgpack"),
        "{got:?}"
    );
    let env = env_or_skip!(b, Arc::new(encrypted(KEY).allow_plaintext(true)));
    assert_planted_reads(&env, "msgpack", &b"\xa5hello"[..], &Value::from("hello")).await;
}

async fn b49_truncated_ciphertext(b: Backend) {
    let env = env_or_skip!(b, Arc::new(encrypted(KEY)));
    let got = env.read_planted("t", "msgpack+aes", vec![0u8; 31]).await;
    assert!(
        matches!(got, Err(Error::Encryption(EncryptionError::Truncated { len: 31 }))),
        "{got:?}"
    );
}

async fn b50_unknown_cipher(b: Backend) {
    let env = env_or_skip!(b, Arc::new(encrypted(KEY)));
    let got = env.read_planted("t", "msgpack+rot13", vec![0u8; 40]).await;
    assert!(
        matches!(&got, Err(Error::Encryption(EncryptionError::UnknownCipher { cipher })) if cipher == "rot13"),
        "{got:?}"
    );
}

// ---------------------------------------------------------------------------
// Encryption bypasses, secrets, server messages, partitions

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[track_caller]
fn assert_refused_as<T: std::fmt::Debug>(what: &str, got: checkpointer::Result<T>, tag: &str) {
    match got {
        Err(Error::Encryption(EncryptionError::PlaintextRefused { tag: got })) => assert_eq!(got, tag, "{what}"),
        other => panic!("{what}: {other:?}"),
    }
}

async fn b51_inline_plaintext_under_encryption(b: Backend) {
    let env = env_or_skip!(b, Arc::new(encrypted(KEY)));
    let config = env
        .put(&CheckpointConfig::new("t"), ID1, &[("x", Value::from("secret"))])
        .await
        .unwrap();
    let tag = match b {
        Backend::Memory => return, // values are held as ciphertext, there are no tables
        Backend::Sqlite => {
            // The checkpoint row, values and all, replaced by plaintext.
            let mut cp = Checkpoint::new(0);
            cp.id = ID1.to_owned();
            cp.channel_values.insert("x".into(), Value::from("evil"));
            cp.channel_versions.insert("x".into(), ChannelVersion::Int(1));
            let bytes = msgpack::encode(&cp.to_value(true)).unwrap();
            env.sql(&format!(
                "UPDATE checkpoints SET type = 'msgpack', checkpoint = x'{}' WHERE thread_id = 't'",
                hex(&bytes)
            ))
            .await;
            "msgpack"
        }
        Backend::Postgres => {
            // Plaintext where Python's saver keeps primitives, in place of
            // the deleted encrypted blob.
            env.sql(
                "DELETE FROM checkpoint_blobs; UPDATE checkpoints SET checkpoint = \
                 jsonb_set(checkpoint, '{channel_values,x}', '\"evil\"')",
            )
            .await;
            "jsonb"
        }
    };
    assert_refused_as("get_tuple", env.s().get_tuple(&config).await, tag);
    assert_refused_as(
        "list",
        env.s()
            .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
            .await,
        tag,
    );
    if b == Backend::Postgres {
        let child = env.put(&config, ID2, &[("y", Value::from(vec![1]))]).await.unwrap();
        assert_refused_as(
            "delta history",
            env.s().get_delta_channel_history(&child, &["x".to_owned()]).await,
            tag,
        );
    }
}

async fn b52_channel_value_that_does_not_decrypt(b: Backend) {
    let env = env_or_skip!(b, Arc::new(encrypted(KEY)));
    let junk = vec![0u8; 40];
    let value = match b {
        Backend::Sqlite => Value::from("x"),
        // stored as the channel's (encrypted) value
        _ => env.plants.plant("msgpack+aes", junk.clone()),
    };
    let config = env
        .put(&CheckpointConfig::new("t"), ID1, &[("x", value)])
        .await
        .unwrap();
    if b == Backend::Sqlite {
        env.sql(&format!(
            "UPDATE checkpoints SET checkpoint = x'{}' WHERE thread_id = 't'",
            hex(&junk)
        ))
        .await;
    }
    let got = env.s().get_tuple(&config).await;
    assert!(
        matches!(got, Err(Error::Encryption(EncryptionError::AuthenticationFailed))),
        "{got:?}"
    );
    let listed = env
        .s()
        .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
        .await;
    assert!(
        matches!(listed, Err(Error::Encryption(EncryptionError::AuthenticationFailed))),
        "{listed:?}"
    );
}

/// Connection strings with the password `SECRET-pw`, unreachable.
const PASSWORD_FORMS: &[&str] = &[
    "postgres://u:SECRET-pw@127.0.0.1:1/db?connect_timeout=2",
    "postgresql://u:SECRET%2Dpw@127.0.0.1:1/db?connect_timeout=2",
    "postgresql://u@127.0.0.1:1/db?password=SECRET-pw&connect_timeout=2",
    "postgresql://u@127.0.0.1:1/db?connect_timeout=2&PassWord=SECRET%2Dpw&password=SECRET-pw",
    "host=127.0.0.1 port=1 password=SECRET-pw connect_timeout=2",
    "host=127.0.0.1 port=1 password = 'SECRET-pw \\' x' connect_timeout=2",
    "postgres://u:SECRET-pw@127.0.0.1:notaport/db",
    "host=127.0.0.1 password=SECRET-pw bogus=1",
    "host=127.0.0.1 password=SECRET -pw x",
];

async fn b53_passwords_in_every_connection_string_form(b: Backend) {
    if b != Backend::Postgres {
        return; // no connection string
    }
    let hidden = |what: &str, text: &str| {
        for needle in ["SECRET", "-pw", "%2Dpw"] {
            assert!(!text.contains(needle), "{what}: {needle:?} in {text}");
        }
    };
    for form in PASSWORD_FORMS {
        hidden(form, &checkpointer::secret::redact(form));
        let builder = PostgresSaver::builder().url(*form);
        hidden(form, &format!("{builder:?}"));
        match builder.build() {
            Err(e) => hidden(form, &format!("{e} {e:?}")),
            Ok(saver) => {
                hidden(form, &format!("{saver:?}"));
                let e = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap_err();
                assert!(e.is_retryable(), "{form}: {e:?}");
                hidden(form, &format!("{e} {e:?}"));
            }
        }
    }
}

async fn b54_server_errors_keep_the_servers_message(b: Backend) {
    if b != Backend::Postgres {
        return; // n/a: no server (SQLite's errors carry SQLite's message)
    }
    let env = env_or_skip!(b);
    env.sql(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         RAISE EXCEPTION 'refused by policy' USING DETAIL = 'thread is frozen', HINT = 'ask the owner'; \
         END $$; CREATE TRIGGER refuse BEFORE INSERT ON checkpoint_writes FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    .await;
    let config = env.put(&CheckpointConfig::new("t"), ID1, &[]).await.unwrap();
    let e = env
        .s()
        .put_writes(&config, &[("w".into(), Value::from(1))], "task", "")
        .await
        .unwrap_err();
    let shown = e.to_string();
    for needle in ["P0001", "refused by policy", "thread is frozen", "ask the owner"] {
        assert!(shown.contains(needle), "{needle:?} not in {shown}");
    }
    assert!(!shown.contains("db error"), "{shown}");
}

async fn b55_silent_network_partition(b: Backend) {
    if b != Backend::Postgres {
        return; // n/a: nothing between the saver and its store
    }
    let env = env_or_skip!(b);
    let Raw::Postgres(db) = &env.raw else { unreachable!() };
    let (upstream, user) = postgres_support::upstream();
    let proxy = postgres_support::Proxy::start(upstream).await;
    let saver = PostgresSaver::builder()
        .url(format!("postgresql://{user}@127.0.0.1:{}/{db}", proxy.port))
        .call_timeout(Some(std::time::Duration::from_secs(2)))
        .build()
        .unwrap();
    let config = CheckpointConfig::new("t");
    assert!(saver.get_tuple(&config).await.unwrap().is_none());
    proxy.partition(true);
    let got = tokio::time::timeout(std::time::Duration::from_secs(30), saver.get_tuple(&config)).await;
    match got {
        Ok(Err(e)) => assert!(matches!(e, Error::Storage { .. }) && e.is_retryable(), "{e:?}"),
        other => panic!("{other:?}"),
    }
    proxy.partition(false);
    assert!(saver.get_tuple(&config).await.unwrap().is_none());
}

// ---------------------------------------------------------------------------
// Input limits, checked once for every backend (`checkpointer::limits`)

/// [`nested`], never freed: freeing a value 200 000 levels deep recurses in
/// `Drop` (the caller's value; the savers refuse it before copying it).
fn leaked_nested(levels: usize) -> &'static Value {
    Box::leak(Box::new(nested(levels)))
}

async fn b71_metadata_nested_beyond_limit(b: Backend) {
    let env = env_or_skip!(b);
    for levels in [checkpointer::limits::MAX_NESTING + 1, 400_000] {
        let mut cp = Checkpoint::new(0);
        cp.id = ID1.to_owned();
        let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
        meta.insert("deep", leaked_nested(levels).clone());
        let err = env
            .s()
            .put(&CheckpointConfig::new("t"), &cp, &meta, &ChannelVersions::new())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Serde { .. }), "{levels}: {err:?}");
        assert!(err.to_string().contains("deeper than the limit"), "{err}");
        assert!(env.s().get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_none());
    }
}

async fn b72_filter_nested_beyond_limit(b: Backend) {
    let env = env_or_skip!(b);
    env.put(&CheckpointConfig::new("t"), ID1, &[("x", Value::Int(1))])
        .await
        .unwrap();
    for levels in [checkpointer::limits::MAX_NESTING + 1, 200_000] {
        let options = ListOptions::default().filter("deep", leaked_nested(levels).clone());
        for config in [Some(CheckpointConfig::new("t")), None] {
            let got = env.s().list_vec(config, options.clone()).await;
            assert!(matches!(got, Err(Error::InvalidInput { .. })), "{levels}: {got:?}");
        }
        let got = env
            .s()
            .list_threads(ListThreadsOptions {
                filter: options.filter.clone(),
                ..ListThreadsOptions::default()
            })
            .await;
        assert!(matches!(got, Err(Error::InvalidInput { .. })), "{levels}: {got:?}");
    }
}

async fn b73_empty_checkpoint_id_at_put(b: Backend) {
    let env = env_or_skip!(b);
    let err = env
        .put(&CheckpointConfig::new("t"), "", &[("x", Value::Int(1))])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert!(env.s().get_tuple(&CheckpointConfig::new("t")).await.unwrap().is_none());
    let listed = env
        .s()
        .list_vec(Some(CheckpointConfig::all_namespaces("t")), ListOptions::default())
        .await
        .unwrap();
    assert!(listed.is_empty());
}

/// Ten times the size that took seconds before: 200 000 keys in a nested
/// metadata map and at the top level, filtered with equal maps in reverse
/// key order.
async fn b74_wide_metadata_and_equal_filter(b: Backend) {
    const KEYS: usize = 200_000;
    let env = env_or_skip!(b);
    let wide = |reverse: bool, changed: Option<usize>| {
        let mut entries: Vec<(Value, Value)> = (0..KEYS)
            .map(|i| {
                let v = if changed == Some(i) { -1 } else { i as i64 };
                (Value::from(format!("key-{i}")), Value::Int(v))
            })
            .collect();
        if reverse {
            entries.reverse();
        }
        Value::Map(entries.into())
    };
    let mut cp = Checkpoint::new(0);
    cp.id = ID1.to_owned();
    let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    meta.insert("wide", wide(false, None));
    for i in 0..KEYS {
        meta.insert(format!("top-{i}"), i as i64);
    }
    let config = CheckpointConfig::new("t");
    env.s().put(&config, &cp, &meta, &ChannelVersions::new()).await.unwrap();
    let count = |options: ListOptions| async { env.s().list_vec(Some(config.clone()), options).await.unwrap().len() };
    assert_eq!(count(ListOptions::default().filter("wide", wide(true, None))).await, 1);
    assert_eq!(
        count(ListOptions::default().filter("wide", wide(true, Some(7)))).await,
        0
    );
    let mut top = ListOptions::default();
    for i in (0..KEYS).rev() {
        top = top.filter(format!("top-{i}"), i as i64);
    }
    assert_eq!(count(top.clone()).await, 1);
    assert_eq!(count(top.filter("top-7", -1)).await, 0);
}

async fn b75_version_counters_beyond_64_bits(b: Backend) {
    let env = env_or_skip!(b);
    let head = |v: ChannelVersion| v.to_string().split_once('.').unwrap().0.to_owned();
    for (current, next) in [
        (
            ChannelVersion::from("00000000000009999999999999999999.0.5"),
            "00000000000010000000000000000000",
        ),
        (ChannelVersion::Int(i64::MAX), "00000000000009223372036854775808"),
    ] {
        assert_eq!(head(env.s().get_next_version(Some(&current)).unwrap()), next);
    }
    // A channel written at such a version reads back with it.
    let version = env
        .s()
        .get_next_version(Some(&ChannelVersion::from("00000000000009999999999999999999.0.5")))
        .unwrap();
    let mut cp = Checkpoint::new(0);
    cp.id = ID1.to_owned();
    cp.channel_values.insert("x".into(), Value::Int(1));
    cp.channel_versions.insert("x".into(), version.clone());
    let versions = ChannelVersions::from([("x".to_owned(), version.clone())]);
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let stored = env
        .s()
        .put(&CheckpointConfig::new("t"), &cp, &meta, &versions)
        .await
        .unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(got.checkpoint.channel_versions["x"], version);
    assert_eq!(value_of(&got, "x"), Value::Int(1));
}

async fn b59_hundred_thousand_writes_while_another_thread_reads(b: Backend) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = env_or_skip!(b);
    let other = env.put(&CheckpointConfig::new("other"), ID1, &[]).await.unwrap();
    let stored = env.put(&CheckpointConfig::new("t"), ID1, &[]).await.unwrap();
    let n = 100_000;
    let writes: Vec<(String, Value)> = (0..n).map(|i| (format!("ch{i}"), Value::Int(i))).collect();
    let done = Arc::new(AtomicBool::new(false));
    // An unrelated thread reads another thread's checkpoint meanwhile, on an
    // OS thread of its own.
    let reader = {
        let (saver, done) = (env.saver.clone(), done.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let mut during = 0usize;
            while !done.load(Ordering::SeqCst) {
                let got = rt.block_on(saver.get_tuple(&other)).unwrap();
                assert!(got.is_some());
                during += usize::from(!done.load(Ordering::SeqCst));
            }
            during
        })
    };
    env.s().put_writes(&stored, &writes, "task", "").await.unwrap();
    done.store(true, Ordering::SeqCst);
    let during = reader.join().unwrap();
    if b == Backend::Memory {
        // No store-wide lock is held while the write set is built.
        assert!(during >= 1, "no read completed during put_writes");
    }
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(got.pending_writes.len(), n as usize);
    for (i, w) in got.pending_writes.iter().enumerate() {
        assert_eq!(
            (w.channel.as_str(), &w.value),
            (format!("ch{i}").as_str(), &Value::Int(i as i64)),
            "in idx order"
        );
    }
    // The same writes again: the first values stay, nothing is added.
    let again: Vec<(String, Value)> = (0..n).map(|i| (format!("ch{i}"), Value::Int(-1))).collect();
    env.s().put_writes(&stored, &again, "task", "").await.unwrap();
    let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
    assert_eq!(got.pending_writes.len(), n as usize);
    assert!(got.pending_writes.iter().all(|w| w.value != Value::Int(-1)));
}

async fn b60_delete_for_runs_in_one_large_thread(b: Backend) {
    let env = env_or_skip!(b);
    let n = 3_000;
    let mut parent = CheckpointConfig::new("t");
    for i in 0..n {
        let mut cp = Checkpoint::new(0);
        cp.id = format!("1ef00000-0000-6000-8000-{i:012}");
        let mut meta = CheckpointMetadata::new(CheckpointSource::Loop, i);
        meta.insert("run_id", if i % 2 == 0 { "even" } else { "odd" });
        parent = env.s().put(&parent, &cp, &meta, &ChannelVersions::new()).await.unwrap();
    }
    three(&env, "bystander").await;
    let runs: Vec<String> = (0..10_000)
        .map(|i| format!("run-{i}"))
        .chain(["odd".to_owned()])
        .collect();
    env.s().delete_for_runs(&runs).await.unwrap();
    let left = env
        .s()
        .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(left.len(), (n / 2) as usize);
    assert!(left.iter().all(|t| t.metadata.run_id() == Some("even")));
    let ids: Vec<&str> = left.iter().map(|t| t.checkpoint.id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(ids, sorted, "newest first");
    let bystander = env
        .s()
        .list_vec(Some(CheckpointConfig::new("bystander")), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(bystander.len(), 3);
}

/// A chain of `n` checkpoints in thread `t` (one write every 100): large for
/// the memory backend, smaller for the servers' (their puts cost a round
/// trip or a commit). Returns the configs in order.
async fn large_thread(env: &Env, t: &str, n: usize) -> Vec<CheckpointConfig> {
    let mut parent = CheckpointConfig::new(t);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut cp = Checkpoint::new(0);
        cp.id = format!("1ef00000-0000-6000-8000-{i:012}");
        cp.channel_values.insert("step".to_owned(), Value::Int(i as i64));
        cp.channel_versions
            .insert("step".to_owned(), ChannelVersion::Int(i as i64 + 1));
        let versions: ChannelVersions = [("step".to_owned(), ChannelVersion::Int(i as i64 + 1))]
            .into_iter()
            .collect();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, i as i64);
        parent = env.s().put(&parent, &cp, &meta, &versions).await.unwrap();
        if i % 100 == 0 {
            env.s()
                .put_writes(&parent, &[("w".to_owned(), Value::Int(i as i64))], "task", "")
                .await
                .unwrap();
        }
        out.push(parent.clone());
    }
    out
}

/// Runs `op` while another OS thread reads `other`; returns how many reads
/// completed meanwhile.
async fn reads_during<F: std::future::Future<Output = ()>>(env: &Env, other: &CheckpointConfig, op: F) -> usize {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (saver, done, other) = (env.saver.clone(), done.clone(), other.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let mut during = 0usize;
            while !done.load(Ordering::SeqCst) {
                let got = rt.block_on(saver.get_tuple(&other)).unwrap();
                assert!(got.is_some());
                during += usize::from(!done.load(Ordering::SeqCst));
            }
            during
        })
    };
    op.await;
    done.store(true, Ordering::SeqCst);
    reader.join().unwrap()
}

fn large_size(b: Backend) -> usize {
    if b == Backend::Memory {
        20_000
    } else {
        300
    }
}

async fn b61_copy_thread_of_a_large_thread_while_another_thread_reads(b: Backend) {
    let env = env_or_skip!(b);
    let n = large_size(b);
    let other = env.put(&CheckpointConfig::new("other"), ID1, &[]).await.unwrap();
    let src = large_thread(&env, "src", n).await;
    let during = reads_during(&env, &other, async {
        env.s().copy_thread("src", "dst").await.unwrap();
    })
    .await;
    if b == Backend::Memory {
        // The copy is built outside the store lock and published in O(1).
        assert!(during >= 1, "no read completed during copy_thread");
    }
    let copied = env
        .s()
        .list_vec(Some(CheckpointConfig::new("dst")), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(copied.len(), n);
    for (i, cfg) in [0, n / 2, n - 1].into_iter().map(|i| (i, &src[i])) {
        let a = env.s().get_tuple(cfg).await.unwrap().unwrap();
        let b = env
            .s()
            .get_tuple(&CheckpointConfig {
                thread_id: "dst".to_owned(),
                ..cfg.clone()
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(a.checkpoint, b.checkpoint, "checkpoint {i}");
        assert_eq!(a.pending_writes, b.pending_writes, "writes of {i}");
    }
}

async fn b62_prune_of_a_large_thread_while_another_thread_reads(b: Backend) {
    let env = env_or_skip!(b);
    let n = large_size(b);
    let other = env.put(&CheckpointConfig::new("other"), ID1, &[]).await.unwrap();
    let configs = large_thread(&env, "t", n).await;
    let head = configs[n - 1].clone();
    let during = reads_during(&env, &other, async {
        env.s()
            .prune(&["t".to_owned()], PruneStrategy::KeepLatest)
            .await
            .unwrap();
    })
    .await;
    if b == Backend::Memory {
        // The victims are removed a slice per lock hold.
        assert!(during >= 1, "no read completed during prune");
    }
    let left = env
        .s()
        .list_vec(Some(CheckpointConfig::new("t")), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].config, head);
    assert_eq!(value_of(&left[0], "step"), Value::Int(n as i64 - 1));
    assert!(env.s().get_tuple(&configs[0]).await.unwrap().is_none());
    assert!(env.s().get_tuple(&other).await.unwrap().is_some());
}

// ---------------------------------------------------------------------------
// Deep values through the serde entry points the savers use

async fn b79_value_200000_deep(b: Backend) {
    let env = env_or_skip!(b);
    let lists = (0..200_000).fold(Value::Nil, |v, _| Value::Array(vec![v].into()));
    let maps = (0..200_000).fold(Value::Nil, |v, _| Value::map([("k", v)]));
    let keys = (0..200_000).fold(Value::Nil, |v, _| Value::Map(vec![(v, Value::Nil)].into()));
    for (i, deep) in [lists, maps, keys].into_iter().enumerate() {
        let thread = format!("t{i}");
        let err = env
            .put(&CheckpointConfig::new(thread.as_str()), ID1, &[("deep", deep.clone())])
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Serde { .. }), "{err:?}");
        assert!(
            env.s()
                .get_tuple(&CheckpointConfig::new(thread.as_str()))
                .await
                .unwrap()
                .is_none(),
            "nothing stored"
        );
        let stored = env
            .put(&CheckpointConfig::new(thread.as_str()), ID1, &[])
            .await
            .unwrap();
        let err = env
            .s()
            .put_writes(&stored, &[("w".to_owned(), deep.clone())], "task", "")
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Serde { .. }), "{err:?}");
        let got = env.s().get_tuple(&stored).await.unwrap().unwrap();
        assert!(got.pending_writes.is_empty());
        // Dropping a value 200 000 levels deep recurses once per level (see
        // `Value`'s docs): the caller's value is leaked on purpose.
        std::mem::forget(deep);
    }
}

/// 100 000 nested extension values (each `module.name(arg)` is two levels),
/// and pending sends 200 000 levels deep: refused before any copy is made.
async fn b80_deep_extension_chains_and_pending_sends(b: Backend) {
    use checkpointer::serde::{Ext, ExtKind};
    let env = env_or_skip!(b);
    let chain = (0..100_000).fold(Value::Nil, |v, _| {
        Value::Ext(Box::new(
            Ext::object(ExtKind::ConstructorSingleArg, "m", "n", v).unwrap(),
        ))
    });
    let mut cp = Checkpoint::new(0);
    cp.id = ID1.to_owned();
    cp.channel_values.insert("chain".into(), chain);
    cp.channel_versions.insert("chain".into(), ChannelVersion::Int(1));
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let config = CheckpointConfig::new("t");
    let err = env
        .s()
        .put(&config, &cp, &meta, &cp.channel_versions)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Serde { .. }), "{err:?}");
    let mut sends = Checkpoint::new(0);
    sends.id = ID1.to_owned();
    sends.pending_sends = Some(vec![leaked_nested(200_000).clone()]);
    let err = env
        .s()
        .put(&config, &sends, &meta, &ChannelVersions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Serde { .. }), "{err:?}");
    assert!(env.s().get_tuple(&config).await.unwrap().is_none(), "nothing stored");
    // Freeing an extension chain this long recurses in `Drop` (the caller's
    // value): leak it.
    std::mem::forget(cp);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    let mut out = vec![harness::test(
        "bad_input_catalogue::every_row_is_in_the_doc",
        &[],
        every_row_is_in_the_doc,
    )];
    out.extend(catalogue_tests());
    out
}
