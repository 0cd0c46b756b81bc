//! Embeddings: the caller's [`Embeddings`] function, the deterministic
//! [`HashedNgramEmbeddings`] for tests, and the texts of an item that get
//! embedded ([`tokenize_path`], [`texts_at_path`]), as LangGraph extracts them.

use async_trait::async_trait;
use serde_json::Value;

/// What an embedding function may fail with.
pub type EmbedError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An embedding function: texts in, one vector each out. The caller brings
/// it (a model client, a local model); the store never fetches one.
///
/// ```
/// use checkpointer::store::{Embeddings, HashedNgramEmbeddings};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), checkpointer::store::EmbedError> {
/// let embed = HashedNgramEmbeddings::new(16);
/// let vectors = embed.embed_documents(&["hello".to_owned(), "world".to_owned()]).await?;
/// assert_eq!(vectors.len(), 2);
/// assert_eq!(vectors[0].len(), 16);
/// assert_eq!(embed.embed_query("hello").await?, vectors[0]);
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait Embeddings: Send + Sync {
    /// One vector per text, in order.
    ///
    /// # Errors
    /// Whatever the function fails with; the store reports it as
    /// [`StoreError::Embedding`](super::StoreError::Embedding) and stores nothing.
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// The vector of a search query (by default, as a document).
    ///
    /// # Errors
    /// As [`Embeddings::embed_documents`].
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = self.embed_documents(&[text.to_owned()]).await?;
        vectors
            .pop()
            .ok_or_else(|| "the embedding function returned no vector".into())
    }
}

/// A deterministic embedding for tests, with no model: the text, with a
/// space added at each end, cut into overlapping 3-character windows
/// (Unicode scalar values; a shorter text is one window); each window's
/// UTF-8 bytes hashed with 32-bit FNV-1a, and component `hash % dims`
/// counts it. Components are small whole numbers, so cosine similarities
/// computed in any language from them agree to the last bit.
/// `scripts/store_python_peer.py` has the same function in Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashedNgramEmbeddings {
    dims: usize,
}

impl HashedNgramEmbeddings {
    /// An embedding of `dims` components (at least 1).
    pub fn new(dims: usize) -> HashedNgramEmbeddings {
        HashedNgramEmbeddings { dims: dims.max(1) }
    }

    /// The number of components.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The vector of one text.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0f32; self.dims];
        let chars: Vec<char> = std::iter::once(' ')
            .chain(text.chars())
            .chain(std::iter::once(' '))
            .collect();
        let windows: Vec<&[char]> = if chars.len() < 3 {
            vec![&chars[..]]
        } else {
            chars.windows(3).collect()
        };
        let mut buf = [0u8; 4];
        for window in windows {
            let mut hash: u32 = 0x811c_9dc5;
            for c in window {
                for byte in c.encode_utf8(&mut buf).bytes() {
                    hash ^= u32::from(byte);
                    hash = hash.wrapping_mul(0x0100_0193);
                }
            }
            // u32 → usize is lossless on every supported target
            let slot = hash as usize % self.dims;
            vector[slot] += 1.0;
        }
        vector
    }
}

#[async_trait]
impl Embeddings for HashedNgramEmbeddings {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }
}

/// Cosine similarity as LangGraph's in-memory store computes it without
/// numpy: sums in order, norms as `sum ** 0.5`, 0 when a norm is 0.
pub fn cosine_similarity(query: &[f32], vector: &[f32]) -> f64 {
    let dot: f64 = query
        .iter()
        .zip(vector)
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|a| f64::from(*a) * f64::from(*a)).sum::<f64>().powf(0.5);
    let (n1, n2) = (norm(query), norm(vector));
    if n1 > 0.0 && n2 > 0.0 {
        dot / (n1 * n2)
    } else {
        0.0
    }
}

/// Splits an index path into LangGraph's tokens: field names split at `.`,
/// `[...]` (an index, `*` or negative) and `{a,b}` (several fields) kept whole.
///
/// ```
/// use checkpointer::store::tokenize_path;
/// assert_eq!(tokenize_path("a.b[0].{c,d}"), ["a", "b", "[0]", "{c,d}"]);
/// ```
pub fn tokenize_path(path: &str) -> Vec<String> {
    let chars: Vec<char> = path.chars().collect();
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '[' || c == '{' {
            let close = if c == '[' { ']' } else { '}' };
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
            let mut depth = 1usize;
            let mut token = String::from(c);
            i += 1;
            while i < chars.len() && depth > 0 {
                if chars[i] == c {
                    depth += 1;
                } else if chars[i] == close {
                    depth -= 1;
                }
                token.push(chars[i]);
                i += 1;
            }
            tokens.push(token);
            continue;
        } else if c == '.' {
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
        } else {
            current.push(c);
        }
        i += 1;
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// The texts LangGraph embeds for `path` of `value`, in its order: `$` (or
/// an empty path) is the whole value as JSON (sorted keys); a string,
/// number or boolean is its Python `str()`; a list or object reached is
/// its JSON; `null` and missing fields give nothing.
///
/// ```
/// use checkpointer::store::texts_at_path;
/// let doc = serde_json::json!({"a": [{"t": "x"}, {"t": 2}], "b": true});
/// assert_eq!(texts_at_path(&doc, "a[*].t"), ["x", "2"]);
/// assert_eq!(texts_at_path(&doc, "b"), ["True"]);
/// assert_eq!(texts_at_path(&doc, "$"), [r#"{"a": [{"t": "x"}, {"t": 2}], "b": true}"#]);
/// ```
pub fn texts_at_path(value: &Value, path: &str) -> Vec<String> {
    if path.is_empty() || path == "$" {
        return vec![py_json(value)];
    }
    texts_at_tokens(value, &tokenize_path(path))
}

pub(crate) fn texts_at_tokens(value: &Value, tokens: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    // depth-first in document order, without recursion
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((obj, pos)) = stack.pop() {
        let Some(token) = tokens.get(pos) else {
            match obj {
                Value::Null => {}
                Value::Array(_) | Value::Object(_) => out.push(py_json(obj)),
                scalar => out.push(py_str(scalar)),
            }
            continue;
        };
        let mut next: Vec<&Value> = Vec::new();
        if let Some(index) = token.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let Value::Array(items) = obj else { continue };
            if index == "*" {
                next.extend(items);
            } else if let Ok(i) = index.parse::<i64>() {
                let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                let i = if i < 0 { len.saturating_add(i) } else { i };
                if let Some(item) = usize::try_from(i).ok().and_then(|i| items.get(i)) {
                    next.push(item);
                }
            }
        } else if let Some(fields) = token.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            let Value::Object(_) = obj else { continue };
            for field in fields.split(',').map(str::trim) {
                let nested = tokenize_path(field);
                if nested.is_empty() {
                    continue;
                }
                let mut current = Some(obj);
                for t in &nested {
                    current = current.and_then(|c| c.as_object()).and_then(|m| m.get(t));
                }
                match current {
                    None | Some(Value::Null) => {}
                    Some(v @ (Value::Array(_) | Value::Object(_))) => out.push(py_json(v)),
                    Some(v) => out.push(py_str(v)),
                }
            }
            continue;
        } else if token == "*" {
            match obj {
                Value::Object(map) => next.extend(map.values()),
                Value::Array(items) => next.extend(items),
                _ => {}
            }
        } else if let Value::Object(map) = obj {
            next.extend(map.get(token));
        }
        stack.extend(next.into_iter().rev().map(|v| (v, pos + 1)));
    }
    out
}

/// Python's `str()` of a JSON scalar (`True`, `1.0`, `1e-05`).
pub(crate) fn py_str(value: &Value) -> String {
    match value {
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Null => "None".to_owned(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            // finite: JSON numbers are
            (_, _, Some(f)) => crate::serde::py_float_repr(f),
            _ => n.to_string(),
        },
        other => py_json(other),
    }
}

/// Python's `json.dumps(value, sort_keys=True, ensure_ascii=False)`, without
/// recursion.
pub(crate) fn py_json(value: &Value) -> String {
    enum Step<'a> {
        Value(&'a Value),
        Text(&'static str),
        Key(&'a str),
    }
    let mut out = String::new();
    let mut stack = vec![Step::Value(value)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(t) => out.push_str(t),
            Step::Key(k) => {
                push_json_str(&mut out, k);
                out.push_str(": ");
            }
            Step::Value(v) => match v {
                Value::Null => out.push_str("null"),
                Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                Value::Number(_) => out.push_str(&py_str(v)),
                Value::String(s) => push_json_str(&mut out, s),
                Value::Array(items) => {
                    out.push('[');
                    stack.push(Step::Text("]"));
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        if i > 0 {
                            stack.push(Step::Text(", "));
                        }
                    }
                }
                Value::Object(map) => {
                    out.push('{');
                    stack.push(Step::Text("}"));
                    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    for (i, (k, item)) in entries.into_iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        stack.push(Step::Key(k));
                        if i > 0 {
                            stack.push(Step::Text(", "));
                        }
                    }
                }
            },
        }
    }
    out
}

fn push_json_str(out: &mut String, s: &str) {
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
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}
