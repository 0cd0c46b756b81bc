//! JSON exactly as Python's `json` module writes and reads it.
//!
//! LangGraph's SQLite saver stores checkpoint metadata as the UTF-8 bytes of
//! `json.dumps(metadata, ensure_ascii=False)` (see `docs/design.md`, *SQLite
//! backend*), and the legacy `json` serializer tag holds JSON too.
//! [`to_python_json`] produces the same bytes Python does, so rows written
//! here are indistinguishable from rows Python wrote; [`from_json`] reads
//! what `json.loads` accepts into plain [`Value`] data.
//!
//! The crate has one such writer (`json/write.rs`): the PostgreSQL saver's
//! JSONB text and `render`'s text are the same writer in other formats.
//!
//! ```
//! use checkpointer::serde::json::{from_json, to_python_json};
//! use checkpointer::Value;
//!
//! let meta = Value::map([
//!     ("source", Value::from("loop")),
//!     ("step", Value::from(1)),
//!     ("parents", Value::Map(vec![].into())),
//! ]);
//! let text = to_python_json(&meta).unwrap();
//! assert_eq!(text, r#"{"source": "loop", "step": 1, "parents": {}}"#);
//! assert_eq!(from_json(text.as_bytes()).unwrap(), meta);
//! ```

mod read;
pub(crate) mod write;

use self::write::{scalar_key, value_node, Format, Scalar, ValueNode, ValueRules, Values};
use super::msgpack::MAX_DEPTH;
use super::{SharedVec, Value};
use crate::checkpoint::CheckpointMetadata;
use crate::error::{Error, Result};

/// Formats `value` as Python's `json.dumps(value, ensure_ascii=False)` does.
///
/// * separators `", "` and `": "`, no newlines;
/// * strings keep non-ASCII characters as they are; `"`, `\` and the control
///   characters below U+0020 are escaped (`\n`, `\r`, `\t`, `\b`, `\f`, the
///   others as `\u00xx` in lower case); U+007F and everything above is not;
/// * integers in decimal, floats as Python's `repr` (`1.0`, `1e-05`, `1e+16`),
///   NaN and infinities as the tokens `NaN`, `Infinity`, `-Infinity`;
/// * map keys that are not strings become strings as in Python: integers in
///   decimal, floats as their `repr`, `true`, `false`, `null`.
///
/// A map with two keys that render the same (say `1` and `"1"`) produces both
/// entries, as Python does for such a dict.
///
/// # Errors
/// [`Error::Serde`] for values JSON cannot hold (bytes, extension values,
/// arrays or maps as map keys) and for nesting deeper than
/// [`MAX_DEPTH`].
pub fn to_python_json(value: &Value) -> Result<String> {
    let mut out = String::new();
    write::write(&Values(Python), value, Format::PYTHON, &mut out)?;
    Ok(out)
}

/// Parses JSON as Python's `json.loads` does, into plain data.
///
/// * object key order is kept; a repeated key keeps its first position and
///   takes the last value (a Python dict);
/// * numbers without a fraction or exponent are integers (`1` is
///   [`Value::Int`], `1.0` is [`Value::Float`], `-0` is `Int(0)`); integers
///   above `i64::MAX` that fit `u64` are [`Value::UInt`]; integers beyond the
///   64-bit range, which Python would read exactly, become the nearest
///   [`Value::Float`] (lossy, but readable — Python itself cannot msgpack
///   such an integer);
/// * `NaN`, `Infinity` and `-Infinity` are accepted;
/// * a `\u` escape of a lone surrogate (not representable in a Rust string)
///   becomes U+FFFD;
/// * a leading UTF-8 byte-order mark is skipped, as `json.loads(bytes)` does;
/// * nothing is revived: LangChain `{"lc": …}` envelopes stay plain maps.
///
/// # Errors
/// [`Error::Serde`] for invalid UTF-8, invalid JSON, trailing data and
/// nesting deeper than [`MAX_DEPTH`].
pub fn from_json(bytes: &[u8]) -> Result<Value> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| Error::serde(format!("JSON is not valid UTF-8: {e}")))?;
    read::parse(text)
}

impl CheckpointMetadata {
    /// The metadata as Python's SQLite saver stores it:
    /// `json.dumps(metadata, ensure_ascii=False)` (see [`to_python_json`]).
    ///
    /// ```
    /// use checkpointer::{CheckpointMetadata, CheckpointSource};
    /// let m = CheckpointMetadata::new(CheckpointSource::Loop, 1);
    /// assert_eq!(m.to_python_json().unwrap(), r#"{"source": "loop", "step": 1, "parents": {}}"#);
    /// ```
    ///
    /// # Errors
    /// [`Error::Serde`] when a value is not JSON-able (bytes, extension values).
    pub fn to_python_json(&self) -> Result<String> {
        let mut out = String::new();
        write::write_object(
            &Values(Python),
            self.0.iter().map(|(k, v)| (k.as_str(), v)),
            Format::PYTHON,
            &mut out,
        )?;
        Ok(out)
    }

    /// Reads metadata stored as JSON (see [`from_json`]). Empty input reads as
    /// empty metadata, as Python's `json.loads(m) if m else {}` does.
    ///
    /// # Errors
    /// [`Error::Serde`] for invalid JSON and for JSON that is not an object.
    pub fn from_json(bytes: &[u8]) -> Result<CheckpointMetadata> {
        Ok(match metadata_entries(bytes)? {
            None => CheckpointMetadata::default(),
            // every key is a string (checked by `metadata_entries`)
            Some(entries) => CheckpointMetadata(
                entries
                    .into_iter()
                    .filter_map(|(k, v)| match k {
                        Value::Str(k) => Some((k.into_string(), v)),
                        _ => None,
                    })
                    .collect(),
            ),
        })
    }
}

/// The entries of metadata stored as JSON, in order and with every key
/// checked to be a string, without building a [`CheckpointMetadata`] (a
/// saver filtering stored rows reads them as they are); `None` for empty
/// input, which reads as empty metadata.
///
/// # Errors
/// As [`CheckpointMetadata::from_json`].
pub(crate) fn metadata_entries(bytes: &[u8]) -> Result<Option<SharedVec<(Value, Value)>>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    match from_json(bytes)? {
        Value::Map(entries) if entries.iter().all(|(k, _)| k.as_str().is_some()) => Ok(Some(entries)),
        Value::Map(_) => Err(Error::serde("metadata key is not a string")),
        _ => Err(Error::serde("metadata JSON is not an object")),
    }
}

fn depth_error() -> Error {
    Error::serde(format!("JSON nesting deeper than {MAX_DEPTH} levels"))
}

/// Python's `json.dumps` of [`Value`] data: bytes and extension values
/// refused, scalar keys written as their text.
struct Python;

impl ValueRules for Python {
    fn node<'a>(&self, v: &'a Value) -> Result<ValueNode<'a>> {
        value_node(v).map_err(|v| match v {
            Value::Ext(e) => Error::serde(format!("extension value (code {}) is not JSON serializable", e.code())),
            _ => Error::serde("bytes are not JSON serializable"),
        })
    }

    fn key<'a>(&self, k: &'a Value) -> Result<Scalar<'a>> {
        scalar_key(k).ok_or_else(|| Error::serde("JSON object keys must be str, int, float, bool or None"))
    }

    fn too_deep(&self) -> Error {
        depth_error()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn s(x: &str) -> Value {
        Value::from(x)
    }

    /// Expected strings produced by Python 3.11.7:
    /// `json.dumps(value, ensure_ascii=False)`.
    #[test]
    fn dumps_matches_python() {
        let cases: Vec<(Value, &str)> = vec![
            (Value::Nil, "null"),
            (Value::Bool(true), "true"),
            (Value::Int(-9223372036854775808), "-9223372036854775808"),
            (Value::UInt(18446744073709551615), "18446744073709551615"),
            (Value::Float(1.0), "1.0"),
            (Value::Float(1e16), "1e+16"),
            (Value::Float(1e-5), "1e-05"),
            (Value::Float(-0.0), "-0.0"),
            (Value::Float(f64::NAN), "NaN"),
            (Value::Float(f64::INFINITY), "Infinity"),
            (Value::Float(f64::NEG_INFINITY), "-Infinity"),
            (Value::F32(0.5), "0.5"),
            (Value::F32(0.1), "0.10000000149011612"),
            (
                s("\u{0}\u{1}\u{8}\u{c}\n\r\t\u{1b}\u{1f} \u{7f}\u{80}\u{2028}\u{feff}\"\\/é😀"),
                "\"\\u0000\\u0001\\b\\f\\n\\r\\t\\u001b\\u001f \u{7f}\u{80}\u{2028}\u{feff}\\\"\\\\/é😀\"",
            ),
            (Value::Array(vec![].into()), "[]"),
            (Value::Map(vec![].into()), "{}"),
            (Value::Array(vec![Value::Array(vec![].into())].into()), "[[]]"),
            (
                Value::map([
                    (
                        "a",
                        Value::Array((vec![Value::Int(1), Value::map([("b", Value::Nil)])]).into()),
                    ),
                    ("c", Value::Bool(true)),
                    ("d", Value::Bool(false)),
                ]),
                r#"{"a": [1, {"b": null}], "c": true, "d": false}"#,
            ),
            (
                Value::Map(
                    (vec![
                        (Value::Int(1), Value::Int(3)),
                        (Value::Float(1.5), Value::Int(2)),
                        (Value::Bool(false), Value::Int(4)),
                        (Value::Nil, Value::Int(5)),
                        (Value::Float(f64::NAN), Value::Int(6)),
                        (Value::Float(f64::INFINITY), Value::Int(7)),
                        (Value::Float(f64::NEG_INFINITY), Value::Int(8)),
                        (Value::Float(1.0), Value::Int(1)),
                        (Value::Float(-0.0), Value::Int(2)),
                        (Value::Float(1e16), Value::Int(3)),
                        (Value::UInt(9223372036854775808), Value::Int(4)),
                        (Value::Bool(true), Value::Int(9)),
                    ])
                    .into(),
                ),
                r#"{"1": 3, "1.5": 2, "false": 4, "null": 5, "NaN": 6, "Infinity": 7, "-Infinity": 8, "1.0": 1, "-0.0": 2, "1e+16": 3, "9223372036854775808": 4, "true": 9}"#,
            ),
            // What Python's SQLite saver stored for the example of docs/design.md,
            // Checkpoint metadata
            (
                Value::map([
                    ("source", s("loop")),
                    ("step", Value::Int(0)),
                    ("parents", Value::Map(vec![].into())),
                    ("note", s("ab")),
                    ("tup", Value::Array(vec![Value::Int(1), Value::Int(2)].into())),
                    ("run_id", s("r")),
                    ("tag", s("éz")),
                    ("user_id", s("u1")),
                    ("n", Value::Int(3)),
                ]),
                r#"{"source": "loop", "step": 0, "parents": {}, "note": "ab", "tup": [1, 2], "run_id": "r", "tag": "éz", "user_id": "u1", "n": 3}"#,
            ),
            // Python's bytes for metadata with nested maps, lists, booleans, null and `writes`
            (
                Value::map([
                    ("source", s("loop")),
                    ("step", Value::Int(1)),
                    ("parents", Value::map([("", s("x"))])),
                    ("user", Value::map([("a", Value::Int(1)), ("b", Value::Int(2))])),
                    ("tags", Value::Array((vec![s("a"), s("b")]).into())),
                    ("flag", Value::Bool(true)),
                    ("none", Value::Nil),
                    ("writes", Value::map([("n", Value::Int(1))])),
                ]),
                r#"{"source": "loop", "step": 1, "parents": {"": "x"}, "user": {"a": 1, "b": 2}, "tags": ["a", "b"], "flag": true, "none": null, "writes": {"n": 1}}"#,
            ),
        ];
        for (value, want) in cases {
            assert_eq!(to_python_json(&value).unwrap(), want, "{value:?}");
        }
    }

    #[test]
    fn dumps_rejects_non_json_values() {
        let bad = [
            Value::Bin(Bytes::from_static(b"x")),
            Value::delta_snapshot(Value::Int(1)),
            Value::Map(vec![(Value::Array(vec![].into()), Value::Int(1))].into()),
            Value::Map(vec![(Value::Bin(Bytes::new()), Value::Int(1))].into()),
            Value::Array((vec![Value::map([("a", Value::Bin(Bytes::new()))])]).into()),
        ];
        for v in bad {
            assert!(matches!(to_python_json(&v), Err(Error::Serde { .. })), "{v:?}");
        }
    }

    #[test]
    fn dumps_depth_is_bounded() {
        let mut v = Value::Nil;
        for _ in 0..MAX_DEPTH {
            v = Value::Array(vec![v].into());
        }
        assert!(to_python_json(&v).is_ok());
        let too_deep = Value::Array(vec![v].into());
        assert!(matches!(to_python_json(&too_deep), Err(Error::Serde { .. })));
    }

    /// Results checked against Python 3.11.7 `json.loads`.
    #[test]
    fn loads_matches_python() {
        let cases: Vec<(&str, Value)> = vec![
            ("-0", Value::Int(0)),
            ("1E5", Value::Float(100000.0)),
            ("-0.0", Value::Float(-0.0)),
            ("1.0", Value::Float(1.0)),
            (" 1 ", Value::Int(1)),
            ("9223372036854775807", Value::Int(i64::MAX)),
            ("9223372036854775808", Value::UInt(9223372036854775808)),
            ("-9223372036854775808", Value::Int(i64::MIN)),
            ("18446744073709551616", Value::Float(18446744073709551616.0)),
            ("-9223372036854775809", Value::Float(-9223372036854775809.0)),
            (
                "[1e400, -1e400, Infinity, -Infinity]",
                Value::Array(
                    (vec![
                        Value::Float(f64::INFINITY),
                        Value::Float(f64::NEG_INFINITY),
                        Value::Float(f64::INFINITY),
                        Value::Float(f64::NEG_INFINITY),
                    ])
                    .into(),
                ),
            ),
            (
                r#"{"a":1,"b":2,"a":3}"#,
                Value::map([("a", Value::Int(3)), ("b", Value::Int(2))]),
            ),
            (r#""\ud83d\ude00""#, s("😀")),
            (r#""\u00e9\u00E9""#, s("éé")),
            (r#""\ud800""#, s("\u{fffd}")),
            (r#""\ud800\u0041""#, s("\u{fffd}A")),
            (r#""\"\\\/\b\f\n\r\t""#, s("\"\\/\u{8}\u{c}\n\r\t")),
            (
                r#"{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"], "kwargs": {"content": "hi"}}"#,
                Value::map([
                    ("lc", Value::Int(1)),
                    ("type", s("constructor")),
                    (
                        "id",
                        Value::Array((vec![s("langchain"), s("schema"), s("messages"), s("HumanMessage")]).into()),
                    ),
                    ("kwargs", Value::map([("content", s("hi"))])),
                ]),
            ),
        ];
        for (text, want) in cases {
            let got = from_json(text.as_bytes()).unwrap();
            assert_eq!(got, want, "{text}");
        }
        assert!(matches!(from_json(b"NaN").unwrap(), Value::Float(f) if f.is_nan()));
        assert_eq!(from_json(b"\xef\xbb\xbf{}").unwrap(), Value::Map(vec![].into()));
    }

    /// Every one of these is rejected by Python's `json.loads` too.
    #[test]
    fn loads_rejects_invalid() {
        let bad: &[&[u8]] = &[
            b"01",
            b"1.",
            b".5",
            b"+1",
            b"[1,]",
            b"{\"a\":1,}",
            b"\"\\x\"",
            b"\"\t\"",
            b"nan",
            b"-NaN",
            b"1 2",
            b"",
            b"[",
            b"tru",
            b"1e",
            b"-",
            b"\"\\u12\"",
            b"\"abc",
            b"{\"a\" 1}",
            b"{1: 2}",
            b"[1 2]",
            b"\xff",
            b"\"\\",
            b"{\"a\":}",
            b"\"\\ud800\\u12\"",
        ];
        for input in bad {
            match from_json(input) {
                Err(Error::Serde { reason }) => assert!(!reason.is_empty()),
                other => panic!("{:?} -> {other:?}", String::from_utf8_lossy(input)),
            }
        }
    }

    #[test]
    fn loads_depth_is_bounded() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(from_json(ok.as_bytes()).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(matches!(from_json(deep.as_bytes()), Err(Error::Serde { .. })));
        let objects = "{\"a\":".repeat(MAX_DEPTH + 1);
        assert!(matches!(from_json(objects.as_bytes()), Err(Error::Serde { .. })));
        // far deeper than any stack could recurse
        let bomb = "[".repeat(1_000_000);
        assert!(matches!(from_json(bomb.as_bytes()), Err(Error::Serde { .. })));
    }

    #[test]
    fn round_trips_through_python_text() {
        let inputs = [
            r#"{"source": "loop", "step": 1, "parents": {"": "1ef09e01-c354-6e08-8001-8a1503f9b875"}, "x": [1.5, -2, "é", null, true, NaN, {"k": []}]}"#,
            r#"{"counters_since_delta_snapshot": {"items": [3, 2]}, "big": 18446744073709551615, "tiny": 5e-324}"#,
        ];
        for text in inputs {
            let v = from_json(text.as_bytes()).unwrap();
            assert_eq!(to_python_json(&v).unwrap(), text);
        }
    }

    #[test]
    fn metadata_json() {
        let m =
            CheckpointMetadata::from_json(br#"{"source": "input", "step": -1, "parents": {}, "run_id": "r"}"#).unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["source", "step", "parents", "run_id"]);
        assert_eq!(m.step(), Some(-1));
        assert_eq!(
            m.to_python_json().unwrap(),
            r#"{"source": "input", "step": -1, "parents": {}, "run_id": "r"}"#
        );
        assert_eq!(
            CheckpointMetadata::from_json(b"").unwrap(),
            CheckpointMetadata::default()
        );
        assert!(matches!(
            CheckpointMetadata::from_json(b"[1]"),
            Err(Error::Serde { .. })
        ));
        let mut bad = CheckpointMetadata::default();
        bad.insert("b", Value::Bin(Bytes::from_static(b"x")));
        assert!(matches!(bad.to_python_json(), Err(Error::Serde { .. })));
    }
}
