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

use futures::StreamExt;

use super::json::write::{self, Format, Node, Scalar, Tree};
use super::msgpack::MAX_DEPTH;
use super::{Ext, Value};
use crate::checkpoint::CheckpointTuple;
use crate::config::CheckpointConfig;
use crate::error::Result;
use crate::saver::{CheckpointSaver, ListOptions};
use crate::version::ChannelVersion;

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
    sorted_json(v, Format::PYTHON_ASCII)
}

/// `json.dumps(v, indent=indent, sort_keys=True, ensure_ascii=False)`: the
/// text `read_fixtures.py` prints (with `indent = 1`, plus a final newline
/// it adds itself).
///
/// Keys are sorted by code point, floats are Python's `repr`, non-ASCII
/// characters are written as they are and control characters escaped, empty
/// lists and objects are `[]` and `{}`.
///
/// ```
/// use checkpointer::serde::render::python_json_indented;
/// let v = serde_json::json!({"b": [1, 2.0, "é"], "a": {}});
/// assert_eq!(python_json_indented(&v, 1), "{\n \"a\": {},\n \"b\": [\n  1,\n  2.0,\n  \"é\"\n ]\n}");
/// ```
pub fn python_json_indented(v: &serde_json::Value, indent: usize) -> String {
    sorted_json(v, Format::indented(indent))
}

/// A rendering as Python's `json` writes a dict it got from `json.loads`:
/// keys sorted by code point, numbers as they are, nothing refused.
struct Sorted;

impl<'a> Tree<'a> for Sorted {
    type Value = serde_json::Value;
    type Key = String;
    type Items = std::slice::Iter<'a, serde_json::Value>;
    type Entries = std::vec::IntoIter<(&'a String, &'a serde_json::Value)>;
    type Error = std::convert::Infallible;

    fn node(&self, v: &'a serde_json::Value) -> Result<Node<'a, Self::Items, Self::Entries>, Self::Error> {
        Ok(match v {
            serde_json::Value::Null => Node::Scalar(Scalar::Null),
            serde_json::Value::Bool(b) => Node::Scalar(Scalar::Bool(*b)),
            serde_json::Value::Number(n) => Node::Scalar(match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => Scalar::Int(i),
                (None, Some(u), _) => Scalar::UInt(u),
                (None, None, Some(f)) => Scalar::Float(f),
                (None, None, None) => Scalar::Null,
            }),
            serde_json::Value::String(s) => Node::Scalar(Scalar::Str(s)),
            serde_json::Value::Array(items) => Node::List(items.iter()),
            serde_json::Value::Object(m) => {
                let mut entries: Vec<_> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Node::Object(entries.into_iter())
            }
        })
    }

    fn key(&self, k: &'a String) -> Result<Scalar<'a>, Self::Error> {
        Ok(Scalar::Str(k))
    }
}

fn sorted_json(v: &serde_json::Value, format: Format) -> String {
    let mut out = String::new();
    match write::write(&Sorted, v, format, &mut out) {
        Ok(()) => out,
        Err(never) => match never {},
    }
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
        checkpoint.insert("pending_sends".into(), value(&Value::Array(sends.clone().into())));
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

/// What [`dump_with`] covers, and whom it tells about its progress.
#[derive(Clone, Copy, Default)]
pub struct DumpOptions<'a> {
    /// Only these threads (every namespace of each); `None` is the whole
    /// store, listed with `list(None)` as Python does.
    pub threads: Option<&'a [String]>,
    /// Called once for every checkpoint read.
    pub on_checkpoint: Option<&'a (dyn Fn() + Send + Sync)>,
}

impl std::fmt::Debug for DumpOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DumpOptions")
            .field("threads", &self.threads)
            .field("on_checkpoint", &self.on_checkpoint.is_some())
            .finish()
    }
}

/// Everything a saver holds, as `read_fixtures.py` prints it: every
/// checkpoint of every thread and namespace (listed with `list(None)`, each
/// read again with `get_tuple` and compared), the latest checkpoint of each
/// (thread, namespace), a summary, and the disagreements found under
/// `"errors"`. `source` fills the `"source"` field (Python prints the file
/// name).
///
/// Two dumps of stores holding the same checkpoints are equal as JSON values
/// whichever implementation wrote or read them; printed with
/// [`python_json_indented`] (indent 1) and a final newline they are the bytes
/// `read_fixtures.py` prints, and after [`normalize`] those of its
/// `--normalize` output.
///
/// # Errors
/// A failing `get_tuple`; failures of single rows while listing are reported
/// under `"errors"` instead.
pub async fn dump(saver: &dyn CheckpointSaver, source: &str) -> Result<serde_json::Value> {
    dump_with(saver, source, DumpOptions::default()).await
}

/// [`dump`] of some threads only, or with a progress callback.
///
/// # Errors
/// As [`dump`].
pub async fn dump_with(
    saver: &dyn CheckpointSaver,
    source: &str,
    options: DumpOptions<'_>,
) -> Result<serde_json::Value> {
    use std::collections::BTreeMap;

    let mut errors: Vec<String> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<serde_json::Value>> = BTreeMap::new();
    let mut ids: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut n_writes = 0usize;
    let scopes: Vec<Option<CheckpointConfig>> = match options.threads {
        None => vec![None],
        Some(threads) => threads
            .iter()
            .map(|t| Some(CheckpointConfig::all_namespaces(t.clone())))
            .collect(),
    };
    for scope in scopes {
        let mut listed = saver.list(scope, ListOptions::default());
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
                    errors.push(format!("get_tuple returned None for {} {id}", py_key(&key)));
                    groups.entry(key).or_default().push(lv);
                }
                Some(gt) => {
                    let gv = tuple(&gt);
                    if gv != lv {
                        errors.push(format!("list() and get_tuple() disagree for {} {id}", py_key(&key)));
                    }
                    n_writes += gt.pending_writes.len();
                    groups.entry(key).or_default().push(gv);
                }
            }
            if let Some(tick) = options.on_checkpoint {
                tick();
            }
        }
    }
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
            let py = |id: &Option<String>| id.clone().unwrap_or_else(|| "None".to_owned());
            errors.push(format!(
                "latest get_tuple for {} is {}, newest listed is {}",
                py_key(&(thread.clone(), ns.clone())),
                py(&latest),
                py(&newest)
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

/// A (thread, namespace) key as Python prints the tuple: `('t', '')`.
fn py_key(key: &(String, String)) -> String {
    format!("({}, {})", py_repr(&key.0), py_repr(&key.1))
}

/// Python's `repr` of a string (printable characters kept, quotes chosen as
/// Python chooses them).
fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The aliases `--normalize` gives run-specific strings.
#[derive(Default)]
struct Aliases {
    /// Every checkpoint id (an alias once its namespace is reached), task
    /// id and interrupt id seen so far.
    map: std::collections::HashMap<String, Option<String>>,
    counters: std::collections::HashMap<&'static str, usize>,
}

impl Aliases {
    fn get(&mut self, kind: &'static str, value: &str) -> Option<String> {
        if !self.map.contains_key(value) {
            let n = self.counters.entry(kind).or_insert(0);
            self.map.insert(value.to_owned(), Some(format!("<{kind}{n}>")));
            *n += 1;
        }
        self.map.get(value).cloned().flatten()
    }

    fn walk(&mut self, v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::String(s) => match self.map.get(s) {
                Some(Some(alias)) => json!(alias),
                _ => v.clone(),
            },
            serde_json::Value::Array(items) => serde_json::Value::Array(items.iter().map(|x| self.walk(x)).collect()),
            serde_json::Value::Object(m) => {
                if let (Some(t @ serde_json::Value::String(ty)), Some(serde_json::Value::Object(data))) =
                    (m.get("__type__"), m.get("data"))
                {
                    if ty == "langgraph.types.Interrupt" {
                        let mut data = data.clone();
                        if let Some(serde_json::Value::String(id)) = data.get("id") {
                            let alias = self.get("I", &id.clone()).map_or(serde_json::Value::Null, |a| json!(a));
                            data.insert("id".into(), alias);
                        }
                        let data = self.walk(&serde_json::Value::Object(data));
                        return json!({"__type__": t, "data": data});
                    }
                }
                serde_json::Value::Object(m.iter().map(|(k, x)| (k.clone(), self.walk(x))).collect())
            }
            other => other.clone(),
        }
    }
}

/// The integer part of a LangGraph version string (`"0…02.0.123"` → 2), as
/// `--normalize` keeps it; anything else unchanged.
fn version_part(v: &serde_json::Value) -> serde_json::Value {
    fn digits(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }
    // `^(\d+)\.(\d+(\.\d+)?(e-?\d+)?)$`
    fn fraction(s: &str) -> bool {
        let (mantissa, exponent) = match s.split_once('e') {
            Some((m, e)) => (m, Some(e.strip_prefix('-').unwrap_or(e))),
            None => (s, None),
        };
        let mantissa_ok = match mantissa.split_once('.') {
            Some((a, b)) => digits(a) && digits(b),
            None => digits(mantissa),
        };
        mantissa_ok && exponent.is_none_or(digits)
    }
    if let serde_json::Value::String(s) = v {
        if let Some((int, rest)) = s.split_once('.') {
            if digits(int) && fraction(rest) {
                if let Ok(n) = int.parse::<u64>() {
                    return json!(n);
                }
            }
        }
    }
    v.clone()
}

fn versions_part(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            serde_json::Value::Object(m.iter().map(|(k, x)| (k.clone(), version_part(x))).collect())
        }
        other => other.clone(),
    }
}

fn field<'v>(v: &'v serde_json::Value, key: &str) -> Result<&'v serde_json::Value> {
    v.get(key)
        .ok_or_else(|| crate::Error::invalid(format!("not a dump: no {key:?} field")))
}

fn items<'v>(v: &'v serde_json::Value, key: &str) -> Result<&'v [serde_json::Value]> {
    field(v, key)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| crate::Error::invalid(format!("not a dump: {key:?} is not a list")))
}

fn text<'v>(v: &'v serde_json::Value, key: &str) -> Result<&'v str> {
    field(v, key)?
        .as_str()
        .ok_or_else(|| crate::Error::invalid(format!("not a dump: {key:?} is not a string")))
}

/// The deepest nesting of lists and objects [`normalize`] accepts in a dump.
/// A [`dump`] holds values rendered from what the decoder accepts
/// ([`MAX_DEPTH`] levels, and one more for `{"__bytes__": …}`) nine levels
/// down (dump, threads, thread, namespaces, namespace, checkpoints,
/// checkpoint, its fields, `channel_values`), within this limit.
pub const MAX_DUMP_DEPTH: usize = MAX_DEPTH + 16;

/// Whether `v` nests at most `limit` lists and objects, found without
/// recursion.
fn nests_within(v: &serde_json::Value, limit: usize) -> bool {
    let mut todo = vec![(v, 0usize)];
    while let Some((v, depth)) = todo.pop() {
        match v {
            serde_json::Value::Array(items) if !items.is_empty() => {
                if depth >= limit {
                    return false;
                }
                todo.extend(items.iter().map(|x| (x, depth + 1)));
            }
            serde_json::Value::Object(m) if !m.is_empty() => {
                if depth >= limit {
                    return false;
                }
                todo.extend(m.values().map(|x| (x, depth + 1)));
            }
            _ => {}
        }
    }
    true
}

/// What `read_fixtures.py --normalize` makes of a [`dump`]: checkpoint ids
/// become `<thread/ns#i>` (oldest first per namespace), task ids `<Tn>`
/// (namespace segments first, then pending writes, in dump order) and
/// interrupt ids `<In>` wherever they occur as strings; timestamps become
/// `<ts>`; versions keep their integer part; `updated_channels` is sorted and
/// each task's pending writes are ordered by channel (stable, tasks in the
/// saver's order). The result has `"normalized": true`.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when `dump` does not
/// have the shape [`dump`] produces; [`Error::Serde`](crate::Error::Serde)
/// when it nests deeper than [`MAX_DUMP_DEPTH`] (checked first, without
/// recursion, so that the walks below stay bounded).
pub fn normalize(dump: &serde_json::Value) -> Result<serde_json::Value> {
    use crate::checkpoint::NULL_TASK_ID;

    if !nests_within(dump, MAX_DUMP_DEPTH) {
        return Err(crate::Error::serde(format!(
            "the dump nests deeper than the limit of {MAX_DUMP_DEPTH} lists and objects"
        )));
    }

    let mut al = Aliases::default();
    let threads = items(dump, "threads")?;
    for th in threads {
        for ns in items(th, "namespaces")? {
            for cp in items(ns, "checkpoints")? {
                al.map.insert(text(cp, "checkpoint_id")?.to_owned(), None);
            }
        }
    }
    let mut ns_aliases: Vec<Vec<String>> = Vec::new();
    for th in threads {
        let thread_id = text(th, "thread_id")?;
        let mut aliases = Vec::new();
        for ns in items(th, "namespaces")? {
            let name = text(ns, "checkpoint_ns")?;
            let mut parts = Vec::new();
            if !name.is_empty() {
                for seg in name.split('|') {
                    match seg.split_once(':') {
                        Some((node, tid)) if !tid.is_empty() => {
                            let alias = al.get("T", tid).unwrap_or_else(|| "None".to_owned());
                            parts.push(format!("{node}:{alias}"));
                        }
                        _ => parts.push(seg.to_owned()),
                    }
                }
            }
            let alias = parts.join("|");
            for (i, cp) in items(ns, "checkpoints")?.iter().enumerate() {
                al.map.insert(
                    text(cp, "checkpoint_id")?.to_owned(),
                    Some(format!("<{thread_id}/{alias}#{i}>")),
                );
            }
            aliases.push(alias);
        }
        ns_aliases.push(aliases);
    }
    for th in threads {
        for ns in items(th, "namespaces")? {
            for cp in items(ns, "checkpoints")? {
                for w in items(cp, "pending_writes")? {
                    if let Some(task) = w.get(0).and_then(serde_json::Value::as_str) {
                        if task != NULL_TASK_ID {
                            al.get("T", task);
                        }
                    }
                }
            }
        }
    }

    let mut out_threads = Vec::new();
    for (th, aliases) in threads.iter().zip(ns_aliases) {
        let mut nss = Vec::new();
        for (ns, alias) in items(th, "namespaces")?.iter().zip(aliases) {
            let mut cps = Vec::new();
            for cp in items(ns, "checkpoints")? {
                let c = field(cp, "checkpoint")?;
                let id_alias = al.map.get(text(cp, "checkpoint_id")?).cloned().flatten();
                let parent = al.walk(field(cp, "parent_checkpoint_id")?);
                let mut checkpoint = Map::new();
                checkpoint.insert("v".into(), field(c, "v")?.clone());
                checkpoint.insert("id".into(), al.walk(field(c, "id")?));
                checkpoint.insert("ts".into(), json!("<ts>"));
                checkpoint.insert("channel_values".into(), al.walk(field(c, "channel_values")?));
                checkpoint.insert("channel_versions".into(), versions_part(field(c, "channel_versions")?));
                let seen = match field(c, "versions_seen")? {
                    serde_json::Value::Object(m) => {
                        serde_json::Value::Object(m.iter().map(|(k, x)| (k.clone(), versions_part(x))).collect())
                    }
                    other => other.clone(),
                };
                checkpoint.insert("versions_seen".into(), seen);
                let updated = match field(c, "updated_channels")? {
                    serde_json::Value::Array(list) => {
                        let mut list = list.clone();
                        list.sort_by(|a, b| match (a.as_str(), b.as_str()) {
                            (Some(a), Some(b)) => a.cmp(b),
                            _ => python_json(a).cmp(&python_json(b)),
                        });
                        serde_json::Value::Array(list)
                    }
                    other => other.clone(),
                };
                checkpoint.insert("updated_channels".into(), updated);
                if let Some(sends) = c.get("pending_sends") {
                    checkpoint.insert("pending_sends".into(), al.walk(sends));
                }
                let metadata = al.walk(field(cp, "metadata")?);
                let mut writes = Vec::new();
                for w in items(cp, "pending_writes")? {
                    let w = w.as_array().filter(|w| w.len() == 3).ok_or_else(|| {
                        crate::Error::invalid("not a dump: a pending write is not [task, channel, value]")
                    })?;
                    writes.push(vec![al.walk(&w[0]), w[1].clone(), al.walk(&w[2])]);
                }
                // tasks rank by their first write; one hash lookup per write
                // (a task that is not a string, which no dump holds, is
                // known by its JSON text)
                let mut first: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
                let mut ranked: Vec<(usize, Vec<serde_json::Value>)> = Vec::with_capacity(writes.len());
                for w in writes {
                    let task = match &w[0] {
                        serde_json::Value::String(s) => format!("s{s}"),
                        other => format!("j{}", python_json(other)),
                    };
                    let next = first.len();
                    let rank = *first.entry(task).or_insert(next);
                    ranked.push((rank, w));
                }
                ranked.sort_by(|(ra, a), (rb, b)| {
                    ra.cmp(rb)
                        .then_with(|| a[1].as_str().unwrap_or("").cmp(b[1].as_str().unwrap_or("")))
                });
                let writes: Vec<Vec<serde_json::Value>> = ranked.into_iter().map(|(_, w)| w).collect();
                cps.push(json!({
                    "checkpoint_id": id_alias,
                    "parent_checkpoint_id": parent,
                    "checkpoint": checkpoint,
                    "metadata": metadata,
                    "pending_writes": writes,
                }));
            }
            let latest = al.walk(field(ns, "latest_checkpoint_id")?);
            nss.push(json!({"checkpoint_ns": alias, "latest_checkpoint_id": latest, "checkpoints": cps}));
        }
        out_threads.push(json!({"thread_id": field(th, "thread_id")?, "namespaces": nss}));
    }
    let mut out = dump
        .as_object()
        .cloned()
        .ok_or_else(|| crate::Error::invalid("not a dump: not an object"))?;
    out.insert("normalized".into(), json!(true));
    out.insert("threads".into(), serde_json::Value::Array(out_threads));
    Ok(serde_json::Value::Object(out))
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
                obj(
                    ExtKind::ConstructorPosArgs,
                    "datetime",
                    "timezone",
                    Value::Array(vec![td(0, 7200, 0)].into()),
                ),
                json!({"__type__": "datetime.timezone", "str": "UTC+02:00"}),
            ),
            (
                obj(
                    ExtKind::ConstructorPosArgs,
                    "datetime",
                    "timezone",
                    Value::Array(vec![td(0, 0, 0)].into()),
                ),
                json!({"__type__": "datetime.timezone", "str": "UTC"}),
            ),
            (
                obj(
                    ExtKind::ConstructorPosArgs,
                    "datetime",
                    "timezone",
                    Value::Array((vec![td(-1, 66600, 0), Value::from("EST")]).into()),
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
                                Value::Array(vec![td(0, 7200, 0)].into()),
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

    #[test]
    fn normalize_aliases_as_read_fixtures_does() {
        let cp = |id: &str, parent: serde_json::Value, writes: serde_json::Value| {
            json!({
                "checkpoint_id": id,
                "parent_checkpoint_id": parent,
                "checkpoint": {
                    "v": 4, "id": id, "ts": "2024-01-01T00:00:00+00:00",
                    "channel_values": {
                        "x": {"__type__": "langgraph.types.Interrupt", "data": {"value": "ask", "id": "int-9"}},
                        "ref": "task-b",
                    },
                    "channel_versions": {"x": "00000000000000000000000000000002.0.5", "y": "0000000001.5e-05", "z": 3, "w": "1.2.3.4"},
                    "versions_seen": {"n": {"x": "00000000000000000000000000000001.0.25"}},
                    "updated_channels": ["y", "x"],
                },
                "metadata": {"parents": {"": id}},
                "pending_writes": writes,
            })
        };
        let dump = json!({
            "source": "s.sqlite",
            "summary": {},
            "errors": [],
            "threads": [{"thread_id": "t", "namespaces": [
                {"checkpoint_ns": "", "latest_checkpoint_id": "c2", "checkpoints": [
                    cp("c1", json!(null), json!([
                        ["task-b", "z", 1], ["task-a", "b", 2], ["task-b", "a", 3],
                        ["00000000-0000-0000-0000-000000000000", "a", 4],
                    ])),
                    cp("c2", json!("c1"), json!([])),
                ]},
                {"checkpoint_ns": "child:task-c|inner", "latest_checkpoint_id": "c3", "checkpoints": [
                    cp("c3", json!(null), json!([])),
                ]},
            ]}],
        });
        let n = normalize(&dump).unwrap();
        assert_eq!(n["normalized"], json!(true));
        let ns = &n["threads"][0]["namespaces"];
        assert_eq!(ns[1]["checkpoint_ns"], "child:<T0>|inner");
        assert_eq!(ns[1]["latest_checkpoint_id"], "<t/child:<T0>|inner#0>");
        let c1 = &ns[0]["checkpoints"][0];
        assert_eq!(c1["checkpoint_id"], "<t/#0>");
        assert_eq!(ns[0]["checkpoints"][1]["parent_checkpoint_id"], "<t/#0>");
        assert_eq!(c1["checkpoint"]["ts"], "<ts>");
        assert_eq!(
            c1["checkpoint"]["channel_versions"],
            json!({"x": 2, "y": 1, "z": 3, "w": "1.2.3.4"})
        );
        assert_eq!(c1["checkpoint"]["versions_seen"], json!({"n": {"x": 1}}));
        assert_eq!(c1["checkpoint"]["updated_channels"], json!(["x", "y"]));
        assert_eq!(c1["metadata"], json!({"parents": {"": "<t/#0>"}}));
        // task ids in write order; interrupts numbered as the walk meets them
        assert_eq!(c1["checkpoint"]["channel_values"]["ref"], "<T1>");
        assert_eq!(
            c1["checkpoint"]["channel_values"]["x"],
            json!({"__type__": "langgraph.types.Interrupt", "data": {"value": "ask", "id": "<I0>"}})
        );
        // tasks keep their order, each task's writes by channel
        assert_eq!(
            c1["pending_writes"],
            json!([
                ["<T1>", "a", 3],
                ["<T1>", "z", 1],
                ["<T2>", "b", 2],
                ["00000000-0000-0000-0000-000000000000", "a", 4],
            ])
        );
        assert!(normalize(&json!({"threads": 1})).is_err());
    }

    #[test]
    fn python_json_text() {
        assert_eq!(
            python_json(&json!({"b": [1, 1.0, "é"], "a": null})),
            r#"{"a": null, "b": [1, 1.0, "\u00e9"]}"#
        );
        assert_eq!(python_json(&json!("\u{1F600}")), r#""\ud83d\ude00""#);
        assert_eq!(
            python_json_indented(&json!({"k": ["\u{e9}\n", {}, [], 1.0e-5]}), 1),
            "{\n \"k\": [\n  \"\u{e9}\\n\",\n  {},\n  [],\n  1e-05\n ]\n}"
        );
    }
}
