//! A canonical JSON view of stored values (feature `render`), identical to
//! what the Python peer tool `read_fixtures.py` prints for the same store.
//!
//! Python decodes a checkpoint into live objects and renders each as plain
//! JSON (`canon`); this module renders the crate's [`Value`] the same way
//! without constructing anything, so a dump made here can be compared with
//! one made by Python (`*.expected.json` fixtures, cross-implementation
//! checks, a CLI's `dump`).
//!
//! | stored value | rendering |
//! |---|---|
//! | nil, bool, int, string, list | the JSON value |
//! | float | the number; NaN and infinities as `{"__float__": "nan" \| "inf" \| "-inf"}` |
//! | bytes | `{"__bytes__": "<hex>"}` |
//! | map | an object; keys that are not strings become the Python JSON text of their rendering (`1`, `true`, `null`, `[1, 2]`) |
//! | set / frozenset (ext 0) | `{"__set__": [items sorted by their JSON text]}` |
//! | datetime (ext 3), date, time | `{"__type__": "datetime.<class>", "iso": "<isoformat>"}` |
//! | uuid, decimal, timedelta, timezone | `{"__type__": …, "str": "<str(x)>"}` |
//! | `langgraph.types.Send` (ext 1) | `{"__type__": …, "data": {"node", "arg", "timeout"}}` |
//! | other single-argument objects (ext 0: enums, …) | `{"__type__": "<module>.<name>", "value": …}` |
//! | dataclasses, named tuples (ext 2), pydantic models (ext 4, 5) | `{"__type__": "<module>.<name>", "data": {fields}}` |
//! | delta snapshot (ext 7) | `[value]` (a one-field named tuple renders as a list) |
//! | unknown ext codes | `null` (Python decodes them to `None`) |
//!
//! Where Python's rendering depends on a class's internals (paths, regular
//! expressions, IP addresses, numpy arrays, deques, positional-argument
//! objects other than those above) the rendering here is
//! `{"__type__": "<module>.<name>", "ext": <code>, "payload": …}`, which
//! Python never prints: comparisons of such values fail loudly rather than
//! pass by accident.
//!
//! Nesting is bounded: [`try_value`] refuses a value nested deeper than
//! [`MAX_DEPTH`] (what the decoder refuses too) and [`value`] renders it as
//! `{"__error__": "<reason>"}`; [`normalize`] refuses a dump nested deeper
//! than [`MAX_DUMP_DEPTH`]; the Python JSON writers work without recursion.
//!
//! ```
//! use checkpointer::serde::render;
//! use checkpointer::Value;
//! let v = Value::map([("b", Value::Bin(bytes::Bytes::from_static(b"\x01"))), ("n", Value::Float(f64::NAN))]);
//! assert_eq!(
//!     render::value(&v),
//!     serde_json::json!({"b": {"__bytes__": "01"}, "n": {"__float__": "nan"}})
//! );
//! ```

use std::fmt::Write as _;

use serde_json::{json, Map, Number};

use super::msgpack::MAX_DEPTH;
use super::{Ext, Value};
use crate::error::Result;

mod dump;
mod normalize;
mod pystr;
mod text;

pub use dump::{dump, dump_with, tuple, DumpOptions};
pub use normalize::{normalize, MAX_DUMP_DEPTH};
use pystr::{dashed_uuid, time_iso, timedelta_str, timezone_str};
pub use text::{python_json, python_json_indented};

/// The canonical JSON of a value (see the module docs).
///
/// A value nested deeper than [`MAX_DEPTH`] (which no decoder produces and no
/// saver stores) renders as `{"__error__": "<reason>"}`, a form Python never
/// prints; [`try_value`] returns the error instead.
pub fn value(v: &Value) -> serde_json::Value {
    try_value(v).unwrap_or_else(|e| {
        let reason = match e {
            crate::Error::Serde { reason } => reason,
            other => other.to_string(),
        };
        json!({ "__error__": reason })
    })
}

/// [`value`], refusing a value nested too deep to render.
///
/// # Errors
/// [`Error::Serde`](crate::Error::Serde) when arrays, maps and extension
/// values nest deeper than [`MAX_DEPTH`], counted as the msgpack decoder
/// counts them: every value a decoder produces renders.
pub fn try_value(v: &Value) -> Result<serde_json::Value> {
    render(v, 0)
}

/// The depth of the elements of a container found at `depth`.
fn enter(depth: usize) -> Result<usize> {
    if depth >= MAX_DEPTH {
        return Err(crate::Error::serde(format!(
            "value nests deeper than the limit of {MAX_DEPTH}, too deep to render"
        )));
    }
    Ok(depth + 1)
}

/// `v`, found `depth` arrays, maps and extension values down.
///
/// The functions that recurse (this one, [`ext`], [`opaque`], [`set`],
/// [`send`]) keep their frames small (the JSON is built in helpers), so
/// that the deepest value the decoder accepts renders on a 1 MiB stack even
/// in an unoptimised build.
fn render(v: &Value, depth: usize) -> Result<serde_json::Value> {
    match v {
        Value::Array(items) => {
            let inner = enter(depth)?;
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                out.push(render(x, inner)?);
            }
            Ok(serde_json::Value::Array(out))
        }
        Value::Map(entries) => {
            let inner = enter(depth)?;
            let mut out = Map::new();
            for (k, v) in entries {
                let key = match k {
                    Value::Str(s) => s.as_str().to_owned(),
                    other => key_text(render(other, inner)?)?,
                };
                out.insert(key, render(v, inner)?);
            }
            Ok(serde_json::Value::Object(out))
        }
        Value::Ext(e) => ext(e, enter(depth)?),
        scalar => Ok(render_scalar(scalar)),
    }
}

/// The most text a map key that is not a string may render to.
///
/// Such a key renders as the JSON text of its own rendering (as Python
/// prints it), so a key holding a map keyed by a map … doubles its escaping
/// with every level: some sixty levels, a few hundred stored bytes, would
/// render to exabytes. Python would try; this refuses instead.
pub const MAX_KEY_TEXT: usize = 1 << 20;

fn key_text(rendered: serde_json::Value) -> Result<String> {
    let text = python_json(&rendered);
    if text.len() > MAX_KEY_TEXT {
        return Err(crate::Error::serde(format!(
            "a map key renders to {} bytes, more than the limit of {MAX_KEY_TEXT}",
            text.len()
        )));
    }
    Ok(text)
}

/// A value that is not a list, a map or an extension.
fn render_scalar(v: &Value) -> serde_json::Value {
    match v {
        Value::Nil => serde_json::Value::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::UInt(u) => json!(u),
        Value::F32(f) => float(f64::from(*f)),
        Value::Float(f) => float(*f),
        Value::Str(s) => json!(s.as_str()),
        Value::Bin(b) => json!({ "__bytes__": hex(b) }),
        Value::Array(_) | Value::Map(_) | Value::Ext(_) => serde_json::Value::Null,
    }
}

fn float(f: f64) -> serde_json::Value {
    if f.is_nan() {
        json!({ "__float__": "nan" })
    } else if f.is_infinite() {
        json!({ "__float__": if f > 0.0 { "inf" } else { "-inf" } })
    } else {
        Number::from_f64(f).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// How an extension renders: either at once, or around the rendering of
/// some of its parts.
enum Shape<'a> {
    /// Rendered, nothing nested to render.
    Done(serde_json::Value),
    /// A delta snapshot: `[value]`.
    Snapshot(&'a Value),
    /// `{"__type__": name, key: <arg>}`.
    Typed(String, &'static str, &'a Value),
    /// The argument itself.
    Arg(&'a Value),
    /// A set's items.
    Set(&'a [Value]),
    /// `Send(node, arg[, timeout])`.
    Send(String, &'a [Value]),
    /// Python's rendering depends on the class: the raw form.
    Opaque(String),
}

/// What Python makes of an extension (see the module docs), without
/// rendering its parts.
fn shape(e: &Ext) -> Shape<'_> {
    let code = e.code();
    if code == 7 {
        if let Some(inner) = e.snapshot_value() {
            return Shape::Snapshot(inner);
        }
    }
    if !(0..=7).contains(&code) {
        return Shape::Done(serde_json::Value::Null);
    }
    let (Some(module), Some(name), Some(arg)) = (e.module(), e.name(), e.arg()) else {
        return Shape::Opaque("?".to_owned());
    };
    let type_name = format!("{module}.{name}");
    let done = |key: &str, s: String| Some(Shape::Done(typed(&type_name, key, json!(s))));
    let shape = match (code, module, name) {
        (0, "builtins", "set" | "frozenset") => arg.as_array().map(Shape::Set),
        (0, "uuid", "UUID") => arg.as_str().and_then(dashed_uuid).and_then(|s| done("str", s)),
        (0, "decimal", "Decimal") => arg.as_str().and_then(|s| done("str", s.to_owned())),
        (0, "collections", "deque") | (0, "ipaddress", _) | (0, "zoneinfo", _) | (0, "pydantic.types", _) => None,
        (0, _, _) => Some(Shape::Typed(type_name.clone(), "value", arg)),
        (1, "langgraph.types", "Send") => match arg.as_array() {
            Some(args @ ([_, _] | [_, _, _])) => Some(Shape::Send(type_name.clone(), args)),
            _ => None,
        },
        (1, "datetime", "date") => ints(arg).and_then(|d| match d[..] {
            [y, m, day] => done("iso", format!("{y:04}-{m:02}-{day:02}")),
            _ => None,
        }),
        (1, "datetime", "timedelta") => ints(arg).and_then(|d| match d[..] {
            [days, seconds, micros] => done("str", timedelta_str(days, seconds, micros)),
            _ => None,
        }),
        (1, "datetime", "timezone") => timezone_str(arg).and_then(|s| done("str", s)),
        (1, _, _) => None,
        (2, "datetime", "time") => time_iso(arg).and_then(|s| done("iso", s)),
        (2 | 4 | 5, _, _) => Some(Shape::Typed(type_name.clone(), "data", arg)),
        (3, "datetime", "datetime") if e.method() == Some("fromisoformat") => {
            arg.as_str().and_then(|s| done("iso", s.to_owned()))
        }
        // Python refuses other methods and returns the argument as it is
        (3, _, _) => Some(Shape::Arg(arg)),
        _ => None,
    };
    shape.unwrap_or(Shape::Opaque(type_name))
}

/// An extension whose payload is found `depth` levels down. The argument of
/// an object sits in the payload list `[module, name, arg]`, one level
/// further down, and the elements of a list argument one more.
fn ext(e: &Ext, depth: usize) -> Result<serde_json::Value> {
    match shape(e) {
        Shape::Done(v) => Ok(v),
        Shape::Snapshot(inner) => Ok(serde_json::Value::Array(vec![render(inner, depth)?])),
        Shape::Typed(type_name, key, arg) => Ok(typed(&type_name, key, render(arg, enter(depth)?)?)),
        Shape::Arg(arg) => render(arg, enter(depth)?),
        Shape::Set(items) => set(items, enter(enter(depth)?)?),
        Shape::Send(type_name, args) => send(&type_name, args, enter(enter(depth)?)?),
        Shape::Opaque(type_name) => opaque(e, &type_name, depth),
    }
}

/// `{"__set__": [items sorted by their JSON text]}`, the items found `depth`
/// levels down.
fn set(items: &[Value], depth: usize) -> Result<serde_json::Value> {
    let mut items: Vec<(String, serde_json::Value)> = items
        .iter()
        .map(|x| {
            let v = render(x, depth)?;
            Ok((python_json(&v), v))
        })
        .collect::<Result<_>>()?;
    items.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(set_json(items.into_iter().map(|(_, v)| v).collect()))
}

fn set_json(items: Vec<serde_json::Value>) -> serde_json::Value {
    json!({ "__set__": items })
}

/// `Send(node, arg[, timeout])`, the arguments found `depth` levels down.
fn send(type_name: &str, args: &[Value], depth: usize) -> Result<serde_json::Value> {
    let mut parts = Vec::with_capacity(3);
    for a in args {
        parts.push(render(a, depth)?);
    }
    Ok(send_json(type_name, parts))
}

fn send_json(type_name: &str, parts: Vec<serde_json::Value>) -> serde_json::Value {
    let mut parts = parts.into_iter();
    let mut data = Map::new();
    data.insert("node".into(), parts.next().unwrap_or_default());
    data.insert("arg".into(), parts.next().unwrap_or_default());
    data.insert("timeout".into(), parts.next().unwrap_or_default());
    typed(type_name, "data", serde_json::Value::Object(data))
}

fn typed(type_name: &str, key: &str, v: serde_json::Value) -> serde_json::Value {
    let mut m = Map::new();
    m.insert("__type__".into(), json!(type_name));
    m.insert(key.into(), v);
    serde_json::Value::Object(m)
}

fn opaque(e: &Ext, type_name: &str, depth: usize) -> Result<serde_json::Value> {
    let payload = match e.decoded() {
        Some(v) => Some(render(v, depth)?),
        None => None,
    };
    Ok(opaque_json(e.code(), type_name, payload))
}

fn opaque_json(code: i8, type_name: &str, payload: Option<serde_json::Value>) -> serde_json::Value {
    let payload = payload.unwrap_or_else(|| json!({ "__bytes__": "" }));
    json!({ "__type__": type_name, "ext": code, "payload": payload })
}

fn ints(v: &Value) -> Option<Vec<i64>> {
    v.as_array()?.iter().map(Value::as_i64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::ExtKind;

    fn obj(kind: ExtKind, module: &str, name: &str, arg: Value) -> Value {
        Value::Ext(Box::new(Ext::object(kind, module, name, arg).unwrap()))
    }

    fn td(d: i64, s: i64, us: i64) -> Value {
        obj(
            ExtKind::ConstructorPosArgs,
            "datetime",
            "timedelta",
            Value::from(vec![d, s, us]),
        )
    }

    /// `datetime.time(1, 2, 3, microsecond, tzinfo)`.
    fn time_01_02_03(microsecond: i64, tzinfo: Value) -> Value {
        obj(
            ExtKind::ConstructorKwArgs,
            "datetime",
            "time",
            Value::map([
                ("hour", Value::Int(1)),
                ("minute", Value::Int(2)),
                ("second", Value::Int(3)),
                ("microsecond", Value::Int(microsecond)),
                ("tzinfo", tzinfo),
                ("fold", Value::Int(0)),
            ]),
        )
    }

    /// `datetime.timezone(*args)`.
    fn tz(args: Vec<Value>) -> Value {
        obj(
            ExtKind::ConstructorPosArgs,
            "datetime",
            "timezone",
            Value::Array(args.into()),
        )
    }

    // Expected renderings were printed by read_fixtures.py's canon() for the
    // same Python values (langgraph-checkpoint 4.3.2).
    /// Keys keyed by keys double their escaping per level: refused once a
    /// key's text passes the limit, in a time linear in the limit.
    #[test]
    fn keys_nested_in_keys_stop_at_the_key_text_limit() {
        let mut v = Value::from("x\"\\");
        for _ in 0..60 {
            v = Value::Map(vec![(v, Value::Nil)].into());
        }
        let got = try_value(&v);
        assert!(
            matches!(&got, Err(crate::Error::Serde { reason }) if reason.contains("map key renders")),
            "{got:?}"
        );
        let mut shallow = Value::from("k");
        for _ in 0..3 {
            shallow = Value::Map(vec![(shallow, Value::Int(1))].into());
        }
        assert!(try_value(&shallow).is_ok());
    }

    #[test]
    fn matches_python_canon() {
        let cases: Vec<(Value, serde_json::Value)> = vec![
            (
                obj(
                    ExtKind::ConstructorPosArgs,
                    "langgraph.types",
                    "Send",
                    Value::Array((vec![Value::from("w"), Value::map([("x", Value::Int(0))])]).into()),
                ),
                json!({"__type__": "langgraph.types.Send", "data": {"arg": {"x": 0}, "node": "w", "timeout": null}}),
            ),
            (Value::delta_snapshot(Value::from(vec![1, 2])), json!([[1, 2]])),
            (
                obj(
                    ExtKind::ConstructorPosArgs,
                    "datetime",
                    "date",
                    Value::from(vec![2024, 1, 2]),
                ),
                json!({"__type__": "datetime.date", "iso": "2024-01-02"}),
            ),
            (
                td(1, 2, 3),
                json!({"__type__": "datetime.timedelta", "str": "1 day, 0:00:02.000003"}),
            ),
            (
                td(-1, 5, 0),
                json!({"__type__": "datetime.timedelta", "str": "-1 day, 0:00:05"}),
            ),
            (
                td(0, 3600, 0),
                json!({"__type__": "datetime.timedelta", "str": "1:00:00"}),
            ),
            (
                tz(vec![td(0, 7200, 0)]),
                json!({"__type__": "datetime.timezone", "str": "UTC+02:00"}),
            ),
            (
                tz(vec![td(0, 0, 0)]),
                json!({"__type__": "datetime.timezone", "str": "UTC"}),
            ),
            (
                tz(vec![td(-1, 66600, 0), Value::from("EST")]),
                json!({"__type__": "datetime.timezone", "str": "EST"}),
            ),
            (
                time_01_02_03(4, Value::Nil),
                json!({"__type__": "datetime.time", "iso": "01:02:03.000004"}),
            ),
            (
                time_01_02_03(0, tz(vec![td(0, 7200, 0)])),
                json!({"__type__": "datetime.time", "iso": "01:02:03+02:00"}),
            ),
            (
                obj(
                    ExtKind::ConstructorSingleArg,
                    "uuid",
                    "UUID",
                    Value::from("12345678123456781234567812345678"),
                ),
                json!({"__type__": "uuid.UUID", "str": "12345678-1234-5678-1234-567812345678"}),
            ),
            (
                obj(ExtKind::ConstructorSingleArg, "decimal", "Decimal", Value::from("1.10")),
                json!({"__type__": "decimal.Decimal", "str": "1.10"}),
            ),
            (
                obj(
                    ExtKind::ConstructorSingleArg,
                    "builtins",
                    "set",
                    Value::from(vec![2, 1]),
                ),
                json!({"__set__": [1, 2]}),
            ),
            (
                obj(ExtKind::ConstructorSingleArg, "__main__", "Color", Value::Int(1)),
                json!({"__type__": "__main__.Color", "value": 1}),
            ),
            (
                Value::Map(
                    (vec![
                        (Value::from(vec![1, 2]), Value::from("t")),
                        (Value::Int(1), Value::Int(3)),
                        (Value::Nil, Value::Int(1)),
                        (Value::Float(1.5), Value::Int(2)),
                    ])
                    .into(),
                ),
                json!({"1": 3, "1.5": 2, "[1, 2]": "t", "null": 1}),
            ),
            (Value::Float(f64::NAN), json!({"__float__": "nan"})),
            (
                Value::Ext(Box::new(
                    Ext::object_with_method(
                        ExtKind::MethodSingleArg,
                        "datetime",
                        "datetime",
                        Value::from("2024-01-02T03:04:05.000678+00:00"),
                        "fromisoformat",
                    )
                    .unwrap(),
                )),
                json!({"__type__": "datetime.datetime", "iso": "2024-01-02T03:04:05.000678+00:00"}),
            ),
            (
                Value::Ext(Box::new(Ext::raw(42, bytes::Bytes::from_static(b"\x01")))),
                json!(null),
            ),
        ];
        for (v, want) in cases {
            assert_eq!(value(&v), want, "{v:?}");
        }
    }
}
