//! Encryption at rest against the real Python class:
//! LangGraph's `EncryptedSerializer.from_pycryptodome_aes` decrypts what
//! [`EncryptedSerializer`] wrote and the other way round, for every AES key
//! size and with the key from `LANGGRAPH_AES_KEY`.
//!
//! Needs the peer venv with pycryptodome:
//! `CHECKPOINTER_PYTHON=$(scripts/python-venv.sh | tail -n 1)`. Without it
//! the tests are reported ignored (with the reason); in CI (`CI=true`) they fail.

use crate::harness;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::Bytes;
use checkpointer::serde::{msgpack, AesEax, EncryptedSerializer, JsonPlusSerializer, Serializer};
use checkpointer::Value;

const KEYS: [&[u8]; 3] = [
    b"0123456789abcdef",
    b"0123456789abcdef01234567",
    b"0123456789abcdef0123456789abcdef",
];

/// A missing or broken peer is a failure: the harness (`main.rs`) ignores
/// these tests, outside CI, when `CHECKPOINTER_PYTHON` is not set.
fn skip_or_fail(reason: &str) -> Option<PathBuf> {
    panic!(
        "{reason}: the Python encryption checks cannot run (CHECKPOINTER_PYTHON=$(scripts/python-venv.sh | tail -n 1))"
    );
}

/// The peer Python with pycryptodome; fails the test without one.
fn require_python() -> Option<PathBuf> {
    let python = match std::env::var("CHECKPOINTER_PYTHON") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => return skip_or_fail("CHECKPOINTER_PYTHON is not set"),
    };
    let probe = Command::new(&python)
        .args(["-c", "import Crypto.Cipher.AES, langgraph.checkpoint.serde.encrypted"])
        .output();
    match probe {
        Ok(out) if out.status.success() => Some(python),
        Ok(out) => skip_or_fail(&format!(
            "{} lacks pycryptodome or langgraph ({})",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(err) => skip_or_fail(&format!("cannot run {}: {err}", python.display())),
    }
}

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/encrypted_python_peer.py")
}

/// Runs the peer script; `key = None` gives Python the key through
/// `LANGGRAPH_AES_KEY` instead of an argument.
fn run_peer(
    python: &Path,
    command: &str,
    key: Option<&[u8]>,
    env_key: Option<&[u8]>,
    stdin: &str,
) -> Vec<serde_json::Value> {
    let key_arg = key.map_or_else(|| "env".to_owned(), hex::encode);
    let mut cmd = Command::new(python);
    cmd.arg(peer_script()).args([command, &key_arg]);
    cmd.env_remove("LANGGRAPH_AES_KEY");
    if let Some(k) = env_key {
        cmd.env("LANGGRAPH_AES_KEY", std::str::from_utf8(k).unwrap());
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "peer {command} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn field<'a>(item: &'a serde_json::Value, name: &str) -> &'a str {
    item[name]
        .as_str()
        .unwrap_or_else(|| panic!("{name} missing in {item}"))
}

/// Values the crate writes: every top-level tag (`null`, `bytes`, `msgpack`),
/// nested binaries, an extension value (Python datetime), a 70 kB string.
fn samples() -> Vec<(&'static str, Value)> {
    let datetime = msgpack::decode(
        &hex::decode(
            "c7430394a86461746574696d65a86461746574696d65d920323032342d30312d30325430333a30343a30352e3030303637382b30303a3030ad66726f6d69736f666f726d6174",
        )
        .unwrap(),
    )
    .unwrap();
    vec![
        ("nil", Value::Nil),
        ("bytes", Value::Bin(Bytes::from_static(b"\x00raw\xff"))),
        ("str", Value::from("plaintext-password")),
        ("empty_str", Value::from("")),
        ("int", Value::Int(-40000)),
        ("float", Value::Float(0.1)),
        (
            "map",
            Value::map([
                ("a", Value::Int(1)),
                (
                    "b",
                    Value::Array((vec![Value::Bool(true), Value::Nil, Value::from("é")]).into()),
                ),
            ]),
        ),
        (
            "nested_bytes",
            Value::map([("b", Value::Bin(Bytes::from(vec![b'x'; 300])))]),
        ),
        ("datetime", datetime),
        ("big", Value::from("x".repeat(70_000))),
    ]
}

fn check_python_decrypts(python: &Path, crate_serde: &EncryptedSerializer, key: Option<&[u8]>, env_key: Option<&[u8]>) {
    let samples = samples();
    let mut input = String::new();
    for (name, value) in &samples {
        let typed = crate_serde.dumps_typed(value).unwrap();
        assert!(typed.tag.ends_with("+aes"), "{name}: {}", typed.tag);
        input.push_str(
            &serde_json::json!({"name": name, "tag": typed.tag, "data": hex::encode(&typed.data)}).to_string(),
        );
        input.push('\n');
    }
    let out = run_peer(python, "decrypt", key, env_key, &input);
    assert_eq!(out.len(), samples.len());
    for ((name, value), item) in samples.iter().zip(&out) {
        assert_eq!(field(item, "name"), *name);
        let plain = JsonPlusSerializer.dumps_typed(value).unwrap();
        assert_eq!(field(item, "plain_tag"), plain.tag, "{name}");
        assert_eq!(
            field(item, "plain"),
            hex::encode(&plain.data),
            "{name}: Python read another value"
        );
    }
}

fn check_crate_decrypts(python: &Path, crate_serde: &EncryptedSerializer, key: Option<&[u8]>, env_key: Option<&[u8]>) {
    let out = run_peer(python, "encrypt", key, env_key, "");
    assert!(out.len() >= 10, "{out:?}");
    for item in &out {
        let name = field(item, "name");
        let tag = field(item, "tag");
        let data = hex::decode(field(item, "data")).unwrap();
        assert!(tag.ends_with("+aes"), "{name}: {tag}");
        let value = crate_serde
            .loads_typed(tag, &data)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // The decrypted value re-encodes to Python's plaintext bytes.
        let plain = JsonPlusSerializer.dumps_typed(&value).unwrap();
        assert_eq!(plain.tag, field(item, "plain_tag"), "{name}");
        assert_eq!(hex::encode(&plain.data), field(item, "plain"), "{name}");
        // Python drew a fresh nonce; the payload is nonce, tag, ciphertext.
        assert_eq!(data.len(), 32 + plain.data.len(), "{name}");
    }
}

fn python_decrypts_what_the_crate_wrote_for_every_key_size() {
    let Some(python) = require_python() else { return };
    for key in KEYS {
        let serde = EncryptedSerializer::from_key(key).unwrap();
        check_python_decrypts(&python, &serde, Some(key), None);
    }
}

fn crate_decrypts_what_python_wrote_for_every_key_size() {
    let Some(python) = require_python() else { return };
    for key in KEYS {
        let serde = EncryptedSerializer::from_key(key).unwrap();
        check_crate_decrypts(&python, &serde, Some(key), None);
    }
}

/// Python reads its key from `LANGGRAPH_AES_KEY`: the crate, given the same
/// string's bytes, agrees in both directions.
fn key_from_python_environment_variable_matches() {
    let Some(python) = require_python() else { return };
    let key = KEYS[2];
    let serde = EncryptedSerializer::new(JsonPlusSerializer, AesEax::new(key).unwrap());
    check_python_decrypts(&python, &serde, None, Some(key));
    check_crate_decrypts(&python, &serde, None, Some(key));
}

/// A payload Python wrote under another key is refused by authentication,
/// not decoded into garbage.
fn python_payload_under_another_key_is_refused() {
    let Some(python) = require_python() else { return };
    let out = run_peer(&python, "encrypt", Some(KEYS[2]), None, "");
    let wrong = EncryptedSerializer::from_key(b"fedcba9876543210fedcba9876543210").unwrap();
    for item in &out {
        let data = hex::decode(field(item, "data")).unwrap();
        let err = wrong.loads_typed(field(item, "tag"), &data).unwrap_err();
        assert!(
            matches!(
                err,
                checkpointer::Error::Encryption(checkpointer::EncryptionError::AuthenticationFailed)
            ),
            "{err:?}"
        );
    }
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "encryption::python_decrypts_what_the_crate_wrote_for_every_key_size",
            &[&crate::PYTHON],
            python_decrypts_what_the_crate_wrote_for_every_key_size,
        ),
        harness::test(
            "encryption::crate_decrypts_what_python_wrote_for_every_key_size",
            &[&crate::PYTHON],
            crate_decrypts_what_python_wrote_for_every_key_size,
        ),
        harness::test(
            "encryption::key_from_python_environment_variable_matches",
            &[&crate::PYTHON],
            key_from_python_environment_variable_matches,
        ),
        harness::test(
            "encryption::python_payload_under_another_key_is_refused",
            &[&crate::PYTHON],
            python_payload_under_another_key_is_refused,
        ),
    ]
}
