//! JSONB text for the `checkpoint` and `metadata` columns, and the inline/blob
//! split of channel values (`docs/design.md`, *PostgreSQL backend*).
//!
//! Python stores these columns with `json.dumps`; PostgreSQL parses the text
//! into JSONB, which normalises it (key order, number notation). What matters
//! is therefore not the bytes but what a reader gets back:
//!
//! - floats are written so JSONB keeps them floats: Python's `repr` form,
//!   except that a positive exponent (`1e+16`) is spelt out with a `.0`
//!   (`10000000000000000.0`), since JSONB would print `1e+16` as an integer;
//! - JSONB cannot hold U+0000 or NaN/Infinity. Channel values with them go to
//!   `checkpoint_blobs` (see [`is_inline`]); anywhere else they are refused
//!   with [`Error::InvalidInput`] before anything is written.

use crate::error::{Error, Result};
use crate::serde::json::write::{self, value_node, Format, Node, Scalar, ValueNode, ValueRules, Values};
use crate::serde::msgpack::MAX_DEPTH;
use crate::serde::Value;

/// Whether a channel value stays inline in the checkpoint JSONB.
///
/// Python keeps `None`, `str`, `int`, `float` and `bool` inline. We do the same
/// except for values JSONB would not give back unchanged: strings holding
/// U+0000, NaN, infinities, `-0.0` (JSONB has no negative zero) and 32-bit
/// floats (they would come back as 64-bit ones). Those go to blobs, where
/// Python reads them as the same Python values.
pub(crate) fn is_inline(value: &Value) -> bool {
    match value {
        Value::Nil | Value::Bool(_) | Value::Int(_) | Value::UInt(_) => true,
        Value::Float(f) => f.is_finite() && !(*f == 0.0 && f.is_sign_negative()),
        Value::Str(s) => !s.contains('\0'),
        _ => false,
    }
}

/// Appends `value` as JSON text to `out` ([`Format::JSONB`]).
///
/// `what` names the value in error messages ("metadata", "checkpoint").
///
/// # Errors
/// [`Error::InvalidInput`] for values JSONB cannot hold: bytes, extension
/// values, map keys that are not strings, NaN and infinities, and strings
/// holding U+0000. [`Error::Serde`] for arrays and maps nested deeper than
/// [`MAX_DEPTH`], as the msgpack encoder refuses them (the same answer as the
/// other backends give, and what the JSON reader would refuse).
pub(crate) fn write_json(value: &Value, out: &mut String, what: &str) -> Result<()> {
    write::write(&Values(Jsonb { what }), value, Format::JSONB, out)
}

/// `value` as JSON text (see [`write_json`]).
///
/// # Errors
/// As [`write_json`].
pub(crate) fn to_json(value: &Value, what: &str) -> Result<String> {
    let mut out = String::with_capacity(128);
    write_json(value, &mut out, what)?;
    Ok(out)
}

/// [`Value`] data as JSONB holds it, refusing what it cannot hold; `what`
/// names the whole value in errors.
struct Jsonb<'w> {
    what: &'w str,
}

impl ValueRules for Jsonb<'_> {
    fn node<'a>(&self, v: &'a Value) -> Result<ValueNode<'a>> {
        let what = self.what;
        match value_node(v) {
            Ok(Node::Scalar(Scalar::Float(f))) if !f.is_finite() => Err(Error::invalid(format!(
                "{what} holds the float {f}, which PostgreSQL JSONB cannot store"
            ))),
            Ok(Node::Scalar(Scalar::Str(s))) => {
                check_str(s, what)?;
                Ok(Node::Scalar(Scalar::Str(s)))
            }
            Ok(node) => Ok(node),
            Err(Value::Bin(_)) => Err(Error::invalid(format!(
                "{what} holds bytes, which PostgreSQL JSONB cannot store"
            ))),
            Err(_) => Err(Error::invalid(format!(
                "{what} holds an encoded Python object (msgpack extension), which PostgreSQL JSONB cannot store"
            ))),
        }
    }

    fn key<'a>(&self, k: &'a Value) -> Result<Scalar<'a>> {
        let key = k.as_str().ok_or_else(|| {
            Error::invalid(format!(
                "{} holds a map key that is not a string ({}); PostgreSQL JSONB keys are strings",
                self.what,
                kind(k)
            ))
        })?;
        check_str(key, self.what)?;
        Ok(Scalar::Str(key))
    }

    fn too_deep(&self) -> Error {
        Error::serde(format!("{} nests deeper than the limit of {MAX_DEPTH}", self.what))
    }
}

/// A short description of a value for an error message: never its whole
/// text, which could be huge or deeply nested.
fn kind(v: &Value) -> String {
    match v {
        Value::Nil => "nil".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::F32(f) => f.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Str(_) => "a string".to_owned(),
        Value::Bin(_) => "bytes".to_owned(),
        Value::Array(_) => "a list".to_owned(),
        Value::Map(_) => "a map".to_owned(),
        Value::Ext(_) => "an encoded Python object".to_owned(),
    }
}

fn check_str(s: &str, what: &str) -> Result<()> {
    if s.contains('\0') {
        return Err(Error::invalid(format!(
            "{what} holds a string with U+0000 ({s:?}), which PostgreSQL cannot store"
        )));
    }
    Ok(())
}

/// Parses JSONB text as Python's `json.loads` reads it (see
/// [`crate::serde::json::from_json`]).
///
/// # Errors
/// [`Error::Serde`] for text that is not JSON.
pub(crate) fn from_json(text: &[u8]) -> Result<Value> {
    crate::serde::json::from_json(text)
}

/// Rejects strings PostgreSQL `text` columns cannot hold.
///
/// # Errors
/// [`Error::InvalidInput`] when `s` contains U+0000.
pub(crate) fn check_text(s: &str, what: &str) -> Result<()> {
    if s.contains('\0') {
        return Err(Error::invalid(format!(
            "{what} {s:?} contains U+0000, which PostgreSQL cannot store"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_keep_their_kind_through_jsonb_notation() {
        let v = Value::Array(
            (vec![
                Value::Float(1.0),
                Value::Float(1e16),
                Value::Float(1.5e-5),
                Value::Float(-2.5e22),
                Value::Float(0.1),
                Value::Float(1.2345e300),
                Value::Int(-3),
                Value::UInt(u64::MAX),
            ])
            .into(),
        );
        assert_eq!(
            to_json(&v, "t").unwrap(),
            format!(
                "[1.0,10000000000000000.0,1.5e-05,-25000000000000000000000.0,0.1,12345{}.0,-3,18446744073709551615]",
                "0".repeat(296)
            )
        );
    }

    #[test]
    fn refuses_what_jsonb_cannot_hold() {
        for bad in [
            Value::Float(f64::NAN),
            Value::Float(f64::INFINITY),
            Value::from("a\0b"),
            Value::Bin(bytes::Bytes::from_static(b"x")),
            Value::Map(vec![(Value::Int(1), Value::Nil)].into()),
            Value::map([("k\0", Value::Nil)]),
        ] {
            let err = to_json(&Value::Array(vec![bad.clone()].into()), "metadata").unwrap_err();
            assert!(matches!(err, Error::InvalidInput { .. }), "{bad:?}: {err:?}");
        }
    }

    /// Nesting is refused as the msgpack encoder refuses it, with
    /// `Error::Serde`, and without recursing into a deep non-string key.
    #[test]
    fn nesting_is_bounded_as_in_msgpack() {
        let nest = |n: usize| (0..n).fold(Value::Nil, |v, _| Value::Array(vec![v].into()));
        assert!(to_json(&nest(MAX_DEPTH), "t").is_ok());
        let err = to_json(&nest(MAX_DEPTH + 1), "metadata").unwrap_err();
        assert!(matches!(&err, Error::Serde { reason } if reason.contains("nests deeper than the limit of 128")));
        let deep = nest(200_000);
        assert!(matches!(to_json(&deep, "t"), Err(Error::Serde { .. })));
        let keyed = Value::Map(vec![(deep, Value::Nil)].into());
        assert!(matches!(to_json(&keyed, "t"), Err(Error::InvalidInput { .. })));
        // too deep to drop on a test thread's stack
        std::mem::forget(keyed);
    }

    #[test]
    fn escapes_strings() {
        assert_eq!(
            to_json(&Value::from("a\"b\\c\nd\u{1}é"), "t").unwrap(),
            r#""a\"b\\c\nd\u0001é""#
        );
    }

    #[test]
    fn inline_rule() {
        assert!(is_inline(&Value::Nil));
        assert!(is_inline(&Value::from("x")));
        assert!(is_inline(&Value::Float(2.0)));
        assert!(is_inline(&Value::UInt(u64::MAX)));
        assert!(!is_inline(&Value::from("x\0")));
        assert!(!is_inline(&Value::Float(f64::NAN)));
        assert!(!is_inline(&Value::Float(-0.0)));
        assert!(!is_inline(&Value::F32(1.0)));
        assert!(!is_inline(&Value::Array(vec![].into())));
    }

    #[test]
    fn reads_numbers_as_python_does() {
        let v = from_json(br#"{"b": 1, "a": 1.0, "c": 0.000015, "d": 18446744073709551615}"#).unwrap();
        assert_eq!(
            v,
            Value::map([
                ("b", Value::Int(1)),
                ("a", Value::Float(1.0)),
                ("c", Value::Float(1.5e-5)),
                ("d", Value::UInt(u64::MAX)),
            ])
        );
    }
}
