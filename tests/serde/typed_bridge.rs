//! The typed bridge: Rust types to and from `Value`, and the bytes Python's
//! serializer would write for the same data.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use checkpointer::serde::{from_value, from_value_ref, msgpack, to_value, Value};
use checkpointer::Error;
use serde::{Deserialize, Serialize};

fn enc(v: &Value) -> String {
    hex::encode(msgpack::encode(v).unwrap())
}

fn dec(h: &str) -> Value {
    msgpack::decode(&hex::decode(h).unwrap()).unwrap()
}

fn s(x: &str) -> Value {
    Value::Str(x.into())
}

fn round_trip<T>(x: &T) -> T
where
    T: Serialize + serde::de::DeserializeOwned,
{
    let v = to_value(x).unwrap();
    let by_ref: T = from_value_ref(&v).unwrap();
    let owned: T = from_value(v.clone()).unwrap();
    // The two readers agree, and so do the bytes of both after another trip.
    assert_eq!(to_value(&by_ref).unwrap(), v);
    assert_eq!(to_value(&owned).unwrap(), v);
    owned
}

fn serde_reason(e: Error) -> String {
    match e {
        Error::Serde { reason } => reason,
        other => panic!("expected Error::Serde, got {other:?}"),
    }
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Flat {
    a: i64,
    b: (bool, Option<u8>),
}

#[test]
fn struct_encodes_as_python_dict() {
    let v = to_value(&Flat { a: 1, b: (true, None) }).unwrap();
    assert_eq!(enc(&v), "82a16101a16292c3c0");
    assert_eq!(v, dec("82a16101a16292c3c0"));
    let back: Flat = from_value(dec("82a16101a16292c3c0")).unwrap();
    assert_eq!(back, Flat { a: 1, b: (true, None) });
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Scalars {
    i8: i8,
    i16: i16,
    i32: i32,
    i64: i64,
    u8: u8,
    u16: u16,
    u32: u32,
    u64: u64,
    big: u64,
    f32: f32,
    f64: f64,
    ch: char,
    s: String,
    unit: (),
    flag: bool,
}

#[test]
fn scalars_match_python_vectors() {
    let x = Scalars {
        i8: -1,
        i16: -33,
        i32: -40000,
        i64: i64::MIN,
        u8: 200,
        u16: 65535,
        u32: 65536,
        u64: 1 << 32,
        big: 1 << 63,
        f32: 0.5,
        f64: 0.1,
        ch: 'é',
        s: "hello".into(),
        unit: (),
        flag: true,
    };
    let v = round_trip(&x);
    assert_eq!(v, x);
    let value = to_value(&x).unwrap();
    let field = |k: &str| enc(value.get(k).unwrap());
    assert_eq!(field("i8"), "ff");
    assert_eq!(field("i16"), "d0df");
    assert_eq!(field("i32"), "d2ffff63c0");
    assert_eq!(field("i64"), "d38000000000000000");
    assert_eq!(field("u8"), "ccc8");
    assert_eq!(field("u32"), "ce00010000");
    assert_eq!(field("u64"), "cf0000000100000000");
    assert_eq!(field("big"), "cf8000000000000000");
    assert_eq!(value.get("big"), Some(&Value::UInt(1 << 63)));
    // Python has no 32-bit float: an f32 field is written as a float64.
    assert_eq!(field("f32"), "cb3fe0000000000000");
    assert_eq!(field("f64"), "cb3fb999999999999a");
    assert_eq!(field("ch"), "a2c3a9");
    assert_eq!(field("unit"), "c0");
    assert_eq!(field("flag"), "c3");
}

#[test]
fn wide_integers_in_range_and_out() {
    assert_eq!(to_value(&(-5i128)).unwrap(), Value::Int(-5));
    assert_eq!(to_value(&(u64::MAX as u128)).unwrap(), Value::UInt(u64::MAX));
    assert_eq!(to_value(&(i64::MIN as i128)).unwrap(), Value::Int(i64::MIN));
    assert_eq!(from_value::<i128>(Value::UInt(u64::MAX)).unwrap(), u64::MAX as i128);
    assert_eq!(from_value::<u128>(Value::Int(7)).unwrap(), 7);

    let err = serde_reason(to_value(&(1u128 << 64)).unwrap_err());
    assert!(err.contains("18446744073709551616"), "{err}");
    let err = to_value(&(i64::MIN as i128 - 1)).unwrap_err();
    assert!(matches!(err, Error::Serde { .. }));

    #[derive(Serialize)]
    struct Wide {
        ok: i128,
        bad: Vec<u128>,
    }
    let err = serde_reason(
        to_value(&Wide {
            ok: 1,
            bad: vec![1, u128::MAX],
        })
        .unwrap_err(),
    );
    assert!(err.starts_with("at `bad[1]`:"), "{err}");
}

#[test]
fn out_of_range_integers_are_refused_on_read() {
    let err = serde_reason(from_value::<u8>(Value::Int(300)).unwrap_err());
    assert!(err.contains("300"), "{err}");
    assert!(from_value::<u32>(Value::Int(-1)).is_err());
    assert!(from_value::<i64>(Value::UInt(1 << 63)).is_err());
    assert!(from_value::<u64>(Value::UInt(1 << 63)).is_ok());

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Small {
        n: Vec<i8>,
    }
    let v = Value::map([("n", Value::from(vec![Value::Int(1), Value::Int(200)]))]);
    let err = serde_reason(from_value::<Small>(v).unwrap_err());
    assert!(err.starts_with("at `n[1]`:"), "{err}");
}

#[test]
fn numbers_convert_only_where_lossless() {
    assert_eq!(from_value::<i32>(Value::Float(3.0)).unwrap(), 3);
    assert_eq!(
        from_value::<u64>(Value::Float(1e19)).unwrap(),
        10_000_000_000_000_000_000
    );
    assert_eq!(from_value::<i64>(Value::F32(-2.0)).unwrap(), -2);
    assert!(from_value::<i32>(Value::Float(3.5)).is_err());
    assert!(from_value::<i64>(Value::Float(f64::NAN)).is_err());
    assert!(from_value::<i64>(Value::Float(1e300)).is_err());
    assert!(from_value::<u8>(Value::Float(256.0)).is_err());

    assert_eq!(from_value::<f64>(Value::Int(3)).unwrap(), 3.0);
    assert_eq!(from_value::<f64>(Value::Int(1 << 53)).unwrap(), 9007199254740992.0);
    assert!(from_value::<f64>(Value::Int((1 << 53) + 1)).is_err());
    assert!(from_value::<f64>(Value::UInt(u64::MAX)).is_err());
    assert_eq!(from_value::<f32>(Value::Float(0.5)).unwrap(), 0.5);
    assert!(from_value::<f64>(Value::Bool(true)).is_err());
    assert!(from_value::<i64>(Value::Str("1".into())).is_err());
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
enum Shape {
    Empty,
    Circle(f64),
    Pair(i32, String),
    Rect { w: u32, h: u32 },
}

#[test]
fn enums_are_externally_tagged() {
    let cases = [
        (Shape::Empty, s("Empty")),
        (Shape::Circle(1.5), Value::map([("Circle", Value::Float(1.5))])),
        (
            Shape::Pair(1, "a".into()),
            Value::map([("Pair", Value::from(vec![Value::Int(1), s("a")]))]),
        ),
        (
            Shape::Rect { w: 2, h: 3 },
            Value::map([("Rect", Value::map([("w", Value::Int(2)), ("h", Value::Int(3))]))]),
        ),
    ];
    for (shape, want) in cases {
        assert_eq!(to_value(&shape).unwrap(), want);
        assert_eq!(round_trip(&shape), shape);
    }
    assert_eq!(enc(&to_value(&Shape::Empty).unwrap()), "a5456d707479");
    assert!(from_value::<Shape>(s("Hexagon")).is_err());
    assert!(from_value::<Shape>(Value::map([("Empty", Value::Int(1))])).is_err());
    assert!(from_value::<Shape>(Value::map([("Circle", Value::Nil), ("Empty", Value::Nil)])).is_err());
    assert!(from_value::<Shape>(s("Circle")).is_err());
    // `{"Empty": None}` is accepted for a unit variant.
    assert_eq!(
        from_value::<Shape>(Value::map([("Empty", Value::Nil)])).unwrap(),
        Shape::Empty
    );

    let err = serde_reason(from_value::<Shape>(Value::map([("Rect", Value::map([("w", s("x"))]))])).unwrap_err());
    assert!(err.starts_with("at `Rect.w`:"), "{err}");
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Inner {
    name: String,
    tags: Vec<String>,
    score: Option<f64>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Outer {
    id: u64,
    inner: Inner,
    items: Vec<Inner>,
    #[serde(with = "serde_bytes_compat")]
    blob: Vec<u8>,
    by_id: BTreeMap<u32, String>,
    nested: Option<Box<Outer>>,
    shape: Shape,
    newtype: Meters,
    tuple_struct: Point,
    unit_struct: Marker,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Meters(f64);

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Point(i32, i32);

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Marker;

/// `Vec<u8>` as msgpack bin, as `serde_bytes` would do it.
mod serde_bytes_compat {
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        <Vec<u8> as serde::Deserialize>::deserialize(d)
    }
}

fn sample() -> Outer {
    let inner = Inner {
        name: "n".into(),
        tags: vec!["a".into(), "b".into()],
        score: Some(0.25),
    };
    Outer {
        id: 7,
        inner: inner.clone(),
        items: vec![
            inner,
            Inner {
                name: "m".into(),
                tags: vec![],
                score: None,
            },
        ],
        blob: b"xyz".to_vec(),
        by_id: [(1, "one".into()), (20, "twenty".into())].into(),
        nested: Some(Box::new(Outer {
            id: 8,
            inner: Inner {
                name: String::new(),
                tags: vec![],
                score: None,
            },
            items: vec![],
            blob: vec![],
            by_id: BTreeMap::new(),
            nested: None,
            shape: Shape::Empty,
            newtype: Meters(0.0),
            tuple_struct: Point(0, 0),
            unit_struct: Marker,
        })),
        shape: Shape::Rect { w: 1, h: 2 },
        newtype: Meters(2.5),
        tuple_struct: Point(-1, 1),
        unit_struct: Marker,
    }
}

#[test]
fn nested_structs_round_trip() {
    let x = sample();
    assert_eq!(round_trip(&x), x);
    let v = to_value(&x).unwrap();

    // Field order is declaration order, like a Python dict built in that order.
    let keys: Vec<&str> = v.as_map().unwrap().iter().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "id",
            "inner",
            "items",
            "blob",
            "by_id",
            "nested",
            "shape",
            "newtype",
            "tuple_struct",
            "unit_struct"
        ]
    );
    assert_eq!(v.get("blob"), Some(&Value::Bin(Bytes::from_static(b"xyz"))));
    assert_eq!(enc(v.get("blob").unwrap()), "c40378797a");
    // Integer keys stay integers (Python `{1: "one", 20: "twenty"}`).
    assert_eq!(enc(v.get("by_id").unwrap()), "8201a36f6e6514a67477656e7479");
    assert_eq!(v.get("newtype"), Some(&Value::Float(2.5)));
    assert_eq!(
        v.get("tuple_struct"),
        Some(&Value::from(vec![Value::Int(-1), Value::Int(1)]))
    );
    assert_eq!(v.get("unit_struct"), Some(&Value::Nil));
    assert_eq!(
        v.get("items").unwrap().as_array().unwrap()[1].get("score"),
        Some(&Value::Nil)
    );

    // Bytes survive msgpack too.
    let bytes = msgpack::encode(&v).unwrap();
    let back: Outer = from_value(msgpack::decode(&bytes).unwrap()).unwrap();
    assert_eq!(back, x);
}

#[test]
fn vec_u8_reads_from_bin_or_array() {
    assert_eq!(
        from_value::<Vec<u8>>(Value::Bin(Bytes::from_static(b"ab"))).unwrap(),
        b"ab"
    );
    assert_eq!(
        from_value_ref::<Vec<u8>>(&Value::Bin(Bytes::from_static(b"ab"))).unwrap(),
        b"ab"
    );
    assert_eq!(
        from_value::<Vec<u8>>(Value::from(vec![Value::Int(1), Value::Int(2)])).unwrap(),
        [1, 2]
    );
    // A plain Vec<u8> serializes as a list of ints, as a Python list would be.
    assert_eq!(enc(&to_value(&vec![1u8, 2]).unwrap()), "920102");
}

#[test]
fn maps_keep_keys_as_produced() {
    let m = vec![
        (Value::Nil, Value::Int(1)),
        (Value::Bool(true), Value::Int(1)),
        (Value::Float(1.5), s("a")),
        (Value::from(vec![Value::Int(1), Value::Int(2)]), s("t")),
    ];
    let v = Value::Map(m.into());
    // A map with tuple keys from Rust: {(1, 2): "t"} as Python writes it.
    let tuple_keys: BTreeMap<(i32, i32), &str> = [((1, 2), "t")].into();
    assert_eq!(enc(&to_value(&tuple_keys).unwrap()), "81920102a174");
    let back: BTreeMap<(i32, i32), String> = from_value(dec("81920102a174")).unwrap();
    assert_eq!(back[&(1, 2)], "t");

    let hm: HashMap<String, Vec<i32>> = [("k".to_owned(), vec![1])].into();
    assert_eq!(round_trip(&hm), hm);

    // A Value with arbitrary keys survives the bridge unchanged.
    assert_eq!(to_value(&v).unwrap(), v);
    assert_eq!(from_value::<Value>(v.clone()).unwrap(), v);
}

#[test]
fn borrowed_reads_borrow() {
    let v = Value::map([
        ("name", s("zero-copy")),
        ("data", Value::Bin(Bytes::from_static(b"\x01\x02"))),
    ]);
    #[derive(Deserialize)]
    struct View<'a> {
        name: &'a str,
        data: &'a [u8],
    }
    let view: View<'_> = from_value_ref(&v).unwrap();
    assert_eq!(view.name, "zero-copy");
    assert_eq!(view.data, [1, 2]);
}

#[test]
fn structs_read_from_arrays_and_refuse_extras() {
    let f: Flat = from_value(Value::from(vec![
        Value::Int(5),
        Value::from(vec![Value::Bool(false), Value::Int(9)]),
    ]))
    .unwrap();
    assert_eq!(
        f,
        Flat {
            a: 5,
            b: (false, Some(9))
        }
    );
    // A tuple of two cannot take three elements.
    assert!(from_value::<(i32, i32)>(Value::from(vec![Value::Int(1), Value::Int(2), Value::Int(3)])).is_err());
    assert!(from_value::<(i32, i32)>(Value::from(vec![Value::Int(1)])).is_err());
    // Unknown struct keys are ignored (serde's default), missing ones refused.
    let extra = Value::map([
        ("a", Value::Int(1)),
        ("zzz", Value::Nil),
        ("b", Value::from(vec![Value::Bool(true), Value::Nil])),
    ]);
    assert_eq!(from_value::<Flat>(extra).unwrap().a, 1);
    let err = serde_reason(from_value::<Flat>(Value::map([("a", Value::Int(1))])).unwrap_err());
    assert!(err.contains("missing field `b`"), "{err}");
}

#[test]
fn error_paths_name_the_field() {
    let v = Value::map([
        ("id", Value::Int(1)),
        (
            "items",
            Value::from(vec![Value::map([
                ("name", s("a")),
                ("tags", Value::from(vec![s("x"), Value::Int(3)])),
                ("score", Value::Nil),
            ])]),
        ),
    ]);
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Partial {
        id: u64,
        items: Vec<Inner>,
    }
    let err = serde_reason(from_value::<Partial>(v.clone()).unwrap_err());
    assert!(
        err.starts_with("at `items[0].tags[1]`: invalid type: integer `3`"),
        "{err}"
    );
    let err = serde_reason(from_value_ref::<Partial>(&v).unwrap_err());
    assert!(err.starts_with("at `items[0].tags[1]`:"), "{err}");
    let err = serde_reason(from_value::<String>(Value::Int(1)).unwrap_err());
    assert_eq!(err, "invalid type: integer `1`, expected a string");
}

fn ext_value() -> Value {
    // datetime(2024,1,2,3,4,5) as Python writes it.
    dec("c7350394a86461746574696d65a86461746574696d65b3323032342d30312d30325430333a30343a3035ad66726f6d69736f666f726d6174")
}

#[test]
fn value_fields_keep_extensions() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Holder {
        when: Value,
        many: Vec<Value>,
        maybe: Option<Value>,
        single: f32,
    }
    let raw = Value::from(
        msgpack::decode(&hex::decode("d4630a").unwrap())
            .unwrap()
            .as_ext()
            .unwrap()
            .clone(),
    );
    let f32v = Value::F32(1.25);
    let h = Holder {
        when: ext_value(),
        many: vec![
            ext_value(),
            raw.clone(),
            f32v.clone(),
            Value::Bin(Bytes::from_static(b"b")),
        ],
        maybe: Some(ext_value()),
        single: 1.25,
    };
    let v = to_value(&h).unwrap();
    assert_eq!(v.get("when"), Some(&ext_value()));
    assert_eq!(v.get("many").unwrap().as_array().unwrap()[1], raw);
    assert_eq!(v.get("many").unwrap().as_array().unwrap()[2], f32v);
    assert_eq!(v.get("single"), Some(&Value::Float(1.25)));
    let back: Holder = from_value(v.clone()).unwrap();
    assert_eq!(back, h);
    let back: Holder = from_value_ref(&v).unwrap();
    assert_eq!(back, h);
    // Byte-exact through msgpack.
    let bytes = msgpack::encode(&v).unwrap();
    assert_eq!(msgpack::encode(&to_value(&back).unwrap()).unwrap(), bytes);
    assert!(enc(&v).contains(&enc(&ext_value())));
}

#[test]
fn extensions_survive_serde_buffering() {
    // Untagged enums and flatten buffer values inside serde; extensions must
    // come out whole.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    #[serde(untagged)]
    enum Either {
        Num(i64),
        Any(Value),
    }
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct WithRest {
        id: i64,
        #[serde(flatten)]
        rest: BTreeMap<String, Value>,
    }
    let e: Either = from_value(ext_value()).unwrap();
    assert_eq!(e, Either::Any(ext_value()));
    let v = Value::map([("id", Value::Int(1)), ("f", Value::F32(0.5)), ("when", ext_value())]);
    let w: WithRest = from_value(v.clone()).unwrap();
    assert_eq!(w.rest["when"], ext_value());
    assert_eq!(w.rest["f"], Value::F32(0.5));
    assert_eq!(to_value(&w).unwrap(), v);
}

#[test]
fn other_formats_see_code_and_payload_bytes() {
    let v = Value::from(vec![ext_value(), Value::F32(0.5)]);
    let json = serde_json::to_value(&v).unwrap();
    let arr = json.as_array().unwrap();
    assert_eq!(arr[0][0], 3);
    let payload: Vec<u8> = arr[0][1]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as u8)
        .collect();
    // The payload bytes are the msgpack of [module, name, iso, method].
    let payload_value = msgpack::decode(&payload).unwrap();
    assert_eq!(
        payload_value.as_array().unwrap()[2].as_str(),
        Some("2024-01-02T03:04:05")
    );
    assert_eq!(arr[1], 0.5);
}

#[test]
fn ext_payload_kinds_round_trip() {
    // Nested: an ext inside an ext payload (timezone holding a timedelta).
    let tz =
        dec("c7310193a86461746574696d65a874696d657a6f6e6591c71a0193a86461746574696d65a974696d6564656c74619300cd1c2000");
    assert_eq!(to_value(&tz).unwrap(), tz);
    assert_eq!(from_value::<Value>(tz.clone()).unwrap(), tz);
    assert_eq!(from_value_ref::<Value>(&tz).unwrap(), tz);
}

#[test]
fn reserved_newtype_names_are_refused() {
    struct Fake;
    impl Serialize for Fake {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_newtype_struct("$checkpointer::Ext", &1)
        }
    }
    assert!(matches!(to_value(&Fake), Err(Error::Serde { .. })));
    // And the bridge still works afterwards.
    assert_eq!(to_value(&ext_value()).unwrap(), ext_value());
}
