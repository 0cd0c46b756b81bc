use bytes::Bytes;

use super::*;
use crate::error::Error;
use crate::serde::value::{Ext, ExtPayload, Value};

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

fn round_trip(h: &str) -> Value {
    let bytes = unhex(h);
    let v = decode(&bytes).unwrap();
    assert_eq!(encode(&v).unwrap(), bytes, "re-encoding {h}");
    let shared = decode_bytes(&Bytes::from(bytes.clone())).unwrap();
    assert_eq!(shared, v, "decode_bytes {h}");
    assert_eq!(encode(&shared).unwrap(), bytes, "re-encoding decode_bytes {h}");
    v
}

/// Whether `s` lies inside `buf`.
fn inside(buf: &[u8], s: &[u8]) -> bool {
    let range = buf.as_ptr_range();
    range.contains(&s.as_ptr()) && s.as_ptr_range().end <= range.end
}

#[test]
fn zero_copy_decode_slices_the_input() {
    let long = "a string of more than twenty-four bytes, é included";
    let value = Value::map([
        ("short", Value::from("inline")),
        ("long", Value::from(long)),
        ("bin", Value::Bin(Bytes::from(vec![7_u8; 40]))),
        (
            "ext",
            Value::Ext(Box::new(
                Ext::from_decoded(5, Value::from(vec![Value::from(long)])).unwrap(),
            )),
        ),
        (
            "unknown",
            Value::Ext(Box::new(Ext::raw(42, Bytes::from(vec![1_u8; 30])))),
        ),
        (
            "list",
            Value::from((0..40).map(|i| format!("{i:030}")).collect::<Vec<_>>()),
        ),
    ]);
    let bytes = Bytes::from(encode(&value).unwrap());
    assert!(bytes.len() > 256, "long enough for decode's shared copy");
    for v in [decode_bytes(&bytes).unwrap(), decode(&bytes).unwrap()] {
        assert_eq!(v, value);
        assert_eq!(encode(&v).unwrap(), bytes);
    }
    let v = decode_bytes(&bytes).unwrap();
    let str_of = |v: &Value| v.as_str().unwrap().as_bytes().to_vec();
    assert!(inside(&bytes, v.get("long").unwrap().as_str().unwrap().as_bytes()));
    assert!(!inside(&bytes, v.get("short").unwrap().as_str().unwrap().as_bytes()));
    let Some(Value::Bin(bin)) = v.get("bin") else { panic!() };
    assert!(inside(&bytes, bin));
    let ext = v.get("ext").unwrap().as_ext().unwrap();
    let ExtPayload::Decoded(inner) = &ext.payload else {
        panic!("{ext:?}")
    };
    assert!(inside(
        &bytes,
        inner.as_array().unwrap()[0].as_str().unwrap().as_bytes()
    ));
    let ExtPayload::Raw(raw) = &v.get("unknown").unwrap().as_ext().unwrap().payload else {
        panic!()
    };
    assert!(inside(&bytes, raw));
    assert!(v
        .get("list")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .all(|s| inside(&bytes, s.as_str().unwrap().as_bytes())));
    // The slices outlive the buffer's other holders.
    let first = v.get("list").unwrap().as_array().unwrap()[0].clone();
    drop((v, bytes));
    assert_eq!(str_of(&first), format!("{:030}", 0).into_bytes());
    // A short input copies each long string on its own.
    let small = encode(&Value::from(long)).unwrap();
    assert_eq!(decode(&small).unwrap(), Value::from(long));
}

#[test]
fn scalars_match_python() {
    assert_eq!(round_trip("2a"), Value::Int(42));
    assert_eq!(round_trip("ff"), Value::Int(-1));
    assert_eq!(round_trip("ccc8"), Value::Int(200));
    assert_eq!(round_trip("d0df"), Value::Int(-33));
    assert_eq!(round_trip("d09c"), Value::Int(-100));
    assert_eq!(round_trip("ce00010000"), Value::Int(65536));
    assert_eq!(round_trip("d2ffff63c0"), Value::Int(-40000));
    assert_eq!(round_trip("cf0000000100000000"), Value::Int(1 << 32));
    assert_eq!(round_trip("cf8000000000000000"), Value::UInt(1 << 63));
    assert_eq!(round_trip("d38000000000000000"), Value::Int(i64::MIN));
    assert_eq!(round_trip("cb400c000000000000"), Value::Float(3.5));
    assert_eq!(round_trip("a568656c6c6f"), Value::from("hello"));
    assert_eq!(round_trip("a2c3a9"), Value::from("é"));
    round_trip(&format!("d928{}", "78".repeat(40)));
    round_trip(&format!(
        "dc0010{}",
        (0..16).map(|i| format!("{i:02x}")).collect::<String>()
    ));
    round_trip("82a16101a16292c3c0");
    round_trip("81920102a174");
    round_trip("81cb3ff8000000000000a161");
}

#[test]
fn ext_payloads_decode_as_data() {
    let v = round_trip("d80093a86275696c74696e73a37365749101");
    let Value::Ext(ext) = v else { panic!() };
    assert_eq!(ext.code, 0);
    assert!(matches!(ext.payload, ExtPayload::Decoded(_)));
    let snap = round_trip("c70307920102");
    let Value::Ext(ext) = snap else { panic!() };
    assert_eq!(ext.code, 7);
}

#[test]
fn non_canonical_ext_payload_kept_raw() {
    // ext 0 whose payload uses cc01 for the integer 1 (not Python's form)
    let bytes = unhex("c7030092cc01");
    let v = decode(&bytes).unwrap();
    assert!(matches!(
        &v,
        Value::Ext(ext) if matches!(**ext, Ext {
            payload: ExtPayload::Raw(_),
            ..
        })
    ));
    assert_eq!(encode(&v).unwrap(), bytes);
    // unknown code kept raw
    let bytes = unhex("d5630102");
    assert_eq!(encode(&decode(&bytes).unwrap()).unwrap(), bytes);
}

/// The decoder tells Python's form from a wider one at every width: an
/// extension payload in a wider form than needed is kept raw, one in the
/// smallest form is decoded. Both re-encode to the bytes read.
#[test]
fn canonical_form_detected_at_every_width() {
    // (header, filler byte, filler count, whether the header is the smallest form)
    let cases: &[(&str, &str, usize, bool)] = &[
        ("cc7f", "", 0, false),
        ("cc80", "", 0, true),
        ("cd00ff", "", 0, false),
        ("cd0100", "", 0, true),
        ("ce0000ffff", "", 0, false),
        ("ce00010000", "", 0, true),
        ("cf00000000ffffffff", "", 0, false),
        ("cf0000000100000000", "", 0, true),
        ("d0e0", "", 0, false),
        ("d0df", "", 0, true),
        ("d1ff80", "", 0, false),
        ("d1ff7f", "", 0, true),
        ("d2ffff8000", "", 0, false),
        ("d2ffff7fff", "", 0, true),
        ("d3ffffffff80000000", "", 0, false),
        ("d3ffffffff7fffffff", "", 0, true),
        ("d91f", "61", 31, false),
        ("d920", "61", 32, true),
        ("da00ff", "61", 255, false),
        ("da0100", "61", 256, true),
        ("db0000ffff", "61", 65535, false),
        ("db00010000", "61", 65536, true),
        ("c400", "", 0, true),
        ("c500ff", "07", 255, false),
        ("c50100", "07", 256, true),
        ("c60000ffff", "07", 65535, false),
        ("c600010000", "07", 65536, true),
        ("dc000f", "c0", 15, false),
        ("dc0010", "c0", 16, true),
        ("dd0000ffff", "c0", 65535, false),
        ("dd00010000", "c0", 65536, true),
        ("de000f", "c0", 30, false),
        ("de0010", "c0", 32, true),
        ("df0000ffff", "c0", 2 * 65535, false),
        ("df00010000", "c0", 2 * 65536, true),
        ("c7012a", "00", 1, false),
        ("c7032a", "00", 3, true),
        ("d42a", "00", 1, true),
        ("c800ff2a", "00", 255, false),
        ("c801002a", "00", 256, true),
        ("c90000ffff2a", "00", 65535, false),
        ("c9000100002a", "00", 65536, true),
    ];
    for &(header, filler, count, canonical) in cases {
        let payload = unhex(&format!("{header}{}", filler.repeat(count)));
        let framed = Ext {
            code: 7,
            payload: ExtPayload::Raw(Bytes::from(payload)),
        };
        let bytes = encode(&Value::Ext(Box::new(framed))).unwrap();
        let v = decode(&bytes).unwrap();
        let Value::Ext(ext) = &v else { panic!("{header}: {v:?}") };
        assert_eq!(matches!(ext.payload, ExtPayload::Decoded(_)), canonical, "{header}");
        assert_eq!(encode(&v).unwrap(), bytes, "{header}");
    }
}

/// Inputs every decode refuses: declared lengths past the end, a truncated
/// string, the reserved byte, a truncated float.
const MALFORMED: [&str; 9] = [
    "dbffffffff",
    "ddffffffff",
    "dfffffffff",
    "c9ffffffff00",
    "c6ffffffff",
    "92",
    "a5616263",
    "c1",
    "cb00",
];

#[test]
fn bounded_decoding() {
    for h in MALFORMED {
        assert!(matches!(decode(&unhex(h)), Err(Error::Serde { .. })), "{h}");
        let shared = Bytes::from(unhex(h));
        assert!(matches!(decode_bytes(&shared), Err(Error::Serde { .. })), "{h}");
    }
    let deep = [vec![0x91; MAX_DEPTH + 1], vec![0xc0]].concat();
    let err = decode(&deep).unwrap_err().to_string();
    assert!(err.contains("nesting"), "{err}");
    let err = decode_bytes(&Bytes::from(deep)).unwrap_err().to_string();
    assert!(err.contains("nesting"), "{err}");
    let ok = [vec![0x91; MAX_DEPTH], vec![0xc0]].concat();
    assert!(decode(&ok).is_ok());
    assert!(decode(&unhex("c0c0")).is_err());
    assert!(decode(&unhex("a2c328")).is_err());
}

/// What `encode` writes, `decode` reads: nesting is refused on writing
/// exactly where reading would refuse it (arrays, maps, decoded and raw
/// extension payloads).
#[test]
fn encoding_refuses_what_decoding_would() {
    fn nest(levels: usize, wrap: &dyn Fn(Value) -> Value) -> Value {
        (0..levels).fold(Value::Nil, |v, _| wrap(v))
    }
    let wraps: [&dyn Fn(Value) -> Value; 4] = [
        &|v| Value::Array(vec![v].into()),
        &|v| Value::Map(vec![(Value::Nil, v)].into()),
        &|v| Value::Ext(Box::new(Ext::delta_snapshot(v))),
        &|v| Value::Array(vec![Value::Ext(Box::new(Ext::delta_snapshot(v)))].into()),
    ];
    for wrap in wraps {
        for levels in [1, 64, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2, 1000] {
            let v = nest(levels, wrap);
            let written = encode(&v);
            let depth_of = |v: &Value| {
                let mut d = 0;
                let mut cur = v;
                loop {
                    cur = match cur {
                        Value::Array(items) if !items.is_empty() => &items[0],
                        Value::Map(entries) if !entries.is_empty() => &entries[0].1,
                        Value::Ext(e) => match e.decoded() {
                            Some(inner) => inner,
                            None => break,
                        },
                        _ => break,
                    };
                    d += 1;
                }
                d
            };
            if depth_of(&v) <= MAX_DEPTH {
                let bytes = written.unwrap_or_else(|e| panic!("{levels}: {e}"));
                assert_eq!(decode(&bytes).unwrap(), v, "{levels}");
            } else {
                let err = written.unwrap_err().to_string();
                assert!(err.contains("could not be read back"), "{err}");
            }
        }
    }
    // A raw extension payload (code 0..=7) too deep to read is refused.
    let deep_payload = [vec![0x91; MAX_DEPTH], vec![0xc0]].concat();
    let raw = Value::Ext(Box::new(Ext::raw(7, Bytes::from(deep_payload.clone()))));
    assert!(decode(&encode(&Value::Ext(Box::new(Ext::raw(7, Bytes::from(vec![0x91, 0xc0]))))).unwrap()).is_ok());
    assert!(encode(&raw).is_err());
    let framed = [vec![0xc9, 0, 0, 0, 129, 7], deep_payload.clone()].concat();
    assert!(decode(&framed).unwrap_err().to_string().contains("nesting"));
    // Other codes are opaque bytes, read as they are.
    let opaque = Value::Ext(Box::new(Ext::raw(42, Bytes::from(deep_payload))));
    assert_eq!(decode(&encode(&opaque).unwrap()).unwrap(), opaque);
}

#[test]
fn strings_are_checked_as_utf8_at_every_length() {
    for n in 0..70 {
        for at in 0..n.max(1) {
            let mut s = vec![b'a'; n];
            assert!(decode(&encode(&Value::from(String::from_utf8(s.clone()).unwrap())).unwrap()).is_ok());
            if n == 0 {
                continue;
            }
            // A lone continuation byte anywhere is refused; a two-byte
            // character anywhere is accepted.
            s[at] = 0x80;
            let mut framed = encode(&Value::from("x".repeat(n))).unwrap();
            let header = framed.len() - n;
            framed[header..].copy_from_slice(&s);
            assert!(decode(&framed).is_err(), "{n} {at}");
            assert!(decode_bytes(&Bytes::from(framed.clone())).is_err(), "{n} {at}");
            if at + 1 < n {
                framed[header + at] = 0xc3;
                framed[header + at + 1] = 0xa9;
                let v = decode(&framed).unwrap();
                assert_eq!(v.as_str().unwrap().chars().filter(|&c| c == 'é').count(), 1, "{n} {at}");
            }
        }
    }
}

/// `validate` accepts exactly what `decode` accepts, failing with the same
/// message: on every prefix and every one-byte change of encoded values
/// (strings of every width, containers, LangGraph's extension codes, raw
/// extensions, deep nesting), and on the inputs above.
#[test]
fn validate_agrees_with_decode() {
    use super::validate;
    fn agree(bytes: &[u8], limits: DecodeLimits) {
        let decoded = super::decode_with(bytes, limits).map(drop).map_err(|e| e.to_string());
        let validated = validate(bytes, limits).map_err(|e| e.to_string());
        assert_eq!(validated, decoded, "{}", hex::encode(bytes));
    }
    let mut samples: Vec<Vec<u8>> = MALFORMED.iter().chain(&["c0c0", "a2c328"]).map(|h| unhex(h)).collect();
    let long = "x".repeat(300);
    let inner = Value::Map(
        [
            (Value::from("s"), Value::from("short")),
            (Value::from("l"), Value::from(long.as_str())),
            (
                Value::from("n"),
                Value::Array(
                    [Value::Int(-5), Value::Int(70_000), Value::Float(1.5)]
                        .into_iter()
                        .collect(),
                ),
            ),
            (Value::from("b"), Value::Bin(Bytes::from_static(&[1, 2, 3]))),
        ]
        .into_iter()
        .collect(),
    );
    let ext = Value::Ext(Box::new(Ext {
        code: 5,
        payload: ExtPayload::Decoded(Box::new(inner.clone())),
    }));
    let raw = Value::Ext(Box::new(Ext::raw(42, Bytes::from_static(b"opaque"))));
    let top = Value::Array([inner, ext, raw, Value::Nil, Value::Bool(true)].into_iter().collect());
    samples.push(encode(&top).unwrap());
    samples.push([vec![0x91; MAX_DEPTH + 1], vec![0xc0]].concat());
    samples.push([vec![0x91; MAX_DEPTH], vec![0xc0]].concat());
    // a LangGraph extension whose payload nests too deep, and one whose
    // payload is malformed (kept raw by the decoder)
    samples.push([vec![0xc7, 131, 0x05], vec![0x91; 130], vec![0xc0]].concat());
    samples.push(unhex("d50592c0"));
    for sample in &samples {
        for limits in [DecodeLimits::default(), DecodeLimits { max_depth: 3 }] {
            for end in 0..=sample.len() {
                agree(&sample[..end], limits);
            }
            for i in 0..sample.len().min(400) {
                for byte in [0x00, 0x7f, 0x80, 0x91, 0xa1, 0xc1, 0xc7, 0xd9, 0xdc, 0xde, 0xff] {
                    let mut changed = sample.clone();
                    changed[i] = byte;
                    agree(&changed, limits);
                }
            }
        }
    }
}
