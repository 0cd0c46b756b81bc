//! The stored-bytes rows of the bad-input catalogue of `docs/reliability.md`
//! (B31–B43, B46–B50, B52): bytes at rest that do not decode, or decode to
//! data naming Python classes, and ciphertext that does not decrypt, read
//! back through every backend: `InMemorySaver`, `SqliteSaver` (a fresh
//! file), `PostgresSaver` (a fresh database) and `RedisSaver` (a fresh key
//! prefix); the last two are ignored without a server outside CI, a failure
//! in CI.
//!
//! Stored bytes are planted through the saver's own serializer
//! ([`Planting`]): a write (or a channel value kept apart from its
//! checkpoint) whose value is a plant marker is stored as the chosen
//! (tag, bytes), exactly as if the row had been altered at rest, and is read
//! back through the real reading path.
//!
//! The catalogue's other rows live where they apply: the rows about input
//! through the public API are conformance checks every backend runs
//! (`checkpointer::conformance::{identifiers, stored_values, options,
//! large_threads, limits}`); rows about one backend's tables or server are in
//! that backend's tests (`tests/sqlite/bad_input.rs`,
//! `tests/postgres/bad_input.rs`, `tests/memory/large_threads.rs`).

use crate::catalogue_support::{self, ID1};
use crate::harness;
use crate::postgres_support;
use crate::redis_support;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use checkpointer::postgres::PostgresSaver;
use checkpointer::redis::RedisSaver;
use checkpointer::serde::{msgpack, EncryptedSerializer, Ext, JsonPlusSerializer, Serializer, TypedBytes};
use checkpointer::sqlite::SqliteSaver;
use checkpointer::{
    CheckpointConfig, CheckpointSaver, CheckpointSaverExt, CheckpointTuple, EncryptionError, Error, InMemorySaver,
    ListOptions, Value,
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
    Redis,
}

/// Removes a Redis saver's keys when the row is done.
struct RedisKeys(String);

impl Drop for RedisKeys {
    fn drop(&mut self) {
        let prefix = self.0.clone();
        redis_support::block_on_thread(async move { redis_support::cleanup(&prefix).await });
    }
}

/// What keeps a row's store alive, dropped (and removed) after the row.
#[allow(dead_code)] // held for what their `Drop` removes
enum Guard {
    None,
    Dir(tempfile::TempDir),
    Database(postgres_support::TestDatabase),
    Keys(RedisKeys),
}

struct Env {
    backend: Backend,
    saver: Arc<dyn CheckpointSaver>,
    plants: Arc<Planting>,
    _guard: Guard,
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
        let (saver, guard): (Arc<dyn CheckpointSaver>, Guard) = match backend {
            Backend::Memory => (Arc::new(InMemorySaver::with_serializer(serde)), Guard::None),
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("catalogue.sqlite");
                let saver = SqliteSaver::builder(&path).serializer(serde).open().await.unwrap();
                (Arc::new(saver), Guard::Dir(dir))
            }
            Backend::Postgres => {
                let db = postgres_support::fresh_database().await?;
                let saver = PostgresSaver::builder()
                    .url(postgres_support::url_of(&db.0))
                    .max_connections(4)
                    .serializer(serde)
                    .open()
                    .await
                    .unwrap();
                (Arc::new(saver), Guard::Database(db))
            }
            Backend::Redis => {
                let prefix = redis_support::fresh_prefix();
                let saver = RedisSaver::builder()
                    .url(redis_support::url())
                    .key_prefix(prefix.clone())
                    .serializer(serde)
                    .open()
                    .await
                    .unwrap();
                (Arc::new(saver), Guard::Keys(RedisKeys(prefix)))
            }
        };
        Some(Env {
            backend,
            saver,
            plants,
            _guard: guard,
        })
    }

    fn s(&self) -> &dyn CheckpointSaver {
        &*self.saver
    }

    /// Puts a checkpoint with `values` (all new).
    async fn put(
        &self,
        config: &CheckpointConfig,
        id: &str,
        values: &[(&str, Value)],
    ) -> checkpointer::Result<CheckpointConfig> {
        catalogue_support::put_values(self.s(), config, id, values).await
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
}

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

/// One test per row and backend: `memory::b31_…`, `sqlite::b31_…`,
/// `postgres::b31_…`, `redis::b31_…` (the last two need their servers).
macro_rules! catalogue {
    ($($row:ident),* $(,)?) => {
        fn catalogue_tests() -> Vec<harness::Trial> {
            let backends: [(&str, Backend, &[&'static harness::Need]); 4] = [
                ("memory", Backend::Memory, &[]),
                ("sqlite", Backend::Sqlite, &[]),
                ("postgres", Backend::Postgres, &[&crate::POSTGRES]),
                ("redis", Backend::Redis, &[&crate::REDIS]),
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
    b46_ciphertext_wrong_key,
    b47_ciphertext_flipped_bit,
    b48_plaintext_row_refused_unless_allowed,
    b49_truncated_ciphertext,
    b50_unknown_cipher,
    b52_channel_value_that_does_not_decrypt,
);

/// Every row of this file, and every row of the catalogue's table, is where
/// the doc says: each of B01–B80 named in `docs/reliability.md` names the
/// place of its tests.
fn every_row_is_in_the_doc() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reliability.md")).unwrap();
    assert!(ROWS.len() >= 19);
    for row in ROWS {
        let id = &row[..3];
        assert!(
            doc.contains(&format!("| {} |", id.to_uppercase())),
            "{row} is not in docs/reliability.md"
        );
    }
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

/// A channel value's ciphertext that does not decrypt, where a backend
/// keeps channel values apart from their checkpoint (SQLite keeps them
/// inside the checkpoint: `tests/sqlite/bad_input.rs`).
async fn b52_channel_value_that_does_not_decrypt(b: Backend) {
    if b == Backend::Sqlite {
        return; // values are inside the checkpoint column: tests/sqlite
    }
    let env = env_or_skip!(b, Arc::new(encrypted(KEY)));
    // stored as the channel's (encrypted) value
    let value = env.plants.plant("msgpack+aes", vec![0u8; 40]);
    let config = env
        .put(&CheckpointConfig::new("t"), ID1, &[("x", value)])
        .await
        .unwrap();
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
