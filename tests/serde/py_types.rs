//! Python types: every builder produces the bytes Python's serializer writes
//! (spec §4.8 plus vectors taken from langgraph-checkpoint 4.3.2,
//! langgraph 1.2.24 and langchain-core 1.8.3), and every reader reads them
//! back.

use std::fmt::Debug;

use checkpointer::serde::py::{
    Command, Date, DateTime, Decimal, Deque, Enum, FrozenSet, Interrupt, Message, MessageKind, Object, ObjectKind,
    Send, Set, Time, TimeDelta, Timezone, TzInfo, Uuid, ZoneInfo,
};
use checkpointer::serde::{from_value, msgpack, to_value, Value};
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

fn map(entries: &[(&str, Value)]) -> Value {
    Value::map(entries.iter().cloned())
}

/// `x` builds exactly `hex`, and reading `hex` gives `x` back, through the
/// inherent methods, the conversions and the serde bridge alike.
fn check<T>(hex: &str, x: T, to: impl Fn(&T) -> Value, from: impl Fn(&Value) -> checkpointer::Result<T>)
where
    T: PartialEq + Debug + Serialize + serde::de::DeserializeOwned,
{
    assert_eq!(enc(&to(&x)), hex, "building {x:?}");
    let value = dec(hex);
    assert_eq!(from(&value).unwrap(), x, "reading {hex}");
    assert_eq!(to_value(&x).unwrap(), value, "serializing {x:?}");
    assert_eq!(from_value::<T>(value).unwrap(), x, "deserializing {hex}");
}

fn check_dt(hex: &str, x: DateTime) {
    check(hex, x, DateTime::to_value, DateTime::from_value);
    assert_eq!(Value::from(x), dec(hex));
    assert_eq!(DateTime::try_from(&dec(hex)).unwrap(), x);
}

fn dt(y: i32, mo: u8, d: u8, h: u8, mi: u8, sec: u8, us: u32) -> DateTime {
    Date::new(y, mo, d).unwrap().and_hms_micro(h, mi, sec, us).unwrap()
}

#[test]
fn datetimes() {
    check_dt(
        "c7430394a86461746574696d65a86461746574696d65d920323032342d30312d30325430333a30343a30352e3030303637382b30303a3030ad66726f6d69736f666f726d6174",
        dt(2024, 1, 2, 3, 4, 5, 678).with_offset(0).unwrap(),
    );
    check_dt(
        "c7350394a86461746574696d65a86461746574696d65b3323032342d30312d30325430333a30343a3035ad66726f6d69736f666f726d6174",
        dt(2024, 1, 2, 3, 4, 5, 0),
    );
    check_dt(
        "c73b0394a86461746574696d65a86461746574696d65b9323032342d30312d30325430333a30343a30352d30353a3330ad66726f6d69736f666f726d6174",
        dt(2024, 1, 2, 3, 4, 5, 0).with_offset(-(5 * 3600 + 30 * 60)).unwrap(),
    );
    // Offsets with seconds: +05:00:07.
    check_dt(
        "c73e0394a86461746574696d65a86461746574696d65bc323032342d30312d30325430333a30343a30352b30353a30303a3037ad66726f6d69736f666f726d6174",
        dt(2024, 1, 2, 3, 4, 5, 0).with_offset(5 * 3600 + 7).unwrap(),
    );
    check_dt(
        "c7460394a86461746574696d65a86461746574696d65d923323032342d30322d32395432333a35393a35392e3030303030312d30333a30343a3035ad66726f6d69736f666f726d6174",
        dt(2024, 2, 29, 23, 59, 59, 1).with_offset(-(3 * 3600 + 4 * 60 + 5)).unwrap(),
    );
    check_dt(
        "c7350394a86461746574696d65a86461746574696d65b3303030312d30312d30315430303a30303a3030ad66726f6d69736f666f726d6174",
        dt(1, 1, 1, 0, 0, 0, 0),
    );
    check_dt(
        "c73c0394a86461746574696d65a86461746574696d65ba393939392d31322d33315432333a35393a35392e393939393939ad66726f6d69736f666f726d6174",
        dt(9999, 12, 31, 23, 59, 59, 999_999),
    );
    // A datetime with a ZoneInfo is written with the offset in force.
    check_dt(
        "c73b0394a86461746574696d65a86461746574696d65b9323032342d30372d30325430333a30343a30352b30323a3030ad66726f6d69736f666f726d6174",
        dt(2024, 7, 2, 3, 4, 5, 0).with_offset(7200).unwrap(),
    );
}

#[test]
fn isoformat_parsing_is_as_lenient_as_python() {
    let base = dt(2024, 1, 2, 3, 4, 5, 0);
    let cases = [
        ("2024-01-02T03:04:05.1234567", dt(2024, 1, 2, 3, 4, 5, 123_456)),
        ("2024-01-02T03:04:05.12", dt(2024, 1, 2, 3, 4, 5, 120_000)),
        ("2024-01-02 03:04", dt(2024, 1, 2, 3, 4, 0, 0)),
        ("2024-01-02T03", dt(2024, 1, 2, 3, 0, 0, 0)),
        ("2024-01-02", dt(2024, 1, 2, 0, 0, 0, 0)),
        ("2024-01-02T03:04:05Z", base.with_offset(0).unwrap()),
        ("2024-01-02T03:04:05+0530", base.with_offset(19800).unwrap()),
        ("2024-01-02T03:04:05+05", base.with_offset(18000).unwrap()),
        ("2024-01-02x03:04:05", base),
        ("20240102T030405", base),
    ];
    for (text, want) in cases {
        assert_eq!(DateTime::parse_isoformat(text).unwrap(), want, "{text}");
    }
    for bad in [
        "2024-01-02T24:00:00",
        "2024-02-30",
        "2024-1-2",
        "2024-01-02T03:04:05+24:00",
        "2024-01-02T03:04:05.",
        "2024-01-02T03:04:05 trailing",
        "0000-01-01",
        "",
    ] {
        let err = DateTime::parse_isoformat(bad).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{bad}: {err:?}");
    }
    // Python allows sub-second offsets; this type refuses them explicitly.
    let err = DateTime::parse_isoformat("2024-01-02T03:04:05+05:00:00.000007").unwrap_err();
    assert!(err.to_string().contains("fractional"), "{err}");
}

#[test]
fn datetime_builders_check_ranges() {
    assert!(Date::new(2023, 2, 29).is_err());
    assert!(Date::new(2024, 13, 1).is_err());
    assert!(Date::new(0, 1, 1).is_err());
    assert!(Date::new(10000, 1, 1).is_err());
    assert!(Date::new(2024, 1, 1).unwrap().and_hms_micro(24, 0, 0, 0).is_err());
    assert!(Date::new(2024, 1, 1).unwrap().and_hms_micro(0, 0, 60, 0).is_err());
    assert!(Date::new(2024, 1, 1)
        .unwrap()
        .and_hms_micro(0, 0, 0, 1_000_000)
        .is_err());
    assert!(dt(2024, 1, 1, 0, 0, 0, 0).with_offset(86_400).is_err());
    assert!(dt(2024, 1, 1, 0, 0, 0, 0).with_offset(-86_399).is_ok());
    let bad = DateTime {
        month: 2,
        day: 30,
        ..dt(2024, 1, 1, 0, 0, 0, 0)
    };
    assert!(bad.validate().is_err());
    assert_eq!(dt(2024, 1, 2, 3, 4, 5, 6).to_string(), "2024-01-02T03:04:05.000006");
}

#[test]
fn dates() {
    let cases = [
        ("c7150193a86461746574696d65a46461746593cd07e80102", (2024, 1, 2)),
        ("c7130193a86461746574696d65a46461746593010101", (1, 1, 1)),
        ("c7150193a86461746574696d65a46461746593cd270f0c1f", (9999, 12, 31)),
        ("c7150193a86461746574696d65a46461746593cd07e8021d", (2024, 2, 29)),
    ];
    for (hex, (y, m, d)) in cases {
        check(hex, Date::new(y, m, d).unwrap(), Date::to_value, Date::from_value);
    }
}

#[test]
fn times() {
    check(
        "c7410293a86461746574696d65a474696d6586a4686f757201a66d696e75746502a67365636f6e6403ab6d6963726f7365636f6e6404a6747a696e666fc0a4666f6c6400",
        Time::new(1, 2, 3, 4).unwrap(),
        Time::to_value,
        Time::from_value,
    );
    check(
        "c7410293a86461746574696d65a474696d6586a4686f757201a66d696e75746502a67365636f6e6403ab6d6963726f7365636f6e6400a6747a696e666fc0a4666f6c6401",
        Time {
            fold: true,
            ..Time::new(1, 2, 3, 0).unwrap()
        },
        Time::to_value,
        Time::from_value,
    );
    check(
        "c7760293a86461746574696d65a474696d6586a4686f757217a66d696e7574653ba67365636f6e643bab6d6963726f7365636f6e64ce000f423fa6747a696e666fc72f0193a86461746574696d65a874696d657a6f6e6591c7180193a86461746574696d65a974696d6564656c746193000000a4666f6c6400",
        Time::new(23, 59, 59, 999_999)
            .unwrap()
            .with_tzinfo(TzInfo::Timezone(Timezone::utc())),
        Time::to_value,
        Time::from_value,
    );
    check(
        "c7630293a86461746574696d65a474696d6586a4686f757201a66d696e75746502a67365636f6e6403ab6d6963726f7365636f6e6400a6747a696e666fc7200093a87a6f6e65696e666fa85a6f6e65496e666fac4575726f70652f5061726973a4666f6c6400",
        Time::new(1, 2, 3, 0)
            .unwrap()
            .with_tzinfo(TzInfo::ZoneInfo(ZoneInfo::new("Europe/Paris"))),
        Time::to_value,
        Time::from_value,
    );
    check(
        "c7760293a86461746574696d65a474696d6586a4686f75720ca66d696e75746500a67365636f6e6400ab6d6963726f7365636f6e6400a6747a696e666fc7330193a86461746574696d65a874696d657a6f6e6592c71a0193a86461746574696d65a974696d6564656c74619300cd151800a158a4666f6c6400",
        Time::new(12, 0, 0, 0)
            .unwrap()
            .with_tzinfo(TzInfo::Timezone(Timezone::from_offset_seconds(5400).unwrap().with_name("X"))),
        Time::to_value,
        Time::from_value,
    );
    // Python fills missing keyword arguments with defaults; unknown ones fail.
    let partial = Object::dataclass("datetime", "time").field("hour", 5).to_value();
    assert_eq!(Time::from_value(&partial).unwrap(), Time::new(5, 0, 0, 0).unwrap());
    let unknown = Object::dataclass("datetime", "time").field("zzz", 5).to_value();
    assert!(Time::from_value(&unknown).is_err());
    let out_of_range = Object::dataclass("datetime", "time").field("minute", 60).to_value();
    assert!(Time::from_value(&out_of_range).is_err());
}

#[test]
fn timedeltas() {
    let cases = [
        ("c7180193a86461746574696d65a974696d6564656c746193010203", (1, 2, 3)),
        (
            "c71c0193a86461746574696d65a974696d6564656c746193ffce0001517f00",
            (-1, 86399, 0),
        ),
        ("c7180193a86461746574696d65a974696d6564656c746193fd0005", (-3, 0, 5)),
        (
            "c71a0193a86461746574696d65a974696d6564656c74619301cd0e1000",
            (1, 3600, 0),
        ),
        (
            "c7240193a86461746574696d65a974696d6564656c746193ce3b9ac9ffce0001517fce000f423f",
            (999_999_999, 86399, 999_999),
        ),
        (
            "c71c0193a86461746574696d65a974696d6564656c746193d2c46536010000",
            (-999_999_999, 0, 0),
        ),
    ];
    for (hex, (days, seconds, microseconds)) in cases {
        let td = TimeDelta {
            days,
            seconds,
            microseconds,
        };
        check(hex, td, TimeDelta::to_value, TimeDelta::from_value);
    }
    // Normalised as Python does it.
    assert_eq!(
        TimeDelta::new(0, -1, 0).unwrap(),
        TimeDelta {
            days: -1,
            seconds: 86399,
            microseconds: 0
        }
    );
    assert_eq!(
        TimeDelta::from_seconds(90000).unwrap(),
        TimeDelta {
            days: 1,
            seconds: 3600,
            microseconds: 0
        }
    );
    assert_eq!(
        TimeDelta::new(-3, 0, 5).unwrap().total_microseconds(),
        -3 * 86_400_000_000 + 5
    );
    assert_eq!(
        TimeDelta::from_microseconds(-1).unwrap(),
        TimeDelta {
            days: -1,
            seconds: 86399,
            microseconds: 999_999
        }
    );
    assert!(TimeDelta::new(1_000_000_000, 0, 0).is_err());
    assert!(TimeDelta::new(-999_999_999, -1, 0).is_err());
    // An unnormalised struct is written normalised (timedelta(seconds=90000)).
    let loose = TimeDelta {
        days: 0,
        seconds: 90000,
        microseconds: 0,
    };
    assert_eq!(
        enc(&loose.to_value()),
        "c71a0193a86461746574696d65a974696d6564656c74619301cd0e1000"
    );
    // And Python's constructor normalises what it reads, so do we.
    let raw = dec("c71c0193a86461746574696d65a974696d6564656c74619300ce00015f9000");
    assert_eq!(
        TimeDelta::from_value(&raw).unwrap(),
        TimeDelta {
            days: 1,
            seconds: 3600,
            microseconds: 0
        }
    );
}

#[test]
fn timezones_and_zoneinfo() {
    let cases = [
        (
            "c7310193a86461746574696d65a874696d657a6f6e6591c71a0193a86461746574696d65a974696d6564656c74619300cd1c2000",
            Timezone::from_offset_seconds(7200).unwrap(),
        ),
        (
            "c72f0193a86461746574696d65a874696d657a6f6e6591c7180193a86461746574696d65a974696d6564656c746193000000",
            Timezone::utc(),
        ),
        (
            "c7330193a86461746574696d65a874696d657a6f6e6591c71c0193a86461746574696d65a974696d6564656c746193ffce0001042800",
            Timezone::from_offset_seconds(-(5 * 3600 + 30 * 60)).unwrap(),
        ),
        (
            "c7360193a86461746574696d65a874696d657a6f6e6592c71a0193a86461746574696d65a974696d6564656c74619300cd1c2000a443455354",
            Timezone::from_offset_seconds(7200).unwrap().with_name("CEST"),
        ),
    ];
    for (hex, tz) in cases {
        check(hex, tz, Timezone::to_value, Timezone::from_value);
    }
    assert_eq!(
        Timezone::from_offset_seconds(-19800).unwrap().offset_seconds(),
        Some(-19800)
    );
    assert!(Timezone::from_offset_seconds(86_400).is_err());

    check(
        "c7200093a87a6f6e65696e666fa85a6f6e65496e666fac4575726f70652f5061726973",
        ZoneInfo::new("Europe/Paris"),
        ZoneInfo::to_value,
        ZoneInfo::from_value,
    );
}

#[test]
fn uuids_and_decimals() {
    check(
        "c72d0093a475756964a455554944d9203132333435363738313233343536373831323334353637383132333435363738",
        Uuid("12345678-1234-5678-1234-567812345678".parse().unwrap()),
        Uuid::to_value,
        Uuid::from_value,
    );
    check(
        "c72d0093a475756964a455554944d9203030303030303030303030303030303030303030303030303030303030303030",
        Uuid(uuid::Uuid::nil()),
        Uuid::to_value,
        Uuid::from_value,
    );
    check(
        "c72d0093a475756964a455554944d9206138303938633161663836653131646162643161303031313234343462653165",
        Uuid::from(uuid::Uuid::parse_str("a8098c1a-f86e-11da-bd1a-00112444be1e").unwrap()),
        Uuid::to_value,
        Uuid::from_value,
    );
    for (hex, text) in [
        ("c7160093a7646563696d616ca7446563696d616ca4312e3130", "1.10"),
        ("c7170093a7646563696d616ca7446563696d616ca52d31452b33", "-1E+3"),
        ("c7150093a7646563696d616ca7446563696d616ca34e614e", "NaN"),
        ("c7180093a7646563696d616ca7446563696d616ca62d302e303030", "-0.000"),
    ] {
        check(hex, Decimal::new(text).unwrap(), Decimal::to_value, Decimal::from_value);
    }
    for ok in ["0", ".5", "5.", "+1e-7", "Infinity", "-inf", "sNaN12", "1E5"] {
        assert!(Decimal::new(ok).is_ok(), "{ok}");
    }
    for bad in ["", ".", "1..2", "1e", "e5", "abc", "1.0.0", " 1", "nan x", "--1"] {
        assert!(Decimal::new(bad).is_err(), "{bad}");
    }
    assert_eq!(Decimal::from(-12).as_str(), "-12");
}

#[test]
fn sets_frozensets_deques() {
    let set = Set(vec![1i64]);
    assert_eq!(enc(&set.to_value().unwrap()), "d80093a86275696c74696e73a37365749101");
    assert_eq!(
        Set::<i64>::from_value(&dec("d80093a86275696c74696e73a37365749101")).unwrap(),
        set
    );
    let strs: Set<String> = ["only".to_owned()].into_iter().collect();
    assert_eq!(
        enc(&strs.to_value().unwrap()),
        "c7140093a86275696c74696e73a373657491a46f6e6c79"
    );
    assert_eq!(
        enc(&Set::<i64>(vec![]).to_value().unwrap()),
        "c70f0093a86275696c74696e73a373657490"
    );

    let fs = FrozenSet(vec!["a".to_owned()]);
    assert_eq!(
        enc(&fs.to_value().unwrap()),
        "c7170093a86275696c74696e73a966726f7a656e73657491a161"
    );
    assert_eq!(
        FrozenSet::<String>::from_value(&dec("c7170093a86275696c74696e73a966726f7a656e73657491a161")).unwrap(),
        fs
    );
    assert_eq!(
        enc(&FrozenSet::<()>(vec![]).to_value().unwrap()),
        "c7150093a86275696c74696e73a966726f7a656e73657490"
    );

    let dq = Deque(vec![1u8, 2]);
    assert_eq!(
        enc(&dq.to_value().unwrap()),
        "c7160093ab636f6c6c656374696f6e73a56465717565920102"
    );
    assert_eq!(
        Deque::<u8>::from_value(&dec("c7160093ab636f6c6c656374696f6e73a56465717565920102")).unwrap(),
        dq
    );
    // deque(maxlen=…) is written without its maxlen.
    assert_eq!(
        Deque::<i32>::from_value(&dec("c7150093ab636f6c6c656374696f6e73a564657175659101"))
            .unwrap()
            .0,
        [1]
    );

    // The classes are distinct, and items must fit `T`.
    assert!(FrozenSet::<i64>::from_value(&dec("d80093a86275696c74696e73a37365749101")).is_err());
    assert!(Set::<String>::from_value(&dec("d80093a86275696c74696e73a37365749101")).is_err());
    assert_eq!(
        Value::try_from(&set).unwrap(),
        dec("d80093a86275696c74696e73a37365749101")
    );
}

#[test]
fn enums() {
    for (hex, e) in [
        (
            "c7110093a85f5f6d61696e5f5fa5436f6c6f7201",
            Enum::new("__main__", "Color", 1),
        ),
        ("c70f0093a85f5f6d61696e5f5fa25345a161", Enum::new("__main__", "SE", "a")),
        ("c70e0093a85f5f6d61696e5f5fa2494501", Enum::new("__main__", "IE", 1)),
    ] {
        check(hex, e, Enum::to_value, Enum::from_value);
    }
}

#[test]
fn dataclasses_namedtuples_pydantic() {
    // namedtuple P(x=1, y="a") and dataclass DC(a=1, b="z") share ext 2.
    check(
        "c7140293a85f5f6d61696e5f5fa15082a17801a179a161",
        Object::dataclass("__main__", "P").field("x", 1).field("y", "a"),
        Object::to_value,
        Object::from_value,
    );
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct DC {
        a: i64,
        b: String,
    }
    let dc = Object::from_struct(ObjectKind::Dataclass, "__main__", "DC", &DC { a: 1, b: "z".into() }).unwrap();
    check(
        "c7150293a85f5f6d61696e5f5fa2444382a16101a162a17a",
        dc.clone(),
        Object::to_value,
        Object::from_value,
    );
    assert_eq!(dc.to_struct::<DC>().unwrap(), DC { a: 1, b: "z".into() });
    assert_eq!(dc.get("b"), Some(&s("z")));
    assert!(Object::from_struct(ObjectKind::Dataclass, "m", "C", &5).is_err());

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct M {
        a: i64,
        b: Vec<i64>,
    }
    let m = Object::from_struct(ObjectKind::PydanticV2, "__main__", "M", &M { a: 1, b: vec![2] }).unwrap();
    check(
        "c7280594a85f5f6d61696e5f5fa14d82a16101a1629102b36d6f64656c5f76616c69646174655f6a736f6e",
        m.clone(),
        Object::to_value,
        Object::from_value,
    );
    assert_eq!(m.to_struct::<M>().unwrap(), M { a: 1, b: vec![2] });
    assert_eq!(
        Object::pydantic("__main__", "M").field("a", 1).field("b", vec![2i64]),
        m
    );
    // A pydantic v1 model (ext 4) is not a v2 model.
    assert!(Object::from_value(&dec("c7110493a85f5f6d61696e5f5fa2563181a16101")).is_err());
    // The kind is read from the extension and written back with it.
    assert_eq!(
        Object::from_value(&dec(&enc(&m.to_value()))).unwrap().kind,
        ObjectKind::PydanticV2
    );
    let as_dataclass = Object {
        kind: ObjectKind::Dataclass,
        ..m.clone()
    };
    assert_ne!(as_dataclass, m);
    check(
        "c7140293a85f5f6d61696e5f5fa14d82a16101a1629102",
        as_dataclass,
        Object::to_value,
        Object::from_value,
    );
    assert_eq!(ObjectKind::from_code(2), Some(ObjectKind::Dataclass));
    assert_eq!(ObjectKind::from_code(5), Some(ObjectKind::PydanticV2));
    assert_eq!(ObjectKind::from_code(4), None);
    assert_eq!(ObjectKind::PydanticV2.code(), 5);
}

#[test]
fn langchain_messages() {
    let human = "c7880594bd6c616e67636861696e5f636f72652e6d657373616765732e68756d616eac48756d616e4d65737361676586a7636f6e74656e74a26869b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65c0a26964a131b36d6f64656c5f76616c69646174655f6a736f6e";
    check(
        human,
        Message::human("hi").with_id("1"),
        Message::to_value,
        Message::from_value,
    );
    check(
        "c7ae0594ba6c616e67636861696e5f636f72652e6d657373616765732e6169a941494d65737361676589a7636f6e74656e74a2796fb16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a26169a46e616d65c0a26964c0aa746f6f6c5f63616c6c7390b2696e76616c69645f746f6f6c5f63616c6c7390ae75736167655f6d65746164617461c0b36d6f64656c5f76616c69646174655f6a736f6e",
        Message::ai("yo"),
        Message::to_value,
        Message::from_value,
    );
    check(
        "c78b0594be6c616e67636861696e5f636f72652e6d657373616765732e73797374656dad53797374656d4d65737361676586a7636f6e74656e74a3737973b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a673797374656da46e616d65c0a26964c0b36d6f64656c5f76616c69646174655f6a736f6e",
        Message::system("sys"),
        Message::to_value,
        Message::from_value,
    );
    check(
        "c7ac0594bc6c616e67636861696e5f636f72652e6d657373616765732e746f6f6cab546f6f6c4d65737361676589a7636f6e74656e74a172b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a4746f6f6ca46e616d65c0a26964c0ac746f6f6c5f63616c6c5f6964a26331a86172746966616374c0a6737461747573a773756363657373b36d6f64656c5f76616c69646174655f6a736f6e",
        Message::tool("r", "c1"),
        Message::to_value,
        Message::from_value,
    );
    // AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}], id="a1")
    let call = map(&[
        ("name", s("f")),
        ("args", map(&[("x", Value::Int(1))])),
        ("id", s("c1")),
        ("type", s("tool_call")),
    ]);
    let ai = Message::ai("").with_id("a1").with_field("tool_calls", vec![call]);
    check(
        "c7d40594ba6c616e67636861696e5f636f72652e6d657373616765732e6169a941494d65737361676589a7636f6e74656e74a0b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a26169a46e616d65c0a26964a26131aa746f6f6c5f63616c6c739184a46e616d65a166a46172677381a17801a26964a26331a474797065a9746f6f6c5f63616c6cb2696e76616c69645f746f6f6c5f63616c6c7390ae75736167655f6d65746164617461c0b36d6f64656c5f76616c69646174655f6a736f6e",
        ai.clone(),
        Message::to_value,
        Message::from_value,
    );
    assert_eq!(ai.field("tool_calls").unwrap().as_array().unwrap().len(), 1);
    // HumanMessage([{"type": "text", "text": "hi"}], name="bob")
    let blocks = Message::human(vec![map(&[("type", s("text")), ("text", s("hi"))])]).with_name("bob");
    check(
        "c79b0594bd6c616e67636861696e5f636f72652e6d657373616765732e68756d616eac48756d616e4d65737361676586a7636f6e74656e749182a474797065a474657874a474657874a26869b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65a3626f62a26964c0b36d6f64656c5f76616c69646174655f6a736f6e",
        blocks.clone(),
        Message::to_value,
        Message::from_value,
    );
    assert_eq!(blocks.text(), None);

    let read = Message::from_value(&dec(human)).unwrap();
    assert_eq!(read.kind, MessageKind::Human);
    assert_eq!(read.text(), Some("hi"));
    assert_eq!(read.id.as_deref(), Some("1"));
    // Other pydantic models are not messages.
    assert!(Message::from_value(&dec(
        "c7280594a85f5f6d61696e5f5fa14d82a16101a1629102b36d6f64656c5f76616c69646174655f6a736f6e"
    ))
    .is_err());
}

#[test]
fn langgraph_types() {
    check(
        "c7200193af6c616e6767726170682e7479706573a453656e6492a46e6f646581a17801",
        Send::new("node", map(&[("x", Value::Int(1))])),
        Send::to_value,
        Send::from_value,
    );
    // Send("n", 1, timeout=5.0) stores the TimeoutPolicy Python built from it.
    let policy = Object::dataclass("langgraph.types", "TimeoutPolicy")
        .field("run_timeout", 5.0)
        .field("idle_timeout", Value::Nil)
        .field("refresh_on", "auto");
    check(
        "c7700193af6c616e6767726170682e7479706573a453656e6493a16e01c7530293af6c616e6767726170682e7479706573ad54696d656f7574506f6c69637983ab72756e5f74696d656f7574cb4014000000000000ac69646c655f74696d656f7574c0aa726566726573685f6f6ea46175746f",
        Send::new("n", 1).with_timeout(policy),
        Send::to_value,
        Send::from_value,
    );

    check(
        "c73c0293af6c616e6767726170682e7479706573a9496e7465727275707483a576616c7565a171a26964a3616263af726573706f6e73655f736368656d61c0",
        Interrupt::new("q", "abc"),
        Interrupt::to_value,
        Interrupt::from_value,
    );
    check(
        "c7470293af6c616e6767726170682e7479706573a9496e7465727275707483a576616c7565a171a26964ae706c616365686f6c6465722d6964af726573706f6e73655f736368656d61c0",
        Interrupt::new("q", "placeholder-id"),
        Interrupt::to_value,
        Interrupt::from_value,
    );
    check(
        "c7400293af6c616e6767726170682e7479706573a9496e7465727275707483a576616c756581a171920102a26964a3692d31af726573706f6e73655f736368656d61c0",
        Interrupt::new(map(&[("q", Value::from(vec![1i64, 2]))]), "i-1"),
        Interrupt::to_value,
        Interrupt::from_value,
    );

    check(
        "c73b0293af6c616e6767726170682e7479706573a7436f6d6d616e6484a56772617068c0a675706461746581a16101a6726573756d65c0a4676f746fa16e",
        Command::new().with_goto("n").with_update(map(&[("a", Value::Int(1))])),
        Command::to_value,
        Command::from_value,
    );
    check(
        "c73a0293af6c616e6767726170682e7479706573a7436f6d6d616e6484a56772617068c0a675706461746581a16101a6726573756d65c0a4676f746f90",
        Command::new().with_update(map(&[("a", Value::Int(1))])),
        Command::to_value,
        Command::from_value,
    );
    check(
        "c7380293af6c616e6767726170682e7479706573a7436f6d6d616e6484a56772617068c0a6757064617465c0a6726573756d65a178a4676f746f90",
        Command::new().with_resume("x"),
        Command::to_value,
        Command::from_value,
    );
    check(
        "c7630293af6c616e6767726170682e7479706573a7436f6d6d616e6484a56772617068aa5f5f706172656e745f5fa6757064617465c0a6726573756d65c0a4676f746f92c71d0193af6c616e6767726170682e7479706573a453656e6492a16181a16b01a162",
        Command::new()
            .with_graph(Command::PARENT)
            .with_goto(vec![Send::new("a", map(&[("k", Value::Int(1))])).to_value(), s("b")]),
        Command::to_value,
        Command::from_value,
    );
    // Unknown fields are refused rather than dropped.
    let extra = Object::dataclass("langgraph.types", "Interrupt")
        .field("value", 1)
        .field("id", "x")
        .field("new_field", 2)
        .to_value();
    assert!(Interrupt::from_value(&extra).is_err());
}

#[test]
fn readers_refuse_other_values() {
    let uuid = dec("c72d0093a475756964a455554944d9203030303030303030303030303030303030303030303030303030303030303030");
    let date = dec("c7150193a86461746574696d65a46461746593cd07e80102");
    let others = [
        Value::Nil,
        Value::Int(1),
        s("2024-01-02T03:04:05"),
        Value::from(vec![Value::Int(1)]),
        map(&[("a", Value::Int(1))]),
    ];
    for v in others.iter().chain([&uuid, &date]) {
        assert!(DateTime::from_value(v).is_err(), "{v:?}");
        assert!(Time::from_value(v).is_err());
        assert!(TimeDelta::from_value(v).is_err());
        assert!(Timezone::from_value(v).is_err());
        assert!(ZoneInfo::from_value(v).is_err());
        assert!(Decimal::from_value(v).is_err());
        assert!(Set::<Value>::from_value(v).is_err());
        assert!(Message::from_value(v).is_err());
        assert!(Send::from_value(v).is_err());
        assert!(Interrupt::from_value(v).is_err());
        assert!(Command::from_value(v).is_err());
        assert!(Object::from_value(v).is_err());
    }
    for v in others.iter().chain([&date]) {
        assert!(Uuid::from_value(v).is_err());
    }
    assert!(Date::from_value(&uuid).is_err());
    assert!(Enum::from_value(&date).is_err());

    let err = DateTime::from_value(&uuid).unwrap_err();
    assert_eq!(
        err.to_string(),
        "serialization error: expected Python datetime.datetime (ext 3, fromisoformat), found ext 0 uuid.UUID"
    );
    // An ext 3 with another method is not a datetime.
    let other_method =
        dec("c72f0394a86461746574696d65a86461746574696d65b3323032342d30312d30325430333a30343a3035a76f746865725f6d");
    assert!(DateTime::from_value(&other_method).is_err());
    // Well-framed but out-of-range content is refused too.
    let feb30 = dec("c7150193a86461746574696d65a46461746593cd07e8021e");
    assert!(matches!(Date::from_value(&feb30), Err(Error::Serde { .. })));
    let bad_iso = dec(
        "c7350394a86461746574696d65a86461746574696d65b3323032342d30322d33305430333a30343a3035ad66726f6d69736f666f726d6174",
    );
    assert!(matches!(DateTime::from_value(&bad_iso), Err(Error::Serde { .. })));
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Event {
    id: Uuid,
    at: DateTime,
    on: Date,
    took: TimeDelta,
    price: Decimal,
    tags: Set<String>,
    zone: ZoneInfo,
    history: Vec<Message>,
    next: Option<Send>,
}

fn event() -> Event {
    Event {
        id: Uuid("12345678-1234-5678-1234-567812345678".parse().unwrap()),
        at: dt(2024, 1, 2, 3, 4, 5, 678).with_offset(0).unwrap(),
        on: Date::new(2024, 1, 2).unwrap(),
        took: TimeDelta::new(1, 2, 3).unwrap(),
        price: Decimal::new("1.10").unwrap(),
        tags: Set(vec!["a".into()]),
        zone: ZoneInfo::new("Europe/Paris"),
        history: vec![Message::human("hi").with_id("1")],
        next: None,
    }
}

#[test]
fn typed_fields_in_user_structs() {
    let e = event();
    let v = to_value(&e).unwrap();
    // Each field is the extension Python writes for it.
    assert_eq!(enc(v.get("id").unwrap()), enc(&e.id.to_value()));
    assert_eq!(
        enc(v.get("at").unwrap()),
        "c7430394a86461746574696d65a86461746574696d65d920323032342d30312d30325430333a30343a30352e3030303637382b30303a3030ad66726f6d69736f666f726d6174"
    );
    assert_eq!(enc(v.get("tags").unwrap()), "c7110093a86275696c74696e73a373657491a161");
    assert_eq!(v.get("next"), Some(&Value::Nil));
    let bytes = msgpack::encode(&v).unwrap();
    let back: Event = from_value(msgpack::decode(&bytes).unwrap()).unwrap();
    assert_eq!(back, e);
    // Wrong field types name the field.
    let mut wrong = v.clone();
    if let Value::Map(entries) = &mut wrong {
        entries[1].1 = e.on.to_value();
    }
    let err = from_value::<Event>(wrong).unwrap_err().to_string();
    assert!(err.contains("at `at`") && err.contains("datetime.datetime"), "{err}");
}

#[test]
fn typed_fields_survive_other_formats() {
    // Through JSON the extensions travel as (code, payload bytes) and come
    // back whole.
    let e = event();
    let json = serde_json::to_string(&e).unwrap();
    let back: Event = serde_json::from_str(&json).unwrap();
    assert_eq!(back, e);
}

#[cfg(feature = "chrono")]
#[test]
fn chrono_conversions() {
    use chrono::{FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};

    let fixed = FixedOffset::east_opt(-(5 * 3600 + 30 * 60))
        .unwrap()
        .with_ymd_and_hms(2024, 1, 2, 3, 4, 5)
        .unwrap();
    let py = DateTime::try_from(fixed).unwrap();
    assert_eq!(py.isoformat(), "2024-01-02T03:04:05-05:30");
    assert_eq!(chrono::DateTime::<FixedOffset>::try_from(py).unwrap(), fixed);

    let utc = Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap() + chrono::TimeDelta::nanoseconds(678_999);
    let py = DateTime::try_from(utc).unwrap();
    // Nanoseconds are truncated to microseconds.
    assert_eq!(py, dt(2024, 1, 2, 3, 4, 5, 678).with_offset(0).unwrap());
    assert_eq!(
        enc(&py.to_value()),
        "c7430394a86461746574696d65a86461746574696d65d920323032342d30312d30325430333a30343a30352e3030303637382b30303a3030ad66726f6d69736f666f726d6174"
    );
    let back: chrono::DateTime<Utc> = py.try_into().unwrap();
    assert_eq!(back, utc - chrono::TimeDelta::nanoseconds(999));

    let naive = NaiveDate::from_ymd_opt(2024, 1, 2)
        .unwrap()
        .and_hms_opt(3, 4, 5)
        .unwrap();
    let py = DateTime::try_from(naive).unwrap();
    assert_eq!(py.offset_seconds, None);
    assert_eq!(NaiveDateTime::try_from(py).unwrap(), naive);
    // Naive and aware do not mix.
    assert!(chrono::DateTime::<Utc>::try_from(py).is_err());
    assert!(NaiveDateTime::try_from(py.with_offset(0).unwrap()).is_err());
    // Years Python cannot hold and leap seconds are refused.
    assert!(DateTime::try_from(
        NaiveDate::from_ymd_opt(10000, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
    )
    .is_err());
    let leap = NaiveDate::from_ymd_opt(2016, 12, 31)
        .unwrap()
        .and_hms_nano_opt(23, 59, 59, 1_500_000_000)
        .unwrap();
    assert!(DateTime::try_from(leap).is_err());

    let date = NaiveDate::from_ymd_opt(2024, 2, 29).unwrap();
    assert_eq!(NaiveDate::try_from(Date::try_from(date).unwrap()).unwrap(), date);
    let time = NaiveTime::from_hms_micro_opt(1, 2, 3, 4).unwrap();
    let py_time = Time::try_from(time).unwrap();
    assert_eq!(py_time, Time::new(1, 2, 3, 4).unwrap());
    assert_eq!(NaiveTime::try_from(py_time.clone()).unwrap(), time);
    assert!(NaiveTime::try_from(py_time.with_tzinfo(TzInfo::Timezone(Timezone::utc()))).is_err());

    let d = chrono::TimeDelta::seconds(-1);
    let py = TimeDelta::try_from(d).unwrap();
    assert_eq!(
        py,
        TimeDelta {
            days: -1,
            seconds: 86399,
            microseconds: 0
        }
    );
    assert_eq!(chrono::TimeDelta::from(py), d);
    let max = TimeDelta {
        days: 999_999_999,
        seconds: 86399,
        microseconds: 999_999,
    };
    assert_eq!(TimeDelta::try_from(chrono::TimeDelta::from(max)).unwrap(), max);
    assert!(TimeDelta::try_from(chrono::TimeDelta::days(1_000_000_000)).is_err());
}
