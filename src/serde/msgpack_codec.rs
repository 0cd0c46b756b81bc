//! msgpack as Python's serializer (ormsgpack) writes it, and a bounded decoder.
//!
//! Encoding is canonical: the smallest form for every length and integer,
//! unsigned forms for every non-negative integer, 64-bit floats. Python always
//! writes this form, so decoding its bytes and encoding the result gives the
//! same bytes. Extension payloads that were not written canonically are kept
//! as raw bytes, so they survive too.

use bytes::Bytes;
use rmp::encode::{self as write, ByteBuf};
use rmp::Marker;

use super::value::{Ext, ExtPayload, Value};
use crate::error::{Error, Result};

/// The deepest nesting of arrays, maps and extension payloads [`decode`]
/// accepts. Deeper input is refused with [`Error::Serde`].
pub const MAX_DEPTH: usize = 128;

/// Limits applied while decoding untrusted bytes.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Maximum nesting depth of arrays, maps and extension payloads; values
    /// above [`MAX_DEPTH`] are treated as [`MAX_DEPTH`], so decoding always
    /// fits a 1 MiB stack.
    pub max_depth: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits { max_depth: MAX_DEPTH }
    }
}

/// Encodes a value exactly as Python's serializer would.
///
/// ```
/// use checkpointer::serde::{msgpack, Value};
/// let v = Value::map([("a", Value::Int(1)), ("b", Value::Array(vec![Value::Bool(true), Value::Nil].into()))]);
/// assert_eq!(msgpack::encode(&v).unwrap(), [0x82, 0xa1, 0x61, 0x01, 0xa1, 0x62, 0x92, 0xc3, 0xc0]);
/// ```
///
/// # Errors
/// [`Error::Serde`] when a string, binary, array, map or extension is longer
/// than msgpack can frame (4 GiB), and when arrays, maps and extension
/// values nest deeper than [`MAX_DEPTH`]: [`decode`] would refuse the bytes,
/// so a value that could not be read back is never written.
pub fn encode(value: &Value) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    encode_into(value, &mut out)?;
    Ok(out)
}

/// Appends the encoding of `value` to `out`.
///
/// # Errors
/// As [`encode`].
pub fn encode_into(value: &Value, out: &mut Vec<u8>) -> Result<()> {
    let mut buf = ByteBuf::from_vec(std::mem::take(out));
    let written = encode_at(value, &mut buf, 0);
    *out = buf.into_vec();
    written
}

/// Enters one nesting level as the decoder counts them.
pub(crate) fn deeper(depth: usize) -> Result<usize> {
    if depth >= MAX_DEPTH {
        return Err(Error::serde(format!(
            "msgpack: value nests deeper than the limit of {MAX_DEPTH} and could not be read back"
        )));
    }
    Ok(depth + 1)
}

/// Whether an extension payload nests more than `max_depth` levels, as the
/// decoder counts them (it refuses such a payload even where it would keep
/// the bytes raw).
pub(crate) fn payload_too_deep(raw: &[u8], max_depth: usize) -> bool {
    let limits = DecodeLimits { max_depth };
    matches!(Decoder::new(raw, limits).value(0), Err(Fail::TooDeep(_)))
}

// Markers and lengths are written by `rmp` into a `ByteBuf`, whose error
// type is uninhabited: `let Ok(_) = ...` cannot fail. `rmp` picks the
// smallest form of every length and integer, and the unsigned forms for
// non-negative integers, as ormsgpack does. The one-byte headers of short
// strings, maps and arrays are pushed here (`fix_len`): `rmp`'s length
// writers are not inlined, and calling them for those cost a quarter more
// instructions per encode (docs/design.md).
fn encode_at(value: &Value, out: &mut ByteBuf, depth: usize) -> Result<()> {
    match value {
        Value::Nil => {
            let Ok(()) = write::write_nil(out);
        }
        Value::Bool(b) => {
            let Ok(()) = write::write_bool(out, *b);
        }
        Value::Int(i) => {
            let Ok(_) = write::write_sint(out, *i);
        }
        Value::UInt(u) => {
            let Ok(_) = write::write_uint(out, *u);
        }
        Value::F32(f) => {
            let Ok(()) = write::write_f32(out, *f);
        }
        Value::Float(f) => {
            let Ok(()) = write::write_f64(out, *f);
        }
        Value::Str(s) => {
            let n = len32(s.len(), "string")?;
            if !fix_len(out, FIXSTR, 32, n) {
                let Ok(_) = write::write_str_len(out, n);
            }
            out.as_mut_vec().extend_from_slice(s.as_bytes());
        }
        Value::Bin(b) => {
            let Ok(_) = write::write_bin_len(out, len32(b.len(), "binary")?);
            out.as_mut_vec().extend_from_slice(b);
        }
        Value::Array(items) => {
            let n = len32(items.len(), "array")?;
            if !fix_len(out, FIXARRAY, 16, n) {
                let Ok(_) = write::write_array_len(out, n);
            }
            let depth = deeper(depth)?;
            for item in items {
                encode_at(item, out, depth)?;
            }
        }
        Value::Map(entries) => {
            let n = len32(entries.len(), "map")?;
            if !fix_len(out, FIXMAP, 16, n) {
                let Ok(_) = write::write_map_len(out, n);
            }
            let depth = deeper(depth)?;
            for (k, v) in entries {
                encode_at(k, out, depth)?;
                encode_at(v, out, depth)?;
            }
        }
        Value::Ext(ext) => {
            let depth = deeper(depth)?;
            match &ext.payload {
                ExtPayload::Raw(raw) => {
                    // The decoder parses the payload of codes 0..=7 and refuses it
                    // when it nests too deep, even where it keeps the raw bytes.
                    if (0..=7).contains(&ext.code) && payload_too_deep(raw, MAX_DEPTH - depth) {
                        return Err(Error::serde(format!(
                            "msgpack: extension payload nests deeper than the limit of {MAX_DEPTH} and could not be read back"
                        )));
                    }
                    write_ext(ext.code, raw, out)?;
                }
                ExtPayload::Decoded(inner) => {
                    let mut payload = ByteBuf::with_capacity(64);
                    encode_at(inner, &mut payload, depth)?;
                    write_ext(ext.code, payload.as_slice(), out)?;
                }
            }
        }
    }
    Ok(())
}

const FIXSTR: u8 = Marker::FixStr(0).to_u8();
const FIXMAP: u8 = Marker::FixMap(0).to_u8();
const FIXARRAY: u8 = Marker::FixArray(0).to_u8();

/// Writes the one-byte header `fix | n` when `n` is below `limit`.
#[inline]
fn fix_len(out: &mut ByteBuf, fix: u8, limit: u32, n: u32) -> bool {
    if n >= limit {
        return false;
    }
    out.as_mut_vec().push(fix | n as u8);
    true
}

/// `n` as a msgpack length, refusing what msgpack cannot frame.
pub(crate) fn len32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::serde(format!("{what} of {n} elements is too long for msgpack")))
}

fn write_ext(code: i8, payload: &[u8], out: &mut ByteBuf) -> Result<()> {
    let Ok(_) = write::write_ext_meta(out, len32(payload.len(), "extension payload")?, code);
    out.as_mut_vec().extend_from_slice(payload);
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn round_trip(h: &str) -> Value {
        let bytes = hex(h);
        let v = decode(&bytes).unwrap();
        assert_eq!(encode(&v).unwrap(), bytes, "re-encoding {h}");
        v
    }

    #[test]
    fn scalars_match_python() {
        assert_eq!(round_trip("2a"), Value::Int(42));
        assert_eq!(round_trip("ff"), Value::Int(-1));
        assert_eq!(round_trip("ccc8"), Value::Int(200));
        assert_eq!(round_trip("d0df"), Value::Int(-33));
        assert_eq!(round_trip("d09c"), Value::Int(-100));
        assert_eq!(round_trip("ce00010000"), Value::Int(65536));
        assert_eq!(round_trip("d2ffff63c0"), Value::Int(-40000));
        assert_eq!(round_trip("cf0000000100000000"), Value::Int(1 << 32));
        assert_eq!(round_trip("cf8000000000000000"), Value::UInt(1 << 63));
        assert_eq!(round_trip("d38000000000000000"), Value::Int(i64::MIN));
        assert_eq!(round_trip("cb400c000000000000"), Value::Float(3.5));
        assert_eq!(round_trip("a568656c6c6f"), Value::from("hello"));
        assert_eq!(round_trip("a2c3a9"), Value::from("é"));
        round_trip(&format!("d928{}", "78".repeat(40)));
        round_trip(&format!(
            "dc0010{}",
            (0..16).map(|i| format!("{i:02x}")).collect::<String>()
        ));
        round_trip("82a16101a16292c3c0");
        round_trip("81920102a174");
        round_trip("81cb3ff8000000000000a161");
    }

    #[test]
    fn ext_payloads_decode_as_data() {
        let v = round_trip("d80093a86275696c74696e73a37365749101");
        let Value::Ext(ext) = v else { panic!() };
        assert_eq!(ext.code, 0);
        assert!(matches!(ext.payload, ExtPayload::Decoded(_)));
        let snap = round_trip("c70307920102");
        let Value::Ext(ext) = snap else { panic!() };
        assert_eq!(ext.code, 7);
    }

    #[test]
    fn non_canonical_ext_payload_kept_raw() {
        // ext 0 whose payload uses cc01 for the integer 1 (not Python's form)
        let bytes = hex("c7030092cc01");
        let v = decode(&bytes).unwrap();
        assert!(matches!(
            &v,
            Value::Ext(ext) if matches!(**ext, Ext {
                payload: ExtPayload::Raw(_),
                ..
            })
        ));
        assert_eq!(encode(&v).unwrap(), bytes);
        // unknown code kept raw
        let bytes = hex("d5630102");
        assert_eq!(encode(&decode(&bytes).unwrap()).unwrap(), bytes);
    }

    #[test]
    fn bounded_decoding() {
        for h in [
            "dbffffffff",
            "ddffffffff",
            "dfffffffff",
            "c9ffffffff00",
            "c6ffffffff",
            "92",
            "a5616263",
            "c1",
            "cb00",
        ] {
            assert!(matches!(decode(&hex(h)), Err(Error::Serde { .. })), "{h}");
        }
        let deep = [vec![0x91; MAX_DEPTH + 1], vec![0xc0]].concat();
        let err = decode(&deep).unwrap_err().to_string();
        assert!(err.contains("nesting"), "{err}");
        let ok = [vec![0x91; MAX_DEPTH], vec![0xc0]].concat();
        assert!(decode(&ok).is_ok());
        assert!(decode(&hex("c0c0")).is_err());
        assert!(decode(&hex("a2c328")).is_err());
    }

    /// What `encode` writes, `decode` reads: nesting is refused on writing
    /// exactly where reading would refuse it (arrays, maps, decoded and raw
    /// extension payloads).
    #[test]
    fn encoding_refuses_what_decoding_would() {
        fn nest(levels: usize, wrap: &dyn Fn(Value) -> Value) -> Value {
            (0..levels).fold(Value::Nil, |v, _| wrap(v))
        }
        let wraps: [&dyn Fn(Value) -> Value; 4] = [
            &|v| Value::Array(vec![v].into()),
            &|v| Value::Map(vec![(Value::Nil, v)].into()),
            &|v| Value::Ext(Box::new(Ext::delta_snapshot(v))),
            &|v| Value::Array(vec![Value::Ext(Box::new(Ext::delta_snapshot(v)))].into()),
        ];
        for wrap in wraps {
            for levels in [1, 64, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2, 1000] {
                let v = nest(levels, wrap);
                let written = encode(&v);
                let depth_of = |v: &Value| {
                    let mut d = 0;
                    let mut cur = v;
                    loop {
                        cur = match cur {
                            Value::Array(items) if !items.is_empty() => &items[0],
                            Value::Map(entries) if !entries.is_empty() => &entries[0].1,
                            Value::Ext(e) => match e.decoded() {
                                Some(inner) => inner,
                                None => break,
                            },
                            _ => break,
                        };
                        d += 1;
                    }
                    d
                };
                if depth_of(&v) <= MAX_DEPTH {
                    let bytes = written.unwrap_or_else(|e| panic!("{levels}: {e}"));
                    assert_eq!(decode(&bytes).unwrap(), v, "{levels}");
                } else {
                    let err = written.unwrap_err().to_string();
                    assert!(err.contains("could not be read back"), "{err}");
                }
            }
        }
        // A raw extension payload (code 0..=7) too deep to read is refused.
        let deep_payload = [vec![0x91; MAX_DEPTH], vec![0xc0]].concat();
        let raw = Value::Ext(Box::new(Ext::raw(7, Bytes::from(deep_payload.clone()))));
        assert!(decode(&encode(&Value::Ext(Box::new(Ext::raw(7, Bytes::from(vec![0x91, 0xc0]))))).unwrap()).is_ok());
        assert!(encode(&raw).is_err());
        let framed = [vec![0xc9, 0, 0, 0, 129, 7], deep_payload.clone()].concat();
        assert!(decode(&framed).unwrap_err().to_string().contains("nesting"));
        // Other codes are opaque bytes, read as they are.
        let opaque = Value::Ext(Box::new(Ext::raw(42, Bytes::from(deep_payload))));
        assert_eq!(decode(&encode(&opaque).unwrap()).unwrap(), opaque);
    }
}
