//! The one writer of JSON text in the forms Python's `json.dumps` writes.
//!
//! Three places write JSON as Python would, and their rules differ only in
//! what [`Format`] holds:
//!
//! | | [`Format::PYTHON`] | [`Format::JSONB`] | [`Format::PYTHON_ASCII`], [`Format::indented`] |
//! |---|---|---|---|
//! | for | SQLite metadata, `json.dumps(v, ensure_ascii=False)` ([`to_python_json`](super::to_python_json)) | the PostgreSQL `checkpoint` and `metadata` text, which JSONB parses | `render`: `json.dumps(v, sort_keys=True)`; `json.dumps(v, indent=n, sort_keys=True, ensure_ascii=False)` |
//! | separators | `, ` and `: ` | `,` and `:` | `, ` and `: `; indented: `,` and a new line, `: ` |
//! | non-ASCII | as it is | as it is | `\uXXXX` in UTF-16 units; indented: as it is |
//! | U+0008, U+000C | `\b`, `\f` | `\u0008`, `\u000c` | `\b`, `\f` |
//! | floats | `repr`, `NaN`, `Infinity`, `-Infinity` | `repr` with a positive exponent spelt out (`1e+16` is `10000000000000000.0`, which JSONB keeps a float) | `repr` |
//!
//! Every form escapes `"`, `\`, `\n`, `\r`, `\t` and the other characters
//! below U+0020 (`\u00xx`, lower case), writes integers in decimal and empty
//! lists and objects as `[]` and `{}`.
//!
//! What the input holds is the [`Tree`]'s business: which values and keys it
//! refuses (bytes, extension values, NaN for JSONB…), how a map key that is
//! not a string becomes one (Python's `1`, `1.5`, `true`, `null`), the order
//! of an object's keys and the nesting limit ([`Values`] under some
//! [`ValueRules`] for msgpack [`Value`]s, render's sorted tree for
//! `serde_json` values). The writer keeps a list of the
//! open lists and objects instead of recursing, so a tree of any depth is
//! written on any stack.

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::serde::msgpack::MAX_DEPTH;
use crate::serde::{py_float_repr, Value};

/// How a [`Tree`] node is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Format {
    /// Between two items of a list or object (before the new line when
    /// indented).
    item_sep: &'static str,
    /// Between a key and its value.
    key_sep: &'static str,
    /// Spaces per nesting level, each item on a line of its own; `None`
    /// writes everything on one line.
    indent: Option<usize>,
    /// Python's `ensure_ascii`: everything outside printable ASCII as
    /// `\uXXXX`.
    ascii: bool,
    /// `\b` and `\f` (Python) rather than `\u0008` and `\u000c`.
    short_escapes: bool,
    /// How finite floats are written.
    floats: Floats,
}

/// How a [`Format`] writes finite floats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Floats {
    /// Python's `repr` (`1.0`, `1e-05`, `1e+16`).
    Repr,
    /// `repr`, a positive exponent spelt out in digits with `.0`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    PositiveExponentSpelt,
}

impl Format {
    /// `json.dumps(v, ensure_ascii=False)`.
    pub(crate) const PYTHON: Format = Format {
        item_sep: ", ",
        key_sep: ": ",
        indent: None,
        ascii: false,
        short_escapes: true,
        floats: Floats::Repr,
    };

    /// `json.dumps(v)`: [`PYTHON`](Self::PYTHON) with `ensure_ascii`.
    #[cfg(feature = "render")]
    pub(crate) const PYTHON_ASCII: Format = Format {
        ascii: true,
        ..Format::PYTHON
    };

    /// Text for PostgreSQL to parse into JSONB: no spaces, and floats that
    /// stay floats there.
    #[cfg(feature = "postgres")]
    pub(crate) const JSONB: Format = Format {
        item_sep: ",",
        key_sep: ":",
        indent: None,
        ascii: false,
        short_escapes: false,
        floats: Floats::PositiveExponentSpelt,
    };

    /// `json.dumps(v, indent=indent, ensure_ascii=False)`.
    #[cfg(feature = "render")]
    pub(crate) const fn indented(indent: usize) -> Format {
        Format {
            item_sep: ",",
            indent: Some(indent),
            ..Format::PYTHON
        }
    }
}

/// A value JSON writes as it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    /// Any float; a [`Tree`] refuses those its target cannot hold.
    Float(f64),
    Str(&'a str),
}

/// What a [`Tree`] says a value is.
pub(crate) enum Node<'a, I, E> {
    Scalar(Scalar<'a>),
    /// A list, with an iterator over its items.
    List(I),
    /// An object, with an iterator over its entries in the order to write.
    Object(E),
}

/// A tree of values to write: how to read a node, a key, and the depth a
/// list or object may be found at.
pub(crate) trait Tree<'a> {
    /// A node of the tree.
    type Value: 'a;
    /// A key of an object.
    type Key: 'a;
    /// The items of a list.
    type Items: Iterator<Item = &'a Self::Value>;
    /// The entries of an object.
    type Entries: Iterator<Item = (&'a Self::Key, &'a Self::Value)>;
    /// Why a value cannot be written.
    type Error;

    /// What `v` is.
    ///
    /// # Errors
    /// When `v` cannot be written.
    fn node(&self, v: &'a Self::Value) -> Result<Node<'a, Self::Items, Self::Entries>, Self::Error>;

    /// The key as JSON writes it: a string, or a scalar that becomes the text
    /// it writes as (Python's `1`, `true`, `null`).
    ///
    /// # Errors
    /// When `k` cannot be a key.
    fn key(&self, k: &'a Self::Key) -> Result<Scalar<'a>, Self::Error>;

    /// Called before a list or object found inside `depth` others is written.
    ///
    /// # Errors
    /// When it nests too deep.
    fn enter(&self, _depth: usize) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Appends `v` to `out` as JSON text in `format`.
///
/// # Errors
/// The first error of the tree; `out` then holds the text written so far.
pub(crate) fn write<'a, T: Tree<'a>>(
    tree: &T,
    v: &'a T::Value,
    format: Format,
    out: &mut String,
) -> Result<(), T::Error> {
    Writer { format, out }.nested(tree, v, 0)
}

/// Appends an object of `entries` (string keys, in the order given) to `out`
/// as JSON text in `format`.
///
/// # Errors
/// As [`write`].
pub(crate) fn write_object<'a, T: Tree<'a>>(
    tree: &T,
    entries: impl IntoIterator<Item = (&'a str, &'a T::Value)>,
    format: Format,
    out: &mut String,
) -> Result<(), T::Error> {
    tree.enter(0)?;
    let mut w = Writer { format, out };
    w.out.push('{');
    let mut empty = true;
    for (key, v) in entries {
        w.item(&mut empty, 1);
        w.string(key);
        w.out.push_str(format.key_sep);
        w.nested(tree, v, 1)?;
    }
    w.close('}', empty, 0);
    Ok(())
}

/// A list or object being written.
struct Open<I, E> {
    items: Items<I, E>,
    /// None of its items is written yet.
    empty: bool,
}

enum Items<I, E> {
    List(I),
    Object(E),
}

struct Writer<'o> {
    format: Format,
    out: &'o mut String,
}

impl Writer<'_> {
    /// Writes `v`, found inside `base` lists and objects, without recursion.
    fn nested<'a, T: Tree<'a>>(&mut self, tree: &T, v: &'a T::Value, base: usize) -> Result<(), T::Error> {
        let mut open: Vec<Open<T::Items, T::Entries>> = Vec::new();
        let mut next = Some(v);
        loop {
            if let Some(v) = next.take() {
                let opened = match tree.node(v)? {
                    Node::Scalar(s) => {
                        self.scalar(s);
                        None
                    }
                    Node::List(items) => Some(('[', Items::List(items))),
                    Node::Object(entries) => Some(('{', Items::Object(entries))),
                };
                if let Some((bracket, items)) = opened {
                    tree.enter(base + open.len())?;
                    self.out.push(bracket);
                    open.push(Open { items, empty: true });
                }
            }
            let level = base + open.len();
            let Some(Open { items, empty }) = open.last_mut() else {
                return Ok(());
            };
            let item = match items {
                Items::List(items) => items.next().map(|v| (None, v)),
                Items::Object(entries) => entries.next().map(|(k, v)| (Some(k), v)),
            };
            match item {
                Some((key, v)) => {
                    let key = key.map(|k| tree.key(k)).transpose()?;
                    self.item(empty, level);
                    if let Some(key) = key {
                        self.key(key);
                        self.out.push_str(self.format.key_sep);
                    }
                    next = Some(v);
                }
                None => {
                    let close = if matches!(items, Items::List(_)) { ']' } else { '}' };
                    let empty = *empty;
                    open.pop();
                    self.close(close, empty, level - 1);
                }
            }
        }
    }

    /// Starts an item of a list or object at `level`; `empty` says whether
    /// it is the first.
    fn item(&mut self, empty: &mut bool, level: usize) {
        if !std::mem::replace(empty, false) {
            self.out.push_str(self.format.item_sep);
        }
        self.newline(level);
    }

    /// Ends a list or object whose items are at one level below `level`.
    fn close(&mut self, close: char, empty: bool, level: usize) {
        if !empty {
            self.newline(level);
        }
        self.out.push(close);
    }

    fn newline(&mut self, level: usize) {
        if let Some(n) = self.format.indent {
            self.out.push('\n');
            self.out.extend(std::iter::repeat_n(' ', n * level));
        }
    }

    fn scalar(&mut self, s: Scalar<'_>) {
        match s {
            Scalar::Null => self.out.push_str("null"),
            Scalar::Bool(true) => self.out.push_str("true"),
            Scalar::Bool(false) => self.out.push_str("false"),
            Scalar::Int(i) => {
                let _ = write!(self.out, "{i}");
            }
            Scalar::UInt(u) => {
                let _ = write!(self.out, "{u}");
            }
            Scalar::Float(f) => self.float(f),
            Scalar::Str(s) => self.string(s),
        }
    }

    /// A key: a string as it is, anything else as the text of its value in
    /// quotes, as Python's encoder coerces keys.
    fn key(&mut self, k: Scalar<'_>) {
        match k {
            Scalar::Str(s) => self.string(s),
            other => {
                self.out.push('"');
                self.scalar(other);
                self.out.push('"');
            }
        }
    }

    fn float(&mut self, f: f64) {
        if f.is_nan() {
            self.out.push_str("NaN");
        } else if f == f64::INFINITY {
            self.out.push_str("Infinity");
        } else if f == f64::NEG_INFINITY {
            self.out.push_str("-Infinity");
        } else {
            let repr = py_float_repr(f);
            match (self.format.floats, repr.split_once("e+")) {
                (Floats::PositiveExponentSpelt, Some((mantissa, exp))) => {
                    let exp: usize = exp.parse().unwrap_or(0);
                    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
                    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
                    let zeros = (exp + 1).saturating_sub(digits.len());
                    let _ = write!(self.out, "{sign}{digits}{}.0", "0".repeat(zeros));
                }
                _ => self.out.push_str(&repr),
            }
        }
    }

    fn string(&mut self, s: &str) {
        let out = &mut *self.out;
        out.push('"');
        let mut start = 0;
        for (i, c) in s.char_indices() {
            let escaped = match c {
                '"' => "\\\"",
                '\\' => "\\\\",
                '\n' => "\\n",
                '\r' => "\\r",
                '\t' => "\\t",
                '\u{8}' if self.format.short_escapes => "\\b",
                '\u{c}' if self.format.short_escapes => "\\f",
                c if (c as u32) < 0x20 || (self.format.ascii && (c as u32) > 0x7e) => "",
                _ => continue,
            };
            out.push_str(&s[start..i]);
            if escaped.is_empty() {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            } else {
                out.push_str(escaped);
            }
            start = i + c.len_utf8();
        }
        out.push_str(&s[start..]);
        out.push('"');
    }
}

/// The entries of a [`Value::Map`], as a [`Tree`] reads them.
pub(crate) struct MapEntries<'a>(std::slice::Iter<'a, (Value, Value)>);

impl<'a> Iterator for MapEntries<'a> {
    type Item = (&'a Value, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

/// A [`Node`] of a [`Value`] tree.
pub(crate) type ValueNode<'a> = Node<'a, std::slice::Iter<'a, Value>, MapEntries<'a>>;

/// What JSON makes of a [`Value`], or `Err(v)` for what JSON cannot hold
/// (bytes, extension values).
pub(crate) fn value_node(v: &Value) -> Result<ValueNode<'_>, &Value> {
    Ok(match v {
        Value::Nil => Node::Scalar(Scalar::Null),
        Value::Bool(b) => Node::Scalar(Scalar::Bool(*b)),
        Value::Int(i) => Node::Scalar(Scalar::Int(*i)),
        Value::UInt(u) => Node::Scalar(Scalar::UInt(*u)),
        Value::F32(f) => Node::Scalar(Scalar::Float(f64::from(*f))),
        Value::Float(f) => Node::Scalar(Scalar::Float(*f)),
        Value::Str(s) => Node::Scalar(Scalar::Str(s)),
        Value::Array(items) => Node::List(items.iter()),
        Value::Map(entries) => Node::Object(MapEntries(entries.iter())),
        Value::Bin(_) | Value::Ext(_) => return Err(v),
    })
}

/// A map key as Python's `json` takes it: a string, or a scalar (int,
/// float, bool, None) it writes as text; `None` for anything else.
pub(crate) fn scalar_key(k: &Value) -> Option<Scalar<'_>> {
    match value_node(k) {
        Ok(Node::Scalar(s)) => Some(s),
        _ => None,
    }
}

/// What a tree of [`Value`]s refuses, and how its map keys become JSON
/// keys; [`Values`] makes it a [`Tree`].
pub(crate) trait ValueRules {
    /// What `v` is: [`value_node`], less what these rules refuse.
    ///
    /// # Errors
    /// When `v` cannot be written.
    fn node<'a>(&self, v: &'a Value) -> Result<ValueNode<'a>>;

    /// The JSON key for map key `k`.
    ///
    /// # Errors
    /// When `k` cannot be a key.
    fn key<'a>(&self, k: &'a Value) -> Result<Scalar<'a>>;

    /// The error for a list or map nested deeper than [`MAX_DEPTH`].
    fn too_deep(&self) -> Error;
}

/// A [`Tree`] of [`Value`]s under `R`, nested up to [`MAX_DEPTH`] as the
/// msgpack encoder nests them.
pub(crate) struct Values<R>(pub(crate) R);

impl<'a, R: ValueRules> Tree<'a> for Values<R> {
    type Value = Value;
    type Key = Value;
    type Items = std::slice::Iter<'a, Value>;
    type Entries = MapEntries<'a>;
    type Error = Error;

    fn node(&self, v: &'a Value) -> Result<ValueNode<'a>> {
        self.0.node(v)
    }

    fn key(&self, k: &'a Value) -> Result<Scalar<'a>> {
        self.0.key(k)
    }

    fn enter(&self, depth: usize) -> Result<()> {
        if depth >= MAX_DEPTH {
            return Err(self.0.too_deep());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain values, nothing refused, no limit.
    struct Plain;

    impl<'a> Tree<'a> for Plain {
        type Value = Value;
        type Key = Value;
        type Items = std::slice::Iter<'a, Value>;
        type Entries = MapEntries<'a>;
        type Error = ();

        fn node(&self, v: &'a Value) -> Result<ValueNode<'a>, ()> {
            value_node(v).map_err(|_| ())
        }

        fn key(&self, k: &'a Value) -> Result<Scalar<'a>, ()> {
            scalar_key(k).ok_or(())
        }
    }

    fn text(v: &Value, format: Format) -> String {
        let mut out = String::new();
        write(&Plain, v, format, &mut out).unwrap();
        out
    }

    #[test]
    fn formats_differ_only_where_their_readers_do() {
        let v = Value::Map(
            vec![
                (Value::from("é\u{8}\u{c}\u{1}\u{7f}😀"), Value::Float(1e16)),
                (
                    Value::Int(1),
                    Value::Array(vec![Value::Float(f64::NAN), Value::Nil].into()),
                ),
                (Value::from("e"), Value::Array(vec![].into())),
            ]
            .into(),
        );
        assert_eq!(
            text(&v, Format::PYTHON),
            "{\"é\\b\\f\\u0001\u{7f}😀\": 1e+16, \"1\": [NaN, null], \"e\": []}"
        );
        #[cfg(feature = "render")]
        assert_eq!(
            text(&v, Format::PYTHON_ASCII),
            "{\"\\u00e9\\b\\f\\u0001\\u007f\\ud83d\\ude00\": 1e+16, \"1\": [NaN, null], \"e\": []}"
        );
        #[cfg(feature = "postgres")]
        assert_eq!(
            text(&v, Format::JSONB),
            "{\"é\\u0008\\u000c\\u0001\u{7f}😀\":10000000000000000.0,\"1\":[NaN,null],\"e\":[]}"
        );
        #[cfg(feature = "render")]
        assert_eq!(
            text(&v, Format::indented(2)),
            "{\n  \"é\\b\\f\\u0001\u{7f}😀\": 1e+16,\n  \"1\": [\n    NaN,\n    null\n  ],\n  \"e\": []\n}"
        );
    }

    #[test]
    fn writes_any_depth_without_recursion() {
        let deep = (0..200_000).fold(Value::Nil, |v, _| Value::Array(vec![v].into()));
        let out = text(&deep, Format::PYTHON);
        assert_eq!(out.len(), 2 * 200_000 + 4);
        // too deep to drop on a test thread's stack
        std::mem::forget(deep);
    }

    #[test]
    fn an_object_of_entries_nests_its_values_one_level_down() {
        let list = Value::Array(vec![Value::Int(1)].into());
        let mut out = String::new();
        write_object(&Plain, [("a", &list), ("b", &Value::Nil)], Format::PYTHON, &mut out).unwrap();
        assert_eq!(out, r#"{"a": [1], "b": null}"#);
        #[cfg(feature = "render")]
        {
            out.clear();
            write_object(
                &Plain,
                [("a", &list), ("b", &Value::Nil)],
                Format::indented(1),
                &mut out,
            )
            .unwrap();
            assert_eq!(out, "{\n \"a\": [\n  1\n ],\n \"b\": null\n}");
        }
        out.clear();
        write_object::<Plain>(&Plain, [], Format::PYTHON, &mut out).unwrap();
        assert_eq!(out, "{}");
    }
}
