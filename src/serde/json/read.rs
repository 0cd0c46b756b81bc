//! JSON text read as Python's `json.loads` reads it.

use indexmap::IndexMap;

use super::depth_error;
use crate::error::{Error, Result};
use crate::serde::msgpack::MAX_DEPTH;
use crate::serde::Value;

/// Parses `text`: one JSON value, with nothing but white space around it.
pub(super) fn parse(text: &str) -> Result<Value> {
    let mut parser = Parser { text, pos: 0 };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != text.len() {
        return Err(parser.error("extra data after the JSON value"));
    }
    Ok(value)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> Error {
        Error::serde(format!("invalid JSON at byte {}: {what}", self.pos))
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, literal: &str) -> bool {
        if self.text[self.pos..].starts_with(literal) {
            self.pos += literal.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value> {
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::from),
            Some(b'-' | b'0'..=b'9') => {
                if self.eat("-Infinity") {
                    Ok(Value::Float(f64::NEG_INFINITY))
                } else {
                    self.number()
                }
            }
            _ if self.eat("null") => Ok(Value::Nil),
            _ if self.eat("true") => Ok(Value::Bool(true)),
            _ if self.eat("false") => Ok(Value::Bool(false)),
            _ if self.eat("NaN") => Ok(Value::Float(f64::NAN)),
            _ if self.eat("Infinity") => Ok(Value::Float(f64::INFINITY)),
            _ => Err(self.error("expecting a value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value> {
        if depth >= MAX_DEPTH {
            return Err(depth_error());
        }
        self.pos += 1;
        let mut entries: IndexMap<String, Value> = IndexMap::new();
        self.skip_ws();
        if self.eat("}") {
            return Ok(Value::Map(Vec::new().into()));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.error("expecting a property name in double quotes"));
            }
            let key = self.string()?;
            self.skip_ws();
            if !self.eat(":") {
                return Err(self.error("expecting ':'"));
            }
            self.skip_ws();
            let value = self.value(depth + 1)?;
            entries.insert(key, value);
            if self.list_ends("}")? {
                break;
            }
        }
        Ok(Value::Map(
            entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect(),
        ))
    }

    /// After an item of an object or array: whether `close` ends it, or
    /// else the `,` before the next item (white space skipped either side).
    fn list_ends(&mut self, close: &'static str) -> Result<bool> {
        self.skip_ws();
        if self.eat(close) {
            return Ok(true);
        }
        if !self.eat(",") {
            return Err(self.error(&format!("expecting ',' or '{close}'")));
        }
        self.skip_ws();
        Ok(false)
    }

    fn array(&mut self, depth: usize) -> Result<Value> {
        if depth >= MAX_DEPTH {
            return Err(depth_error());
        }
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.eat("]") {
            return Ok(Value::Array(items.into()));
        }
        loop {
            items.push(self.value(depth + 1)?);
            if self.list_ends("]")? {
                break;
            }
        }
        Ok(Value::Array(items.into()))
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`, Python's number grammar:
    /// a fraction or exponent that is not complete is left unread (and then
    /// fails as extra data), as in Python.
    fn number(&mut self) -> Result<Value> {
        let start = self.pos;
        self.eat("-");
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("expecting a value")),
        }
        let mut is_float = false;
        let int_end = self.pos;
        if self.eat(".") {
            if self.digits() == 0 {
                self.pos = int_end;
            } else {
                is_float = true;
            }
        }
        let frac_end = self.pos;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                self.pos = frac_end;
            } else {
                is_float = true;
            }
        }
        let text = &self.text[start..self.pos];
        if !is_float {
            if let Ok(i) = text.parse::<i64>() {
                return Ok(Value::Int(i));
            }
            if let Ok(u) = text.parse::<u64>() {
                return Ok(Value::UInt(u));
            }
        }
        text.parse::<f64>()
            .map(Value::Float)
            .map_err(|_| self.error("malformed number"))
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("invalid \\uXXXX escape"))?;
        self.pos += 4;
        u32::from_str_radix(digits, 16).map_err(|_| self.error("invalid \\uXXXX escape"))
    }

    fn string(&mut self) -> Result<String> {
        self.pos += 1;
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            match b {
                b'"' => {
                    out.push_str(&self.text[run..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[run..self.pos]);
                    self.pos += 1;
                    self.escape(&mut out)?;
                    run = self.pos;
                }
                b if b < 0x20 => return Err(self.error("invalid control character in string")),
                _ => self.pos += 1,
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<()> {
        let Some(b) = self.peek() else {
            return Err(self.error("unterminated string"));
        };
        self.pos += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{08}',
            b'f' => '\u{0c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let first = self.hex4()?;
                let code = if (0xd800..0xdc00).contains(&first) && self.text[self.pos..].starts_with("\\u") {
                    let save = self.pos;
                    self.pos += 2;
                    let second = self.hex4()?;
                    if (0xdc00..0xe000).contains(&second) {
                        0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
                    } else {
                        self.pos = save;
                        first
                    }
                } else {
                    first
                };
                char::from_u32(code).unwrap_or('\u{fffd}')
            }
            _ => {
                self.pos -= 1;
                return Err(self.error("invalid \\escape"));
            }
        };
        out.push(c);
        Ok(())
    }
}
