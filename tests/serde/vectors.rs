//! Every byte vector of the spec (§4.8, §6.1, §7.5, §7.6): decoding Python's
//! bytes and encoding the result gives the same bytes, and extension values
//! expose the module, class and arguments Python recorded.
//!
//! Not covered: the `Item` vector of §4.8, which the spec prints truncated
//! (`c7840493…85…`), and `2**64`, which Python cannot encode and `Value` cannot
//! hold.

use bytes::Bytes;
use checkpointer::serde::json::to_python_json;
use checkpointer::serde::{msgpack, Ext, ExtKind, ExtPayload, JsonPlusSerializer, NumpyOrder, Serializer, Value};
use checkpointer::{Checkpoint, CheckpointMetadata, CheckpointSource, Error};

fn unhex(h: &str) -> Vec<u8> {
    hex::decode(h).unwrap()
}

/// Decodes `h`, checks that encoding gives the same bytes, returns the value.
fn round_trip(h: &str) -> Value {
    let bytes = unhex(h);
    let v = msgpack::decode(&bytes).unwrap_or_else(|e| panic!("decoding {h}: {e}"));
    assert_eq!(hex::encode(msgpack::encode(&v).unwrap()), h, "re-encoding {v:?}");
    v
}

/// `value` encodes to `h` and `h` decodes to `value`.
fn both_ways(h: &str, value: Value) {
    assert_eq!(hex::encode(msgpack::encode(&value).unwrap()), h, "encoding {value:?}");
    assert_eq!(round_trip(h), value, "decoding {h}");
}

fn s(x: &str) -> Value {
    Value::from(x)
}

fn ints(xs: &[i64]) -> Value {
    Value::Array(xs.iter().map(|&i| Value::Int(i)).collect())
}

fn ext(h: &str) -> Ext {
    match round_trip(h) {
        Value::Ext(e) => *e,
        other => panic!("{h} is not an ext: {other:?}"),
    }
}

/// An object extension (codes 0–5) and what Python recorded in it.
struct Obj {
    hex: &'static str,
    code: i8,
    module: &'static str,
    name: &'static str,
    arg: Value,
    method: Option<&'static str>,
}

fn check_obj(o: &Obj) {
    let e = ext(o.hex);
    assert_eq!(e.code(), o.code, "{}", o.hex);
    assert_eq!(e.kind(), ExtKind::from_code(o.code));
    assert!(matches!(e.payload(), ExtPayload::Decoded(_)), "{}", o.hex);
    assert_eq!(e.module(), Some(o.module), "{}", o.hex);
    assert_eq!(e.name(), Some(o.name), "{}", o.hex);
    assert_eq!(e.arg(), Some(&o.arg), "{}", o.hex);
    assert_eq!(e.method(), o.method, "{}", o.hex);
    assert_eq!(e.snapshot_value(), None);
    assert_eq!(e.numpy_view(), None);
    // building the same object from its parts gives Python's bytes
    let kind = ExtKind::from_code(o.code);
    let built = match o.method {
        Some(m) => Ext::object_with_method(kind, o.module, o.name, o.arg.clone(), m),
        None => Ext::object(kind, o.module, o.name, o.arg.clone()),
    }
    .unwrap();
    assert_eq!(built, e);
    assert_eq!(
        hex::encode(msgpack::encode(&Value::Ext(Box::new(built))).unwrap()),
        o.hex
    );
    // and the typed serializer tags it msgpack
    let typed = JsonPlusSerializer.dumps_typed(&Value::Ext(Box::new(e))).unwrap();
    assert_eq!(typed.tag, "msgpack");
    assert_eq!(hex::encode(&typed.data), o.hex);
}

#[test]
fn basic_values() {
    both_ways("a568656c6c6f", s("hello"));
    both_ways("a2c3a9", s("é"));
    both_ways(&format!("d928{}", "78".repeat(40)), s(&"x".repeat(40)));
    both_ways("2a", Value::Int(42));
    both_ways("ff", Value::Int(-1));
    both_ways("ccc8", Value::Int(200));
    both_ways("d0df", Value::Int(-33));
    both_ways("d09c", Value::Int(-100));
    both_ways("ce00010000", Value::Int(65536));
    both_ways("d2ffff63c0", Value::Int(-40000));
    both_ways("cf0000000100000000", Value::Int(1 << 32));
    both_ways("cf8000000000000000", Value::UInt(1 << 63));
    both_ways("d38000000000000000", Value::Int(i64::MIN));
    both_ways("cb400c000000000000", Value::Float(3.5));
    both_ways("cb3ff0000000000000", Value::Float(1.0));
    both_ways("cb3fb999999999999a", Value::Float(0.1));
    both_ways("c3", Value::Bool(true));
    both_ways("93010203", ints(&[1, 2, 3]));
    // tuple (1, "a") reads back as a list
    both_ways("9201a161", Value::Array((vec![Value::Int(1), s("a")]).into()));
    both_ways(
        &format!("dc0010{}", (0..16).map(|i| format!("{i:02x}")).collect::<String>()),
        ints(&(0..16).collect::<Vec<_>>()),
    );
    both_ways(
        "82a16101a16292c3c0",
        Value::map([
            ("a", Value::Int(1)),
            ("b", Value::Array(vec![Value::Bool(true), Value::Nil].into())),
        ]),
    );
    both_ways("8101a178", Value::Map((vec![(Value::Int(1), s("x"))]).into()));
    both_ways("81c001", Value::Map(vec![(Value::Nil, Value::Int(1))].into()));
    both_ways("81c301", Value::Map(vec![(Value::Bool(true), Value::Int(1))].into()));
    both_ways(
        "81cb3ff8000000000000a161",
        Value::Map((vec![(Value::Float(1.5), s("a"))]).into()),
    );
    both_ways("81920102a174", Value::Map((vec![(ints(&[1, 2]), s("t"))]).into()));
    both_ways(
        "81a162c40178",
        Value::map([("b", Value::Bin(Bytes::from_static(b"x")))]),
    );
    // ValueError("boom") is written as the string of its repr
    both_ways("b256616c75654572726f722827626f6f6d2729", s("ValueError('boom')"));
    // §4.3: NaN and the replaced lone surrogate
    let nan = round_trip("cb7ff8000000000000");
    assert!(matches!(nan, Value::Float(f) if f.is_nan()));
    assert_eq!(
        hex::encode(msgpack::encode(&Value::Float(f64::NAN)).unwrap()),
        "cb7ff8000000000000"
    );
    both_ways("a13f", s("?"));
    // §5: the plaintext of the AES vector
    both_ways("81a16101", Value::map([("a", Value::Int(1))]));
}

/// Canonical forms at every length and integer boundary (msgpack spec; Python
/// writes the smallest form).
#[test]
fn canonical_boundaries() {
    let int_cases: &[(i64, &str)] = &[
        (0, "00"),
        (127, "7f"),
        (128, "cc80"),
        (255, "ccff"),
        (256, "cd0100"),
        (65535, "cdffff"),
        (65536, "ce00010000"),
        (4294967295, "ceffffffff"),
        (4294967296, "cf0000000100000000"),
        (i64::MAX, "cf7fffffffffffffff"),
        (-32, "e0"),
        (-33, "d0df"),
        (-128, "d080"),
        (-129, "d1ff7f"),
        (-32768, "d18000"),
        (-32769, "d2ffff7fff"),
        (-2147483648, "d280000000"),
        (-2147483649, "d3ffffffff7fffffff"),
    ];
    for (i, h) in int_cases {
        both_ways(h, Value::Int(*i));
    }
    both_ways("cfffffffffffffffff", Value::UInt(u64::MAX));
    both_ways("ca3f800000", Value::F32(1.0));

    // (largest fix length, fix marker), then the 8/16/32-bit length markers
    let header = |n: usize, fix: Option<(usize, u8)>, m8: Option<u8>, m16: u8, m32: u8| -> String {
        match (fix, m8) {
            (Some((max, marker)), _) if n <= max => format!("{:02x}", marker | n as u8),
            (_, Some(m8)) if n <= 0xff => format!("{m8:02x}{n:02x}"),
            _ if n <= 0xffff => format!("{m16:02x}{n:04x}"),
            _ => format!("{m32:02x}{n:08x}"),
        }
    };
    for n in [0, 31, 32, 255, 256, 65535, 65536] {
        let h = format!(
            "{}{}",
            header(n, Some((31, 0xa0)), Some(0xd9), 0xda, 0xdb),
            "61".repeat(n)
        );
        both_ways(&h, s(&"a".repeat(n)));
    }
    for n in [0, 1, 255, 256, 65535, 65536] {
        let h = format!("{}{}", header(n, None, Some(0xc4), 0xc5, 0xc6), "07".repeat(n));
        both_ways(&h, Value::Bin(Bytes::from(vec![7u8; n])));
    }
    for n in [0, 15, 16, 65535, 65536] {
        let h = format!("{}{}", header(n, Some((15, 0x90)), None, 0xdc, 0xdd), "c0".repeat(n));
        both_ways(&h, Value::Array((vec![Value::Nil; n]).into()));
        let h = format!(
            "{}{}",
            header(n, Some((15, 0x80)), None, 0xde, 0xdf),
            "c0".repeat(2 * n)
        );
        both_ways(&h, Value::Map((vec![(Value::Nil, Value::Nil); n]).into()));
    }
    // extension framing: fixext for 1/2/4/8/16 payload bytes, else ext8/16/32
    let ext_frames: &[(usize, &str)] = &[
        (0, "c700"),
        (1, "d4"),
        (2, "d5"),
        (3, "c703"),
        (4, "d6"),
        (8, "d7"),
        (16, "d8"),
        (17, "c711"),
        (255, "c7ff"),
        (256, "c80100"),
        (65535, "c8ffff"),
        (65536, "c900010000"),
    ];
    for (n, frame) in ext_frames {
        let v = Value::Ext(Box::new(Ext::raw(42, Bytes::from(vec![0xc1; *n]))));
        let h = format!("{frame}2a{}", "c1".repeat(*n));
        both_ways(&h, v);
    }
}

#[test]
fn serializer_tags() {
    let serde = JsonPlusSerializer;
    let none = serde.dumps_typed(&Value::Nil).unwrap();
    assert_eq!((none.tag.as_str(), &none.data[..]), ("null", &b""[..]));
    let abc = Value::Bin(Bytes::from_static(b"abc"));
    let typed = serde.dumps_typed(&abc).unwrap();
    assert_eq!(
        (typed.tag.as_str(), hex::encode(&typed.data).as_str()),
        ("bytes", "616263")
    );
    assert_eq!(serde.loads_typed("bytes", &unhex("616263")).unwrap(), abc);
    assert_eq!(
        serde.loads_typed("bytearray", &unhex("6162")).unwrap(),
        Value::Bin(Bytes::from_static(b"ab"))
    );
    assert_eq!(serde.loads_typed("null", b"").unwrap(), Value::Nil);
    let hello = serde.dumps_typed(&s("hello")).unwrap();
    assert_eq!(
        (hello.tag.as_str(), hex::encode(&hello.data).as_str()),
        ("msgpack", "a568656c6c6f")
    );
    // nested bytes are msgpack bin, not the `bytes` tag
    let nested = serde
        .dumps_typed(&Value::map([("b", Value::Bin(Bytes::from_static(b"x")))]))
        .unwrap();
    assert_eq!(
        (nested.tag.as_str(), hex::encode(&nested.data).as_str()),
        ("msgpack", "81a162c40178")
    );
    for tag in ["pickle", "msgpack+aes", "whatever"] {
        assert!(
            matches!(serde.loads_typed(tag, b"\x01"), Err(Error::Serde { .. })),
            "{tag}"
        );
    }
}

#[test]
fn object_extensions() {
    let dt = |iso: &str| Obj {
        hex: "",
        code: 3,
        module: "datetime",
        name: "datetime",
        arg: s(iso),
        method: Some("fromisoformat"),
    };
    let main = "__main__";
    let objects = vec![
        Obj { hex: "d80093a86275696c74696e73a37365749101", code: 0, module: "builtins", name: "set", arg: ints(&[1]), method: None },
        Obj { hex: "c7170093a86275696c74696e73a966726f7a656e73657491a161", code: 0, module: "builtins", name: "frozenset", arg: Value::Array((vec![s("a")]).into()), method: None },
        Obj { hex: "c7160093ab636f6c6c656374696f6e73a56465717565920102", code: 0, module: "collections", name: "deque", arg: ints(&[1, 2]), method: None },
        Obj {
            hex: "c7430394a86461746574696d65a86461746574696d65d920323032342d30312d30325430333a30343a30352e3030303637382b30303a3030ad66726f6d69736f666f726d6174",
            ..dt("2024-01-02T03:04:05.000678+00:00")
        },
        Obj {
            hex: "c7350394a86461746574696d65a86461746574696d65b3323032342d30312d30325430333a30343a3035ad66726f6d69736f666f726d6174",
            ..dt("2024-01-02T03:04:05")
        },
        Obj { hex: "c7150193a86461746574696d65a46461746593cd07e80102", code: 1, module: "datetime", name: "date", arg: ints(&[2024, 1, 2]), method: None },
        Obj {
            hex: "c7410293a86461746574696d65a474696d6586a4686f757201a66d696e75746502a67365636f6e6403ab6d6963726f7365636f6e6404a6747a696e666fc0a4666f6c6400",
            code: 2,
            module: "datetime",
            name: "time",
            arg: Value::map([
                ("hour", Value::Int(1)),
                ("minute", Value::Int(2)),
                ("second", Value::Int(3)),
                ("microsecond", Value::Int(4)),
                ("tzinfo", Value::Nil),
                ("fold", Value::Int(0)),
            ]),
            method: None,
        },
        Obj { hex: "c7180193a86461746574696d65a974696d6564656c746193010203", code: 1, module: "datetime", name: "timedelta", arg: ints(&[1, 2, 3]), method: None },
        Obj {
            hex: "c7310193a86461746574696d65a874696d657a6f6e6591c71a0193a86461746574696d65a974696d6564656c74619300cd1c2000",
            code: 1,
            module: "datetime",
            name: "timezone",
            arg: Value::Array((vec![Value::Ext(
                Box::new(Ext::object(ExtKind::ConstructorPosArgs, "datetime", "timedelta", ints(&[0, 7200, 0])).unwrap()),
            )]).into()),
            method: None,
        },
        Obj { hex: "c7200093a87a6f6e65696e666fa85a6f6e65496e666fac4575726f70652f5061726973", code: 0, module: "zoneinfo", name: "ZoneInfo", arg: s("Europe/Paris"), method: None },
        Obj {
            hex: "c72d0093a475756964a455554944d9203132333435363738313233343536373831323334353637383132333435363738",
            code: 0,
            module: "uuid",
            name: "UUID",
            arg: s("12345678123456781234567812345678"),
            method: None,
        },
        Obj { hex: "c7160093a7646563696d616ca7446563696d616ca4312e3130", code: 0, module: "decimal", name: "Decimal", arg: s("1.10"), method: None },
        // re.I | re.U = 34
        Obj { hex: "c7110193a27265a7636f6d70696c6592a2612b22", code: 1, module: "re", name: "compile", arg: Value::Array((vec![s("a+"), Value::Int(34)]).into()), method: None },
        Obj { hex: "c71c0193a7706174686c6962a9506f7369785061746893a12fa3746d70a178", code: 1, module: "pathlib", name: "PosixPath", arg: Value::Array((vec![s("/"), s("tmp"), s("x")]).into()), method: None },
        Obj { hex: "c7200093a9697061646472657373ab4950763441646472657373a831302e302e302e31", code: 0, module: "ipaddress", name: "IPv4Address", arg: s("10.0.0.1"), method: None },
        Obj { hex: "c7110093a85f5f6d61696e5f5fa5436f6c6f7201", code: 0, module: main, name: "Color", arg: Value::Int(1), method: None },
        Obj { hex: "c70f0093a85f5f6d61696e5f5fa25345a161", code: 0, module: main, name: "SE", arg: s("a"), method: None },
        Obj { hex: "c70e0093a85f5f6d61696e5f5fa2494501", code: 0, module: main, name: "IE", arg: Value::Int(1), method: None },
        Obj {
            hex: "c7140293a85f5f6d61696e5f5fa15082a17801a179a161",
            code: 2,
            module: main,
            name: "P",
            arg: Value::map([("x", Value::Int(1)), ("y", s("a"))]),
            method: None,
        },
        Obj {
            hex: "c7150293a85f5f6d61696e5f5fa2444382a16101a162a17a",
            code: 2,
            module: main,
            name: "DC",
            arg: Value::map([("a", Value::Int(1)), ("b", s("z"))]),
            method: None,
        },
        Obj {
            hex: "c7280594a85f5f6d61696e5f5fa14d82a16101a1629102b36d6f64656c5f76616c69646174655f6a736f6e",
            code: 5,
            module: main,
            name: "M",
            arg: Value::map([("a", Value::Int(1)), ("b", ints(&[2]))]),
            method: Some("model_validate_json"),
        },
        Obj { hex: "c7110493a85f5f6d61696e5f5fa2563181a16101", code: 4, module: main, name: "V1", arg: Value::map([("a", Value::Int(1))]), method: None },
        Obj { hex: "c71d0093ae707964616e7469632e7479706573a9536563726574537472a27077", code: 0, module: "pydantic.types", name: "SecretStr", arg: s("pw"), method: None },
        Obj {
            hex: "c7880594bd6c616e67636861696e5f636f72652e6d657373616765732e68756d616eac48756d616e4d65737361676586a7636f6e74656e74a26869b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65c0a26964a131b36d6f64656c5f76616c69646174655f6a736f6e",
            code: 5,
            module: "langchain_core.messages.human",
            name: "HumanMessage",
            arg: Value::map([
                ("content", s("hi")),
                ("additional_kwargs", Value::Map(vec![].into())),
                ("response_metadata", Value::Map(vec![].into())),
                ("type", s("human")),
                ("name", Value::Nil),
                ("id", s("1")),
            ]),
            method: Some("model_validate_json"),
        },
        Obj {
            hex: "c7200193af6c616e6767726170682e7479706573a453656e6492a46e6f646581a17801",
            code: 1,
            module: "langgraph.types",
            name: "Send",
            arg: Value::Array((vec![s("node"), Value::map([("x", Value::Int(1))])]).into()),
            method: None,
        },
        // §7.5: the Send of the fan-out graph
        Obj {
            hex: "c71d0193af6c616e6767726170682e7479706573a453656e6492a17781a17800",
            code: 1,
            module: "langgraph.types",
            name: "Send",
            arg: Value::Array((vec![s("w"), Value::map([("x", Value::Int(0))])]).into()),
            method: None,
        },
        Obj {
            hex: "c73c0293af6c616e6767726170682e7479706573a9496e7465727275707483a576616c7565a171a26964a3616263af726573706f6e73655f736368656d61c0",
            code: 2,
            module: "langgraph.types",
            name: "Interrupt",
            arg: Value::map([("value", s("q")), ("id", s("abc")), ("response_schema", Value::Nil)]),
            method: None,
        },
        Obj {
            hex: "c73b0293af6c616e6767726170682e7479706573a7436f6d6d616e6484a56772617068c0a675706461746581a16101a6726573756d65c0a4676f746fa16e",
            code: 2,
            module: "langgraph.types",
            name: "Command",
            arg: Value::map([
                ("graph", Value::Nil),
                ("update", Value::map([("a", Value::Int(1))])),
                ("resume", Value::Nil),
                ("goto", s("n")),
            ]),
            method: None,
        },
        Obj {
            hex: "c7370293af6c616e6767726170682e7479706573a94f766572777269746582a576616c75659101a474797065ad5f5f6f76657277726974655f5f",
            code: 2,
            module: "langgraph.types",
            name: "Overwrite",
            arg: Value::map([("value", ints(&[1])), ("type", s("__overwrite__"))]),
            method: None,
        },
    ];
    assert_eq!(objects.len(), 29);
    for o in &objects {
        check_obj(o);
    }
}

#[test]
fn nested_timezone_ext_reads_through() {
    let tz =
        ext("c7310193a86461746574696d65a874696d657a6f6e6591c71a0193a86461746574696d65a974696d6564656c74619300cd1c2000");
    let inner = tz
        .arg()
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_ext)
        .unwrap();
    assert_eq!(
        (inner.code(), inner.module(), inner.name()),
        (1, Some("datetime"), Some("timedelta"))
    );
    assert_eq!(inner.arg(), Some(&ints(&[0, 7200, 0])));
}

#[test]
fn delta_snapshot() {
    let e = ext("c70307920102");
    assert_eq!(e.kind(), ExtKind::DeltaSnapshot);
    assert_eq!(e.snapshot_value(), Some(&ints(&[1, 2])));
    assert_eq!((e.module(), e.name(), e.arg(), e.method()), (None, None, None, None));
    assert_eq!(e, Ext::delta_snapshot(ints(&[1, 2])));
    let v = Value::delta_snapshot(ints(&[1, 2]));
    assert_eq!(hex::encode(msgpack::encode(&v).unwrap()), "c70307920102");
    assert_eq!(v.unwrap_delta_snapshot(), &ints(&[1, 2]));
    assert_eq!(ints(&[1, 2]).unwrap_delta_snapshot(), &ints(&[1, 2]));
    // a snapshot of nil is still a snapshot (fixext 1)
    both_ways("d407c0", Value::delta_snapshot(Value::Nil));
    assert_eq!(Value::delta_snapshot(Value::Nil).unwrap_delta_snapshot(), &Value::Nil);
}

#[test]
fn numpy_arrays() {
    let e = ext("c7130694a33c69349102a143c4080100000002000000");
    assert_eq!(e.kind(), ExtKind::NumpyArray);
    let view = e.numpy_view().unwrap();
    assert_eq!(
        (view.dtype, view.shape.as_slice(), view.order),
        ("<i4", &[2u64][..], NumpyOrder::C)
    );
    assert_eq!(&view.data[..], &unhex("0100000002000000")[..]);
    assert_eq!((e.module(), e.snapshot_value()), (None, None));
    let built = Ext::numpy("<i4", [2], NumpyOrder::C, Bytes::from(unhex("0100000002000000")));
    assert_eq!(built, e);

    let f = ext("c72c0694a33c6638920202a146c420000000000000f03f000000000000084000000000000000400000000000001040");
    let view = f.numpy_view().unwrap();
    assert_eq!(
        (view.dtype, view.shape.as_slice(), view.order),
        ("<f8", &[2u64, 2][..], NumpyOrder::F)
    );
    let floats: Vec<f64> = view
        .data
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(floats, [1.0, 3.0, 2.0, 4.0]);
    let built = Ext::numpy("<f8", [2, 2], NumpyOrder::F, view.data.clone());
    assert_eq!(
        hex::encode(msgpack::encode(&Value::Ext(Box::new(built))).unwrap()),
        "c72c0694a33c6638920202a146c420000000000000f03f000000000000084000000000000000400000000000001040"
    );
}

#[test]
fn constructors_guard_their_codes() {
    for kind in [ExtKind::NumpyArray, ExtKind::DeltaSnapshot, ExtKind::Unknown(9)] {
        assert!(matches!(
            Ext::object(kind, "m", "n", Value::Nil),
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            Ext::object_with_method(kind, "m", "n", Value::Nil, "x"),
            Err(Error::InvalidInput { .. })
        ));
    }
    // codes 0–7 keep a decoded payload, others are stored as bytes
    let known = Ext::from_decoded(7, ints(&[1, 2])).unwrap();
    assert_eq!(known, Ext::delta_snapshot(ints(&[1, 2])));
    let unknown = Ext::from_decoded(42, ints(&[1, 2])).unwrap();
    assert_eq!(unknown.payload(), &ExtPayload::Raw(Bytes::from(unhex("920102"))));
    assert_eq!(unknown, Ext::raw(42, Bytes::from(unhex("920102"))));
    assert_eq!(
        msgpack::decode(&msgpack::encode(&Value::Ext(Box::new(unknown.clone()))).unwrap()).unwrap(),
        Value::Ext(Box::new(unknown))
    );
    // Ext::raw gives what the decoder gives
    for h in ["c70307920102", "c7030092cc01", "d407c1", "d5630102", "c7020592c1"] {
        let bytes = unhex(h);
        let Value::Ext(decoded) = msgpack::decode(&bytes).unwrap() else {
            panic!("{h}")
        };
        let header = if bytes[0] == 0xc7 { 3 } else { 2 };
        assert_eq!(
            Ext::raw(decoded.code(), Bytes::from(bytes[header..].to_vec())),
            *decoded,
            "{h}"
        );
    }
    // object accessors on wrong shapes are None, never a panic
    let odd = Ext::raw(0, Bytes::from(unhex("a161")));
    assert_eq!(
        (odd.module(), odd.name(), odd.arg(), odd.method()),
        (None, None, None, None)
    );
    let odd = Ext::raw(6, Bytes::from(unhex("94a33c69349102a15ac400")));
    assert_eq!(odd.numpy_view(), None);
}

const GOLDEN: &str = "87a17604a27473d920323032342d30352d30345430363a33323a34322e3233353434342b30303a3030a26964d92431656630396530312d633335342d366530382d383030312d386131353033663962383735ae6368616e6e656c5f76616c75657383a46e616d65a46d656f77a56974656d739201a161a4666c6167c0b06368616e6e656c5f76657273696f6e7384a46e616d65d92430303030303030303030303030303030303030303030303030303030303030312e302e35a56974656d73d92530303030303030303030303030303030303030303030303030303030303030322e302e3235a4666c6167d92530303030303030303030303030303030303030303030303030303030303030322e302e3235a4676f6e65d92530303030303030303030303030303030303030303030303030303030303030322e302e3235ad76657273696f6e735f7365656e82a95f5f696e7075745f5f80a46e6f646581a46e616d65d92430303030303030303030303030303030303030303030303030303030303030312e302e35b0757064617465645f6368616e6e656c7391a56974656d73";

#[test]
fn golden_sqlite_checkpoint() {
    let value = round_trip(GOLDEN);
    let cp = Checkpoint::from_value(&value).unwrap();
    assert_eq!(cp.v, 4);
    assert_eq!(cp.id, "1ef09e01-c354-6e08-8001-8a1503f9b875");
    assert_eq!(cp.ts, "2024-05-04T06:32:42.235444+00:00");
    let values: Vec<_> = cp.channel_values.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    assert_eq!(
        values,
        [
            ("name", s("meow")),
            ("items", Value::Array((vec![Value::Int(1), s("a")]).into())),
            ("flag", Value::Nil)
        ]
    );
    let v1 = "00000000000000000000000000000001.0.5";
    let v2 = "00000000000000000000000000000002.0.25";
    let versions: Vec<_> = cp
        .channel_versions
        .iter()
        .map(|(k, v)| (k.as_str(), v.to_string()))
        .collect();
    assert_eq!(
        versions,
        [
            ("name", v1.to_owned()),
            ("items", v2.to_owned()),
            ("flag", v2.to_owned()),
            ("gone", v2.to_owned())
        ]
    );
    assert_eq!(cp.versions_seen.keys().collect::<Vec<_>>(), ["__input__", "node"]);
    assert!(cp.versions_seen["__input__"].is_empty());
    assert_eq!(cp.versions_seen["node"]["name"].to_string(), v1);
    assert_eq!(cp.updated_channels, Some(vec!["items".to_owned()].into()));
    assert_eq!(cp.pending_sends, None);
    assert!(cp.extra.is_empty());
    assert_eq!(hex::encode(msgpack::encode(&cp.to_value(true)).unwrap()), GOLDEN);
    let typed = JsonPlusSerializer.dumps_typed(&cp.to_value(true)).unwrap();
    assert_eq!(
        (typed.tag.as_str(), hex::encode(&typed.data)),
        ("msgpack", GOLDEN.to_owned())
    );

    // InMemory stores the same map without channel_values (header 0x86)
    let skeleton = msgpack::encode(&cp.to_value(false)).unwrap();
    assert_eq!(skeleton[0], 0x86);
    let Value::Map(mut entries) = value else { panic!() };
    entries.retain(|(k, _)| k.as_str() != Some("channel_values"));
    assert_eq!(skeleton, msgpack::encode(&Value::Map(entries)).unwrap());

    // the writes of the same put_writes and the InMemory blob
    both_ways("a4626f6f6d", s("boom"));
    both_ways("91a162", Value::Array((vec![s("b")]).into()));
    both_ways("9201a161", Value::Array((vec![Value::Int(1), s("a")]).into()));
}

#[test]
fn golden_metadata() {
    // §6.1 / §7.6: InMemory msgpack metadata and the SQLite JSON of the same map
    let value = round_trip("83a6736f75726365a46c6f6f70a47374657001a7706172656e747380");
    let meta = CheckpointMetadata::from_value(&value).unwrap();
    assert_eq!(meta, CheckpointMetadata::new(CheckpointSource::Loop, 1));
    assert_eq!(
        to_python_json(&value).unwrap(),
        r#"{"source": "loop", "step": 1, "parents": {}}"#
    );
    assert_eq!(
        meta.to_python_json().unwrap(),
        r#"{"source": "loop", "step": 1, "parents": {}}"#
    );
    assert_eq!(
        CheckpointMetadata::from_json(br#"{"source": "loop", "step": 1, "parents": {}}"#).unwrap(),
        meta
    );
    // §7.5 input checkpoint metadata
    let input = CheckpointMetadata::new(CheckpointSource::Input, -1);
    assert_eq!(
        input.to_python_json().unwrap(),
        r#"{"source": "input", "step": -1, "parents": {}}"#
    );
}

#[test]
fn observed_write_values() {
    // §7.5 writes of the 2-node graph and the interrupt/resume run
    both_ways("91a2696e", Value::Array((vec![s("in")]).into()));
    both_ways("00", Value::Int(0));
    both_ways("91a161", Value::Array((vec![s("a")]).into()));
    both_ways("01", Value::Int(1));
    both_ways("02", Value::Int(2));
    both_ways("a3796573", s("yes"));
    both_ways("91a3796573", Value::Array((vec![s("yes")]).into()));
}
