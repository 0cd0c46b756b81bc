//! The JSON text of a rendering, as Python's `json.dumps` writes it.

use crate::serde::json::write::{self, Format, Node, Scalar, Tree};

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
