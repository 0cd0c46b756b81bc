//! Hostile and malformed input: every decoder answers with `Error::Serde` and a
//! reason, never a panic, never an allocation the input cannot justify; and
//! random values survive encode → decode unchanged.

use bytes::Bytes;
use checkpointer::serde::json::{from_json, to_python_json};
use checkpointer::serde::msgpack::{self, MAX_DEPTH};
use checkpointer::serde::{Ext, ExtKind, ExtPayload, JsonPlusSerializer, NumpyOrder, Serializer, Value};
use checkpointer::Error;
use proptest::collection::vec;
use proptest::prelude::*;

const GOLDEN: &str = "87a17604a27473d920323032342d30352d30345430363a33323a34322e3233353434342b30303a3030a26964d92431656630396530312d633335342d366530382d383030312d386131353033663962383735ae6368616e6e656c5f76616c75657383a46e616d65a46d656f77a56974656d739201a161a4666c6167c0b06368616e6e656c5f76657273696f6e7384a46e616d65d92430303030303030303030303030303030303030303030303030303030303030312e302e35a56974656d73d92530303030303030303030303030303030303030303030303030303030303030322e302e3235a4666c6167d92530303030303030303030303030303030303030303030303030303030303030322e302e3235a4676f6e65d92530303030303030303030303030303030303030303030303030303030303030322e302e3235ad76657273696f6e735f7365656e82a95f5f696e7075745f5f80a46e6f646581a46e616d65d92430303030303030303030303030303030303030303030303030303030303030312e302e35b0757064617465645f6368616e6e656c7391a56974656d73";
const HUMAN: &str = "c7880594bd6c616e67636861696e5f636f72652e6d657373616765732e68756d616eac48756d616e4d65737361676586a7636f6e74656e74a26869b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65c0a26964a131b36d6f64656c5f76616c69646174655f6a736f6e";
const TIMEZONE: &str =
    "c7310193a86461746574696d65a874696d657a6f6e6591c71a0193a86461746574696d65a974696d6564656c74619300cd1c2000";
const NUMPY_F: &str = "c72c0694a33c6638920202a146c420000000000000f03f000000000000084000000000000000400000000000001040";
const SET: &str = "d80093a86275696c74696e73a37365749101";

fn unhex(h: &str) -> Vec<u8> {
    hex::decode(h).unwrap()
}

/// `decode` fails with `Error::Serde` and a non-empty reason; returns it.
fn serde_error(bytes: &[u8]) -> String {
    match msgpack::decode(bytes) {
        Err(Error::Serde { reason }) => {
            assert!(!reason.is_empty());
            reason
        }
        other => panic!("{} decoded to {other:?}", hex::encode(bytes)),
    }
}

#[test]
fn every_truncation_is_an_error() {
    let vectors = [
        GOLDEN.to_owned(),
        HUMAN.to_owned(),
        TIMEZONE.to_owned(),
        NUMPY_F.to_owned(),
        SET.to_owned(),
        "c70307920102".to_owned(),
        "cb3fb999999999999a".to_owned(),
        "cf8000000000000000".to_owned(),
        "81cb3ff8000000000000a161".to_owned(),
        format!("d928{}", "78".repeat(40)),
        format!("dc0010{}", (0..16).map(|i| format!("{i:02x}")).collect::<String>()),
    ];
    for h in vectors {
        let bytes = unhex(&h);
        assert!(msgpack::decode(&bytes).is_ok(), "{h}");
        for n in 0..bytes.len() {
            serde_error(&bytes[..n]);
        }
    }
}

#[test]
fn declared_lengths_beyond_the_input_are_refused() {
    let cases = [
        "d9ff",
        "daffff",
        "dbffffffff",
        "dbffffffff61",
        "c4ff",
        "c5ffff",
        "c6ffffffff",
        "dcffff",
        "ddffffffff",
        "ddffffffffc0c0c0c0",
        "deffff",
        "dfffffffff",
        "dfffffffffc0c0c0c0",
        "c7ff00",
        "c8ffff00",
        "c9ffffffff00",
        "c9ffffffff07c0",
        "91ddffffffff",
    ];
    for h in cases {
        let started = std::time::Instant::now();
        serde_error(&unhex(h));
        assert!(started.elapsed().as_secs() < 2, "{h} took {:?}", started.elapsed());
    }
    // inside a LangGraph extension a bad payload is kept as bytes (so the
    // value survives), still without allocating for the claimed array
    let bytes = unhex("c7060791ddffffffff");
    let v = msgpack::decode(&bytes).unwrap();
    assert!(matches!(&v, Value::Ext(e) if matches!(e.payload(), ExtPayload::Raw(_))));
    assert_eq!(msgpack::encode(&v).unwrap(), bytes);
}

/// `levels` nested `ext 7` values around `nil`, each framed as ext32.
fn nested_snapshots(levels: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(6 * levels + 1);
    for i in 0..levels {
        let payload_len = 1 + 6 * (levels - 1 - i);
        bytes.push(0xc9);
        bytes.extend_from_slice(&(payload_len as u32).to_be_bytes());
        bytes.push(7);
    }
    bytes.push(0xc0);
    bytes
}

/// `levels` nested ext 0 objects `["m", "n", <inner>]` around `nil`.
fn nested_objects(levels: usize) -> Vec<u8> {
    const LEVEL: usize = 6 + 5;
    let mut bytes = Vec::with_capacity(LEVEL * levels + 1);
    for i in 0..levels {
        let payload_len = 5 + 1 + LEVEL * (levels - 1 - i);
        bytes.push(0xc9);
        bytes.extend_from_slice(&(payload_len as u32).to_be_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&[0x93, 0xa1, b'm', 0xa1, b'n']);
    }
    bytes.push(0xc0);
    bytes
}

/// Runs `f` on a thread with a 1 MiB stack, half of what test threads, tokio
/// workers and blocking-pool threads get: decoding at the depth limit must fit
/// there with room to spare, even in an unoptimised build.
fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn nesting_is_bounded() {
    on_big_stack(|| {
        let arrays = |n: usize| [vec![0x91; n], vec![0xc0]].concat();
        let maps = |n: usize| [[0x81, 0xc0].repeat(n), vec![0xc0]].concat();
        assert!(msgpack::decode(&arrays(MAX_DEPTH)).is_ok());
        assert!(msgpack::decode(&maps(MAX_DEPTH)).is_ok());
        assert!(msgpack::decode(&nested_snapshots(MAX_DEPTH)).is_ok());
        for bytes in [
            arrays(MAX_DEPTH + 1),
            maps(MAX_DEPTH + 1),
            nested_snapshots(MAX_DEPTH + 1),
        ] {
            let reason = serde_error(&bytes);
            assert!(reason.contains("deeper"), "{reason}");
        }
        // ext 0 objects nested through their arguments: two levels each
        let objects = msgpack::decode(&nested_objects(MAX_DEPTH / 2)).unwrap();
        assert!(matches!(&objects, Value::Ext(e) if e.code() == 0));
        assert!(serde_error(&nested_objects(MAX_DEPTH / 2 + 1)).contains("deeper"));
    });
}

#[test]
fn nesting_far_beyond_the_limit_is_refused_early() {
    on_big_stack(|| {
        serde_error(&[vec![0x91; 1_000_000], vec![0xc0]].concat());
        serde_error(&vec![0x91; 10_000_000]);
        serde_error(&[0x81, 0xc0].repeat(1_000_000));
        // the limit holds inside extension payloads too
        serde_error(&nested_snapshots(100_000));
        serde_error(&nested_objects(100_000));
    });
}

#[test]
fn trailing_bytes_are_refused() {
    for h in [
        "c0c0",
        "910100",
        "a161ff",
        "d407c000",
        &format!("{GOLDEN}00"),
        &format!("{HUMAN}c0"),
    ] {
        assert!(serde_error(&unhex(h)).contains("trailing"), "{h}");
    }
}

#[test]
fn invalid_utf8_is_refused() {
    for h in [
        "a2c328", "a1ff", "a1c0", "a3eda080", "81a1ff01", "8101a1ff", "91a1ff", "d9028080",
    ] {
        let reason = serde_error(&unhex(h));
        assert!(reason.contains("UTF-8"), "{h}: {reason}");
    }
    // inside a LangGraph extension the payload is kept verbatim instead, so the
    // value still round-trips
    let bytes = unhex("c7050093a1ffc0c0");
    let v = msgpack::decode(&bytes).unwrap();
    assert!(matches!(&v, Value::Ext(e) if matches!(e.payload(), ExtPayload::Raw(_))));
    assert_eq!(msgpack::encode(&v).unwrap(), bytes);
}

#[test]
fn reserved_byte_is_refused() {
    for h in ["c1", "91c1", "81c1c0", "81c0c1", "92c0c1"] {
        assert!(serde_error(&unhex(h)).contains("c1"), "{h}");
    }
}

#[test]
fn unknown_tags_are_refused() {
    let serde = JsonPlusSerializer;
    for tag in ["pickle", "msgpack+aes", "json+aes", "", "Msgpack", "ext"] {
        match serde.loads_typed(tag, b"\xc0") {
            Err(Error::Serde { reason }) => assert!(reason.contains("unknown serialization type"), "{reason}"),
            other => panic!("{tag:?}: {other:?}"),
        }
    }
    // a known tag with bad data is an error too
    assert!(matches!(
        serde.loads_typed("msgpack", b"\xc1"),
        Err(Error::Serde { .. })
    ));
    assert!(matches!(serde.loads_typed("msgpack", b""), Err(Error::Serde { .. })));
    assert!(matches!(serde.loads_typed("json", b"{"), Err(Error::Serde { .. })));
}

/// Structural equality that compares floats by their bits (NaN, -0.0).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((ka, va), (kb, vb))| same(ka, kb) && same(va, vb))
        }
        (Value::Ext(x), Value::Ext(y)) => {
            x.code() == y.code()
                && match (x.payload(), y.payload()) {
                    (ExtPayload::Decoded(a), ExtPayload::Decoded(b)) => same(a, b),
                    (ExtPayload::Raw(a), ExtPayload::Raw(b)) => a == b,
                    _ => false,
                }
        }
        _ => a == b,
    }
}

fn object_kind() -> impl Strategy<Value = ExtKind> {
    (0i8..=5).prop_map(ExtKind::from_code)
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        (-200i64..200).prop_map(Value::Int),
        ((i64::MAX as u64 + 1)..=u64::MAX).prop_map(Value::UInt),
        any::<u64>().prop_map(|b| Value::Float(f64::from_bits(b))),
        any::<f64>().prop_map(Value::Float),
        any::<u32>().prop_map(|b| Value::F32(f32::from_bits(b))),
        ".{0,40}".prop_map(Value::from),
        vec(any::<u8>(), 0..40).prop_map(|b| Value::Bin(Bytes::from(b))),
        (any::<i8>(), vec(any::<u8>(), 0..24)).prop_map(|(c, b)| Value::from(Ext::raw(c, Bytes::from(b)))),
    ];
    leaf.prop_recursive(4, 96, 10, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..10).prop_map(|v| Value::Array(v.into())),
            vec((inner.clone(), inner.clone()), 0..8).prop_map(|v| Value::Map(v.into())),
            (object_kind(), "[a-z_.]{0,12}", "[A-Za-z]{0,8}", inner.clone())
                .prop_map(|(k, m, n, a)| Value::from(Ext::object(k, m, n, a).unwrap())),
            (
                object_kind(),
                "[a-z_.]{0,12}",
                "[A-Za-z]{0,8}",
                inner.clone(),
                "[a-z_]{0,12}"
            )
                .prop_map(|(k, m, n, a, f)| Value::from(Ext::object_with_method(k, m, n, a, f).unwrap())),
            inner.clone().prop_map(Value::delta_snapshot),
            (any::<i8>(), inner.clone()).prop_map(|(c, v)| Value::from(Ext::from_decoded(c, v).unwrap())),
            (
                "[<>|][iuf][1248]",
                vec(0u64..70_000, 0..3),
                any::<bool>(),
                vec(any::<u8>(), 0..32)
            )
                .prop_map(|(d, shape, f, data)| {
                    let order = if f { NumpyOrder::F } else { NumpyOrder::C };
                    Value::from(Ext::numpy(d, shape, order, Bytes::from(data)))
                }),
        ]
    })
}

/// JSON-able values: what metadata may hold.
fn arb_json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        ((i64::MAX as u64 + 1)..=u64::MAX).prop_map(Value::UInt),
        any::<f64>().prop_map(Value::Float),
        any::<u64>().prop_map(|b| Value::Float(f64::from_bits(b))),
        ".{0,30}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..8).prop_map(|v| Value::Array(v.into())),
            vec((".{0,10}", inner), 0..8).prop_map(|mut entries| {
                // a JSON object has each key once
                let mut seen = std::collections::HashSet::new();
                entries.retain(|(k, _)| seen.insert(k.clone()));
                Value::map(entries)
            }),
        ]
    })
}

/// Byte strings near valid ones: a vector with a few bytes replaced, inserted
/// or removed.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let base = prop_oneof![
        Just(unhex(GOLDEN)),
        Just(unhex(HUMAN)),
        Just(unhex(TIMEZONE)),
        Just(unhex(NUMPY_F)),
        Just(unhex(SET)),
    ];
    (base, vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6)).prop_map(|(mut bytes, edits)| {
        for (at, byte, op) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 if i < bytes.len() => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ if i < bytes.len() => {
                    bytes.remove(i);
                }
                _ => bytes.push(byte),
            }
        }
        bytes
    })
}

/// Whatever decodes must encode, and encode stably.
fn check_decoded(bytes: &[u8]) {
    if let Ok(v) = msgpack::decode(bytes) {
        let once = msgpack::encode(&v).unwrap();
        let back = msgpack::decode(&once).unwrap();
        assert!(same(&v, &back), "{v:?} vs {back:?}");
        assert_eq!(msgpack::encode(&back).unwrap(), once);
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in vec(any::<u8>(), 0..512)) {
        check_decoded(&bytes);
        for tag in ["msgpack", "json", "bytes", "null", "pickle"] {
            let _ = JsonPlusSerializer.loads_typed(tag, &bytes);
        }
    }

    #[test]
    fn mutated_vectors_never_panic(bytes in mutated()) {
        check_decoded(&bytes);
    }

    #[test]
    fn values_round_trip(v in arb_value()) {
        let bytes = msgpack::encode(&v).unwrap();
        let back = msgpack::decode(&bytes).unwrap();
        prop_assert!(same(&v, &back), "{:?} != {:?}", v, back);
        prop_assert_eq!(msgpack::encode(&back).unwrap(), bytes.clone());
        let typed = JsonPlusSerializer.dumps_typed(&v).unwrap();
        let loaded = JsonPlusSerializer.loads_typed(&typed.tag, &typed.data).unwrap();
        prop_assert!(same(&v, &loaded));
    }

    #[test]
    fn json_text_never_panics(text in r#"[\[\]{}",:0-9eE.+\-a-zNIfinty \\u]{0,64}"#) {
        if let Ok(v) = from_json(text.as_bytes()) {
            let out = to_python_json(&v).unwrap();
            prop_assert_eq!(to_python_json(&from_json(out.as_bytes()).unwrap()).unwrap(), out);
        }
    }

    #[test]
    fn json_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = from_json(&bytes);
    }

    #[test]
    fn json_values_round_trip(v in arb_json_value()) {
        let text = to_python_json(&v).unwrap();
        let back = from_json(text.as_bytes()).unwrap();
        prop_assert_eq!(to_python_json(&back).unwrap(), text.clone());
        // the same value too (NaN is unequal to itself: compared by text above)
        if !text.contains("NaN") {
            prop_assert_eq!(back, v);
        }
    }
}
