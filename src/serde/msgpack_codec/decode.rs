//! Bounded decoding into `Value`.

use bytes::Bytes;

use super::{DecodeLimits, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::serde::value::{Ext, ExtPayload, Value};

/// Decodes one msgpack value that must span all of `bytes`.
///
/// Bounded: a declared length is checked against the remaining input before
/// anything is allocated, so memory use stays proportional to the input; nesting
/// deeper than [`MAX_DEPTH`] is refused.
///
/// # Errors
/// [`Error::Serde`] for truncated or malformed input, trailing bytes, invalid
/// UTF-8 in a string, the reserved byte `0xc1`, or nesting deeper than the
/// limit.
pub fn decode(bytes: &[u8]) -> Result<Value> {
    decode_with(bytes, DecodeLimits::default())
}

/// [`decode`] with explicit limits.
///
/// # Errors
/// As [`decode`].
pub fn decode_with(bytes: &[u8], limits: DecodeLimits) -> Result<Value> {
    let mut d = Decoder::new(bytes, limits);
    let value = d.value(0).map_err(Fail::into_error)?;
    if d.pos != bytes.len() {
        return Err(Error::serde(format!(
            "msgpack: {} trailing bytes after the value at offset {}",
            bytes.len() - d.pos,
            d.pos
        )));
    }
    Ok(value)
}

/// Whether an extension payload nests more than `max_depth` levels, as the
/// decoder counts them (it refuses such a payload even where it would keep
/// the bytes raw).
pub(crate) fn payload_too_deep(raw: &[u8], max_depth: usize) -> bool {
    let limits = DecodeLimits { max_depth };
    matches!(Decoder::new(raw, limits).value(0), Err(Fail::TooDeep(_)))
}
/// The error for a string that is not UTF-8 (out of line, like `truncated`).
#[cold]
#[inline(never)]
fn invalid_utf8(at: usize, e: &std::str::Utf8Error) -> Fail {
    Fail::Malformed(format!("invalid UTF-8 in string at offset {at}: {e}"))
}

enum Fail {
    /// Nesting over the limit: never hidden by the raw-ext fallback.
    TooDeep(usize),
    Malformed(String),
}

impl Fail {
    fn into_error(self) -> Error {
        match self {
            Fail::TooDeep(limit) => Error::serde(format!("msgpack: nesting deeper than the limit of {limit}")),
            Fail::Malformed(reason) => Error::serde(format!("msgpack: {reason}")),
        }
    }
}

type DResult<T> = std::result::Result<T, Fail>;

struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    max_depth: usize,
    /// Whether everything read so far used the canonical (Python) form.
    canonical: bool,
}

impl<'a> Decoder<'a> {
    fn new(buf: &'a [u8], limits: DecodeLimits) -> Self {
        Decoder {
            buf,
            pos: 0,
            max_depth: limits.max_depth.min(MAX_DEPTH),
            canonical: true,
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        match self.buf.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.truncated(n)),
        }
    }

    /// The error for `n` bytes declared where fewer remain (kept out of line:
    /// the read paths stay small enough to inline).
    #[cold]
    #[inline(never)]
    fn truncated(&self, n: usize) -> Fail {
        Fail::Malformed(format!(
            "truncated: {n} bytes declared at offset {} but {} remain",
            self.pos,
            self.buf.len() - self.pos
        ))
    }

    #[inline]
    fn u8(&mut self) -> DResult<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.truncated(1)),
        }
    }

    fn be<const N: usize>(&mut self) -> DResult<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn len8(&mut self) -> DResult<usize> {
        Ok(usize::from(self.u8()?))
    }

    fn len16(&mut self) -> DResult<usize> {
        Ok(usize::from(u16::from_be_bytes(self.be()?)))
    }

    fn len32(&mut self) -> DResult<usize> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    fn note(&mut self, canonical: bool) {
        self.canonical &= canonical;
    }

    /// Reads one value. Kept small, with containers and scalars in separate
    /// non-inlined functions, so that each nesting level costs little stack
    /// even in unoptimised builds.
    fn value(&mut self, depth: usize) -> DResult<Value> {
        let marker = self.u8()?;
        match marker {
            // The most common markers first, without a further call.
            0x00..=0x7f => Ok(Value::Int(i64::from(marker))),
            0xa0..=0xbf => self.str(usize::from(marker & 0x1f)),
            0x80..=0x8f => self.map(usize::from(marker & 0x0f), depth),
            0x90..=0x9f => self.array(usize::from(marker & 0x0f), depth),
            0xc7..=0xc9 | 0xd4..=0xd8 | 0xdc..=0xdf => self.container(marker, depth),
            _ => self.scalar(marker),
        }
    }

    #[inline(never)]
    fn container(&mut self, marker: u8, depth: usize) -> DResult<Value> {
        let (n, canonical) = match marker {
            0xc7 => {
                let n = self.len8()?;
                (n, !matches!(n, 1 | 2 | 4 | 8 | 16))
            }
            0xc8 | 0xdc | 0xde => {
                let n = self.len16()?;
                (n, n > if marker == 0xc8 { 0xff } else { 15 })
            }
            0xc9 | 0xdd | 0xdf => {
                let n = self.len32()?;
                (n, n > 0xffff)
            }
            0xd4 => (1, true),
            0xd5 => (2, true),
            0xd6 => (4, true),
            0xd7 => (8, true),
            _ => (16, true),
        };
        self.note(canonical);
        match marker {
            0xdc | 0xdd => self.array(n, depth),
            0xde | 0xdf => self.map(n, depth),
            _ => self.ext(n, depth),
        }
    }

    #[inline(never)]
    fn scalar(&mut self, marker: u8) -> DResult<Value> {
        let at = self.pos - 1;
        Ok(match marker {
            0x00..=0x7f => Value::Int(i64::from(marker)),
            0xa0..=0xbf => self.str(usize::from(marker & 0x1f))?,
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => {
                let n = self.len8()?;
                self.bin(n)?
            }
            0xc5 => {
                let n = self.len16()?;
                self.note(n > 0xff);
                self.bin(n)?
            }
            0xc6 => {
                let n = self.len32()?;
                self.note(n > 0xffff);
                self.bin(n)?
            }
            0xca => Value::F32(f32::from_be_bytes(self.be()?)),
            0xcb => Value::Float(f64::from_be_bytes(self.be()?)),
            0xcc => {
                let u = u64::from(self.u8()?);
                self.note(u > 0x7f);
                Value::Int(u as i64)
            }
            0xcd => {
                let u = u64::from(u16::from_be_bytes(self.be()?));
                self.note(u > 0xff);
                Value::Int(u as i64)
            }
            0xce => {
                let u = u64::from(u32::from_be_bytes(self.be()?));
                self.note(u > 0xffff);
                Value::Int(u as i64)
            }
            0xcf => {
                let u = u64::from_be_bytes(self.be()?);
                self.note(u > 0xffff_ffff);
                Value::from(u)
            }
            0xd0 => {
                let i = i64::from(i8::from_be_bytes(self.be()?));
                self.note(i < -32);
                Value::Int(i)
            }
            0xd1 => {
                let i = i64::from(i16::from_be_bytes(self.be()?));
                self.note(i < i64::from(i8::MIN));
                Value::Int(i)
            }
            0xd2 => {
                let i = i64::from(i32::from_be_bytes(self.be()?));
                self.note(i < i64::from(i16::MIN));
                Value::Int(i)
            }
            0xd3 => {
                let i = i64::from_be_bytes(self.be()?);
                self.note(i < i64::from(i32::MIN));
                Value::Int(i)
            }
            0xd9 => {
                let n = self.len8()?;
                self.note(n > 31);
                self.str(n)?
            }
            0xda => {
                let n = self.len16()?;
                self.note(n > 0xff);
                self.str(n)?
            }
            0xdb => {
                let n = self.len32()?;
                self.note(n > 0xffff);
                self.str(n)?
            }
            0xe0..=0xff => Value::Int(i64::from(marker as i8)),
            // 0xc1 is reserved; container markers never reach here.
            _ => return Err(Fail::Malformed(format!("reserved byte {marker:#04x} at offset {at}"))),
        })
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn enter(&self, depth: usize) -> DResult<usize> {
        if depth >= self.max_depth {
            return Err(Fail::TooDeep(self.max_depth));
        }
        Ok(depth + 1)
    }

    #[inline]
    fn str(&mut self, n: usize) -> DResult<Value> {
        let at = self.pos;
        let bytes = self.take(n)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(Value::Str(s.into())),
            Err(e) => Err(invalid_utf8(at, &e)),
        }
    }

    #[inline(never)]
    fn bin(&mut self, n: usize) -> DResult<Value> {
        Ok(Value::Bin(Bytes::copy_from_slice(self.take(n)?)))
    }

    #[inline(never)]
    fn array(&mut self, n: usize, depth: usize) -> DResult<Value> {
        let depth = self.enter(depth)?;
        // Every element takes at least one byte: refuse counts the input cannot hold
        // before reserving memory for them.
        if n > self.remaining() {
            return Err(Fail::Malformed(format!(
                "truncated: array of {n} elements at offset {} but {} bytes remain",
                self.pos,
                self.remaining()
            )));
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth)?);
        }
        Ok(Value::Array(items.into()))
    }

    #[inline(never)]
    fn map(&mut self, n: usize, depth: usize) -> DResult<Value> {
        let depth = self.enter(depth)?;
        if n.saturating_mul(2) > self.remaining() {
            return Err(Fail::Malformed(format!(
                "truncated: map of {n} entries at offset {} but {} bytes remain",
                self.pos,
                self.remaining()
            )));
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth)?;
            let v = self.value(depth)?;
            entries.push((k, v));
        }
        Ok(Value::Map(entries.into()))
    }

    #[inline(never)]
    fn ext(&mut self, n: usize, depth: usize) -> DResult<Value> {
        let depth = self.enter(depth)?;
        let code = self.u8()? as i8;
        let data = self.take(n)?;
        if !(0..=7).contains(&code) {
            return Ok(Value::Ext(Box::new(Ext {
                code,
                payload: ExtPayload::Raw(Bytes::copy_from_slice(data)),
            })));
        }
        let mut inner = Decoder {
            buf: data,
            pos: 0,
            max_depth: self.max_depth,
            canonical: true,
        };
        let payload = match inner.value(depth) {
            Ok(v) if inner.pos == data.len() && inner.canonical => ExtPayload::Decoded(Box::new(v)),
            Err(Fail::TooDeep(limit)) => return Err(Fail::TooDeep(limit)),
            _ => ExtPayload::Raw(Bytes::copy_from_slice(data)),
        };
        Ok(Value::Ext(Box::new(Ext { code, payload })))
    }
}
