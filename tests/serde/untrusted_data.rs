//! Untrusted data never executes: a stored payload that
//! names any Python class, function or method — the extension values Python
//! revives by importing a module and calling into it — decodes to data whose
//! module, name and arguments can be read, and re-encodes to the same bytes.
//! Nothing is imported, looked up or called: the crate has no code path that
//! could (checked below by scanning its sources). The saver-level rows are
//! B40–B42 of the bad-input catalogue (`tests/api/bad_input_catalogue.rs`).

use checkpointer::serde::json::from_json;
use checkpointer::serde::{msgpack, Ext, ExtKind, JsonPlusSerializer, Serializer};
use checkpointer::Value;
use proptest::prelude::*;

fn arg_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<i64>().prop_map(Value::Int),
        ".{0,12}".prop_map(Value::from),
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(|b| Value::Bin(b.into())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(|v| Value::Array(v.into())),
            proptest::collection::vec((".{0,6}", inner), 0..4)
                .prop_map(|kv| Value::Map(kv.into_iter().map(|(k, v)| (Value::from(k), v)).collect())),
        ]
    })
}

fn module_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("os".to_owned()),
        Just("subprocess".to_owned()),
        Just("builtins".to_owned()),
        Just("posix".to_owned()),
        Just("importlib".to_owned()),
        Just("pickle".to_owned()),
        Just("ctypes".to_owned()),
        "[a-z_][a-z0-9_.]{0,20}",
        ".{0,20}",
    ]
}

fn name_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("system".to_owned()),
        Just("Popen".to_owned()),
        Just("eval".to_owned()),
        Just("exec".to_owned()),
        Just("__import__".to_owned()),
        Just("loads".to_owned()),
        "[A-Za-z_][A-Za-z0-9_]{0,20}",
        ".{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Codes 0–5 naming any module and class: `loads_typed` gives the same
    /// extension value back, with its parts readable, and the same bytes.
    #[test]
    fn any_python_class_decodes_to_data(
        code in 0i8..=5,
        module in module_strategy(),
        name in name_strategy(),
        arg in arg_strategy(),
        method in proptest::option::of(name_strategy()),
    ) {
        let kind = ExtKind::from_code(code);
        let ext = match &method {
            Some(m) => Ext::object_with_method(kind, module.clone(), name.clone(), arg.clone(), m.clone()).unwrap(),
            None => Ext::object(kind, module.clone(), name.clone(), arg.clone()).unwrap(),
        };
        let bytes = msgpack::encode(&Value::Ext(Box::new(ext.clone()))).unwrap();
        let read = JsonPlusSerializer.loads_typed("msgpack", &bytes).unwrap();
        prop_assert_eq!(&read, &Value::Ext(Box::new(ext)));
        let read_ext = read.as_ext().unwrap();
        prop_assert_eq!(read_ext.module(), Some(module.as_str()));
        prop_assert_eq!(read_ext.name(), Some(name.as_str()));
        prop_assert_eq!(read_ext.arg(), Some(&arg));
        prop_assert_eq!(read_ext.method(), method.as_deref());
        prop_assert_eq!(msgpack::encode(&read).unwrap(), bytes);
    }

    /// Any extension code and any payload bytes: data (decoded or raw),
    /// never an error other than a typed one, never anything run.
    #[test]
    fn any_extension_bytes_are_data(code in any::<i8>(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut bytes = vec![0xc7, payload.len() as u8, code as u8];
        bytes.extend_from_slice(&payload);
        match msgpack::decode(&bytes) {
            Ok(Value::Ext(ext)) => prop_assert_eq!(ext.code(), code),
            Ok(other) => prop_assert!(false, "not an extension: {:?}", other),
            Err(checkpointer::Error::Serde { .. }) => {}
            Err(other) => prop_assert!(false, "untyped error: {:?}", other),
        }
    }

    /// LangChain's legacy JSON envelopes naming any class (`lc` 1 and 2,
    /// `type: constructor`) read as plain maps.
    #[test]
    fn any_legacy_json_constructor_is_a_plain_map(
        lc in 1i64..=2,
        path in proptest::collection::vec("[a-z_]{1,10}", 1..5),
        arg in ".{0,20}",
    ) {
        let json = serde_json::json!({
            "lc": lc,
            "type": "constructor",
            "id": path,
            "args": [arg],
            "kwargs": {"command": "rm -rf /"},
        });
        let read = JsonPlusSerializer.loads_typed("json", json.to_string().as_bytes()).unwrap();
        prop_assert_eq!(&read, &from_json(json.to_string().as_bytes()).unwrap());
        let Value::Map(entries) = &read else { return Err(TestCaseError::fail("not a map")) };
        prop_assert_eq!(entries.len(), 5);
        prop_assert_eq!(read.get("type"), Some(&Value::from("constructor")));
    }
}

/// The decoding paths cannot execute anything: no process spawning, dynamic
/// loading or interpreter embedding anywhere in the crate's sources.
#[test]
fn the_crate_has_no_way_to_execute_stored_data() {
    let forbidden = [
        "process::Command",
        "std::process::Command",
        "libloading",
        "dlopen",
        "pyo3",
        "cpython",
        "execve",
    ];
    let mut files = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../src"))];
    let mut scanned = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for word in forbidden {
            assert!(!text.contains(word), "{} mentions {word}", path.display());
        }
        scanned += 1;
    }
    assert!(scanned > 20, "scanned {scanned} files");
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml")).unwrap();
    for dep in ["pyo3", "libloading", "cpython"] {
        assert!(!manifest.contains(dep), "Cargo.toml depends on {dep}");
    }
}
