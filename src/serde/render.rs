//! A canonical JSON view of stored values, identical to what the Python peer
//! tool `read_fixtures.py` prints for the same store.
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

use futures::StreamExt;

use super::{py_float_repr, Ext, Value};
use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::error::Result;
use crate::saver::{CheckpointSaver, ListOptions};
use crate::version::ChannelVersion;

/// The canonical JSON of a value (see the module docs).
pub fn value(v: &Value) -> serde_json::Value {
    match v {
        Value::Nil => serde_json::Value::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::UInt(u) => json!(u),
        Value::F32(f) => float(f64::from(*f)),
        Value::Float(f) => float(*f),
        Value::Str(s) => json!(s),
        Value::Bin(b) => json!({ "__bytes__": hex(b) }),
        Value::Array(items) => serde_json::Value::Array(items.iter().map(value).collect()),
        Value::Map(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                let key = match k {
                    Value::Str(s) => s.clone(),
                    other => python_json(&value(other)),
                };
                out.insert(key, value(v));
            }
            serde_json::Value::Object(out)
        }
        Value::Ext(e) => ext(e),
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

fn ext(e: &Ext) -> serde_json::Value {
    let code = e.code();
    if code == 7 {
        if let Some(inner) = e.snapshot_value() {
            return json!([value(inner)]);
        }
    }
    if !(0..=7).contains(&code) {
        return serde_json::Value::Null;
    }
    let (Some(module), Some(name), Some(arg)) = (e.module(), e.name(), e.arg()) else {
        return opaque(e, "?");
    };
    let type_name = format!("{module}.{name}");
    let rendered = match (code, module, name) {
        (0, "builtins", "set" | "frozenset") => arg.as_array().map(|items| {
            let mut items: Vec<(String, serde_json::Value)> = items
                .iter()
                .map(|x| {
                    let v = value(x);
                    (python_json(&v), v)
                })
                .collect();
            items.sort_by(|a, b| a.0.cmp(&b.0));
            json!({ "__set__": items.into_iter().map(|(_, v)| v).collect::<Vec<_>>() })
        }),
        (0, "uuid", "UUID") => arg
            .as_str()
            .and_then(dashed_uuid)
            .map(|s| typed(&type_name, "str", json!(s))),
        (0, "decimal", "Decimal") => arg.as_str().map(|s| typed(&type_name, "str", json!(s))),
        (0, "collections", "deque") | (0, "ipaddress", _) | (0, "zoneinfo", _) | (0, "pydantic.types", _) => None,
        (0, _, _) => Some(typed(&type_name, "value", value(arg))),
        (1, "langgraph.types", "Send") => arg
            .as_array()
            .and_then(|args| match args {
                [node, payload] => Some(json!({"node": value(node), "arg": value(payload), "timeout": null})),
                [node, payload, timeout] => {
                    Some(json!({"node": value(node), "arg": value(payload), "timeout": value(timeout)}))
                }
                _ => None,
            })
            .map(|data| typed(&type_name, "data", data)),
        (1, "datetime", "date") => ints(arg).and_then(|d| match d[..] {
            [y, m, day] => Some(typed(&type_name, "iso", json!(format!("{y:04}-{m:02}-{day:02}")))),
            _ => None,
        }),
        (1, "datetime", "timedelta") => ints(arg).and_then(|d| match d[..] {
            [days, seconds, micros] => Some(typed(&type_name, "str", json!(timedelta_str(days, seconds, micros)))),
            _ => None,
        }),
        (1, "datetime", "timezone") => timezone_str(arg).map(|s| typed(&type_name, "str", json!(s))),
        (1, _, _) => None,
        (2, "datetime", "time") => time_iso(arg).map(|s| typed(&type_name, "iso", json!(s))),
        (2 | 4 | 5, _, _) => Some(typed(&type_name, "data", value(arg))),
        (3, "datetime", "datetime") if e.method() == Some("fromisoformat") => {
            arg.as_str().map(|s| typed(&type_name, "iso", json!(s)))
        }
        // Python refuses other methods and returns the argument as it is
        (3, _, _) => Some(value(arg)),
        _ => None,
    };
    rendered.unwrap_or_else(|| opaque(e, &type_name))
}

fn typed(type_name: &str, key: &str, v: serde_json::Value) -> serde_json::Value {
    let mut m = Map::new();
    m.insert("__type__".into(), json!(type_name));
    m.insert(key.into(), v);
    serde_json::Value::Object(m)
}

fn opaque(e: &Ext, type_name: &str) -> serde_json::Value {
    let payload = match e.decoded() {
        Some(v) => value(v),
        None => json!({ "__bytes__": "" }),
    };
    json!({ "__type__": type_name, "ext": e.code(), "payload": payload })
}

fn ints(v: &Value) -> Option<Vec<i64>> {
    v.as_array()?.iter().map(Value::as_i64).collect()
}

fn dashed_uuid(hex: &str) -> Option<String> {
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let h = hex.to_ascii_lowercase();
    Some(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// Python's `str(timedelta(days, seconds, microseconds))` for a normalised
/// timedelta (0 <= seconds < 86400, 0 <= microseconds < 10^6).
fn timedelta_str(days: i64, seconds: i64, micros: i64) -> String {
    let mut s = String::new();
    if days != 0 {
        let plural = if days.abs() != 1 { "s" } else { "" };
        let _ = write!(s, "{days} day{plural}, ");
    }
    let _ = write!(s, "{}:{:02}:{:02}", seconds / 3600, seconds % 3600 / 60, seconds % 60);
    if micros != 0 {
        let _ = write!(s, ".{micros:06}");
    }
    s
}

/// The offset of a timezone payload (`[timedelta]` or `[timedelta, name]`)
/// in seconds and microseconds, and its name.
fn timezone_parts(arg: &Value) -> Option<(i64, i64, Option<&str>)> {
    let args = arg.as_array()?;
    let offset = args.first()?.as_ext()?;
    if offset.module() != Some("datetime") || offset.name() != Some("timedelta") {
        return None;
    }
    let d = ints(offset.arg()?)?;
    let [days, seconds, micros] = d[..] else {
        return None;
    };
    let name = match args.get(1) {
        Some(n) => Some(n.as_str()?),
        None => None,
    };
    Some((days * 86_400 + seconds, micros, name))
}

/// `±HH:MM[:SS[.ffffff]]` for an offset given as seconds + microseconds.
fn offset_str(seconds: i64, micros: i64) -> String {
    let total = seconds * 1_000_000 + micros;
    let sign = if total < 0 { '-' } else { '+' };
    let total = total.abs();
    let (secs, us) = (total / 1_000_000, total % 1_000_000);
    let mut s = format!("{sign}{:02}:{:02}", secs / 3600, secs % 3600 / 60);
    if secs % 60 != 0 || us != 0 {
        let _ = write!(s, ":{:02}", secs % 60);
    }
    if us != 0 {
        let _ = write!(s, ".{us:06}");
    }
    s
}

/// Python's `str(timezone)`.
fn timezone_str(arg: &Value) -> Option<String> {
    let (seconds, micros, name) = timezone_parts(arg)?;
    Some(match name {
        Some(n) => n.to_owned(),
        None if seconds == 0 && micros == 0 => "UTC".to_owned(),
        None => format!("UTC{}", offset_str(seconds, micros)),
    })
}

/// Python's `time.isoformat()` from the keyword payload of ext 2.
fn time_iso(arg: &Value) -> Option<String> {
    let field = |k: &str| arg.get(k).and_then(Value::as_i64);
    let (h, m, s, us) = (
        field("hour")?,
        field("minute")?,
        field("second")?,
        field("microsecond")?,
    );
    let mut out = format!("{h:02}:{m:02}:{s:02}");
    if us != 0 {
        let _ = write!(out, ".{us:06}");
    }
    match arg.get("tzinfo") {
        None | Some(Value::Nil) => {}
        Some(Value::Ext(tz)) if tz.module() == Some("datetime") && tz.name() == Some("timezone") => {
            let (seconds, micros, _) = timezone_parts(tz.arg()?)?;
            out.push_str(&offset_str(seconds, micros));
        }
        Some(_) => return None,
    }
    Some(out)
}

/// `json.dumps(v, sort_keys=True)` with Python's default separators and
/// ASCII escaping: the text Python sorts set items by and turns non-string
/// map keys into.
pub fn python_json(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_python_json(v, &mut out);
    out
}

fn write_python_json(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Null => out.push_str("null"),
        serde_json::Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else if let Some(f) = n.as_f64() {
                out.push_str(&py_float_repr(f));
            }
        }
        serde_json::Value::String(s) => write_ascii_str(s, out),
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(item, out);
            }
            out.push(']');
        }
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_ascii_str(k, out);
                out.push_str(": ");
                write_python_json(&m[k], out);
            }
            out.push('}');
        }
    }
}

fn write_ascii_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn versions(vs: &indexmap::IndexMap<String, ChannelVersion>) -> serde_json::Value {
    serde_json::Value::Object(vs.iter().map(|(k, v)| (k.clone(), value(&v.to_value()))).collect())
}

/// A checkpoint tuple as `read_fixtures.py` prints it (`tuple_view`): ids,
/// the rendered checkpoint, metadata and pending writes in the saver's order.
pub fn tuple(t: &CheckpointTuple) -> serde_json::Value {
    let cp = &t.checkpoint;
    let mut checkpoint = Map::new();
    checkpoint.insert("v".into(), json!(cp.v));
    checkpoint.insert("id".into(), json!(cp.id));
    checkpoint.insert("ts".into(), json!(cp.ts));
    checkpoint.insert(
        "channel_values".into(),
        serde_json::Value::Object(cp.channel_values.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
    );
    checkpoint.insert("channel_versions".into(), versions(&cp.channel_versions));
    checkpoint.insert(
        "versions_seen".into(),
        serde_json::Value::Object(cp.versions_seen.iter().map(|(k, v)| (k.clone(), versions(v))).collect()),
    );
    checkpoint.insert("updated_channels".into(), json!(cp.updated_channels));
    if let Some(sends) = &cp.pending_sends {
        checkpoint.insert("pending_sends".into(), value(&Value::Array(sends.clone())));
    }
    json!({
        "checkpoint_id": t.config.checkpoint_id,
        "parent_checkpoint_id": t.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone()),
        "checkpoint": checkpoint,
        "metadata": serde_json::Value::Object(t.metadata.0.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
        "pending_writes": t
            .pending_writes
            .iter()
            .map(|w| json!([w.task_id, w.channel, value(&w.value)]))
            .collect::<Vec<_>>(),
    })
}

/// Everything a saver holds, as `read_fixtures.py` prints it: every
/// checkpoint of every thread and namespace (listed with `list(None)`, each
/// read again with `get_tuple` and compared), the latest checkpoint of each
/// (thread, namespace), a summary, and the disagreements found under
/// `"errors"`. `source` fills the `"source"` field (Python prints the file
/// name).
///
/// Two dumps of stores holding the same checkpoints are equal as JSON values
/// whichever implementation wrote or read them.
///
/// # Errors
/// A failing `get_tuple`; failures of single rows while listing are reported
/// under `"errors"` instead.
pub async fn dump(saver: &dyn CheckpointSaver, source: &str) -> Result<serde_json::Value> {
    use std::collections::BTreeMap;

    let mut errors: Vec<String> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<serde_json::Value>> = BTreeMap::new();
    let mut ids: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut n_writes = 0usize;
    let mut listed = saver.list(None, ListOptions::default());
    while let Some(item) = listed.next().await {
        let lt = match item {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("list failed on a row: {e}"));
                continue;
            }
        };
        let key = (lt.config.thread_id.clone(), lt.config.ns().to_owned());
        let id = lt.config.checkpoint_id.clone().unwrap_or_default();
        let lv = tuple(&lt);
        let by_id = CheckpointConfig::new(key.0.clone())
            .with_ns(key.1.clone())
            .with_checkpoint_id(id.clone());
        ids.entry(key.clone()).or_default().push(id.clone());
        match saver.get_tuple(&by_id).await? {
            None => {
                errors.push(format!("get_tuple returned None for {key:?} {id}"));
                groups.entry(key).or_default().push(lv);
            }
            Some(gt) => {
                let gv = tuple(&gt);
                if gv != lv {
                    errors.push(format!("list() and get_tuple() disagree for {key:?} {id}"));
                }
                n_writes += gt.pending_writes.len();
                groups.entry(key).or_default().push(gv);
            }
        }
    }
    drop(listed);
    let mut threads: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    let n_namespaces = groups.len();
    let mut n_checkpoints = 0;
    for ((thread, ns), mut cps) in groups {
        let latest = saver
            .get_tuple(&CheckpointConfig::new(thread.clone()).with_ns(ns.clone()))
            .await?
            .and_then(|t| t.config.checkpoint_id);
        let newest = ids
            .get(&(thread.clone(), ns.clone()))
            .and_then(|v| v.iter().max().cloned());
        if latest != newest {
            errors.push(format!(
                "latest get_tuple for {:?} is {latest:?}, newest listed is {newest:?}",
                (&thread, &ns)
            ));
        }
        cps.sort_by(|a, b| {
            let id = |v: &serde_json::Value| v["checkpoint_id"].as_str().unwrap_or("").to_owned();
            id(a).cmp(&id(b))
        });
        n_checkpoints += cps.len();
        threads.entry(thread).or_default().push(json!({
            "checkpoint_ns": ns,
            "latest_checkpoint_id": latest,
            "checkpoints": cps,
        }));
    }
    Ok(json!({
        "source": source,
        "summary": {
            "threads": threads.len(),
            "namespaces": n_namespaces,
            "checkpoints": n_checkpoints,
            "pending_writes": n_writes,
        },
        "threads": threads
            .into_iter()
            .map(|(thread_id, namespaces)| json!({"thread_id": thread_id, "namespaces": namespaces}))
            .collect::<Vec<_>>(),
        "errors": errors,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::ExtKind;

    fn obj(kind: ExtKind, module: &str, name: &str, arg: Value) -> Value {
        Value::Ext(Ext::object(kind, module, name, arg).unwrap())
    }

    fn td(d: i64, s: i64, us: i64) -> Value {
        obj(
            ExtKind::ConstructorPosArgs,
            "datetime",
            "timedelta",
            Value::from(vec![d, s, us]),
        )
    }

    // Expected renderings were printed by read_fixtures.py's canon() for the
    // same Python values (langgraph-checkpoint 4.3.2).
    #[test]
    fn matches_python_canon() {
        let cases: Vec<(Value, serde_json::Value)> = vec![
            (
                obj(
                    ExtKind::ConstructorPosArgs,
                    "langgraph.types",
                    "Send",
                    Value::Array(vec![Value::from("w"), Value::map([("x", Value::Int(0))])]),
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
                obj(
                    ExtKind::ConstructorPosArgs,
                    "datetime",
                    "timezone",
                    Value::Array(vec![td(0, 7200, 0)]),
                ),
                json!({"__type__": "datetime.timezone", "str": "UTC+02:00"}),
            ),
            (
                obj(
                    ExtKind::ConstructorPosArgs,
                    "datetime",
                    "timezone",
                    Value::Array(vec![td(0, 0, 0)]),
                ),
                json!({"__type__": "datetime.timezone", "str": "UTC"}),
            ),
            (
                obj(
                    ExtKind::ConstructorPosArgs,
                    "datetime",
                    "timezone",
                    Value::Array(vec![td(-1, 66600, 0), Value::from("EST")]),
                ),
                json!({"__type__": "datetime.timezone", "str": "EST"}),
            ),
            (
                obj(
                    ExtKind::ConstructorKwArgs,
                    "datetime",
                    "time",
                    Value::map([
                        ("hour", Value::Int(1)),
                        ("minute", Value::Int(2)),
                        ("second", Value::Int(3)),
                        ("microsecond", Value::Int(4)),
                        ("tzinfo", Value::Nil),
                        ("fold", Value::Int(0)),
                    ]),
                ),
                json!({"__type__": "datetime.time", "iso": "01:02:03.000004"}),
            ),
            (
                obj(
                    ExtKind::ConstructorKwArgs,
                    "datetime",
                    "time",
                    Value::map([
                        ("hour", Value::Int(1)),
                        ("minute", Value::Int(2)),
                        ("second", Value::Int(3)),
                        ("microsecond", Value::Int(0)),
                        (
                            "tzinfo",
                            obj(
                                ExtKind::ConstructorPosArgs,
                                "datetime",
                                "timezone",
                                Value::Array(vec![td(0, 7200, 0)]),
                            ),
                        ),
                        ("fold", Value::Int(0)),
                    ]),
                ),
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
                Value::Map(vec![
                    (Value::from(vec![1, 2]), Value::from("t")),
                    (Value::Int(1), Value::Int(3)),
                    (Value::Nil, Value::Int(1)),
                    (Value::Float(1.5), Value::Int(2)),
                ]),
                json!({"1": 3, "1.5": 2, "[1, 2]": "t", "null": 1}),
            ),
            (Value::Float(f64::NAN), json!({"__float__": "nan"})),
            (
                Value::Ext(
                    Ext::object_with_method(
                        ExtKind::MethodSingleArg,
                        "datetime",
                        "datetime",
                        Value::from("2024-01-02T03:04:05.000678+00:00"),
                        "fromisoformat",
                    )
                    .unwrap(),
                ),
                json!({"__type__": "datetime.datetime", "iso": "2024-01-02T03:04:05.000678+00:00"}),
            ),
            (
                Value::Ext(Ext::raw(42, bytes::Bytes::from_static(b"\x01"))),
                json!(null),
            ),
        ];
        for (v, want) in cases {
            assert_eq!(value(&v), want, "{v:?}");
        }
    }

    #[test]
    fn python_json_text() {
        assert_eq!(
            python_json(&json!({"b": [1, 1.0, "é"], "a": null})),
            r#"{"a": null, "b": [1, 1.0, "\u00e9"]}"#
        );
        assert_eq!(python_json(&json!("\u{1F600}")), r#""\ud83d\ude00""#);
    }
}
